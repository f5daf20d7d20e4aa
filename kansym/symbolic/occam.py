"""Occam step: replace edge primitives by simpler ones while the data allow it.

Per-edge fits judge each edge alone; a spline that wiggles through few or noisy
samples can look like a Gaussian even when the law is linear. Here each edge's
simpler candidates (from :func:`kansym.symbolic.fit.select_edge_fit`) are tried in the
composed formula: the formula's constants are refit on the data and the simpler
formula is kept when its Bayesian information criterion is not worse,
``BIC = N log(max(e, floor)^2) + k log N`` with ``e`` the normalised RMS error and
``k`` the number of free constants (Schwarz 1978, "Estimating the dimension of a
model", Ann. Stat. 6(2)). The floor makes two near-exact formulas tie on fit, so
the one with fewer constants wins.
Every formula tried is recorded, giving a (complexity, error) front like PySR's
equation table (Cranmer 2023, arXiv:2305.01582) and the KAN paper's interactive
"suggest_symbolic" choice (Liu et al. 2024, arXiv:2404.19756, §2.5.1) made automatic.
The search's budgets count work (formulas tried, their evaluations), never seconds, so
the same input gives the same formula on a busy machine as on a quiet one; only the
user's time limit (a :class:`~kansym.deadline.Deadline`) may stop it earlier, and then
says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

import numpy as np
import sympy

from kansym.deadline import Deadline, time_is_up
from kansym.symbolic.compose import EdgeId, SymbolicKAN, lambdify_formula
from kansym.symbolic.fit import EdgeFit
from kansym.symbolic.refit import refit_constants_counted
from kansym.symbolic.verify import nrmse

__all__ = ["Candidate", "simplify_edges", "formula_error", "information_criterion", "MAX_EVALUATIONS"]

log = logging.getLogger("kansym")

# Default work budget of the Occam step: formula evaluations (each on at most 500 rows) of
# its constant refits. A pruned network's search (40 trials of a few to 20 constants) stays
# well below it; an unpruned [3, 5, 1] network's (about 40 constants, 45,000 evaluations a
# trial, some 10 s each on a 2-core machine) stops after 7 trials.
MAX_EVALUATIONS = 300_000


@dataclass(frozen=True)
class Candidate:
    """One formula tried: its edges' primitives, complexity and data error.

    Attributes
    ----------
    expr : sympy.Expr
        Formula with constants refit on the data, CSV units.
    complexity : int
        Sum of the edge primitives' complexities.
    error : float
        RMS residual over the std of the target (in log units in log space).
    primitives : dict
        ``{(layer, i, j): primitive name}``.
    bic : float
        Information criterion used for the choice (lower is better).
    accepted : bool
        Whether the search moved to this formula.
    """

    expr: sympy.Expr
    complexity: int
    error: float
    primitives: dict
    bic: float
    accepted: bool


def formula_error(expr: sympy.Expr, symbols: Sequence[sympy.Symbol], x: np.ndarray, y: np.ndarray, *, log_space: bool) -> float:
    """Normalised RMS error (:func:`kansym.symbolic.verify.nrmse`) of ``expr`` on ``x (N, d)``,
    ``y (N,)``, of the logs in log space; ``inf`` if not finite."""
    with np.errstate(all="ignore"):
        pred = lambdify_formula(expr, symbols)(x)
        return nrmse(np.log(y), np.log(pred)) if log_space else nrmse(y, pred)


def information_criterion(expr: sympy.Expr, error: float, n: int, *, floor: float = 1e-6) -> float:
    """``N log(max(error, floor)^2) + k log N`` with ``k`` the float constants of ``expr``."""
    k = len(expr.atoms(sympy.Float))
    return n * float(np.log(max(error, floor) ** 2)) + k * float(np.log(max(n, 2)))


def _complexity(sym: SymbolicKAN) -> int:
    return int(sum(f.complexity for f in sym.edges.values()))


def simplify_edges(
    sym: SymbolicKAN,
    candidates: Mapping[EdgeId, Sequence[EdgeFit]],
    symbols: Sequence[sympy.Symbol],
    x: np.ndarray,
    y: np.ndarray,
    *,
    floor: float = 1e-6,
    min_r2: float = 0.5,
    max_alternatives: int = 4,
    max_rows: int = 500,
    max_trials: int = 40,
    max_evaluations: int = MAX_EVALUATIONS,
    deadline: Deadline | None = None,
) -> tuple[SymbolicKAN, list[Candidate]]:
    """Greedily give edges simpler primitives while the data error allows it.

    First the all-linear network is tried; then edges are visited from the most to
    the least complex primitive and, for each, the simpler candidates (per-edge R² at
    least ``min_r2``) are tried from the simplest up; the first whose refit formula
    has a BIC no larger than the current one replaces the current edge. Last, each
    edge's candidates that explain it at least twice as well (``1 - r2`` halved) are
    tried, most accurate first, and kept on a BIC no larger (the upgrade pass).

    Parameters
    ----------
    sym : SymbolicKAN
        The network with per-edge choices (single output).
    candidates : mapping
        Per edge, the candidate fits sorted by complexity.
    symbols : sequence of sympy.Symbol
        CSV input symbols.
    x : ndarray (N, d_in)
        CSV inputs.
    y : ndarray (N,)
        CSV target.
    floor : float
        Normalised error below which fits count as equally good.
    min_r2 : float
        Candidates whose per-edge R² is below this are not tried.
    max_alternatives : int
        At most this many simpler primitives are tried per edge.
    max_rows : int
        Trials are compared on a seeded subsample of at most this many rows.
    max_trials : int
        At most this many formulas are tried after the start.
    max_evaluations : int
        No new trial starts once the constant refits of the search (the start's
        included) have evaluated formulas this many times in all (each evaluation on
        at most ``max_rows`` rows; the best formula so far is kept). Both budgets are
        counts of work, not a clock: the same input gives the same formula however
        busy the machine.
    deadline : kansym.deadline.Deadline, optional
        The run's time limit, looked at before each trial after the start and by each
        trial's refit (which stops at its best point): once it has expired no new trial
        starts (the last accepted formula is kept) and the cut is recorded. One that does
        not expire changes nothing.

    Returns
    -------
    (SymbolicKAN, list of Candidate)
        The simplified network and every formula evaluated (the first is the start).
    """
    log_space = sym.transform.log_space
    loss = "log" if log_space else "linear"
    n = int(y.shape[0])
    if n > max_rows:  # trials are compared on a fixed subsample; the final refine uses all rows
        idx = np.sort(np.random.default_rng(0).choice(n, max_rows, replace=False))
        x, y, n = x[idx], y[idx], max_rows
    evaluations = 0  # formula evaluations so far (the work budget)

    def evaluate(s: SymbolicKAN) -> tuple[sympy.Expr, float]:
        nonlocal evaluations
        raw = s.expressions(symbols)[0]
        k = len(raw.atoms(sympy.Float))
        try:
            # the limit also stops a trial's refit (one took 50 s of a 108 s limit on a busy machine)
            expr, used = refit_constants_counted(raw, symbols, x, y, loss_space=loss, max_nfev=30 * (k + 1),
                                                 deadline=deadline)
            evaluations += used
        except (ValueError, ArithmeticError, TypeError) as exc:
            log.debug("refit failed (%s); using the raw composition", exc)
            expr = raw
        evaluations += 1
        return expr, formula_error(expr, symbols, x, y, log_space=log_space)

    def record(s: SymbolicKAN, e: sympy.Expr, r: float, ok: bool) -> None:
        bic = information_criterion(e, r, n, floor=floor)
        tried.append(Candidate(e, _complexity(s), r, {k: f.primitive for k, f in s.edges.items()}, bic, ok))

    def better(e: sympy.Expr, r: float) -> bool:
        return information_criterion(e, r, n, floor=floor) <= information_criterion(expr, err, n, floor=floor)

    tried: list[Candidate] = []
    expr, err = evaluate(sym)
    record(sym, expr, err, True)
    # The simplest network first: every edge linear (a law linear in the model's units,
    # e.g. a power law in log space, is found even when the splines overfit a few rows).
    def out_of_time() -> bool:
        if not time_is_up(deadline):
            return False
        deadline.cut(f"Occam step: stopped after {len(tried) - 1} trials")
        return True

    linear = {k: next((c for c in candidates.get(k, ()) if c.primitive == "x"), None) for k in sym.edges}
    if all(linear.values()) and any(f.primitive != "x" for f in sym.edges.values()) and not out_of_time():
        trial = replace(sym, edges=linear)
        t_expr, t_err = evaluate(trial)
        ok = better(t_expr, t_err)
        record(trial, t_expr, t_err, ok)
        if ok:
            log.info("simplified: every edge linear (normalised error %.3g -> %.3g)", err, t_err)
            sym, expr, err = trial, t_expr, t_err
    order = sorted(sym.edges, key=lambda k: -sym.edges[k].complexity)

    def edge_pass(verb: str, alternatives: Callable[[EdgeId, EdgeFit], list[EdgeFit]]) -> bool:
        """Try each edge's alternatives in order; keep the first the BIC accepts.

        Returns False when the trial budget is spent (the search stops).
        """
        nonlocal sym, expr, err
        for edge in order:
            current = sym.edges[edge]
            for alt in alternatives(edge, current)[:max_alternatives]:
                if len(tried) > max_trials or evaluations >= max_evaluations:
                    log.info("simplification stopped after %d trials (budget: %d trials, %d formula evaluations)",
                             len(tried) - 1, max_trials, max_evaluations)
                    return False
                if out_of_time():
                    return False
                trial = replace(sym, edges={**sym.edges, edge: alt})
                t_expr, t_err = evaluate(trial)
                ok = better(t_expr, t_err)
                record(trial, t_expr, t_err, ok)
                if ok:
                    log.info("%s: edge %d:%d->%d %s -> %s (normalised error %.3g -> %.3g)",
                             verb, *edge, current.primitive, alt.primitive, err, t_err)
                    sym, expr, err = trial, t_expr, t_err
                    break
        return True

    def simpler(edge: EdgeId, current: EdgeFit) -> list[EdgeFit]:
        found = [c for c in candidates.get(edge, ())
                 if c.complexity < current.complexity and np.isfinite(c.r2) and c.r2 >= min_r2]
        return sorted(found, key=lambda c: (c.complexity, -c.r2))

    # Upgrade pass: a primitive chosen because it cleared the per-edge threshold first may
    # only approximate the edge (x^2 for a Gaussian bump on one side of its peak); more
    # complex candidates at least twice as accurate on the edge are tried, and kept
    # when the whole formula's BIC improves.
    def upgrades(edge: EdgeId, current: EdgeFit) -> list[EdgeFit]:
        gap = 1.0 - current.r2 if np.isfinite(current.r2) else 1.0
        if gap <= floor**2:
            return []
        found = [c for c in candidates.get(edge, ())
                 if c.primitive != current.primitive and np.isfinite(c.r2) and 1.0 - c.r2 <= 0.5 * gap]
        return sorted(found, key=lambda c: (-c.r2, c.complexity))

    if edge_pass("simplified", simpler):
        edge_pass("upgraded", upgrades)
    log.debug("Occam step: %d formulas tried, %d formula evaluations", len(tried), evaluations)
    return sym, tried
