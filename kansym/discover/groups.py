"""The formulas of a discovery on dimensionless groups, in the columns: mapped back, weighted, re-verified.

After :func:`kansym.discover.dimensional.discover_with_units` has reduced a law to ``y = prod x^p
* f(pi_1, ..., pi_k)`` and discovered ``f`` on the groups, :func:`map_back` writes each formula in
the original columns and verifies it there (R², residual tests on the columns, on the groups and on
the groups weighted as in the target), and :func:`weighted_search` searches the groups once more
with each row weighted by its monomial: ``y / prod x^p`` carries the target's noise divided by
the monomial (docs/algorithms.md, "Dimensional analysis").
"""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kansym.deadline import Deadline, time_is_up
from kansym.discover.config import DiscoverConfig
from kansym.discover.result import ClosedForm, Discovery, Formula
from kansym.discover.structure import interaction_error
from kansym.discover.symbolify import wants_direct_search
from kansym.discover.units import Reduction
from kansym.symbolic.compose import input_symbols, lambdify_formula
from kansym.symbolic.direct import choose_significant, direct_search, selection_score, significantly_better
from kansym.symbolic.pareto import expression_complexity, pareto_front
from kansym.symbolic.refine import simplify_formula
from kansym.symbolic.residuals import ResidualTest, residual_test
from kansym.symbolic.verify import fidelity, nrmse, r2_score

__all__ = ["map_back", "weighted_search", "weighted_group_residuals", "monomial_size", "predict"]

log = logging.getLogger("kansym")

WEIGHTED_REFINE_TOP = 8  # raw candidates the weighted search refines (noisy rows: the law may rank 5th raw)
MONOMIAL_SPREAD = 1.5  # a monomial whose size varies less over the rows leaves the groups' search as it is


def predict(expr: sympy.Expr, symbols, x: np.ndarray) -> np.ndarray:
    """``expr`` on the rows ``x (N, d)`` of its ``symbols`` (NumPy's warnings off: the callers check finiteness)."""
    with np.errstate(all="ignore"):
        return lambdify_formula(expr, symbols)(x)


def weighted_search(g, yp, red: Reduction, res: Discovery, found: Formula, x, yv, fit_idx, test_idx, symbols,
                    target: str, config: DiscoverConfig, deadline: Deadline) -> Formula | None:
    """The direct search on the groups with the monomial as a factor of each row
    (:func:`kansym.symbolic.direct.direct_search`'s ``factor``), when it beats ``found``.

    ``y / prod x^p`` carries the target's noise divided by the monomial: an unweighted search
    on the groups is decided by the rows of small monomial, the noisiest (a polynomial in
    ``v/c`` then fits as well as ``1/sqrt(1 - v^2/c^2)``). Weighted by the monomial, each
    row counts as it does in the target. Its choice
    (:func:`~kansym.symbolic.direct.choose_significant`) replaces ``found`` when its
    :func:`~kansym.symbolic.direct.selection_score` on the held-out rows, in the target's units
    with errors raised to a smooth weighted fit's (the noise floor), is lower, or when it is
    :func:`~kansym.symbolic.direct.significantly_better` there; a flagged ``found`` only when no
    candidate of the search fits significantly better than the choice. None when the search
    does not apply (more than two groups, a monomial of nearly constant size) or loses.
    """
    k = len(red.groups)
    if not wants_direct_search(config, k, 1) or k == 0 or time_is_up(deadline):
        return None
    mono = monomial_size(red, symbols, x)
    if not np.all(np.isfinite(mono) & (mono > 0)) or mono[fit_idx].max() < MONOMIAL_SPREAD * mono[fit_idx].min():
        return None
    floor = interaction_error(g[fit_idx], yp[fit_idx], g[test_idx], yp[test_idx], factor=mono[fit_idx],
                              factor_test=mono[test_idx])
    group_symbols = input_symbols(list(red.group_names))
    found_cands = direct_search(g[fit_idx], yp[fit_idx], group_symbols, complexity_weight=config.complexity_weight,
                                noise=floor, factor=mono[fit_idx], refine_top=WEIGHTED_REFINE_TOP, deadline=deadline)
    for c in found_cands:
        log.debug("weighted direct search candidate: %s (error %.6g, complexity %d)", c.expr, c.error, c.complexity)
    best = choose_significant(found_cands, config.complexity_weight, len(fit_idx))
    if best is None:
        return None
    f0 = res.formulas[0]
    # the groups' formula stays on the front, no longer chosen
    fw = replace(f0, expr=best.expr, raw=best.expr, origin="direct search", candidates=(), structure=None,
                 closed_form=None, front=tuple(replace(e, chosen=False) for e in f0.front))
    fw = replace(fw, residual=fw.residual_test(g[fit_idx], yp[fit_idx], g[test_idx], yp[test_idx]))
    mapped = map_back(fw, res, red, x, yv, fit_idx, test_idx, symbols, target)

    def error(f: Formula) -> float:
        pred = np.broadcast_to(np.asarray(predict(f.expr, symbols, x[test_idx]), float), (len(test_idx),))
        err = nrmse(yv[test_idx], pred)
        return err if np.isfinite(err) else np.inf

    e_found, e_mapped = error(found), error(mapped)
    # the noise: the smooth fit's error, or less when a formula does better (an exact law)
    noise = min(e_found, e_mapped, floor) if np.isfinite(floor) else min(e_found, e_mapped)
    s_found, s_mapped = (selection_score(max(e, noise), expression_complexity(f.expr), config.complexity_weight)
                         for e, f in ((e_found, found), (e_mapped, mapped)))
    # at the noise floor a law and its approximation differ by a few % of error, less than the
    # score's price of a node: a significantly smaller held-out error decides too
    ratio = (e_found / e_mapped) ** 2 if e_mapped > 0 else np.inf
    significant = significantly_better(
        e_mapped, len(mapped.expr.atoms(sympy.Float)), expression_complexity(mapped.expr),
        (e_found, len(found.expr.atoms(sympy.Float)), expression_complexity(found.expr)), len(test_idx))
    log.debug("weighted direct search on the groups: %s (score %.3f) vs %s (%.3f); ratio of squared errors %.3f",
              mapped.expr, s_mapped, found.expr, s_found, ratio)
    # a flagged formula gives way only to one no candidate of the search fits significantly better
    # (a series chosen over a template of more nodes that fits better is no law either)
    beaten = any(significantly_better(c.error, 0, 0, (best.error, 0, 0), len(fit_idx)) for c in found_cands)
    if not (s_mapped < s_found or significant) or (found.warning is not None and beaten):
        return None
    why = (f"selection score {s_mapped:.3f} < {s_found:.3f}" if s_mapped < s_found else
           f"{ratio:.3f} times less squared error, no more fitted constants")
    reason = (f"the direct search on the groups weighted by the monomial {red.monomial(symbols)} (each row as in "
              f"{target}): {mapped.expr} chosen over {found.expr} ({why}, on the held-out rows)")
    log.info("%s", reason)
    return replace(mapped, reason=reason, origin="direct search")


def monomial_size(red: Reduction, symbols, x: np.ndarray) -> np.ndarray:
    """``|prod x^p|`` on each row ``(N,)``: the factor by which the noise of ``y / prod x^p`` is the target's."""
    return np.abs(np.broadcast_to(np.asarray(predict(red.monomial(symbols), symbols, x), dtype=np.float64),
                                  (x.shape[0],)))


def weighted_group_residuals(expr: sympy.Expr, symbols, red: Reduction, x, y, fit_idx, test_idx) -> ResidualTest:
    """:func:`kansym.symbolic.residuals.residual_test` of ``y / prod x^p``'s residuals, neighbours in the
    groups, each row weighted by its monomial (as in the target: that residual's noise is the
    target's over the monomial); no verdict for a partial formula or without groups."""
    if not red.groups or expr.atoms(AppliedUndef):
        return ResidualTest()
    if len(test_idx) == len(fit_idx) and np.array_equal(test_idx, fit_idx):  # nothing held out: odd from even
        fit_idx, test_idx = fit_idx[::2], fit_idx[1::2]
    mono = monomial_size(red, symbols, x)
    with np.errstate(all="ignore"):
        res = (y - np.broadcast_to(np.asarray(predict(expr, symbols, x), dtype=np.float64), y.shape)) / mono
    g, yp = red.reduce(x, y)
    rows = np.concatenate([fit_idx, test_idx])
    if not (np.all(np.isfinite(g[rows])) and np.all(np.isfinite(res[rows])) and np.all(mono[rows] > 0)):
        return ResidualTest()
    top = float(np.max(np.abs(yp[fit_idx])))
    scale = float(np.std(yp[fit_idx] / top)) * top if top > 0 and np.isfinite(top) else 0.0
    return residual_test(g[fit_idx], res[fit_idx], g[test_idx], res[test_idx], scale=scale,
                       weight_fit=mono[fit_idx], weight_test=mono[test_idx])


def map_back(f: Formula, res: Discovery, red: Reduction, x, y, fit_idx, test_idx, symbols, target: str) -> Formula:
    """A formula in the groups -> the same in the original columns, re-verified there."""
    mono = red.monomial(symbols)
    groups = dict(zip(red.group_names, red.group_exprs(symbols)))

    def back(e: sympy.Expr, simplify: bool = True) -> sympy.Expr:
        e = sympy.sympify(e)
        sub = {s: groups[s.name] for s in e.free_symbols if s.name in groups}
        out = e.xreplace(sub) * mono
        return simplify_formula(sympy.powsimp(out)) if simplify else out

    expr, raw = back(f.expr), back(f.raw, simplify=False)
    if not np.all(np.isfinite(predict(expr, symbols, x[fit_idx]))):
        expr = back(f.expr, simplify=False)
    g_fit, _ = red.reduce(x[fit_idx])
    g_test, _ = red.reduce(x[test_idx])
    mono_fit = predict(mono, symbols, x[fit_idx]) if mono != 1 else np.ones(len(fit_idx))
    mono_test = predict(mono, symbols, x[test_idx]) if mono != 1 else np.ones(len(test_idx))
    y_model_fit = res.pruned.predict(g_fit)[:, 0] * mono_fit
    y_model_test = res.pruned.predict(g_test)[:, 0] * mono_test
    fid = fidelity(lambdify_formula(expr, symbols), x[fit_idx], y[fit_idx], y_model_fit)
    cands = tuple(replace(c, expr=back(c.expr, simplify=False)) for c in f.candidates)
    front = pareto_front([back(e.expr) if expression_complexity(e.expr) <= 60 else back(e.expr, False)
                          for e in f.front if not e.chosen], expr, symbols, x[test_idx], y[test_idx])
    closed = None
    if f.closed_form is not None:  # the best closed form beside a partial formula, re-scored on the columns
        ce = back(f.closed_form.expr)
        pred = np.broadcast_to(np.asarray(predict(ce, symbols, x[test_idx]), dtype=np.float64), (len(test_idx),))
        closed = ClosedForm(ce, r2_score(y[test_idx], pred, nonfinite="-inf"), expression_complexity(ce),
                            f.closed_form.origin)
    mapped = Formula(
        expr=expr, raw=raw, symbols=tuple(symbols), fidelity=fid, target=target, candidates=cands,
        r2_test=next(e.r2 for e in front if e.chosen), r2_model_test=r2_score(y[test_idx], y_model_test),
        n_test=f.n_test, front=front, closed_form=closed, origin=f.origin, structure=f.structure, reason=f.reason,
    )
    # the residual test on the columns and on the groups: in the groups, rows near in the law's own
    # variables are near (a series for a function of one group, invisible among five columns, shows);
    # and on the groups with the rows weighted as in the target (those of y / monomial are the
    # noisiest where the monomial is small: a series refitted with the rows weighted as in the
    # target passed both others)
    tests = [mapped.residual_test(x[fit_idx], y[fit_idx], x[test_idx], y[test_idx]), f.residual,
             weighted_group_residuals(expr, symbols, red, x, y, fit_idx, test_idx)]
    log.debug("residual test: columns %s, groups %s, groups weighted %s", *tests)
    return replace(mapped, residual=ResidualTest.combine(tests))  # one verdict, its p adjusted over all three
