"""Bit-for-bit reproducible numerics: the same formula and data give the same bits in any process.

Two things made a refit's result depend on what the process had done before (a second
fit in one process, another command first, a background thread allocating), and a
least-squares refit along a flat direction of a formula's constants turns last-bit
differences into different constants, errors and, through the Occam step's choices,
formulas:

- ``sympy.lambdify`` replaces every argument by a fresh ``Dummy`` as soon as one
  argument is a ``Dummy`` or not a Python identifier (a CSV column named ``period days``
  or ``lambda``). Those Dummies are named from a process-wide counter (``Dummy_98``,
  ``Dummy_100``), and the code printer orders a sum's terms by name, so the same
  formula added its terms in another order. :func:`stable_lambdify` names such
  arguments by position instead.
- scipy's MINPACK (``least_squares(method="lm")``) gives results whose last bits
  depend on the process's heap; :mod:`kansym.symbolic.refine` fits with ``"trf"``.
"""

from __future__ import annotations

import keyword
from typing import Callable, Sequence

import sympy

__all__ = ["stable_lambdify"]


def _plain(arg: sympy.Symbol) -> bool:
    """Whether lambdify takes ``arg`` as it is (a Symbol, not a Dummy, named like a Python variable)."""
    return (type(arg) is sympy.Symbol and arg.name.isidentifier() and not keyword.iskeyword(arg.name)
            and arg.name != "__debug__")  # an identifier Python cannot assign


def stable_lambdify(args: Sequence[sympy.Symbol], expr: sympy.Expr) -> Callable:
    """``sympy.lambdify(args, expr, modules="numpy")`` with code that depends on ``expr`` alone.

    When lambdify would replace the arguments by counter-named Dummies (one of them is a
    Dummy or not an identifier), they are renamed ``_a00000, _a00001, ...`` first (same
    assumptions), numbered in the order lambdify itself numbers its Dummies (the reverse
    of ``sympy.ordered(zip(args, range(n)))``), zero-padded: the printer then orders the
    terms exactly as it did with lambdify's own Dummies whenever their counter kept its
    number of digits, so formulas found before stay the same to the last digit. Plain
    arguments are used as they are.
    """
    args = list(args)
    if all(_plain(a) for a in args):
        return sympy.lambdify(args, expr, modules="numpy")
    numbered = [i for _, i in reversed(list(sympy.ordered(zip(args, range(len(args))))))]
    rank = {i: r for r, i in enumerate(numbered)}
    plain = [sympy.Symbol(f"_a{rank[i]:05d}", **a.assumptions0) for i, a in enumerate(args)]
    return sympy.lambdify(plain, sympy.sympify(expr).xreplace(dict(zip(args, plain))), modules="numpy")

