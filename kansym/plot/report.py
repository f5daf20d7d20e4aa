"""The formula report: the discovered law against the data, next to the model.

Panels: predicted vs observed for the formula and for the KAN, the residuals of both
against each input, and the complexity/error trade-off of the formulas the Occam
step tried (:func:`kansym.symbolic.occam.simplify_edges`) with the chosen one marked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from kansym.errors import DataError

__all__ = ["ReportResult", "plot_report", "pareto_mask"]

MAX_RESIDUAL_PANELS = 8


@dataclass(frozen=True)
class ReportResult:
    """What :func:`plot_report` drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure
    formula : sympy.Expr
        The formula drawn (CSV units and names).
    n_front : int
        Formulas on the complexity/error panel (0 without a front).
    n_residual_panels : int
        Inputs whose residual panel was drawn.
    """

    figure: Any
    formula: Any
    n_front: int
    n_residual_panels: int


def pareto_mask(complexity: np.ndarray, error: np.ndarray) -> np.ndarray:
    """Boolean mask of the points no other point beats in both complexity and error."""
    c, e = np.asarray(complexity, float), np.asarray(error, float)
    keep = np.ones(len(c), dtype=bool)
    for k in range(len(c)):
        dominated = (c <= c[k]) & (e <= e[k]) & ((c < c[k]) | (e < e[k]))
        keep[k] = not bool(dominated.any())
    return keep


def _diagonal(ax: Any, obs: np.ndarray, pred: np.ndarray, title: str, log: bool, color: str) -> None:
    ok = np.isfinite(pred) & (pred > 0 if log else True)
    ax.scatter(obs[ok], pred[ok], s=5, alpha=0.5, color=color)
    lo, hi = float(np.min(obs)), float(np.max(obs))
    ax.plot([lo, hi], [lo, hi], color="black", lw=0.8)
    if log and lo > 0:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("observed")
    ax.set_ylabel("predicted")
    ax.set_title(title, fontsize=9)


def plot_report(
    bundle: Any,
    formula: Any,
    *,
    front: Sequence[Any] | None = None,
    x: np.ndarray | None = None,
    y: np.ndarray | None = None,
    output: int = 0,
) -> ReportResult:
    """Draw the formula report of a bundled model.

    Parameters
    ----------
    bundle : ModelBundle
        Usually the pruned model.
    formula : sympy.Expr
        In CSV names and units (:attr:`kansym.discover.result.Formula.expr`, or
        :meth:`kansym.discover.record.FormulaRecord.expr`).
    front : sequence of FrontEntry, Candidate or dict, optional
        Either the pipeline's final front (:attr:`kansym.discover.result.Formula.front`, or
        that of a record read back, :meth:`kansym.discover.record.FormulaRecord.formula`:
        entries with ``chosen``; the answer starred) or the Occam step's candidates
        (:func:`kansym.discover.stages.occam_candidates`: entries with ``accepted``; its last
        accepted one starred as "Occam step's choice", which refinement may still change).
        Drawn as expression complexity vs error with the Pareto front. Dict entries (with
        ``complexity``, ``error`` and the flag) are drawn at their stored complexity: their
        formula text is never parsed.
    x, y : ndarray, optional
        CSV-unit rows ``(N, d_in)``, ``(N, d_out)`` (default: the calibration rows).
    output : int
        Which output the formula predicts.

    Returns
    -------
    ReportResult

    Raises
    ------
    DataError
        If ``output`` is not an output of the model, or the formula fails on the data.
    """
    from kansym.plot._mpl import new_figure
    from kansym.symbolic.compose import formula_values, input_symbols
    from kansym.symbolic.verify import r2_score

    if not 0 <= output < len(bundle.output_names):
        raise DataError(f"output {output} does not exist; the model has {len(bundle.output_names)} output(s)")
    x = bundle.x_cal if x is None else x
    y = bundle.y_cal if y is None else y
    symbols = input_symbols(bundle.input_names, positive=bundle.transform.log_space)
    f_pred = formula_values(formula, symbols, x)
    m_pred = bundle.predict(x)[:, output]
    obs = y[:, output]
    log = bool(bundle.transform.log_space) and bool(np.all(obs > 0))
    d_in = x.shape[1]
    n_res = min(d_in, MAX_RESIDUAL_PANELS)
    ncols = max(3, min(n_res, 4))
    nrows = 1 + -(-n_res // ncols)
    fig = new_figure(3.4 * ncols, 3.0 * nrows + 0.6)
    gs = fig.add_gridspec(nrows, ncols, hspace=0.55, wspace=0.45)
    target = bundle.output_names[output]
    _diagonal(fig.add_subplot(gs[0, 0]), obs, f_pred, f"formula: R\u00b2 = {r2_score(obs, f_pred):.6f}", log, "tab:red")
    _diagonal(fig.add_subplot(gs[0, 1]), obs, m_pred, f"KAN: R\u00b2 = {r2_score(obs, m_pred):.6f}", log, "tab:blue")
    n_front = _front_panel(fig.add_subplot(gs[0, 2]), front)
    with np.errstate(all="ignore"):
        res_f = f_pred / obs - 1.0 if log else f_pred - obs
        res_m = m_pred / obs - 1.0 if log else m_pred - obs
    for k in range(n_res):
        _residual_panel(fig.add_subplot(gs[1 + k // ncols, k % ncols]), x[:, k], str(bundle.input_names[k]),
                        res_f, res_m, log=log, legend=k == 0)
    title = f"{target} = {_short(formula)}"
    if n_res < d_in:
        title += f"\n(residuals against the first {n_res} of {d_in} inputs)"
    fig.suptitle(title, fontsize=10)
    return ReportResult(fig, formula, n_front, n_res)


def _residual_panel(ax: Any, xk: np.ndarray, name: str, res_f: np.ndarray, res_m: np.ndarray, *, log: bool,
                    legend: bool) -> None:
    """The residuals of the KAN and of the formula against one input, ``xk``."""
    ax.scatter(xk, res_m, s=4, alpha=0.4, color="tab:blue", label="KAN")
    ax.scatter(xk, res_f, s=4, alpha=0.5, color="tab:red", label="formula")
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xlabel(name)
    ax.set_ylabel("relative residual" if log else "residual")
    if log and np.all(xk > 0) and xk.max() > 100 * xk.min():
        ax.set_xscale("log")
    if legend:
        ax.legend(fontsize=7, markerscale=2)


def _short(expr: Any, limit: int = 110) -> str:
    import sympy

    # round the floats only, so exact exponents such as 3/2 stay exact
    text = str(expr.xreplace({f: sympy.Float(f, 4) for f in expr.atoms(sympy.Float)}))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _complexity(entry: Any, get: Any) -> float:
    """The entry's expression-tree complexity (:func:`kansym.symbolic.pareto.expression_complexity`, the measure
    of the CLI's Pareto front) when it carries an expression, else its stored ``complexity``. A dict's formula
    text is never parsed here (``sympify`` of a string runs Python): :mod:`kansym.discover.record` parses a
    record's formulas, and its entries come here as expressions."""
    from kansym.symbolic.pareto import expression_complexity

    expr = None if isinstance(entry, Mapping) else getattr(entry, "expr", None)
    if expr is None or isinstance(expr, str):
        return float(get(entry, "complexity"))
    return float(expression_complexity(expr))


def _flag(entry: Any, key: str) -> bool | None:
    """``entry[key]`` (a dict) or ``entry.key`` as a bool; None when the entry has no such field."""
    value = entry.get(key) if isinstance(entry, Mapping) else getattr(entry, key, None)
    return None if value is None else bool(value)


def _front_panel(ax: Any, front: Sequence[Any] | None) -> int:
    """Complexity vs error of the tried formulas; the Pareto front joined; the choice starred."""
    from matplotlib.ticker import MaxNLocator
    if not front:
        ax.text(0.5, 0.5, "no Pareto front recorded\n(kansym plot --kind report --front searches one)", ha="center", va="center",
                transform=ax.transAxes, fontsize=8, color="0.4")
        ax.set_axis_off()
        return 0

    def get(c: Any, key: str) -> Any:
        return c[key] if isinstance(c, Mapping) else getattr(c, key)

    comp = np.array([_complexity(c, get) for c in front])
    err = np.array([float(get(c, "error")) for c in front])
    ok = np.isfinite(err)
    floor = max(float(err[ok & (err > 0)].min()) if (ok & (err > 0)).any() else 1e-12, 1e-16)
    err_plot = np.where(ok, np.maximum(err, floor), np.nan)
    ax.scatter(comp, err_plot, s=18, color="0.6", label="tried")
    pm = pareto_mask(comp[ok], err_plot[ok])
    pc, pe = comp[ok][pm], err_plot[ok][pm]
    order = np.argsort(pc)
    ax.step(pc[order], pe[order], where="post", color="tab:purple", lw=1.2, label="Pareto front")
    # the pipeline's final front marks its answer "chosen"; the Occam step's candidates mark the formulas it
    # moved to "accepted" (its last one is refined and snapped afterwards, so it is not the final formula)
    final = any(_flag(c, "chosen") is not None for c in front)
    picked = [k for k, c in enumerate(front) if _flag(c, "chosen" if final else "accepted")]
    if picked:
        k = picked[-1]
        ax.scatter([comp[k]], [err_plot[k]], marker="*", s=160, color="gold", edgecolor="black", zorder=5,
                   label="chosen" if final else "Occam step's choice")
    span = np.nanmax(err_plot) / np.nanmin(err_plot) if ok.any() else 1.0
    if span >= 10:  # a log axis only where the errors span a decade: else its minor labels crowd the panel
        ax.set_yscale("log")
    else:
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # complexities are whole numbers
    ax.margins(x=0.12, y=0.12)  # the star of an extreme formula stays inside the frame
    ax.set_xlabel("complexity (expression nodes)")
    ax.set_ylabel("normalised RMS error")
    ax.set_title("Pareto front of the answer" if final else "formulas tried", fontsize=9, pad=12 if span < 10 else 6)
    ax.legend(fontsize=7)
    return len(front)
