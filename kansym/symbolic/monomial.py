"""Laws that are a product of powers, or a sum of two, read off noisy rows.

A monomial ``y = C prod_i x_i^p_i`` is a line in log units, where the KAN finds it when the
target is positive. Additive noise takes that away: a target spanning decades, with noise
of 1 % of its RMS, has rows at or below 0 wherever the law is smaller than the noise, so the
table is learned in linear units, where a product of four or five powers is hard for a KAN of
one hidden layer and for the structure search's oracle alike. The rows well above the noise
still carry the law: there ``log|y| = log|C| + sum_i p_i log x_i + e/y`` to first order, a line
whose noise has variance ``sigma^2 / y^2`` — weighted least squares with weights ``y^2``
(the delta method; Carroll & Ruppert 1988, "Transformation and Weighting in Regression",
§2.1). The line is fitted twice: on every row of the law's sign, then on the rows above
``ABOVE_NOISE`` noise standard deviations, the noise estimated from the first line's residuals
in linear units (their median absolute deviation). Those exponents start a least-squares fit
of ``C prod_i x_i^p_i`` to every row in linear units, whose refinement
(:func:`kansym.symbolic.refine.refine`) snaps each exponent the data allow to a simple value
(an unused column's to 0, which removes it).

A sum of two such products (``m g h + m v^2/2``; either sign) is no line in any units. It is
found by orthogonal matching pursuit (Pati, Rezaiifar & Krishnaprasad 1993) in linear units
over a dictionary of products of powers: every product of at most ``MOST_FACTORS`` inputs with
exponents from :data:`EXPONENTS`, and the line's product (any number of inputs, its own
exponents); the best single product, the best second one beside it, then each swapped for the
best beside the other until neither changes (``SWAPS`` rounds at most). Each step is one
least-squares solve of two columns per dictionary entry, done for all of them at once from
inner products. The pair starts the same refinement.

The results are candidates beside the direct search's and the structure search's
(:func:`monomial_candidates`); the choice (:func:`kansym.discover.choice.choose_formula`) and
the residual test decide whether one is the law.
"""

from __future__ import annotations

import itertools
import logging
import math
from typing import Sequence

import numpy as np
import sympy

from kansym.deadline import Deadline, time_is_up
from kansym.symbolic.compose import predictions
from kansym.symbolic.direct import DirectCandidate
from kansym.symbolic.pareto import expression_complexity
from kansym.symbolic.refine import refine
from kansym.symbolic.verify import nrmse

__all__ = ["monomial_candidates", "EXPONENTS", "ABOVE_NOISE", "ROWS_PER_EXPONENT", "REFINE_ROWS"]

log = logging.getLogger("kansym")

ABOVE_NOISE = 3.0  # rows whose |y| exceeds this many noise standard deviations give the line in log units
LINE_ROUNDS = 2  # lines fitted: on every row of the law's sign, then on those above the first line's noise
MAD_TO_SD = 1.4826  # the median absolute deviation of normal noise times this is its standard deviation
ROWS_PER_EXPONENT = 10  # fewer such rows per unknown (log C and each exponent) give no candidate
REFINE_ROWS = 4000  # at most about this many rows (evenly spaced) for the refit in linear units
# the exponents of the sum's dictionary: those of the laws of physics (inverse cubes of a dipole's field
# to cubes of a volume), halves included
EXPONENTS = tuple(sympy.Rational(v) for v in ("-3", "-2", "-3/2", "-1", "-1/2", "1/2", "1", "3/2", "2", "3"))
MOST_FACTORS = 3  # inputs in one product of the dictionary (the line's product may have more)
SUM_ROWS = 1000  # evenly spaced rows of the matching pursuit
SWAPS = 3  # rounds of swapping each product for the best beside the other
CHUNK = 4096  # dictionary columns evaluated at once (memory: SUM_ROWS * CHUNK floats)


def monomial_candidates(x: np.ndarray, y: np.ndarray, symbols: Sequence[sympy.Symbol], *, noise: float | None = None,
                        deadline: Deadline | None = None) -> list[DirectCandidate]:
    """The product of powers of the inputs that fits ``y`` best and, for three inputs or more,
    the sum of two such products, each refined.

    Parameters
    ----------
    x : ndarray (N, d)
        Inputs (working units); every column must be positive, else there is no candidate.
    y : ndarray (N,)
        Target, noisy; a law of either sign (the sign of the median row is the product's).
    symbols : sequence of sympy.Symbol
        One per column of ``x``.
    noise : float, optional
        The noise floor of the refinement's snaps, a normalised RMS error (RMS over the standard
        deviation of ``y``, e.g. :func:`kansym.discover.structure_tests.interaction_error`); None: the
        formula's own error.
    deadline : kansym.deadline.Deadline, optional
        Passed to the refinements (their snaps stop when it expires); once it has expired the sum
        is not searched.

    Returns
    -------
    list of DirectCandidate
        ``origin="monomial"``, errors the normalised RMS errors on all rows. No product when a
        column is not positive, fewer than ``ROWS_PER_EXPONENT`` rows per unknown stand above the
        noise, or the fit is not finite; no sum with fewer than 3 inputs (the direct search's
        dictionary holds those sums) or when the pursuit finds no two distinct products.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.ndim != 2 or x.shape[0] != y.size or not np.all(x > 0) or not np.all(np.isfinite(y)):
        return []
    line = _line_above_noise(x, y)
    found = []
    if line is not None:
        sign, coef = line
        start = sympy.Float(sign * math.exp(coef[0])) * _product(symbols, coef[1:])
        found.append(_refined(start, x, y, symbols, noise, deadline))
    if x.shape[1] >= 3 and not time_is_up(deadline):
        pair = sum_of_two(x, y, None if line is None else line[1][1:])
        if pair is not None:
            (p, c), (q, b) = pair
            found.append(_refined(sympy.Float(c) * _product(symbols, p) + sympy.Float(b) * _product(symbols, q),
                                  x, y, symbols, noise, deadline))
    return list({str(c.expr): c for c in found if c is not None}.values())  # a sum whose second term vanished: once


def _line_above_noise(x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray] | None:
    """``(sign, [log C, p_1..p_d])`` of the law's line in log units on the rows above the noise;
    None when too few rows stand above it or the fit is not finite."""
    sign = 1.0 if np.median(y) >= 0 else -1.0
    above = sign * y > 0
    coef = None
    for _ in range(LINE_ROUNDS):  # the noise from the last line's residuals decides which rows stand above it
        if above.sum() < ROWS_PER_EXPONENT * (x.shape[1] + 1):
            return None
        coef = _log_line(x[above], sign * y[above])
        if coef is None:
            return None
        with np.errstate(all="ignore"):
            pred = sign * np.exp(coef[0] + np.log(x) @ coef[1:])
        sigma = MAD_TO_SD * float(np.median(np.abs(y - pred)))
        above = sign * y > ABOVE_NOISE * sigma
    return sign, coef


def _log_line(x: np.ndarray, z: np.ndarray) -> np.ndarray | None:
    """``[log C, p_1, ..., p_d]`` of ``z = C prod x_i^p_i`` by weighted least squares of ``log z``
    on ``[1, log x]``, weights ``z^2`` (rows of ``z > 0``); None if not finite."""
    design = np.column_stack([np.ones(z.size), np.log(x)])  # (n, d + 1)
    w = z / np.max(z)  # sqrt of the weights z^2, scaled: the solve does not care, the squares stay finite
    coef, *_ = np.linalg.lstsq(design * w[:, None], np.log(z) * w, rcond=None)
    if not (np.all(np.isfinite(coef)) and abs(coef[0]) < 700):  # exp(700) is near float64's largest
        return None
    return coef


def _product(symbols: Sequence[sympy.Symbol], powers: Sequence) -> sympy.Expr:
    """``prod symbols_i ** powers_i``: a power of :data:`EXPONENTS` exact, any other a float to snap."""
    exact = {float(e): e for e in EXPONENTS}
    return sympy.Mul(*(s ** exact.get(float(p), sympy.Float(float(p))) for s, p in zip(symbols, powers)
                       if float(p) != 0.0))


def _refined(start: sympy.Expr, x: np.ndarray, y: np.ndarray, symbols: Sequence[sympy.Symbol], noise: float | None,
             deadline: Deadline | None) -> DirectCandidate | None:
    """``start`` refined in linear units on (at most about ``REFINE_ROWS``) rows, with its error on all."""
    step = max(1, y.size // REFINE_ROWS)
    try:
        expr = refine(start, list(symbols), x[::step], y[::step], noise=noise, deadline=deadline)
    except (ValueError, ArithmeticError) as exc:  # a refit that leaves the reals
        log.debug("monomial: refining %s failed (%s)", start, exc)
        return None
    pred = predictions(expr, list(symbols), x)
    if not (expr.free_symbols and np.all(np.isfinite(pred))):
        return None
    log.debug("monomial: %s refined to %s", start, expr)
    return DirectCandidate(expr, nrmse(y, pred), expression_complexity(expr), origin="monomial")


def sum_of_two(x: np.ndarray, y: np.ndarray, line: np.ndarray | None = None
               ) -> tuple[tuple[np.ndarray, float], tuple[np.ndarray, float]] | None:
    """The two products of powers whose least-squares sum fits ``y`` best (matching pursuit).

    Parameters
    ----------
    x : ndarray (N, d), positive
    y : ndarray (N,)
    line : ndarray (d,), optional
        The exponents of the line in log units, one more product of the dictionary.

    Returns
    -------
    ((p, c), (q, b)) or None
        Exponent vectors ``(d,)`` and coefficients: ``y ~ c prod x^p + b prod x^q``; None when no
        two distinct products are found (fewer rows than ``ROWS_PER_EXPONENT`` per input, or a
        dictionary of one product).
    """
    n, d = x.shape
    if n < ROWS_PER_EXPONENT * (d + 1):
        return None
    rows = np.unique(np.linspace(0, n - 1, min(n, SUM_ROWS)).astype(int))
    logs, target = np.log(x[rows]), y[rows]  # (n', d), (n',)
    powers = _dictionary(d, line)  # (K, d)
    norms, y_dot = _scan(logs, powers, target)
    usable = np.isfinite(norms) & (norms > 0) & np.isfinite(y_dot)
    if usable.sum() < 2:
        return None
    y_dot = np.where(usable, y_dot, 0.0)
    first = int(np.argmax(np.abs(y_dot)))
    second = None
    for _ in range(SWAPS):
        second = _best_beside(first, logs, powers, norms, y_dot, usable)
        better = _best_beside(second, logs, powers, norms, y_dot, usable)
        if better == first:
            break
        first = better
    pair = [first, second]
    design = np.exp(logs @ powers[pair].T)  # (n', 2)
    coef, *_ = np.linalg.lstsq(design, target, rcond=None)
    if first == second or not np.all(np.isfinite(coef)):
        return None
    return (powers[first], float(coef[0])), (powers[second], float(coef[1]))


def _dictionary(d: int, line: np.ndarray | None) -> np.ndarray:
    """``(K, d)`` exponent vectors: every product of at most ``MOST_FACTORS`` inputs with exponents from
    :data:`EXPONENTS`, and ``line`` (when given and finite)."""
    values = [float(e) for e in EXPONENTS]
    out = []
    for k in range(1, min(MOST_FACTORS, d) + 1):
        for idx in itertools.combinations(range(d), k):
            for vals in itertools.product(values, repeat=k):
                v = np.zeros(d)
                v[list(idx)] = vals
                out.append(v)
    if line is not None and np.all(np.isfinite(line)):
        out.append(np.asarray(line, dtype=np.float64))
    return np.array(out)


def _scan(logs: np.ndarray, powers: np.ndarray, vector: np.ndarray, norms: np.ndarray | None = None
          ) -> tuple[np.ndarray, np.ndarray]:
    """Each dictionary column ``exp(logs @ p)``'s norm and its inner product with ``vector`` (divided by
    the norm: unit columns), ``CHUNK`` columns at a time."""
    out_norms, out_dot = np.empty(len(powers)), np.empty(len(powers))
    for start in range(0, len(powers), CHUNK):
        with np.errstate(all="ignore"):
            cols = np.exp(logs @ powers[start:start + CHUNK].T)  # (n', chunk)
            size = np.linalg.norm(cols, axis=0) if norms is None else norms[start:start + CHUNK]
            out_norms[start:start + CHUNK] = size
            out_dot[start:start + CHUNK] = (vector @ cols) / size
    return out_norms, out_dot


def _best_beside(fixed: int, logs: np.ndarray, powers: np.ndarray, norms: np.ndarray, y_dot: np.ndarray,
                 usable: np.ndarray) -> int:
    """The column whose least-squares pair with column ``fixed`` leaves the smallest residual: with unit
    columns ``a, b`` (``g = a.b``) the pair explains ``(ya^2 - 2 g ya yb + yb^2) / (1 - g^2)`` of ``y.y``."""
    with np.errstate(all="ignore"):
        a = np.exp(logs @ powers[fixed]) / norms[fixed]
    g = _scan(logs, powers, a, norms)[1]
    ya = y_dot[fixed]
    with np.errstate(all="ignore"):
        explained = (ya ** 2 - 2 * g * ya * y_dot + y_dot ** 2) / (1 - g ** 2)
    explained[~usable | ~np.isfinite(explained) | (1 - g ** 2 < 1e-9)] = -np.inf
    explained[fixed] = -np.inf
    return int(np.argmax(explained))
