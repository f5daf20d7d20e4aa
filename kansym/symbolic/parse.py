"""Column names as identifiers, and formula strings read back into sympy without running anything they say.

``sympy.parse_expr`` (and ``sympify`` of a string) *evaluate* the text as Python: a
formula.json whose ``sympy`` field says ``x + __import__('os').system(...)`` would run
that command when a checkpoint's formula is plotted or predicted. :func:`parse_formula`
parses the text with Python's own parser (:func:`ast.parse`, which runs nothing), accepts
only the arithmetic a kansym formula is made of: numbers, the formula's symbols,
``+ - * / **``, calls of the functions of kansym's primitives and simplifications
(:data:`FUNCTIONS`) and of kansym's opaque numeric edge functions
(``phi_<layer>_<in>_<out>``), and the constants :data:`CONSTANTS`; and builds the sympy
expression from that tree itself, node by node (no ``eval``, no ``parse_expr``).

The work is bounded, so a hostile or broken string costs milliseconds, not hours or a
traceback: at most :data:`MAX_CHARS` characters and :data:`MAX_NODES` tree nodes, no
exact power of more than :data:`MAX_EXACT_BITS` bits (``9**9**9`` would take sympy hours),
and a nesting Python's parser cannot hold is one :class:`~kansym.errors.DataError`.
The expression is the one ``parse_expr(str(expr))`` gives for what kansym writes: a sum
or product is built as one ``Add``/``Mul`` of its terms (Python's operators, applied
pairwise, would cost quadratic time on long sums), and a number keeps the precision of its
digits, as sympy's ``auto_number`` gives it.

Column names as identifiers: the one map from a CSV's column names to the names a parser accepts.

A formula's symbols carry the CSV column names verbatim (``mass kg``, ``speed-m/s``,
``I``, ``lambda``), so the LaTeX and the printed formula read like the table. Text that a
program parses back (``formula.json``'s ``sympy`` strings, the Python export) uses
:func:`identifiers` instead: per column a name that is

- a Python identifier of word characters only (what ``tokenize``, and so sympy's parser,
  reads as a name), unchanged by Python's NFKC normalisation of identifiers, and no
  keyword (``lambda`` -> ``lambda_``);
- none of the names ``sympy.sympify`` binds before it reads a string (sympy's ``I``,
  ``E``, ``S``, ``N``, ``O``, ``Q``, ``pi``, ``beta``, ``gamma``, ``sin``, ... and Python's
  builtins ``max``, ``sum``, ``id``, ...: ``E`` -> ``E_``), so the string means the same
  with or without explicit ``locals``;
- neither ``numpy`` nor ``X`` (the Python export's module and argument) nor ``__debug__``.

A name that is all that already is kept. Any other is made readable and deterministic:
NFKC-normalised, each run of characters that cannot be part of an identifier becomes
one ``_`` (trimmed at the ends: ``E (J)`` -> ``E_J``), ``x_`` is put before a leading
digit (``2theta`` -> ``x_2theta``), ``_`` after a reserved word; two columns that end up
with one name get ``_2``, ``_3``, ... in column order (``a b``, ``a-b`` -> ``a_b``,
``a_b_2``), and never the name of another column that is kept as it is.
"""

from __future__ import annotations

import ast
import builtins
import functools
import keyword
import math
import operator
import re
import unicodedata
from typing import Mapping, Sequence

import sympy

from kansym.errors import DataError

__all__ = ['identifiers', 'identifier', 'is_safe_identifier', 'rename_symbols', 'parse_formula', 'FUNCTIONS',
    'CONSTANTS', 'OPAQUE', 'MAX_CHARS', 'MAX_NODES', 'MAX_FACTORS', 'MAX_EXACT_BITS']


_EXPORT_NAMES = frozenset({"numpy", "X", "__debug__"})


@functools.lru_cache(maxsize=1)
def _sympy_names() -> frozenset[str]:
    """The names ``sympy.sympify`` binds before reading a string: its ``from sympy import *``
    (``sympy.__all__``) and Python's builtins (``max``, ``sum``, ``id``, ...)."""
    return frozenset(sympy.__all__) | frozenset(dir(builtins))


def _word(c: str) -> bool:
    """A character an identifier may hold that Python's ``tokenize`` (sympy's parser) also reads
    as part of a name (``\\w``: not the middle dot ``·``, which ``str.isidentifier`` allows)."""
    return ("a" + c).isidentifier() and re.fullmatch(r"\w", c) is not None


def is_safe_identifier(name: str) -> bool:
    """Whether ``name`` may stand as it is in a parsed formula (see the module docstring)."""
    return (name.isidentifier() and all(_word(c) for c in name) and unicodedata.normalize("NFKC", name) == name
            and not keyword.iskeyword(name) and name not in _EXPORT_NAMES and name not in _sympy_names())


def _readable(name: str) -> str:
    """``name`` with every run of non-identifier characters made one ``_`` (a valid identifier)."""
    text = unicodedata.normalize("NFKC", str(name))
    text = "".join(c if _word(c) else " " for c in text)
    text = re.sub(r"\s+", "_", text.strip())
    text = text.strip("_") or "x"
    if not text[0].isidentifier():  # a leading digit (or a mark that cannot start a name)
        text = "x_" + text
    if not is_safe_identifier(text) and text.isidentifier():
        text += "_"
    return text


def identifiers(names: Sequence[str]) -> tuple[str, ...]:
    """One safe, distinct identifier per column name, in order (see the module docstring).

    Examples
    --------
    >>> identifiers(["mass kg", "speed-m/s", "I", "lambda", "2theta", "x"])
    ('mass_kg', 'speed_m_s', 'I_', 'lambda_', 'x_2theta', 'x')
    >>> identifiers(["a b", "a-b", "a_b_2"])
    ('a_b', 'a_b_3', 'a_b_2')
    """
    names = [str(n) for n in names]
    out: list[str | None] = [n if is_safe_identifier(n) else None for n in names]
    used: set[str] = set()
    for i, n in enumerate(out):  # the first of equal names keeps it (two equal columns: a table error elsewhere)
        if n is not None:
            if n in used:
                out[i] = None
            else:
                used.add(n)
    for i, name in enumerate(names):
        if out[i] is not None:
            continue
        base = _readable(name)
        cand, k = base, 2
        while cand in used or not is_safe_identifier(cand):
            cand, k = f"{base}_{k}", k + 1
        out[i] = cand
        used.add(cand)
    return tuple(out)  # type: ignore[arg-type]


def identifier(name: str) -> str:
    """The safe identifier of one name (``E (J)`` -> ``E_J``), e.g. a Python function's name."""
    return identifiers([name])[0]


def rename_symbols(expr: sympy.Expr, names: Mapping[str, str]) -> sympy.Expr:
    """``expr`` with each symbol named ``old`` in ``names`` renamed ``names[old]`` (assumptions kept)."""
    sub = {s: sympy.Symbol(names[s.name], **s.assumptions0) for s in expr.free_symbols
           if isinstance(s, sympy.Symbol) and s.name in names and names[s.name] != s.name}
    return expr.xreplace(sub) if sub else expr


FUNCTIONS = (
    "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "atan2", "acot", "sinh", "cosh", "tanh", "coth",
    "asinh", "acosh", "atanh", "exp", "log", "sqrt", "cbrt", "root", "Abs", "sign", "Heaviside",
    "floor", "ceiling", "Max", "Min", "re", "im",
)
CONSTANTS = ("pi", "E", "I", "oo", "zoo", "nan")
OPAQUE = re.compile(r"^phi_\d+_\d+_\d+$")  # kansym's numeric edges (kansym.symbolic.fit)
MAX_CHARS = 100_000  # the longest formula kansym printed on the Feynman benchmarks has about 1,000
MAX_NODES = 20_000  # syntax-tree nodes (a term like 2.5*x1 is 5 of them)
MAX_FACTORS = 256  # factors of one product (a*b/c...), each multiplied in turn
MAX_EXACT_BITS = 4096  # an exact number a formula may compute: about 1,200 decimal digits

_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
_UNARY = (ast.UAdd, ast.USub)
_OPERATOR = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_CHAIN = (ast.Add, ast.Sub, ast.Mult, ast.Div)  # the operators of a sum or product chain
_FORMS = (ast.Expression, ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.Call, ast.Load, ast.operator, ast.unaryop)


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
        :data:`FUNCTIONS` or opaque ``phi_l_i_j`` edges; text that does not parse; a
        formula beyond the bounds of the module docstring.
    """
    if not isinstance(text, str):
        raise DataError(f"a formula must be a string, got {type(text).__name__}")
    text = text.strip()
    shown = text[:80]
    if len(text) > MAX_CHARS:
        raise DataError(f"the formula is {len(text)} characters long, more than the {MAX_CHARS} of any kansym formula")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise DataError(f"the formula {shown!r} is not valid syntax ({exc.msg})") from None
    except (RecursionError, MemoryError, ValueError) as exc:  # a sum of ~2,000 terms is deeper than Python's parser goes
        raise DataError(f"the formula {shown!r}... is nested too deeply or has too many terms to be a kansym formula "
                        f"({type(exc).__name__})") from None
    nodes = _checked_nodes(tree, set(symbols), shown)
    return _Builder(text, symbols, shown).build(tree.body, nodes)


def _checked_nodes(tree: ast.Expression, names: set[str], shown: str) -> list[ast.AST]:
    """Every node of ``tree`` (breadth first), after checking each is arithmetic kansym writes.

    Raises
    ------
    DataError
        A node of another kind, an unknown name or function, or more than :data:`MAX_NODES`.
    """
    nodes: list[ast.AST] = []
    called: set[int] = set()
    for node in ast.walk(tree):  # iterative: no recursion limit
        nodes.append(node)
        if len(nodes) > MAX_NODES:
            raise DataError(f"the formula {shown!r}... has more than {MAX_NODES} terms and operators; "
                            "that is no kansym formula")
        if (not isinstance(node, _FORMS) or isinstance(node, ast.operator) and type(node) not in _BINARY
                or isinstance(node, ast.unaryop) and not isinstance(node, _UNARY)):
            raise DataError(f"the formula {shown!r} holds {type(node).__name__} code, not only arithmetic; "
                            "it was not written by kansym")
        if isinstance(node, ast.Constant) and (type(node.value) not in (int, float)):
            raise DataError(f"the formula {shown!r} holds the {type(node.value).__name__} {node.value!r}, "
                            "not a real number; it was not written by kansym")
        if isinstance(node, ast.Call):
            func = node.func
            if not isinstance(func, ast.Name):  # a method, a call's result, ...: code, not a formula
                raise DataError(f"the formula {shown!r} calls {ast.unparse(func)[:40]!r}: code, not only arithmetic; "
                                "it was not written by kansym")
            if not (func.id in FUNCTIONS or OPAQUE.match(func.id)):
                what = func.id
                raise DataError(f"the formula {shown!r} calls {what!r}, which is not a function of kansym's formulas")
            if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                raise DataError(f"the formula {shown!r} passes keyword or starred arguments to {func.id!r}; "
                                "it was not written by kansym")
            called.add(id(func))
        if isinstance(node, ast.Name) and id(node) not in called and node.id not in names and node.id not in CONSTANTS:
            raise DataError(f"the formula {shown!r} uses the name {node.id!r}, which is neither an input nor a constant")
    return nodes


class _Builder:
    """The sympy expression of a checked tree, bottom up without recursion."""

    def __init__(self, text: str, symbols: Mapping[str, sympy.Symbol], shown: str):
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line.encode("utf-8")))
        self.raw = text.encode("utf-8")
        self.symbols, self.shown = symbols, shown
        self.opaque: dict[str, sympy.FunctionClass] = {}

    def build(self, root: ast.AST, nodes: list[ast.AST]) -> sympy.Expr:
        value: dict[int, sympy.Expr] = {}
        inner = {id(n.left) for n in nodes if _chained(n) and _chained(n.left) and _same_chain(n, n.left)}
        inner |= {id(n.func) for n in nodes if isinstance(n, ast.Call)}  # a function's name is no value
        try:
            for node in reversed(nodes):  # children come after their parent in ast.walk's order
                if isinstance(node, (ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.Call)) and id(node) not in inner:
                    value[id(node)] = self._node(node, value)
        except DataError:
            raise
        except (TypeError, ValueError, ArithmeticError, RecursionError, MemoryError, sympy.SympifyError) as exc:
            raise DataError(f"the formula {self.shown!r} does not read as a formula ({type(exc).__name__})") from None
        return sympy.sympify(value[id(root)])

    def _node(self, node: ast.AST, value: dict[int, sympy.Expr]) -> sympy.Expr:
        if isinstance(node, ast.Constant):
            return self._number(node)
        if isinstance(node, ast.Name):
            return self.symbols[node.id] if node.id in self.symbols else getattr(sympy, node.id)
        if isinstance(node, ast.UnaryOp):
            operand = value[id(node.operand)]
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.Call):
            return self._function(node.func.id)(*[value[id(a)] for a in node.args])
        if isinstance(node.op, ast.Pow):
            return _power(value[id(node.left)], value[id(node.right)], self.shown)
        return self._chain(node, value)

    def _chain(self, node: ast.BinOp, value: dict[int, sympy.Expr]) -> sympy.Expr:
        """A sum ``a + b - c + ...`` as one Add of ``a, b, -c`` (pairwise, a sum of n terms costs
        n**2); a product ``a * b / c ...`` of at most :data:`MAX_FACTORS` factors left to right, as
        Python does it (a number times a sum is distributed only when they are its first two factors)."""
        links: list[tuple[type, sympy.Expr]] = []
        while _chained(node):
            links.append((type(node.op), value[id(node.right)]))
            if not (_chained(node.left) and _same_chain(node, node.left)):
                break
            node = node.left
        links.append((ast.Add, value[id(node.left)]))
        links.reverse()
        additive = isinstance(node.op, (ast.Add, ast.Sub))
        if additive and not all(isinstance(v, sympy.Number) for _, v in links):
            return sympy.Add(*[-v if op is ast.Sub else v for op, v in links])
        if len(links) > MAX_FACTORS:
            raise DataError(f"the formula {self.shown!r}... multiplies {len(links)} factors in a row, more than the "
                            f"{MAX_FACTORS} of any kansym formula")
        total = links[0][1]
        for op, v in links[1:]:
            total = _OPERATOR[op](total, v)
        return total

    def _number(self, node: ast.Constant) -> sympy.Expr:
        if isinstance(node.value, int):
            return sympy.Integer(node.value)
        start = self.starts[node.lineno - 1] + node.col_offset
        end = self.starts[node.end_lineno - 1] + node.end_col_offset
        return sympy.Float(self.raw[start:end].decode("utf-8").replace("_", ""))  # the digits' precision (auto_number)

    def _function(self, name: str):
        if name in FUNCTIONS:
            return getattr(sympy, name)
        return self.opaque.setdefault(name, sympy.Function(name))


def _chained(node: ast.AST) -> bool:
    return isinstance(node, ast.BinOp) and type(node.op) in _CHAIN


def _same_chain(parent: ast.BinOp, child: ast.BinOp) -> bool:
    """Whether ``child`` (the left operand of ``parent``) continues its sum (``+ -``) or product (``* /``)."""
    return (type(parent.op) in (ast.Add, ast.Sub)) == (type(child.op) in (ast.Add, ast.Sub))


def _power(base: sympy.Expr, exponent: sympy.Expr, shown: str) -> sympy.Expr:
    """``base ** exponent``, refusing an exact power of more than :data:`MAX_EXACT_BITS` bits."""
    base, exponent = sympy.sympify(base), sympy.sympify(exponent)
    if isinstance(base, sympy.Rational) and isinstance(exponent, sympy.Rational) and base not in (0, 1, -1):
        bits = max(abs(int(base.p)).bit_length(), int(base.q).bit_length())
        if abs(int(exponent.p)) * bits > MAX_EXACT_BITS * int(exponent.q):  # integers: no float overflow
            digits = abs(int(exponent.p)) * bits * math.log10(2) / int(exponent.q)
            raise DataError(f"the formula {shown!r} computes an exact power of about {digits:.3g} digits; "
                            "no kansym formula does")
    return base ** exponent
