"""Check a formula: fidelity on data (R², normalised error), whether its error is noise (lack of fit), and exact
symbolic recovery of a known law (SRBench's rule).

Exact symbolic recovery of a known law by a formula (SRBench's rule).

Exact recovery follows SRBench (La Cava et al. 2021, "Contemporary Symbolic
Regression Methods and their Relative Performance", NeurIPS Datasets and
Benchmarks, §4 "symbolic solution"): the candidate's floats are rounded to 3
significant digits (``|c| < 1e-4`` becomes 0); the candidate is a solution if
``simplify(true - cand)`` is a constant, or ``simplify(cand / true)`` is a
non-zero constant. ``sympy.simplify`` can run for minutes, so a numeric test on
random points answers the clear cases first and the symbolic test is cut off
after ``timeout`` seconds (see :func:`is_exact_recovery`). That cut-off is the one
clock left in the symbolic layer, on purpose: the check is a benchmark's verdict
(bench/*.py, tests, examples) and never decides which formula kansym finds or
prints; the pipeline's budgets count work (:mod:`kansym.symbolic.occam`,
:func:`kansym.symbolic.refine.simplify_formula`).

Is a formula's error noise, or a function of the inputs? (a lack-of-fit test without replicates)

A law found exactly leaves residuals ``y - f(x)`` that are the data's noise: no function of
``x`` predicts them. A formula that only approximates the law (a power law with float
exponents for a sum, a linear fit for a weighted mean) leaves a smooth error ``g(x)``,
which the residuals of nearby rows predict. R² alone cannot tell the two apart when the
approximation is close: at noise 0, ``1 - R² = 1e-6`` passes any R² threshold a noisy table
also needs.

:func:`residual_test` measures how well each row's residual is predicted by the mean residual
of its ``k`` nearest other rows (leave one out; fitting and held-out rows in one pool, inputs
mapped to their empirical quantiles, so that units and skewed columns do not decide what is
near). Until 2026-12-07 only the held-out rows were predicted, from the fitting rows; the
pool predicts 2.5 times as many rows of an 80/20 split, and more rows predicted is more power
at the same false-alarm rate (recomputed on the random laws' tuning rows at 1 % noise: one
more of the 9 wrong unwarned formulas flagged, none of the 40 exact ones; on the Feynman rows
of 2026-12-05 the same verdicts). Noise gives
about ``-1/k`` (the neighbours' mean only adds its own variance); an approximation's
error gives a value near 1. On the no-units Feynman run of docs/benchmarks.md (stop 23),
the nine approximations kansym printed without a warning score 0.38-0.99 at noise 0, and
none of its 59 exact formulas scores significantly above 0 once noise of 0.01 is added.

It is the classical lack-of-fit test of regression (Draper & Smith, "Applied Regression
Analysis", 3rd ed., 1998, ch. 2), which needs rows with repeated inputs, with nearest
neighbours standing in for the repeats; its significance comes from a permutation test
(Good, "Permutation, Parametric and Bootstrap Tests of Hypotheses", 3rd ed., 2005): the
fitting rows' residuals shuffled up to ``PERMUTATIONS`` = 999 times give the R² that noise gives,
and the p-value is the share of them at least as large as the observed one, drawn sequentially:
the shuffling stops once ``EXCEEDANCES`` = 10 are as large, with ``p = 10 / (shuffles drawn)``
(Besag & Clifford 1991, "Sequential Monte Carlo p-values", Biometrika 78:301), so residuals that
are noise cost a few dozen shuffles and only a small p-value all 999. The verdict
(:class:`ResidualTest`) rejects "the residuals are noise" when that p-value, Bonferroni-adjusted
over every statistic computed, is below ``RESIDUAL_ALPHA`` = 0.01: a formula that is the law
is flagged at most once in a hundred tables. Its effect size, the R², decides nothing: at 1 %
noise a formula that misses a term in a corner of the inputs (``1/(4 pi b^2)`` for
``1/(4 pi b^2) + 1/(4 pi a^2 sqrt(b))``) leaves residuals predicted with R² 0.19 only, at
p = 0.001. On the Feynman runs of 2026-12-05 at noise 0.01 (recomputed on the same rows) no
formula that was the law had p below 0.014, and 8 of the 12 wrong formulas printed without
a warning have p = 0.001-0.002.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar, Iterable, Literal

import numpy as np
import sympy
from scipy.spatial import cKDTree
from scipy.stats import rankdata

from kansym.config import SEED
from kansym.errors import ConfigError, DataError
from kansym.symbolic.refit import stable_lambdify

__all__ = ['SRBENCH_PI', 'is_exact_recovery', 'round_floats', 'ResidualTest', 'residual_test',
    'formula_residual_test', 'RESIDUAL_ALPHA', 'RESIDUAL_K', 'EXACT_RELATIVE', 'MIN_RESIDUAL_ROWS', 'PERMUTATIONS',
    'MAX_INDEX_ROWS', 'r2_from_sse', 'r2_score', 'nrmse', 'nrmse_in', 'Fidelity', 'fidelity']

logger = logging.getLogger("kansym")


T = TypeVar("T")

SRBENCH_PI = 3.1415926535


class _Timeout(Exception):
    pass


def _timed(fn: Callable[[], T], seconds: float, *, run_untimed: bool = False) -> T | None:
    """Run ``fn()``; ``None`` if it takes longer than ``seconds``.

    The cut-off uses SIGALRM, available only in the main thread of a POSIX
    process with no other interval timer running; elsewhere ``fn`` runs
    without a limit if ``run_untimed``, else is skipped (``None``).
    """
    usable = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
              and signal.getitimer(signal.ITIMER_REAL)[0] == 0.0)
    if not usable:
        return fn() if run_untimed else None

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    except _Timeout:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)


def round_floats(expr: sympy.Expr, digits: int = 3, zero_tol: float = 1e-4) -> sympy.Expr:
    """Round every Float of ``expr`` to ``digits`` significant digits; ``|c| < zero_tol`` -> 0."""
    expr = sympy.sympify(expr)
    sub = {}
    for f in expr.atoms(sympy.Float):
        v = float(f)
        sub[f] = sympy.Integer(0) if abs(v) < zero_tol else sympy.Float(float(f"{v:.{digits - 1}e}"))
    return expr.xreplace(sub)


def _numeric_verdict(true: sympy.Expr, cand: sympy.Expr, syms: list[sympy.Symbol], seed: int,
                     domain: tuple[Sequence[float], Sequence[float]] | None = None) -> tuple[bool, bool] | None:
    """``(clearly_constant, clearly_not)`` from 64 random points in ``domain`` (lows, highs per
    symbol; default [0.5, 2]^d), or None."""
    rng = np.random.default_rng(seed)
    lo, hi = (0.5, 2.0) if domain is None else (np.asarray(domain[0], float), np.asarray(domain[1], float))
    pts = rng.uniform(lo, hi, size=(64, len(syms)))
    with np.errstate(all="ignore"):
        try:
            t = np.broadcast_to(np.asarray(stable_lambdify(syms, true)(*pts.T), float), (64,))
            c = np.broadcast_to(np.asarray(stable_lambdify(syms, cand)(*pts.T), float), (64,))
        except (TypeError, ValueError, NameError, ZeroDivisionError):
            return None
        ok = np.isfinite(t) & np.isfinite(c) & (t != 0)
        if ok.sum() < 8:
            return None
        t, c = t[ok], c[ok]
        diff, ratio = c - t, c / t
    scale = float(np.median(np.abs(t))) + 1e-300
    rscale = float(np.median(np.abs(ratio))) + 1e-300
    d_spread, r_spread = float(np.ptp(diff)) / scale, float(np.ptp(ratio)) / rscale
    ratio_ok = float(np.median(np.abs(ratio))) > 1e-12
    constant = d_spread <= 1e-9 or (r_spread <= 1e-9 and ratio_ok)
    clearly_not = d_spread > 1e-6 and (r_spread > 1e-6 or not ratio_ok)
    return constant, clearly_not


def _matched(true_expr: sympy.Expr | str, candidate_expr: sympy.Expr | str, symbols: Sequence[Any] | None,
             pi_as_float: bool) -> tuple[sympy.Expr, sympy.Expr, list[sympy.Symbol]]:
    """The truth and the rounded candidate on one set of symbols (matched by name, the truth's
    assumptions winning), and the variables among them."""
    true = sympy.sympify(true_expr)
    cand = sympy.sympify(candidate_expr)
    by_name = {s.name: s for s in true.free_symbols}
    cand = cand.xreplace({s: by_name.get(s.name, s) for s in cand.free_symbols})
    if pi_as_float:
        true = true.subs(sympy.pi, sympy.Float(SRBENCH_PI))
    cand = round_floats(cand)
    if symbols is None:
        return true, cand, sorted(true.free_symbols | cand.free_symbols, key=lambda s: s.name)
    names = [s.name if isinstance(s, sympy.Symbol) else str(s) for s in symbols]
    return true, cand, [by_name.get(n, sympy.Symbol(n)) for n in names]


def is_exact_recovery(true_expr: sympy.Expr | str, candidate_expr: sympy.Expr | str, *,
                      symbols: Sequence[Any] | None = None, timeout: float = 5.0,
                      pi_as_float: bool = False, seed: int = SEED,
                      domain: tuple[Sequence[float], Sequence[float]] | None = None) -> bool:
    """SRBench exact symbolic recovery of ``true_expr`` by ``candidate_expr``.

    Parameters
    ----------
    true_expr, candidate_expr : sympy.Expr or str
        Symbols are matched by name (assumptions of ``true_expr`` win).
    symbols : sequence of sympy.Symbol or str, optional
        The variables; default: every free symbol of either expression. Other
        free symbols count as constants.
    timeout : float
        Seconds allowed for the symbolic test (SIGALRM, main thread only). A clock,
        so under heavy load a verdict can fall back to the numeric one; this function
        only judges a formula found already, it is not part of the search.
    pi_as_float : bool
        Replace ``pi`` in ``true_expr`` by ``3.1415926535`` as SRBench's
        string-based check did; by default ``pi`` stays exact, so a candidate
        whose ``pi`` was snapped symbolically is recognised.
    seed : int
        Seed of the random points of the numeric pre-check.
    domain : (sequence of float, sequence of float), optional
        Lows and highs of ``symbols`` (the ranges the law holds on): the numeric test draws
        its points there, and where sympy cannot decide a root's sign alone
        (``sqrt(c + v) sqrt(1/(c - v))`` against ``(1 + v/c)/sqrt(1 - v^2/c^2)``: ``c > v`` on
        the ranges) the symbolic test is run again with roots and powers combined as for
        positive bases (``powsimp(force=True)``), its verdict taken only when the numeric
        one on the domain agrees.

    Returns
    -------
    bool
        The candidate, with floats rounded to 3 significant digits and
        ``|c| < 1e-4`` set to 0, differs from the truth by a constant or is a
        non-zero constant multiple of it. A constant candidate only recovers a
        constant truth.

    Notes
    -----
    A numeric test on 64 random points in ``[0.5, 2]^d`` returns ``False`` at
    once when neither ``cand - true`` nor ``cand / true`` is constant there to
    ``1e-6`` relative. Otherwise the symbolic test decides; if it does not
    finish within ``timeout`` (or cannot be timed), the numeric verdict
    (constant to ``1e-9`` relative) is returned.
    """
    true, cand, syms = _matched(true_expr, candidate_expr, symbols, pi_as_float)
    varset = set(syms)
    if not (cand.free_symbols & varset):
        return not (true.free_symbols & varset)
    if domain is not None and (len(domain[0]) != len(syms) or len(domain[1]) != len(syms)):
        raise ValueError(f"domain needs one low and one high per symbol ({len(syms)}).")
    verdict = _numeric_verdict(true, cand, syms, seed, domain) if syms else None
    if verdict is not None and verdict[1]:
        return False

    def symbolic(rewrite=lambda e: e) -> bool:
        diff = sympy.simplify(rewrite(true - cand))
        if diff.is_finite is not False and not (diff.free_symbols & varset):
            return True
        ratio = sympy.simplify(rewrite(cand / true))
        return ratio.is_finite is not False and not (ratio.free_symbols & varset) and ratio != 0

    small = sympy.count_ops(true) + sympy.count_ops(cand) <= 40
    result = _timed(symbolic, timeout, run_untimed=small)
    if result is None:
        logger.debug("symbolic recovery check timed out; using the numeric verdict")
        return bool(verdict is not None and verdict[0])
    if not result and domain is not None and verdict is not None and verdict[0]:
        forced = _timed(lambda: symbolic(lambda e: sympy.powsimp(sympy.powdenest(e, force=True), force=True)),
                        timeout, run_untimed=small)
        result = bool(forced)
    return bool(result)


RESIDUAL_K = 10  # neighbours whose mean residual predicts a row's
EXACT_RELATIVE = 1e-8  # residual RMS below this times std(y): float rounding, the law is exact
MIN_RESIDUAL_ROWS = 40  # fewer rows on either side give no verdict
PERMUTATIONS = 999  # null draws of each statistic at most: p-values down to 0.001
EXCEEDANCES = 10  # ... fewer once this many are as large as the observed value (p >= 10/999 then)
FIRST_BATCH = 32  # shuffles drawn at once first (doubling after): noise stops after a few dozen
RESIDUAL_ALPHA = 0.01  # false-alarm rate: a formula that is the law is flagged at most this often
PERMUTATION_VALUES = 2_000_000  # numbers gathered at once by a batch of shuffles (memory, not results)
MAX_INDEX_ROWS = 20_000  # rows pooled (evenly spaced), and at most a quarter of that predicted


@dataclass(frozen=True)
class ResidualTest:
    """The verdict of the residual test: are a formula's residuals noise?

    Attributes
    ----------
    r2 : float
        R² of the rows' residuals predicted from their nearest other rows' (the larger of
        the plain and the ranked statistic): about ``-1/k`` for noise, near 1 for an error that is
        a smooth function of the inputs. NaN: no verdict.
    p : float
        Probability that residuals that are noise are predicted this well (permutation p-value,
        Bonferroni-adjusted over the ``statistics`` computed). NaN: no verdict.
    statistics : int
        How many statistics the adjustment covers.
    """

    r2: float = math.nan
    p: float = math.nan
    statistics: int = 0

    @property
    def rejects(self) -> bool:
        """Whether the residuals are a function of the inputs: ``p < RESIDUAL_ALPHA`` (no verdict: False)."""
        return bool(self.p < RESIDUAL_ALPHA)

    @staticmethod
    def combine(tests: Iterable["ResidualTest"]) -> "ResidualTest":
        """One verdict from several tests of one formula (other rows, other neighbours): the
        smallest p-value adjusted over all their statistics (Bonferroni), the largest R²; no
        verdict when none has one."""
        found = [t for t in tests if math.isfinite(t.p)]
        if not found:
            return ResidualTest()
        n = sum(t.statistics for t in found)
        least = min(t.p * n / t.statistics for t in found)
        return ResidualTest(max(t.r2 for t in found), min(1.0, least), n)


def _quantiles(ref: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each column of ``x`` as its empirical quantile among the same column of ``ref`` (0-1)."""
    out = np.empty(x.shape, dtype=np.float64)
    for j in range(x.shape[1]):
        col = np.sort(ref[:, j])
        lo = np.searchsorted(col, x[:, j], side="left")
        hi = np.searchsorted(col, x[:, j], side="right")
        out[:, j] = (lo + hi) / (2.0 * col.size)  # ties (a discrete column) get their mid rank
    return out


def _even(n: int, m: int) -> np.ndarray:
    """``min(n, m)`` indices spread evenly over ``range(n)``."""
    return np.arange(n) if n <= m else np.linspace(0, n - 1, m).round().astype(np.int64)


def residual_test(x_fit: np.ndarray, res_fit: np.ndarray, x_test: np.ndarray, res_test: np.ndarray, *,
                  scale: float, k: int = RESIDUAL_K, seed: int = SEED, weight_fit: np.ndarray | None = None,
                  weight_test: np.ndarray | None = None) -> ResidualTest:
    """Whether the rows' residuals are predicted from their nearest other rows' better than noise allows.

    Parameters
    ----------
    x_fit : ndarray (N, d)
        Inputs of the fitting rows.
    res_fit : ndarray (N,)
        Their residuals ``y - f(x)``, in the target's units.
    x_test : ndarray (M, d)
        Inputs of the held-out rows (pooled with the fitting rows: the test leaves each row out
        of its own prediction, so the rows' roles do not matter to it).
    res_test : ndarray (M,)
        Their residuals.
    scale : float
        The target's spread (its standard deviation), in the target's units: residuals whose
        RMS is below ``EXACT_RELATIVE`` = 1e-8 times it are float rounding of an exact law.
    k : int
        Neighbours averaged (``RESIDUAL_K`` = 10).
    seed : int
        Seed of the permutation test.
    weight_fit, weight_test : ndarray (N,), (M,), optional
        A known positive factor of each row by which its residual's noise is divided (after a
        dimensional reduction, the monomial: ``y / prod x^p`` carries the noise of ``y`` over
        it). The neighbours' mean and the R² are then weighted by its square (inverse-variance
        weights), so that the noisiest rows neither predict nor decide. Both or neither.

    Returns
    -------
    ResidualTest
        ``1 - sum((r - r_hat)^2) / sum((r - mean r)^2)`` over the predicted rows, ``r_hat`` the
        mean residual of the ``k`` nearest other rows of the pool (inputs as quantiles of the
        pool's), on the residuals and on their ranks (all rows ranked together: an
        error on a few rows, a series near a pole, is judged by its pattern; Conover & Iman 1981,
        Am. Stat. 35:124); ``p`` the smaller permutation p-value times 2, ``r2`` the larger R².
        No verdict (NaN): residuals at float rounding, fewer than ``MIN_RESIDUAL_ROWS`` rows on a
        side, a non-finite residual. At most ``MAX_INDEX_ROWS`` rows are pooled and a quarter of
        that predicted (evenly spaced); the permutations shuffle the residuals over the pool.

    Raises
    ------
    ValueError
        If the shapes disagree or ``k < 1``.
    """
    x_fit, x_test = np.atleast_2d(np.asarray(x_fit, float)), np.atleast_2d(np.asarray(x_test, float))
    res_fit, res_test = np.asarray(res_fit, float).ravel(), np.asarray(res_test, float).ravel()
    if x_fit.shape[0] != res_fit.size or x_test.shape[0] != res_test.size or x_fit.shape[1] != x_test.shape[1]:
        raise ValueError(f"shapes disagree: x_fit {x_fit.shape}, res_fit {res_fit.shape}, x_test {x_test.shape}, "
                         f"res_test {res_test.shape}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if min(res_fit.size, res_test.size) < MIN_RESIDUAL_ROWS or not (
            np.all(np.isfinite(res_fit)) and np.all(np.isfinite(res_test))):
        return ResidualTest()
    pooled = _pool(x_fit, res_fit, x_test, res_test, weight_fit, weight_test, scale)
    if pooled is None:
        return ResidualTest()
    x_all, r_all, weights = pooled
    predicted = _even(r_all.size, MAX_INDEX_ROWS // 4)
    idx = _other_neighbours(_quantiles(x_all, x_all), predicted, min(k, r_all.size - 1))
    rng = np.random.default_rng(seed)
    plain = _neighbour_r2(r_all, predicted, idx, weights, rng)
    if math.isnan(plain[0]):
        return ResidualTest()
    # the same on the residuals' ranks: an error concentrated on a few rows (near a pole, say)
    # decides the plain R² by whether those rows' neighbours happen to be near; its ranks do not
    ranks = (rankdata(r_all) - 0.5) / r_all.size - 0.5
    ranked = _neighbour_r2(ranks, predicted, idx, weights, rng)
    found = [t for t in (plain, ranked) if not math.isnan(t[0])]
    return ResidualTest(max(t[0] for t in found), min(1.0, len(found) * min(t[1] for t in found)), len(found))


def _pool(x_fit: np.ndarray, res_fit: np.ndarray, x_test: np.ndarray, res_test: np.ndarray,
          weight_fit: np.ndarray | None, weight_test: np.ndarray | None, scale: float
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """The rows of both sides as one pool (at most ``MAX_INDEX_ROWS``, evenly spaced): inputs,
    residuals scaled to a largest of 1 (no square overflows), inverse-variance weights or None;
    None when there is no verdict (a weight not finite and positive, residuals at float rounding)."""
    x_all, r_all = np.concatenate([x_fit, x_test]), np.concatenate([res_fit, res_test])
    pool = _even(r_all.size, MAX_INDEX_ROWS)
    x_all, r_all = x_all[pool], r_all[pool]
    weights = None
    if weight_fit is not None and weight_test is not None:
        weights = _inverse_variance(np.concatenate([np.ravel(weight_fit), np.ravel(weight_test)]), pool)
        if weights is None:
            return None
    top = float(np.max(np.abs(r_all)))
    if top == 0.0 or not float(np.sqrt(np.mean((r_all / top) ** 2))) * top > EXACT_RELATIVE * abs(scale):
        return None
    return x_all, r_all / top, weights


def _other_neighbours(q: np.ndarray, predicted: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` nearest rows of ``q (N, d)`` to each row ``predicted (M,)``, itself left out -> ``(M, k)``."""
    _, idx = cKDTree(q).query(q[predicted], k=k + 1)
    idx = idx.reshape(predicted.size, k + 1)
    itself = idx == predicted[:, None]
    itself[~itself.any(axis=1), -1] = True  # a row tied with k others at distance 0 need not come first
    return idx[~itself].reshape(predicted.size, k)


def _inverse_variance(weight: np.ndarray, pool: np.ndarray) -> np.ndarray | None:
    """The squares of the pooled rows' factors ``weight[pool]``; None when one is not finite and
    positive (no verdict)."""
    w = np.asarray(weight, float)[pool] ** 2
    return w if np.all(np.isfinite(w) & (w > 0)) else None


def _neighbour_r2(r: np.ndarray, predicted: np.ndarray, idx: np.ndarray, weights: np.ndarray | None,
                  rng: np.random.Generator) -> tuple[float, float]:
    """The R² of the residuals ``r (N,)`` of the rows ``predicted (M,)`` by the mean residual of
    their neighbours ``idx (M, k)`` (weighted by ``weights (N,)`` when given), and its permutation
    p-value over ``PERMUTATIONS`` shuffles of the rows; NaN for residuals without spread."""
    w_all = np.ones(r.size) if weights is None else weights
    w_p = w_all[predicted]
    centred = r[predicted] - np.average(r[predicted], weights=w_p)
    if float((w_p * centred) @ centred) <= 0.0:
        return math.nan, math.nan

    def r2(orders: np.ndarray) -> np.ndarray:
        """The R² with the rows' residuals in each of the ``(B, N)`` orders -> ``(B,)``."""
        rs = r[orders]  # (B, N)
        target = rs[:, predicted]  # (B, M)
        if weights is None:
            e = target - rs[:, idx].mean(axis=2)  # (B, M, k) -> (B, M)
            wt = np.ones_like(target)
        else:
            ws = w_all[orders]  # the weights go with their rows
            wt = ws[:, predicted]
            e = target - (rs[:, idx] * ws[:, idx]).sum(axis=2) / ws[:, idx].sum(axis=2)
        c = target - (np.einsum("bm,bm->b", wt, target) / wt.sum(axis=1))[:, None]
        return 1.0 - np.einsum("bm,bm->b", wt * e, e) / np.einsum("bm,bm->b", wt * c, c)

    observed = float(r2(np.arange(r.size)[None])[0])
    most = max(1, PERMUTATION_VALUES // (idx.size + r.size))
    drawn = as_large = 0
    while drawn < PERMUTATIONS:  # Besag & Clifford's sequential p-value: stop at EXCEEDANCES shuffles as large
        batch = min(FIRST_BATCH << (drawn // FIRST_BATCH).bit_length(), most, PERMUTATIONS - drawn)
        orders = rng.permuted(np.broadcast_to(np.arange(r.size), (batch, r.size)), axis=1)
        running = as_large + np.cumsum(r2(orders) >= observed)
        if running[-1] >= EXCEEDANCES:
            return observed, EXCEEDANCES / (drawn + 1 + int(np.argmax(running >= EXCEEDANCES)))
        drawn, as_large = drawn + batch, int(running[-1])
    return observed, (1 + as_large) / (PERMUTATIONS + 1)


def formula_residual_test(predict: Callable[[np.ndarray], np.ndarray], x_fit: np.ndarray, y_fit: np.ndarray,
                          x_test: np.ndarray | None = None, y_test: np.ndarray | None = None) -> ResidualTest:
    """:func:`residual_test` of a formula on its fitting and held-out rows.

    Parameters
    ----------
    predict : callable
        ``X (N, d) -> (N,)``, the formula (:func:`kansym.symbolic.compose.lambdify_formula`).
    x_fit, y_fit : ndarray (N, d), (N,)
        The rows its constants were fitted on.
    x_test, y_test : ndarray (M, d), (M,), optional
        Held-out rows; without them (or with none), the odd fitting rows are predicted from
        the even ones (not halves: a table sorted by an input would be extrapolated).

    Returns
    -------
    ResidualTest
        As :func:`residual_test` (``scale`` the fitting targets' standard deviation).
    """
    x_fit, y_fit = np.asarray(x_fit, float), np.asarray(y_fit, float).ravel()
    if x_test is None or y_test is None or len(y_test) == 0:
        x_fit, y_fit, x_test, y_test = x_fit[::2], y_fit[::2], x_fit[1::2], y_fit[1::2]
    x_test, y_test = np.asarray(x_test, float), np.asarray(y_test, float).ravel()
    with np.errstate(all="ignore"):
        res_fit, res_test = y_fit - predict(x_fit), y_test - predict(x_test)
        top = float(np.max(np.abs(y_fit))) if y_fit.size else 0.0
        scale = float(np.std(y_fit / top)) * top if top > 0 and np.isfinite(top) else 0.0  # no overflow near 1e308
        return residual_test(x_fit, res_fit, x_test, res_test, scale=scale)


def r2_from_sse(sse: float, sst: float, sst_floor: float = 0.0) -> float:
    """Coefficient of determination from sums of squares: ``1 - sse / max(sst, sst_floor)``.

    The one definition of R² in kansym (the textbook one; its constant-target
    convention is scikit-learn's ``sklearn.metrics.r2_score``): :func:`r2_score` and
    the per-edge fits' inner loop (:mod:`kansym.symbolic.fit`, which has the sums
    already) both end here.

    Parameters
    ----------
    sse : float
        Sum of squared residuals ``sum (y - pred)**2``; ``inf`` gives ``-inf``.
    sst : float
        Total sum of squares ``sum (y - mean(y))**2``.
    sst_floor : float
        Smallest ``sst`` divided by. The per-edge fits pass ``N (1e-10 max(1, max|y|))**2``:
        an edge whose output varies by less than float64 noise (a dead edge) is then
        not "explained" by a primitive fitting that noise; every fit scores about the
        same and the simplest wins. Default 0: no floor.

    Returns
    -------
    float
        At most 1. If ``max(sst, sst_floor) == 0`` (a constant target, no floor):
        1.0 when ``sse == 0``, else 0.0 (scikit-learn's ``r2_score`` convention: the
        ratio is undefined, and a finite value keeps reports and sorting simple).
    """
    denom = max(sst, sst_floor)
    if denom == 0.0:
        return 1.0 if sse == 0.0 else 0.0
    return 1.0 - sse / denom


def _pair(y_true: Any, y_pred: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both arrays as flat float64 of one non-empty size, else DataError."""
    t = np.asarray(y_true, dtype=np.float64).ravel()
    p = np.asarray(y_pred, dtype=np.float64).ravel()
    if t.shape != p.shape or t.size == 0:
        raise DataError(f"y_true and y_pred must be non-empty and of equal size, got {t.size} and {p.size}.")
    return t, p


def _unit_exponent(t: np.ndarray, p: np.ndarray) -> int:
    """The binary exponent ``e`` of ``max |t|`` (of ``max |p|`` if ``t`` is all 0; finite values only)."""
    for a in (t, p):
        a = np.abs(a[np.isfinite(a)])
        if a.size and a.max() > 0:
            return int(np.frexp(a.max())[1])
    return 0


def _scaled(t: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """``t, p`` times ``2**-e`` (:func:`_unit_exponent`), and ``e``.

    Multiplying by a power of two is exact, so sums of squares of the scaled arrays are those
    of the originals times ``4**-e`` exactly: R² and the normalised error do not change, but
    targets near 1e307 no longer overflow when squared, nor ones near 1e-300 underflow to 0
    (a formula ``y = 0`` then scored R² 1 on a target that is never 0). A prediction
    ``2**1024`` times larger than the target overflows to inf: an infinite error.
    """
    e = _unit_exponent(t, p)
    if e == 0:
        return t, p, 0
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(t, -e), np.ldexp(p, -e), e


def r2_score(y_true: Any, y_pred: Any, *, nonfinite: Literal["raise", "-inf"] = "raise") -> float:
    """Coefficient of determination ``1 - SSE / SST`` of predictions (:func:`r2_from_sse`).

    Parameters
    ----------
    y_true, y_pred : array_like, shape (N,)
        Any shapes of ``N`` elements (flattened).
    nonfinite : {"raise", "-inf"}
        What a NaN or inf in ``y_true`` or ``y_pred`` gives: a :class:`DataError`
        (reports: the formula is undefined on some rows), or ``-inf``, the worst score
        (ranking candidate formulas, where an undefined one just loses).

    Returns
    -------
    float
        At most 1. A constant ``y_true`` gives 1.0 for a prediction equal to it and
        0.0 otherwise (scikit-learn's convention; exact equality, no tolerance).

    Raises
    ------
    DataError
        If sizes differ or are 0, or (``nonfinite="raise"``) a value is NaN or inf.
    ConfigError
        If ``nonfinite`` is neither ``"raise"`` nor ``"-inf"``.
    """
    if nonfinite not in ("raise", "-inf"):
        raise ConfigError(f"nonfinite must be 'raise' or '-inf', got {nonfinite!r}.")
    t, p = _pair(y_true, y_pred)
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p))):
        if nonfinite == "-inf":
            return -math.inf
        raise DataError("r2_score got NaN or inf; the formula may be undefined on some rows.")
    t, p, _ = _scaled(t, p)  # exact: R² at any magnitude (no overflow near 1e308, no underflow near 1e-300)
    with np.errstate(over="ignore", invalid="ignore"):
        sse = float(np.sum((t - p) ** 2))
        sst = float(np.sum((t - t.mean()) ** 2))
    if not math.isfinite(sse):  # a prediction beyond 2**1024 times the target's magnitude
        return -math.inf
    return r2_from_sse(sse, sst)


def nrmse(y_true: Any, y_pred: Any) -> float:
    """Normalised RMS error ``rms(y_pred - y_true) / std(y_true)``, the error formulas are ranked by.

    In exact arithmetic ``nrmse = sqrt(SSE / SST) = sqrt(1 - R²)``; it is computed
    from the residuals, not from :func:`r2_score`, because ``1 - R²`` cancels to 0
    below about 1e-16, so ``sqrt(1 - R²)`` cannot tell errors below about 1e-8
    apart, and exact-formula thresholds such as
    :data:`kansym.symbolic.direct.ERROR_FLOOR` (1e-9) lie below that.

    Parameters
    ----------
    y_true, y_pred : array_like, shape (N,)
        Any shapes of ``N`` elements (flattened); ``std`` is the population one.

    Returns
    -------
    float
        ``>= 0``; ``inf`` if a value of either array is NaN or inf (a formula undefined
        on some rows, or the log of a non-positive target) or the ratio overflows. A
        constant ``y_true`` gives 0.0 for a prediction equal to it and ``inf``
        otherwise (any error is infinitely many standard deviations; unlike
        :func:`r2_score`, which reports 0.0 there, a ranking needs no finite value).

    Raises
    ------
    DataError
        If sizes differ or are 0.
    """
    t, p = _pair(y_true, y_pred)
    with np.errstate(all="ignore"):
        if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p))):
            return math.inf
        t, p, _ = _scaled(t, p)  # exact: the ratio at any magnitude
        sd = float(np.std(t))
        rms = float(np.sqrt(np.mean((p - t) ** 2)))
        if sd == 0.0:
            return 0.0 if rms == 0.0 else math.inf
        e = rms / sd
    return e if math.isfinite(e) else math.inf


def nrmse_in(y_true: Any, y_pred: Any, *, log_space: bool) -> float:
    """:func:`nrmse` in the units a model learned in: of the logs when ``log_space`` (a target
    over decades, docs/algorithms.md §1), ``inf`` where a value of either is not positive there."""
    if not log_space:
        return nrmse(y_true, y_pred)
    with np.errstate(all="ignore"):
        return nrmse(np.log(np.asarray(y_true, dtype=np.float64)), np.log(np.asarray(y_pred, dtype=np.float64)))


@dataclass(frozen=True)
class Fidelity:
    """How well a formula reproduces the data and the model it was read from.

    Attributes
    ----------
    r2_data : float
        R² of the formula against the data targets.
    r2_model : float
        R² of the formula against the model's predictions (NaN if not given).
    max_abs_err, rmse : float
        Largest absolute and root-mean-square error against the data targets,
        in the units of ``y`` (inf only when the error itself exceeds float64).
    """

    r2_data: float
    r2_model: float
    max_abs_err: float
    rmse: float

    def to_dict(self) -> dict[str, float]:
        """Plain dict for reports and JSON."""
        return {"r2_data": self.r2_data, "r2_model": self.r2_model,
                "max_abs_err": self.max_abs_err, "rmse": self.rmse}


def fidelity(f: Callable[[np.ndarray], Any], X: Any, y: Any, y_model: Any = None) -> Fidelity:
    """Measure a formula ``f`` on data (docs/algorithms.md §9).

    Parameters
    ----------
    f : callable
        Maps ``X`` (N, d) to predictions (N,), e.g. from
        :func:`kansym.symbolic.export.to_python` or ``sympy.lambdify``.
    X : array_like, shape (N, d)
    y : array_like, shape (N,)
        Data targets.
    y_model : array_like, shape (N,), optional
        The model's predictions on ``X``.

    Returns
    -------
    Fidelity

    Raises
    ------
    DataError
        If shapes disagree or the formula gives NaN/inf on some rows.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).ravel()
    with np.errstate(all="ignore"):
        pred = np.asarray(f(X), dtype=np.float64).ravel()
    if pred.size == 1:
        pred = np.full(y.shape, pred[0])
    if pred.shape != y.shape:
        raise DataError(f"the formula returned {pred.size} values for {y.size} rows; it must map (N, d) to (N,).")
    r2_data = r2_score(y, pred)
    r2_model = math.nan if y_model is None else r2_score(np.asarray(y_model).ravel(), pred)
    t, p, e = _scaled(y, pred)
    with np.errstate(over="ignore"):  # errors computed at unit magnitude, then scaled back exactly
        err = p - t
        return Fidelity(r2_data, r2_model, float(np.ldexp(np.max(np.abs(err)), e)),
                        float(np.ldexp(np.sqrt(np.mean(err**2)), e)))
