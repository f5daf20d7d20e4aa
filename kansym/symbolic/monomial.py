"""A law that is a product of powers, read off the rows that stand above the noise.

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
in linear units (their median absolute deviation). Those exponents start a least-squares fit of ``C prod_i x_i^p_i`` to every row in
linear units, whose refinement (:func:`kansym.symbolic.refine.refine`) snaps each exponent the
data allow to a simple value (an unused column's to 0, which removes it).

The result is one candidate beside the structure search's (:func:`monomial_candidate`); the
choice (:func:`kansym.discover.choice.choose_formula`) and the residual test decide whether it
is the law.
"""

from __future__ import annotations

import logging
import math
from typing import Sequence

import numpy as np
import sympy

from kansym.deadline import Deadline
from kansym.symbolic.compose import lambdify_formula
from kansym.symbolic.direct import DirectCandidate
from kansym.symbolic.pareto import expression_complexity
from kansym.symbolic.refine import refine
from kansym.symbolic.verify import nrmse

__all__ = ["monomial_candidate", "ABOVE_NOISE", "ROWS_PER_EXPONENT", "REFINE_ROWS"]

log = logging.getLogger("kansym")

ABOVE_NOISE = 3.0  # rows whose |y| exceeds this many noise standard deviations give the line in log units
LINE_ROUNDS = 2  # lines fitted: on every row of the law's sign, then on those above the first line's noise
MAD_TO_SD = 1.4826  # the median absolute deviation of normal noise times this is its standard deviation
ROWS_PER_EXPONENT = 10  # fewer such rows per unknown (log C and each exponent) give no candidate
REFINE_ROWS = 4000  # at most about this many rows (evenly spaced) for the refit in linear units


def monomial_candidate(x: np.ndarray, y: np.ndarray, symbols: Sequence[sympy.Symbol], *, noise: float | None = None,
                       deadline: Deadline | None = None) -> DirectCandidate | None:
    """The product of powers of the inputs that fits ``y`` best, refined.

    Parameters
    ----------
    x : ndarray (N, d)
        Inputs (working units); every column must be positive, else there is no candidate.
    y : ndarray (N,)
        Target, noisy; a law of either sign (the sign of the median row is taken).
    symbols : sequence of sympy.Symbol
        One per column of ``x``.
    noise : float, optional
        The noise floor of the refinement's snaps, a normalised RMS error (RMS over the standard
        deviation of ``y``, e.g. :func:`kansym.discover.structure.interaction_error`); None: the
        formula's own error.
    deadline : kansym.deadline.Deadline, optional
        Passed to the refinement (its snaps stop when it expires).

    Returns
    -------
    DirectCandidate or None
        ``origin="monomial"``, its error the normalised RMS error on all rows; None when a
        column is not positive, fewer than ``ROWS_PER_EXPONENT`` rows per unknown stand above
        the noise, or the fit is not finite.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.ndim != 2 or x.shape[0] != y.size or not np.all(x > 0) or not np.all(np.isfinite(y)):
        return None
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
    start = sympy.Float(sign * math.exp(coef[0])) * sympy.Mul(*(s ** sympy.Float(p) for s, p in zip(symbols, coef[1:])))
    step = max(1, y.size // REFINE_ROWS)
    try:
        expr = refine(start, list(symbols), x[::step], y[::step], noise=noise, deadline=deadline)
    except (ValueError, ArithmeticError) as exc:  # a refit that leaves the reals
        log.debug("monomial: refining %s failed (%s)", start, exc)
        return None
    with np.errstate(all="ignore"):
        pred = np.broadcast_to(np.asarray(lambdify_formula(expr, list(symbols))(x), dtype=np.float64), y.shape)
    if not (expr.free_symbols and np.all(np.isfinite(pred))):
        return None
    log.debug("monomial: %s from %d rows above the noise, refined to %s", start, int(above.sum()), expr)
    return DirectCandidate(expr, nrmse(y, pred), expression_complexity(expr), origin="monomial")


def _log_line(x: np.ndarray, z: np.ndarray) -> np.ndarray | None:
    """``[log C, p_1, ..., p_d]`` of ``z = C prod x_i^p_i`` by weighted least squares of ``log z``
    on ``[1, log x]``, weights ``z^2`` (rows of ``z > 0``); None if not finite."""
    design = np.column_stack([np.ones(z.size), np.log(x)])  # (n, d + 1)
    w = z / np.max(z)  # sqrt of the weights z^2, scaled: the solve does not care, the squares stay finite
    coef, *_ = np.linalg.lstsq(design * w[:, None], np.log(z) * w, rcond=None)
    if not (np.all(np.isfinite(coef)) and abs(coef[0]) < 700):  # exp(700) is near float64's largest
        return None
    return coef
