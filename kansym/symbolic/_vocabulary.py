"""The vocabulary of the direct search (:mod:`kansym.symbolic.direct`): features of the inputs,
transforms of the target, and the rational form built from a subset of them.

Private module; the search and its sources are documented in :mod:`kansym.symbolic.direct`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import sympy

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
