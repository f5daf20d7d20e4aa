"""Physical units as data: the units a user gives, and the dimensional reduction in checkpoints.

A unit string such as ``kg*m/s^2``, ``m^1 * s^(-2)`` or ``Velocity, m^1 * s^(-1)`` (text
before the last comma is a label) parses to a map from base dimension to exponent
(:func:`parse_unit`). Any identifier is a base dimension (``m``, ``s``, ``kg``, ``T``,
``V``, ``A``, ``K``, ``mol``, ...); exponents are integers or rationals;
``Dimensionless``, ``1`` and the empty string mean no dimension. :func:`read_units` reads
every column's unit from a mapping, inline text or a CSV/JSON file.

A model of a ``--units`` run on the table's columns: the KAN of
:func:`kansym.discover.dimensional.discover_with_units` learns
``y / prod x^p = f(pi_1, ..., pi_k)`` on dimensionless groups ``pi_j = prod x^U_j``, so its
checkpoints' inputs are the groups (``pi1``, ...) and its target ``TARGET_reduced``. The
reduction travels with the checkpoints (``meta["reduction"]``) and with ``formula.json``
(``reduction``) as :func:`reduction_meta`; :func:`model_columns` and :func:`predict_columns`
then take rows of the table's own columns, as ``kansym predict`` does. The dimensional
analysis itself is :func:`kansym.discover.dimensional.analyze`.
"""

from __future__ import annotations

import logging
import re
from fractions import Fraction
from typing import Any, Mapping, Sequence

import numpy as np
import sympy

from kansym.errors import CheckpointError, DataError
from kansym.symbolic.parse import parse_formula

log = logging.getLogger(__name__)

__all__ = ["parse_unit", "read_units", "read_units_table", "reduction_meta", "model_columns", "model_target",
           "group_inputs", "predict_columns", "outside_training_range"]

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


def read_units(source: str | Mapping[str, str | Mapping], columns: Sequence[str]) -> dict[str, dict[str, Fraction]]:
    """Parsed units of ``columns`` (:func:`read_units_table`, :func:`parse_unit`).

    Parameters
    ----------
    source : str or mapping
        As :func:`read_units_table`; a mapping's value may also be a unit already parsed
        (``{"m": 1, "s": -1}``).
    columns : sequence of str
        Every input and the target.

    Raises
    ------
    DataError
        On an unreadable file or unit, or a column without a unit (named).
    """
    if isinstance(source, Mapping) and any(isinstance(v, Mapping) for v in source.values()):
        table = {str(k): v if isinstance(v, Mapping) else str(v) for k, v in source.items()}
    else:
        table = read_units_table(source)
    missing = [c for c in columns if c not in table]
    if missing:
        raise DataError(f"no unit given for column(s) {', '.join(missing)}; every input and the target need one "
                        "('1' or 'Dimensionless' for none)")
    extra = [k for k in table if k not in columns]
    if extra:
        log.warning("units given for %s, which %s not among the columns used (%s); ignored",
                    ", ".join(extra), "is" if len(extra) == 1 else "are", ", ".join(columns))
    return {c: dict(table[c]) if isinstance(table[c], Mapping) else _column_unit(c, table[c]) for c in columns}


def _column_unit(column: str, text: str) -> dict[str, Fraction]:
    """:func:`parse_unit` of ``column``'s unit, its error naming the column."""
    try:
        return parse_unit(text)
    except DataError as exc:
        raise DataError(f"column {column!r}: {exc}") from None


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


def reduction_meta(reduction: Any, target: str) -> dict:
    """The plain form of a :class:`kansym.discover.dimensional.Reduction` (JSON and checkpoint safe).

    Parameters
    ----------
    reduction : Reduction
    target : str
        The table's target column (the KAN predicts ``target`` divided by the monomial).

    Returns
    -------
    dict
        ``columns`` (the table's inputs, in order), ``target``, ``monomial`` and ``groups``
        (readable strings), ``p`` (``{column: "3/2"}``, the monomial's non-zero exponents)
        and ``exponents`` (``{group: [integer exponent of each column]}``).

    Examples
    --------
    >>> from fractions import Fraction
    >>> from kansym.discover.dimensional import Reduction
    >>> red = Reduction(("m", "v", "c"), ("kg", "m", "s"), (Fraction(1), Fraction(0), Fraction(2)), ((0, 1, -1),), ("pi1",))
    >>> reduction_meta(red, "E")["exponents"]
    {'pi1': [0, 1, -1]}
    """
    text = reduction.to_dict()
    return {"columns": list(reduction.names), "target": str(target), "monomial": text["monomial"],
            "p": text["p"], "groups": text["groups"],
            "exponents": {g: [int(e) for e in row] for g, row in zip(reduction.group_names, reduction.groups)}}


def _reduction(bundle: Any) -> Mapping | None:
    """The checkpoint's reduction, checked against its inputs; None for a model of the columns.

    Raises
    ------
    CheckpointError
        A reduction that is not what :func:`reduction_meta` writes: no list of column names, no
        target name, a model input without its integer exponents (one per column), or a monomial
        exponent that is not a fraction of a listed column.
    """
    red = bundle.meta.get("reduction")
    if not (isinstance(red, Mapping) and "exponents" in red):
        return None
    columns, exponents, p = red.get("columns"), red.get("exponents"), red.get("p", {})
    ok = (isinstance(columns, list) and columns and all(isinstance(c, str) and c for c in columns)
          and isinstance(red.get("target"), str) and isinstance(exponents, Mapping) and isinstance(p, Mapping)
          and all(isinstance(exponents.get(g), list) and len(exponents[g]) == len(columns)
                  and all(isinstance(e, int) and not isinstance(e, bool) for e in exponents[g])
                  for g in bundle.input_names)
          and all(c in columns and isinstance(v, str) and _is_fraction(v) for c, v in p.items()))
    if not ok:
        raise CheckpointError("the checkpoint's dimensional reduction (meta 'reduction') does not match its inputs; "
                              "use the checkpoint kansym fit --units wrote")
    return red


def _is_fraction(text: str) -> bool:
    try:
        Fraction(text)
    except (ValueError, ZeroDivisionError):
        return False
    return len(text) <= 40


def model_columns(bundle: Any) -> tuple[str, ...]:
    """The table columns a checkpoint predicts from: its inputs, or the columns of its groups."""
    red = _reduction(bundle)
    return tuple(bundle.input_names) if red is None else tuple(red["columns"])


def model_target(bundle: Any) -> tuple[str, ...]:
    """The table targets a checkpoint predicts (``E``, not ``E_reduced``, for a reduced one)."""
    red = _reduction(bundle)
    return tuple(bundle.output_names) if red is None else (str(red["target"]),)


def group_inputs(bundle: Any, x: np.ndarray) -> np.ndarray:
    """The model's inputs of rows ``x (N, len(model_columns))``: ``x`` itself, or the groups ``(N, k)``."""
    red = _reduction(bundle)
    x = np.asarray(x, dtype=np.float64)
    if red is None:
        return x
    with np.errstate(all="ignore"):
        return np.stack([np.prod(x ** np.asarray(red["exponents"][g], dtype=float), axis=1)
                         for g in bundle.input_names], axis=1)


def predict_columns(bundle: Any, x: np.ndarray) -> np.ndarray:
    """The model's predictions of the table's targets from rows of :func:`model_columns` -> ``(N, d_out)``.

    A reduced model's output is multiplied back by the monomial ``prod x^p``.
    """
    red = _reduction(bundle)
    y = bundle.predict(group_inputs(bundle, x))
    if red is None:
        return y
    columns = list(red["columns"])
    p = np.asarray([float(Fraction(red["p"].get(c, "0"))) for c in columns])
    with np.errstate(all="ignore"):
        return y * np.prod(np.asarray(x, dtype=np.float64) ** p, axis=1)[:, None]


def outside_training_range(bundle: Any, x: np.ndarray) -> int:
    """How many rows of ``x`` (table columns) lie outside the range the model was trained on
    (an input, or group, beyond the min-max of its training rows, or not finite there)."""
    with np.errstate(all="ignore"):
        u = bundle.transform.inputs(group_inputs(bundle, x))  # training rows span [-1, 1]
    return int(np.sum(~np.all(np.isfinite(u) & (np.abs(u) <= 1 + 1e-9), axis=1)))
