"""Discovery with PySR instead of a KAN (``kansym fit --backend pysr``), verified like the KAN's.

PySR (Cranmer 2023, arXiv:2305.01582) searches whole formulas on the fitting rows; its
answer (:func:`kansym.symbolic.pysr_backend.choose_best`, PySR's ``model_selection="best"``)
is verified on the held-out rows of :func:`kansym.discover.result.split_holdout` and
returned as the same :class:`~kansym.discover.result.Formula` the KAN pipeline returns.
PySR needs Julia; it is imported lazily (:func:`kansym.symbolic.pysr_backend.import_pysr`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import sympy

from kansym.discover.result import Formula, split_holdout
from kansym.errors import FitError
from kansym.symbolic.compose import input_symbols, lambdify_formula
from kansym.symbolic.pareto import pareto_front
from kansym.symbolic.pysr_backend import PySRConfig, choose_best, import_pysr, parse_pysr_equation
from kansym.symbolic.verify import fidelity

__all__ = ["formulas_from_table", "discover_pysr"]


def formulas_from_table(table: Any, symbols: Sequence[sympy.Symbol], target: str, x: np.ndarray, y: np.ndarray,
                        x_test: np.ndarray | None = None, y_test: np.ndarray | None = None):
    """A :class:`kansym.discover.result.Formula` from PySR's ``equations_`` table (a DataFrame with
    ``complexity``, ``loss`` and ``equation`` columns).

    Parameters
    ----------
    table : pandas.DataFrame
    symbols : sequence of sympy.Symbol
        One per input column.
    x, y : ndarray (N, d), (N,)
        Fitting rows (for the fidelity).
    x_test, y_test : ndarray, optional
        Held-out rows for :attr:`Formula.r2_test` and the front; default ``x, y``.

    Raises
    ------
    FitError
        Empty table or an equation that does not parse.
    """
    if table is None or len(table) == 0:
        raise FitError("PySR returned no equation; give it more iterations")
    exprs = [parse_pysr_equation(t, symbols) for t in table["equation"]]
    best = exprs[choose_best(list(table["complexity"]), list(table["loss"]))]
    held_out = x_test is not None and y_test is not None
    xt, yt = (x_test, y_test) if held_out else (x, y)
    fid = fidelity(lambdify_formula(best, symbols), x, y)
    front = pareto_front(exprs, best, symbols, xt, yt)
    r2_test = next(e.r2 for e in front if e.chosen)
    # no model here: the formula is compared with the best equation PySR found
    r2_best = max(e.r2 for e in front)
    return Formula(expr=best, raw=best, symbols=tuple(symbols), fidelity=fid, target=target, r2_test=r2_test,
                   r2_model_test=r2_best, n_test=int(xt.shape[0]) if held_out else 0, front=front, origin="pysr")


def discover_pysr(x: np.ndarray, y: np.ndarray, input_names: Sequence[str], target: str,
                  config: PySRConfig | None = None, *, holdout: float = 0.2, seed: int = 0):
    """Run PySR on ``x (N, d)``, ``y (N,)`` and verify its answer on held-out rows.

    Returns
    -------
    kansym.discover.result.Formula

    Raises
    ------
    ConfigError, FitError
        PySR missing, Julia unavailable, or no usable equation.
    """
    config = config or PySRConfig()
    pysr = import_pysr()
    fit_idx, test_idx = split_holdout(x.shape[0], holdout, seed)
    xf, yf = x[fit_idx], y[fit_idx]
    model = pysr.PySRRegressor(
        niterations=config.niterations, maxsize=config.maxsize, binary_operators=list(config.binary_operators),
        unary_operators=list(config.unary_operators), timeout_in_seconds=config.timeout_in_seconds,
        random_state=config.seed, deterministic=True, parallelism="serial", progress=False, verbosity=0,
    )
    model.fit(xf, yf, variable_names=list(input_names))
    symbols = input_symbols(input_names)
    xt = yt = None
    if test_idx is not None:
        xt, yt = x[test_idx], y[test_idx]
    return formulas_from_table(model.equations_, symbols, target, xf, yf, xt, yt)
