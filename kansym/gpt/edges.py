"""Pictures of the strongest edge functions of a KAN FFN (matplotlib, imported lazily).

A GR-KAN FFN (:class:`kansym.gpt.grkan.GRKANFFN`) has one function per group of input
channels (edge ``(j, i)`` is ``w_ji F_g(i)``): its picture shows every group's rational
``F_g`` of the chosen layer, with the channels it acts on.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch

from kansym.errors import ConfigError
from kansym.gpt.ffn import KANFFN, edge_scores
from kansym.gpt.grkan import GRKANFFN
from kansym.gpt.model import KANGPT

__all__ = ["strongest_edges", "plot_edges"]


def _layer(model: KANGPT, layer: int, part: str):
    if not 0 <= layer < model.config.n_layer:
        raise ConfigError(f"layer {layer} does not exist; the model has layers 0..{model.config.n_layer - 1}")
    ffn = model.blocks[layer].ffn
    if not isinstance(ffn, (KANFFN, GRKANFFN)):
        kans = [i for i, b in enumerate(model.blocks) if isinstance(b.ffn, (KANFFN, GRKANFFN))]
        name = {"mlp": "an MLP", "swiglu": "a SwiGLU"}.get(model.config.ffn[layer], model.config.ffn[layer])
        raise ConfigError(f"layer {layer} has {name} feed-forward block (no edge functions); "
                          f"KAN and GR-KAN layers are {kans or 'none'}")
    if part not in ("fc", "proj"):
        raise ConfigError(f"part must be 'fc' (C -> h) or 'proj' (h -> C), got {part!r}")
    if isinstance(ffn, GRKANFFN):
        return ffn
    return getattr(ffn, part)


@torch.no_grad()
def strongest_edges(model: KANGPT, layer: int, part: str = "fc", top: int = 16) -> list[tuple[int, int, float]]:
    """The ``top`` live edges of a KAN FFN layer with the largest weight-based score.

    Returns
    -------
    list of (i_in, j_out, score)
        Strongest first; ``score`` as in :func:`kansym.gpt.ffn.edge_scores`.
    """
    kan = _layer(model, layer, part)
    if isinstance(kan, GRKANFFN):
        scores = kan.edge_scores()[0 if part == "fc" else 1]  # (out, in)
    else:
        scores = edge_scores(kan)  # (out, in)
    k = min(top, scores.numel())
    values, flat = torch.topk(scores.flatten(), k)
    n_in = scores.shape[1]
    return [(int(f) % n_in, int(f) // n_in, float(v)) for v, f in zip(values, flat) if v > 0]


@torch.no_grad()
def plot_edges(
    model: KANGPT,
    layer: int,
    path: str | os.PathLike[str],
    *,
    part: str = "fc",
    top: int = 16,
    points: int = 200,
) -> Path:
    """Save a grid of the strongest edge functions ``phi_ji`` of one KAN FFN layer as an image.

    Each panel shows ``phi_ji(x)`` over the basis range ``config.kan_grid_range``,
    titled with the edge id ``(layer, i_in, j_out)`` and its score. For a GR-KAN FFN the
    panels are the group rationals ``F_g`` feeding the layer (``fc``: ``F_1`` on the
    ``C`` inputs, ``proj``: ``F_2`` on the ``h`` hidden channels) on ``[-3, 3]``, the
    interval their initial values were fitted on; ``top`` is ignored.

    Parameters
    ----------
    model : KANGPT
    layer : int
        Block index; its FFN must be a KAN.
    path : output file (PNG, SVG or PDF by extension)
    part : {"fc", "proj"}
        First (``C -> h``) or second (``h -> C``) KAN layer of the FFN.
    top : int
        Number of panels.
    points : int
        Samples per curve.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ConfigError
        Unknown layer, an MLP layer, or an unknown part.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kan = _layer(model, layer, part)
    if isinstance(kan, GRKANFFN):
        return _plot_rationals(kan, layer, part, path, points, plt)
    edges = strongest_edges(model, layer, part, top)
    low, high = model.config.kan_grid_range
    param = next(kan.parameters())
    xs = torch.linspace(low, high, points, dtype=param.dtype, device=param.device)  # (P,)
    x = xs[:, None].expand(points, kan.in_features).contiguous()  # (P, in)
    phi = kan.edge_outputs(x).float().cpu()  # (P, out, in)
    cols = max(1, math.ceil(math.sqrt(len(edges))))
    fig, axes = _panels(len(edges), cols, plt)
    for ax, (i, j, score) in zip(axes.flat, edges):
        ax.set_axis_on()
        ax.plot(xs.float().cpu().numpy(), phi[:, j, i].numpy(), lw=1.5)
        ax.set_title(f"({layer}, {i}, {j})  {score:.3g}", fontsize=8)
        ax.tick_params(labelsize=6)
    fig.suptitle(f"layer {layer} {part}: strongest edges (layer, i_in, j_out) score", fontsize=9)
    return _save(fig, path, plt)


def _plot_rationals(ffn: GRKANFFN, layer: int, part: str, path, points: int, plt) -> Path:
    """One panel per group rational of a GR-KAN FFN layer (see :func:`plot_edges`)."""
    act = ffn.act_in if part == "fc" else ffn.act_hidden
    param = act.numerator
    xs = torch.linspace(-3.0, 3.0, points, dtype=param.dtype, device=param.device)  # (P,)
    curves = act.curves(xs).float().cpu()  # (G, P)
    group = act.group.cpu()
    cols = max(1, math.ceil(math.sqrt(act.groups)))
    fig, axes = _panels(act.groups, cols, plt)
    for g, ax in zip(range(act.groups), axes.flat):
        ax.set_axis_on()
        ax.plot(xs.float().cpu().numpy(), curves[g].numpy(), lw=1.5)
        channels = torch.nonzero(group == g).flatten()
        span = f"{int(channels[0])}..{int(channels[-1])}" if channels.numel() else "none"
        ax.set_title(f"group {g}: channels {span}", fontsize=8)
        ax.tick_params(labelsize=6)
    fig.suptitle(f"layer {layer} {part}: GR-KAN rationals F_g ({'inputs' if part == 'fc' else 'hidden'})", fontsize=9)
    return _save(fig, path, plt)


def _panels(n: int, cols: int, plt):
    """A figure of ``n`` small panels in ``cols`` columns (the unused ones blank)."""
    rows = max(1, math.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(2.4 * cols, 1.9 * rows), squeeze=False)
    for ax in axes.flat:
        ax.set_axis_off()
    return fig, axes


def _save(fig, path, plt) -> Path:
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
