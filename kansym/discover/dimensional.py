"""Dimensional analysis (Buckingham pi) and formula discovery with physical units, as AI Feynman's first step.

:func:`analyze` is the dimensional analysis of Udrescu & Tegmark 2020 ("AI Feynman: a
physics-inspired method for symbolic regression", Sci. Adv. 6:eaay2631, section
"Dimensional analysis"): with the dimension matrix ``M`` (base dimensions x variables)
and the target's dimensions ``b``, a solution ``p`` of ``M p = b`` gives a monomial
``prod x_i^p_i`` with the target's units, and an integer basis ``U`` of the null space of
``M`` gives the dimensionless groups ``prod x_i^U_ji``; by the Buckingham pi theorem
(Buckingham 1914, Phys. Rev. 4:345) ``y / prod x^p`` is a function of the groups alone.

:func:`discover_with_units` is :func:`kansym.discover.run.discover` preceded by that
reduction: ``y = prod x^p * f(pi_1, ..., pi_k)``, so the KAN learns ``f`` of ``k < d``
inputs, and with no group at all (or a target that is a pure monomial) ``f`` is a constant,
fitted and snapped without a KAN. The result looks like :func:`~kansym.discover.run.discover`'s:
formulas, Pareto front and R² in the original columns (docs/algorithms.md, "Dimensional
analysis"). One :class:`UnitsRun` value carries the call (the table, its units and working
units, the options); after the reduction every step reads one :class:`ReducedRows` value.

The formulas of a discovery on dimensionless groups, in the columns: :func:`map_back` writes
each formula in the original columns and verifies it there (R², residual tests on the columns,
on the groups and on the groups weighted as in the target), and :func:`weighted_search`
searches the groups once more with each row weighted by its monomial: ``y / prod x^p``
carries the target's noise divided by the monomial. The reduction as plain data in the
checkpoints and ``formula.json`` lives in :mod:`kansym.discover.units`.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from dataclasses import field, replace, dataclass
from fractions import Fraction
from typing import Mapping, Sequence

import networkx as nx
import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kansym.deadline import Deadline, time_is_up
from kansym.discover.choice import choose, kept_run, significantly_better, verified_or
from kansym.discover.config import DiscoverConfig
from kansym.discover.rows import (ColumnScales, check_representable, formula_to_table, symbolic_to_table,
    working_scales)
from kansym.discover.result import ClosedForm, Discovery, Formula, split_holdout
from kansym.discover.run import discover
from kansym.discover.structure_tests import interaction_error, interaction_r2
from kansym.discover.stages import wants_direct_search
from kansym.discover.units import read_units, reduction_meta
from kansym.errors import DataError
from kansym.symbolic.compose import input_symbols, lambdify_formula, predictions
from kansym.symbolic.direct import DirectCandidate, direct_search
from kansym.symbolic.pareto import expression_complexity, pareto_front
from kansym.symbolic.refine import simplify_formula, refine
from kansym.symbolic.verify import ResidualTest, residual_test, fidelity, nrmse, r2_score

__all__ = ['Reduction', 'analyze', 'ReducedRows', 'map_back', 'weighted_search', 'weighted_group_residuals', 'monomial_size',
    'UnitsDiscovery', 'UnitsRun', 'discover_with_units', 'CONSTANT_R2', 'TRY_CONSTANT_R2']

log = logging.getLogger("kansym")


@dataclass(frozen=True)
class Reduction:
    """The result of :func:`analyze`.

    Attributes
    ----------
    names : tuple of str
        The variables (columns of ``x``).
    dims : tuple of str
        Base dimensions (rows of the dimension matrix).
    p : tuple of Fraction
        Exponents of the monomial with the target's units, one per variable.
    groups : tuple of tuple of int
        Integer exponents of each dimensionless group (null-space basis), one row per group.
    group_names : tuple of str
        Names for the groups: the variable itself for a group ``x_i^1``, else ``pi1, pi2, ...``.
    """

    names: tuple[str, ...]
    dims: tuple[str, ...]
    p: tuple[Fraction, ...]
    groups: tuple[tuple[int, ...], ...]
    group_names: tuple[str, ...]

    def monomials(self, max_coef: int = 2, max_groups: int = 4) -> list[tuple[Fraction, ...]]:
        """Every monomial with the target's units ``p + sum_j c_j U_j``, ``c_j`` in
        ``-max_coef..max_coef`` (``p`` first; only ``p`` with more than ``max_groups`` groups)."""
        if not self.groups or len(self.groups) > max_groups:
            return [self.p]
        out = []
        for coefs in itertools.product(range(-max_coef, max_coef + 1), repeat=len(self.groups)):
            q = tuple(e + sum(c * row[i] for c, row in zip(coefs, self.groups)) for i, e in enumerate(self.p))
            out.append(q)
        out.sort(key=lambda q: (q != self.p, sum(abs(a - b) for a, b in zip(q, self.p))))
        return out

    def closest_monomial(self, x: np.ndarray, y: np.ndarray) -> tuple[tuple[Fraction, ...] | None, float]:
        """Of :meth:`monomials`, the one whose constant multiple is closest to ``y`` on ``x``'s rows
        (the median constant; R² in ``y``'s units), and that R² (None, -inf: none is finite there).
        A law that is a constant times a monomial needs no KAN."""
        best_q, best_r2 = None, -np.inf
        for q in self.monomials():
            _, yq = self.with_p(q).reduce(x, y)
            if not np.all(np.isfinite(yq)):
                continue
            r2 = r2_score(y, np.median(yq) * (y / yq))
            if r2 > best_r2 + 1e-12:
                best_q, best_r2 = q, r2
        return best_q, best_r2

    def with_p(self, p: Sequence[Fraction]) -> "Reduction":
        """The same groups with another monomial."""
        return Reduction(self.names, self.dims, tuple(Fraction(e) for e in p), self.groups, self.group_names)

    @property
    def trivial(self) -> bool:
        """True when nothing is reduced (every variable is its own group and ``p = 0``)."""
        return len(self.groups) == len(self.names) and all(v == 0 for v in self.p)

    def monomial(self, symbols: Sequence[sympy.Symbol]) -> sympy.Expr:
        """``prod x_i^p_i`` in the given symbols."""
        return sympy.Mul(*[s ** sympy.Rational(e.numerator, e.denominator) for s, e in zip(symbols, self.p) if e != 0])

    def group_exprs(self, symbols: Sequence[sympy.Symbol]) -> list[sympy.Expr]:
        """Each group ``prod x_i^U_ji`` in the given symbols."""
        return [sympy.Mul(*[s ** int(e) for s, e in zip(symbols, row) if e != 0]) for row in self.groups]

    def reduce(self, x: np.ndarray, y: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Groups ``(N, k)`` and ``y / prod x^p`` ``(N,)`` (None without ``y``)."""
        x = np.asarray(x, dtype=np.float64)
        with np.errstate(all="ignore"):
            g = (np.stack([np.prod(x ** np.asarray(row, dtype=float), axis=1) for row in self.groups], axis=1)
                 if self.groups else np.zeros((x.shape[0], 0)))
            if y is None:
                return g, None
            mono = np.prod(x ** np.asarray([float(e) for e in self.p]), axis=1)
            return g, np.asarray(y, dtype=np.float64).reshape(-1) / mono

    def to_dict(self) -> dict:
        sym = [sympy.Symbol(n) for n in self.names]
        return {"monomial": str(self.monomial(sym)), "p": {n: str(e) for n, e in zip(self.names, self.p) if e != 0},
                "groups": {g: str(e) for g, e in zip(self.group_names, self.group_exprs(sym))}}


def _matrix(units: Sequence[Mapping[str, Fraction]], dims: Sequence[str]) -> sympy.Matrix:
    return sympy.Matrix([[sympy.Rational(u.get(d, 0).numerator, u.get(d, 0).denominator) for u in units] for d in dims])


def _integer_row(vec: Sequence[sympy.Rational]) -> tuple[int, ...]:
    """Scale a rational vector to the primitive integer vector, oriented mostly positive."""
    lcm = 1
    for v in vec:
        lcm = lcm * int(sympy.Rational(v).q) // math.gcd(lcm, int(sympy.Rational(v).q))
    ints = [int(sympy.Rational(v) * lcm) for v in vec]
    g = 0
    for v in ints:
        g = math.gcd(g, abs(v))
    ints = [v // g for v in ints] if g else ints
    pos, neg = sum(v > 0 for v in ints), sum(v < 0 for v in ints)
    first = next((v for v in ints if v != 0), 0)
    if neg > pos or (neg == pos and first < 0):
        ints = [-v for v in ints]
    return tuple(ints)


def _null_basis(M: sympy.Matrix, n: int) -> list[tuple[int, ...]]:
    """A sparse integer basis of the null space of ``M`` from its circuits (minimal dependent
    column sets), smallest support first, then smallest exponents, then column order."""
    rank = M.rank() if M.rows else 0
    k = n - rank
    if k == 0:
        return []
    circuits = []
    for size in range(1, rank + 2):
        for cols in itertools.combinations(range(n), size):
            ns = M[:, list(cols)].nullspace()
            if len(ns) != 1 or any(v == 0 for v in ns[0]):
                continue
            row = [0] * n
            for c, v in zip(cols, _integer_row(list(ns[0]))):
                row[c] = v
            circuits.append(tuple(row))
    circuits.sort(key=lambda r: (sum(v != 0 for v in r), sum(abs(v) for v in r), [i for i, v in enumerate(r) if v]))
    basis: list[tuple[int, ...]] = []
    for row in circuits:
        if sympy.Matrix(basis + [row]).rank() > len(basis):
            basis.append(row)
        if len(basis) == k:
            break
    return basis


def _orient_ratio(row: tuple[int, ...], x: np.ndarray) -> tuple[int, ...]:
    """A ratio of two variables ``a / b`` is turned so that it is mostly below 1 on the data
    (``v/c``, not ``c/v``: the small parameter of an expansion); other groups are kept."""
    idx = [i for i, v in enumerate(row) if v]
    if len(idx) != 2 or sorted(row[i] for i in idx) != [-1, 1]:
        return row
    with np.errstate(all="ignore"):
        logs = np.log(np.abs(x[:, idx[0]] / x[:, idx[1]])) * row[idx[0]]
    logs = logs[np.isfinite(logs)]
    if logs.size and np.median(logs) > 0.1:
        return tuple(-v for v in row)
    return row


def _particular(M: sympy.Matrix, b: sympy.Matrix, n: int, x: np.ndarray | None, y: np.ndarray | None):
    """Solutions of ``M p = b`` with the fewest variables; among them integer first, then the one
    leaving ``y / prod x^p`` least variable (log scale) when data are given, then smallest."""
    if all(v == 0 for v in b):
        return [Fraction(0)] * n
    rank = M.rank()
    found = []
    for size in range(1, rank + 1):
        for cols in itertools.combinations(range(n), size):
            sub = M[:, list(cols)]
            if sub.rank() < size:
                continue
            try:
                sol, params = sub.gauss_jordan_solve(b)
            except ValueError:  # inconsistent
                continue
            p = [Fraction(0)] * n
            for c, v in zip(cols, sol):
                p[c] = Fraction(int(sympy.Rational(v).p), int(sympy.Rational(v).q))
            found.append(p)
        if found:
            break
    if not found:
        return None

    def spread(p):
        if x is None or y is None:
            return 0.0
        with np.errstate(all="ignore"):
            r = np.log(np.abs(np.asarray(y, float).reshape(-1) / np.prod(np.asarray(x, float) ** np.asarray([float(e) for e in p]), axis=1)))
        r = r[np.isfinite(r)]
        return round(float(np.var(r)), 6) if r.size else math.inf

    return min(found, key=lambda p: (any(e.denominator != 1 for e in p), spread(p), sum(abs(e) for e in p),
                                     [i for i, e in enumerate(p) if e]))


def analyze(names: Sequence[str], units: Sequence[Mapping[str, Fraction]], target: Mapping[str, Fraction],
            x: np.ndarray | None = None, y: np.ndarray | None = None) -> Reduction | None:
    """Dimensional analysis of ``y(x)`` (Udrescu & Tegmark 2020, section "Dimensional analysis").

    Parameters
    ----------
    names : sequence of str
        Variable names, one per column of ``x``.
    units : sequence of dict
        Each variable's dimensions (:func:`parse_unit`).
    target : dict
        The target's dimensions.
    x : ndarray (N, d), optional
    y : ndarray (N,), optional
        When given, the monomial is chosen among the equally sparse solutions of ``M p = b``
        as the one leaving ``y / prod x^p`` the least variable in log scale (e.g. ``m c^2``
        rather than ``m v^2`` for a relativistic energy).

    Returns
    -------
    Reduction or None
        None when the target's units cannot be made from the inputs' (inconsistent units).
    """
    names = tuple(names)
    if len(units) != len(names):
        raise DataError(f"{len(names)} variables but {len(units)} units")
    dims = tuple(sorted(set().union(*[set(u) for u in units], set(target))))
    M = _matrix(units, dims)
    b = sympy.Matrix([sympy.Rational(target.get(d, 0).numerator, target.get(d, 0).denominator) for d in dims])
    n = len(names)
    if not dims:
        M = sympy.zeros(0, n)
    p = _particular(M, b, n, x, y) if dims else [Fraction(0)] * n
    if p is None:
        return None
    groups = _null_basis(M, n) if dims else [tuple(int(i == j) for i in range(n)) for j in range(n)]
    if x is not None:
        groups = [_orient_ratio(row, np.asarray(x, dtype=np.float64)) for row in groups]
    group_names, k = [], 0
    for row in groups:
        single = [i for i, v in enumerate(row) if v]
        if len(single) == 1 and row[single[0]] == 1:
            group_names.append(names[single[0]])
        else:
            k += 1
            name = f"pi{k}"
            while name in names:
                name = "_" + name
            group_names.append(name)
    return Reduction(names, dims, tuple(p), tuple(groups), tuple(group_names))


@dataclass(frozen=True)
class ReducedRows:
    """The rows of a ``--units`` run with their dimensional reduction: what every step after
    the reduction reads (working units).

    Attributes
    ----------
    x : ndarray (N, d)
        The table's columns.
    y : ndarray (N,)
        The target.
    red : Reduction
        ``y = prod x^p * f(pi_1, ..., pi_k)`` (:func:`analyze`).
    fit_idx, test_idx : ndarray of int
        Fitting and held-out rows (:func:`~kansym.discover.result.split_holdout`); with
        nothing held out ``test_idx`` is ``fit_idx``.
    n_test : int
        Rows really held out (0: none).
    symbols : list of sympy.Symbol
        The columns' symbols, positive where the column is.
    target : str
    text : dict of str to str
        Every column's unit as given.
    """

    x: np.ndarray
    y: np.ndarray
    red: Reduction
    fit_idx: np.ndarray
    test_idx: np.ndarray
    n_test: int
    symbols: list
    target: str
    text: dict


WEIGHTED_REFINE_TOP = 8  # raw candidates the weighted search refines (noisy rows: the law may rank 5th raw)
MONOMIAL_SPREAD = 1.5  # a monomial whose size varies less over the rows leaves the groups' search as it is


def weighted_search(g, yp, res: Discovery, found: Formula, rows: ReducedRows, config: DiscoverConfig,
                    deadline: Deadline) -> Formula | None:
    """The direct search on the groups with the monomial as a factor of each row
    (:func:`kansym.symbolic.direct.direct_search`'s ``factor``), when it beats ``found``.

    ``y / prod x^p`` carries the target's noise divided by the monomial: an unweighted search
    on the groups is decided by the rows of small monomial, the noisiest (a polynomial in
    ``v/c`` then fits as well as ``1/sqrt(1 - v^2/c^2)``). Weighted by the monomial, each
    row counts as it does in the target. Its choice (:func:`kansym.discover.choice.choose` on
    the fitting rows, residuals weighted by the monomial) replaces ``found`` when it wins
    :func:`~kansym.discover.choice.choose` against it on the held-out rows, in the target's
    units, ``found`` the incumbent and errors raised to a smooth weighted fit's (the noise
    floor); a flagged ``found`` only when no candidate of the search fits significantly better
    than the choice, whatever its constants and nodes
    (:func:`~kansym.discover.choice.significantly_better` with ``any_size``). None when the
    search does not apply (more than two groups, a monomial of nearly constant size) or loses.
    """
    red, x, yv, fit_idx, test_idx, symbols = rows.red, rows.x, rows.y, rows.fit_idx, rows.test_idx, rows.symbols
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

    def fit_residual(c: DirectCandidate) -> np.ndarray:  # as the search's errors: each row weighted by its monomial
        with np.errstate(all="ignore"):
            return mono[fit_idx] * (predictions(c.expr, group_symbols, g[fit_idx]) - yp[fit_idx])
    best, _ = choose(found_cands, config.complexity_weight, residual=fit_residual)
    if best is None:
        return None
    f0 = res.formulas[0]
    # the groups' formula stays on the front, no longer chosen
    fw = replace(f0, expr=best.expr, raw=best.expr, origin="direct search", candidates=(), structure=None,
                 closed_form=None, front=tuple(replace(e, chosen=False) for e in f0.front))
    fw = replace(fw, residual=fw.residual_test(g[fit_idx], yp[fit_idx], g[test_idx], yp[test_idx]))
    mapped = map_back(fw, res, rows)
    old, new = (_on_held_out(f, symbols, x[test_idx], yv[test_idx]) for f in (found, mapped))
    # the noise: the smooth fit's error, or less when a formula does better (an exact law)
    noise = min(old.error, new.error, floor) if np.isfinite(floor) else min(old.error, new.error)
    # at the noise floor a law and its approximation differ by a few % of error, less than the
    # score's price of a node: a significantly smaller held-out error decides too
    winner, why = choose([new], config.complexity_weight, incumbent=old, floor=noise)
    log.debug("weighted direct search on the groups: %s (error %.6g) vs %s (%.6g): %s", mapped.expr, new.error,
              found.expr, old.error, why)
    if winner is not new:
        return None
    # a flagged formula gives way only to one no candidate of the search fits significantly better
    # (a series chosen over a template of more nodes that fits better is no law either)
    if found.warning is not None and any(significantly_better(c, best, fit_residual, any_size=True) is not None
                                         for c in found_cands):
        return None
    reason = (f"the direct search on the groups weighted by the monomial {red.monomial(symbols)} (each row as in "
              f"{rows.target}): {mapped.expr} chosen over {found.expr} ({why}, on the held-out rows)")
    log.info("%s", reason)
    return replace(mapped, reason=reason, origin="direct search")


def _on_held_out(f: Formula, symbols, x_test: np.ndarray, y_test: np.ndarray) -> DirectCandidate:
    """``f`` as :func:`~kansym.discover.choice.choose` sees it on the held-out rows, in the target's units."""
    pred = predictions(f.expr, symbols, x_test)
    with np.errstate(all="ignore"):
        err = nrmse(y_test, pred)
        return DirectCandidate(f.expr, err if np.isfinite(err) else np.inf, expression_complexity(f.expr), f.origin,
                               residual=pred - y_test)


def monomial_size(red: Reduction, symbols, x: np.ndarray) -> np.ndarray:
    """``|prod x^p|`` on each row ``(N,)``: the factor by which the noise of ``y / prod x^p`` is the target's."""
    return np.abs(predictions(red.monomial(symbols), symbols, x))


def weighted_group_residuals(expr: sympy.Expr, rows: ReducedRows) -> ResidualTest:
    """:func:`kansym.symbolic.verify.residual_test` of ``y / prod x^p``'s residuals, neighbours in the
    groups, each row weighted by its monomial (as in the target: that residual's noise is the
    target's over the monomial); no verdict for a partial formula or without groups."""
    red, x, y, fit_idx, test_idx, symbols = rows.red, rows.x, rows.y, rows.fit_idx, rows.test_idx, rows.symbols
    if not red.groups or expr.atoms(AppliedUndef):
        return ResidualTest()
    if len(test_idx) == len(fit_idx) and np.array_equal(test_idx, fit_idx):  # nothing held out: odd from even
        fit_idx, test_idx = fit_idx[::2], fit_idx[1::2]
    mono = monomial_size(red, symbols, x)
    with np.errstate(all="ignore"):
        res = (y - predictions(expr, symbols, x)) / mono
    g, yp = red.reduce(x, y)
    rows = np.concatenate([fit_idx, test_idx])
    if not (np.all(np.isfinite(g[rows])) and np.all(np.isfinite(res[rows])) and np.all(mono[rows] > 0)):
        return ResidualTest()
    top = float(np.max(np.abs(yp[fit_idx])))
    scale = float(np.std(yp[fit_idx] / top)) * top if top > 0 and np.isfinite(top) else 0.0
    return residual_test(g[fit_idx], res[fit_idx], g[test_idx], res[test_idx], scale=scale,
                       weight_fit=mono[fit_idx], weight_test=mono[test_idx])


def map_back(f: Formula, res: Discovery, rows: ReducedRows) -> Formula:
    """A formula in the groups -> the same in the original columns, re-verified there."""
    red, x, y, fit_idx, test_idx, symbols = rows.red, rows.x, rows.y, rows.fit_idx, rows.test_idx, rows.symbols
    mono = red.monomial(symbols)
    groups = dict(zip(red.group_names, red.group_exprs(symbols)))

    def back(e: sympy.Expr, simplify: bool = True) -> sympy.Expr:
        e = sympy.sympify(e)
        sub = {s: groups[s.name] for s in e.free_symbols if s.name in groups}
        out = e.xreplace(sub) * mono
        return simplify_formula(sympy.powsimp(out)) if simplify else out

    expr, raw = back(f.expr), back(f.raw, simplify=False)
    if not np.all(np.isfinite(predictions(expr, symbols, x[fit_idx]))):
        expr = back(f.expr, simplify=False)
    g_fit, _ = red.reduce(x[fit_idx])
    g_test, _ = red.reduce(x[test_idx])
    mono_fit = predictions(mono, symbols, x[fit_idx]) if mono != 1 else np.ones(len(fit_idx))
    mono_test = predictions(mono, symbols, x[test_idx]) if mono != 1 else np.ones(len(test_idx))
    y_model_fit = res.pruned.predict(g_fit)[:, 0] * mono_fit
    y_model_test = res.pruned.predict(g_test)[:, 0] * mono_test
    fid = fidelity(lambdify_formula(expr, symbols), x[fit_idx], y[fit_idx], y_model_fit)
    cands = tuple(replace(c, expr=back(c.expr, simplify=False)) for c in f.candidates)
    front = pareto_front([back(e.expr) if expression_complexity(e.expr) <= 60 else back(e.expr, False)
                          for e in f.front if not e.chosen], expr, symbols, x[test_idx], y[test_idx])
    closed = None
    if f.closed_form is not None:  # the best closed form beside a partial formula, re-scored on the columns
        ce = back(f.closed_form.expr)
        pred = predictions(ce, symbols, x[test_idx])
        closed = ClosedForm(ce, r2_score(y[test_idx], pred, nonfinite="-inf"), expression_complexity(ce),
                            f.closed_form.origin)
    mapped = Formula(
        expr=expr, raw=raw, symbols=tuple(symbols), fidelity=fid, target=rows.target, candidates=cands,
        r2_test=next(e.r2 for e in front if e.chosen), r2_model_test=r2_score(y[test_idx], y_model_test),
        n_test=f.n_test, front=front, closed_form=closed, origin=f.origin, structure=f.structure, reason=f.reason,
    )
    # the residual test on the columns and on the groups: in the groups, rows near in the law's own
    # variables are near (a series for a function of one group, invisible among five columns, shows);
    # and on the groups with the rows weighted as in the target (those of y / monomial are the
    # noisiest where the monomial is small: a series refitted with the rows weighted as in the
    # target passed both others)
    tests = [mapped.residual_test(x[fit_idx], y[fit_idx], x[test_idx], y[test_idx]), f.residual,
             weighted_group_residuals(expr, rows)]
    log.debug("residual test: columns %s, groups %s, groups weighted %s", *tests)
    return replace(mapped, residual=ResidualTest.combine(tests))  # one verdict, its p adjusted over all three


CONSTANT_R2 = 1 - 1e-9  # a monomial this close to the data is the law: no KAN is trained
TRY_CONSTANT_R2 = 0.99  # a monomial this close is also tried against the KAN's formula
NULL_R2 = 0.05  # share of the variance of y / x^p a fit on the groups may explain when they play no role
GROUPS_LEAD = math.log10(1.1) / 2  # the groups' formula beats the monomial with a constant when it leaves 1.1x less
GROUPS_TIE = 1e-6  # of the variance unexplained (held out); errors below GROUPS_TIE tie (kept_run's margin, floor)
GROUPS_SHARE = 0.5  # of the time limit, for the discovery on the groups; the rest for the columns if it fails
MIN_PLAIN_SECONDS = 5.0  # the discovery on the columns runs after a failed one on the groups only with this left


@dataclass(frozen=True)
class UnitsDiscovery(Discovery):
    """:class:`~kansym.discover.run.Discovery` plus the dimensional reduction used.

    ``formulas`` are in the original columns. ``trained``, ``pruned``, ``prune_result``,
    ``symbolic`` and ``graph`` describe the KAN trained on the groups (its inputs are
    ``reduction.group_names``, its target ``y / prod x^p``); they are None when the law
    was a monomial times a constant and no KAN was needed (``runs == 0``).
    """

    reduction: Reduction | None = None
    units: dict | None = None


def _symbols(names: Sequence[str], x: np.ndarray) -> list[sympy.Symbol]:
    """Original-column symbols; positive where the column is (lets sympy merge powers)."""
    return [sympy.Symbol(n, positive=True) if np.all(x[:, i] > 0) else sympy.Symbol(n, real=True)
            for i, n in enumerate(names)]


def discover_with_units(
    x: np.ndarray,
    y: np.ndarray,
    input_names: Sequence[str],
    target: str,
    units: Mapping[str, str | Mapping],
    config: DiscoverConfig | None = None,
    *,
    progress: bool | None = None,
    deadline: Deadline | None = None,
) -> UnitsDiscovery:
    """Discover ``y(x)`` after a dimensional reduction (Buckingham pi, AI Feynman).

    Parameters
    ----------
    x : ndarray (N, d), CSV units
    y : ndarray (N,) or (N, 1)
    input_names : sequence of str
    target : str
    units : mapping
        Unit of every input and of the target, as strings (:func:`kansym.discover.units.parse_unit`)
        or parsed dicts.
    config : DiscoverConfig, optional
    progress : bool, optional
    deadline : kansym.deadline.Deadline, optional
        As :func:`~kansym.discover.run.discover` (default: ``config.time_limit`` from
        now); the discovery on the groups runs under it.

    Returns
    -------
    UnitsDiscovery
        With ``reduction=None`` when the units are inconsistent (the target's units cannot
        be made from the inputs'; logged as a warning) or when nothing is reduced: then
        the plain :func:`~kansym.discover.run.discover` ran on the original columns.

    Raises
    ------
    DataError
        A missing or unreadable unit (one line, naming the column), or bad data.
    ConfigError, FitError
        As :func:`~kansym.discover.run.discover`.

    A table with columns of extreme magnitude is worked on with every column divided by a
    power of two, as in :func:`~kansym.discover.run.discover`; the formulas come back in
    the table's units and the models trained on the groups in the groups' units.
    """
    config = config or DiscoverConfig()
    deadline = Deadline(config.time_limit) if deadline is None else deadline
    x = np.asarray(x, dtype=np.float64)
    run = UnitsRun(x, np.asarray(y, dtype=np.float64).reshape(len(x), -1), list(input_names), target, units, config,
                   deadline, progress)
    found = replace(run.discover(), time_limit=deadline.seconds, cut_short=deadline.cuts)
    return run.to_table(found)


@dataclass
class UnitsRun:
    """One :func:`discover_with_units` call as it goes, as :class:`~kansym.discover.run.Run` is
    for :func:`~kansym.discover.run.discover`: the table and the options, read by its steps
    (:meth:`discover`: the reduction, the monomial alone, the groups, the columns).

    Attributes
    ----------
    x, y : ndarray (N, d), (N, 1)
        The table's inputs and target (table units).
    names, target : list of str, str
    units : mapping
        Every column's unit as given (strings, or dicts already parsed).
    config : DiscoverConfig
        As asked, for the search on the columns after a failed one on the groups; every other
        search uses ``searched``, without input screening (the units name every variable the
        law may use: the reduction shrinks them).
    deadline : kansym.deadline.Deadline
    progress : bool or None

    The construction checks the target (one column) and the units and sets the fields below.
    """

    x: np.ndarray
    y: np.ndarray
    names: list[str]
    target: str
    units: Mapping
    config: DiscoverConfig
    deadline: Deadline
    progress: bool | None = None
    # set by the construction: units parsed and as written, working units and the table in them,
    # the split (split_holdout; none held out: test_idx is fit_idx, n_test 0), the searches' config
    parsed: dict = field(init=False)
    text: dict = field(init=False)
    scales: ColumnScales = field(init=False)
    x_work: np.ndarray = field(init=False)
    y_work: np.ndarray = field(init=False)
    fit_idx: np.ndarray = field(init=False)
    test_idx: np.ndarray = field(init=False)
    n_test: int = field(init=False)
    searched: DiscoverConfig = field(init=False)

    def __post_init__(self) -> None:
        if self.y.shape[1] != 1:
            raise DataError(f"discovery with units takes one target, got {self.y.shape[1]}")
        columns = [*self.names, self.target]
        self.parsed = read_units(self.units, columns)
        self.text = {c: (self.units[c] if isinstance(self.units[c], str) else str(self.units[c])) for c in columns}
        self.scales = working_scales(self.x, self.y, self.names, [self.target], self.config.space)
        self.x_work, self.y_work = self.scales.x_to_working(self.x), self.scales.y_to_working(self.y)
        fit_idx, test_idx = split_holdout(self.x.shape[0], self.config.holdout, self.config.seed)
        self.fit_idx, self.n_test = fit_idx, 0 if test_idx is None else len(test_idx)
        self.test_idx = fit_idx if test_idx is None else test_idx
        self.searched = self.config.replace(screen=False)

    def discover(self) -> UnitsDiscovery:
        """The steps, in the working units: the reduction (none: the columns as they are), a
        constant times the monomial when it explains the target, the search on the groups,
        and the columns too when the groups' formula does not verify."""
        rows, reason = self.reduced_rows()
        if rows is None:
            return self.on_columns(reason)
        red, fit_idx = rows.red, rows.fit_idx
        best_q, best_r2 = red.closest_monomial(rows.x[fit_idx], rows.y[fit_idx])  # a constant times it needs no KAN
        g, yp = red.reduce(rows.x, rows.y)
        finite = bool(np.all(np.isfinite(g)) and np.all(np.isfinite(yp)))
        searchable = finite and bool(red.groups)  # a function of the groups can be searched for
        if not finite and best_q is None:
            return self.on_columns("the dimensionless groups are not finite on these rows (zero or negative values)")
        constant = None
        if best_q is not None and (not searchable or best_r2 >= TRY_CONSTANT_R2):
            constant = _constant(replace(rows, red=red.with_p(best_q)))
            if (best_r2 >= CONSTANT_R2 or (not searchable and best_r2 >= TRY_CONSTANT_R2) or
                    (searchable and _groups_explain_nothing(red.with_p(best_q), rows.x[fit_idx], rows.y[fit_idx]))):
                return _logged(constant)
            if not searchable:
                return self.on_columns(f"{self.target} is not a constant times {red.monomial(rows.symbols)} (R² "
                                       f"{best_r2:.4f}) although the units allow nothing else: a unit is wrong or a "
                                       "variable is missing")
        # a limit of its own (its stages' shares are shares of it), its cuts recorded in the run's
        limit = _part(self.deadline, GROUPS_SHARE * self.deadline.seconds if self.deadline.seconds else None)
        reduced = self.on_groups(g, yp, rows, constant, limit)
        self.deadline.absorb(limit)
        if reduced.formulas[0].warning is None or self.deadline.remaining() < MIN_PLAIN_SECONDS:
            return reduced
        return self.columns_too(reduced)

    def reduced_rows(self) -> tuple[ReducedRows | None, str | None]:
        """The working rows with their reduction (:func:`analyze`); or None and why (None: the
        reduction leaves every column as it is)."""
        x, yv, fit_idx = self.x_work, self.y_work[:, 0], self.fit_idx
        red = analyze(self.names, [self.parsed[n] for n in self.names], self.parsed[self.target], x[fit_idx],
                      yv[fit_idx])
        if red is None:
            return None, (f"the units of {self.target} cannot be made from those of {', '.join(self.names)} "
                          "(inconsistent units; every unit name is its own base dimension, so write derived units "
                          "in base ones, e.g. N as kg*m/s^2)")
        if red.trivial:
            return None, None
        return ReducedRows(x, yv, red, fit_idx, self.test_idx, self.n_test, _symbols(self.names, x), self.target,
                           self.text), None

    def on_columns(self, reason: str | None, config: DiscoverConfig | None = None,
                   deadline: Deadline | None = None) -> UnitsDiscovery:
        """:func:`~kansym.discover.run.discover` on the columns themselves (``reason``, when
        given, is logged as a warning: why no reduction is used)."""
        if reason:
            log.warning("%s; discovering without a dimensional reduction", reason)
        res = discover(self.x_work, self.y_work, self.names, [self.target], config or self.searched,
                       progress=self.progress, deadline=deadline or self.deadline)
        return UnitsDiscovery(**{f: getattr(res, f) for f in res.__dataclass_fields__}, reduction=None,
                              units=self.text)

    def on_groups(self, g: np.ndarray, yp: np.ndarray, rows: ReducedRows, constant,
                  limit: Deadline) -> UnitsDiscovery:
        """Discovery on the dimensionless groups ``g`` of ``yp = y / prod x^p`` until ``limit``,
        mapped back to the columns (:func:`map_back`, :func:`weighted_search`); the monomial
        with a fitted constant, ``constant``, when it leaves no more unexplained."""
        t0 = time.perf_counter()
        red, target = rows.red, rows.target
        # the KAN (and its checkpoints) predict y / monomial, not the target: name it so, since
        # `kansym symbolify` on those checkpoints prints "<name> = f(groups)"
        res = discover(g, yp[:, None], list(red.group_names), [f"{target}_reduced"], self.searched,
                       progress=self.progress, deadline=limit)
        formulas = tuple(map_back(f, res, rows) for f in res.formulas)
        weighted = weighted_search(g, yp, res, formulas[0], rows, self.searched, limit)
        if weighted is not None:
            formulas = (weighted, *formulas[1:])
        out = UnitsDiscovery(**{f: getattr(res, f) for f in res.__dataclass_fields__}, reduction=red, units=rows.text)
        meta = reduction_meta(red, target)  # the checkpoints predict from the table's columns (kansym predict)
        out = replace(out, formulas=formulas, trained=res.trained.replace_model(res.trained.model, reduction=meta),
                      pruned=res.pruned.replace_model(res.pruned.model, reduction=meta))
        if constant is not None and kept_run([out], incumbent=constant, margin=GROUPS_LEAD, floor=GROUPS_TIE) is constant:
            return replace(_logged(constant), seconds={**out.seconds, "constant": constant.seconds["constant"],
                                                       "total": time.perf_counter() - t0})
        return out

    def columns_too(self, reduced: UnitsDiscovery) -> UnitsDiscovery:
        """The columns themselves in the time left, after a groups' formula ``reduced`` that did
        not verify (the reduction can hide the law from the searches: a law whose groups need
        a product the KAN does not separate); the first verified wins."""
        log.info("the formula on the dimensionless groups did not verify; discovering on the columns too")
        limit = _part(self.deadline, self.deadline.remaining() if self.deadline.seconds else None)
        direct = self.on_columns(None, self.config, limit)
        self.deadline.absorb(limit)
        kept = verified_or(direct, reduced)
        if kept is direct:
            log.info("the formula found on the columns verified: it is the answer (no dimensional reduction)")
        return kept

    def to_table(self, res: UnitsDiscovery) -> UnitsDiscovery:
        """A units discovery of the working units in the table's (:mod:`kansym.discover.rows`): the
        formulas by the column scales (checked on the fitting rows, table units), the KAN of
        the groups by the groups' (``U k`` for a group of exponents ``U``, ``k_y - p . k`` for
        ``y / prod x^p``)."""
        scales = self.scales
        if scales.identity:
            return res
        formulas = tuple(formula_to_table(f, scales) for f in res.formulas)
        for f in formulas:
            check_representable(f, self.x[self.fit_idx], self.y[self.fit_idx, 0], scales)
        red, kx = res.reduction, [Fraction(k) for k in scales.x_exp]
        model = scales
        if red is not None and res.trained is not None:
            model = ColumnScales(tuple(sum(int(e) * k for e, k in zip(row, kx)) for row in red.groups),
                                 (Fraction(scales.y_exp[0]) - sum(Fraction(p) * k for p, k in zip(red.p, kx)),),
                                 scales.y_sign)
        bundle = (lambda b: None if b is None else model.bundle_to_table(b))
        return replace(res, formulas=formulas, trained=bundle(res.trained), pruned=bundle(res.pruned),
                       symbolic=symbolic_to_table(res.symbolic, model))


def _part(deadline: Deadline, seconds: float | None) -> Deadline:
    """A limit of ``seconds`` from now, ending no later than ``deadline`` (None: no limit)."""
    if seconds is None or deadline.seconds is None:
        return Deadline(None)
    return Deadline(max(min(seconds, deadline.remaining()), 1e-3))


def _groups_explain_nothing(red: Reduction, x: np.ndarray, y: np.ndarray) -> bool:
    """Whether ``y / prod x^p`` is a constant plus noise: a smooth fit on the groups (Legendre
    polynomials with pairwise products, :func:`kansym.discover.structure_tests.interaction_r2`) explains at
    most ``NULL_R2`` of its variance (about what such a fit explains of pure noise)."""
    g, yq = red.reduce(x, y)
    return bool(np.std(yq) == 0 or interaction_r2(g, yq) <= NULL_R2)


def _logged(result: UnitsDiscovery) -> UnitsDiscovery:
    f = result.formulas[0]
    if f.warning:
        log.warning("%s: %s", f.target, f.warning)
    return result


def _constant(rows: ReducedRows) -> UnitsDiscovery:
    """``y = C * prod x^p``: C by least squares in CSV units, refit and snapped
    (:func:`kansym.symbolic.refine.refine`, linear loss)."""
    t0 = time.perf_counter()
    red, x, y, fit_idx, test_idx, symbols = rows.red, rows.x, rows.y, rows.fit_idx, rows.test_idx, rows.symbols
    target = rows.target
    mono = red.monomial(symbols)
    _, yq = red.reduce(x[fit_idx], y[fit_idx])
    # least squares C = <y, m> / <m, m> in the data's own units: unbiased under additive
    # noise (a fit of log y is not: it snapped 0.4977 to exp(-2 pi/9) instead of 1/2)
    m = y[fit_idx] / yq
    c = float(np.dot(y[fit_idx], m) / np.dot(m, m)) if np.dot(m, m) > 0 else float(np.median(yq))
    raw = sympy.Float(c if np.isfinite(c) else float(np.median(yq))) * mono
    expr = refine(raw, symbols, x[fit_idx], y[fit_idx], loss_space="linear")
    if not np.all(np.isfinite(predictions(expr, symbols, x[fit_idx]))):
        expr = raw
    y_model_fit = predictions(raw, symbols, x[fit_idx])
    fid = fidelity(lambdify_formula(expr, symbols), x[fit_idx], y[fit_idx], y_model_fit)
    front = pareto_front([raw], expr, symbols, x[test_idx], y[test_idx])
    formula = Formula(
        expr=expr, raw=raw, symbols=tuple(symbols), fidelity=fid, target=target,
        r2_test=next(e.r2 for e in front if e.chosen),
        r2_model_test=r2_score(y[test_idx], predictions(raw, symbols, x[test_idx])),
        n_test=rows.n_test,
        front=front,
        origin="units",
        reason=f"{target} is a constant times the monomial {red.monomial(symbols)} of the dimensional analysis",
    )
    formula = replace(formula, residual=formula.residual_test(x[fit_idx], y[fit_idx], x[test_idx], y[test_idx]))
    const_red = Reduction(red.names, red.dims, red.p, (), ())
    return UnitsDiscovery(trained=None, pruned=None, prune_result=None, symbolic=None, formulas=(formula,),
                          graph=nx.DiGraph(), seconds={"constant": time.perf_counter() - t0}, runs=0,
                          reduction=const_red, units=rows.text)
