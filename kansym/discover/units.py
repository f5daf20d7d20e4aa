"""Physical units and dimensional analysis (Buckingham pi), as AI Feynman's first step.

A unit string such as ``kg*m/s^2``, ``m^1 * s^(-2)`` or ``Velocity, m^1 * s^(-1)`` (text
before the last comma is a label) parses to a :class:`Dimension`: a map from base
dimension to exponent. Any identifier is a base dimension (``m``, ``s``, ``kg``, ``T``,
``V``, ``A``, ``K``, ``mol``, ...); exponents are integers or rationals;
``Dimensionless``, ``1`` and the empty string mean no dimension.

:func:`analyze` is the dimensional analysis of Udrescu & Tegmark 2020 ("AI Feynman: a
physics-inspired method for symbolic regression", Sci. Adv. 6:eaay2631, section
"Dimensional analysis"): with the dimension matrix ``M`` (base dimensions x variables)
and the target's dimensions ``b``, a solution ``p`` of ``M p = b`` gives a monomial
``prod x_i^p_i`` with the target's units, and an integer basis ``U`` of the null space of
``M`` gives the dimensionless groups ``prod x_i^U_ji``; by the Buckingham pi theorem
(Buckingham 1914, Phys. Rev. 4:345) ``y / prod x^p`` is a function of the groups alone.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping, Sequence

import numpy as np
import sympy

from kansym.errors import DataError
from kansym.symbolic.parse import parse_formula
from kansym.symbolic.verify import r2_score

log = logging.getLogger(__name__)

__all__ = ["parse_unit", "Reduction", "analyze", "read_units", "read_units_table"]

_ALLOWED = re.compile(r"^[A-Za-z0-9_ */^().+\-]*$")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NONE = {"", "1", "dimensionless", "none", "-"}

def parse_unit(text: str) -> dict[str, Fraction]:
    """Parse a unit string into ``{base dimension: exponent}``.

    Parameters
    ----------
    text : str
        ``kg*m/s^2``, ``kg m^2 s^-2`` is not accepted (write the ``*``), ``m^1 * s^(-2)``,
        ``m**2``, ``m^(1/2)``; a label before the last comma is ignored
        (``Velocity, m^1 * s^(-1)``); ``Dimensionless``, ``1`` or ``""`` give ``{}``.

    Returns
    -------
    dict of str to fractions.Fraction
        Sorted by name; no zero exponents.

    Raises
    ------
    DataError
        If the text is not a product of powers of identifiers (one line, quoting it).
    """
    raw = str(text)
    body = raw.rsplit(",", 1)[-1].strip()
    if body.lower() in _NONE:
        return {}
    if not _ALLOWED.match(body):
        raise DataError(f"cannot read the unit {raw!r}: use a product of powers like kg*m/s^2 or m^1 * s^(-2)")
    local = {name: sympy.Symbol(name, positive=True) for name in set(_IDENT.findall(body))}
    try:  # the one safe parser: a units file is shared like a table, and parse_expr would run its text
        expr = parse_formula(body.replace("^", "**"), local)
    except DataError:
        raise DataError(f"cannot read the unit {raw!r}: not a product of powers like kg*m/s^2 or m^1 * s^(-2)") from None
    out: dict[str, Fraction] = {}
    for base, exp in sympy.sympify(expr).as_powers_dict().items():
        if base == 1:
            continue
        if not isinstance(base, sympy.Symbol) or not exp.is_number:
            raise DataError(f"cannot read the unit {raw!r}: {base}^{exp} is not a power of a base dimension")
        if base.is_number:
            raise DataError(f"cannot read the unit {raw!r}: a number ({base}) is not a unit")
        out[base.name] = out.get(base.name, Fraction(0)) + _fraction(exp, raw)
    if expr.is_number and expr != 1:
        raise DataError(f"cannot read the unit {raw!r}: a number is not a unit")
    return {k: v for k, v in sorted(out.items()) if v != 0}


def _fraction(exp: sympy.Expr, raw: str) -> Fraction:
    if exp.is_Rational:
        return Fraction(int(exp.p), int(exp.q))
    value = float(exp)
    frac = Fraction(value).limit_denominator(12)
    if abs(float(frac) - value) > 1e-9:
        raise DataError(f"cannot read the unit {raw!r}: the exponent {value} is not a simple fraction")
    return frac


def read_units_table(source: str | Mapping[str, str]) -> dict[str, str]:
    """The unit string of each column from a mapping, a CSV/JSON file or an inline ``"v=m/s,c=m/s"``.

    A CSV file has two columns ``column,unit`` (a header line ``column,unit`` is skipped;
    a unit may hold commas, e.g. ``Velocity, m^1 * s^(-1)``, when quoted or last); a JSON
    file holds ``{"column": "unit"}``.

    Raises
    ------
    DataError
        On an unreadable file or an inline item without ``=``.
    """
    from pathlib import Path

    if isinstance(source, Mapping):
        return {str(k): str(v) for k, v in source.items()}
    if Path(source).is_file():
        return _read_units_file(Path(source))
    if "=" not in str(source):
        raise DataError(f"units file {source!r} not found (give a CSV or JSON file, or inline column=unit pairs)")
    table = {}
    for item in str(source).split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise DataError(f"cannot read the inline units item {item.strip()!r}: write column=unit, e.g. v=m/s")
        k, v = item.split("=", 1)
        if k.strip() in table:
            raise DataError(f"the unit of column {k.strip()!r} is given twice in --units")
        table[k.strip()] = v.strip()
    return table


def read_units(source: str | Mapping[str, str], columns: Sequence[str]) -> dict[str, dict[str, Fraction]]:
    """Parsed units of ``columns`` (:func:`read_units_table`, :func:`parse_unit`).

    Raises
    ------
    DataError
        On an unreadable file or unit, or a column without a unit (named).
    """
    table = read_units_table(source)
    missing = [c for c in columns if c not in table]
    if missing:
        raise DataError(f"no unit given for column(s) {', '.join(missing)}; every input and the target need one "
                        "('1' or 'Dimensionless' for none)")
    extra = [k for k in table if k not in columns]
    if extra:
        log.warning("units given for %s, which %s not among the columns used (%s); ignored",
                    ", ".join(extra), "is" if len(extra) == 1 else "are", ", ".join(columns))
    return {c: parse_unit(table[c]) for c in columns}


def _read_units_file(path) -> dict[str, str]:
    import csv
    import json

    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read the units file {path}: {exc}") from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"units file {path} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
        if not isinstance(data, dict):
            raise DataError(f"units file {path} must hold one JSON object {{\"column\": \"unit\"}}")
        return {str(k): str(v) for k, v in data.items()}
    table = {}
    for n, row in enumerate(csv.reader(text.splitlines()), 1):
        if not row or not "".join(row).strip():
            continue
        if len(row) < 2:
            raise DataError(f"units file {path}, line {n}: expected column,unit")
        name, unit = row[0].strip(), ",".join(row[1:]).strip()
        if n == 1 and name.lower() in ("column", "name") and unit.lower() in ("unit", "units"):
            continue
        if name in table:
            raise DataError(f"units file {path}, line {n}: the unit of column {name!r} is given twice")
        table[name] = unit
    return table


@dataclass(frozen=True)
class Reduction:
    """The result of :func:`analyze`.

    Attributes
    ----------
    names : tuple of str
        The variables (columns of ``x``).
    dims : tuple of str
        Base dimensions (rows of the dimension matrix).
    p : tuple of Fraction
        Exponents of the monomial with the target's units, one per variable.
    groups : tuple of tuple of int
        Integer exponents of each dimensionless group (null-space basis), one row per group.
    group_names : tuple of str
        Names for the groups: the variable itself for a group ``x_i^1``, else ``pi1, pi2, ...``.
    """

    names: tuple[str, ...]
    dims: tuple[str, ...]
    p: tuple[Fraction, ...]
    groups: tuple[tuple[int, ...], ...]
    group_names: tuple[str, ...]

    def monomials(self, max_coef: int = 2, max_groups: int = 4) -> list[tuple[Fraction, ...]]:
        """Every monomial with the target's units ``p + sum_j c_j U_j``, ``c_j`` in
        ``-max_coef..max_coef`` (``p`` first; only ``p`` with more than ``max_groups`` groups)."""
        if not self.groups or len(self.groups) > max_groups:
            return [self.p]
        out = []
        for coefs in itertools.product(range(-max_coef, max_coef + 1), repeat=len(self.groups)):
            q = tuple(e + sum(c * row[i] for c, row in zip(coefs, self.groups)) for i, e in enumerate(self.p))
            out.append(q)
        out.sort(key=lambda q: (q != self.p, sum(abs(a - b) for a, b in zip(q, self.p))))
        return out

    def closest_monomial(self, x: np.ndarray, y: np.ndarray) -> tuple[tuple[Fraction, ...] | None, float]:
        """Of :meth:`monomials`, the one whose constant multiple is closest to ``y`` on ``x``'s rows
        (the median constant; R² in ``y``'s units), and that R² (None, -inf: none is finite there).
        A law that is a constant times a monomial needs no KAN."""
        best_q, best_r2 = None, -np.inf
        for q in self.monomials():
            _, yq = self.with_p(q).reduce(x, y)
            if not np.all(np.isfinite(yq)):
                continue
            r2 = r2_score(y, np.median(yq) * (y / yq))
            if r2 > best_r2 + 1e-12:
                best_q, best_r2 = q, r2
        return best_q, best_r2

    def with_p(self, p: Sequence[Fraction]) -> "Reduction":
        """The same groups with another monomial."""
        return Reduction(self.names, self.dims, tuple(Fraction(e) for e in p), self.groups, self.group_names)

    @property
    def trivial(self) -> bool:
        """True when nothing is reduced (every variable is its own group and ``p = 0``)."""
        return len(self.groups) == len(self.names) and all(v == 0 for v in self.p)

    def monomial(self, symbols: Sequence[sympy.Symbol]) -> sympy.Expr:
        """``prod x_i^p_i`` in the given symbols."""
        return sympy.Mul(*[s ** sympy.Rational(e.numerator, e.denominator) for s, e in zip(symbols, self.p) if e != 0])

    def group_exprs(self, symbols: Sequence[sympy.Symbol]) -> list[sympy.Expr]:
        """Each group ``prod x_i^U_ji`` in the given symbols."""
        return [sympy.Mul(*[s ** int(e) for s, e in zip(symbols, row) if e != 0]) for row in self.groups]

    def reduce(self, x: np.ndarray, y: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Groups ``(N, k)`` and ``y / prod x^p`` ``(N,)`` (None without ``y``)."""
        x = np.asarray(x, dtype=np.float64)
        with np.errstate(all="ignore"):
            g = np.stack([np.prod(x ** np.asarray(row, dtype=float), axis=1) for row in self.groups], axis=1) \
                if self.groups else np.zeros((x.shape[0], 0))
            if y is None:
                return g, None
            mono = np.prod(x ** np.asarray([float(e) for e in self.p]), axis=1)
            return g, np.asarray(y, dtype=np.float64).reshape(-1) / mono

    def to_dict(self) -> dict:
        sym = [sympy.Symbol(n) for n in self.names]
        return {"monomial": str(self.monomial(sym)), "p": {n: str(e) for n, e in zip(self.names, self.p) if e != 0},
                "groups": {g: str(e) for g, e in zip(self.group_names, self.group_exprs(sym))}}


def _matrix(units: Sequence[Mapping[str, Fraction]], dims: Sequence[str]) -> sympy.Matrix:
    return sympy.Matrix([[sympy.Rational(u.get(d, 0).numerator, u.get(d, 0).denominator) for u in units] for d in dims])


def _integer_row(vec: Sequence[sympy.Rational]) -> tuple[int, ...]:
    """Scale a rational vector to the primitive integer vector, oriented mostly positive."""
    lcm = 1
    for v in vec:
        lcm = lcm * int(sympy.Rational(v).q) // math.gcd(lcm, int(sympy.Rational(v).q))
    ints = [int(sympy.Rational(v) * lcm) for v in vec]
    g = 0
    for v in ints:
        g = math.gcd(g, abs(v))
    ints = [v // g for v in ints] if g else ints
    pos, neg = sum(v > 0 for v in ints), sum(v < 0 for v in ints)
    first = next((v for v in ints if v != 0), 0)
    if neg > pos or (neg == pos and first < 0):
        ints = [-v for v in ints]
    return tuple(ints)


def _null_basis(M: sympy.Matrix, n: int) -> list[tuple[int, ...]]:
    """A sparse integer basis of the null space of ``M`` from its circuits (minimal dependent
    column sets), smallest support first, then smallest exponents, then column order."""
    rank = M.rank() if M.rows else 0
    k = n - rank
    if k == 0:
        return []
    circuits = []
    for size in range(1, rank + 2):
        for cols in itertools.combinations(range(n), size):
            ns = M[:, list(cols)].nullspace()
            if len(ns) != 1 or any(v == 0 for v in ns[0]):
                continue
            row = [0] * n
            for c, v in zip(cols, _integer_row(list(ns[0]))):
                row[c] = v
            circuits.append(tuple(row))
    circuits.sort(key=lambda r: (sum(v != 0 for v in r), sum(abs(v) for v in r), [i for i, v in enumerate(r) if v]))
    basis: list[tuple[int, ...]] = []
    for row in circuits:
        if sympy.Matrix(basis + [row]).rank() > len(basis):
            basis.append(row)
        if len(basis) == k:
            break
    return basis


def _orient_ratio(row: tuple[int, ...], x: np.ndarray) -> tuple[int, ...]:
    """A ratio of two variables ``a / b`` is turned so that it is mostly below 1 on the data
    (``v/c``, not ``c/v``: the small parameter of an expansion); other groups are kept."""
    idx = [i for i, v in enumerate(row) if v]
    if len(idx) != 2 or sorted(row[i] for i in idx) != [-1, 1]:
        return row
    with np.errstate(all="ignore"):
        logs = np.log(np.abs(x[:, idx[0]] / x[:, idx[1]])) * row[idx[0]]
    logs = logs[np.isfinite(logs)]
    if logs.size and np.median(logs) > 0.1:
        return tuple(-v for v in row)
    return row


def _particular(M: sympy.Matrix, b: sympy.Matrix, n: int, x: np.ndarray | None, y: np.ndarray | None):
    """Solutions of ``M p = b`` with the fewest variables; among them integer first, then the one
    leaving ``y / prod x^p`` least variable (log scale) when data are given, then smallest."""
    if all(v == 0 for v in b):
        return [Fraction(0)] * n
    rank = M.rank()
    found = []
    for size in range(1, rank + 1):
        for cols in itertools.combinations(range(n), size):
            sub = M[:, list(cols)]
            if sub.rank() < size:
                continue
            try:
                sol, params = sub.gauss_jordan_solve(b)
            except ValueError:  # inconsistent
                continue
            p = [Fraction(0)] * n
            for c, v in zip(cols, sol):
                p[c] = Fraction(int(sympy.Rational(v).p), int(sympy.Rational(v).q))
            found.append(p)
        if found:
            break
    if not found:
        return None

    def spread(p):
        if x is None or y is None:
            return 0.0
        with np.errstate(all="ignore"):
            r = np.log(np.abs(np.asarray(y, float).reshape(-1) / np.prod(np.asarray(x, float) ** np.asarray([float(e) for e in p]), axis=1)))
        r = r[np.isfinite(r)]
        return round(float(np.var(r)), 6) if r.size else math.inf

    return min(found, key=lambda p: (any(e.denominator != 1 for e in p), spread(p), sum(abs(e) for e in p),
                                     [i for i, e in enumerate(p) if e]))


def analyze(names: Sequence[str], units: Sequence[Mapping[str, Fraction]], target: Mapping[str, Fraction],
            x: np.ndarray | None = None, y: np.ndarray | None = None) -> Reduction | None:
    """Dimensional analysis of ``y(x)`` (Udrescu & Tegmark 2020, section "Dimensional analysis").

    Parameters
    ----------
    names : sequence of str
        Variable names, one per column of ``x``.
    units : sequence of dict
        Each variable's dimensions (:func:`parse_unit`).
    target : dict
        The target's dimensions.
    x : ndarray (N, d), optional
    y : ndarray (N,), optional
        When given, the monomial is chosen among the equally sparse solutions of ``M p = b``
        as the one leaving ``y / prod x^p`` the least variable in log scale (e.g. ``m c^2``
        rather than ``m v^2`` for a relativistic energy).

    Returns
    -------
    Reduction or None
        None when the target's units cannot be made from the inputs' (inconsistent units).
    """
    names = tuple(names)
    if len(units) != len(names):
        raise DataError(f"{len(names)} variables but {len(units)} units")
    dims = tuple(sorted(set().union(*[set(u) for u in units], set(target))))
    M = _matrix(units, dims)
    b = sympy.Matrix([sympy.Rational(target.get(d, 0).numerator, target.get(d, 0).denominator) for d in dims])
    n = len(names)
    if not dims:
        M = sympy.zeros(0, n)
    p = _particular(M, b, n, x, y) if dims else [Fraction(0)] * n
    if p is None:
        return None
    groups = _null_basis(M, n) if dims else [tuple(int(i == j) for i in range(n)) for j in range(n)]
    if x is not None:
        groups = [_orient_ratio(row, np.asarray(x, dtype=np.float64)) for row in groups]
    group_names, k = [], 0
    for row in groups:
        single = [i for i, v in enumerate(row) if v]
        if len(single) == 1 and row[single[0]] == 1:
            group_names.append(names[single[0]])
        else:
            k += 1
            name = f"pi{k}"
            while name in names:
                name = "_" + name
            group_names.append(name)
    return Reduction(names, dims, tuple(p), tuple(groups), tuple(group_names))
