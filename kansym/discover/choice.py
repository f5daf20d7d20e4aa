"""The choice of the answer: the KAN's formula or the searches' candidates, never a formula with numeric edges (docs/algorithms.md §7b).

:func:`choose_formula` scores each on the held-out rows by
:func:`~kansym.symbolic.direct.selection_score` under the verification rules, then lets a
candidate that is significantly more accurate on the same rows, with no more fitted
constants and at most a few more nodes, take the place of the score's choice.

A formula with numeric edges is never the answer: the best closed form replaces it or stands beside it.

An edge that fits no primitive stays a numeric curve of the model (``phi_l_i_j``,
:mod:`kansym.symbolic.fit`). The formula holding it evaluates like the model, so it
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
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kansym.deadline import Deadline, time_is_up
from kansym.discover.result import R2_GAP, Formula, ClosedForm
from kansym.symbolic.compose import lambdify_formula, predictions
from kansym.symbolic.direct import SIGNIFICANT_NODES, DirectCandidate, selection_score
from kansym.symbolic.export import to_latex
from kansym.symbolic.parse import identifiers, rename_symbols
from kansym.symbolic.fit import edge_labels
from kansym.symbolic.pareto import expression_complexity, pareto_front
from kansym.symbolic.refine import exact_as_floats, refine
from kansym.symbolic.verify import fidelity, nrmse, paired_gain, r2_score

__all__ = ['choose_formula', 'DIRECT_MARGIN', 'SIGNIFICANT_Z', 'settle_partial', 'closed', 'answer_lines',
    'report_lines', 'rows_label', 'identifier_names', 'printed_expressions']

log = logging.getLogger("kansym")


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
        pred = predictions(expr, kan.symbols, rows)
        with np.errstate(all="ignore"):
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


MAX_COMPLEXITY = 200  # closed forms larger than this are not refined (sympy's rewrites grow with them)


def closed(expr: sympy.Expr) -> bool:
    """Whether ``expr`` is a closed form: no opaque (numeric-edge) function in it."""
    return not sympy.sympify(expr).atoms(AppliedUndef)


def _held_out_r2(expr: sympy.Expr, symbols: Sequence[sympy.Symbol], x: np.ndarray, y: np.ndarray) -> float:
    return r2_score(y, predictions(expr, symbols, x), nonfinite="-inf")


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
    """``{column: identifier}`` of the formula's symbols (:func:`kansym.symbolic.parse.identifiers`):
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
