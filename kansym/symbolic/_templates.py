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


def occupation_candidates(x: np.ndarray, y: np.ndarray, symbol: sympy.Symbol, keep: int = 2) -> list[sympy.Expr]:
    """The ``keep`` best templates of the module docstring for ``y(x)`` (one input), as sympy
    expressions with float constants; none unless ``y`` keeps one sign and ``x > 0``.

    Parameters
    ----------
    x : ndarray (N,)
    y : ndarray (N,)
    symbol : sympy.Symbol
        The input's symbol.
    keep : int
        Most candidates returned, best (smallest RMS error of ``log |y|``) first.
    """
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    sign = 1.0 if np.all(y > 0) else (-1.0 if np.all(y < 0) else 0.0)
    if not sign or not np.all(x > 0) or x.size < 10:
        return []
    rows = np.unique(np.linspace(0, x.size - 1, min(ROWS, x.size)).astype(int))
    lx, ly = np.log(x[rows]), np.log(sign * y[rows])
    found = []
    for q in (1, -1):
        u = x[rows] ** q
        for s in (1, -1):
            for p in POWERS:
                fit = _fit(lx, ly, u, p, s)
                if fit is not None:
                    la, c, rms = fit
                    expr = sign * sympy.Float(math.exp(la)) * symbol ** p / (
                        sympy.exp(sympy.Float(c) * symbol ** q) - s)
                    found.append((rms, p * p + q, str(expr), expr))
    found.sort(key=lambda f: f[:3])
    return [f[3] for f in found[:keep]]
