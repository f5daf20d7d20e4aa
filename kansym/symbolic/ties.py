"""Floats the data cannot tell apart become one constant (§8, refinement).

A search fits each coefficient on its own, so a law with one constant in two places comes
back with two: ``exp(1/w) / (0.8848 exp(2/w) + 0.885)`` is ``exp(1/w) / (c (exp(2/w) + 1))``,
which simplifies to ``c' / cosh(1/w)``. No snap to an exact value finds that (``c`` is no
simple number); what the data say is that the two floats are one. The rule is the snaps'
(:mod:`kansym.symbolic.snap`): two floats of the same sign within ``z`` standard errors of
each other are given one value when, with the floats refitted,

(a) **within the noise**: ``N (e_t**2 - e**2) <= z**2 eta**2``, and
(b) **shorter**: the float dropped, coded to the precision the formula supports
    (:func:`kansym.symbolic.constants.float_bits`), costs at least :data:`MIN_GAIN` bit more
    than naming which of the other floats it equals (``log2(k - 1)`` of ``k`` floats), plus
    the bits ``D`` the residuals' code grows by.

Pairs are tried nearest (in standard errors) first; after each tie the floats are refitted
and their standard errors computed again.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import sympy

from kansym.deadline import Deadline, time_is_up
from kansym.symbolic.constants import float_bits
from kansym.symbolic.refit import LossSpace, Problem
from kansym.symbolic.snap import LN2, MIN_GAIN, TRIAL_NFEV, Z, noise_level

__all__ = ["tie_constants", "MAX_TIED_FLOATS"]

MAX_TIED_FLOATS = 12  # formulas with more floats are left as they are (the pairs grow as k**2)


def tie_constants(expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any, *, loss_space: LossSpace = "linear",
                  noise: float | None = None, z: float = Z, deadline: Deadline | None = None) -> sympy.Expr:
    """``expr`` with floats the data cannot tell apart made one (the rule of the module docstring).

    Parameters
    ----------
    expr, symbols, X, y, loss_space
        As :func:`kansym.symbolic.refit.refit_constants` (``X`` of shape ``(N, d)``); the
        floats should be fitted. The floats are those of ``expr`` as it prints (in log
        space too).
    noise : float, optional
        The noise floor as a normalised RMS error in the loss space; None: the formula's own.
    z : float
        Standard errors of the tests.
    deadline : kansym.deadline.Deadline, optional
        Looked at before each pair: once expired, the formula is returned as it stands.

    Returns
    -------
    sympy.Expr
        With refitted floats when a tie was made, else ``expr`` itself.
    """
    expr = sympy.sympify(expr)
    while True:
        floats = len(expr.atoms(sympy.Float))
        if floats < 2 or floats > MAX_TIED_FLOATS or time_is_up(deadline):
            return expr
        tied = _one_tie(expr, symbols, X, y, loss_space, noise, z, deadline)
        if tied is None:
            return expr
        expr = tied


def _one_tie(expr, symbols, X, y, loss_space, noise, z, deadline) -> sympy.Expr | None:
    """The first pair (nearest in standard errors) that passes both tests, tied and refitted; None if none."""
    prob = Problem(expr, symbols, X, y, loss_space, expand=False)
    v, k, n = prob.values, len(prob.values), prob.n_rows
    current = prob.error(v)
    eta = noise_level(current, noise)
    if not math.isfinite(eta):
        return None
    sigma = max(current, eta)
    se = np.array([s if math.isfinite(s) and s > 0 else max(abs(c), 1.0) * 2.0 ** -52
                   for c, s in zip(v, prob.standard_errors(v, np.ones(k, bool), noise=eta))])
    pairs = sorted((abs(v[i] - v[j]) / math.hypot(se[i], se[j]), i, j)
                   for i in range(k) for j in range(i + 1, k) if v[i] * v[j] > 0)
    for distance, i, j in pairs:
        if distance > z or time_is_up(deadline):
            return None
        # bits saved: the dropped float (the cheaper of the two to state) less naming its twin
        saved = min(float_bits(v[i], se[i] * sigma / eta), float_bits(v[j], se[j] * sigma / eta)) - math.log2(k - 1)
        if saved <= MIN_GAIN:
            continue
        w = np.array([se[i] ** -2, se[j] ** -2])
        trial = v.copy()
        trial[i] = trial[j] = float(w @ [v[i], v[j]] / w.sum())
        try:
            joined = Problem(prob.build(trial), symbols, X, y, loss_space, expand=False)
            values = joined.refit(joined.values, np.ones(len(joined.values), bool),
                                  max_nfev=2 * TRIAL_NFEV * (len(joined.values) + 1))
            rise = n * max(joined.error(values) ** 2 - current ** 2, 0.0)
        except (ValueError, ArithmeticError):
            continue
        if rise <= z ** 2 * eta ** 2 and saved - rise / (2 * LN2 * sigma ** 2) > MIN_GAIN:
            return joined.build(values)
    return None
