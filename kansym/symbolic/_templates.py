"""Occupation-number templates of the direct search (:mod:`kansym.symbolic.direct`) for one input.

The search's links ``log(1 + 1/y)`` and ``log(1/y - 1)`` find ``1/(exp(c x) -+ 1)`` only
with amplitude 1. A law of one dimensionless group often carries a factor besides: Planck's
spectral radiance reduced by its units is ``x**3/(4 pi**3 (exp(x/(2 pi)) - 1))``. That factor
makes the link nonlinear, so no subset solve reaches it. This module fits, by nonlinear
least squares on ``log y`` (two constants: the amplitude ``a`` and the rate ``c``), the
family

    y = a x**p / (exp(c x**q) - s),   p in {-1, 0, 1, 2, 3},  q in {1, -1},  s in {1, -1}

(Bose-Einstein and Planck for ``s = 1``, Fermi-Dirac for ``s = -1``; Landau & Lifshitz,
"Statistical Physics", §§53-54, 63) and returns the best few as raw candidates, to be
refined, snapped and chosen with the others.

Private module.
"""

from __future__ import annotations

import math

import numpy as np
import sympy
from scipy.optimize import least_squares

POWERS = (-1, 0, 1, 2, 3)
RATE_STARTS = (0.1, 0.5, 2.0)  # starting rates, times 1 / median |x**q|
ROWS = 2000  # rows the templates are fitted on (evenly spaced)


def _fit(lx: np.ndarray, ly: np.ndarray, u: np.ndarray, p: int, s: int) -> tuple[float, float, float] | None:
    """Least squares of ``log y = log a + p log x - log(exp(c u) - s)`` over ``(log a, c)``;
    ``(log a, c, rms)`` of the best start, or None."""
    scale = float(np.median(np.abs(u)))
    if not scale > 0:
        return None

    def resid(theta: np.ndarray) -> np.ndarray:
        la, c = theta
        with np.errstate(all="ignore"):
            cu = c * u
            # log(exp(cu) - s), stable; for s = 1 defined (and y > 0) only where cu > 0
            d = np.logaddexp(cu, 0.0) if s == -1 else np.where(cu > 0, cu + np.log(-np.expm1(-cu)), np.nan)
        r = la + p * lx - d - ly
        return np.where(np.isfinite(r), r, 1e6)

    best = None
    for start in RATE_STARTS:
        c0 = start / scale
        with np.errstate(all="ignore"):
            d0 = np.logaddexp(c0 * u, 0.0) if s == -1 else np.log(np.expm1(c0 * u))
        la0 = float(np.median(ly - p * lx + d0))
        if not math.isfinite(la0):
            continue
        try:
            sol = least_squares(resid, np.array([la0, c0]), method="trf", max_nfev=200)
        except (ValueError, FloatingPointError):
            continue
        rms = float(np.sqrt(np.mean(sol.fun ** 2)))
        if math.isfinite(rms) and (best is None or rms < best[2]):
            best = (float(sol.x[0]), float(sol.x[1]), rms)
    return best


def _polish(x: np.ndarray, y: np.ndarray, factor: np.ndarray, start: tuple[float, float] | None, p: int, q: int,
            s: int, sign: float) -> tuple[float, float, float] | None:
    """Weighted least squares of ``factor * (sign a x**p / (exp(c x**q) - s) - y)`` over ``(log a, c)``,
    from the fit of the logs (``start``, may be None) and from each of ``RATE_STARTS`` with its best
    amplitude (linear in ``a``); ``(log a, c, nrmse of factor * y)`` of the best, or None."""
    u, fy = x ** q, factor * y
    scale = float(np.std(fy)) or 1.0

    def shape(c: float) -> np.ndarray:
        with np.errstate(all="ignore"):
            return factor * sign * np.exp(p * np.log(x)) / (np.exp(c * u) - s)

    def resid(theta: np.ndarray) -> np.ndarray:
        r = np.exp(theta[0]) * shape(theta[1]) - fy
        return np.where(np.isfinite(r), r, 1e6 * scale)

    starts = [start] if start is not None else []
    for rate in RATE_STARTS:
        c0 = rate / float(np.median(np.abs(u)))
        g = shape(c0)
        a0 = float(np.dot(g, fy) / np.dot(g, g)) if np.all(np.isfinite(g)) and np.dot(g, g) > 0 else 0.0
        if a0 > 0:
            starts.append((math.log(a0), c0))
    best = None
    for la, c in starts:
        try:
            sol = least_squares(resid, np.array([la, c]), method="trf", max_nfev=200)
        except (ValueError, FloatingPointError):
            continue
        rms = float(np.sqrt(np.mean(sol.fun ** 2))) / scale
        if math.isfinite(rms) and (best is None or rms < best[2]):
            best = (float(sol.x[0]), float(sol.x[1]), rms)
    return best


def occupation_candidates(x: np.ndarray, y: np.ndarray, symbol: sympy.Symbol, keep: int = 2,
                          factor: np.ndarray | None = None) -> list[sympy.Expr]:
    """The ``keep`` best templates of the module docstring for ``y(x)`` (one input), as sympy
    expressions with float constants; none unless ``x > 0``.

    Parameters
    ----------
    x : ndarray (N,)
    y : ndarray (N,)
        Of one sign but for noise: rows of the other sign (fewer than half) are left out of
        the fits of the logs, and the templates are refitted on ``y`` over every row (as with
        a factor of ones).
    symbol : sympy.Symbol
        The input's symbol.
    keep : int
        Most candidates returned, best (smallest RMS error of ``log |y|``) first.
    factor : ndarray (N,), optional
        A known positive factor of each row (:func:`kansym.symbolic.direct.direct_search`'s):
        the fits of the logs start from the rows of the sign of most, then each template is
        refitted by least squares on ``factor * y`` (all rows: noise may give ``y`` both signs
        where the law is small) and ranked by that error.
    """
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if factor is None and not (np.all(y > 0) or np.all(y < 0)):
        factor = np.ones_like(y)  # noise gives y both signs where the law is small: refit on y itself
    if factor is None:
        sign = 1.0 if np.all(y > 0) else (-1.0 if np.all(y < 0) else 0.0)
    else:
        factor = np.asarray(factor, dtype=np.float64).ravel()
        sign = 1.0 if np.mean(y > 0) > 0.5 else -1.0
    if not sign or not np.all(x > 0) or x.size < 10:
        return []
    rows = np.unique(np.linspace(0, x.size - 1, min(ROWS, x.size)).astype(int))
    logs = rows[sign * y[rows] > 0]  # every row without a factor
    if logs.size < 10:
        return []
    lx, ly = np.log(x[logs]), np.log(sign * y[logs])
    found = []
    for q in (1, -1):
        u = x[logs] ** q
        for s in (1, -1):
            for p in POWERS:
                fit = _fit(lx, ly, u, p, s)
                if factor is not None:
                    fit = _polish(x[rows], y[rows], factor[rows], None if fit is None else fit[:2], p, q, s, sign)
                if fit is not None:
                    la, c, rms = fit
                    expr = sign * sympy.Float(math.exp(la)) * symbol ** p / (
                        sympy.exp(sympy.Float(c) * symbol ** q) - s)
                    found.append((rms, p * p + q, str(expr), expr))
    found.sort(key=lambda f: f[:3])
    return [f[3] for f in found[:keep]]
