"""Discovery on columns of extreme magnitude: the results of the working units in the table's.

:func:`kansym.discover.run.discover` (and ``train``, and ``symbolify_bundle``) rescale the
columns of extreme magnitude by exact powers of two (:class:`kansym.io.magnitude.ColumnScales`),
run every stage on those rows, and move what they produced back here, once:

- each :class:`~kansym.discover.result.Formula` (the answer, the raw composition, the
  Occam step's candidates, the Pareto front, the closed form beside a partial formula) becomes ``y = 2**k_y g(2**-k_x x)``; R² and
  normalised errors are unit-free and stay, absolute errors are multiplied by ``2**k_y``,
  complexities stay those of the law found (a unit factor is no part of it);
- models (trained, pruned, symbolic) get the transform of the table's units and their
  calibration rows back, so a saved checkpoint predicts the table's units;
- the formula is then evaluated in float64 in the table's units on the fitting rows: if it
  overflows there, or no longer reproduces its own R² (a constant beyond float64, say a
  factor 1e600 between a target near 1e307 and an input near 1e-300),
  :class:`~kansym.errors.DataError` says so in one sentence instead of returning an
  ``inf``, ``nan`` or ``0`` answer.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import Sequence

import numpy as np
import sympy

from kansym.discover.result import Discovery, Formula, RunInterrupted
from kansym.errors import DataError
from kansym.io.magnitude import ColumnScales
from kansym.symbolic.compose import SymbolicKAN, lambdify_formula
from kansym.symbolic.verify import Fidelity, r2_score

__all__ = ["ColumnScales", "working_scales", "formula_to_table", "discovery_to_table", "symbolic_to_table",
           "interrupted_to_table", "check_representable", "REPRESENTABLE_R2_SLACK"]

log = logging.getLogger("kansym")

REPRESENTABLE_R2_SLACK = 1e-6  # R² the formula may lose to float64 rounding when evaluated in the table's units


def working_scales(x: np.ndarray, y: np.ndarray, input_names: Sequence[str], output_names: Sequence[str],
                   space: str = "auto") -> ColumnScales:
    """The scales of the table (:meth:`ColumnScales.fit`), with a log line naming the rescaled
    columns (if any)."""
    scales = ColumnScales.fit(x, y, space)
    if not scales.identity:
        what = "columns of extreme magnitude are searched in exact power-of-two units" if any(scales.x_exp) or any(
            scales.y_exp) else "a target negative on every row is searched with its sign turned"
        log.info("%s (%s); the formula is written back in the table's units", what,
                 scales.describe(input_names, output_names))
    return scales


def formula_to_table(f: Formula, scales: ColumnScales, output: int = 0) -> Formula:
    """A formula of the working units in the table's units (see the module docstring)."""
    if scales.identity:
        return f
    symbols = list(f.symbols)

    def back(e: sympy.Expr) -> sympy.Expr:
        # 12 significant digits: the last ones of a refit's float (2.50000000000005e+306) are the
        # arithmetic's, not the data's; the power-of-two map itself is exact
        e = scales.expr_to_table(e, symbols, output)
        return e.xreplace({c: sympy.Float(float(f"{float(c):.12g}")) for c in e.atoms(sympy.Float)})

    expr = back(f.expr)
    fid = f.fidelity
    fid = Fidelity(fid.r2_data, fid.r2_model, scales.error_to_table(fid.max_abs_err, output),
                   scales.error_to_table(fid.rmse, output))
    reason = f.reason.replace(str(f.expr), str(expr)) if f.reason else f.reason
    closed = None if f.closed_form is None else replace(f.closed_form, expr=back(f.closed_form.expr))
    return replace(f, expr=expr, raw=back(f.raw), fidelity=fid, reason=reason,
                   candidates=tuple(replace(c, expr=back(c.expr)) for c in f.candidates),
                   front=tuple(replace(e, expr=back(e.expr)) for e in f.front), closed_form=closed)


def symbolic_to_table(sym: SymbolicKAN | None, scales: ColumnScales) -> SymbolicKAN | None:
    """The symbolic network with the transform of the table's units."""
    if sym is None or scales.identity:
        return sym
    return replace(sym, transform=scales.transform_to_table(sym.transform))


def discovery_to_table(d: Discovery, scales: ColumnScales, x: np.ndarray, y: np.ndarray) -> Discovery:
    """A whole discovery in the table's units, its formulas checked on the fitting rows ``x, y``
    in the table's units (the rows their R² was measured on; :func:`check_representable`)."""
    if scales.identity:
        return d
    formulas = tuple(formula_to_table(f, scales, k) for k, f in enumerate(d.formulas))
    for k, f in enumerate(formulas):
        check_representable(f, x, y[:, k], scales)
    return replace(d, trained=scales.bundle_to_table(d.trained), pruned=scales.bundle_to_table(d.pruned),
                   symbolic=symbolic_to_table(d.symbolic, scales), formulas=formulas)


def interrupted_to_table(stop: RunInterrupted, scales: ColumnScales) -> RunInterrupted:
    """The same interruption, its resumable bundle in the table's units."""
    if scales.identity or stop.bundle is None:
        return stop
    return RunInterrupted(str(stop), bundle=scales.bundle_to_table(stop.bundle), state=stop.state, stage=stop.stage)


def check_representable(f: Formula, x: np.ndarray, y: np.ndarray, scales: ColumnScales) -> None:
    """Refuse a formula that float64 cannot evaluate in the table's units.

    ``f`` (in the table's units) is evaluated on the table's rows ``x``; it must be finite
    there and reach its own R² (found in the working units) within
    :data:`REPRESENTABLE_R2_SLACK`.

    Raises
    ------
    DataError
        One sentence naming the target, the rescaled columns and what to do.
    """
    if not math.isfinite(f.fidelity.r2_data) or f.numeric_edges:
        return  # nothing to keep: the formula is already reported as unverified
    with np.errstate(all="ignore"):
        try:
            pred = lambdify_formula(f.expr, f.symbols)(np.asarray(x, dtype=np.float64))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            pred = np.full(len(y), np.nan)
    finite = bool(np.all(np.isfinite(pred)))
    r2 = r2_score(y, pred, nonfinite="-inf")
    if finite and r2 >= f.fidelity.r2_data - REPRESENTABLE_R2_SLACK:
        return
    why = "overflows to inf or nan" if not finite else f"gives R² {r2:.4g} instead of {f.fidelity.r2_data:.6g}"
    names = [s.name for s in f.symbols]
    text = str(f.expr) if len(str(f.expr)) <= 120 else str(f.expr)[:117] + "..."
    raise DataError(
        f"the law of {f.target} was found on the table rescaled by powers of two "
        f"({scales.describe(names, [f.target])}), but written in the table's own units it {why} in float64 "
        f"({text}); express those columns in units nearer 1 and fit again"
    )
