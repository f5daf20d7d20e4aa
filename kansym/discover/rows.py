"""The rows of one discovery run (fitting, held out, training), what they allow, and their working units.

Discovery on columns of extreme magnitude: the results of the working units in the table's.

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
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import sympy

from kansym.config import R2_TOLERANCE
from kansym.discover.config import DiscoverConfig
from kansym.discover.result import MIN_ROWS, split_holdout, Discovery, Formula
from kansym.errors import DataError
from kansym.io.magnitude import ColumnScales
from kansym.symbolic.compose import SymbolicKAN, predictions
from kansym.symbolic.verify import Fidelity, r2_score
from kansym.train.memory import check_training_memory

__all__ = ['Rows', 'check_run', 'finetune_grid', 'ColumnScales', 'working_scales', 'formula_to_table',
    'discovery_to_table', 'symbolic_to_table', 'check_representable']

log = logging.getLogger("kansym")


@dataclass(frozen=True)
class Rows:
    """The rows of one discovery run, CSV units.

    Attributes
    ----------
    x, y : ndarray (N, d_in), (N, d_out)
        Fitting rows: symbolification, refinement and the fidelity use them all.
    x_test, y_test : ndarray or None
        Held-out rows (:func:`~kansym.discover.result.split_holdout`) on which the
        formula is verified against the model; None when the table is too small.
    x_train, y_train : ndarray
        The fitting rows the KAN trains on (at most ``max_train_rows`` of them, seeded).
    """

    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray | None
    y_test: np.ndarray | None
    x_train: np.ndarray
    y_train: np.ndarray

    @classmethod
    def split(cls, x: np.ndarray, y: np.ndarray, config: DiscoverConfig) -> "Rows":
        """Hold out ``config.holdout`` of the rows and cap the training rows (both seeded)."""
        fit_idx, test_idx = split_holdout(x.shape[0], config.holdout, config.seed)
        x_test = y_test = None
        if test_idx is not None:
            x_test, y_test = x[test_idx], y[test_idx]
            x, y = x[fit_idx], y[fit_idx]
        x_train, y_train = x, y
        if config.max_train_rows is not None and x.shape[0] > config.max_train_rows:
            sub = np.sort(np.random.default_rng([config.seed, 11]).choice(x.shape[0], config.max_train_rows,
                                                                          replace=False))
            x_train, y_train = x[sub], y[sub]
        return cls(x, y, x_test, y_test, x_train, y_train)

    def sizes(self, config: DiscoverConfig) -> str:
        """The rows each stage really uses, in words (for the log)."""
        n_fit, n_test = self.x.shape[0], 0 if self.x_test is None else self.x_test.shape[0]
        n_val = int(round(self.x_train.shape[0] * config.train.val_fraction))
        held = f"{n_fit} fitting + {n_test} held out (verification)" if n_test else f"{n_fit} fitting, none held out"
        return (f"rows: {n_fit + n_test} = {held}; the KAN trains on {self.x_train.shape[0]} of the fitting rows "
                f"({n_val} of them validate; max_train_rows {config.max_train_rows}); symbolic fits and refinement "
                f"use up to {n_fit}")


def check_run(n_rows: int, d_in: int, d_out: int, config: DiscoverConfig, *, holdout: bool = True) -> None:
    """Refuse at once what a run would refuse later: too few rows, or a training that would
    not fit in memory (:func:`kansym.train.memory.check_training_memory`).

    Parameters
    ----------
    n_rows, d_in, d_out : int
        The table's shape.
    holdout : bool
        Whether rows are held out as :func:`discover` does (False for :func:`train`).

    Raises
    ------
    DataError, ConfigError
    """
    if n_rows < MIN_ROWS:
        raise DataError(f"kansym needs at least {MIN_ROWS} rows to train and validate a KAN, got {n_rows}")
    test = split_holdout(n_rows, config.holdout, config.seed)[1] if holdout else None
    n_fit = n_rows - (0 if test is None else len(test))
    n_train = n_fit if config.max_train_rows is None else min(n_fit, config.max_train_rows)
    check_training_memory((d_in, *config.hidden, d_out), config.grid_size, config.spline_order, n_train)
    grid = finetune_grid(config, n_train)
    if grid:
        check_training_memory((d_in, *config.hidden, d_out), grid, config.spline_order, n_train)


def finetune_grid(config: DiscoverConfig, n_rows: int) -> int | None:
    """The polishing grid, never finer than about 20 rows per interval (small tables overfit)."""
    if not config.finetune_grid_size:
        return None
    return max(config.spline_order, min(config.finetune_grid_size, n_rows // 20))




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


def check_representable(f: Formula, x: np.ndarray, y: np.ndarray, scales: ColumnScales) -> None:
    """Refuse a formula that float64 cannot evaluate in the table's units.

    ``f`` (in the table's units) is evaluated on the table's rows ``x``; it must be finite
    there and reach its own R² (found in the working units) within
    :data:`~kansym.config.R2_TOLERANCE`.

    Raises
    ------
    DataError
        One sentence naming the target, the rescaled columns and what to do.
    """
    if not math.isfinite(f.fidelity.r2_data) or f.numeric_edges:
        return  # nothing to keep: the formula is already reported as unverified
    pred = predictions(f.expr, f.symbols, x)
    finite = bool(np.all(np.isfinite(pred)))
    r2 = r2_score(y, pred, nonfinite="-inf")
    if finite and r2 >= f.fidelity.r2_data - R2_TOLERANCE:
        return
    why = "overflows to inf or nan" if not finite else f"gives R² {r2:.4g} instead of {f.fidelity.r2_data:.6g}"
    names = [s.name for s in f.symbols]
    text = str(f.expr) if len(str(f.expr)) <= 120 else str(f.expr)[:117] + "..."
    raise DataError(
        f"the law of {f.target} was found on the table rescaled by powers of two "
        f"({scales.describe(names, [f.target])}), but written in the table's own units it {why} in float64 "
        f"({text}); express those columns in units nearer 1 and fit again"
    )
