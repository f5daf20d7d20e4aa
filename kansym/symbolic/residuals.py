"""Is a formula's error noise, or a function of the inputs? (a lack-of-fit test without replicates)

A law found exactly leaves residuals ``y - f(x)`` that are the data's noise: no function of
``x`` predicts them. A formula that only approximates the law (a power law with float
exponents for a sum, a linear fit for a weighted mean) leaves a smooth error ``g(x)``,
which the residuals of nearby rows predict. R² alone cannot tell the two apart when the
approximation is close: at noise 0, ``1 - R² = 1e-6`` passes any R² threshold a noisy table
also needs.

:func:`residual_r2` measures how well the residuals of the held-out rows are predicted by
the mean residual of their ``k`` nearest fitting rows (inputs mapped to their empirical
quantiles, so that units and skewed columns do not decide what is near). Noise gives
about ``-1/k`` (the neighbours' mean only adds its own variance); an approximation's
error gives a value near 1. On the no-units Feynman run of docs/benchmarks.md (stop 23),
the nine approximations kansym printed without a warning score 0.38-0.99 at noise 0, and
none of its 59 exact formulas scores significantly above 0 once noise of 0.01 is added.

It is the classical lack-of-fit test of regression (Draper & Smith, "Applied Regression
Analysis", 3rd ed., 1998, ch. 2), which needs rows with repeated inputs, with nearest
neighbours standing in for the repeats; its significance comes from a permutation test
(Good, "Permutation, Parametric and Bootstrap Tests of Hypotheses", 3rd ed., 2005).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy.spatial import cKDTree
from scipy.stats import rankdata

__all__ = ["residual_r2", "formula_residual_r2", "RESIDUAL_K", "EXACT_RELATIVE", "MIN_RESIDUAL_ROWS",
           "PERMUTATIONS", "MAX_INDEX_ROWS"]

RESIDUAL_K = 10  # neighbours whose mean residual predicts a row's
EXACT_RELATIVE = 1e-8  # residual RMS below this times std(y): float rounding, the law is exact
MIN_RESIDUAL_ROWS = 40  # fewer rows on either side give no verdict
PERMUTATIONS = 39  # null draws: an observed value above all of them has p < 0.025
MAX_INDEX_ROWS = 20_000  # fitting rows searched (evenly spaced), and at most a quarter of that predicted


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


def residual_r2(x_fit: np.ndarray, res_fit: np.ndarray, x_test: np.ndarray, res_test: np.ndarray, *,
                scale: float, k: int = RESIDUAL_K, seed: int = 0, weight_fit: np.ndarray | None = None,
                weight_test: np.ndarray | None = None) -> float:
    """R² with which the residuals of ``x_test`` are predicted from their nearest fitting rows'.

    Parameters
    ----------
    x_fit : ndarray (N, d)
        Inputs of the rows whose residuals predict (the fitting rows).
    res_fit : ndarray (N,)
        Their residuals ``y - f(x)``, in the target's units.
    x_test : ndarray (M, d)
        Inputs of the rows predicted (the held-out rows).
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
    float
        ``1 - sum((r - r_hat)^2) / sum((r - mean r)^2)`` over the predicted rows, ``r_hat`` the
        mean residual of the ``k`` nearest fitting rows (inputs as quantiles of the fitting
        rows'). About ``-1/k`` for noise, near 1 for an error that is a smooth function of the
        inputs. 0.0 when the value does not exceed all of ``PERMUTATIONS`` = 39 values with the
        fitting residuals shuffled (not significant, p >= 0.025). The larger of that value and
        the same computed on the residuals' ranks (fit and held-out rows ranked together), so
        that an error concentrated on a few rows, such as a series near a pole, is judged by
        its pattern and not by whether those rows' neighbours happen to be near (Conover &
        Iman 1981, "Rank transformations as a bridge between parametric and nonparametric
        statistics", Am. Stat. 35:124). NaN when there is no verdict:
        residuals at float rounding, fewer than ``MIN_RESIDUAL_ROWS`` = 40 rows on a side, or a
        non-finite residual. At most ``MAX_INDEX_ROWS`` = 20,000 fitting rows and 5,000
        predicted ones are used (evenly spaced).

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
        return math.nan
    fit, test = _even(res_fit.size, MAX_INDEX_ROWS), _even(res_test.size, MAX_INDEX_ROWS // 4)
    x_fit, res_fit, x_test, res_test = x_fit[fit], res_fit[fit], x_test[test], res_test[test]
    if weight_fit is None or weight_test is None:
        w_fit, w_test = np.ones(res_fit.size), np.ones(res_test.size)
    else:
        w_fit = np.asarray(weight_fit, float).ravel()[fit] ** 2
        w_test = np.asarray(weight_test, float).ravel()[test] ** 2
        if not (np.all(np.isfinite(w_fit) & (w_fit > 0)) and np.all(np.isfinite(w_test) & (w_test > 0))):
            return math.nan
    top = float(max(np.max(np.abs(res_fit)), np.max(np.abs(res_test))))
    if top == 0.0:
        return math.nan
    res_fit, res_test = res_fit / top, res_test / top  # numbers near 1: no square overflows
    rms = float(np.sqrt(np.mean(np.concatenate([res_fit, res_test]) ** 2))) * top
    if not rms > EXACT_RELATIVE * abs(scale):
        return math.nan
    k = min(k, res_fit.size)
    _, idx = cKDTree(_quantiles(x_fit, x_fit)).query(_quantiles(x_fit, x_test), k=k)
    idx = idx.reshape(res_test.size, k)
    rng = np.random.default_rng(seed)

    weighted = weight_fit is not None and weight_test is not None

    def significant(r_fit: np.ndarray, r_test: np.ndarray) -> float:
        """The neighbours' R² for ``r_test``, or 0.0 if not above every permutation's; NaN: no spread."""
        centred = r_test - (np.average(r_test, weights=w_test) if weighted else r_test.mean())
        sst = float((w_test * centred) @ centred) if weighted else float(centred @ centred)
        if sst <= 0.0:
            return math.nan

        def r2(order: np.ndarray | None) -> float:
            r, w = (r_fit, w_fit) if order is None else (r_fit[order], w_fit[order])  # shuffled with their weights
            if not weighted:
                e = r_test - r[idx].mean(axis=1)
                return 1.0 - float(e @ e) / sst
            e = r_test - (r[idx] * w[idx]).sum(axis=1) / w[idx].sum(axis=1)
            return 1.0 - float((w_test * e) @ e) / sst

        observed = r2(None)
        null = max(r2(rng.permutation(r_fit.size)) for _ in range(PERMUTATIONS))
        return observed if observed > null else 0.0

    linear = significant(res_fit, res_test)
    if math.isnan(linear):
        return math.nan
    # the same on the residuals' ranks: an error concentrated on a few rows (near a pole, say)
    # decides the plain R² by whether those rows' neighbours happen to be near; its ranks do not
    ranks = (rankdata(np.concatenate([res_fit, res_test])) - 0.5) / (res_fit.size + res_test.size) - 0.5
    ranked = significant(ranks[:res_fit.size], ranks[res_fit.size:])
    return linear if math.isnan(ranked) else max(linear, ranked)


def formula_residual_r2(predict: Callable[[np.ndarray], np.ndarray], x_fit: np.ndarray, y_fit: np.ndarray,
                        x_test: np.ndarray | None = None, y_test: np.ndarray | None = None) -> float:
    """:func:`residual_r2` of a formula: its held-out residuals predicted from its fitting rows'.

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
    float
        As :func:`residual_r2` (``scale`` the fitting targets' standard deviation).
    """
    x_fit, y_fit = np.asarray(x_fit, float), np.asarray(y_fit, float).ravel()
    if x_test is None or y_test is None or len(y_test) == 0:
        x_fit, y_fit, x_test, y_test = x_fit[::2], y_fit[::2], x_fit[1::2], y_fit[1::2]
    x_test, y_test = np.asarray(x_test, float), np.asarray(y_test, float).ravel()
    with np.errstate(all="ignore"):
        res_fit, res_test = y_fit - predict(x_fit), y_test - predict(x_test)
        top = float(np.max(np.abs(y_fit))) if y_fit.size else 0.0
        scale = float(np.std(y_fit / top)) * top if top > 0 and np.isfinite(top) else 0.0  # no overflow near 1e308
        return residual_r2(x_fit, res_fit, x_test, res_test, scale=scale)
