"""Polish a composed formula on data: refit its constants, snap them, simplify, round.

docs/algorithms.md §8, "Refinement": every float constant of the formula is
refitted by nonlinear least squares on the data (:mod:`kansym.symbolic.refit`); each is
replaced by an exact value of its context (an exponent, a phase, a factor, an offset) when
the data cannot tell the two apart and the description length drops
(:mod:`kansym.symbolic.snap`, :mod:`kansym.symbolic.constants`); the result is simplified
by rewrites chosen by its size alone (never by the clock), its remaining constants get a
final refit, and the floats left are rounded to the precision their standard errors
support. No integer or rational of more than 9 digits is left in the result.

Floats the data cannot tell apart become one constant (§8, refinement).

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

Functions a formula uses only in their linear regime are written as lines (§8, refinement).

A refit can reach a nearly linear dependence through a nonlinear function whose argument
barely moves over the data: ``-115079 log(1 - 1.7e-5 p)`` is ``1.96 p`` to one part in 1e5
for ``p`` in [1, 3], ``asin(0.061 s + 2e-5)`` is ``0.061 s`` to about 1e-3. The function then
holds nothing the data support, and its constants (``115079``, ``1.7e-5``) are invented: the
law's own constant is their product, which no snap of either alone can find. Occam's rule of
the snaps applies to the function itself: a node ``f(u)`` (a unary function, or a power of
a sum with a non-integer exponent) is replaced by its least-squares line ``a + b u`` over the rows when

(a) the line follows ``f(u)`` to :data:`LINEAR_RESIDUAL` of ``f(u)``'s spread (a cheap
    screen), and
(b) the whole formula's error stays within the noise: ``N (e_v**2 - e**2) <= z**2 eta**2``,
    ``e`` the formula's error before any line, ``eta`` the noise of
    :func:`kansym.symbolic.snap.noise_level` (the likelihood-ratio test of the snaps).

The two new floats are then refitted and snapped like any other (``a`` to 0 above). Nodes are
tried outermost first (a function of a function becomes one line); every accepted line is
tested against the error before the first, so lines cannot add up past the noise.

Squares out of roots: ``sqrt(a**2 b) = |a| sqrt(b)``, and ``|a| = ±a`` where the data fix its sign.

A search that fits ``y**2`` (or a ratio of polynomials under a root) returns the square of a
factor inside the root: the relativistic ``(x - u t)/sqrt(1 - u²/c²)`` comes back as
``1/sqrt((1 - u²/c²)/(u²t²/x² - 2ut/x + 1))``. Both agree on the data, but the first is the
law and the second hides it (and sympy cannot tell them equal, as ``sqrt(a**2) = |a|``).
:func:`take_out_squares` factors the base of every half-integer power with exact
coefficients (``sympy.factor_list`` of its numerator and denominator), takes each factor of
even multiplicity ``2j`` out as ``|f|**(2 j e)``, and writes ``|f|`` as ``f`` or ``-f`` when
``f`` keeps one strict sign on every row of the data. A factor that changes sign, or is
zero, on some row stays inside. The rewrite is kept only when it evaluates like the input
on the rows and has no more operations (``sympy.count_ops``) after
:func:`simplify_formula`-style passes. docs/algorithms.md §8.
"""

from __future__ import annotations

import math
from typing import Any, Sequence, Callable

import numpy as np
import sympy

from kansym.deadline import Deadline, time_is_up
from kansym.symbolic.compose import lambdify_formula, predictions
from kansym.symbolic.constants import float_bits, too_long
from kansym.symbolic.refit import LossSpace, Problem, refit_constants, refit_constants_counted
from kansym.symbolic.snap import (LN2, MIN_GAIN, TRIAL_NFEV, Z, noise_level, clean_floats, reduce_phases,
    round_constants, snap_constant, snap_constants, unify_floats)

__all__ = ['tie_constants', 'MAX_TIED_FLOATS', 'linearize', 'LINEAR_RESIDUAL', 'take_out_squares',
    'refit_constants', 'refit_constants_counted', 'snap_constant', 'snap_constants', 'reduce_phases',
    'simplify_formula', 'refine', 'merge_numeric_factors', 'clean_floats', 'shorten_numbers', 'exact_as_floats',
    'refine_times_factor']


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


LINEAR_RESIDUAL = 0.02  # RMS distance of f(u) from its line over f(u)'s std: below it, a line is tried
MAX_ROWS = 2000  # rows of the screen (a)


def linearize(expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any, *, loss_space: LossSpace = "linear",
              noise: float | None = None, z: float = Z, deadline: Deadline | None = None) -> sympy.Expr:
    """``expr`` with every function used only in its linear regime replaced by a line.

    Parameters
    ----------
    expr, symbols, X, y, loss_space
        As :func:`kansym.symbolic.refit.refit_constants` (``X`` of shape ``(N, d)``); the
        floats should be fitted.
    noise : float, optional
        The noise floor as a normalised RMS error in the loss space; None: the formula's own.
    z : float
        Standard errors of the "within the noise" test (b) of the module docstring.
    deadline : kansym.deadline.Deadline, optional
        Looked at before each node: once expired, the formula is returned as it stands.

    Returns
    -------
    sympy.Expr
        ``expr`` itself when no node passes both tests.
    """
    expr = sympy.sympify(expr)
    symbols = list(symbols)
    nodes = _nonlinear_nodes(expr)
    if not nodes:
        return expr
    prob = Problem(expr, symbols, X, y, loss_space)
    start = prob.error(prob.values)
    eta = noise_level(start, noise)
    if not np.isfinite(eta):
        return expr
    n = prob.n_rows
    rows = np.linspace(0, n - 1, min(n, MAX_ROWS)).astype(int)
    x = np.asarray(prob.X, dtype=np.float64)[rows]
    for node in nodes:
        if time_is_up(deadline):
            break
        if not expr.has(node):  # inside a node already made a line
            continue
        line = _line(node, symbols, x)
        if line is None:
            continue
        trial = expr.xreplace({node: line})
        try:
            candidate = Problem(trial, symbols, X, y, loss_space)
            err = candidate.error(candidate.values)
        except (ValueError, ArithmeticError):
            continue
        if np.isfinite(err) and n * (err ** 2 - start ** 2) <= z ** 2 * eta ** 2:
            expr = trial
    return expr


def _nonlinear_nodes(expr: sympy.Expr) -> list[sympy.Expr]:
    """Unary functions and non-integer powers of a sum, of a non-constant argument, outermost first.

    A power of one input (``V**1.00069``) is left to the exponent's snap: its line would add an
    offset where the snap to ``V`` removes a constant."""
    found = [e for e in sympy.preorder_traversal(expr)
             if ((isinstance(e, sympy.Function) and len(e.args) == 1)
                 or (e.is_Pow and e.exp.is_number and not e.exp.is_integer and e.base.is_Add))
             and e.args[0].free_symbols]
    seen: list[sympy.Expr] = []
    for e in found:  # preorder: an enclosing node comes before what it holds
        if e not in seen:
            seen.append(e)
    return seen


def _line(node: sympy.Expr, symbols: list, x: np.ndarray) -> sympy.Expr | None:
    """``a + b u`` for ``node = f(u)``, the least-squares line over the rows ``x``, when it
    passes the screen (a); None otherwise."""
    u = node.args[0]
    uv, fv = predictions(u, symbols, x), predictions(node, symbols, x)  # a root or asin off its domain: nan, no line
    if not (np.all(np.isfinite(uv)) and np.all(np.isfinite(fv))):
        return None
    spread = float(np.std(fv))
    if np.ptp(uv) <= 0 or spread <= 0:
        return None
    design = np.column_stack([np.ones_like(uv), uv])
    (a, b), *_ = np.linalg.lstsq(design, fv, rcond=None)
    if float(np.sqrt(np.mean((fv - design @ np.array([a, b])) ** 2))) > LINEAR_RESIDUAL * spread:
        return None
    return sympy.Float(float(a)) + sympy.Float(float(b)) * u


RTOL = 1e-9  # the rewrite must evaluate like the input to this relative tolerance on every row


def _sign_on_rows(factor: sympy.Expr, symbols: Sequence[Any], X: np.ndarray) -> int:
    """+1 or -1 if ``factor`` keeps that strict sign on every row of ``X``, else 0."""
    v = predictions(factor, symbols, X)
    if not np.all(np.isfinite(v)):
        return 0
    return 1 if np.all(v > 0) else (-1 if np.all(v < 0) else 0)


def _take_out(power: sympy.Pow, symbols: Sequence[Any], X: np.ndarray) -> sympy.Expr:
    base, e = power.args
    if not (e.is_Rational and e.q == 2) or base.has(sympy.Float) or not base.free_symbols:
        return power
    num, den = sympy.fraction(sympy.together(base))
    outside, squares = sympy.S.One, sympy.S.One
    for part, side in ((num, 1), (den, -1)):
        try:
            _, factors = sympy.factor_list(part)
        except (sympy.PolynomialError, NotImplementedError):  # not a polynomial in any generators
            return power
        for f, k in factors:
            sign = _sign_on_rows(f, symbols, X) if k >= 2 else 0
            if sign:
                j = k // 2
                squares *= f ** (2 * j * side)
                outside *= (sign * f) ** (2 * j * e * side)  # (f^(2j))^e = |f|^(2je), |f| = sign*f
    if outside == 1:
        return power
    return outside * sympy.cancel(base / squares) ** e


def take_out_squares(expr: sympy.Expr, symbols: Sequence[Any], X: Any) -> sympy.Expr:
    """``expr`` with the even powers of factors under its roots taken out, their sign fixed by ``X``.

    Parameters
    ----------
    expr : sympy.Expr
        A formula in ``symbols``.
    symbols : sequence of sympy.Symbol
        Its variables, in the column order of ``X``.
    X : array_like, shape (n_rows, n_symbols)
        The rows the sign of each factor is read on (the fitting rows).

    Returns
    -------
    sympy.Expr
        The rewritten formula when it evaluates like ``expr`` on ``X`` (relative tolerance
        ``RTOL``) and has no more operations; ``expr`` otherwise.

    Examples
    --------
    >>> import numpy as np, sympy
    >>> a, b = sympy.symbols("a b")
    >>> X = np.array([[0.1, 2.0], [0.2, 3.0], [0.3, 5.0]])  # a < 1 on every row
    >>> take_out_squares(sympy.sqrt(b / (a**2 - 2*a + 1)), [a, b], X)
    sqrt(b)/(1 - a)
    """
    expr = sympy.sympify(expr)
    X = np.asarray(X, dtype=np.float64)
    if not any(p.exp.is_Rational and p.exp.q == 2 for p in expr.atoms(sympy.Pow)):
        return expr
    try:
        out = expr.replace(lambda e: e.is_Pow, lambda e: _take_out(e, symbols, X))
    except (sympy.PolynomialError, NotImplementedError, TypeError, ValueError):
        return expr
    if out == expr:
        return expr
    out = min([out, sympy.factor_terms(out), sympy.powsimp(out)], key=sympy.count_ops)
    if sympy.count_ops(out) > sympy.count_ops(expr):
        return expr
    old, new = predictions(expr, symbols, X), predictions(out, symbols, X)
    ok = np.isfinite(old)
    if not ok.any() or not np.allclose(new[ok], old[ok], rtol=RTOL, atol=0) or not np.all(np.isfinite(new[ok])):
        return expr
    return out


SECOND_PASS_FLOATS = 12  # at most this many floats left: a second snapping pass after the first fused some
TRIG_MAX_OPS = 20  # sympy.simplify of a formula with a circular function only up to this many operations
TRIG = (sympy.sin, sympy.cos, sympy.tan, sympy.sinh, sympy.cosh, sympy.tanh)  # their identities: trigsimp


def simplify_formula(expr: sympy.Expr, *, max_ops: int = 40) -> sympy.Expr:
    """Simplify deterministically; never returns a longer expression.

    Tries ``powsimp``, ``factor_terms`` and ``together`` (single passes over the tree,
    milliseconds even for the composition of an unpruned network), and ``sympy.simplify``
    only when the expression has at most ``max_ops`` operations (``sympy.count_ops``;
    well under a second there, while on large formulas it can run for minutes), at most
    :data:`TRIG_MAX_OPS` when it holds a circular or hyperbolic function (whose ``trigsimp`` ran for
    minutes on a 31-operation composition) and none of them has a float in its argument
    (no identity applies there, and ``trigsimp`` searched for minutes at 16 operations), and no
    ``Abs``, ``sign`` or ``Piecewise`` (whose case analysis took minutes even there). Which
    rewrites run depends on the expression alone, never on the clock: sympy cannot be
    stopped after a count of work, and a cut-off in seconds would make a busy machine
    print another formula. The candidate with the fewest operations wins, then the one with
    the fewest floats (ties: the first, the input itself); a rewrite with more floats than
    the input (an exact number written as a float) is not a candidate. Floats within 1e-9 of each
    other in magnitude are made one first (:func:`~kansym.symbolic.snap.unify_floats`). Integers and
    rationals of more than 9 digits become floats (:func:`shorten_numbers`).
    """
    expr = unify_floats(sympy.sympify(expr))  # twin constants as one: factor_terms can take them out
    options: list[Callable[[sympy.Expr], sympy.Expr]] = [sympy.powsimp, sympy.factor_terms, sympy.together]
    # sympy.simplify of an Abs of a sum (the abs primitive) can take minutes at 39 operations
    # (a relativistic velocity sum's KAN formula: 140 s, 4.6 s without the Abs): the cheap passes only
    # and its trigsimp tries pairs of a sum's terms: with a sine in a sum of seven terms under a
    # tanh (a KAN's composition, 31 operations) it ran for minutes past the time limit
    ops = sympy.count_ops(expr)
    # trigsimp's identities need exact arguments: with a float inside a sine it finds nothing, and
    # cos(0.58435 a - 0.58431 b) beside cos(a - b) kept it busy for minutes at 16 operations (two
    # tanh of float sums, rewritten as exp, had it factor polynomials for minutes at 24)
    float_phase = any(f.args[0].has(sympy.Float) for f in expr.atoms(*TRIG))
    if (ops <= (TRIG_MAX_OPS if expr.has(*TRIG) else max_ops) and not float_phase
            and not expr.has(sympy.Abs, sympy.sign, sympy.Piecewise)):
        options.append(sympy.simplify)
    floats = len(expr.atoms(sympy.Float))
    # a rewrite may not turn exact numbers into floats (simplify writes 81/(10*pi*x) as 8.1/(pi*x))
    rewrites = [out for out in (fn(expr) for fn in options) if len(out.atoms(sympy.Float)) <= floats]
    # fewest operations, then fewest floats: factor_terms writes 0.028*m*(35.6/a - 35.6/b) as
    # 0.99999999999995*m*(1/a - 1/b) at the same count, one constant instead of two
    return shorten_numbers(min([expr, *rewrites], key=lambda e: (sympy.count_ops(e), len(e.atoms(sympy.Float)))))


def shorten_numbers(expr: sympy.Expr) -> sympy.Expr:
    """Turn every integer or rational of more than 9 digits (numerator or denominator) into a float.

    Exact numbers that long are never a law's: they come from powers of short ones
    (``(5*x/7)**20``) or from a float read as a fraction, and the description-length rule
    (:mod:`kansym.symbolic.constants`) admits none. ``95367431640625*x**20/79792266297612001``
    becomes ``1.19522860933439e-3*x**20``.
    """
    expr = sympy.sympify(expr)
    long = {r: sympy.Float(r) for r in expr.atoms(sympy.Rational) if too_long(r)}
    return expr.xreplace(long) if long else expr


def refine(expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any, *,
           loss_space: LossSpace = "linear", snap: bool = True, simplify: bool = True,
           noise: float | None = None, deadline: Deadline | None = None) -> sympy.Expr:
    """Refit -> functions in their linear regime as lines -> snap -> ties -> simplify -> final refit -> squares out of roots -> rounding of the remaining floats.

    Parameters
    ----------
    expr, symbols, X, y, loss_space
        As :func:`refit_constants`.
    snap : bool
        Replace functions used only in their linear regime by lines
        (:func:`linearize`), snap constants
        (:func:`snap_constants`), make floats the data cannot tell apart one
        (:func:`tie_constants`) and round the floats left to the precision of their
        standard errors (:func:`~kansym.symbolic.snap.round_constants`).
    simplify : bool
        Run :func:`simplify_formula`.
    noise : float, optional
        The noise floor of the snapping rule: a normalised RMS error in the loss space
        (e.g. the model's on held-out rows); None: the formula's own error.
    deadline : kansym.deadline.Deadline, optional
        The run's time limit: every refit stops at its best point when it expires, the
        snaps and roundings not yet made are not made, and the final refit is skipped.

    Returns
    -------
    sympy.Expr

    Raises
    ------
    DataError, ConfigError
        As :func:`refit_constants`.
    """
    out = refit_constants(expr, symbols, X, y, loss_space=loss_space, deadline=deadline)
    if snap:  # a function used only in its linear regime becomes a line, refitted with the rest
        lined = linearize(out, symbols, X, y, loss_space=loss_space, noise=noise, deadline=deadline)
        if lined != out:
            out = refit_constants(lined, symbols, X, y, loss_space=loss_space, deadline=deadline)
    fitted = len(out.atoms(sympy.Float))
    if snap:
        out = snap_constants(out, symbols, X, y, loss_space=loss_space, noise=noise, deadline=deadline)
        # floats the data cannot tell apart as one: exp(1/w)/(0.8848 exp(2/w) + 0.885) simplifies to c/cosh(1/w)
        out = tie_constants(out, symbols, X, y, loss_space=loss_space, noise=noise, deadline=deadline)
    if simplify:
        out = simplify_formula(out)
    merged = merge_numeric_factors(out)
    # a snap can fuse floats that were one constant, not identifiable apart (c1 (c2 x + c3)
    # with c3 snapped to 0 is one c1 c2 x), and the fused one was never a candidate: decide
    # again when the snaps left fewer floats (and few enough for a second pass to be cheap)
    fused = fitted > len(merged.atoms(sympy.Float)) and len(merged.atoms(sympy.Float)) <= SECOND_PASS_FLOATS
    if snap and (merged != out or fused):
        # simplification can leave products such as 0.3183*pi (= 1): snap the merged float
        out = snap_constants(merged, symbols, X, y, loss_space=loss_space, noise=noise, deadline=deadline)
        if simplify:
            out = simplify_formula(out)
    # a float times pi (left by a rewrite) is one float: refitted and rounded as such
    if time_is_up(deadline):
        deadline.cut("refinement: the final refit skipped")
        out = merge_numeric_factors(out)
    else:
        out = refit_constants(merge_numeric_factors(out), symbols, X, y, loss_space=loss_space)
    out = take_out_squares(out, symbols, X)  # sqrt(b/(1 - a)**2) -> sqrt(b)/(1 - a) where 1 - a > 0 on the rows
    if not snap:
        return out
    return shorten_numbers(round_constants(clean_floats(out), symbols, X, y, loss_space=loss_space, noise=noise,
                                           deadline=deadline))


def merge_numeric_factors(expr: sympy.Expr) -> sympy.Expr:
    """Fold the numeric factors of every product that holds a float into one float.

    ``0.3183098861837907*pi*x**2`` becomes ``1.0*x**2``; products of exact numbers only
    (``pi*x/2``) are left alone.
    """
    def merge(e: sympy.Expr) -> sympy.Expr:
        numeric = [f for f in e.args if not f.free_symbols]
        if len(numeric) < 2 or not any(f.has(sympy.Float) for f in numeric):
            return e
        rest = [f for f in e.args if f.free_symbols]
        return sympy.Mul(sympy.Float(sympy.Mul(*numeric).evalf()), *rest)

    return sympy.sympify(expr).replace(lambda e: e.is_Mul, merge)


def monic_denominators(expr: sympy.Expr) -> sympy.Expr:
    """Take the scale out of every power of a sum with float coefficients (a reciprocal, a root),
    the numeric factors then merged (:func:`merge_numeric_factors`); values unchanged.

    A product of pieces each fitted with its own scale, ``(0.3 a + b) / (0.30036 - 0.30043 w)``
    or ``0.2675 sqrt(14.1 x^2 + 14.1 y^2 - 0.7)``, has one scale too many: a refit cannot tell
    the outer factor from the inner ones, and no constant stands alone to be snapped. A
    power of a sum (not a positive integer one) is written with the float coefficient ``g`` of
    largest magnitude taken out, ``g^e (x + .../g)^e`` (``g > 0`` for a root); so is every
    sum of a product of two or more (the product of separated pieces,
    ``-0.029 (0.026 - 3.31 a) (10.44 cos t - 0.002)`` is ``0.998 (a - 0.0079) (cos t - 0.00019)``:
    one scale, to be snapped to 1, where a refit had moved three and a snap fixed one of them).
    """
    def monic(e: sympy.Expr) -> sympy.Expr:
        base, n = e.args
        # the pivot: the float coefficient of largest magnitude (positive unless the power is
        # an integer one); a tiny constant term is no pivot (1e-7 + w^2 - w0^2 -> 1 + 1e7 (...))
        coefs = [(t, t.as_coeff_Mul()[0]) for t in base.args]
        usable = [(t, c) for t, c in coefs if isinstance(c, sympy.Float) and c != 0 and (n.is_integer or c > 0)]
        if not usable:
            return e
        pivot, c = max(usable, key=lambda tc: abs(float(tc[1])))
        terms = [(t.as_coeff_Mul()[1] if t is pivot else t / c) for t in base.args]
        return sympy.Pow(c, n) * sympy.Pow(sympy.Add(*terms), n)

    def monic_factors(e: sympy.Expr) -> sympy.Expr:  # c (a x + b) (d y + f) -> c a d (x + b/a) (y + f/d)
        sums = [a for a in e.args if float_sum(a)]
        if len(sums) < 2:
            return e
        scales, factors = [], []
        for a in e.args:
            if a in sums:
                pivot, g = max(((t, t.as_coeff_Mul()[0]) for t in a.args), key=lambda tc: abs(float(tc[1])))
                scales.append(g)
                factors.append(sympy.Add(*[(t.as_coeff_Mul()[1] if t is pivot else t / g) for t in a.args]))
            else:
                factors.append(a)
        return sympy.Mul(sympy.Float(sympy.Mul(*scales)), *factors)

    def spread(e: sympy.Expr) -> sympy.Expr:  # c (a x + b) ... -> (c a x + c b) ...: one scale
        floats = [a for a in e.args if isinstance(a, sympy.Float)]
        sums = [a for a in e.args if float_sum(a)]
        if len(floats) != 1 or len(sums) != 1:
            return e
        rest = [a for a in e.args if a is not floats[0] and a is not sums[0]]
        return sympy.Mul(sympy.Add(*[floats[0] * t for t in sums[0].args]), *rest)

    def float_sum(e: sympy.Expr) -> bool:  # a sum whose every term has a float coefficient
        return e.is_Add and all(t.as_coeff_Mul()[0].is_Float and t.as_coeff_Mul()[0] != 0 for t in e.args)

    out = sympy.sympify(expr).replace(
        lambda e: e.is_Pow and e.args[0].is_Add and e.args[1].is_number
        and not (e.args[1].is_integer and e.args[1] > 0), monic)
    out = out.replace(lambda e: e.is_Mul, monic_factors)
    return merge_numeric_factors(out).replace(lambda e: e.is_Mul, spread)


def exact_as_floats(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` with the exact coefficients and offsets of its sums and products as floats
    (``3*cos(pi*t)/10`` -> ``0.3*cos(3.14159*t)``; exponents and the signs of ``-x`` aside):
    the constants of a closed form another search snapped against its own noise floor, to be
    decided again by :func:`refine`."""
    def walk(e: sympy.Expr) -> sympy.Expr:
        if not e.args:
            return e
        if not isinstance(e, (sympy.Mul, sympy.Add)):  # a Pow's exponent, for one, stays exact
            return e.func(*[walk(a) for a in e.args])
        nums = [a for a in e.args if a.is_number and a.is_real]
        rest = [walk(a) for a in e.args if not (a.is_number and a.is_real)]
        c = e.func(*nums)  # the one coefficient (offset) of this product (sum)
        if isinstance(e, sympy.Mul):
            return (c if c in (sympy.S.One, sympy.S.NegativeOne) else sympy.Float(sympy.N(c))) * sympy.Mul(*rest)
        return (sympy.Float(sympy.N(c)) if c != 0 else sympy.S.Zero) + sympy.Add(*rest)

    return walk(sympy.sympify(expr))


def refine_times_factor(expr: sympy.Expr, syms: list[sympy.Symbol], x: np.ndarray, y: np.ndarray,
                         factor: np.ndarray, noise: float | None) -> sympy.Expr | None:
    """``expr`` refined as ``M * expr`` on ``factor * y`` (``M`` an input fed ``factor``).

    The weighted refit, snaps and simplification of
    :func:`kansym.symbolic.direct.direct_search`'s ``factor`` (rows of known positive factor,
    e.g. a dimensional reduction's monomial: the errors are those of ``factor * y``).

    Parameters
    ----------
    expr : sympy.Expr
        A formula in ``syms``.
    syms : list of sympy.Symbol
        One per column of ``x (N, d)``.
    x, y, factor : ndarray
        ``(N, d)``, ``(N,)`` and ``(N,)``, ``factor > 0``.
    noise : float, optional
        As :func:`refine`'s.

    Returns
    -------
    sympy.Expr or None
        The refined formula with ``M = 1``, or None when it is no longer ``M`` times a
        function of ``x``.
    """
    m = sympy.Dummy("factor", positive=True)
    xm = np.column_stack([x, factor])
    fine = refine(m * expr, [*syms, m], xm, factor * y, noise=noise, loss_space="linear")
    out = fine.xreplace({m: sympy.Integer(1)})
    # the refinement may rewrite M f(x) (e.g. M under a root): keep it only when it still is M f(x)
    with np.errstate(all="ignore"):
        whole = np.asarray(lambdify_formula(fine, [*syms, m])(xm), dtype=np.float64)
        parts = factor * np.asarray(lambdify_formula(out, syms)(x), dtype=np.float64)
    if m in out.free_symbols or not np.allclose(whole, parts, rtol=1e-9, atol=0, equal_nan=False):
        return None
    return out
