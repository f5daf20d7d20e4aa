"""The checked table of numbers a KAN learns from, and the rules a table must satisfy.

:class:`Table` is the value of the first stage of the data flow (docs/algorithms.md, "Architecture");
:func:`read_table_from_frame` turns a pandas DataFrame into one, raising a
:class:`~kansym.errors.DataError` with one actionable sentence for every mistake a
person can make with a table (a typo in a column name, a text column, a blank cell, a
constant column) and recording harmless adjustments (a text column left out, a
constant input dropped) as ``notices``. :func:`proportional_inputs` finds an input that
equals a target up to scale (a likely leak of the target into the inputs). Reading CSV files is
:mod:`kansym.io.tabular`, which re-exports everything here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from kansym.errors import DataError
from kansym.io.scaler import Scaler

__all__ = ["Table", "read_table_from_frame", "columns_from_frame", "fit_scalers", "Leak", "proportional_inputs",
           "leak_record", "LEAK_TOLERANCE"]

logger = logging.getLogger("kansym")

# largest |target - scale * column| on any row, in units of the target's standard deviation, of a column
# reported as a copy of the target (see proportional_inputs)
LEAK_TOLERANCE = 1e-4


@dataclass(frozen=True)
class Table:
    """Numeric inputs and targets read from a table, with their names.

    Attributes
    ----------
    x : np.ndarray, shape (N, d_in), float64
        Input columns in CSV units.
    y : np.ndarray, shape (N, d_out), float64
        Target columns in CSV units.
    input_names, target_names : tuple of str
        Column headers, in the order of the columns of ``x`` and ``y``.
    notices : tuple of str
        Human-readable notes on what was adjusted while reading (ignored text
        columns, dropped rows, dropped constant columns).
    """

    x: np.ndarray
    y: np.ndarray
    input_names: tuple[str, ...]
    target_names: tuple[str, ...]
    notices: tuple[str, ...] = ()

    @property
    def n_rows(self) -> int:
        """Number of rows ``N``."""
        return int(self.x.shape[0])

    @property
    def d_in(self) -> int:
        """Number of input columns."""
        return int(self.x.shape[1])

    @property
    def d_out(self) -> int:
        """Number of target columns."""
        return int(self.y.shape[1])


def fit_scalers(table: Table) -> tuple[Scaler, Scaler]:
    """The default scalers for a table: min/max for inputs, standard for targets.

    Returns
    -------
    (Scaler, Scaler)
        Input scaler (``x`` onto ``[-1, 1]``) and target scaler (``y`` to mean 0,
        std 1).
    """
    return Scaler.minmax(table.x), Scaler.standard(table.y)


def read_table_from_frame(
    df: pd.DataFrame,
    target: str | Sequence[str],
    inputs: Sequence[str] | None = None,
    *,
    dropna: bool = False,
    drop_constant: bool = True,
    drop: Sequence[str] = (),
    source: str = "the table",
) -> Table:
    """Check a DataFrame and turn it into a :class:`Table` (the rules of :func:`read_table`).

    Parameters
    ----------
    df : pandas.DataFrame
        One column per variable, one row per sample; not modified.
    target, inputs, dropna, drop_constant, drop
        As in :func:`read_table`.
    source : str
        How to name the data in messages (the file path for :func:`read_table`).

    Returns
    -------
    Table
        ``x`` and ``y`` as fresh float64 arrays.

    Raises
    ------
    DataError
        If a column name is duplicated or not in the table (the message lists the
        available columns), no target is given, a column is both target and
        input, a named column is not numeric, used cells are missing or
        non-finite (unless ``dropna``), fewer than 2 rows remain, every input is
        constant, there are no more rows than inputs, or a target is constant; or if a
        column in ``drop`` is not in the table, is a target or one of ``inputs``, or
        dropping leaves no input.
    """
    columns = [str(c) for c in df.columns]
    _check_duplicates(columns, source)
    df = df.set_axis(columns, axis=1)  # a frame's labels may be numbers (pandas' default 0, 1, ...): names are text
    targets = [str(t) for t in ([target] if isinstance(target, str) or np.ndim(target) == 0 else list(target))]
    if not targets:
        raise DataError("no target column given; name the column to predict.")
    _check_present(targets, columns, source, "target")
    _check_duplicates(targets, "the target list", listed=True)
    drop = _check_drop(drop, columns, targets, inputs, source)
    notices: list[str] = [f"dropped column '{c}' as asked" for c in drop]
    names, ignored = _input_names(df, columns, targets, inputs, drop, source)
    notices += ignored

    values = {c: _numeric_column(df[c], c, source) for c in names + targets}
    x = np.column_stack([values[c] for c in names]).astype(np.float64)  # (N, d_in)
    y = np.column_stack([values[c] for c in targets]).astype(np.float64)  # (N, d_out)
    x, y, dropped = _drop_missing_rows(x, y, dropna=dropna, source=source)
    notices += dropped
    if x.shape[0] < 2:
        raise DataError(
            f"{source} has {x.shape[0]} usable row(s); at least 2 are needed to fit anything."
        )
    if drop_constant:
        x, names, dropped = _drop_constant_inputs(x, names, source)
        notices += dropped
    _check_learnable(x, y, targets, source)

    for note in notices:
        logger.info("%s: %s", source, note)
    return Table(
        x=np.ascontiguousarray(x),
        y=np.ascontiguousarray(y),
        input_names=tuple(names),
        target_names=tuple(targets),
        notices=tuple(notices),
    )


def _input_names(df: pd.DataFrame, columns: list[str], targets: list[str], inputs: Sequence[str] | None,
                 drop: tuple[str, ...], source: str) -> tuple[list[str], list[str]]:
    """The input columns (the named ones, checked, or every other numeric column) and notes on text columns left out."""
    notices: list[str] = []
    if inputs is None:
        names = []
        for c in columns:
            if c in targets or c in drop:
                continue
            if _is_numeric(df[c]):
                names.append(c)
            elif _mostly_numeric(df[c]):
                _numeric_column(df[c], str(c), source)  # a typo in a numeric column: DataError
            else:
                notices.append(f"ignored non-numeric column '{c}'")
    else:
        names = [str(c) for c in inputs]
        _check_present(names, columns, source, "input")
        _check_duplicates(names, "the input list", listed=True)
        both = [c for c in names if c in targets]
        if both:
            raise DataError(
                f"column '{both[0]}' is both a target and an input; list it only once."
            )
    if not names and drop:
        raise DataError(f"dropping {', '.join(drop)} leaves no numeric input column in {source}; drop fewer columns.")
    if not names:
        raise DataError(
            f"{source} has no numeric input columns besides the target; add inputs or name them."
        )
    return names, notices


def _drop_missing_rows(x: np.ndarray, y: np.ndarray, *, dropna: bool,
                       source: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Refuse rows with a missing or non-finite used cell, or with ``dropna`` drop them (and say so)."""
    bad = ~(np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1))  # (N,)
    n_bad = int(bad.sum())
    if not n_bad:
        return x, y, []
    if not dropna:
        first = int(np.flatnonzero(bad)[0])
        raise DataError(
            f"{n_bad} of {len(bad)} rows of {source} have missing or non-finite values "
            f"in the used columns (first at data row {first + 1}); fix them or pass "
            "--dropna to drop those rows."
        )
    return x[~bad], y[~bad], [f"dropped {n_bad} row(s) with missing or non-finite values"]


def _drop_constant_inputs(x: np.ndarray, names: list[str], source: str) -> tuple[np.ndarray, list[str], list[str]]:
    """Leave out the constant input columns (and say so); refuse a table whose inputs are all constant."""
    const = [i for i in range(x.shape[1]) if np.all(x[:, i] == x[0, i])]
    if not const:
        return x, names, []
    notices = [f"dropped constant input column '{names[i]}' (always {x[0, i]:g})" for i in const]
    keep = [i for i in range(x.shape[1]) if i not in const]
    if not keep:
        raise DataError(
            f"every input column of {source} is constant; nothing can be learned from them."
        )
    return x[:, keep], [names[i] for i in keep], notices


def _check_learnable(x: np.ndarray, y: np.ndarray, targets: list[str], source: str) -> None:
    """Refuse a table with no more rows than inputs, or with a constant target."""
    if x.shape[0] <= x.shape[1]:
        raise DataError(
            f"{source} has {x.shape[0]} usable row(s) for {x.shape[1]} input columns; a law in "
            f"{x.shape[1]} variables needs more rows than inputs: add rows or name fewer inputs."
        )

    for j, t in enumerate(targets):
        if np.all(y[:, j] == y[0, j]):
            raise DataError(
                f"target column '{t}' is constant ({y[0, j]:g}) in {source}; "
                "there is nothing to predict."
            )


def columns_from_frame(df: pd.DataFrame, names: Sequence[str], *, source: str = "the table",
                       role: str = "input") -> np.ndarray:
    """The named numeric columns of ``df`` as ``(N, len(names))`` float64, every cell finite.

    The lighter check for rows a model only predicts on (``kansym predict``): one row is
    enough, and constant columns are fine.

    Raises
    ------
    DataError
        A named column is missing (the message lists those present), not numeric, or
        has a missing or non-finite cell (the first one is named).
    """
    columns = [str(c) for c in df.columns]
    _check_duplicates(columns, source)
    _check_present(list(names), columns, source, role)
    if len(df) == 0:
        raise DataError(f"{source} has no data rows")
    x = np.column_stack([_numeric_column(df[c], c, source) for c in names]).astype(np.float64)  # (N, d)
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        col = names[int(np.flatnonzero(~np.isfinite(x[row]))[0])]
        raise DataError(f"{int(bad.sum())} of {len(bad)} rows of {source} have missing or non-finite values "
                        f"(first: column '{col}' in data row {row + 1}); fix or drop those rows")
    return np.ascontiguousarray(x)


def _check_drop(drop: Sequence[str], columns: Sequence[str], targets: Sequence[str],
                inputs: Sequence[str] | None, source: str) -> tuple[str, ...]:
    """The columns to drop, each a column of the table that is neither a target nor a named input."""
    drop = tuple(str(c) for c in drop)
    _check_present(drop, columns, source, "dropped")
    _check_duplicates(drop, "the list of columns to drop", listed=True)
    for c in drop:
        if c in targets:
            raise DataError(f"column '{c}' is the target; it cannot be dropped (drop input columns only).")
        if inputs is not None and c in inputs:
            raise DataError(f"column '{c}' is both an input and a column to drop; name it in only one of them.")
    return drop


@dataclass(frozen=True)
class Leak:
    """An input column equal to a target up to scale: ``target = scale * column`` on every row.

    Attributes
    ----------
    column, target : str
    scale : float
        The least-squares ``c`` of ``target ~ c * column`` (no intercept).
    deviation : float
        ``max |target - scale * column|`` over the rows, over the target's standard deviation.
    """

    column: str
    target: str
    scale: float
    deviation: float

    @property
    def text(self) -> str:
        """``column 'leak' equals the target 'y' up to scale (y = 0.5 * leak on every row): likely a copy of
        the target (a leak)``; callers add how to leave it out."""
        scale = f"{self.scale:.6g}"
        law = {"1": self.column, "-1": f"-{self.column}"}.get(scale, f"{scale} * {self.column}")
        return (f"column '{self.column}' equals the target '{self.target}' up to scale ({self.target} = {law} on "
                "every row): likely a copy of the target (a leak)")

    def to_dict(self) -> dict:
        return {"column": self.column, "target": self.target, "scale": self.scale, "deviation": self.deviation,
                "remark": self.text}


def proportional_inputs(x: np.ndarray, y: np.ndarray, input_names: Sequence[str],
                        target_names: Sequence[str]) -> tuple[Leak, ...]:
    """The input columns that equal a target up to scale, ``y = c * x`` (``c = 1``: a duplicate).

    A column copied from the target (in other units, or with the target's measurement noise:
    a copy carries the noise too) is proportional to it on every row up to the rounding of
    the numbers written; a measured input is not, by far more than that. A column counts
    when, with ``c`` the least-squares scale (no intercept), ``max_i |y_i - c x_i|`` is at
    most :data:`LEAK_TOLERANCE` (1e-4) times ``std(y)``: any float64 or float32 copy, and a
    copy written to 6 significant digits when ``max |y| / std(y)`` stays below about 3. A
    column is reported only when another input of the table is not proportional to that
    target: with none, ``y = c * x`` is all the data can say, not a leak to leave out.

    Parameters
    ----------
    x : ndarray (N, d_in)
    y : ndarray (N, d_out)
    input_names, target_names : sequence of str

    Returns
    -------
    tuple of Leak
        In the order of the targets, then of the inputs; empty for a clean table.
    """
    x = np.asarray(x, dtype=np.float64)  # (N, d_in)
    y = np.asarray(y, dtype=np.float64).reshape(x.shape[0], -1)  # (N, d_out)
    norm2 = np.einsum("ij,ij->j", x, x)  # (d_in,)
    found: list[Leak] = []
    for j, target in enumerate(target_names):
        t, spread = y[:, j], float(np.std(y[:, j]))
        if not spread > 0:
            continue
        dot = x.T @ t  # (d_in,)
        scale = np.divide(dot, norm2, out=np.zeros_like(dot), where=norm2 > 0)
        # (d_in,) residual sums of squares, a prefilter 100x looser than the test (their rounding, ~1e-16 t @ t,
        # stays below it unless |mean(y)| > 1e5 std(y))
        rss = float(t @ t) - scale * dot
        close = np.flatnonzero((norm2 > 0) & (rss <= x.shape[0] * (10 * LEAK_TOLERANCE * spread) ** 2))
        hits = []
        for i in close:  # a few candidates: the exact test on every row
            deviation = float(np.max(np.abs(t - scale[i] * x[:, i]))) / spread
            if deviation <= LEAK_TOLERANCE:
                hits.append(Leak(str(input_names[i]), str(target), float(scale[i]), deviation))
        if len(hits) < x.shape[1]:
            found += hits
    return tuple(found)


def leak_record(leaks: Sequence[Leak]) -> dict:
    """``{"leaks": [...]}`` for ``formula.json`` (:mod:`kansym.discover.record`), or ``{}`` for none."""
    return {"leaks": [leak.to_dict() for leak in leaks]} if leaks else {}


def _check_present(wanted: Sequence[str], columns: Sequence[str], source: str, role: str) -> None:
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise DataError(
            f"{role} column '{missing[0]}' is not in {source}; "
            f"available columns: {', '.join(columns)}."
        )


def _is_numeric(s: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(s.dtype))


def _mostly_numeric(s: pd.Series) -> bool:
    """At least half of the non-empty cells parse as numbers (a numeric column with typos)."""
    filled = s.dropna()
    return len(filled) > 0 and int(pd.to_numeric(filled, errors="coerce").notna().sum()) * 2 >= len(filled)


def _numeric_column(s: pd.Series, name: str, source: str) -> np.ndarray:
    if _is_numeric(s):
        return s.to_numpy(dtype=np.float64, na_value=np.nan)
    converted = pd.to_numeric(s, errors="coerce")
    failed = converted.isna() & s.notna()
    if bool(failed.any()):
        row = int(np.flatnonzero(failed.to_numpy())[0])
        raise DataError(
            f"column '{name}' of {source} is not numeric (value {str(s.iloc[row])!r} "
            f"in data row {row + 1}); fix the value or leave the column out."
        )
    return converted.to_numpy(dtype=np.float64, na_value=np.nan)


def _check_duplicates(columns: Sequence[str], source: str, *, listed: bool = False) -> None:
    """Refuse a column named twice: in a file's header (rename), or in a list of columns the
    caller gave (``listed``: name it once)."""
    seen: set[str] = set()
    dups: list[str] = []
    for c in columns:
        if c in seen and c not in dups:
            dups.append(c)
        seen.add(c)
    if dups and listed:
        raise DataError(f"{source} repeats the column(s) {', '.join(repr(d) for d in dups)}; name each column once")
    if dups:
        raise DataError(
            f"{source} has duplicate column name(s) {', '.join(repr(d) for d in dups)}; "
            "rename them so each column is unique."
        )
