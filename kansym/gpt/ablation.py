"""Head ablation in a KAN-GPT: the held-out loss when heads are removed, one at a time or in pairs.

A head is removed by a forward hook on ``attn.head_out`` (no weight is edited), in one
of two ways:

- ``"zero"``: its output is set to 0 (Michel et al. 2019, "Are Sixteen Heads Really
  Better than One?", arXiv:1905.10650);
- ``"mean"``: its output is replaced by its mean over the held-out batches at the same
  position (mean ablation, Wang et al. 2022, "Interpretability in the Wild",
  arXiv:2211.00593, §2): the head keeps its average contribution and loses only what
  depends on the input, so a head whose output is nearly constant costs nothing.

Removing one head at a time undercounts heads that back each other up: if heads ``i``
and ``j`` compute the same thing, each is cheap alone and the pair is not. The pairwise
loss increase ``d_ij`` (both heads of one layer removed) and the redundancy
``r_ij = d_ij - d_i - d_j`` (:func:`redundancy`; > 0: the two heads cover for each
other, < 0: they overlap in what each alone breaks) measure that, and
:func:`marginal_cost` counts a head as used when removing it costs loss alone or once a
partner is gone (docs/algorithms.md §10).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from kansym.errors import ConfigError
from kansym.gpt.model import KANGPT

__all__ = ["ABLATION_MODES", "head_importance", "head_means", "marginal_cost", "pair_importance", "redundancy"]

ABLATION_MODES = ("zero", "mean")

Batches = Sequence[tuple[torch.Tensor, torch.Tensor]]


def _layers(model: KANGPT, layers: Iterable[int] | None) -> list[int]:
    n = model.config.n_layer
    if layers is None:
        return list(range(n))
    out = []
    for layer in layers:
        if not -n <= layer < n:
            raise ConfigError(f"layer {layer} is out of range; the model has {n} layers (0..{n - 1})")
        out.append(layer % n)
    return out


def _check(batches: Batches, mode: str) -> None:
    if mode not in ABLATION_MODES:
        raise ConfigError(f"ablation mode {mode!r} is not one of {', '.join(ABLATION_MODES)}")
    if not batches:
        raise ConfigError("ablation needs at least one held-out batch")


@torch.no_grad()
def head_means(model: KANGPT, batches: Batches) -> torch.Tensor:
    """Every head's mean output at each position over ``batches``, in stored head order.

    Parameters
    ----------
    model : KANGPT
    batches : sequence of (x, y) LongTensor (B, T) pairs, one ``T`` for all
        Held-out text.

    Returns
    -------
    Tensor (n_layer, H, T, d_head)

    Raises
    ------
    ConfigError
        No batch, or batches of different lengths ``T``.
    """
    _check(batches, "mean")
    if len({x.shape[1] for x, _ in batches}) != 1:
        raise ConfigError("mean ablation needs batches of one sequence length")
    sums: dict[int, torch.Tensor] = {}
    count = 0

    def collect(layer):
        def hook(mod, args, output):
            sums[layer] = sums.get(layer, 0) + output.sum(dim=0)  # (H, T, hs)
        return hook

    was = model.training
    model.eval()
    handles = [b.attn.head_out.register_forward_hook(collect(l)) for l, b in enumerate(model.blocks)]
    try:
        for x, _ in batches:
            model(x)
            count += x.shape[0]
    finally:
        for h in handles:
            h.remove()
        model.train(was)
    return torch.stack([sums[l] / count for l in range(model.config.n_layer)])


class _Ablator:
    """The mean held-out loss of ``model`` with chosen heads of one layer removed."""

    def __init__(self, model: KANGPT, batches: Batches, mode: str) -> None:
        _check(batches, mode)
        self.model, self.batches, self.mode = model, batches, mode
        self.means = head_means(model, batches) if mode == "mean" else None  # (L, H, T, hs)

    def loss(self, layer: int | None = None, heads: Sequence[int] = ()) -> float:
        def remove(mod, args, output):
            output = output.clone()  # (B, H, T, hs)
            for h in heads:
                output[:, h] = 0.0 if self.means is None else self.means[layer, h].to(output.dtype)
            return output

        handle = None if layer is None else self.model.blocks[layer].attn.head_out.register_forward_hook(remove)
        try:
            return sum(self.model(x, y)[1].item() for x, y in self.batches) / len(self.batches)
        finally:
            if handle is not None:
                handle.remove()


@torch.no_grad()
def head_importance(model: KANGPT, batches: Batches, layers: Iterable[int] | None = None, *,
                    mode: str = "zero") -> tuple[float, torch.Tensor]:
    """Held-out loss increase when one head is removed, per head.

    Parameters
    ----------
    model : KANGPT
    batches : sequence of (x, y) LongTensor (B, T) pairs
        Held-out text (e.g. validation batches).
    layers : iterable of int, optional
        Default: all.
    mode : {"zero", "mean"}
        Zero ablation (Michel et al. 2019) or mean ablation (Wang et al. 2022).

    Returns
    -------
    base_loss : float
        Mean cross-entropy (nats/char) of the intact model on ``batches``.
    importance : Tensor (n_layer, H)
        ``loss(head removed) - base_loss``; NaN for layers not asked for. Stored head order.

    Raises
    ------
    ConfigError
        An unknown mode, no batch, or a layer out of range.
    """
    base, single, _ = _ablate(model, batches, layers, mode, pairs=False)
    return base, single


@torch.no_grad()
def pair_importance(model: KANGPT, batches: Batches, layers: Iterable[int] | None = None, *,
                    mode: str = "zero") -> tuple[float, torch.Tensor, torch.Tensor]:
    """Held-out loss increase when one head, and when each pair of heads of a layer, is removed.

    Costs ``1 + H + H (H - 1) / 2`` evaluations of ``batches`` per layer.

    Parameters
    ----------
    model : KANGPT
    batches : sequence of (x, y) LongTensor (B, T) pairs
        Held-out text.
    layers : iterable of int, optional
        Default: all.
    mode : {"zero", "mean"}

    Returns
    -------
    base_loss : float
        Mean cross-entropy (nats/char) of the intact model.
    single : Tensor (n_layer, H)
        ``d_i``: the loss increase with head ``i`` removed (as :func:`head_importance`).
    pair : Tensor (n_layer, H, H)
        ``d_ij``: the loss increase with heads ``i`` and ``j`` of the layer removed
        together; symmetric, ``d_ii = d_i``. NaN for layers not asked for.

    Raises
    ------
    ConfigError
        An unknown mode, no batch, or a layer out of range.
    """
    return _ablate(model, batches, layers, mode, pairs=True)


def _ablate(model: KANGPT, batches: Batches, layers, mode: str, *, pairs: bool):
    """Base loss, one-head increases ``(L, H)`` and, with ``pairs``, pair increases ``(L, H, H)``."""
    chosen = _layers(model, layers)
    was = model.training
    model.eval()
    try:
        ab = _Ablator(model, batches, mode)
        base = ab.loss()
        L, H = model.config.n_layer, model.config.n_head
        single = torch.full((L, H), float("nan"))
        pair = torch.full((L, H, H), float("nan")) if pairs else None
        for layer in chosen:
            for i in range(H):
                single[layer, i] = ab.loss(layer, [i]) - base
                if pair is not None:
                    pair[layer, i, i] = single[layer, i]
            for i in range(H if pairs else 0):
                for j in range(i + 1, H):
                    pair[layer, i, j] = pair[layer, j, i] = ab.loss(layer, [i, j]) - base
    finally:
        model.train(was)
    return base, single, pair


def redundancy(single: torch.Tensor, pair: torch.Tensor) -> torch.Tensor:
    """``r_ij = d_ij - d_i - d_j`` for every pair of heads of a layer; NaN on the diagonal.

    Parameters
    ----------
    single : Tensor (..., H)
        One-head loss increases ``d_i`` (:func:`pair_importance`).
    pair : Tensor (..., H, H)
        Pair loss increases ``d_ij``.

    Returns
    -------
    Tensor (..., H, H)
        > 0 where removing both costs more than the two removals alone (the heads cover
        for each other: redundancy that one-head ablation does not see).
    """
    r = pair - single[..., :, None] - single[..., None, :]
    eye = torch.eye(r.shape[-1], dtype=torch.bool)
    return r.masked_fill(eye, float("nan"))


def marginal_cost(single: torch.Tensor, pair: torch.Tensor) -> torch.Tensor:
    """The most a head's removal costs, alone or after any one other head of its layer is removed.

    ``m_i = max(d_i, max_{j != i} (d_ij - d_j))``: a head that a partner backs up is
    cheap alone (``d_i`` small) but not once the partner is gone (``d_ij - d_j`` large).
    Heads with ``m_i`` above a threshold are the heads in use; counting ``d_i`` alone
    undercounts redundant heads.

    Parameters
    ----------
    single : Tensor (..., H)
        ``d_i`` (:func:`pair_importance`).
    pair : Tensor (..., H, H)
        ``d_ij``, with ``d_ii = d_i``.

    Returns
    -------
    Tensor (..., H)
        ``m_i >= d_i``, in the loss's units (nats/char).
    """
    after = pair - single[..., None, :]  # [i, j] = d_ij - d_j
    eye = torch.eye(after.shape[-1], dtype=torch.bool)
    after = torch.where(eye, single[..., :, None].expand_as(after), after)
    return after.amax(dim=-1)
