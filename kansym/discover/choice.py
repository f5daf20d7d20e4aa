"""The choice between the KAN's formula and the searches' candidates (docs/algorithms.md §7b).

:func:`choose_formula` scores each on the held-out rows by
:func:`~kansym.symbolic.direct.selection_score` under the verification rules, then lets a
candidate that is significantly more accurate on the same rows, with no more fitted
constants and at most a few more nodes, take the place of the score's choice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import sympy

from kansym.discover.result import R2_GAP, Formula
from kansym.symbolic.compose import lambdify_formula
from kansym.symbolic.direct import SIGNIFICANT_NODES, DirectCandidate, selection_score
from kansym.symbolic.pareto import expression_complexity, pareto_front
from kansym.symbolic.verify import fidelity, nrmse, paired_gain, r2_score

__all__ = ["choose_formula", "DIRECT_MARGIN", "SIGNIFICANT_Z"]

DIRECT_MARGIN = 0.5  # score lead a direct-search formula needs over a verified KAN formula
SIGNIFICANT_Z = 4.0  # standard errors of the paired test (paired_gain) that make a formula more accurate


@dataclass(frozen=True)
class _Option:
    """One formula as the choice sees it: its score, held-out R² and residuals (of the logs in log space)."""

    expr: sympy.Expr
    origin: str
    structure: dict | None
    score: float
    r2: float
    residual: np.ndarray

    @property
    def floats(self) -> int:
        return len(self.expr.atoms(sympy.Float))

    @property
    def complexity(self) -> int:
        return expression_complexity(self.expr)


def _significantly_better(best: _Option | None, options: list[_Option]) -> tuple[_Option | None, str | None]:
    """While an option with no more fitted constants and at most ``SIGNIFICANT_NODES`` more nodes
    has squared errors below ``best``'s by more than ``SIGNIFICANT_Z`` standard errors of the
    paired difference, the most accurate such option; and why (None: ``best`` stands)."""
    why = None
    while best is not None:
        better = [(o, paired_gain(o.residual, best.residual)) for o in options
                  if o.floats <= best.floats and o.complexity <= best.complexity + SIGNIFICANT_NODES]
        better = [(o, z) for o, z in better if z > SIGNIFICANT_Z]
        if not better:
            break
        best, z = min(better, key=lambda oz: (float(np.mean(oz[0].residual ** 2)), oz[0].complexity, str(oz[0].expr)))
        why = f"squared errors {z:.1f} standard errors below the score's choice's, row by row, no more fitted constants"
    return best, why


def choose_formula(kan: Formula, direct: Sequence[DirectCandidate], weight: float, x: np.ndarray, y: np.ndarray,
                   y_model: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, *, log_space: bool = False) -> Formula:
    """The KAN's formula or a direct-search candidate, whichever has the lowest
    :func:`~kansym.symbolic.direct.selection_score` (normalised RMS error on the held-out
    rows, complexity); the Pareto front lists both kinds. With ``log_space`` (a model that
    learned in log units: a positive target over decades) the error is that of ``log y``, so
    that the largest values do not hide a misfit of the small ones (Kepler's periods: a law
    without the primary's mass reaches R² 0.99999 in days on the planets and misses the moons).

    A verified KAN formula (no :attr:`Formula.warning`) is displaced by a formula that is
    not simpler only with a score lower by ``DIRECT_MARGIN`` (a 10**0.5-fold smaller
    error at equal complexity): on real measurements a few free exponents of the direct
    search fit the data's systematics slightly better than the KAN's snapped law
    (Kepler's ``M**0.5016`` against ``sqrt(M)``). Nor is it ever displaced by a candidate
    whose held-out R² is more than ``R2_GAP`` below the model's (the verification rule),
    whatever the weight. A candidate without a variable, or whose held-out R² is not above
    0, is never chosen (its low complexity could outweigh the error of an unverified KAN
    formula: a Feynman law with units at noise 0.01 printed ``0``).

    At the noise floor a law and a close approximation of it differ by a few % of error,
    less than the score's price of one node (``2 pi/x - 1/2`` for ``1/(exp(x/(2 pi)) - 1)``:
    1 % in RMS error, one node less). So, while a formula with no more fitted constants and
    at most ``SIGNIFICANT_NODES`` more nodes has squared errors below the choice's on the
    rows by more than ``SIGNIFICANT_Z`` standard errors of the paired difference
    (:func:`~kansym.symbolic.verify.paired_gain`), the most accurate such formula is chosen
    instead. The test runs on the held-out rows and the fitting rows ``x, y`` together: the
    constants of both were fitted on the latter, and a formula with no more of them that fits
    those rows better owes that to no extra freedom. The returned formula's ``origin`` and ``reason`` say which won and why.
    """
    rows, target, n_test = np.concatenate([x_test, x]), np.concatenate([y_test, y]), len(y_test)

    def option(expr: sympy.Expr, origin: str, structure: dict | None) -> _Option | None:
        with np.errstate(all="ignore"):
            pred = np.broadcast_to(np.asarray(lambdify_formula(expr, kan.symbols)(rows), dtype=np.float64),
                                   target.shape)
            if not np.all(np.isfinite(pred[:n_test])):
                return None
            error, residual = nrmse(y_test, pred[:n_test]), pred - target
            if log_space:  # a target over decades: the error of the units the model learned in
                positive = bool(np.all(pred > 0))
                error = nrmse(np.log(y_test), np.log(pred[:n_test])) if positive else math.inf
                residual = np.log(pred) - np.log(target) if positive else np.full(target.shape, np.inf)
        return _Option(expr, origin, structure, selection_score(error, expression_complexity(expr), weight),
                       r2_score(y_test, pred[:n_test], nonfinite="-inf"), residual)

    def on_kan_symbols(expr: sympy.Expr) -> sympy.Expr:
        return expr.xreplace({s: t for s in expr.free_symbols for t in kan.symbols if s.name == t.name})

    kan_option = option(kan.expr, kan.origin, kan.structure)
    kan_score = math.inf if kan_option is None else kan_option.score
    kan_complexity = expression_complexity(kan.expr)
    options = []
    for c in direct:
        o = option(on_kan_symbols(c.expr), c.origin, c.structure)
        if o is None or not (o.r2 > 0 and o.expr.free_symbols):
            continue  # a constant, or no better than the mean: explains nothing (a timed-out search's "0")
        if not kan.warning and o.r2 < kan.r2_model_test - R2_GAP:
            continue  # never trade a verified formula for one that fails verification (e.g. a heavy weight's constant)
        options.append(o)
    best, best_score = kan_option, math.inf
    for o in options:
        margin = 0.0 if kan.warning or o.complexity < kan_complexity else DIRECT_MARGIN
        if o.score < min(best_score, kan_score - margin) - 1e-12:
            best, best_score = o, o.score
    best, why = _significantly_better(best, options + ([] if kan_option is None else [kan_option]))
    if best is None or best is kan_option:
        return kan
    others = [e.expr for e in kan.front] + [kan.expr] + [on_kan_symbols(c.expr) for c in direct]
    front = pareto_front(others, best.expr, kan.symbols, x_test, y_test)
    why = why or ("the KAN's formula is not verified" if kan.warning else
                  f"selection score {best.score:.3f} < {kan_score:.3f} (log10 error + {weight:g} x complexity)")
    reason = (f"{best.origin}: {best.expr} (R² {best.r2:.6g}, complexity {best.complexity}) chosen over the "
              f"KAN's formula (R² {kan.r2_test:.6g}, complexity {kan_complexity}): {why}")
    return Formula(expr=best.expr, raw=kan.raw, symbols=kan.symbols,
                   fidelity=fidelity(lambdify_formula(best.expr, kan.symbols), x, y, y_model), target=kan.target,
                   candidates=kan.candidates, r2_test=next(e.r2 for e in front if e.chosen),
                   r2_model_test=kan.r2_model_test, n_test=kan.n_test, front=front, origin=best.origin,
                   structure=best.structure, reason=reason)
