"""Node pruning of a KAN: scores on data, masks, and surgery into a smaller KAN.

Source: Liu et al. 2024, "KAN: Kolmogorov–Arnold Networks", arXiv:2404.19756,
§2.5.1 (docs/algorithms.md §4): a hidden node survives iff its incoming and outgoing
scores both exceed ``theta``. The pruned model is built by slicing the
tensors of the kept nodes (as pykan's ``get_subset`` does), so it equals the
masked model numerically.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from kansym.config import THETA
from kansym.errors import ConfigError
from kansym.nn.kan import KAN
from kansym.prune.scores import edge_scores, node_scores_from_edges

__all__ = ["PruneReport", "PruneResult", "prune", "mask_nodes", "subset"]


@dataclass(frozen=True)
class PruneReport:
    """What :func:`prune` removed and why.

    Attributes
    ----------
    width_before, width_after : list of int
        Nodes per layer, inputs first.
    removed_nodes : dict {int: list of int}
        Removed node indices per hidden layer ``l`` (1 .. L-1), in the old numbering.
    removed_inputs : list of int
        Removed input features (only with ``prune_inputs=True``).
    theta : float
        Threshold used.
    incoming, outgoing : list of list of float
        ``I_l`` and ``O_l`` for hidden layers ``l = 1 .. L-1``.
    input_scores : list of float
        Largest outgoing edge score of each input.
    forced : dict {int: int}
        Layers where every node fell below ``theta``: the best node kept anyway.
    """

    width_before: list[int]
    width_after: list[int]
    removed_nodes: dict[int, list[int]]
    removed_inputs: list[int]
    theta: float
    incoming: list[list[float]]
    outgoing: list[list[float]]
    input_scores: list[float]
    forced: dict[int, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain dict (JSON-ready; layer keys as strings)."""
        return {
            "width_before": list(self.width_before),
            "width_after": list(self.width_after),
            "removed_nodes": {str(k): list(v) for k, v in self.removed_nodes.items()},
            "removed_inputs": list(self.removed_inputs),
            "theta": self.theta,
            "incoming": [list(v) for v in self.incoming],
            "outgoing": [list(v) for v in self.outgoing],
            "input_scores": list(self.input_scores),
            "forced": {str(k): v for k, v in self.forced.items()},
        }

    def summary(self) -> str:
        """A few human-readable lines."""
        lines = [f"pruned {self.width_before} -> {self.width_after} (theta={self.theta:g})"]
        for layer, nodes in sorted(self.removed_nodes.items()):
            if nodes:
                lines.append(f"  layer {layer}: removed nodes {nodes}")
        for layer, node in sorted(self.forced.items()):
            lines.append(f"  layer {layer}: every node scored <= theta; kept the best one, node {node}")
        if self.removed_inputs:
            lines.append(f"  removed inputs {self.removed_inputs}")
        return "\n".join(lines)


@dataclass(frozen=True)
class PruneResult:
    """Outcome of :func:`prune`.

    Attributes
    ----------
    model : KAN
        The physically smaller model.
    kept : tuple of tuple of int
        Kept node indices (old numbering) per layer, inputs and outputs included.
    report : PruneReport
    """

    model: KAN
    kept: tuple[tuple[int, ...], ...]
    report: PruneReport


def _check_kept(model: KAN, kept: Any) -> tuple[tuple[int, ...], ...]:
    kept = tuple(tuple(sorted(int(i) for i in layer)) for layer in kept)
    if len(kept) != len(model.width):
        raise ConfigError(f"kept needs one index list per layer ({len(model.width)}), got {len(kept)}")
    for n, idx in zip(model.width, kept):
        if not idx or idx[0] < 0 or idx[-1] >= n or len(set(idx)) != len(idx):
            raise ConfigError(f"kept indices {list(idx)} are empty, repeated or outside a layer of {n} nodes")
    return kept


def mask_nodes(model: KAN, kept: Any) -> KAN:
    """A same-size copy whose removed nodes have their edges masked.

    Parameters
    ----------
    model : KAN
        Left unchanged.
    kept : sequence of sequence of int
        Kept node indices per layer (inputs and outputs included).

    Returns
    -------
    KAN
        Edges entering or leaving a removed node have ``mask = 0``.

    Raises
    ------
    ConfigError
        If ``kept`` does not describe the model's layers.
    """
    kept = _check_kept(model, kept)
    new = copy.deepcopy(model)
    with torch.no_grad():
        for l, layer in enumerate(new.layers):
            keep_in = torch.zeros(layer.in_features, dtype=torch.bool, device=layer.mask.device)
            keep_out = torch.zeros(layer.out_features, dtype=torch.bool, device=layer.mask.device)
            keep_in[list(kept[l])] = True
            keep_out[list(kept[l + 1])] = True
            live = (keep_out[:, None] & keep_in[None, :]).to(layer.mask.dtype)  # (out, in)
            layer.mask.mul_(live)
    return new


def subset(model: KAN, kept: Any) -> KAN:
    """A smaller KAN holding only the kept nodes (slicing ``coef``, weights, masks, grids).

    Parameters
    ----------
    model : KAN
        Left unchanged.
    kept : sequence of sequence of int
        Kept node indices per layer (inputs and outputs included).

    Returns
    -------
    KAN
        Of width ``[len(k) for k in kept]``, same dtype and device, numerically equal
        to ``mask_nodes(model, kept)`` on the kept inputs.

    Raises
    ------
    ConfigError
        If ``kept`` does not describe the model's layers.
    """
    kept = _check_kept(model, kept)
    width = tuple(len(k) for k in kept)
    ref = model.layers[0].coef
    new = KAN(model.config.replace(width=width)).to(device=ref.device, dtype=ref.dtype)
    with torch.no_grad():
        for l, (old, layer) in enumerate(zip(model.layers, new.layers)):
            i_in = torch.tensor(kept[l], device=ref.device)
            i_out = torch.tensor(kept[l + 1], device=ref.device)
            layer.grid = old.grid[i_in].clone()  # grid is per input feature: (in, G + 2k + 1)
            layer.coef.data = old.coef[i_out][:, i_in].clone()  # (out', in', G + k)
            layer.scale_base.data = old.scale_base[i_out][:, i_in].clone()
            layer.scale_sp.data = old.scale_sp[i_out][:, i_in].clone()
            layer.mask = old.mask[i_out][:, i_in].clone()
    return new


def prune(model: KAN, x: Any, *, theta: float = THETA, prune_inputs: bool = False) -> PruneResult:
    """Remove hidden nodes whose incoming or outgoing score is at most ``theta``.

    Hidden node ``i`` of layer ``l`` survives iff ``I_{l,i} > theta`` and
    ``O_{l,i} > theta`` (KAN paper §2.5.1), scores measured on ``x``. Every hidden
    layer keeps at least its best node (largest ``min(I, O)``), noted in
    ``report.forced``. With ``prune_inputs``, inputs whose largest outgoing score is
    at most ``theta`` go too (at least one input stays). Outputs always stay.

    Parameters
    ----------
    model : KAN
        Left unchanged.
    x : array-like (N, in)
        Calibration rows, scaled like the training inputs.
    theta : float
        Threshold on the scores, >= 0.
    prune_inputs : bool
        Also remove unused input features.

    Returns
    -------
    PruneResult
        ``model`` is a new, physically smaller :class:`KAN`.

    Raises
    ------
    ConfigError
        If ``theta`` is negative or not finite, or ``x`` does not fit the model.
    """
    if not (theta >= 0 and math.isfinite(theta)):
        raise ConfigError(f"theta must be a finite number >= 0, got {theta}")
    edges = edge_scores(model, x)
    nodes = node_scores_from_edges(edges)
    in_score = edges[0].amax(dim=0)  # (in,)
    kept: list[tuple[int, ...]] = []
    forced: dict[int, int] = {}
    removed_inputs: list[int] = []
    if prune_inputs:
        alive = (in_score > theta).nonzero().flatten().tolist()
        if not alive:
            alive = [int(in_score.argmax())]
        removed_inputs = sorted(set(range(model.in_features)) - set(alive))
        kept.append(tuple(alive))
    else:
        kept.append(tuple(range(model.in_features)))
    removed: dict[int, list[int]] = {}
    for l, (inc, out) in enumerate(nodes, start=1):
        alive = ((inc > theta) & (out > theta)).nonzero().flatten().tolist()
        if not alive:
            best = int(torch.minimum(inc, out).argmax())
            forced[l] = best
            alive = [best]
        removed[l] = sorted(set(range(model.width[l])) - set(alive))
        kept.append(tuple(alive))
    kept.append(tuple(range(model.out_features)))
    kept_t = tuple(kept)
    new = subset(mask_nodes(model, kept_t), kept_t)
    report = PruneReport(
        width_before=list(model.width),
        width_after=list(new.width),
        removed_nodes=removed,
        removed_inputs=removed_inputs,
        theta=float(theta),
        incoming=[inc.tolist() for inc, _ in nodes],
        outgoing=[out.tolist() for _, out in nodes],
        input_scores=in_score.tolist(),
        forced=forced,
    )
    return PruneResult(model=new, kept=kept_t, report=report)
