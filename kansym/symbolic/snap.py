"""Snap fitted constants to exact values by description length; round the others (§8).

A fitted constant ``c`` (standard error ``s``) becomes an exact candidate ``v`` of its
context (:func:`kansym.symbolic.constants.exact_candidates`) only when both hold:

(a) **within the noise**: with the other floats refitted, the normalised RMS error grows
    from ``e`` to ``e_v`` with ``N (e_v**2 - e**2) <= z**2 eta**2`` (``z = 3``): the rise
    of the squared residuals is what fixing one constant at its true value costs under
    noise ``eta`` at most (a likelihood-ratio test, one degree of freedom);
(b) **shorter**: the description length drops by at least :data:`MIN_GAIN` = 1 bit,
    ``L(c) - L(v) - D >= 1``, with ``L`` the bits of :mod:`kansym.symbolic.constants` (the
    float to the precision ``s e/eta`` the formula itself supports, the exact value by AI
    Feynman 2.0's codes) and ``D = N (e_v**2 - e**2) / (2 ln 2 e**2)`` the bits the
    residuals' Gaussian code at the formula's own error ``e`` grows by (Rissanen 1978's
    two-part code): the snapped formula is at least twice as probable as the unsnapped
    one under that code, not a coin flip. (For a formula that fits to the noise, ``e`` is
    ``eta``; one that misses part of the law determines its constants no better than its
    misfit, so its floats are cheap and only a short exact value gains: ``2.9974`` in
    ``0.33 cos(2.9974 t)`` fitted to a damped oscillation, its error far above the floor, is no
    ``113/(12 pi)``.)
    A snap to 0 also saves the operator that joined the term (:data:`ZERO_BITS`).
(c) **zero**: 0, the simplest value, is taken without (b) when fixing the constant there
    raises ``N e**2`` by at most ``ZERO_Z**2 eta**2`` (``ZERO_Z = 2``, within two standard errors;
    issue 34): by bits alone a constant beyond about 1.6 standard errors of 0 stayed, so a
    constant the law does not have was kept on one table in nine (``3 (sqrt(x1) - 0.0071)
    tanh(...)`` at 1 % noise); now on one in twenty-two (two-sided 4.6 %).

The noise ``eta`` is ``min(e0, noise)``, ``e0`` the error of the refitted formula and
``noise`` a floor estimated from the data and passed in (e.g. the model's error on
held-out rows): a formula that misses part of the law (``e0`` above the floor) is held to
the noise, not to its own misfit. It is never below :data:`NUMERIC_NOISE`, the error float64
refits of an exact law leave. Of a constant's candidates the one of largest ``L(c) - L(v) - D``
wins; constants are decided one at a time, the one nearest (in standard errors) to a
candidate first, the others refitted after each snap.

Floats that stay floats are rounded to the precision of their standard error
(:func:`round_constants`), one at a time with the others refitted, so that correlated
constants keep their combination.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import sympy

from kansym.deadline import Deadline, time_is_up
from kansym.symbolic.constants import (Exact, constant_contexts, exact_candidates, float_bits, precision_step,
                                       round_to_step)
from kansym.symbolic.refit import LossSpace, Problem

__all__ = ["snap_constant", "snap_constants", "round_constants", "reduce_phases", "clean_floats",
           "noise_level", "NUMERIC_NOISE", "Z"]

NUMERIC_NOISE = 1e-6  # normalised RMS error below which float64 refits cannot tell formulas apart
ROUND_NOISE = 1e-10  # the noise floor of rounding: an exact law's floats keep about ten digits
Z = 3.0  # standard errors: the "within the noise" test and twice the candidates' search radius
MIN_GAIN = 1.0  # bits a snap must save: the exact value at least twice as probable under the code as the float
ZERO_BITS = 1.0  # what a constant snapped to 0 saves besides itself: the operator that joined its term
ZERO_Z = 2.0  # a constant within this many standard errors of 0 (likelihood ratio) is dropped, whatever the bits
LN2 = math.log(2.0)
SLACK_BITS = 2.0  # how far the linearised cost may overstate the true one before a candidate is skipped
TRIAL_NFEV = 30  # evaluations per free constant of a trial's refit (the Occam step's budget); a kept snap's: twice


def noise_level(error: float, noise: float | None, floor: float = NUMERIC_NOISE) -> float:
    """``eta = max(min(error, noise), floor)`` (``noise`` None: ``error`` alone); inf when
    the formula is not finite on the rows."""
    e = float(error) if math.isfinite(error) else math.inf
    if noise is not None and math.isfinite(noise) and noise >= 0:
        e = min(e, float(noise))
    return max(e, floor) if math.isfinite(e) else math.inf


def snap_constant(v: float, *, context: str = "factor", rel_tol: float = 1e-2,
                  zero_tol: float = 1e-8) -> list[sympy.Expr]:
    """Exact numbers of ``context`` within ``rel_tol * |v|`` of ``v``, fewest bits first.

    The candidates of :func:`kansym.symbolic.constants.exact_candidates` (``0`` when
    ``|v| <= zero_tol``); no data are involved: whether one replaces ``v`` in a formula is
    :func:`snap_constants`' decision.
    """
    v = float(v)
    if not math.isfinite(v):
        return []
    out = [e.expr for e in exact_candidates(v, context, rel_tol * abs(v)) if e.expr != 0]
    return ([sympy.Integer(0)] if abs(v) <= zero_tol else []) + out


def reduce_phases(expr: sympy.Expr) -> sympy.Expr:
    """Reduce float phases of ``sin``/``cos`` into ``(-pi/2, pi/2]``.

    Uses ``f(u + 2 pi) = f(u)`` and ``f(u + pi) = -f(u)`` for ``f`` in sin, cos,
    so a phase can be snapped to 0 or ``+-pi/2`` (turning sin into cos).
    """
    def reduce(e: sympy.Expr) -> sympy.Expr:
        const, rest = e.args[0].as_coeff_Add()
        if not isinstance(const, sympy.Float) or rest == 0:
            return e
        b = (float(const) + math.pi) % (2 * math.pi) - math.pi
        sign = 1
        if b > math.pi / 2:
            b, sign = b - math.pi, -1
        elif b <= -math.pi / 2:
            b, sign = b + math.pi, -1
        return sign * e.func(rest + sympy.Float(b))

    return sympy.sympify(expr).replace(lambda e: isinstance(e, (sympy.sin, sympy.cos)), reduce)


def snap_constants(expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any, *,
                   loss_space: LossSpace = "linear", noise: float | None = None, z: float = Z,
                   deadline: Deadline | None = None) -> sympy.Expr:
    """Replace float constants by exact values where the data allow it and the description shortens.

    Phases of sin/cos are first reduced (:func:`reduce_phases`); then each float is
    decided by the rule of the module docstring, (a) within the noise and (b) fewer bits.

    Parameters
    ----------
    expr, symbols, X, y, loss_space
        As :func:`kansym.symbolic.refit.refit_constants`; the floats should be refitted.
    noise : float, optional
        Noise floor as a normalised RMS error in the loss space (RMS over the std of the
        (log-)target), e.g. the model's error on held-out rows; None: the formula's own.
    z : float
        Standard errors of the "within the noise" test (a).
    deadline : kansym.deadline.Deadline, optional
        Looked at before each constant: once expired, the rest keep their fitted values.

    Returns
    -------
    sympy.Expr
    """
    prob = Problem(reduce_phases(expr), symbols, X, y, loss_space, deadline=deadline)
    values, free = prob.values.copy(), np.ones(len(prob.values), bool)
    fixed: dict[int, sympy.Expr] = {}
    current = prob.error(values)
    eta = noise_level(current, noise)
    if not math.isfinite(eta):
        return prob.build(values)
    undecided = set(range(len(values)))
    while undecided:
        if time_is_up(deadline):
            deadline.cut(f"refinement: snapping stopped after {len(values) - len(undecided)} of {len(values)} constants")
            break
        se = prob.standard_errors(values, free, noise=eta)
        options = {i: _candidates(values[i], se[i], prob.contexts[i], z) for i in sorted(undecided)}
        undecided = {i for i, c in options.items() if c}
        if not undecided:
            break
        i = min(undecided, key=lambda j: (min(abs(c.value - values[j]) for c in options[j]) / _se(values[j], se[j]), j))
        undecided.discard(i)
        rest = free.copy()
        rest[i] = False
        best = _best_snap(prob, values, i, _se(values[i], se[i]), options[i], rest, current, eta, z)
        if best is not None:
            cand, trial = best
            # short refits here: refine's final refit polishes the floats left with the full budget
            values, free, fixed[i] = (prob.refit(trial, rest, max_nfev=2 * TRIAL_NFEV * (int(rest.sum()) + 1)),
                                      rest, cand.expr)
            current = prob.error(values)
    return prob.build(values, fixed)


def _best_snap(prob: Problem, values: np.ndarray, i: int, se_i: float, options: list[Exact], rest: np.ndarray,
               current: float, eta: float, z: float) -> tuple[Exact, np.ndarray] | None:
    """The candidate of constant ``i`` that gains the most bits and stays within the noise
    (rule (a) and (b) of the module docstring), with the values it leaves; None if none does."""
    n = prob.n_rows
    # the float's precision and the residuals' code are the formula's own (sigma = its error): a
    # formula that misses part of the law determines its constants no better than its misfit
    sigma = max(current, eta)
    budget = float_bits(values[i], se_i * sigma / eta)
    best, best_gain = None, MIN_GAIN
    for cand in options:
        zero = cand.expr == 0
        bonus = ZERO_BITS if zero else 0.0
        if not zero and budget - cand.bits <= best_gain:
            break  # fewest bits first: no later candidate can gain more
        # the linearised cost (the others refitted): N e**2 rises by ((c - v)/s)**2 eta**2, s the
        # standard error at eta; a candidate that cannot pass (a) or gain even with some slack
        # for a nonlinear formula is not tried on the data
        z_v = abs(cand.value - values[i]) / se_i
        if (z_v > (ZERO_Z if zero else z) + 1 or not zero and budget - cand.bits - (z_v * eta / sigma) ** 2 / (2 * LN2)
                <= best_gain - SLACK_BITS):
            continue
        trial = values.copy()
        trial[i] = cand.value
        rise = n * max(prob.error(trial) ** 2 - current ** 2, 0.0)
        gain = budget + bonus - cand.bits - rise / (2 * LN2 * sigma ** 2)
        if (zero or gain <= best_gain or rise > z ** 2 * eta ** 2) and rise > 0.01 * eta ** 2 and rest.any():
            # not good enough as it stands: the other constants adapt (a short refit)
            trial = prob.refit(trial, rest, max_nfev=TRIAL_NFEV * (int(rest.sum()) + 1))
            rise = n * max(prob.error(trial) ** 2 - current ** 2, 0.0)
            gain = budget + bonus - cand.bits - rise / (2 * LN2 * sigma ** 2)
        if zero and rise <= ZERO_Z ** 2 * eta ** 2:
            return cand, trial  # the simplest value, within two standard errors: whatever the bits
        if rise <= z ** 2 * eta ** 2 and gain > best_gain:
            best, best_gain = (cand, trial), gain
    return best


def _se(v: float, se: float) -> float:
    """A usable standard error: a zero or undefined one means "exact to float64"."""
    return float(se) if math.isfinite(se) and se > 0 else max(abs(float(v)), 1.0) * 2.0 ** -52


def _candidates(v: float, se: float, context: str, z: float) -> list[Exact]:
    """Candidates within ``2 z`` standard errors (at least 1e-9 relative: an imperfectly
    converged refit of an exact law), fewest bits first."""
    return exact_candidates(v, context, max(2 * z * _se(v, se), 1e-9 * max(abs(v), 1.0)))


def round_constants(expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any, *,
                    loss_space: LossSpace = "linear", noise: float | None = None,
                    deadline: Deadline | None = None) -> sympy.Expr:
    """Round every float to the precision of its standard error (the PDG rule of
    :func:`kansym.symbolic.constants.precision_step`).

    One float at a time, the least precise (relative to its value) first: it is rounded,
    the others are refitted (so correlated constants keep their combination), and their
    standard errors are computed again. A rounding is kept when it leaves the error within
    one noise unit, ``N (e_r**2 - e**2) <= eta**2`` (``eta`` as in :func:`snap_constants`,
    but at least :data:`ROUND_NOISE`, so an exact law keeps its exactness);
    else it is tried one digit finer, twice, and then the float stays as fitted. In log
    space the floats are those of ``f`` itself (not of ``log f``), as they print. Once
    ``deadline`` expires the floats not yet rounded keep their fitted values.
    """
    prob = Problem(expr, symbols, X, y, loss_space, expand=False, deadline=deadline)
    values, free = prob.values.copy(), np.ones(len(prob.values), bool)
    current = prob.error(values)
    eta = noise_level(current, noise, ROUND_NOISE)
    if not (len(values) and math.isfinite(eta)):
        return sympy.sympify(expr)
    n = prob.n_rows
    while free.any():
        if time_is_up(deadline):
            deadline.cut(f"refinement: rounding stopped with {int(free.sum())} of {len(values)} floats unrounded")
            break
        se = prob.standard_errors(values, free, noise=eta)
        idx = np.flatnonzero(free)
        i = int(max(idx, key=lambda j: (se[j] / max(abs(values[j]), 1e-300), -j)))
        free[i] = False
        step = precision_step(se[i])
        for _ in range(3):
            if step <= 0:
                break
            trial = values.copy()
            trial[i] = round_to_step(values[i], step)
            if trial[i] == values[i]:
                break
            trial = prob.refit(trial, free)
            err = prob.error(trial)
            if n * (err ** 2 - current ** 2) <= eta ** 2:
                values, current = trial, err
                break
            step /= 10
    return prob.build(values)


def clean_floats(expr: sympy.Expr, *, rel_tol: float = 1e-9) -> sympy.Expr:
    """Replace floats within ``rel_tol`` of an exact value of their context (1.00000000000006 -> 1)."""
    expr = sympy.sympify(expr)
    subs = {}
    for f, where in constant_contexts(expr).items():
        cands = exact_candidates(float(f), where, rel_tol * abs(float(f)))
        if cands and (cands[0].expr != 0 or float(f) == 0):
            subs[f] = cands[0].expr
    return expr.xreplace(subs) if subs else expr


def unify_floats(expr: sympy.Expr, *, rel_tol: float = 1e-9) -> sympy.Expr:
    """Give floats within ``rel_tol`` of each other in magnitude one value (each keeps its sign).

    Arithmetic on fitted constants leaves twins that differ in the last digits
    (``0.999486630731 - 0.9994866307313 v/c``); as one value ``factor_terms`` can take them
    out of the sum, and a constant that was there twice is one (values unchanged to ``rel_tol``).
    """
    expr = sympy.sympify(expr)
    floats = sorted(expr.atoms(sympy.Float), key=lambda f: abs(float(f)))
    subs, lead = {}, None
    for f in floats:
        a = abs(float(f))
        if lead is not None and a - abs(float(lead)) <= rel_tol * a and a != abs(float(lead)):
            subs[f] = sympy.Float(math.copysign(abs(float(lead)), float(f)))
        else:
            lead = f
    return expr.xreplace(subs) if subs else expr
