"""Column names as identifiers: the one map from a CSV's column names to the names a parser accepts.

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

import builtins
import functools
import keyword
import re
import unicodedata
from typing import Mapping, Sequence

import sympy

__all__ = ["identifiers", "identifier", "is_safe_identifier", "rename_symbols"]

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
