"""Node pruning of the KAN FFN hidden units of a KAN-GPT.

Hidden unit ``i`` of a KAN FFN (``C -> h -> C``) has an incoming score
``I_i = max_j e(fc)_{i j}`` (the strongest edge entering it) and an outgoing score
``O_i = max_j e(proj)_{j i}`` (the strongest edge leaving it); it survives iff both
exceed ``theta`` (Liu et al. 2024, "KAN: Kolmogorov–Arnold Networks",
arXiv:2404.19756, §2.5.1). The edge magnitudes ``e`` are the weight-based ones of
:func:`kansym.gpt.ffn.edge_scores` (``|w_b| + |w_s| mean_k |c_k|``), not sampled
activations. Removed units are sliced out of the tensors, so the pruned model is
physically smaller and computes exactly what the model with those units masked
(incoming and outgoing edges) computes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kansym.errors import ConfigError
from kansym.gpt.ffn import KANFFN, edge_scores
from kansym.gpt.model import KANGPT

__all__ = ["GPTPruneResult", "node_scores", "prune_gpt"]

# Per-edge tensors of a KAN layer, laid out (out, in, ...).
_EDGE_TENSORS = ("coef", "scale_base", "scale_sp", "mask")


@dataclass(frozen=True)
class GPTPruneResult:
    """A pruned KAN-GPT and what was removed.

    Attributes
    ----------
    model : KANGPT
        The smaller model (new config with reduced ``kan_hidden``).
    kept : dict of int -> list of int
        Per KAN layer, the indices of the surviving hidden units in the original model.
    report : dict
        Plain summary: ``theta``, per-layer ``before``/``after`` widths, totals and
        parameter counts before and after.
    """

    model: KANGPT
    kept: dict[int, list[int]]
    report: dict


@torch.no_grad()
def node_scores(ffn: KANFFN) -> tuple[torch.Tensor, torch.Tensor]:
    """Incoming and outgoing scores of the hidden units of a KAN FFN.

    Returns
    -------
    incoming, outgoing : Tensor (h,)
    """
    incoming = edge_scores(ffn.fc).amax(dim=1)  # (h, C) -> (h,)
    outgoing = edge_scores(ffn.proj).amax(dim=0)  # (C, h) -> (h,)
    return incoming, outgoing


def _slice_layer(sd: dict, prefix: str, index: torch.Tensor, dim: int) -> None:
    for name in _EDGE_TENSORS:
        key = f"{prefix}.{name}"
        sd[key] = sd[key].index_select(dim, index).clone()
    grid = f"{prefix}.grid"
    if dim == 1 and grid in sd:  # a B-spline grid is per input feature: (in, G + 2k + 1)
        sd[grid] = sd[grid].index_select(0, index).clone()


@torch.no_grad()
def prune_gpt(model: KANGPT, theta: float = 1e-2) -> GPTPruneResult:
    """Remove the KAN FFN hidden units whose incoming or outgoing score is below ``theta``.

    Every KAN FFN keeps at least its strongest unit (``min(I, O)`` largest). MLP
    layers, attention and embeddings are unchanged; the input model is not modified.

    Parameters
    ----------
    model : KANGPT
    theta : float
        Score threshold (DESIGN.md §3), > 0.

    Returns
    -------
    GPTPruneResult

    Raises
    ------
    ConfigError
        If ``theta`` is not positive or the model has no KAN FFN.
    """
    if not theta > 0:
        raise ConfigError(f"theta must be positive, got {theta}")
    ffns = model.kan_ffns()
    if not ffns:
        raise ConfigError("the model has no KAN feed-forward layer to prune; train it with --ffn kan or a hybrid list")
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    hidden = list(model.config.kan_hidden)
    kept: dict[int, list[int]] = {}
    layers = []
    for layer, ffn in ffns:
        incoming, outgoing = node_scores(ffn)
        strength = torch.minimum(incoming, outgoing)  # (h,)
        keep = torch.nonzero(strength > theta).flatten()
        if keep.numel() == 0:
            keep = strength.argmax().reshape(1)
        _slice_layer(sd, f"blocks.{layer}.ffn.fc", keep, 0)
        _slice_layer(sd, f"blocks.{layer}.ffn.proj", keep, 1)
        kept[layer] = keep.tolist()
        layers.append({"layer": layer, "before": ffn.hidden, "after": int(keep.numel())})
        hidden[layer] = int(keep.numel())
    new = KANGPT(model.config.replace(kan_hidden=tuple(hidden)))
    new.to(dtype=next(model.parameters()).dtype, device=next(model.parameters()).device)
    new.load_state_dict(sd)
    new.train(model.training)
    before = sum(r["before"] for r in layers)
    after = sum(r["after"] for r in layers)
    report = {
        "theta": float(theta),
        "layers": layers,
        "hidden_before": before,
        "hidden_after": after,
        "removed_fraction": 1.0 - after / before,
        "params_before": model.num_params(),
        "params_after": new.num_params(),
    }
    return GPTPruneResult(model=new, kept=kept, report=report)
