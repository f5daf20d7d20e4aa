"""Direct search of small formulas for laws of one or two inputs.

After dimensional analysis (AI Feynman, Udrescu & Tegmark 2020, Sci. Adv. 6, eaay2631,
§2) most laws are a function of one or two dimensionless groups. For those the space of
small formulas can be searched exhaustively, which a KAN's per-edge fits cannot do for
compositions such as ``x / (exp(x) - 1)`` or ``1 / sqrt(1 - x**2)``.

The search is a sparse regression over a dictionary of features, explicit and implicit
(rational), after a transform of the target:

    T(y) * (1 + sum_j v_j psi_j(x)) = c + sum_k w_k phi_k(x)

- ``T`` is one of ``y, 1/y, y**2, 1/y**2, sqrt(y), 1/sqrt(y), sin(y), exp(y), log(y)`` (where invertible on
  the data): AI Feynman's brute-force step applies such transforms to the target too; and
  the links of the occupation numbers ``log(1 + 1/y)`` and ``log(1/y - 1)`` (so that
  ``1 / (exp(c / x) - 1)`` and ``1 / (exp(c / x) + 1)`` are found with their constant ``c``);
- ``phi_k`` are taken from a dictionary of features of each input (powers, exp, log,
  sin/cos at a few frequencies) and, with two inputs, products of one feature of each (powers
  and sin/cos; a log only times a power: ``n log(V1/V2)``);
  at most three terms; ``psi_j`` (at most two, and at most three ``phi`` and ``psi``
  terms together) from the smaller denominator dictionary of powers, products and exp.
  The implicit form is linear in the unknowns ``c, w, v`` (SINDy-PI, Kaheman, Kutz &
  Brunton 2020, Proc. R. Soc. A 476, 20200279), so every subset is one least-squares
  solve, done in batches on the normal equations of unit-norm columns, the best ones
  solved again by QR on the rows (the numeric engine, below).

The candidates best in the target's own units (normalised RMS error) are then refined
like every kansym formula (:func:`kansym.symbolic.refine.refine`: constants refitted,
snapped to simple numbers, simplified) and returned with their error and complexity for
the one choice of the answer, :func:`kansym.discover.choice.choose`.

The numeric engine: least squares on every small subset of columns. Given a design matrix ``A (n_rows, n_cols)`` (column 0 the constant) and
a target ``t``, the SSE of the least-squares fit on every column subset of up to four
columns comes from the normal equations of the unit-norm columns in one vectorised
Cholesky pass (:func:`batched_sse`); the best subsets per size are kept
(:func:`ranked`) and solved again on the rows (:func:`coefficients`). The dictionary,
the target transforms and the formulas built from the coefficients are in
:mod:`kansym.symbolic.vocabulary`; the algorithm is described in docs/algorithms.md §7c.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

import numpy as np
import sympy

from kansym.config import COMPLEXITY_WEIGHT
from kansym.deadline import Deadline, time_is_up
from kansym.symbolic.vocabulary import occupation_candidates, scaled_candidates
from kansym.symbolic.vocabulary import _INVERSE_NP, _SLOPE, _design, _dictionary, _expression, _rational, _transforms
from kansym.symbolic.compose import predictions
from kansym.symbolic.pareto import expression_complexity
from kansym.symbolic.refine import refine, refine_times_factor, simplify_formula, take_out_squares
from kansym.symbolic.verify import nrmse, nrmse_in

__all__ = ['DirectCandidate', 'direct_search', 'selection_score', 'ERROR_FLOOR']

log = logging.getLogger("kansym")


def combinations(items: range, k: int) -> np.ndarray:
    """All ``k``-subsets of ``items`` in lexicographic order: ``(C(n, k), k)``."""
    n = math.comb(len(items), k)
    flat = np.fromiter(itertools.chain.from_iterable(itertools.combinations(items, k)), dtype=np.int64, count=n * k)
    return flat.reshape(n, k)


def subset_index(n_num: int, n_den: int, max_terms: int) -> dict[int, np.ndarray]:
    """Column subsets of ``[1, phi_1..phi_n_num, psi_1..psi_n_den]`` by number of terms:
    the constant, 1..max_terms further columns, at most 2 of them ``psi``."""
    out: dict[int, list] = {}
    for k_den in range(0, 3):
        for k_num in range(0 if k_den else 1, max_terms - k_den + 1):
            nums = combinations(range(1, 1 + n_num), k_num)
            dens = combinations(range(1 + n_num, 1 + n_num + n_den), k_den)
            if not len(nums) or not len(dens):
                continue
            both = np.concatenate([np.repeat(nums, len(dens), axis=0), np.tile(dens, (len(nums), 1))], axis=1)
            both = np.concatenate([np.zeros((len(both), 1), np.int64), both], axis=1)
            out.setdefault(k_num + k_den, []).append(both)
    return {k: np.concatenate(v) for k, v in out.items()}


SSE_BLOCK = 4096  # subsets per block of batched_sse: its temporaries (32 kB each) stay in cache


def batched_sse(G: np.ndarray, b: np.ndarray, tt: float, cols: np.ndarray) -> np.ndarray:
    """SSE of least squares on column subsets ``cols (n, k)`` from the Gram matrix ``G``,
    ``b = A^T t`` and ``tt = t^T t``.

    ``sse = tt - b_S^T G_S^{-1} b_S = tt - |z|^2`` with ``L z = b_S``, ``L`` the Cholesky
    factor of ``G_S + 1e-13 I``: the factorisation and the forward substitution run
    column by column over all subsets at once (``k`` is at most 4 here), without the
    per-matrix LAPACK calls of a batched solve (5-8x faster on 75,000 subsets of 4
    columns). The ridge keeps collinear subsets positive definite (their SSE is that of
    the subset without the repeated column); one whose pivot still comes out <= 0 in
    floating point gets ``inf`` (its fit is reached by a subset without that column).
    The subsets go through in blocks of ``SSE_BLOCK``: the same arithmetic per subset,
    but temporaries that stay in cache and below malloc's mmap threshold (over all
    75,000 at once, every temporary was fresh pages: 20,000 page faults per search and
    about 1.8x the time).
    """
    if len(cols) > SSE_BLOCK:
        return np.concatenate([batched_sse(G, b, tt, cols[i : i + SSE_BLOCK]) for i in range(0, len(cols), SSE_BLOCK)])
    k = cols.shape[1]
    n_cols = G.shape[0]
    Gf = G.ravel()
    c = [np.ascontiguousarray(cols[:, j]) for j in range(k)]
    L = [[None] * k for _ in range(k)]
    z = []
    ok = np.ones(len(cols), dtype=bool)
    with np.errstate(all="ignore"):
        for j in range(k):
            cj = c[j]
            d = np.take(Gf, cj * (n_cols + 1)) + 1e-13
            for m in range(j):
                d = d - L[j][m] ** 2
            ok &= d > 0
            ljj = np.sqrt(np.where(d > 0, d, 1.0))
            L[j][j] = ljj
            for i in range(j + 1, k):
                v = np.take(Gf, c[i] * n_cols + cj)
                for m in range(j):
                    v = v - L[i][m] * L[j][m]
                L[i][j] = v / ljj
            r = np.take(b, cj)
            for m in range(j):
                r = r - L[j][m] * z[m]
            z.append(r / ljj)
        sse = tt - sum(zj * zj for zj in z)
    return np.where(ok & np.isfinite(sse), sse, np.inf)


def ranked(t: np.ndarray, A: np.ndarray, rows: np.ndarray, index: dict[int, np.ndarray], keep: int) -> list[np.ndarray]:
    """The ``keep`` column subsets of lowest SSE per number of terms for target ``t``."""
    ts = t[rows]
    norms = np.linalg.norm(A, axis=0)
    A = A / np.where(norms > 0, norms, 1.0)
    G, b, tt = A.T @ A, A.T @ ts, float(ts @ ts)
    out = []
    for cols in index.values():
        sse = batched_sse(G, b, tt, cols)
        best = np.argpartition(sse, keep - 1)[:keep] if len(sse) > keep else np.arange(len(sse))
        out.extend(cols[i] for i in best[np.argsort(sse[best], kind="stable")] if np.isfinite(sse[i]))
    return out


def coefficients(t: np.ndarray, A: np.ndarray, cols: np.ndarray) -> np.ndarray | None:
    """Least-squares coefficients of the columns ``cols`` of ``A`` for ``t`` (None if degenerate)."""
    sub = A[:, cols]
    norms = np.linalg.norm(sub, axis=0)
    if not np.all(norms > 0):
        return None
    try:
        coef, *_ = np.linalg.lstsq(sub / norms, t, rcond=None)
    except np.linalg.LinAlgError:  # SVD did not converge: leave this subset out
        return None
    coef = coef / norms
    return coef if np.all(np.isfinite(coef)) else None


def drop_negligible(cols: np.ndarray, coef: np.ndarray, A: np.ndarray, t: np.ndarray,
                    rel: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """Drop the terms whose share of ``t`` (numerator) or of ``Q`` is below ``rel`` (the
    same formula found with a spurious extra term), keeping the constant column."""
    scale = np.sqrt(np.mean(A[:, cols] ** 2, axis=0)) * np.abs(coef)
    scale = scale / max(float(np.sqrt(np.mean(t ** 2))), 1e-300)
    keep = (cols == 0) | (scale >= rel)
    return cols[keep], coef[keep]


ERROR_FLOOR = 1e-9  # normalised RMS errors below this count as exact (float64 refits)
SEARCH_ROWS = 600  # evenly spaced rows used for the subset solves
REFINE_ROWS = 2000  # at most about this many rows for the refit of a candidate
SHARP = 3  # with a noise floor from outside: the raw candidates best by their own errors, refined besides


@dataclass(frozen=True)
class DirectCandidate:
    """One formula as the choice of the answer sees it (:func:`kansym.discover.choice.choose`): a
    refined formula of the direct search, of the structure search or of the monomial reading,
    or the KAN's formula measured on the held-out rows.

    Attributes
    ----------
    expr : sympy.Expr
    error : float
        Normalised RMS error (RMSE over the std of ``y``,
        :func:`kansym.symbolic.verify.nrmse`) on the rows it was scored on: the fitting
        rows for a search's candidate, the held-out rows in the choice of
        :func:`kansym.discover.choice.choose_formula`.
    complexity : int
        :func:`kansym.symbolic.pareto.expression_complexity`.
    origin : str
        The search that found it: ``"direct search"``, ``"structure"``
        (:mod:`kansym.discover.structure_search`), ``"monomial"``, or the KAN's formula's origin.
    structure : dict or None
        For ``"structure"``: the decomposition it came from (``Split.to_dict``).
    r2 : float
        R² on the rows of ``error``, where measured (NaN: not measured).
    residual : ndarray (N,) or None
        Prediction minus target on the rows of the significance test
        (:func:`kansym.discover.choice.significantly_better`), of the logs in log units; None:
        not computed (the choice then computes it only for the candidates that could win).
    """

    expr: sympy.Expr
    error: float
    complexity: int
    origin: str = "direct search"
    structure: dict | None = None
    r2: float = field(default=math.nan, compare=False)
    residual: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def floats(self) -> int:
        """Fitted constants: the floats of ``expr`` (snapped numbers are exact and do not count)."""
        return len(self.expr.atoms(sympy.Float))


def selection_score(error: float, complexity: int, complexity_weight: float) -> float:
    """The quantity the choice minimises: ``log10(max(error, ERROR_FLOOR)) + w * complexity``.

    One more node of the expression tree must buy a ``10**w``-fold smaller error
    (``w = complexity_weight``); errors below ``ERROR_FLOOR`` are equal, so among exact
    formulas the simplest wins. This is the log-error/complexity trade-off of PySR's
    ``score`` (Cranmer 2023, arXiv:2305.01582, §3) made a weighted sum, as in
    description-length selection (AI Feynman 2.0, Udrescu et al. 2020, arXiv:2006.10782).
    """
    if not math.isfinite(error):
        return math.inf
    return math.log10(max(error, ERROR_FLOOR)) + complexity_weight * complexity


def _error(expr: sympy.Expr, symbols: Sequence[sympy.Symbol], x: np.ndarray, y: np.ndarray,
           relative: bool = False, factor: np.ndarray | None = None) -> float:
    """:func:`~kansym.symbolic.verify.nrmse` of ``expr`` on ``x, y`` (of the logs when ``relative``,
    of ``factor * y`` when a factor is given); ``inf`` if it cannot be evaluated."""
    return _nrmse(y, predictions(expr, symbols, x), relative, factor)


def _nrmse(y: np.ndarray, pred, relative: bool, factor: np.ndarray | None = None) -> float:
    if factor is not None:
        with np.errstate(all="ignore"):
            err = nrmse(factor * y, factor * np.broadcast_to(np.asarray(pred, dtype=np.float64), y.shape))
        return err if math.isfinite(err) else math.inf
    return nrmse_in(y, np.broadcast_to(np.asarray(pred, dtype=np.float64), y.shape), log_space=relative)


def _signed(symbols: Sequence[sympy.Symbol], x: np.ndarray) -> dict[sympy.Symbol, sympy.Symbol]:
    """Symbols carrying the sign of their column (so ``sqrt(x**2)`` is ``x`` for x > 0)."""
    out = {}
    for i, s in enumerate(symbols):
        if np.all(x[:, i] > 0):
            out[s] = sympy.Symbol(s.name, positive=True)
        elif np.all(x[:, i] < 0):
            out[s] = sympy.Symbol(s.name, negative=True)
        else:
            out[s] = sympy.Symbol(s.name, real=True)
    return out


def direct_search(x: np.ndarray, y: np.ndarray, symbols: Sequence[sympy.Symbol], *,
                  complexity_weight: float = COMPLEXITY_WEIGHT, max_terms: int = 3, keep: int = 4,
                  refine_top: int = 4, noise: float | None = None, relative: bool = False,
                  factor: np.ndarray | None = None, deadline: Deadline | None = None) -> list[DirectCandidate]:
    """Search small formulas ``y = f(x)`` for one or two inputs.

    Parameters
    ----------
    x : ndarray (N, d), d in {1, 2}
        Inputs (any units; the formula is in these units).
    y : ndarray (N,)
    symbols : sequence of sympy.Symbol
        One per column of ``x``; the formulas are written in them.
    complexity_weight : float
        ``w`` of :func:`selection_score`, which also orders the raw candidates before
        refinement.
    max_terms : int
        Most numerator plus denominator terms (besides the constant).
    keep : int
        Subsets kept per target transform and number of terms.
    refine_top : int
        Most raw candidates refined (:func:`kansym.symbolic.refine.refine`); refinement
        stops early once no further raw candidate can beat the best refined one.
    noise : float, optional
        A noise floor estimated apart from the search (normalised RMS error, e.g. a smooth
        fit's on held-out rows). Candidates are ranked with their errors raised to it (within
        it every candidate is as good: the simplest first). Their constants are snapped against the smaller of
        it and the best error any raw candidate reached: when the dictionary cannot express
        the law, every candidate misses it and its own best error says nothing about the
        noise (:func:`kansym.symbolic.refine.refine`).
    relative : bool
        ``y``'s errors are relative to it (a model fitted in log units): each row of the
        subset solves is weighed by ``1 / (y |T'(y)|)``, and candidates are judged, refined and
        returned with their errors in log units (``noise`` too). Only for ``y > 0``.
    factor : ndarray (N,), optional
        A known positive factor of each row: the law is ``factor * y = factor * f(x)`` and its
        errors are those of ``factor * y`` (weighted least squares with weights
        ``factor**2``). After a dimensional reduction ``y`` is the target over its monomial
        and ``factor`` the monomial: noise of constant size on the target is
        ``noise / monomial`` on ``y``, and an unweighted fit lets the rows of small monomial,
        the noisiest, decide. The subset solves weigh each row by ``factor / |T'(y)|``, the
        refinements refit ``M f(x)`` on ``factor * y`` (``M`` a symbol fed the factor), and
        errors and ``noise`` are normalised RMS errors of ``factor * y``. Ignored with
        ``relative``.
    deadline : kansym.deadline.Deadline, optional
        The run's time limit, looked at before each target transform (a family of
        candidates) but the first, and before each refinement but the first: once it has
        expired the search goes on with what it has (the cut is recorded).

    Returns
    -------
    list of DirectCandidate
        Refined candidates, errors on ``x, y``; empty when ``d > 2``.
    """
    p = _problem(x, y, symbols, relative=relative, factor=factor, noise=noise, complexity_weight=complexity_weight)
    if p is None:
        return []
    index = subset_index(len(p.num), len(p.den), max_terms)
    prelim = _subset_candidates(p, index, keep, deadline)
    prelim.sort(key=lambda r: r.score)
    # the noise floor of every candidate's constants: the best fit any candidate reached (a
    # candidate that misses part of the law is held to it, not to its own misfit), or the
    # floor from outside when that is lower
    noise = min([r.error for r in prelim] + ([noise] if noise is not None and math.isfinite(noise) else []),
                default=None)
    raw, templates = _raw_candidates(p, prelim[: 4 * refine_top])
    raw.sort(key=lambda r: r[:3])
    out: list[DirectCandidate] = []
    seen: set = set()
    _refine_best(p, raw, noise, refine_top, deadline, out, seen)
    # within a floor from outside every candidate ties and the simplest rank first; the most
    # accurate raw candidates (by their own errors) are refined too, so that the data can
    # decide (an oracle's floor can be looser than the law's fit: (1 + w)/sqrt(1 - w^2) and
    # 2.4/(1 - 0.87 sin w) are both within 0.2 % of an oracle of v/c)
    if p.outside > 0:
        _refine_sharpest(p, prelim, templates, noise, deadline, out, seen)
    return out


class _Prelim(NamedTuple):
    """A raw candidate of the subset solves, ``T^{-1}(P / Q)``, before refinement."""

    score: float  # selection score of its error (raised to the floor from outside) and approximate nodes
    name: str  # the target transform T
    inverse: Callable[[sympy.Expr], sympy.Expr]  # T^{-1}
    cols: np.ndarray  # the dictionary's columns
    coef: np.ndarray  # their coefficients
    error: float  # error on the search rows
    whole: np.ndarray | None  # the coefficients rounded, where they fit as well (else None)


@dataclass(frozen=True)
class _Problem:
    """The data of one direct search, as its subset solves and refinements see them."""

    x: np.ndarray
    y: np.ndarray
    syms: list[sympy.Symbol]  # plain symbols, one per column
    to_signed: dict[sympy.Symbol, sympy.Symbol]  # plain -> carrying its column's sign
    back: dict[sympy.Symbol, sympy.Symbol]  # signed -> the caller's symbols
    relative: bool
    factor: np.ndarray | None
    num: list
    den: list
    rows: np.ndarray  # the rows of the subset solves
    outside: float  # the noise floor from outside (0 when none)
    complexity_weight: float
    step: int  # every step-th row is used by the refinements
    xr: np.ndarray
    yr: np.ndarray


def _problem(x: np.ndarray, y: np.ndarray, symbols: Sequence[sympy.Symbol], *, relative: bool,
             factor: np.ndarray | None, noise: float | None, complexity_weight: float) -> _Problem | None:
    """Check and prepare the data of :func:`direct_search`; None when it cannot search them."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.ndim != 2 or x.shape[1] not in (1, 2) or x.shape[0] < 10 or not np.all(np.isfinite(y)) or np.ptp(y) == 0:
        return None
    # the search and the refit work with plain symbols (sympy's sign reasoning on float
    # polynomials under roots is slow); the final simplification knows each column's sign
    signed = _signed(symbols, x)
    back = {v: k for k, v in signed.items()}
    syms = [sympy.Symbol(s.name) for s in symbols]
    to_signed = {p: signed[s] for p, s in zip(syms, symbols)}
    relative = relative and bool(np.all(y > 0))
    if factor is not None:
        factor = np.asarray(factor, dtype=np.float64).ravel()
        if relative or factor.shape != y.shape or not np.all(np.isfinite(factor) & (factor > 0)):
            factor = None
    num, den = _dictionary(x, syms)
    rows = np.unique(np.linspace(0, len(y) - 1, min(SEARCH_ROWS, len(y))).astype(int))
    # errors within the floor from outside are equal: among those candidates the simplest
    # ranks first (a leaf of a noisy oracle: the law's few terms, not the best fit of its noise)
    outside = noise if noise is not None and math.isfinite(noise) else 0.0
    step = max(1, len(y) // REFINE_ROWS)
    return _Problem(x, y, syms, to_signed, back, relative, factor, num, den, rows, outside, complexity_weight,
                    step, x[::step], y[::step])


def _raw_error(p: _Problem, name: str, cols: np.ndarray, coef: np.ndarray) -> float:
    """The error on the search rows of ``T^{-1}(P / Q)`` with these coefficients."""
    with np.errstate(all="ignore"):
        pred = _INVERSE_NP[name](_rational(p.num, p.den, cols, coef, p.rows))
        if name in ("sq", "invsq") and np.all(p.y < 0):
            pred = -pred
    return _nrmse(p.y[p.rows], pred, p.relative, None if p.factor is None else p.factor[p.rows])


def _subset_candidates(p: _Problem, index: dict[int, np.ndarray], keep: int,
                       deadline: Deadline | None) -> list[_Prelim]:
    """The best subsets of the dictionary for each target transform (the deadline looked at before each
    but the first), solved, in the order found."""
    prelim: list[_Prelim] = []
    tried: set = set()
    families = _transforms(p.y)
    for k, (name, t, inverse) in enumerate(families):
        if k and time_is_up(deadline):
            deadline.cut(f"direct search: {k} of {len(families)} target transforms searched")
            break
        A = _design(t, p.num, p.den, p.rows)
        if p.relative or p.factor is not None:  # weighted least squares: each row's error relative to y (or
            with np.errstate(all="ignore"):  # times the factor), in T's units
                scale = p.y[p.rows] if p.relative else 1.0 / p.factor[p.rows]
                weight = 1.0 / np.abs(scale * _SLOPE[name](p.y[p.rows]))
            if not np.all(np.isfinite(weight)):
                continue
            A, t = A * weight[:, None], t.copy()
            t[p.rows] *= weight
        for cols in ranked(t, A, p.rows, index, keep):
            r = _solved_subset(p, name, inverse, t, A, cols, tried)
            if r is not None:
                prelim.append(r)
    return prelim


def _solved_subset(p: _Problem, name: str, inverse: Callable[[sympy.Expr], sympy.Expr], t: np.ndarray,
                   A: np.ndarray, cols: np.ndarray, tried: set) -> _Prelim | None:
    """One subset of columns solved, its negligible terms dropped; None if unsolvable, tried or not finite."""
    coef = coefficients(t[p.rows], A, cols)
    if coef is None:
        return None
    cols, coef = drop_negligible(cols, coef, A, t[p.rows])
    if (name, tuple(cols)) in tried:
        return None
    tried.add((name, tuple(cols)))
    err = _raw_error(p, name, cols, coef)
    if not math.isfinite(err):
        return None
    approx = 3 * (len(cols) - 1) + (0 if name == "id" else 2)
    # within a floor from outside the candidates tie and the fewest nodes are refined
    # first; floats that may snap to whole numbers leave a far simpler formula
    # (1/sqrt(0.999 - 1.007 w**2) has 11 nodes, 1/sqrt(1 - w**2) 7), so a candidate whose
    # coefficients rounded fit as well is ranked by the nodes it would have (a coefficient
    # +-1 vanishes with its product, another whole number is one node), and refined
    # from its own floats: the refinement's tests decide whether they snap
    whole = np.round(coef)
    if not (np.all(whole != 0) and max(_raw_error(p, name, cols, whole), p.outside) <= max(err, p.outside)):
        whole = None
    else:
        approx -= sum(3 if abs(c) == 1 and j else 1 for c, j in zip(whole, cols))
    return _Prelim(selection_score(max(err, p.outside), approx, p.complexity_weight), name, inverse, cols,
                   coef, err, whole)


def _raw_candidates(p: _Problem, top: Sequence[_Prelim]) -> tuple[list[tuple], list[tuple]]:
    """The raw candidates to refine, ``(score, nodes, text, expr)``: the best subsets' formulas and, with
    one input, the fitted templates (occupation numbers, a standard function of a scaled power:
    :mod:`kansym.symbolic.vocabulary`); and those templates, ``(error, text, expr)``."""
    raw = []
    for _, name, inverse, cols, coef, err, whole in top:
        # err: the numeric error of exactly this expression on the search rows (computed
        # above from the same coefficients; no need to lambdify each candidate again)
        expr = _expression(p.num, p.den, cols, coef, inverse)
        nodes = expression_complexity(expr if whole is None else _expression(p.num, p.den, cols, whole, inverse))
        raw.append((selection_score(max(err, p.outside), nodes, p.complexity_weight), nodes, str(expr), expr))
    templates = []  # what the links cannot hold: a x^p/(exp(c x^q) -+ 1), a g(k x^p) + b, fitted
    one = p.x.shape[1] == 1
    for expr in ([*occupation_candidates(p.x[:, 0], p.y, p.syms[0], factor=p.factor),
                  *scaled_candidates(p.x[:, 0], p.y, p.syms[0], factor=p.factor)] if one else ()):
        pred = predictions(expr, p.syms, p.x[p.rows])
        err = _nrmse(p.y[p.rows], pred, p.relative, None if p.factor is None else p.factor[p.rows])
        if math.isfinite(err):
            templates.append((err, str(expr), expr))
            raw.append((selection_score(max(err, p.outside), expression_complexity(expr), p.complexity_weight),
                        expression_complexity(expr), str(expr), expr))
    return raw, templates


def _refine_into(p: _Problem, expr: sympy.Expr, key: str, noise: float | None, out: list[DirectCandidate],
                 seen: set) -> None:
    """Refine a raw candidate and add it to ``out`` unless it fails, is constant or was found already."""
    syms, to_signed = p.syms, p.to_signed
    try:
        if p.factor is None:
            fine = refine(expr, syms, p.xr, p.yr, noise=noise, loss_space="log" if p.relative else "linear")
        else:
            fine = refine_times_factor(expr, syms, p.xr, p.yr, p.factor[::p.step], noise)
            if fine is None:
                log.debug("direct search: refining %s did not keep the factor apart", key)
                return
        fine = simplify_formula(fine.xreplace(to_signed))
        fine = take_out_squares(fine, [to_signed[s] for s in syms], p.xr)  # sqrt(b/(1-a)^2) -> sqrt(b)/(1-a)
    except Exception as exc:  # a refit that fails leaves this raw candidate out  # noqa: BLE001
        log.debug("direct search: refining %s failed (%s)", key, exc)
        return
    err = _error(fine, [to_signed[s] for s in syms], p.x, p.y, p.relative, p.factor)
    if math.isfinite(err) and fine.free_symbols and str(fine) not in seen:  # a constant is no law of x
        seen.add(str(fine))
        out.append(DirectCandidate(fine.xreplace(p.back), err, expression_complexity(fine)))


def _refine_best(p: _Problem, raw: Sequence[tuple], noise: float | None, refine_top: int,
                 deadline: Deadline | None, out: list[DirectCandidate], seen: set) -> None:
    """Refine the raw candidates in order until ``refine_top`` are refined, the deadline has passed
    (after the first) or no further one can beat the best refined one."""
    w = p.complexity_weight
    for _, comp, key, expr in raw:
        if len(out) >= refine_top:
            break
        if out and time_is_up(deadline):
            deadline.cut(f"direct search: {len(out)} candidates refined")
            break
        # raw candidates that cannot beat the best refined one even at their fewest nodes are left
        floor_score = selection_score(p.outside, _least_complexity(expr, comp), w)
        if out and floor_score >= min(selection_score(max(c.error, p.outside), c.complexity, w) for c in out):
            break
        _refine_into(p, expr, key, noise, out, seen)


def _refine_sharpest(p: _Problem, prelim: Sequence[_Prelim], templates: Sequence[tuple], noise: float | None,
                     deadline: Deadline | None, out: list[DirectCandidate], seen: set) -> None:
    """Refine the raw candidates best by their own errors, then the fitted templates by theirs, while
    the deadline has not passed."""
    sharp = sorted(prelim, key=lambda r: (selection_score(r.error, 3 * (len(r.cols) - 1) + (r.name != "id") * 2,
                                                          p.complexity_weight), r.name))
    for r in sharp[:SHARP]:
        if time_is_up(deadline):
            break
        expr = _expression(p.num, p.den, r.cols, r.coef, r.inverse)
        _refine_into(p, expr, str(expr), noise, out, seen)
    for _, key, expr in sorted(templates, key=lambda t: t[:2]):  # the fitted templates, by their own errors
        if time_is_up(deadline):
            break
        _refine_into(p, expr, key, noise, out, seen)


def _least_complexity(expr: sympy.Expr, complexity: int) -> int:
    """Fewest nodes refinement can leave of a raw candidate of ``complexity`` nodes: each
    float becomes an exact number (one node instead of two), a float coefficient of a
    product that snaps to 1 or -1 vanishes with its ``Mul`` (a sign is a subtraction,
    :func:`~kansym.symbolic.pareto.expression_complexity`), and one term more may drop."""
    n_coefficients = sum(1 for node in sympy.preorder_traversal(expr)
                       if isinstance(node, sympy.Mul) and len(node.args) == 2 and isinstance(node.args[0], sympy.Float))
    return complexity - len(expr.atoms(sympy.Float)) - 2 * n_coefficients - 1
