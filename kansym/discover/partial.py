"""A formula with numeric edges is never the answer: the best closed form replaces it or stands beside it.

An edge that fits no primitive stays a numeric curve of the model (``phi_l_i_j``,
:mod:`kansym.symbolic.numeric`). The formula holding it evaluates like the model, so it
can pass an R² check, but it is no law: a reader who copies it copies an opaque function.
:func:`settle_partial` therefore looks, among every closed form the run produced (the
formulas the Occam step tried, the raw composition, the direct search's candidates), for
the most accurate one on the held-out rows (ties: the simpler), refines its constants
(:func:`kansym.symbolic.refine.refine`) and

- returns it as the formula when it passes the verification (held-out R² within
  ``R2_GAP`` of the model's and above 0): a verified closed form is an answer, a partial
  formula is not;
- otherwise keeps the partial formula, with that closed form and its R² attached
  (:attr:`~kansym.discover.result.Formula.closed_form`), so the record and the printed
  output can say that no closed form was verified and show the best one found.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import Sequence

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kansym.discover.result import R2_GAP, ClosedForm, Formula
from kansym.symbolic.compose import lambdify_formula
from kansym.symbolic.direct import DirectCandidate
from kansym.symbolic.pareto import expression_complexity, pareto_front
from kansym.symbolic.refine import refine
from kansym.symbolic.verify import fidelity, r2_score

__all__ = ["settle_partial", "closed"]

log = logging.getLogger("kansym")

MAX_COMPLEXITY = 200  # closed forms larger than this are not refined (sympy's rewrites grow with them)


def closed(expr: sympy.Expr) -> bool:
    """Whether ``expr`` is a closed form: no opaque (numeric-edge) function in it."""
    return not sympy.sympify(expr).atoms(AppliedUndef)


def _held_out_r2(expr: sympy.Expr, symbols: Sequence[sympy.Symbol], x: np.ndarray, y: np.ndarray) -> float:
    try:
        with np.errstate(all="ignore"):
            pred = np.broadcast_to(np.asarray(lambdify_formula(expr, symbols)(x), dtype=np.float64), y.shape)
    except (TypeError, ValueError, NameError, ZeroDivisionError, OverflowError):
        return -math.inf
    return r2_score(y, pred, nonfinite="-inf")


def settle_partial(formula: Formula, direct: Sequence[DirectCandidate] | None, x: np.ndarray, y: np.ndarray,
                   y_model: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, *, loss_space: str = "linear",
                   noise: float | None = None) -> Formula:
    """``formula`` unchanged when it is a closed form; else the verified best closed form, or
    ``formula`` with the best closed form attached (module docstring).

    Parameters
    ----------
    formula : Formula
    direct : sequence of DirectCandidate, optional
        The direct search's candidates (on ``formula.symbols``' names).
    x, y, y_model : ndarray (N, d), (N,), (N,)
        Fitting rows (the refit of the closed form, its fidelity) and the model's predictions there.
    x_test, y_test : ndarray
        The rows ``formula`` was verified on (held out when there are some).
    loss_space, noise
        As :func:`kansym.symbolic.refine.refine`.
    """
    if not formula.partial:
        return formula
    symbols = formula.symbols
    by_name = {s.name: s for s in symbols}
    pool: dict[str, tuple[sympy.Expr, str]] = {}
    for e in [c.expr for c in formula.candidates] + [e.expr for e in formula.front] + [formula.raw]:
        if closed(e):
            pool.setdefault(str(e), (e, "kan"))
    for c in direct or ():
        e = c.expr.xreplace({s: by_name[s.name] for s in c.expr.free_symbols if s.name in by_name})
        pool.setdefault(str(e), (e, "direct search"))
    scored = [(_held_out_r2(e, symbols, x_test, y_test), -expression_complexity(e), key, e, origin)
              for key, (e, origin) in sorted(pool.items())]
    scored = [s for s in scored if math.isfinite(s[0])]
    if not scored:
        log.info("%s: the formula keeps numeric edges and no closed form was found", formula.target)
        return formula
    r2, _, _, best, origin = max(scored, key=lambda s: (round(s[0], 9), s[1], s[2]))
    if origin == "kan" and expression_complexity(best) <= MAX_COMPLEXITY:
        try:
            fine = refine(best, symbols, x, y, loss_space=loss_space, noise=noise)
        except (ValueError, ArithmeticError, TypeError) as exc:  # a refit that fails keeps the candidate
            log.debug("refining the best closed form failed (%s)", exc)
            fine = best
        fine_r2 = _held_out_r2(fine, symbols, x_test, y_test)
        if fine_r2 >= r2 - 1e-6:
            best, r2 = fine, fine_r2
    complexity = expression_complexity(best)
    if r2 > 0 and r2 >= formula.r2_model_test - R2_GAP:
        front = pareto_front([e.expr for e in formula.front] + [formula.expr], best, symbols, x_test, y_test)
        reason = (f"the KAN's formula keeps numeric edges ({', '.join(formula.numeric_edges)}): a partial "
                  f"formula is no answer; the best closed form ({origin}, R² {r2:.6g}, complexity {complexity}) "
                  "passes the verification")
        return replace(formula, expr=best, fidelity=fidelity(lambdify_formula(best, symbols), x, y, y_model),
                       r2_test=next(e.r2 for e in front if e.chosen), front=front, origin=origin, reason=reason,
                       closed_form=None)
    return replace(formula, closed_form=ClosedForm(best, r2, complexity, origin))
