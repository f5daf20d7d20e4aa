"""Configuration of a KAN-GPT (one frozen dataclass, docs/algorithms.md §11 and "Conventions")."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

from kansym.config import DEVICE, SEED, PlainConfig
from kansym.errors import ConfigError
from kansym.gpt.matching import KAN_KINDS, match_ffn_hidden, match_kan_hidden
from kansym.nn.bases import BASES
from kansym.nn.config import GRID_SIZE

__all__ = ["FC_INITS", "FFN_KINDS", "GPTTrainConfig", "KANGPTConfig", "match_kan_hidden", "parse_ffn"]

FFN_KINDS = ("mlp", "kan", "kan-residual", "cheby", "swiglu", "grkan")
FC_INITS = ("default", "gpt2", "variance")  # initialisations of an FFN's input projection (KANGPTConfig.fc_init)


def parse_ffn(ffn: str | Sequence[str], n_layer: int) -> tuple[str, ...]:
    """Normalise an FFN choice to one kind per layer.

    Parameters
    ----------
    ffn : str or sequence of str
        One of :data:`FFN_KINDS` (``"mlp"``, ``"kan"``, ``"kan-residual"``, ``"cheby"``,
        ``"swiglu"``, ``"grkan"``) for every layer, a comma-separated list (``"mlp,kan,kan,mlp"``) or a
        sequence with one kind per layer.
    n_layer : int

    Returns
    -------
    tuple of str, length ``n_layer``

    Raises
    ------
    ConfigError
        For an unknown kind or a list of the wrong length.
    """
    if isinstance(ffn, str):
        kinds = [k.strip() for k in ffn.split(",")] if "," in ffn else [ffn.strip()] * n_layer
    else:
        kinds = [str(k).strip() for k in ffn]
    bad = [k for k in kinds if k not in FFN_KINDS]
    if bad:
        raise ConfigError(f"unknown FFN kind {bad[0]!r}; use {', '.join(FFN_KINDS)} or a comma-separated list of them")
    if len(kinds) != n_layer:
        raise ConfigError(f"the FFN list has {len(kinds)} entries but the model has {n_layer} layers; give one per layer")
    return tuple(kinds)


@dataclass(frozen=True)
class KANGPTConfig(PlainConfig):
    """Architecture of a :class:`kansym.gpt.model.KANGPT`.

    Parameters
    ----------
    vocab_size, block_size : int
        Tokens in the vocabulary; longest context ``T``.
    n_layer, n_head, n_embd : int
        Decoder blocks, attention heads, model width ``C`` (divisible by ``n_head``).
    dropout : float
        Dropout on embeddings, attention weights and block outputs.
    bias : bool
        Biases in linear layers and LayerNorms (nanoGPT's switch).
    ffn : str or sequence of str
        Feed-forward kind per layer: ``mlp``, ``kan`` (two KAN layers ``C -> h -> C``),
        ``kan-residual`` (the KAN FFN plus a linear shortcut ``W x``), ``cheby`` (the KAN FFN
        on the Chebyshev basis whatever ``kan_basis`` says, ChebyKAN's ``T_0..T_d`` of
        ``tanh x`` with ``d = kan_degree``), ``swiglu`` (Shazeer
        2020, :class:`kansym.gpt.grkan.SwiGLUFFN`), ``grkan`` (KAT's group-rational KAN,
        :class:`kansym.gpt.grkan.GRKANFFN`), or a list (hybrid); stored as a tuple of
        length ``n_layer``.
    mlp_ratio : int
        MLP hidden width is ``mlp_ratio * n_embd``.
    fc_init : {"default", "gpt2", "variance"}
        Initial weights of each FFN's input projection (MLP and SwiGLU ``c_fc``/``c_gate``,
        GR-KAN ``c_fc``, the SiLU weights ``w_b`` of a KAN FFN's first layer;
        :func:`kansym.gpt.ffn.input_projection_stds`): ``gpt2`` draws them from
        ``N(0, 0.02^2)``, ``variance`` from ``N(0, 1 / (C E[f(x)^2]))`` with ``f`` what the
        projection reads (identity, GR-KAN's rational, SiLU) and ``x ~ N(0, 1)`` the
        LayerNorm'd input, so the hidden pre-activations start with unit variance (KAT,
        Yang & Wang 2024, arXiv:2409.10594); ``default`` keeps each kind's own: ``gpt2``
        for MLP and SwiGLU, ``variance`` for GR-KAN, the KAN layer's ``U(-1, 1) / sqrt(C)``
        for KAN FFNs. Output projections keep GPT-2's scaled residual init (KAN FFNs: their
        layer's own) in every case.
    kan_basis : {"bspline", "chebyshev", "fourier", "rbf", "poly"}
    kan_grid_size, kan_degree : int
        ``G`` and spline order / polynomial degree of the KAN bases.
    kan_grid_range : tuple of float
        Input range the bases are laid out on (LayerNorm outputs are about N(0, 1)).
    kan_hidden : int, sequence of int or None
        Hidden width of every non-MLP FFN (KAN, SwiGLU, GR-KAN), per layer if a sequence;
        None picks, per layer, the width whose parameter count matches the MLP's
        (:func:`kansym.gpt.matching.match_ffn_hidden`), as does an entry 0. Stored as a
        tuple of length ``n_layer`` (0 for MLP layers); pruning shrinks it.
    kan_rank : int or None
        Factorise every KAN FFN's coefficient tensors through rank ``r``
        (:class:`kansym.gpt.ffn.LowRankKANLayer`); None: full tensors. Between 1 and
        ``min(h, n_embd)`` for every KAN layer's hidden width ``h`` (the smaller full rank
        of its two layers); matched hidden widths account for it.
    grkan_groups : int
        Coefficient groups of each GR-KAN rational (KAT: 8).
    grkan_degrees : (int, int)
        Numerator and denominator degrees ``(m, n)`` of the GR-KAN rationals (KAT: (5, 4)).
    seed : int
        Seed of the initialisation (private generator).
    head_order : sequence of sequences of int or None
        Per layer, which original attention head each stored head is (a permutation of
        ``0..n_head-1``), set by :func:`kansym.gpt.heads.reorder_heads`; None: the
        original order. The model's function does not depend on it.

    Raises
    ------
    ConfigError
        For an impossible combination (``n_embd`` not divisible by ``n_head``, ...).
    """

    vocab_size: int = 65
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = False
    ffn: Any = "mlp"
    mlp_ratio: int = 4
    fc_init: str = "default"
    kan_basis: str = "bspline"
    kan_grid_size: int = GRID_SIZE
    kan_degree: int = 3
    kan_grid_range: tuple[float, float] = (-2.0, 2.0)
    kan_hidden: Any = None
    kan_rank: int | None = None
    grkan_groups: int = 8
    grkan_degrees: tuple[int, int] = (5, 4)
    seed: int = SEED
    head_order: Any = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "mlp_ratio", "kan_grid_size"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.n_embd % self.n_head:
            raise ConfigError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must lie in [0, 1), got {self.dropout}")
        if self.fc_init not in FC_INITS:
            raise ConfigError(f"unknown fc_init {self.fc_init!r}; use one of {', '.join(FC_INITS)}")
        if self.kan_basis not in BASES:
            raise ConfigError(f"unknown KAN basis {self.kan_basis!r}; use one of {', '.join(BASES)}")
        if self.kan_degree < 0:
            raise ConfigError(f"kan_degree must be >= 0, got {self.kan_degree}")
        grid_range = tuple(float(v) for v in self.kan_grid_range)
        if len(grid_range) != 2 or not grid_range[0] < grid_range[1]:
            raise ConfigError(f"kan_grid_range must be two increasing numbers, got {self.kan_grid_range}")
        object.__setattr__(self, "kan_grid_range", grid_range)
        if self.kan_rank is not None:
            if isinstance(self.kan_rank, bool) or int(self.kan_rank) != self.kan_rank or self.kan_rank < 1:
                raise ConfigError(f"kan_rank must be a positive integer (or None for full KAN layers), got {self.kan_rank}")
            object.__setattr__(self, "kan_rank", int(self.kan_rank))
        object.__setattr__(self, "grkan_degrees", tuple(int(d) for d in self.grkan_degrees))
        if int(self.grkan_groups) < 1 or self.grkan_degrees != (5, 4):
            raise ConfigError(f"grkan_groups must be >= 1 and grkan_degrees (5, 4) (the fitted initial values), got "
                              f"{self.grkan_groups} and {self.grkan_degrees}")
        kinds = parse_ffn(self.ffn, self.n_layer)
        object.__setattr__(self, "ffn", kinds)
        hidden_given = self.kan_hidden
        object.__setattr__(self, "kan_hidden", self._resolve_hidden(kinds))
        if self.kan_rank is not None and self.kan_rank > self.n_embd:
            raise ConfigError(f"kan_rank {self.kan_rank} exceeds n_embd {self.n_embd}, the largest full rank of a KAN FFN; use 1..{self.n_embd}")
        if self.kan_rank is not None:
            given = [hidden_given] * self.n_layer if hidden_given is None or isinstance(hidden_given, int) else list(hidden_given)
            for kind, h, g in zip(kinds, self.kan_hidden, given):
                if kind in KAN_KINDS and self.kan_rank > h:
                    if not g:
                        raise ConfigError(
                            f"kan_rank {self.kan_rank} is above the hidden width {h} that matches the MLP's parameters at "
                            f"this rank (a higher rank leaves room for fewer hidden units); use a smaller rank or give the "
                            f"hidden width (--kan-hidden)"
                        )
                    raise ConfigError(
                        f"kan_rank {self.kan_rank} exceeds the full rank {h} of a KAN FFN with hidden width {h}; "
                        f"use a rank of at most {h}, or a wider --kan-hidden"
                    )
        if self.head_order is not None:
            order = tuple(tuple(int(h) for h in layer) for layer in self.head_order)
            if len(order) != self.n_layer or any(sorted(o) != list(range(self.n_head)) for o in order):
                raise ConfigError(f"head_order must hold one permutation of 0..{self.n_head - 1} per layer ({self.n_layer}), got {self.head_order}")
            object.__setattr__(self, "head_order", order)

    def _resolve_hidden(self, kinds: tuple[str, ...]) -> tuple[int, ...]:
        hidden = self.kan_hidden
        if hidden is None:
            hidden = [self.matched_hidden(k) for k in kinds]
        elif isinstance(hidden, int):
            hidden = [hidden] * self.n_layer
        hidden = [int(h) for h in hidden]
        if len(hidden) != self.n_layer:
            raise ConfigError(f"kan_hidden has {len(hidden)} entries but the model has {self.n_layer} layers")
        out = []
        for kind, h in zip(kinds, hidden):
            if kind == "mlp":
                out.append(0)
            elif h < 0:
                raise ConfigError(f"an FFN hidden width must be positive (0 = match the MLP), got {h}")
            elif h == 0:
                out.append(self.matched_hidden(kind))
            else:
                out.append(h)
        return tuple(out)

    @property
    def mlp_hidden(self) -> int:
        """Hidden width of the MLP FFN."""
        return self.mlp_ratio * self.n_embd

    def basis_of(self, kind: str) -> str:
        """Basis of the KAN layers of an FFN of ``kind``: Chebyshev for ``cheby``, else ``kan_basis``."""
        return "chebyshev" if kind == "cheby" else self.kan_basis

    def matched_hidden(self, kind: str = "kan") -> int:
        """Hidden width of an FFN of ``kind`` matching this config's MLP FFN in parameters (0 for ``mlp``)."""
        if kind == "mlp":
            return 0
        return match_ffn_hidden(
            kind, self.n_embd, self.mlp_hidden, bias=self.bias, groups=self.grkan_groups, degrees=self.grkan_degrees,
            basis=self.basis_of(kind), grid_size=self.kan_grid_size, degree=self.kan_degree, rank=self.kan_rank,
        )

_RESUMABLE = ("max_iters", "eval_interval", "eval_iters", "device", "compile", "amp", "lr_decay_iters")


@dataclass(frozen=True)
class GPTTrainConfig(PlainConfig):
    """How to train a KAN-GPT (defaults: nanoGPT's ``shakespeare_char`` recipe).

    Parameters
    ----------
    max_iters : int
        Optimisation steps.
    batch_size : int
        Windows per step and process.
    lr, min_lr : float
        Peak and final learning rate (``min_lr`` None: ``lr / 10``).
    warmup_iters : int
        Linear warm-up steps, then cosine decay to ``min_lr`` at ``lr_decay_iters``
        (None: ``max_iters``) (Loshchilov & Hutter 2017, arXiv:1608.03983).
    weight_decay, beta1, beta2 : float
        AdamW (Loshchilov & Hutter 2019, arXiv:1711.05101); decay applies to tensors of
        two or more dimensions (matmul weights, embeddings, KAN coefficients and scales).
    grad_clip : float
        Clip the global gradient norm (0 disables).
    eval_interval, eval_iters : int
        Evaluate every ``eval_interval`` steps (and at the end) on ``eval_iters`` batches of
        each split; the eval batches are the same at every evaluation.
    val_fraction : float
        Tail of the text held out.
    seed : int
        Seed of the data order, dropout and eval batches.
    device : str
        ``cpu``, ``cuda``, ``cuda:N``.
    dtype : {"float32", "float64"}
        Parameter dtype (float64 for exact CPU tests).
    amp : bool
        bf16 autocast on CUDA (ignored on CPU).
    compile : bool
        ``torch.compile`` the model for training (the plain module is saved).
    lamb, mu1, mu2 : float
        Weight-based L1 + entropy sparsification of KAN FFN edges:
        ``loss + lamb * sum_l (mu1 |Phi_l|_1 + mu2 S(Phi_l))`` (KAN paper eq. 2.20).
    ortho_lambda : float
        Weight of the attention-head orthogonality penalty
        ``ortho_lambda * mean_l mean_{i<j} overlap(W_O^(i), W_O^(j))``
        (:func:`kansym.gpt.heads.ortho_penalty`); 0 disables it.
    ortho_kind : {"frobenius", "principal"}
        The overlap penalised: the seed's Frobenius score (basis dependent) or the
        mean cos² of the principal angles between the heads' row spaces.
    wo_decay : float
        Weight of a plain L2 penalty ``wo_decay * mean_l ||W_O^(l)||_F^2`` on the
        attention output projections (a control for the orthogonality penalty).
    """

    max_iters: int = 2000
    batch_size: int = 12
    lr: float = 1e-3
    min_lr: float | None = None
    warmup_iters: int = 100
    lr_decay_iters: int | None = None
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0
    eval_interval: int = 250
    eval_iters: int = 20
    val_fraction: float = 0.1
    seed: int = SEED
    device: str = DEVICE
    dtype: str = "float32"
    amp: bool = True
    compile: bool = False
    lamb: float = 0.0
    mu1: float = 1.0
    mu2: float = 1.0
    ortho_lambda: float = 0.0
    ortho_kind: str = "principal"
    wo_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.ortho_kind not in ("frobenius", "principal"):
            raise ConfigError(f"ortho_kind must be 'frobenius' or 'principal', got {self.ortho_kind!r}")
        if self.ortho_lambda < 0 or self.wo_decay < 0:
            raise ConfigError(f"ortho_lambda and wo_decay must be >= 0, got {self.ortho_lambda} and {self.wo_decay}")
        for name in ("max_iters", "batch_size", "eval_interval", "eval_iters"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.lr <= 0 or (self.min_lr is not None and self.min_lr < 0):
            raise ConfigError(f"learning rates must be positive, got lr={self.lr}, min_lr={self.min_lr}")
        if self.warmup_iters < 0 or self.grad_clip < 0 or self.lamb < 0 or self.weight_decay < 0:
            raise ConfigError("warmup_iters, grad_clip, lamb and weight_decay must be >= 0")
        if self.dtype not in ("float32", "float64"):
            raise ConfigError(f"dtype must be float32 or float64, got {self.dtype!r}")
        if not 0.0 < self.val_fraction < 1.0:
            raise ConfigError(f"val_fraction must lie in (0, 1), got {self.val_fraction}")

    @property
    def final_lr(self) -> float:
        """``min_lr``, defaulting to ``lr / 10``."""
        return self.lr / 10 if self.min_lr is None else self.min_lr

    @property
    def decay_iters(self) -> int:
        """End of the cosine decay."""
        return self.max_iters if self.lr_decay_iters is None else self.lr_decay_iters


    def resume_with(self, new: "GPTTrainConfig") -> "GPTTrainConfig":
        """This (saved) config updated by the fields a resumed run may change.

        Raises
        ------
        ConfigError
            If ``new`` changes anything else (learning rate, batch size, seed, ...).
        """
        for f in dataclasses.fields(self):
            if f.name not in _RESUMABLE and getattr(new, f.name) != getattr(self, f.name):
                raise ConfigError(
                    f"cannot resume with {f.name}={getattr(new, f.name)!r}; the run was started with "
                    f"{getattr(self, f.name)!r} (only {', '.join(_RESUMABLE)} may change)"
                )
        return dataclasses.replace(self, **{n: getattr(new, n) for n in _RESUMABLE})

