"""Per-layer tables of a KAN-GPT's attention heads (what ``kansym gpt heads`` prints).

For each layer: the seed's Frobenius score matrix, the principal-angle overlap (mean
cos² and largest cosine), the attention-pattern similarity on real text and the
ablation importance of each head (see :mod:`kansym.gpt.heads` for the definitions and
sources), with an order of the heads that puts similar heads together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from kansym.errors import ConfigError
from kansym.gpt.ablation import head_importance
from kansym.gpt.head_order import cluster_order
from kansym.gpt.heads import (
    attention_similarity, frobenius_overlap, head_output_projections, pair_mean, principal_overlap,
)
from kansym.gpt.model import KANGPT

__all__ = ["MATRICES", "LayerHeads", "analyse_heads", "format_layer", "reorder_by"]

MATRICES = ("frobenius", "principal", "principal_max", "js")


@dataclass(frozen=True)
class LayerHeads:
    """The head measurements of one layer (heads in stored order).

    Attributes
    ----------
    layer : int
    head_order : tuple of int
        Original index of each stored head.
    frobenius, principal, principal_max : Tensor (H, H)
        Seed score, mean cos² and largest cosine of the principal angles between ``W_O`` row spaces.
    js : Tensor (H, H) or None
        Attention similarity ``1 - JS / ln 2`` (None without text).
    importance : Tensor (H,) or None
        Held-out loss increase (nats/char) when the head's output is zeroed (None without text).
    base_loss : float or None
        Held-out loss of the intact model.
    """

    layer: int
    head_order: tuple[int, ...]
    frobenius: torch.Tensor
    principal: torch.Tensor
    principal_max: torch.Tensor
    js: torch.Tensor | None = None
    importance: torch.Tensor | None = None
    base_loss: float | None = None

    def matrix(self, name: str) -> torch.Tensor:
        """One of :data:`MATRICES` by name.

        Raises
        ------
        ConfigError
            Unknown name, or ``"js"`` measured without text.
        """
        if name not in MATRICES:
            raise ConfigError(f"unknown head metric {name!r}; use one of {', '.join(MATRICES)}")
        value = getattr(self, name)
        if value is None:
            raise ConfigError(f"the {name} metric needs text; give --text")
        return value

    def summary(self) -> dict:
        """Plain dict: ``mean_{i<j}`` of each matrix, matrices and importance as lists."""
        out = {"layer": self.layer, "head_order": list(self.head_order), "base_loss": self.base_loss}
        for name in MATRICES:
            m = getattr(self, name)
            out[f"{name}_pair_mean"] = None if m is None else pair_mean(m).item()
            out[name] = None if m is None else m.tolist()
        out["importance"] = None if self.importance is None else self.importance.tolist()
        return out


@torch.no_grad()
def analyse_heads(
    model: KANGPT,
    batches: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None,
    layers: Sequence[int] | None = None,
) -> list[LayerHeads]:
    """Measure the heads of each layer.

    Parameters
    ----------
    model : KANGPT
    batches : sequence of (x, y) LongTensor (B, T), optional
        Held-out text for the attention similarity and the ablation importance.
    layers : sequence of int, optional
        Default: every layer.

    Returns
    -------
    list of LayerHeads

    Raises
    ------
    ConfigError
        A layer index out of range.
    """
    n = model.config.n_layer
    layers = list(range(n)) if layers is None else list(layers)
    for layer in layers:
        if not 0 <= layer < n:
            raise ConfigError(f"layer {layer} is out of range; the model has {n} layers (0..{n - 1})")
    base = importance = idx = None
    if batches:
        base, importance = head_importance(model, batches, layers)
        idx = torch.cat([x for x, _ in batches])  # (n * B, T)
    out = []
    for layer in layers:
        W = head_output_projections(model, layer).detach()  # (H, hs, C)
        out.append(LayerHeads(
            layer=layer, head_order=model.blocks[layer].attn.head_order,
            frobenius=frobenius_overlap(W), principal=principal_overlap(W), principal_max=principal_overlap(W, "max"),
            js=None if idx is None else attention_similarity(model, idx, layer),
            importance=None if importance is None else importance[layer], base_loss=base,
        ))
    return out


def reorder_by(report: Sequence[LayerHeads], metric: str) -> dict[int, list[int]]:
    """Per layer, the order of stored heads that clusters ``metric`` (see :func:`cluster_order`)."""
    return {r.layer: cluster_order(r.matrix(metric)) for r in report}


def format_layer(r: LayerHeads) -> str:
    """A plain-text block: one row per head with its matrix rows and importance."""
    H = len(r.head_order)
    names = [n for n in MATRICES if getattr(r, n) is not None]
    titles = {"frobenius": "Frobenius (seed)", "principal": "principal mean cos²", "principal_max": "principal max cos",
              "js": "JS similarity"}
    width = max(6 * H, max(len(titles[n]) for n in names))
    lines = [f"layer {r.layer}" + ("" if r.base_loss is None else f" (held-out loss {r.base_loss:.4f})")]
    head = "head (orig) | " + " | ".join(titles[n].ljust(width) for n in names)
    if r.importance is not None:
        head += " | ablation Δloss"
    lines.append(head)
    for s in range(H):
        cells = [" ".join(f"{getattr(r, n)[s, j].item():5.3f}" for j in range(H)).ljust(width) for n in names]
        row = f"{s:>4} ({r.head_order[s]:>2})   | " + " | ".join(cells)
        if r.importance is not None:
            row += f" | {r.importance[s].item():+.4f}"
        lines.append(row)
    means = "mean i<j    | " + " | ".join(f"{pair_mean(getattr(r, n)).item():.4f}".ljust(width) for n in names)
    lines.append(means)
    return "\n".join(lines)
