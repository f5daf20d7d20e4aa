"""Export a formula as LaTeX, Python (numpy) source or a torch module (JSON: :mod:`kansym.discover.record`).

One function per target, as PySR's exporters do (Cranmer 2023, arXiv:2305.01582):
LaTeX precision comes from a :class:`sympy.printing.latex.LatexPrinter`
subclass that overrides only ``_print_Float``; the torch module walks the
sympy tree with torch operations (no ``exec``), its float constants being
trainable parameters. Column names from the CSV become readable LaTeX
(``semi_major_axis_km`` -> ``\\mathrm{semi\\_major\\_axis\\_km}``, ``mass kg`` ->
``\\mathrm{mass\\ kg}``); Python source names each column by its identifier
(:func:`kansym.symbolic.parse.identifiers`: ``mass kg`` -> ``mass_kg``), as do the
``sympy`` strings of ``formula.json`` (:mod:`kansym.discover.record`).
"""

from __future__ import annotations

import keyword
import re
from typing import Any, Mapping, Sequence

import sympy
import torch
from sympy.printing.latex import LatexPrinter
from sympy.printing.numpy import NumPyPrinter

from kansym.errors import ConfigError
from kansym.symbolic.parse import identifiers

__all__ = ["to_latex", "to_python", "to_torch", "SympyModule"]

_GREEK = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
          "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi",
          "chi", "psi", "omega"}


class _PrecisionLatexPrinter(LatexPrinter):
    """LaTeX printer writing floats with ``precision`` significant digits."""

    def __init__(self, settings: dict[str, Any] | None = None, precision: int = 4) -> None:
        super().__init__(settings)
        self._precision = precision

    def _print_Float(self, expr: sympy.Float) -> str:
        text = f"{float(expr):.{self._precision}g}"
        if "e" in text:
            mant, exp = text.split("e")
            return rf"{mant} \cdot 10^{{{int(exp)}}}"
        return text


# characters of a column name that mean something in LaTeX math, as they print inside \mathrm{}
_LATEX_ESCAPES = {"_": r"\_", "#": r"\#", "%": r"\%", "&": r"\&", "$": r"\$", "{": r"\{", "}": r"\}",
                  " ": r"\ ", "\\": r"\backslash{}", "^": r"\hat{}", "~": r"\sim{}", "\n": r"\ ", "\t": r"\ ",
                  "\r": r"\ "}


# how sympy prints the constants a formula may hold (E, pi, I): a column never prints so
_CONSTANT_LATEX = frozenset({"e", r"\pi", "i"})


def _latex_name(name: str) -> str:
    """Readable LaTeX for a column name: ``x1`` -> ``x_{1}``, ``alpha`` -> ``\\alpha``,
    anything longer -> ``\\mathrm{...}`` of the name itself, its LaTeX specials escaped
    (``mass kg`` -> ``\\mathrm{mass\\ kg}``, ``E_k`` -> ``\\mathrm{E\\_k}``); a column that
    would print as a constant does (``e``, ``i``, ``pi``) is upright too (``\\mathrm{pi}``),
    distinct from sympy's ``e``, ``i`` and ``\\pi``."""
    if re.fullmatch(r"[A-Za-z]\d*", name) and name not in _CONSTANT_LATEX:
        return name[0] + (f"_{{{name[1:]}}}" if len(name) > 1 else "")
    if name.lower() in _GREEK and "\\" + name not in _CONSTANT_LATEX:
        return "\\" + name
    return rf"\mathrm{{{''.join(_LATEX_ESCAPES.get(c, c) for c in name)}}}"


def to_latex(expr: sympy.Expr, *, symbol_names: Mapping[Any, str] | None = None,
             precision: int = 4) -> str:
    """LaTeX of ``expr`` with floats at ``precision`` significant digits.

    Parameters
    ----------
    expr : sympy.Expr
    symbol_names : mapping of sympy.Symbol or str to str, optional
        LaTeX for some symbols (keys by symbol or name); the others get
        :func:`_latex_name` (``\\mathrm{}`` for multi-letter names).
    precision : int
        Significant digits of floats (>= 1).

    Returns
    -------
    str

    Raises
    ------
    ConfigError
        If ``precision < 1``.
    """
    if precision < 1:
        raise ConfigError(f"precision must be at least 1, got {precision}.")
    expr = sympy.sympify(expr)
    given = {(k.name if isinstance(k, sympy.Symbol) else str(k)): v for k, v in (symbol_names or {}).items()}
    names = {s: given.get(s.name, _latex_name(s.name)) for s in expr.free_symbols}
    return _PrecisionLatexPrinter({"symbol_names": names}, precision=precision).doprint(expr)


def _as_symbols(symbols: Sequence[Any]) -> list[sympy.Symbol]:
    return [s if isinstance(s, sympy.Symbol) else sympy.Symbol(str(s)) for s in symbols]


def to_python(expr: sympy.Expr, symbols: Sequence[Any], func_name: str = "f") -> str:
    """Source of a numpy function ``func_name(X)`` mapping (N, d) to (N,).

    Parameters
    ----------
    expr : sympy.Expr
    symbols : sequence of sympy.Symbol or str
        Variables in the column order of ``X``.
    func_name : str
        Name of the generated function.

    Returns
    -------
    str
        Self-contained source (imports numpy); floats printed at full precision. Column
        ``X[:, i]`` becomes a local variable named by
        :func:`kansym.symbolic.parse.identifiers` (``mass kg`` -> ``mass_kg``); a comment
        lists them in order with the column names.

    Raises
    ------
    ConfigError
        If ``func_name`` is not an identifier or ``expr`` has free symbols not in ``symbols``.
    """
    if not func_name.isidentifier() or keyword.iskeyword(func_name):
        raise ConfigError(f"func_name must be a Python identifier, got {func_name!r}.")
    syms = _as_symbols(symbols)
    expr = sympy.sympify(expr)
    extra = expr.free_symbols - set(syms)
    if extra:
        raise ConfigError(f"the formula uses {sorted(s.name for s in extra)} which are not in symbols; add them.")
    idents = identifiers([s.name for s in syms])
    safe = expr.xreplace({s: sympy.Symbol(n) for s, n in zip(syms, idents)})
    body = NumPyPrinter({"fully_qualified_modules": True}).doprint(safe)
    lines = ["import numpy", "", "", f"def {func_name}(X):",
             f'    """Formula {sympy.sstr(safe)!r}; X has shape (N, {len(syms)}), returns (N,)."""',
             "    # the columns of X, in this order (variable: column name)"]
    lines += [f"    #   X[:, {i}]  {n}: {s.name!r}" for i, (n, s) in enumerate(zip(idents, syms))]
    lines += ["    X = numpy.asarray(X, dtype=numpy.float64)"]
    lines += [f"    {n} = X[:, {i}]" for i, n in enumerate(idents)]
    lines += [f"    return numpy.zeros(X.shape[0]) + ({body})", ""]
    return "\n".join(lines)


_UNARY = {sympy.sin: torch.sin, sympy.cos: torch.cos, sympy.tan: torch.tan, sympy.exp: torch.exp,
          sympy.log: torch.log, sympy.tanh: torch.tanh, sympy.sinh: torch.sinh, sympy.cosh: torch.cosh,
          sympy.asin: torch.asin, sympy.acos: torch.acos, sympy.atan: torch.atan,
          sympy.Abs: torch.abs, sympy.sign: torch.sign}


class SympyModule(torch.nn.Module):
    """A sympy formula as a torch module; float constants are trainable parameters.

    ``forward`` maps ``X`` (N, d), columns ordered like ``symbols``, to (N,),
    in the dtype of ``X``. Built by :func:`to_torch`.
    """

    def __init__(self, expr: sympy.Expr, symbols: Sequence[sympy.Symbol]) -> None:
        super().__init__()
        self.formula = sympy.sstr(expr)
        self._index = {s: i for i, s in enumerate(symbols)}
        floats = sorted(expr.atoms(sympy.Float), key=lambda f: (float(f), str(f)))
        self._param_of = {f: i for i, f in enumerate(floats)}
        self.constants = torch.nn.Parameter(torch.tensor([float(f) for f in floats], dtype=torch.float64))
        self._tree = self._compile(expr)

    def _compile(self, e: sympy.Expr) -> tuple[Any, ...]:
        """Turn the sympy tree into nested tuples of (kind, payload, children)."""
        if e in self._index:
            return ("var", self._index[e])
        if isinstance(e, sympy.Float):
            return ("param", self._param_of[e])
        if not e.free_symbols and not e.atoms(sympy.Float):  # 3, 1/2, pi, sqrt(2), ...
            return ("const", float(e))
        kids = tuple(self._compile(a) for a in e.args)
        if isinstance(e, sympy.Add):
            return ("add", kids)
        if isinstance(e, sympy.Mul):
            return ("mul", kids)
        if isinstance(e, sympy.Pow):
            return ("pow", kids)
        if e.func in _UNARY and len(kids) == 1:
            return ("fn", _UNARY[e.func], kids)
        raise ConfigError(f"cannot export {e.func.__name__} to torch; rewrite the formula with "
                          f"+, *, ** and {sorted(f.__name__ for f in _UNARY)}.")

    def _eval(self, node: tuple[Any, ...], X: torch.Tensor) -> torch.Tensor | float:
        kind = node[0]
        if kind == "var":
            return X[:, node[1]]
        if kind == "param":
            return self.constants[node[1]].to(X.dtype)
        if kind == "const":
            return node[1]
        if kind == "fn":
            arg = self._eval(node[2][0], X)
            return node[1](arg if torch.is_tensor(arg) else torch.tensor(arg, dtype=X.dtype))
        vals = [self._eval(k, X) for k in node[1]]
        if kind == "pow":
            base, exp = vals
            if not torch.is_tensor(base):
                base = torch.tensor(base, dtype=X.dtype)
            return torch.pow(base, exp)
        out = vals[0]
        for v in vals[1:]:
            out = out + v if kind == "add" else out * v
        return out

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        if X.dim() != 2 or X.shape[1] != len(self._index):
            raise ConfigError(f"expected input of shape (N, {len(self._index)}), got {tuple(X.shape)}.")
        out = self._eval(self._tree, X)
        return torch.zeros(X.shape[0], dtype=X.dtype, device=X.device) + out

    def extra_repr(self) -> str:
        return self.formula


def to_torch(expr: sympy.Expr, symbols: Sequence[Any]) -> SympyModule:
    """A :class:`SympyModule` computing ``expr``; forward maps (N, d) to (N,).

    Raises
    ------
    ConfigError
        If ``expr`` uses a function without a torch counterpart or symbols not in ``symbols``.
    """
    syms = _as_symbols(symbols)
    expr = sympy.sympify(expr)
    extra = expr.free_symbols - set(syms)
    if extra:
        raise ConfigError(f"the formula uses {sorted(s.name for s in extra)} which are not in symbols; add them.")
    return SympyModule(expr, syms)
