"""Is a formula's error noise, or a function of the inputs? (a lack-of-fit test without replicates)

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

import math
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np
from scipy.spatial import cKDTree
from scipy.stats import rankdata

__all__ = ["ResidualTest", "residual_test", "formula_residual_test", "RESIDUAL_ALPHA", "RESIDUAL_K",
           "EXACT_RELATIVE", "MIN_RESIDUAL_ROWS", "PERMUTATIONS", "MAX_INDEX_ROWS"]

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
                  scale: float, k: int = RESIDUAL_K, seed: int = 0, weight_fit: np.ndarray | None = None,
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
