"""Read a formula string back into sympy without running anything it says.

``sympy.parse_expr`` (and ``sympify`` of a string) *evaluate* the text as Python: a
formula.json whose ``sympy`` field says ``x + __import__('os').system(...)`` would run
that command when a checkpoint's formula is plotted or predicted. :func:`parse_formula`
first parses the text with Python's own parser (:func:`ast.parse`, which runs nothing)
and accepts only the arithmetic a kansym formula is made of: numbers, the formula's
symbols, ``+ - * / **``, calls of a fixed list of mathematical functions and of
kansym's opaque numeric edge functions (``phi_<layer>_<in>_<out>``), and the constants
``pi``, ``E``, ``I``, ``oo``, ``zoo``, ``nan``. Only then is it handed to
``parse_expr``, with a namespace that holds nothing else.
"""

from __future__ import annotations

import ast
import re
from typing import Mapping

import sympy
from sympy.parsing.sympy_parser import parse_expr, standard_transformations

from kansym.errors import DataError

__all__ = ["parse_formula", "FUNCTIONS", "CONSTANTS"]

FUNCTIONS = (
    "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "atan2", "acot", "sinh", "cosh", "tanh", "coth",
    "asinh", "acosh", "atanh", "exp", "log", "sqrt", "cbrt", "root", "Abs", "sign", "Heaviside", "erf", "erfc",
    "gamma", "floor", "ceiling", "Max", "Min", "re", "im", "Rational", "Integer", "Float",
)
CONSTANTS = ("pi", "E", "I", "oo", "zoo", "nan")
OPAQUE = re.compile(r"^phi_\d+_\d+_\d+$")  # kansym's numeric edges (kansym.symbolic.numeric)

_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_UNARY = (ast.UAdd, ast.USub)


def _check(node: ast.AST, names: set[str], text: str) -> None:
    """Raise DataError unless ``node`` is arithmetic on ``names``, allowed functions and numbers."""
    if isinstance(node, ast.Expression):
        return _check(node.body, names, text)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return None
    if isinstance(node, ast.Name):
        if node.id in names or node.id in CONSTANTS:
            return None
        raise DataError(f"the formula {text!r} uses the name {node.id!r}, which is neither an input nor a constant")
    if isinstance(node, ast.BinOp) and isinstance(node.op, _BINARY):
        _check(node.left, names, text)
        return _check(node.right, names, text)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, _UNARY):
        return _check(node.operand, names, text)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords \
            and (node.func.id in FUNCTIONS or OPAQUE.match(node.func.id)):
        for arg in node.args:
            _check(arg, names, text)
        return None
    raise DataError(f"the formula {text!r} holds {type(node).__name__} code, not only arithmetic; "
                    "it was not written by kansym")


def parse_formula(text: str, symbols: Mapping[str, sympy.Symbol]) -> sympy.Expr:
    """The sympy expression of a formula string (``str`` of a kansym formula), safely.

    Parameters
    ----------
    text : str
        Python/sympy syntax: ``2.5*a**(3/2)/sqrt(b) + sin(pi*c)``.
    symbols : mapping of str to sympy.Symbol
        The names the formula may use and the symbols they stand for.

    Returns
    -------
    sympy.Expr

    Raises
    ------
    DataError
        Anything but arithmetic on ``symbols``, numbers, :data:`CONSTANTS` and calls of
        :data:`FUNCTIONS` or opaque ``phi_l_i_j`` edges; or text that does not parse.
    """
    text = str(text)
    if len(text) > 100_000:
        raise DataError(f"the formula is {len(text)} characters long; that is no kansym formula")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise DataError(f"the formula {text[:80]!r} is not valid syntax ({exc.msg})") from None
    _check(tree, set(symbols), text[:80])
    namespace = {name: getattr(sympy, name) for name in FUNCTIONS + CONSTANTS}
    opaque = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
              and OPAQUE.match(n.func.id)}
    namespace.update({name: sympy.Function(name) for name in opaque})
    namespace.update(symbols)
    try:
        return parse_expr(text, local_dict=namespace, global_dict={"Symbol": sympy.Symbol, "Integer": sympy.Integer,
                                                                   "Float": sympy.Float, "Rational": sympy.Rational},
                          transformations=standard_transformations)
    except (SyntaxError, TypeError, ValueError, ZeroDivisionError, sympy.SympifyError) as exc:
        raise DataError(f"the formula {text[:80]!r} does not read as a formula ({type(exc).__name__})") from None
