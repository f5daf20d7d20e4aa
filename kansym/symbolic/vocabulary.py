"""The vocabulary of the direct search (:mod:`kansym.symbolic.direct`): features of the inputs, transforms of
the target, the rational form built from a subset of them, and the occupation-number templates of one input.

The search and its sources are documented in :mod:`kansym.symbolic.direct`.

Occupation-number templates for one input.

The search's links ``log(1 + 1/y)`` and ``log(1/y - 1)`` find ``1/(exp(c x) -+ 1)`` only
with amplitude 1. A law of one dimensionless group often carries a factor besides: Planck's
spectral radiance reduced by its units is ``x**3/(4 pi**3 (exp(x/(2 pi)) - 1))``. That factor
makes the link nonlinear, so no subset solve reaches it. :func:`occupation_candidates` fits, by nonlinear
least squares on ``log y`` (two constants: the amplitude ``a`` and the rate ``c``), the
family

    y = a x**p / (exp(c x**q) - s),   p in {-1, 0, 1, 2, 3},  q in {1, -1},  s in {1, -1}

(Bose-Einstein and Planck for ``s = 1``, Fermi-Dirac for ``s = -1``; Landau & Lifshitz,
"Statistical Physics", §§53-54, 63) and returns the best few as raw candidates, to be
refined, snapped and chosen with the others.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import sympy
from scipy.optimize import least_squares, minimize_scalar


MAX_VALUE = 1e12  # features beyond this magnitude on the data are dropped
MAX_TARGET = 1e100  # target transforms beyond it too (their squares, times features', must stay finite)
MAX_PHASE = 64.0  # sin/cos(w x) only while |w x| stays below this (about ten periods)


# --- dictionary --------------------------------------------------------------------------

@dataclass(frozen=True)
class _Feature:
    values: np.ndarray  # (N,)
    expr: sympy.Expr


def _unary(x: np.ndarray, s: sympy.Symbol, many: bool) -> list[tuple[str, np.ndarray, sympy.Expr]]:
    """Features of one input: (kind, values, expression); ``many`` (a law of one input): sin/cos
    at six frequencies (1, 2, 1/2, pi, 2 pi, 4 pi) and ``exp(+-1/x)``, else sin/cos at
    frequencies 1 and pi; a frequency
    only while the phase stays within ``MAX_PHASE`` (an input spanning thousands of
    periods, say a length in km, makes a sine a random feature)."""
    out = []
    pos = bool(np.all(x > 0))
    nonzero = bool(np.all(np.abs(x) > 1e-12))
    for k in (1, 2, 3):
        out.append(("poly", x ** k, s ** k))
    if nonzero:
        out.append(("poly", 1 / x, 1 / s))
        out.append(("poly", 1 / x ** 2, s ** -2))
        out.append(("poly", 1 / x ** 3, s ** -3))
    if pos:
        out.append(("root", np.sqrt(x), sympy.sqrt(s)))
        out.append(("log", np.log(x), sympy.log(s)))
    with np.errstate(over="ignore"):
        out.append(("exp", np.exp(x), sympy.exp(s)))
        out.append(("exp", np.exp(-x), sympy.exp(-s)))
        if many and nonzero:  # one input: a law of a ratio is a law of either orientation of it
            out.append(("exp", np.exp(1 / x), sympy.exp(1 / s)))
            out.append(("exp", np.exp(-1 / x), sympy.exp(-1 / s)))
    freqs = ((1.0, sympy.Integer(1)), (2.0, sympy.Integer(2)), (0.5, sympy.Rational(1, 2)),
             (math.pi, sympy.pi), (2 * math.pi, 2 * sympy.pi), (4 * math.pi, 4 * sympy.pi))
    for w, ws in freqs if many else freqs[:1] + freqs[3:4]:
        if w * np.max(np.abs(x)) > MAX_PHASE:
            continue
        out.append(("trig", np.sin(w * x), sympy.sin(ws * s)))
        out.append(("trig", np.cos(w * x), sympy.cos(ws * s)))
    return out


def _dictionary(x: np.ndarray, symbols: Sequence[sympy.Symbol]) -> tuple[list[_Feature], list[_Feature]]:
    """Numerator features ``phi`` and denominator features ``psi`` of inputs ``x (N, d)``."""
    per = [_unary(x[:, i], s, len(symbols) == 1) for i, s in enumerate(symbols)]
    num = [(v, e) for feats in per for _, v, e in feats]
    den = [(v, e) for feats in per for kind, v, e in feats if kind in ("poly", "exp")]
    if len(per) == 2:
        # a log only times a power of the other input (n log(V1/V2), x log x ... are laws; log*sin is none)
        small = [[f for f in feats if f[0] == "poly" and f[2] in (s, s ** 2, 1 / s, s ** -2)] +
                 [f for f in feats if f[0] == "trig" and f[2].args[0] == s] +
                 [f for f in feats if f[0] == "log"] for feats, s in zip(per, symbols)]
        for (ka, va, ea), (kb, vb, eb) in itertools.product(*small):
            if "log" in (ka, kb) and {ka, kb} != {"log", "poly"}:
                continue
            num.append((va * vb, ea * eb))
        for (_, va, ea), (_, vb, eb) in itertools.product(*[[f for f in sm if f[0] == "poly"] for sm in small]):
            if ea.is_polynomial() and eb.is_polynomial():
                den.append((va * vb, ea * eb))
    keep = lambda v: bool(np.all(np.isfinite(v)) and np.max(np.abs(v)) < MAX_VALUE and np.ptp(v) > 0)
    return ([_Feature(v, e) for v, e in num if keep(v)], [_Feature(v, e) for v, e in den if keep(v)])


# --- target transforms -------------------------------------------------------------------

def _pow(r: sympy.Expr, p: sympy.Expr) -> sympy.Expr:
    return sympy.Pow(r, p, evaluate=False)


def _transforms(y: np.ndarray) -> list[tuple[str, np.ndarray, Callable[[sympy.Expr], sympy.Expr]]]:
    """``(name, T(y), inverse)`` for the transforms invertible on ``y``'s range whose values stay
    below ``MAX_TARGET`` (the normal equations square them once more)."""
    out = [("id", y, lambda r: r)]
    pos, neg = bool(np.all(y > 0)), bool(np.all(y < 0))
    with np.errstate(over="ignore", divide="ignore", under="ignore"):  # checked below: finite and < MAX_TARGET
        if pos or neg:
            sign = 1 if pos else -1
            # unevaluated: sympy's sign reasoning on a root of a float rational can take minutes
            out.append(("inv", 1 / y, lambda r: _pow(r, -1)))
            out.append(("sq", y ** 2, lambda r: sign * _pow(r, sympy.Rational(1, 2))))
            out.append(("invsq", 1 / y ** 2, lambda r: sign * _pow(r, sympy.Rational(-1, 2))))
        if pos:
            out.append(("log", np.log(y), lambda r: sympy.exp(r, evaluate=False)))
            # roots: w^4/(1 - w^2)^2 has 1/sqrt(y) = 1/w^2 - 1
            out.append(("root", np.sqrt(y), lambda r: _pow(r, 2)))
            out.append(("invroot", 1 / np.sqrt(y), lambda r: _pow(r, -2)))
            # the links of occupation numbers: 1 / (exp(r) - 1) (Bose-Einstein, Planck) and
            # 1 / (exp(r) + 1) (Fermi-Dirac, the logistic function), r often c / x
            out.append(("bose", np.log1p(1 / y), lambda r: _pow(sympy.exp(r, evaluate=False) - 1, -1)))
            if np.all(y < 1):
                out.append(("fermi", np.log(1 / y - 1), lambda r: _pow(sympy.exp(r, evaluate=False) + 1, -1)))
        if np.all(np.abs(y) <= math.pi / 2):
            out.append(("sin", np.sin(y), lambda r: sympy.asin(r, evaluate=False)))
        if np.all(np.abs(y) <= 30) and np.ptp(y) < 30:
            out.append(("exp", np.exp(y), lambda r: sympy.log(r, evaluate=False)))
    return [t for t in out if np.all(np.isfinite(t[1])) and np.max(np.abs(t[1])) < MAX_TARGET and np.ptp(t[1]) > 0]


def _design(t: np.ndarray, num: list[_Feature], den: list[_Feature], rows) -> np.ndarray:
    """Columns ``[1, phi..., -t psi...]`` on ``rows``: ``(n_rows, 1 + n_num + n_den)``."""
    ts = t[rows]
    return np.column_stack([np.ones(len(ts))] + [f.values[rows] for f in num] + [-ts * f.values[rows] for f in den])


# |dT/dy| of each target transform: a row's weight in the transformed units (relative mode)
_SLOPE = {"id": lambda y: np.ones_like(y), "inv": lambda y: y ** -2.0, "sq": lambda y: 2 * np.abs(y),
          "invsq": lambda y: 2 * np.abs(y) ** -3.0, "log": lambda y: 1 / y, "sin": lambda y: np.abs(np.cos(y)),
          "exp": np.exp, "bose": lambda y: 1 / (y * (1 + y)), "fermi": lambda y: 1 / (y * (1 - y)),
          "root": lambda y: 0.5 / np.sqrt(y), "invroot": lambda y: 0.5 * y ** -1.5}
_INVERSE_NP = {"id": lambda r: r, "inv": lambda r: 1 / r, "sq": np.sqrt, "invsq": lambda r: 1 / np.sqrt(r),
               "log": np.exp, "sin": np.arcsin, "exp": np.log, "bose": lambda r: 1 / np.expm1(r),
               "fermi": lambda r: 1 / (np.exp(r) + 1), "root": np.square, "invroot": lambda r: r ** -2.0}


def _expression(num: list[_Feature], den: list[_Feature], cols: np.ndarray, coef: np.ndarray,
                inverse: Callable[[sympy.Expr], sympy.Expr]) -> sympy.Expr:
    """``T^{-1}(P / Q)`` for a column subset and its coefficients (whole ones as integers)."""
    n_num = len(num)
    P, Q = sympy.Integer(0), sympy.Integer(1)
    for c, j in zip(coef, cols):
        c = sympy.Integer(int(c)) if float(c).is_integer() else sympy.Float(c)  # a whole coefficient is exact
        if j == 0:
            P += c
        elif j <= n_num:
            P += c * num[j - 1].expr
        else:
            Q += c * den[j - 1 - n_num].expr
    return inverse(P if Q == 1 else sympy.Mul(P, _pow(Q, -1), evaluate=False))


def _rational(num: list[_Feature], den: list[_Feature], cols: np.ndarray, coef: np.ndarray,
              rows: np.ndarray) -> np.ndarray:
    """``P / Q`` of a column subset on ``rows``."""
    P, Q = np.zeros(len(rows)), np.ones(len(rows))
    for c, j in zip(coef, cols):
        if j == 0:
            P += c
        elif j <= len(num):
            P += c * num[j - 1].values[rows]
        else:
            Q += c * den[j - 1 - len(num)].values[rows]
    return P / Q


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


# --- a standard function of a scaled power of one input ---------------------------------

SCALED = {  # g(u) of the templates a g(k x**p) + b, with the signs of k that give distinct forms
    "tanh": (sympy.tanh, np.tanh, (1,)),
    "exp": (sympy.exp, np.exp, (1, -1)),
    "sin": (sympy.sin, np.sin, (1,)),
    "cos": (sympy.cos, np.cos, (1,)),
    "sqrt1p": (lambda u: sympy.sqrt(1 + u), lambda u: np.sqrt(1 + u), (1,)),
    "log1p": (lambda u: sympy.log(1 + u), np.log1p, (1,)),
    "inv1p": (lambda u: 1 / (1 + u), lambda u: 1 / (1 + u), (1,)),
}
SCALED_POWERS = (sympy.Rational(-2), sympy.Rational(-1), sympy.Rational(-1, 2), sympy.Rational(1, 2),
                 sympy.Rational(1), sympy.Rational(2), sympy.Rational(3))
SCALE_GRID = np.logspace(-2.0, 2.0, 41)  # scales k tried, times 1 / median(x**p), before a bounded polish


def _projected(g: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float, float]:
    """``(a, b, weighted SSE)`` of the least-squares fit ``y ~ a g + b`` (weights ``w``); inf SSE
    where ``g`` is not finite or has no spread."""
    if not np.all(np.isfinite(g)) or not np.ptp(g) > 0:
        return 0.0, 0.0, math.inf
    A = np.column_stack([g, np.ones_like(g)]) * w[:, None]
    coef, *_ = np.linalg.lstsq(A, y * w, rcond=None)
    r = A @ coef - y * w
    return float(coef[0]), float(coef[1]), float(r @ r)


def scaled_candidates(x: np.ndarray, y: np.ndarray, symbol: sympy.Symbol, keep: int = 3,
                      factor: np.ndarray | None = None) -> list[sympy.Expr]:
    """The ``keep`` best fits ``a g(k x**p) + b`` of ``y(x)`` (one positive input) over the
    standard functions ``g`` of :data:`SCALED` and the powers :data:`SCALED_POWERS`, as sympy
    expressions with float constants (refined, snapped and chosen with the other candidates).

    The scale ``k`` sits inside ``g``, where no linear solve of the search reaches it
    (``tanh(v / (4 pi))``, ``exp(-sqrt(x) / (2 pi))``). For each ``(g, p)`` the amplitude and
    offset are eliminated by least squares at each ``k`` (variable projection, Golub & Pereyra
    1973, SIAM J. Numer. Anal. 10, 413): ``k`` is scanned on :data:`SCALE_GRID` and the best
    grid value polished by a bounded scalar search between its neighbours
    (:func:`scipy.optimize.minimize_scalar`). ``sin``/``cos`` only while ``|k x**p|`` stays
    below ``MAX_PHASE``.

    Parameters
    ----------
    x, y : ndarray (N,)
        The input and the target, fitted on at most ``ROWS`` evenly spaced rows. No candidate
        when ``x`` is not positive everywhere, ``N < 10`` or ``y`` is constant.
    symbol : sympy.Symbol
    keep : int
        Most candidates returned, smallest weighted sum of squared errors first.
    factor : ndarray (N,), optional
        A known positive factor of each row (as :func:`occupation_candidates`): the fits weigh
        each row's residual by it.
    """
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if x.size < 10 or not np.all(x > 0) or not np.ptp(y) > 0:
        return []
    rows = np.unique(np.linspace(0, x.size - 1, min(ROWS, x.size)).astype(int))
    x, y = x[rows], y[rows]
    w = np.ones_like(y) if factor is None else np.asarray(factor, dtype=np.float64).ravel()[rows]
    found = []
    for name, (g_sym, g_num, signs) in SCALED.items():
        for p in SCALED_POWERS:
            u = x ** float(p)
            scale = 1.0 / float(np.median(u))
            for sign in signs:
                fit = _scaled_fit(g_num, u, y, w, sign * scale, periodic=name in ("sin", "cos"))
                if fit is not None:
                    a, k, b, sse = fit
                    expr = sympy.Float(a) * g_sym(sympy.Float(k) * symbol ** p) + sympy.Float(b)
                    found.append((sse, str(expr), expr))
    found.sort(key=lambda f: f[:2])
    return [f[2] for f in found[:keep]]


def _scaled_fit(g: Callable[[np.ndarray], np.ndarray], u: np.ndarray, y: np.ndarray, w: np.ndarray, scale: float,
                periodic: bool) -> tuple[float, float, float, float] | None:
    """``(a, k, b, SSE)`` of the best ``a g(k u) + b`` with ``k`` of ``scale``'s sign, or None."""
    ks = scale * SCALE_GRID
    if periodic:
        ks = ks[np.abs(ks) * float(np.max(np.abs(u))) <= MAX_PHASE]
    if ks.size == 0:
        return None

    def sse(log_k: float) -> float:
        with np.errstate(all="ignore"):
            return _projected(g(math.copysign(math.exp(log_k), scale) * u), y, w)[2]
    logs = np.log(np.abs(ks))
    errors = np.array([sse(lk) for lk in logs])
    if not np.any(np.isfinite(errors)):
        return None
    best = int(np.argmin(errors))
    lo, hi = logs[max(best - 1, 0)], logs[min(best + 1, logs.size - 1)]
    log_k = logs[best]
    if hi > lo:
        sol = minimize_scalar(sse, bounds=(lo, hi), method="bounded", options={"xatol": 1e-8})
        if sol.success and sol.fun <= errors[best]:
            log_k = float(sol.x)
    k = math.copysign(math.exp(log_k), scale)
    with np.errstate(all="ignore"):
        a, b, err = _projected(g(k * u), y, w)
    return (a, k, b, err) if math.isfinite(err) and a != 0 else None
