"""Squares out of roots: ``sqrt(a**2 b) = |a| sqrt(b)``, and ``|a| = ±a`` where the data fix its sign.

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
:func:`~kansym.symbolic.refine.simplify_formula`-style passes. docs/algorithms.md §8.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import sympy

from kansym.symbolic.compose import lambdify_formula

__all__ = ["take_out_squares"]

RTOL = 1e-9  # the rewrite must evaluate like the input to this relative tolerance on every row


def _values(expr: sympy.Expr, symbols: Sequence[Any], X: np.ndarray) -> np.ndarray:
    """``expr`` on the rows of ``X``, shape ``(n_rows,)``."""
    with np.errstate(all="ignore"):
        return np.broadcast_to(np.asarray(lambdify_formula(expr, list(symbols))(X), dtype=np.float64), (len(X),))


def _sign_on_rows(factor: sympy.Expr, symbols: Sequence[Any], X: np.ndarray) -> int:
    """+1 or -1 if ``factor`` keeps that strict sign on every row of ``X``, else 0."""
    v = _values(factor, symbols, X)
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
    old, new = _values(expr, symbols, X), _values(out, symbols, X)
    ok = np.isfinite(old)
    if not ok.any() or not np.allclose(new[ok], old[ok], rtol=RTOL, atol=0) or not np.all(np.isfinite(new[ok])):
        return expr
    return out
