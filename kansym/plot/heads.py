"""Pictures of attention heads: score-matrix heatmaps (before/after reordering) and ablation importance.

Takes the :class:`kansym.gpt.head_report.LayerHeads` that
:func:`kansym.gpt.head_report.analyse_heads` measures; matplotlib is imported only
when a function is called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["HeadPlot", "plot_head_matrices", "plot_head_importance"]

_TITLES = {"frobenius": "Frobenius (seed)", "principal": "principal mean cos²", "principal_max": "principal max cos",
           "js": "attention JS similarity"}


@dataclass(frozen=True)
class HeadPlot:
    """A head figure.

    Attributes
    ----------
    figure : matplotlib.figure.Figure
    n_panels : int
        Heatmaps or bar groups drawn.
    """

    figure: Any
    n_panels: int


def plot_head_matrices(report: Sequence, orders: Mapping[int, Sequence[int]] | None = None, title: str = "") -> HeadPlot:
    """Heatmaps of every layer's head matrices (rows: layers; columns: metrics).

    Parameters
    ----------
    report : sequence of LayerHeads
    orders : mapping layer -> permutation of the stored heads, optional
        Show the heads in this order (e.g. :func:`kansym.gpt.head_report.reorder_by`);
        tick labels are the original head indices.
    title : str

    Returns
    -------
    HeadPlot
    """
    from kansym.plot._mpl import new_figure

    names = [n for n in _TITLES if getattr(report[0], n) is not None]
    fig = new_figure(2.6 * len(names) + 0.8, 2.4 * len(report) + 0.6)
    axes = np.atleast_2d(fig.subplots(len(report), len(names), squeeze=False))
    image = None
    for row, r in zip(axes, report):
        perm = list(orders[r.layer]) if orders and r.layer in orders else list(range(len(r.head_order)))
        labels = [str(r.head_order[s]) for s in perm]
        for ax, name in zip(row, names):
            m = getattr(r, name).detach().cpu().numpy()[np.ix_(perm, perm)]  # (H, H)
            image = ax.imshow(m, vmin=0.0, vmax=1.0, cmap="viridis")
            ax.set_xticks(range(len(perm)), labels, fontsize=7)
            ax.set_yticks(range(len(perm)), labels, fontsize=7)
            ax.set_title(f"layer {r.layer}: {_TITLES[name]}", fontsize=8)
            for i in range(len(perm)):
                for j in range(len(perm)):
                    ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=6, color="w" if m[i, j] < 0.6 else "k")
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6)
    if title:
        fig.suptitle(title, fontsize=10)
    return HeadPlot(fig, axes.size)


def plot_head_importance(report: Sequence) -> HeadPlot:
    """Bar chart of each head's ablation importance (held-out loss increase), grouped by layer.

    Raises
    ------
    ConfigError
        If the report was measured without text (no importance).
    """
    from kansym.errors import ConfigError
    from kansym.plot._mpl import new_figure

    if any(r.importance is None for r in report):
        raise ConfigError("head importance needs text; give --text")
    H = len(report[0].head_order)
    fig = new_figure(max(5.0, 0.35 * H * len(report) + 1.5), 3.2)
    ax = fig.subplots()
    for k, r in enumerate(report):
        x = k * (H + 1) + np.arange(H)
        ax.bar(x, r.importance.detach().cpu().numpy(), color=f"C{k % 10}", label=f"layer {r.layer}")
    ticks = [k * (H + 1) + h for k in range(len(report)) for h in range(H)]
    ax.set_xticks(ticks, [str(r.head_order[h]) for r in report for h in range(H)], fontsize=7)
    ax.axhline(0.0, color="0.3", lw=0.8)
    ax.set_xlabel("head (original index), grouped by layer")
    ax.set_ylabel("Δ held-out loss when zeroed (nats/char)")
    ax.legend(fontsize=7, ncol=min(len(report), 4))
    ax.set_title("ablation importance (Michel et al. 2019)", fontsize=10)
    return HeadPlot(fig, len(report))
