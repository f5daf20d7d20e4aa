"""The choice of the answer: the KAN's formula or the searches' candidates, never a formula with numeric edges (docs/algorithms.md §7b).

One choice, one test. :func:`choose` is the one function that picks a formula among
candidates (:class:`~kansym.symbolic.direct.DirectCandidate`, the one view of a formula: its
expression, origin, complexity, fitted constants, error, R² and residuals) and says why: the
lowest :func:`~kansym.symbolic.direct.selection_score`, then any candidate
:func:`significantly_better` than that (the one significance test, paired on the residuals).
Every place that decides between formulas calls it: :func:`choose_formula` (the KAN's formula
against the searches' candidates, on the held-out rows), :func:`settle_partial` (the closed
form that replaces a partial formula), :func:`kept_run` (the additive shortcut's formula or
the hidden-layer KAN's, the screened columns' or every column's, the monomial with a constant
or the dimensionless groups' formula), :func:`verified_or` (the columns' formula after the
groups' did not verify), the search on the groups weighted by the monomial
(:func:`kansym.discover.dimensional.weighted_search`). The Occam step's BIC
(:mod:`kansym.symbolic.occam`) simplifies the edges inside the KAN's formula before it is a
candidate here; it is no choice of the answer. PySR's own pick
(:func:`kansym.discover.pysr.pysr_best`) is a reading of PySR's output, not a choice of kansym's.

A formula with numeric edges is never the answer: the best closed form replaces it or stands beside it.

An edge that fits no primitive stays a numeric curve of the model (``phi_l_i_j``,
:mod:`kansym.symbolic.fit`). The formula holding it evaluates like the model, so it
can pass an R² check, but it is no law: a reader who copies it copies an opaque function.
:func:`settle_partial` therefore looks, among every closed form the run produced (the
formulas the Occam step tried, the raw composition, the direct search's candidates), for
the most accurate one on the held-out rows (:func:`choose` with complexity weight 0, R² equal to
9 digits a tie: the simpler), refines its constants
(:func:`kansym.symbolic.refine.refine`) and

- returns it as the formula when it passes the verification (held-out R² within
  ``R2_GAP`` of the model's and above 0): a verified closed form is an answer, a partial
  formula is not;
- otherwise keeps the partial formula, with that closed form and its R² attached
  (:attr:`~kansym.discover.result.Formula.closed_form`), so the record and the printed
  output can say that no closed form was verified and show the best one found.

How the answer is worded (printed, summarised) is :mod:`kansym.discover.wording`'s.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kansym.config import R2_TOLERANCE
from kansym.deadline import Deadline, time_is_up
from kansym.discover.result import R2_GAP, ClosedForm, Discovery, Formula
from kansym.symbolic.compose import lambdify_formula, predictions
from kansym.symbolic.direct import ERROR_FLOOR, DirectCandidate, selection_score
from kansym.symbolic.pareto import expression_complexity, pareto_front
from kansym.symbolic.refine import exact_as_floats, refine
from kansym.symbolic.verify import fidelity, nrmse, r2_score

__all__ = ['choose', 'significantly_better', 'paired_gain', 'choose_formula', 'kept_run', 'verified_or', 'DIRECT_MARGIN',
    'SIGNIFICANT_Z', 'SIGNIFICANT_NODES', 'RUN_TIE', 'PARTIAL_TIE', 'settle_partial', 'closed']

log = logging.getLogger("kansym")


DIRECT_MARGIN = 0.5  # score lead a direct-search formula needs over a verified KAN formula
SIGNIFICANT_Z = 4.0  # standard errors of the paired test (paired_gain) that make a formula more accurate
SIGNIFICANT_NODES = 2  # ... and a formula that much more accurate wins with up to this many more nodes
RUN_TIE = math.sqrt(5e-7)  # errors below this tie between two KANs' formulas (R² equal to 6 digits: >= 0.9999995)
PARTIAL_TIE = math.sqrt(5e-10)  # ... and between the closed forms that may replace a partial formula (9 digits)

Residual = Callable[[DirectCandidate], np.ndarray]


def paired_gain(residual: Any, than: Any) -> float:
    """How many standard errors the squared residuals of one formula lie below another's on
    the same rows: the Diebold-Mariano statistic of the loss differential ``than² - residual²``
    (Diebold & Mariano 1995, J. Bus. Econ. Stat. 13, 253, "Comparing predictive accuracy").

    Both formulas see the same noise on the same rows, so the difference of their squared
    errors is far more precise than either: on 2000 held-out rows with 1 % noise a law whose
    RMS error is 1 % below an approximation's is tens of standard errors better, while a
    ratio of two sums of squares taken as independent cannot tell them apart.

    Parameters
    ----------
    residual, than : array_like (N,)
        Residuals (prediction minus target, any units) of the two formulas on the same rows.

    Returns
    -------
    float
        ``mean(d) / (std(d) / sqrt(N))`` with ``d = than² - residual²`` over the rows where both
        are finite; ``inf`` when ``d`` is a positive constant, 0 with fewer than 2 such rows,
        ``-inf`` when ``residual`` is not finite on some row where ``than`` is.
    """
    a, b = (np.asarray(r, dtype=np.float64).ravel() for r in (residual, than))
    if np.any(~np.isfinite(a) & np.isfinite(b)):
        return -math.inf
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 2:
        return 0.0
    with np.errstate(all="ignore"):
        d = b[ok] ** 2 - a[ok] ** 2
        mean, se = float(np.mean(d)), float(np.std(d, ddof=1)) / math.sqrt(d.size)
    if not se > 0:
        return math.inf if mean > 0 else 0.0
    return mean / se


def significantly_better(candidate: DirectCandidate, than: DirectCandidate, residual: Residual | None = None, *,
                         any_size: bool = False) -> float | None:
    """The one test of "formula A describes the rows significantly better than formula B".

    ``candidate`` qualifies when it has no more fitted constants
    (:attr:`~kansym.symbolic.direct.DirectCandidate.floats`) and at most ``SIGNIFICANT_NODES``
    more nodes than ``than`` (with ``any_size``, whatever its constants and nodes: a doubt about
    ``than``, not a choice); it is significantly better when its squared errors lie below
    ``than``'s by more than ``SIGNIFICANT_Z`` standard errors of their paired difference, row by
    row (:func:`paired_gain`, the Diebold-Mariano test, Diebold & Mariano 1995, J. Bus. Econ.
    Stat. 13, 253). A formula with no more fitted constants that fits the same rows better owes
    that to no extra freedom.

    Why this test and no other: at the noise floor a law and a close approximation of it differ
    by a few % of error. Both formulas see the same noise on the same rows, so the difference of
    their squared errors row by row is far more precise than either sum. The F-type ratio of two
    error sums used before in the search on the groups (Draper & Smith 1998, *Applied Regression
    Analysis*, §2.6) treats the sums as independent and needed a gain of ``4 sqrt(2/N)`` (6 % on
    8,000 rows) where the paired test resolves 1 %. Its one cost is the residuals, one evaluation
    of each formula on the rows: the constants and nodes are checked first, so only the few
    candidates that could win are evaluated, and the direct search's thousands of raw subsets
    never come here (they are ranked by :func:`~kansym.symbolic.direct.selection_score` alone).

    Parameters
    ----------
    candidate, than : DirectCandidate
    residual : callable, optional
        ``candidate -> residual (N,)`` on the rows of the test (prediction minus target, any
        units, the same for both); default the candidates' own ``residual``.
    any_size : bool

    Returns
    -------
    float or None
        The paired statistic (above ``SIGNIFICANT_Z``) when ``candidate`` is significantly
        better, else None.

    Raises
    ------
    ValueError
        Neither ``residual`` nor the candidates give a residual.
    """
    if not any_size and (candidate.floats > than.floats or candidate.complexity > than.complexity + SIGNIFICANT_NODES):
        return None
    get = residual or _own_residual
    z = paired_gain(get(candidate), get(than))
    return z if z > SIGNIFICANT_Z else None


def _own_residual(c: DirectCandidate) -> np.ndarray:
    if c.residual is None:
        raise ValueError(f"{c.expr}: no residual to test its significance on")
    return c.residual


def choose(candidates: Sequence[DirectCandidate], complexity_weight: float, *,
           incumbent: DirectCandidate | None = None, margin: float = 0.0, floor: float = ERROR_FLOOR,
           residual: Residual | None = None) -> tuple[DirectCandidate | None, str]:
    """The one choice of the answer among formulas, and why (docs/algorithms.md §7c "Choice").

    1. The score: the lowest :func:`~kansym.symbolic.direct.selection_score` of each
       candidate's error raised to ``floor`` and its complexity (ties: the simpler, then by
       text). With an ``incumbent`` (the KAN's verified formula, a formula found before), a
       challenger that is not simpler than it takes its place only with a score lower by
       ``margin``; the incumbent wins ties.
    2. The significance: while a candidate is :func:`significantly_better` than the choice (no
       more fitted constants, at most ``SIGNIFICANT_NODES`` more nodes, squared errors lower by
       ``SIGNIFICANT_Z`` standard errors row by row), the one of least mean squared residual
       among those (ties: the simpler, then by text) is chosen instead. At the noise floor a law
       and a close approximation differ by less than the score's price of one node
       (``2 pi/x - 1/2`` for ``1/(exp(x/(2 pi)) - 1)``: 1 % in RMS error, one node less); each
       step lowers the error, so a law two nodes above an approximation that is itself two nodes
       above the score's choice is reached in two steps. This step runs when residuals are
       given (``residual``, or every candidate's own).

    Parameters
    ----------
    candidates : sequence of DirectCandidate
        The formulas, their ``error`` and ``complexity`` on the rows they are judged on.
    complexity_weight : float
        ``w`` of the score: one more node must buy a ``10**w``-fold smaller error.
    incumbent : DirectCandidate, optional
    margin : float
        Score lead a challenger not simpler than ``incumbent`` needs.
    floor : float
        Errors below it are equal (the noise floor; default
        :data:`~kansym.symbolic.direct.ERROR_FLOOR`, float64 exactness).
    residual : callable, optional
        ``candidate -> residual (N,)`` for the significance step (computed only for the
        candidates it tests, once each).

    Returns
    -------
    (DirectCandidate or None, str)
        The answer (None without candidates) and the reason, in words.
    """
    pool = ([] if incumbent is None else [incumbent]) + [c for c in candidates if c is not incumbent]
    if not pool:
        return None, "no candidate"
    score = {id(c): selection_score(max(c.error, floor), c.complexity, complexity_weight) for c in pool}
    rank = lambda c: (score[id(c)], c.complexity, str(c.expr))  # noqa: E731
    rule = f"(log10 error + {complexity_weight:g} x complexity)"
    if incumbent is None:
        best = min(pool, key=rank)
        why = f"lowest selection score {score[id(best)]:.3f} {rule}"
    else:
        lead = {id(c): 0.0 if c.complexity < incumbent.complexity else margin for c in pool}
        beat = [c for c in pool[1:] if score[id(c)] < score[id(incumbent)] - lead[id(c)] - 1e-12]
        best = min(beat, key=rank) if beat else incumbent
        why = (f"selection score {score[id(best)]:.3f} < {score[id(incumbent)]:.3f} {rule}" if beat else
               f"no selection score below the incumbent's {score[id(incumbent)]:.3f}"
               + (f" by the margin {margin:g} " if margin else " ") + rule)
    if residual is not None or all(c.residual is not None for c in pool):
        best, why = _most_significant(best, why, pool, _memo(residual or _own_residual))
    return best, why


def _memo(residual: Residual) -> Residual:
    """``residual``, each candidate's computed once (by identity: a candidate's dict may not hash)."""
    done: dict[int, np.ndarray] = {}

    def get(c: DirectCandidate) -> np.ndarray:
        if id(c) not in done:
            done[id(c)] = c.residual if c.residual is not None else residual(c)
        return done[id(c)]
    return get


def _most_significant(best: DirectCandidate, why: str, pool: Sequence[DirectCandidate],
                      residual: Residual) -> tuple[DirectCandidate, str]:
    """Step 2 of :func:`choose`: from ``best``, the significantly better candidate of least squared
    residual, while there is one (at most one step per candidate), and why."""
    for _ in pool:
        better = [(c, z) for c in pool if c is not best and (z := significantly_better(c, best, residual)) is not None]
        if not better:
            break
        with np.errstate(all="ignore"):
            best, z = min(better, key=lambda cz: (float(np.mean(residual(cz[0]) ** 2)), cz[0].complexity,
                                                  str(cz[0].expr)))
        why = f"squared errors {z:.1f} standard errors below the score's choice's, row by row, no more fitted constants"
    return best, why


def choose_formula(kan: Formula, direct: Sequence[DirectCandidate], weight: float, x: np.ndarray, y: np.ndarray,
                   y_model: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, *, log_space: bool = False) -> Formula:
    """The KAN's formula or a search's candidate, by :func:`choose` on the held-out rows; the
    Pareto front lists both kinds.

    Every formula is measured on the held-out rows (normalised RMS error, R², complexity). With
    ``log_space`` (a model that learned in log units: a positive target over decades) the error
    is that of ``log y``, so that the largest values do not hide a misfit of the small ones
    (Kepler's periods: a law without the primary's mass reaches R² 0.99999 in days on the
    planets and misses the moons).

    The KAN's formula is :func:`choose`'s incumbent. A verified one (no :attr:`Formula.warning`)
    is displaced by a formula that is not simpler only with a score lower by ``DIRECT_MARGIN`` (a
    10**0.5-fold smaller error at equal complexity): on real measurements a few free exponents
    of the direct search fit the data's systematics slightly better than the KAN's snapped law
    (Kepler's ``M**0.5016`` against ``sqrt(M)``). Nor is it ever displaced by a candidate whose
    held-out R² is more than ``R2_GAP`` below the model's (the verification rule), whatever the
    weight. A candidate without a variable, or whose held-out R² is not above 0, never competes
    (its low complexity could outweigh the error of an unverified KAN formula: a Feynman law
    with units at noise 0.01 printed ``0``).

    The significance step of :func:`choose` runs on the held-out rows and the fitting rows
    ``x, y`` together: the constants of every formula were fitted on the latter, and a formula
    with no more of them that fits those rows better owes that to no extra freedom. The returned
    formula's ``origin`` and ``reason`` say which won and why.
    """
    rows, target, n_test = np.concatenate([x_test, x]), np.concatenate([y_test, y]), len(y_test)

    def on_kan_symbols(expr: sympy.Expr) -> sympy.Expr:
        return expr.xreplace({s: t for s in expr.free_symbols for t in kan.symbols if s.name == t.name})

    def held_out(expr: sympy.Expr, origin: str, structure: dict | None) -> DirectCandidate | None:
        return _held_out(expr, origin, structure, kan.symbols, rows, target, n_test, log_space)

    kan_option = held_out(kan.expr, kan.origin, kan.structure)
    options = []
    for c in direct:
        o = held_out(on_kan_symbols(c.expr), c.origin, c.structure)
        if o is None or not (o.r2 > 0 and o.expr.free_symbols):
            continue  # a constant, or no better than the mean: explains nothing (a timed-out search's "0")
        if not kan.warning and o.r2 < kan.r2_model_test - R2_GAP:
            continue  # never trade a verified formula for one that fails verification (e.g. a heavy weight's constant)
        options.append(o)
    best, why = choose(options, weight, incumbent=kan_option, margin=0.0 if kan.warning else DIRECT_MARGIN)
    if best is None or best is kan_option:
        return kan
    others = [e.expr for e in kan.front] + [kan.expr] + [on_kan_symbols(c.expr) for c in direct]
    front = pareto_front(others, best.expr, kan.symbols, x_test, y_test)
    why = f"{why}; the KAN's formula is not verified" if kan.warning else why
    reason = (f"{best.origin}: {best.expr} (R² {best.r2:.6g}, complexity {best.complexity}) chosen over the "
              f"KAN's formula (R² {kan.r2_test:.6g}, complexity {expression_complexity(kan.expr)}): {why}")
    return Formula(expr=best.expr, raw=kan.raw, symbols=kan.symbols,
                   fidelity=fidelity(lambdify_formula(best.expr, kan.symbols), x, y, y_model), target=kan.target,
                   candidates=kan.candidates, r2_test=next(e.r2 for e in front if e.chosen),
                   r2_model_test=kan.r2_model_test, n_test=kan.n_test, front=front, origin=best.origin,
                   structure=best.structure, reason=reason)


def _held_out(expr: sympy.Expr, origin: str, structure: dict | None, symbols: Sequence[sympy.Symbol],
              rows: np.ndarray, target: np.ndarray, n_test: int, log_space: bool) -> DirectCandidate | None:
    """``expr`` as :func:`choose_formula` judges it: error and R² on the first ``n_test`` rows
    (held out), residual on all (of the logs in log space); None where it is not finite on the
    held-out rows."""
    pred = predictions(expr, symbols, rows)
    y_test = target[:n_test]
    with np.errstate(all="ignore"):
        if not np.all(np.isfinite(pred[:n_test])):
            return None
        error, residual = nrmse(y_test, pred[:n_test]), pred - target
        if log_space:  # a target over decades: the error of the units the model learned in
            positive = bool(np.all(pred > 0))
            error = nrmse(np.log(y_test), np.log(pred[:n_test])) if positive else math.inf
            residual = np.log(pred) - np.log(target) if positive else np.full(target.shape, np.inf)
    return DirectCandidate(expr, error, expression_complexity(expr), origin, structure,
                           r2=r2_score(y_test, pred[:n_test], nonfinite="-inf"), residual=residual)


def kept_run(runs: Sequence[Discovery], *, incumbent: Discovery | None = None, margin: float = 0.0,
             floor: float = RUN_TIE) -> Discovery:
    """The run whose formula is the answer, of runs on the same rows: :func:`choose` on their first
    formulas' held-out errors (``sqrt(1 - R²)``) with complexity weight 0 and errors below
    ``floor`` equal, so the more accurate and, at equal accuracy, the simpler. With an
    ``incumbent`` run, a run whose formula is not simpler than the incumbent's takes its place
    only with a score (``log10`` of the error) lower by ``margin``, and the incumbent wins ties.

    Its three uses:

    - the additive shortcut's KAN or the hidden-layer KAN trained after it
      (:func:`kansym.discover.run.discover`; ``floor`` ``RUN_TIE``, R² equal to 6 digits): the
      hidden layer was trained because the shortcut's formula was not good enough
      (unverified, or below the additive fit's R²), so its smaller size must not win it back;
    - the run on the screened columns or, the incumbent, the run on every column after a
      bring-back (:func:`kansym.discover.screen.kept_or_all`);
    - the monomial with a fitted constant, the incumbent, or the formula of the dimensionless
      groups, which must leave clearly less of the variance unexplained
      (:meth:`kansym.discover.dimensional.UnitsRun.on_groups`).
    """
    found = [_by_r2(d.formulas[0].expr, d.formulas[0].r2_test, d.formulas[0].origin) for d in runs]
    held = None if incumbent is None else _by_r2(incumbent.formulas[0].expr, incumbent.formulas[0].r2_test,
                                                  incumbent.formulas[0].origin)
    best, _ = choose(found, 0.0, incumbent=held, margin=margin, floor=floor)
    return incumbent if best is held else runs[next(i for i, c in enumerate(found) if c is best)]


def verified_or(run: Discovery, otherwise: Discovery) -> Discovery:
    """``run`` when its formula is verified (no WARNING), else ``otherwise``: whatever the scores,
    a verified formula is an answer and an unverified one is not (the verification rule of
    :func:`choose_formula`). Used after a formula of the dimensionless groups that did not
    verify (:meth:`kansym.discover.dimensional.UnitsRun.columns_too`)."""
    return run if run.formulas[0].warning is None else otherwise


def _by_r2(expr: sympy.Expr, r2: float, origin: str) -> DirectCandidate:
    """A formula known by its R² alone, as :func:`choose` sees it: error ``sqrt(1 - R²)`` (inf
    where R² is not finite; :func:`~kansym.symbolic.verify.nrmse` on the same rows, in exact arithmetic)."""
    error = math.sqrt(max(1.0 - r2, 0.0)) if math.isfinite(r2) else math.inf
    return DirectCandidate(expr, error, expression_complexity(expr), origin, r2=r2)


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
    found = [_by_r2(e, _held_out_r2(e, symbols, x_test, y_test), origin) for _, (e, origin) in sorted(pool.items())]
    found = [c for c in found if math.isfinite(c.r2)]
    if not found:
        log.info("%s: the formula keeps numeric edges and no closed form was found", formula.target)
        return formula
    chosen, _ = choose(found, 0.0, floor=PARTIAL_TIE)  # the most accurate (R² to 9 digits), then the simpler
    r2, best, origin = chosen.r2, chosen.expr, chosen.origin
    if expression_complexity(best) <= MAX_COMPLEXITY and not time_is_up(deadline):
        try:  # its exact numbers decided again, against this floor (the direct search's may be laxer)
            fine = refine(exact_as_floats(best), symbols, x, y, loss_space=loss_space, noise=noise, deadline=deadline)
        except (ValueError, ArithmeticError, TypeError) as exc:  # a refit that fails keeps the candidate
            log.debug("refining the best closed form failed (%s)", exc)
            fine = best
        fine_r2 = _held_out_r2(fine, symbols, x_test, y_test)
        if fine_r2 >= r2 - R2_TOLERANCE:
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
