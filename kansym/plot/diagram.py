"""The KAN diagram: nodes per layer, every live edge with a picture of its function.

Drawn like the figures of Liu et al. 2024, "KAN: Kolmogorov–Arnold Networks",
arXiv:2404.19756 (§2.5.1, Fig. 2.4): inputs at the bottom, outputs at the top; between
two layers a row of small boxes, one per edge, each showing the learned ``phi_ji``
over the range of the data it sees. Opacity is ``tanh(beta * A)`` with ``A`` the edge's
L1 score ``|phi_ji|_1`` (eq. 2.17) divided by the largest score of its layer.

Curves are drawn straight into the main axes (no inset axes), so a 64x64 layer
plots in about a second; only the strongest edges of large layers are drawn and
the title says how many.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple

import numpy as np

from kansym.errors import ConfigError
from kansym.plot.edges import EdgeCurves, EdgeFit, EdgeId, edge_curves, node_name

__all__ = ["DiagramResult", "plot_diagram"]

BOX_H = 0.34  # box height, in units of the layer gap


@dataclass(frozen=True)
class DiagramResult:
    """What :func:`plot_diagram` drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure
    n_edges_total : int
        Edges of the model (``sum out_l * in_l``).
    n_edges_live : int
        Edges not removed (mask on, and both ends kept).
    n_edges_drawn : int
        Live edges drawn (all of them, unless a layer has more than ``max_edges``).
    n_insets : int
        Live edges drawn with a picture of their function.
    n_pruned_drawn : int
        Removed edges drawn in grey (only with ``show_pruned``).
    drawn : tuple of (layer, i_in, j_out)
        The live edges drawn, in model numbering.
    """

    figure: Any
    n_edges_total: int
    n_edges_live: int
    n_edges_drawn: int
    n_insets: int
    n_pruned_drawn: int
    drawn: tuple[EdgeId, ...]


def _removed_by_theta(curves: EdgeCurves, theta: float) -> list[set[int]]:
    """Hidden nodes that node pruning at ``theta`` removes (KAN paper §2.5.1), per layer."""
    from kansym.prune.scores import node_scores_from_edges
    import torch

    removed: list[set[int]] = [set() for _ in range(len(curves.scores) + 1)]
    for l, (inc, out) in enumerate(node_scores_from_edges([torch.as_tensor(s) for s in curves.scores]), start=1):
        keep = (inc > theta) & (out > theta)
        if not bool(keep.any()):  # prune keeps the best node of an all-weak layer
            keep[int(torch.argmax(torch.minimum(inc, out)))] = True
        removed[l] = {int(k) for k in torch.nonzero(~keep).flatten()}
    return removed


class _Layout(NamedTuple):
    """Display widths, model->display node maps and ghost (pruned-away) display nodes, per layer."""

    width: list[int]
    maps: list[list[int]]
    ghosts: list[set[int]]


@dataclass(frozen=True)
class _EdgePlan:
    """Which edges a diagram draws, per layer."""

    drawn: list[list[tuple[int, int, float]]]  # live edges drawn, strongest first: (i, j, score / layer max)
    boxed: list[set[tuple[int, int]]]  # (i, j) of the drawn edges that get a picture of their function
    pruned_lines: list[tuple[int, int, int]]  # (layer, display i, display j), drawn grey
    n_live: int

    @property
    def n_drawn(self) -> int:
        """Live edges drawn, over all layers."""
        return sum(len(d) for d in self.drawn)


def _ghost_layout(bundle: Any, show_pruned: bool) -> _Layout:
    """Display widths, model->display node maps and ghost (pruned-away) display nodes per layer."""
    width = list(bundle.model.width)
    identity = [list(range(w)) for w in width]
    report = bundle.meta.get("prune_report") if show_pruned else None
    if not report or list(report.get("width_after", [])) != width:
        return _Layout(width, identity, [set() for _ in width])
    before = list(report["width_before"])
    removed = {int(k): set(v) for k, v in report.get("removed_nodes", {}).items()}
    removed[0] = set(report.get("removed_inputs", []))
    maps, ghosts = [], []
    for l, w in enumerate(before):
        kept = [k for k in range(w) if k not in removed.get(l, set())]
        if len(kept) != width[l]:
            return _Layout(width, identity, [set() for _ in width])
        maps.append(kept)
        ghosts.append(removed.get(l, set()))
    return _Layout(before, maps, ghosts)


def _xs(n: int, span: float) -> np.ndarray:
    return span * (np.arange(n) + 0.5) / max(n, 1)


def plot_diagram(
    bundle: Any,
    *,
    beta: float = 3.0,
    fits: Mapping[EdgeId, EdgeFit] | None = None,
    show_pruned: bool = False,
    theta: float | None = None,
    max_edges: int = 100,
    max_insets: int = 30,
    x: np.ndarray | None = None,
) -> DiagramResult:
    """Draw a KAN: its nodes, its live edges with their functions, labels from the CSV.

    Parameters
    ----------
    bundle : ModelBundle
    beta : float
        Opacity of an edge is ``tanh(beta * A)``, ``A`` its score over its layer's maximum.
    fits : mapping {(layer, i_in, j_out): EdgeFit}, optional
        Symbolic fits; each fitted edge is labelled with its primitive.
    show_pruned : bool
        Draw removed parts in grey: masked edges, nodes pruned at ``theta``, and the
        nodes a pruned checkpoint lost (from its ``prune_report``).
    theta : float, optional
        Treat hidden nodes that node pruning at ``theta`` would remove as pruned.
    max_edges : int
        Per layer, at most this many live edges (the strongest) are drawn.
    max_insets : int
        Per layer, at most this many of them (the strongest) get a picture of their function.
    x : ndarray (N, d_in), optional
        CSV-unit rows giving the data range (default: the calibration rows).

    Returns
    -------
    DiagramResult

    Raises
    ------
    ConfigError
        Negative ``beta``, ``max_edges < 1`` or ``max_insets < 0``.
    """
    if beta < 0 or max_edges < 1 or max_insets < 0:
        raise ConfigError(f"need beta >= 0, max_edges >= 1, max_insets >= 0; got {beta}, {max_edges}, {max_insets}")
    model = bundle.model
    width = list(model.width)
    n_layers = len(width) - 1
    curves = edge_curves(model, bundle.model_inputs(x), n=48)
    dead = _removed_by_theta(curves, theta) if theta is not None else [set() for _ in width]
    layout = _ghost_layout(bundle, show_pruned)
    plan = _plan_edges(curves, width, dead, layout, show_pruned=show_pruned, max_edges=max_edges, max_insets=max_insets)

    fig, ax, span = _canvas(plan, layout, n_layers)
    node_x = [_xs(w, span) for w in layout.width]
    pos = [[node_x[l][layout.maps[l][k]] for k in range(width[l])] for l in range(len(width))]
    _draw_pruned_lines(ax, plan.pruned_lines, node_x)
    n_insets = _draw_edges(ax, curves, plan, pos, span=span, beta=beta, fits=fits or {})
    _draw_nodes(ax, layout, node_x)
    _labels(ax, bundle, width, pos)
    n_total = sum(width[l] * width[l + 1] for l in range(n_layers))
    fig.suptitle(_title(width, plan, n_insets, beta=beta, max_edges=max_edges, show_pruned=show_pruned), fontsize=10)
    edges_drawn = tuple((l, i, j) for l in range(n_layers) for i, j, _ in plan.drawn[l])
    return DiagramResult(fig, n_total, plan.n_live, plan.n_drawn, n_insets, len(plan.pruned_lines), edges_drawn)


def _plan_edges(curves: EdgeCurves, width: list[int], dead: list[set[int]], layout: _Layout, *,
                show_pruned: bool, max_edges: int, max_insets: int) -> _EdgePlan:
    """Which live edges to draw, which of them with a picture, and which removed edges to draw grey."""
    norm = curves.normalised_scores()
    drawn: list[list[tuple[int, int, float]]] = []
    boxed: list[set[tuple[int, int]]] = []
    pruned_lines: list[tuple[int, int, int]] = []  # (layer, display i, display j)
    n_live = 0
    maps, disp_width, ghosts = layout.maps, layout.width, layout.ghosts
    for l in range(len(width) - 1):
        live = []
        for j in range(width[l + 1]):
            for i in range(width[l]):
                if curves.masks[l][j, i] > 0 and i not in dead[l] and j not in dead[l + 1]:
                    live.append((i, j, float(norm[l][j, i])))
                elif show_pruned:
                    pruned_lines.append((l, maps[l][i], maps[l + 1][j]))
        n_live += len(live)
        live.sort(key=lambda e: -e[2])
        drawn.append(live[:max_edges])
        boxed.append({(i, j) for i, j, _ in live[:max_insets]})
        if show_pruned:
            for di in range(disp_width[l]):
                for dj in range(disp_width[l + 1]):
                    if di in ghosts[l] or dj in ghosts[l + 1]:
                        pruned_lines.append((l, di, dj))
    return _EdgePlan(drawn, boxed, pruned_lines, n_live)


def _canvas(plan: _EdgePlan, layout: _Layout, n_layers: int) -> tuple[Any, Any, float]:
    """The figure, its bare axes and their width ``span``, sized to the widest row of nodes or boxes."""
    from kansym.plot._mpl import new_figure

    n_rows = max(max((len(b) for b in plan.boxed), default=1), 1)
    span = float(np.clip(0.55 * max(n_rows, 1.3 * max(layout.width)), 4.0, 16.0))
    fig = new_figure(span + 0.6, 1.9 * n_layers + 1.1)
    ax = fig.add_axes((0.02, 0.02, 0.96, 0.86))
    ax.set_xlim(0, span)
    ax.set_ylim(-0.45, n_layers + 0.45)
    ax.axis("off")
    return fig, ax, span


def _draw_pruned_lines(ax: Any, pruned_lines: list[tuple[int, int, int]], node_x: list[np.ndarray]) -> None:
    """The removed edges as grey dashed lines between display nodes."""
    from matplotlib.collections import LineCollection

    if pruned_lines:
        segs = [[(node_x[l][i], l), (node_x[l + 1][j], l + 1)] for l, i, j in pruned_lines]
        ax.add_collection(LineCollection(segs, colors="0.75", linewidths=0.6, linestyles="--", zorder=1))


def _draw_edges(ax: Any, curves: EdgeCurves, plan: _EdgePlan, pos: list[list[float]], *, span: float, beta: float,
                fits: Mapping[EdgeId, EdgeFit]) -> int:
    """Every drawn live edge, layer by layer, the boxed ones through a picture; returns the number of pictures."""
    from matplotlib.collections import LineCollection

    n_insets = 0
    for l in range(len(plan.drawn)):
        with_box = sorted((e for e in plan.drawn[l] if (e[0], e[1]) in plan.boxed[l]),
                          key=lambda e: (pos[l][e[0]] + pos[l + 1][e[1]], e[0]))
        box_w = min(0.8 * span / max(len(with_box), 1), 0.9)
        bx = _xs(len(with_box), span)
        segs, alphas = [], []
        for b, (i, j, a) in enumerate(with_box):
            alpha = float(np.tanh(beta * a))
            y0, y1 = l + 0.5 - BOX_H / 2, l + 0.5 + BOX_H / 2
            segs += [[(pos[l][i], l), (bx[b], y0)], [(bx[b], y1), (pos[l + 1][j], l + 1)]]
            alphas += [alpha, alpha]
            _draw_inset(ax, curves, (l, i, j), bx[b], box_w, alpha)
            fit = fits.get((l, i, j))
            if fit is not None:  # beside the box when there is room, else above it
                beside = span / max(len(with_box), 1) - box_w >= 0.45
                ax.text(bx[b] + box_w / 2 + 0.04 if beside else bx[b], l + 0.5 if beside else y1 + 0.015, fit.primitive,
                        ha="left" if beside else "center", va="center" if beside else "bottom", fontsize=8, color="darkred",
                        zorder=5, bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8})
            n_insets += 1
        for i, j, a in plan.drawn[l]:
            if (i, j) not in plan.boxed[l]:
                segs.append([(pos[l][i], l), (pos[l + 1][j], l + 1)])
                alphas.append(float(np.tanh(beta * a)))
        if segs:
            colors = [(0.0, 0.0, 0.0, a) for a in alphas]
            ax.add_collection(LineCollection(segs, colors=colors, linewidths=1.0, zorder=2))
    return n_insets


def _draw_inset(ax: Any, curves: EdgeCurves, edge: EdgeId, x: float, box_w: float, alpha: float) -> None:
    """The box of edge ``(l, i, j)`` centred at ``x``, with its function drawn to fill it."""
    from matplotlib.patches import Rectangle

    l, i, j = edge
    y0 = l + 0.5 - BOX_H / 2
    ax.add_patch(Rectangle((x - box_w / 2, y0), box_w, BOX_H, fill=True, facecolor="white",
                           edgecolor=(0, 0, 0, max(alpha, 0.15)), lw=0.8, zorder=3))
    g, v = curves.grid[l][:, i], curves.values[l][:, j, i]
    gu = (g - g.min()) / max(float(np.ptp(g)), 1e-300)
    rng = float(np.ptp(v))
    vu = (v - v.min()) / rng if rng > 1e-9 * max(1.0, float(np.abs(v).max())) else np.full_like(v, 0.5)
    ax.plot(x - box_w / 2 + box_w * (0.1 + 0.8 * gu), y0 + BOX_H * (0.12 + 0.76 * vu),
            color="black", alpha=alpha, lw=1.2, zorder=4)


def _draw_nodes(ax: Any, layout: _Layout, node_x: list[np.ndarray]) -> None:
    """The kept nodes as black dots, the pruned-away ones as hollow grey circles."""
    for l, w in enumerate(layout.width):
        live_nodes = set(layout.maps[l]) - layout.ghosts[l]
        xs_live = [node_x[l][k] for k in sorted(live_nodes)]
        xs_ghost = [node_x[l][k] for k in sorted(layout.ghosts[l])]
        ax.scatter(xs_live, [l] * len(xs_live), s=40 if w <= 24 else 10, color="black", zorder=6)
        if xs_ghost:
            ax.scatter(xs_ghost, [l] * len(xs_ghost), s=40, facecolors="white", edgecolors="0.6", zorder=6)


def _title(width: list[int], plan: _EdgePlan, n_insets: int, *, beta: float, max_edges: int, show_pruned: bool) -> str:
    """The figure's two-line title: what was drawn, then how to read it."""
    n_drawn, n_live = plan.n_drawn, plan.n_live
    title = f"KAN {width}: {n_drawn} of {n_live} live edges drawn"
    if n_drawn < n_live:
        title += f" (the strongest {max_edges} per layer)"
    if n_insets < n_drawn:
        title += f", {n_insets} with their function"
    sub = f"opacity tanh({beta:g}\u00b7A), A = edge L1 score / layer max"
    if show_pruned:
        sub += f"; pruned parts grey ({len(plan.pruned_lines)} edges)"
    return f"{title}\n{sub}"
def _labels(ax: Any, bundle: Any, width: list[int], pos: list[list[float]]) -> None:
    """CSV names under the inputs and over the outputs (rotated when a layer is crowded)."""
    last = len(width) - 1
    for l, va, dy in ((0, "top", -0.1), (last, "bottom", 0.1)):
        crowded = width[l] > 8
        for k in range(width[l]):
            ax.text(pos[l][k], l + dy, node_name(bundle, l, k), ha="center" if not crowded else "right" if l == 0 else "left",
                    va=va, fontsize=9 if not crowded else 6, rotation=0 if not crowded else 60, rotation_mode="anchor", zorder=7)
