"""Deterministic simplification of a formula (:func:`simplify_formula`), by its size alone, never by the clock."""

from __future__ import annotations

from typing import Callable

import sympy

__all__ = ["simplify_formula"]


def simplify_formula(expr: sympy.Expr, *, max_ops: int = 40) -> sympy.Expr:
    """Simplify deterministically; never returns a longer expression.

    Tries ``powsimp``, ``factor_terms`` and ``together`` (single passes over the tree,
    milliseconds even for the composition of an unpruned network), and ``sympy.simplify``
    only when the expression has at most ``max_ops`` operations (``sympy.count_ops``;
    well under a second there, while on large formulas it can run for minutes). Which
    rewrites run depends on the expression alone, never on the clock: sympy cannot be
    stopped after a count of work, and a cut-off in seconds would make a busy machine
    print another formula. The candidate with the fewest operations wins (ties: the
    first, the input itself).
    """
    expr = sympy.sympify(expr)
    options: list[Callable[[sympy.Expr], sympy.Expr]] = [sympy.powsimp, sympy.factor_terms, sympy.together]
    if sympy.count_ops(expr) <= max_ops:
        options.append(sympy.simplify)
    return min([expr, *(fn(expr) for fn in options)], key=sympy.count_ops)
