"""Edge functions of a KAN: their sampled curves, scores, fits, and the single-edge plot.

The curves are evaluated through :meth:`KANLayer.edge_outputs` on the layer inputs
that the data produce (``model.trace``), never on state cached by a forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from kansym.graph.build import check_edge
from kansym.symbolic.fit import EdgeFit
from kansym.symbolic.verify import r2_score

__all__ = ["EdgeCurves", "edge_curves", "plot_edge", "EdgePlot"]

EdgeId = tuple[int, int, int]  # (layer, i_in, j_out)


@dataclass(frozen=True)
class EdgeCurves:
    """Every edge function of a KAN sampled over the range its data reach.

    Attributes
    ----------
    grid : list of ndarray (n, in_l)
        Per layer, evenly spaced layer inputs spanning the data range (model units).
    values : list of ndarray (n, out_l, in_l)
        ``phi_ji`` at ``grid``.
    samples : list of ndarray (N, in_l)
        The layer inputs on the data rows.
    scores : list of ndarray (out_l, in_l)
        ``|phi_ji|_1 = mean_s |phi_ji(x_s)|`` on the data (KAN paper eq. 2.17); masked edges 0.
    masks : list of ndarray (out_l, in_l)
        The layers' masks (0 = removed edge).
    """

    grid: list[np.ndarray]
    values: list[np.ndarray]
    samples: list[np.ndarray]
    scores: list[np.ndarray]
    masks: list[np.ndarray]

    def normalised_scores(self) -> list[np.ndarray]:
        """Scores divided by their layer's largest score (0 where a layer is all zero)."""
        out = []
        for s in self.scores:
            top = float(s.max()) if s.size else 0.0
            out.append(s / top if top > 0 else np.zeros_like(s))
        return out


@torch.no_grad()
def edge_curves(model: Any, x: torch.Tensor, n: int = 64) -> EdgeCurves:
    """Sample every edge of ``model`` over its data range.

    Parameters
    ----------
    model : KAN
    x : Tensor (N, in)
        Model-unit inputs (e.g. ``bundle.model_inputs()``).
    n : int
        Points per curve.

    Returns
    -------
    EdgeCurves
    """
    from kansym.plot._mpl import dense_inputs
    from kansym.train.regularization import edge_l1

    trace = model.trace(x)
    scores = [s.double().cpu().numpy() for s in edge_l1(trace)]
    grid, values, samples, masks = [], [], [], []
    for layer, lt in zip(model.layers, trace.layers):
        xs = lt.inputs.double().cpu().numpy()  # (N, in)
        g = dense_inputs(xs, n)  # (n, in)
        v = layer.edge_outputs(torch.as_tensor(g, dtype=lt.inputs.dtype))  # (n, out, in)
        grid.append(g)
        values.append(v.double().cpu().numpy())
        samples.append(xs)
        masks.append(layer.mask.double().cpu().numpy())
    return EdgeCurves(grid, values, samples, scores, masks)


def node_name(bundle: Any, layer: int, index: int) -> str:
    """Name of node ``index`` of ``layer``: the CSV column for inputs/outputs, else ``h{layer}.{index}``."""
    width = bundle.model.width
    if layer == 0 and index < len(bundle.input_names):
        return str(bundle.input_names[index])
    if layer == len(width) - 1 and index < len(bundle.output_names):
        return str(bundle.output_names[index])
    return f"h{layer}.{index}"


@dataclass(frozen=True)
class EdgePlot:
    """What :func:`plot_edge` drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure
    edge : (layer, i_in, j_out)
    fit : EdgeFit or None
        The symbolic fit overlaid (given, or fitted here).
    r2 : float or None
        R² of the fit against the learned function on the data rows.
    """

    figure: Any
    edge: EdgeId
    fit: EdgeFit | None
    r2: float | None


def plot_edge(
    bundle: Any,
    edge: Sequence[int],
    *,
    fits: Mapping[EdgeId, EdgeFit] | None = None,
    fit_if_missing: bool = True,
    x: np.ndarray | None = None,
) -> EdgePlot:
    """One edge's learned function, its symbolic fit and the data it sees.

    Top: the spline ``phi_ji`` over the data range with the samples on it and the fit
    ``c f(a x + b) + d`` dashed. Bottom: histogram of the edge's input on the data.
    The title gives the primitive and R² of the fit against the spline on the data.

    Parameters
    ----------
    bundle : ModelBundle
    edge : (layer, i_in, j_out)
    fits : mapping, optional
        Edge fits (e.g. :meth:`kansym.discover.record.FormulaRecord.edge_fits`); the edge's fit is overlaid.
    fit_if_missing : bool
        Without a given fit, fit the edge here (:func:`kansym.symbolic.fit.select_edge_fit`).
    x : ndarray (N, d_in), optional
        CSV-unit data rows (default: the bundle's calibration rows).

    Returns
    -------
    EdgePlot

    Raises
    ------
    ConfigError
        If the edge lies outside the model.
    """
    from kansym.plot._mpl import edge_label, new_figure

    layer, i, j = check_edge(edge, bundle.model.width)
    curves = edge_curves(bundle.model, bundle.model_inputs(x))
    gx, gy = curves.grid[layer][:, i], curves.values[layer][:, j, i]
    sx = curves.samples[layer][:, i]
    order = np.argsort(sx)
    with torch.no_grad():
        lyr = bundle.model.layers[layer]
        xin = torch.zeros(len(sx), lyr.in_features, dtype=lyr.coef.dtype)
        xin[:, i] = torch.as_tensor(sx, dtype=lyr.coef.dtype)
        sy = lyr.edge_outputs(xin)[:, j, i].double().numpy()  # phi_ji on the data
    fit = (fits or {}).get((layer, i, j))
    if fit is None and fit_if_missing and float(np.ptp(sx)) > 0:
        from kansym.symbolic.fit import select_edge_fit

        fit, _ = select_edge_fit(sx, sy)
    r2 = r2_score(sy, fit.numpy(sx), nonfinite="-inf") if fit is not None else None

    fig = new_figure(6.0, 4.6)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1], "hspace": 0.08})
    top.plot(gx, gy, color="black", lw=2, label="learned spline")
    top.plot(sx[order][:: max(1, len(sx) // 300)], sy[order][:: max(1, len(sx) // 300)], ".", ms=3, color="tab:blue", alpha=0.5, label="data")
    if fit is not None:
        top.plot(gx, fit.numpy(gx), "--", color="tab:red", lw=1.6, label=f"fit: {fit.primitive}")
    top.set_ylabel("\u03c6(x)")
    top.legend(fontsize=8, loc="best")
    src, dst = node_name(bundle, layer, i), node_name(bundle, layer + 1, j)
    title = f"edge {edge_label((layer, i, j))}  ({src} \u2192 {dst})"
    if fit is not None:
        title += f"\n{fit.primitive}, R\u00b2 = {r2:.6f}" if np.isfinite(r2) else f"\n{fit.primitive}, R\u00b2 = -inf"
    top.set_title(title, fontsize=10)
    bottom.hist(sx, bins=40, color="tab:gray")
    bottom.set_ylabel("rows")
    bottom.set_xlabel(f"{src} (model units)" if layer == 0 else f"{src} (node value)")
    return EdgePlot(fig, (layer, i, j), fit, r2)
