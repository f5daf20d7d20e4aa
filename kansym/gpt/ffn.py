"""Feed-forward blocks of a KAN-GPT: MLP, KAN, KAN with a linear shortcut (SwiGLU and GR-KAN: :mod:`kansym.gpt.grkan`).

All map ``(B, T, C) -> (B, T, C)``. The KAN FFN replaces GPT-2's
``Linear(C, 4C) -> GELU -> Linear(4C, C)`` by two KAN layers ``C -> h -> C``
(Liu et al. 2024, "KAN: Kolmogorov–Arnold Networks", arXiv:2404.19756, eq. 2.10), on
any basis of :mod:`kansym.nn.bases`.

Sparsification here is *weight-based* (docs/algorithms.md §11): the magnitude of edge ``(i, j)``
is ``|w_b,ji| + |w_s,ji| mean_k |c_jik|`` instead of the sampled ``mean_s |phi_ji(x_s)|``
of the paper's eq. 2.17, because a ``(B T, out, in)`` activation tensor per layer is
too large for a GPT. Unlike :func:`kansym.train.regularization.edge_weight_l1` it
includes the SiLU residual weight ``w_b``: an edge is only negligible when both parts
are, which is what node pruning needs.

Factorised KAN FFN (``rank`` r, :class:`LowRankKANLayer`): the coefficient tensor
``c (out, in, K)`` of each KAN layer, unfolded along its output mode into an
``out x (in K)`` matrix (Kolda & Bader 2009, "Tensor Decompositions and Applications",
SIAM Review 51(3), §2.4), is constrained to rank ``r``: ``c[j, i, k] = sum_r U[j, r]
V[r, i, k]``. The layer then computes its basis features ``B(x) (N, in K)``, projects
them to ``r`` numbers and maps those to the outputs, ``B(x) V^T U^T``, as LoRA
(Hu et al. 2021, arXiv:2106.09685) factorises a transformer weight. Parameters and
matmul work per token drop from ``out in K`` to ``r (out + in K)``; ``w_b`` stays dense.
See docs/algorithms.md ("Factorised KAN FFN").
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from kansym.errors import ConfigError
from kansym.gpt.config import KANGPTConfig
from kansym.gpt.grkan import RATIONAL_INITS, GRKANFFN, SwiGLUFFN, gaussian_second_moment, rational_second_moment
from kansym.nn.bases import make_kan_layer, n_basis
from kansym.nn.config import GRID_SIZE

__all__ = ["MLPFFN", "KANFFN", "LowRankKANLayer", "build_ffn", "edge_scores", "input_projection_stds", "sparsity_penalty"]

GPT2_STD = 0.02  # GPT-2's initial weight std (Radford et al. 2019; nanoGPT's _init_weights)


class MLPFFN(nn.Module):
    """GPT-2 feed-forward: ``Linear(C, h) -> GELU -> Linear(h, C) -> Dropout``."""

    kind = "mlp"

    def __init__(self, n_embd: int, hidden: int, *, bias: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.c_fc = nn.Linear(n_embd, hidden, bias=bias)
        self.c_proj = nn.Linear(hidden, n_embd, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.c_fc(x))  # (B, T, h)
        return self.dropout(self.c_proj(h))  # (B, T, C)


class LowRankKANLayer(nn.Module):
    """KAN layer whose coefficient tensor has rank ``r`` along its output mode.

    Edge ``(j, i)`` computes ``phi_ji(x) = w_b[j, i] silu(x) + sum_k c[j, i, k] f_k(x)``
    with ``c[j, i, k] = sum_r U[j, r] V[r, i, k]`` (module docstring; KAN paper eq. 2.10
    with the per-edge ``w_s`` absorbed into ``c``, which a factorised ``c`` can carry).
    The forward pass never forms ``c``: ``out = silu(x) w_b^T + (B(x) V^T) U^T``.

    Parameters
    ----------
    basis : {"bspline", "chebyshev", "fourier", "rbf", "poly"}
        Basis ``f_k`` (``K`` functions, :func:`kansym.nn.bases.n_basis`), evaluated by a
        parameter-free copy of :func:`kansym.nn.bases.make_kan_layer`'s layer (its
        ``basis`` method and buffers: the B-spline grid, Fourier frequencies, RBF centres).
    in_features, out_features : int
    rank : int
        ``r``, between 1 and ``min(out, in K)`` (the full rank of the unfolding).
    grid_size, degree, grid_range :
        As for :func:`kansym.nn.bases.make_kan_layer`.
    scale_noise : float
        Initial coefficients ``c`` have the spread of a full layer's ``w_s c`` (near-zero
        edge functions): ``V`` uniform in ``±scale_noise / (2 K sqrt(in))``, ``U`` uniform
        with variance ``1 / r``.
    generator : torch.Generator, optional

    Attributes
    ----------
    coef_out : Parameter (out, r)
        ``U``.
    coef_in : Parameter (r, in, K)
        ``V``.
    scale_base : Parameter (out, in)
        ``w_b``.
    basis_fn : nn.Module
        Evaluates the basis: ``(N, in) -> (N, in, K)``.

    Raises
    ------
    ConfigError
        For a rank outside ``1..min(out, in K)``.

    Notes
    -----
    There is no per-edge mask: the spline part of one edge cannot be switched off
    without breaking the factorisation. Node pruning (removing rows of ``U``, ``w_b`` or
    input slices of ``V``, ``w_b``) keeps the form exactly.
    """

    kind = "low-rank"

    def __init__(
        self,
        basis: str,
        in_features: int,
        out_features: int,
        rank: int,
        grid_size: int = GRID_SIZE,
        degree: int = 3,
        *,
        grid_range: tuple[float, float] = (-1.0, 1.0),
        scale_noise: float = 0.1,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        k = n_basis(basis, grid_size, degree)
        full = min(out_features, in_features * k)
        if not 1 <= rank <= full:
            raise ConfigError(f"the rank of a {in_features}->{out_features} KAN layer with {k} basis functions must lie in 1..{full}, got {rank}")
        self.in_features, self.out_features, self.rank, self.n_basis = in_features, out_features, rank, k
        self.basis_name = basis
        # a one-output layer of the basis, stripped of its parameters, evaluates f_k (and carries its buffers)
        fn = make_kan_layer(basis, in_features, 1, grid_size, degree, grid_range=grid_range)
        for name in ("coef", "scale_base", "scale_sp", "mask"):
            delattr(fn, name)
        self.basis_fn = fn
        v = torch.rand(rank, in_features, k, generator=generator) - 0.5
        self.coef_in = nn.Parameter(v * scale_noise / (k * math.sqrt(in_features)))
        u = torch.rand(out_features, rank, generator=generator) * 2 - 1
        self.coef_out = nn.Parameter(u * math.sqrt(3.0 / rank))
        unit = torch.rand(out_features, in_features, generator=generator) * 2 - 1
        self.scale_base = nn.Parameter(unit / math.sqrt(in_features))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, basis={self.basis_name}, rank={self.rank}"

    def basis(self, x: torch.Tensor) -> torch.Tensor:
        """Basis functions at ``x``: ``(N, in) -> (N, in, K)``."""
        return self.basis_fn.basis(x)

    def coef(self) -> torch.Tensor:
        """The full coefficient tensor ``c = U V``: ``(out, in, K)`` (differentiable)."""
        return torch.einsum("or,rik->oik", self.coef_out, self.coef_in)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Node outputs ``sum_i phi_ji(x_i)``: ``(..., in) -> (..., out)``."""
        lead = x.shape[:-1]
        x = x.reshape(-1, self.in_features)  # (N, in)
        base = F.linear(F.silu(x), self.scale_base)  # (N, out)
        feats = self.basis(x)  # (N, in, K)
        if feats.transpose(1, 2).is_contiguous():  # stored (N, K, in) (the B-spline kernel's layout): no copy
            feats, v = feats.transpose(1, 2), self.coef_in.transpose(1, 2)  # (N, K, in), (r, K, in)
        else:
            v = self.coef_in
        low = F.linear(feats.reshape(x.shape[0], -1), v.reshape(self.rank, -1))  # (N, r)
        out = base + F.linear(low, self.coef_out)  # (N, out)
        return out.reshape(*lead, self.out_features)

    def edge_outputs(self, x: torch.Tensor) -> torch.Tensor:
        """Every edge function at the samples: ``(batch, in) -> (batch, out, in)``."""
        base = F.silu(x).unsqueeze(1) * self.scale_base  # (batch, out, in)
        return base + torch.einsum("bik,oik->boi", self.basis(x), self.coef())


class KANFFN(nn.Module):
    """Two KAN layers ``C -> h -> C``, optionally plus a linear shortcut ``W x``.

    Parameters
    ----------
    n_embd, hidden : int
        ``C`` and ``h``.
    basis, grid_size, degree, grid_range :
        Passed to :func:`kansym.nn.bases.make_kan_layer`.
    residual : bool
        Add a bias-free ``Linear(C, C)`` of the input to the KAN output (``kan-residual``):
        the linear part of the map is learnt directly, the KAN learns the rest.
    kind : str, optional
        The FFN kind it stands for (``kan``, ``kan-residual``, ``cheby``); None: ``kan`` or
        ``kan-residual`` by ``residual``.
    rank : int, optional
        Factorise both layers' coefficient tensors through this rank
        (:class:`LowRankKANLayer`); None: full KAN layers.
    dropout : float
    generator : torch.Generator, optional
        Initial values of the KAN layers.

    Attributes
    ----------
    fc, proj : KAN layers ``(C -> h)`` and ``(h -> C)``; the full ones have a ``mask`` of live edges.
    shortcut : nn.Linear or None
    """

    def __init__(
        self,
        n_embd: int,
        hidden: int,
        *,
        basis: str = "bspline",
        grid_size: int = GRID_SIZE,
        degree: int = 3,
        grid_range: tuple[float, float] = (-2.0, 2.0),
        residual: bool = False,
        rank: int | None = None,
        dropout: float = 0.0,
        generator: torch.Generator | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__()
        self.kind = kind or ("kan-residual" if residual else "kan")
        self.rank = rank
        opts = dict(grid_size=grid_size, degree=degree, grid_range=grid_range, generator=generator)
        if rank is None:
            self.fc = make_kan_layer(basis, n_embd, hidden, **opts)
            self.proj = make_kan_layer(basis, hidden, n_embd, **opts)
        else:
            self.fc = LowRankKANLayer(basis, n_embd, hidden, rank, **opts)
            self.proj = LowRankKANLayer(basis, hidden, n_embd, rank, **opts)
        self.shortcut = nn.Linear(n_embd, n_embd, bias=False) if residual else None
        self.dropout = nn.Dropout(dropout)

    @property
    def hidden(self) -> int:
        """Hidden width ``h``."""
        return self.fc.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.proj(self.fc(x))  # (B, T, C)
        if self.shortcut is not None:
            out = out + self.shortcut(x)
        return self.dropout(out)


def build_ffn(config: KANGPTConfig, layer: int, generator: torch.Generator | None = None) -> nn.Module:
    """The FFN of block ``layer`` as the config says (``config.ffn[layer]``)."""
    kind = config.ffn[layer]
    if kind == "mlp":
        return MLPFFN(config.n_embd, config.mlp_hidden, bias=config.bias, dropout=config.dropout)
    if kind == "swiglu":
        return SwiGLUFFN(config.n_embd, config.kan_hidden[layer], bias=config.bias, dropout=config.dropout)
    if kind == "grkan":
        return GRKANFFN(config.n_embd, config.kan_hidden[layer], groups=config.grkan_groups, degrees=config.grkan_degrees,
                        bias=config.bias, dropout=config.dropout)
    return KANFFN(
        config.n_embd,
        config.kan_hidden[layer],
        basis=config.basis_of(kind),
        grid_size=config.kan_grid_size,
        degree=config.kan_degree,
        grid_range=config.kan_grid_range,
        residual=kind == "kan-residual",
        rank=config.kan_rank,
        dropout=config.dropout,
        generator=generator,
        kind=kind,
    )


def input_projection_stds(ffn: nn.Module, fc_init: str) -> list[tuple[torch.Tensor, float]]:
    """The input-projection weights of an FFN and the std of their normal initial values.

    ``fc_init`` (:attr:`kansym.gpt.config.KANGPTConfig.fc_init`): ``gpt2`` gives every one
    :data:`GPT2_STD`; ``variance`` gives a projection read through ``f`` the std
    ``1 / sqrt(C E[f(x)^2])``, ``x ~ N(0, 1)`` (the LayerNorm'd input; KAT, Yang & Wang
    2024, arXiv:2409.10594), so its outputs start with unit variance: ``f`` is the
    identity for MLP and SwiGLU (``c_fc``, ``c_gate``), GR-KAN's identity-initialised
    rational for its ``c_fc``, SiLU for the ``w_b`` of a KAN FFN's first layer (its spline
    part starts near zero); ``default`` is ``variance`` for GR-KAN and leaves the others
    out (their ``gpt2`` draw, the KAN layer's own ``U(-1, 1) / sqrt(C)``).

    Parameters
    ----------
    ffn : nn.Module
        Any FFN of :func:`build_ffn`.
    fc_init : {"default", "gpt2", "variance"}

    Returns
    -------
    list of (Tensor, float)
        ``(weight, std)`` pairs for :class:`kansym.gpt.model.KANGPT` to draw; empty where
        the FFN keeps its own init.
    """
    if isinstance(ffn, KANFFN):
        if fc_init == "default":
            return []
        n_in = ffn.fc.in_features
        std = GPT2_STD if fc_init == "gpt2" else 1.0 / math.sqrt(n_in * gaussian_second_moment(F.silu))
        return [(ffn.fc.scale_base, std)]
    if isinstance(ffn, GRKANFFN):
        if fc_init == "gpt2":
            return [(ffn.c_fc.weight, GPT2_STD)]
        a, b = RATIONAL_INITS[ffn.act_in.init]
        return [(ffn.c_fc.weight, 1.0 / math.sqrt(ffn.c_fc.in_features * rational_second_moment(torch.tensor(a), torch.tensor(b))))]
    layers = [ffn.c_fc] + ([ffn.c_gate] if isinstance(ffn, SwiGLUFFN) else [])
    if fc_init == "variance":
        return [(lin.weight, 1.0 / math.sqrt(lin.in_features)) for lin in layers]
    return [(lin.weight, GPT2_STD) for lin in layers] if fc_init == "gpt2" else []


def edge_scores(layer: nn.Module) -> torch.Tensor:
    """Weight-based magnitude of every edge of a KAN layer.

    Parameters
    ----------
    layer : KANLayer, BasisKANLayer or LowRankKANLayer

    Returns
    -------
    Tensor (out, in)
        ``(|w_b| + |w_s| mean_k |c_k|) * mask``; differentiable. For a
        :class:`LowRankKANLayer`, ``|w_b| + mean_k |(U V)_k|`` (no ``w_s``, no mask).
    """
    if isinstance(layer, LowRankKANLayer):
        return layer.scale_base.abs() + layer.coef().abs().mean(dim=-1)
    spline = layer.scale_sp.abs() * layer.coef.abs().mean(dim=-1)  # (out, in)
    return (layer.scale_base.abs() + spline) * layer.mask


def sparsity_penalty(model: nn.Module, *, mu1: float = 1.0, mu2: float = 1.0) -> torch.Tensor:
    """``sum_l mu1 |Phi_l|_1 + mu2 S(Phi_l)`` over the KAN layers of every KAN and GR-KAN FFN.

    ``|Phi|_1 = sum_ij e_ij`` and ``S = -sum_ij p_ij log p_ij`` with ``p = e / |Phi|_1``
    (KAN paper eqs. 2.18-2.20) on the weight-based magnitudes ``e`` of
    :func:`edge_scores` (GR-KAN: :meth:`kansym.gpt.grkan.GRKANFFN.edge_scores`). Multiply
    by ``lamb`` and add to the loss. MLP and SwiGLU FFNs have no edge functions and are
    not penalised.

    Parameters
    ----------
    model : nn.Module
        Any module; its :class:`KANFFN` and :class:`~kansym.gpt.grkan.GRKANFFN` submodules are penalised.
    mu1, mu2 : float

    Returns
    -------
    Tensor (scalar)
        0 when the model has no KAN FFN.
    """
    total = None
    for module in model.modules():
        if isinstance(module, KANFFN):
            scores = [edge_scores(module.fc), edge_scores(module.proj)]
        elif isinstance(module, GRKANFFN):
            scores = list(module.edge_scores())
        else:
            continue
        for e in scores:  # (out, in)
            l1 = e.sum()
            p = e / (l1 + 1e-12)
            entropy = -(p * torch.log(p + 1e-12)).sum()
            term = mu1 * l1 + mu2 * entropy
            total = term if total is None else total + term
    if total is None:
        param = next(model.parameters(), None)
        return torch.zeros((), device=None if param is None else param.device)
    return total
