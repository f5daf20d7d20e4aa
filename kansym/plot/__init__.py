"""Pictures of KANs and of the formulas found with them (matplotlib, imported lazily).

- :func:`plot_diagram` — the network: nodes per layer, each live edge with its function.
- :func:`plot_edge` — one edge: its spline, its symbolic fit, the data under it.
- :func:`plot_report` — the formula against the data and the model; the Pareto front.
- :func:`plot_curves` — training and fine-tuning curves from a checkpoint's history.
- :func:`plot_head_matrices`, :func:`plot_head_importance` — KAN-GPT attention heads.
- :func:`save_figure` — write a figure as PNG, PDF or SVG (from the suffix), atomically.

Each ``plot_*`` returns a small frozen result with the ``figure`` and what was drawn
(e.g. ``plot_diagram(...).n_edges_drawn``). Figures are built with
``matplotlib.figure.Figure`` (no pyplot), so no display is needed; nothing here
imports matplotlib until a function is called.

Examples
--------
>>> from kansym.io.bundle import ModelBundle  # doctest: +SKIP
>>> from kansym.plot import plot_diagram, save_figure  # doctest: +SKIP
>>> result = plot_diagram(ModelBundle.load("out/pruned.pt"))  # doctest: +SKIP
>>> save_figure(result.figure, "diagram.png")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "plot_diagram", "DiagramResult", "plot_edge", "EdgePlot", "edge_curves",
    "plot_report", "ReportResult", "plot_curves", "CurvesResult",
    "plot_head_matrices", "plot_head_importance", "HeadPlot", "save_figure", "ensure_backend",
]

_WHERE = {
    "plot_diagram": "diagram", "DiagramResult": "diagram",
    "plot_edge": "edges", "EdgePlot": "edges", "edge_curves": "edges",
    "plot_report": "report", "ReportResult": "report",
    "plot_curves": "curves", "CurvesResult": "curves",
    "plot_head_matrices": "heads", "plot_head_importance": "heads", "HeadPlot": "heads",
    "save_figure": "_mpl", "ensure_backend": "_mpl",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"kansym.plot.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'kansym.plot' has no attribute {name!r}")
