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
from kansym.symbolic.compose import EdgeId, SymbolicKAN, predictions
from kansym.symbolic.fit import EdgeFit
from kansym.symbolic.refit import refit_constants_counted
from kansym.symbolic.verify import nrmse_in

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
    return nrmse_in(y, predictions(expr, symbols, x), log_space=log_space)


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
    n = int(y.shape[0])
    if n > max_rows:  # trials are compared on a fixed subsample; the final refine uses all rows
        idx = np.sort(np.random.default_rng(0).choice(n, max_rows, replace=False))
        x, y, n = x[idx], y[idx], max_rows
    search = _OccamSearch(sym, symbols, x, y, n, floor=floor, deadline=deadline, max_alternatives=max_alternatives,
                          max_trials=max_trials, max_evaluations=max_evaluations)
    search.try_all_linear(candidates)
    order = sorted(search.sym.edges, key=lambda k: -search.sym.edges[k].complexity)
    if search.edge_pass("simplified", order, lambda edge, current: _simpler(candidates, edge, current, min_r2)):
        search.edge_pass("upgraded", order, lambda edge, current: _upgrades(candidates, edge, current, floor))
    log.debug("Occam step: %d formulas tried, %d formula evaluations", len(search.tried), search.evaluations)
    return search.sym, search.tried


def _simpler(candidates: Mapping[EdgeId, Sequence[EdgeFit]], edge: EdgeId, current: EdgeFit,
             min_r2: float) -> list[EdgeFit]:
    """The edge's candidates simpler than ``current`` with R² at least ``min_r2``, simplest first."""
    found = [c for c in candidates.get(edge, ())
             if c.complexity < current.complexity and np.isfinite(c.r2) and c.r2 >= min_r2]
    return sorted(found, key=lambda c: (c.complexity, -c.r2))


def _upgrades(candidates: Mapping[EdgeId, Sequence[EdgeFit]], edge: EdgeId, current: EdgeFit,
              floor: float) -> list[EdgeFit]:
    """The edge's other candidates at least twice as accurate as ``current``, most accurate first."""
    # Upgrade pass: a primitive chosen because it cleared the per-edge threshold first may
    # only approximate the edge (x^2 for a Gaussian bump on one side of its peak); more
    # complex candidates at least twice as accurate on the edge are tried, and kept
    # when the whole formula's BIC improves.
    gap = 1.0 - current.r2 if np.isfinite(current.r2) else 1.0
    if gap <= floor**2:
        return []
    found = [c for c in candidates.get(edge, ())
             if c.primitive != current.primitive and np.isfinite(c.r2) and 1.0 - c.r2 <= 0.5 * gap]
    return sorted(found, key=lambda c: (-c.r2, c.complexity))


class _OccamSearch:
    """The state of one greedy search: the current network and formula, every formula tried, the work spent."""

    def __init__(self, sym: SymbolicKAN, symbols: Sequence[sympy.Symbol], x: np.ndarray, y: np.ndarray, n: int, *,
                 floor: float, deadline: Deadline | None, max_alternatives: int, max_trials: int,
                 max_evaluations: int) -> None:
        self.symbols, self.x, self.y, self.n = symbols, x, y, n
        self.log_space = sym.transform.log_space
        self.loss = "log" if self.log_space else "linear"
        self.floor, self.deadline = floor, deadline
        self.max_alternatives, self.max_trials, self.max_evaluations = max_alternatives, max_trials, max_evaluations
        self.evaluations = 0  # formula evaluations so far (the work budget)
        self.tried: list[Candidate] = []
        self.sym = sym
        self.expr, self.err = self.evaluate(sym)
        self.record(sym, self.expr, self.err, True)

    def evaluate(self, s: SymbolicKAN) -> tuple[sympy.Expr, float]:
        """The formula of ``s`` with its constants refit (the raw composition if the refit fails), and its error."""
        raw = s.expressions(self.symbols)[0]
        k = len(raw.atoms(sympy.Float))
        try:
            # the limit also stops a trial's refit (one took 50 s of a 108 s limit on a busy machine)
            expr, used = refit_constants_counted(raw, self.symbols, self.x, self.y, loss_space=self.loss,
                                                 max_nfev=30 * (k + 1), deadline=self.deadline)
            self.evaluations += used
        except (ValueError, ArithmeticError, TypeError) as exc:
            log.debug("refit failed (%s); using the raw composition", exc)
            expr = raw
        self.evaluations += 1
        return expr, formula_error(expr, self.symbols, self.x, self.y, log_space=self.log_space)

    def record(self, s: SymbolicKAN, e: sympy.Expr, r: float, ok: bool) -> None:
        """Add a formula tried to :attr:`tried`."""
        bic = information_criterion(e, r, self.n, floor=self.floor)
        self.tried.append(Candidate(e, _complexity(s), r, {k: f.primitive for k, f in s.edges.items()}, bic, ok))

    def better(self, e: sympy.Expr, r: float) -> bool:
        """Whether a formula of error ``r`` has a BIC no larger than the current one's."""
        return (information_criterion(e, r, self.n, floor=self.floor)
                <= information_criterion(self.expr, self.err, self.n, floor=self.floor))

    def out_of_time(self) -> bool:
        """Whether the deadline has passed (the cut is then recorded)."""
        if not time_is_up(self.deadline):
            return False
        self.deadline.cut(f"Occam step: stopped after {len(self.tried) - 1} trials")
        return True

    def trial(self, trial: SymbolicKAN) -> tuple[bool, sympy.Expr, float]:
        """Evaluate and record a trial network: whether the BIC accepts it, its formula and its error."""
        t_expr, t_err = self.evaluate(trial)
        ok = self.better(t_expr, t_err)
        self.record(trial, t_expr, t_err, ok)
        return ok, t_expr, t_err

    def try_all_linear(self, candidates: Mapping[EdgeId, Sequence[EdgeFit]]) -> None:
        """Try the network with every edge linear, and move to it if the BIC accepts it."""
        # The simplest network first: every edge linear (a law linear in the model's units,
        # e.g. a power law in log space, is found even when the splines overfit a few rows).
        linear = {k: next((c for c in candidates.get(k, ()) if c.primitive == "x"), None) for k in self.sym.edges}
        if all(linear.values()) and any(f.primitive != "x" for f in self.sym.edges.values()) and not self.out_of_time():
            trial = replace(self.sym, edges=linear)
            ok, t_expr, t_err = self.trial(trial)
            if ok:
                log.info("simplified: every edge linear (normalised error %.3g -> %.3g)", self.err, t_err)
                self.sym, self.expr, self.err = trial, t_expr, t_err

    def edge_pass(self, verb: str, order: Sequence[EdgeId],
                  alternatives: Callable[[EdgeId, EdgeFit], list[EdgeFit]]) -> bool:
        """Try each edge's alternatives in order; keep the first the BIC accepts.

        Returns False when the trial budget is spent (the search stops).
        """
        for edge in order:
            current = self.sym.edges[edge]
            for alt in alternatives(edge, current)[:self.max_alternatives]:
                if len(self.tried) > self.max_trials or self.evaluations >= self.max_evaluations:
                    log.info("simplification stopped after %d trials (budget: %d trials, %d formula evaluations)",
                             len(self.tried) - 1, self.max_trials, self.max_evaluations)
                    return False
                if self.out_of_time():
                    return False
                trial = replace(self.sym, edges={**self.sym.edges, edge: alt})
                ok, t_expr, t_err = self.trial(trial)
                if ok:
                    log.info("%s: edge %d:%d->%d %s -> %s (normalised error %.3g -> %.3g)",
                             verb, *edge, current.primitive, alt.primitive, self.err, t_err)
                    self.sym, self.expr, self.err = trial, t_expr, t_err
                    break
        return True
