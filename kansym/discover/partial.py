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

:func:`answer_lines` and :func:`report_lines` are the one wording of the answer: ``kansym
fit`` prints them and :class:`kansym.KANRegressor` gives them (``summary()``, its warning),
so the two never disagree on what the formula is.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import replace
from typing import Sequence

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kansym.deadline import Deadline, time_is_up
from kansym.discover.result import R2_GAP, ClosedForm, Formula
from kansym.symbolic.compose import lambdify_formula
from kansym.symbolic.direct import DirectCandidate
from kansym.symbolic.export import to_latex
from kansym.symbolic.names import identifiers, rename_symbols
from kansym.symbolic.numeric import edge_labels
from kansym.symbolic.pareto import expression_complexity, pareto_front
from kansym.symbolic.refine import exact_as_floats, refine
from kansym.symbolic.verify import fidelity, r2_score

__all__ = ["settle_partial", "closed", "answer_lines", "report_lines", "rows_label", "identifier_names",
           "printed_expressions"]

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
                   noise: float | None = None, deadline: Deadline | None = None) -> Formula:
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
    loss_space, noise, deadline
        As :func:`kansym.symbolic.refine.refine` (the closed form is refined until ``deadline``;
        once it has expired, not at all).
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
        pool.setdefault(str(e), (e, c.origin))
    scored = [(_held_out_r2(e, symbols, x_test, y_test), -expression_complexity(e), key, e, origin)
              for key, (e, origin) in sorted(pool.items())]
    scored = [s for s in scored if math.isfinite(s[0])]
    if not scored:
        log.info("%s: the formula keeps numeric edges and no closed form was found", formula.target)
        return formula
    r2, _, _, best, origin = max(scored, key=lambda s: (round(s[0], 9), s[1], s[2]))
    if expression_complexity(best) <= MAX_COMPLEXITY and not time_is_up(deadline):
        try:  # its exact numbers decided again, against this floor (the direct search's may be laxer)
            fine = refine(exact_as_floats(best), symbols, x, y, loss_space=loss_space, noise=noise, deadline=deadline)
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


def rows_label(formula: Formula) -> str:
    """Which rows :attr:`Formula.r2_test` is on: ``"held-out, N rows"`` or ``"fitting rows"``."""
    return f"held-out, {formula.n_test} rows" if formula.n_test else "fitting rows"


def answer_lines(formula: Formula) -> list[str]:
    """The answer as ``kansym fit`` prints it, one string a line.

    A closed form: ``target = <latex>`` and ``sympy: <expr>``. A partial formula (numeric
    edges) is never on such a line, which a reader could copy as the law, and its text is
    not printed at all (an opaque function inside a printed formula is worse than "not
    found"): the first line says that no closed form was verified, the second gives the
    best closed form found (:attr:`Formula.closed_form`) with its R², or says there is
    none, the third says where the partial formula is kept (:attr:`Formula.expr`,
    ``formula.json``'s ``sympy``, the comments of ``formula.tex``).

    Examples
    --------
    >>> import sympy
    >>> from kansym.discover.result import Formula
    >>> from kansym.symbolic.verify import Fidelity
    >>> x = sympy.Symbol("x")
    >>> f = Formula(expr=2 * x, raw=2 * x, symbols=(x,), fidelity=Fidelity(1.0, 1.0, 0.0, 0.0), target="y")
    >>> answer_lines(f)
    ['y = 2 x', 'sympy: 2*x']
    """
    f = formula
    on_idents = identifier_names(f)
    mapped = "" if all(k == v for k, v in on_idents.items()) else \
        f"   symbols: {json.dumps({v: k for k, v in on_idents.items()}, ensure_ascii=False)}"

    def text(expr: sympy.Expr) -> str:  # identifiers, as formula.json writes them: the text parses back
        return str(rename_symbols(expr, on_idents))
    if not f.partial:
        return [f"{f.target} = {to_latex(f.expr)}", f"sympy: {text(f.expr)}{mapped}"]
    edges = edge_labels(f.numeric_edges)  # the name in formula.json, and the edge as the log names it
    c = f.closed_form
    best = ("best closed form found: none" if c is None else
            f"best closed form found (not verified: R² ({rows_label(f)}) = {c.r2_test:.6f}, "
            f"model's {f.r2_model_test:.6f}): {text(c.expr)}")
    return [f"{f.target}: no closed form was verified (edges {edges} fit no primitive)", best,
            f"partial formula (R² below are its): not printed, as {', '.join(f.numeric_edges)} are numeric curves "
            "of the model, "
            "not functions; it is kept in formula.json ('sympy') and Formula.expr"]


def printed_expressions(formula: Formula) -> list[sympy.Expr]:
    """Every expression :func:`report_lines` and the Pareto table of ``kansym fit`` print for
    ``formula``, in printing order: the formula (or, for a partial one, its best closed form,
    if any), then the front's entries without numeric edges (those are counted, not printed:
    :func:`kansym.cli.report.pareto_table`). ``bench/feynman.py`` checks these for junk
    (its ``formula_guard``)."""
    head = [formula.closed_form.expr] if formula.partial and formula.closed_form is not None else \
        ([] if formula.partial else [formula.expr])
    return head + [e.expr for e in formula.front if closed(e.expr)]


def identifier_names(formula: Formula) -> dict[str, str]:
    """``{column: identifier}`` of the formula's symbols (:func:`kansym.symbolic.names.identifiers`):
    the printed ``sympy`` text names columns as ``formula.json`` does."""
    columns = [s.name for s in formula.symbols]
    return dict(zip(columns, identifiers(columns)))


def report_lines(formula: Formula) -> list[str]:
    """:func:`answer_lines`, then the R² line (the formula's and the model's on the rows of
    :func:`rows_label`, the fitting rows' and the agreement with the model) and, when the
    formula is no verified answer, a ``WARNING`` line (:attr:`Formula.warning`)."""
    f, where = formula, rows_label(formula)
    lines = answer_lines(f) + [
        f"R² ({where}) = {f.r2_test:.6f}   model R² ({where}) = {f.r2_model_test:.6f}   "
        f"R² (data) = {f.fidelity.r2_data:.6f}   R² (vs model) = {f.fidelity.r2_model:.6f}"]
    if f.warning:
        lines.append(f"WARNING: not a verified answer: {f.warning}")
    return lines
