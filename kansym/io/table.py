"""The checked table of numbers a KAN learns from, and the rules a table must satisfy.

:class:`Table` is the value of the first stage of the data flow (docs/algorithms.md, "Architecture");
:func:`read_table_from_frame` turns a pandas DataFrame into one, raising a
:class:`~kansym.errors.DataError` with one actionable sentence for every mistake a
person can make with a table (a typo in a column name, a text column, a blank cell, a
constant column) and recording harmless adjustments (a text column left out, a
constant input dropped) as ``notices``. Reading CSV files is
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

__all__ = ["Table", "read_table_from_frame", "columns_from_frame", "fit_scalers"]

logger = logging.getLogger("kansym")


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
    source: str = "the table",
) -> Table:
    """Check a DataFrame and turn it into a :class:`Table` (the rules of :func:`read_table`).

    Parameters
    ----------
    df : pandas.DataFrame
        One column per variable, one row per sample; not modified.
    target, inputs, dropna, drop_constant
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
        constant, there are no more rows than inputs, or a target is constant.
    """
    columns = [str(c) for c in df.columns]
    _check_duplicates(columns, source)
    targets = [target] if isinstance(target, str) else list(target)
    if not targets:
        raise DataError("no target column given; name the column to predict.")
    _check_present(targets, columns, source, "target")
    _check_duplicates(targets, "the target list", listed=True)
    notices: list[str] = []

    if inputs is None:
        names = []
        for c in columns:
            if c in targets:
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
    if not names:
        raise DataError(
            f"{source} has no numeric input columns besides the target; add inputs or name them."
        )

    used = names + targets
    values = {c: _numeric_column(df[c], c, source) for c in used}
    x = np.column_stack([values[c] for c in names]).astype(np.float64)  # (N, d_in)
    y = np.column_stack([values[c] for c in targets]).astype(np.float64)  # (N, d_out)

    bad = ~(np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1))  # (N,)
    n_bad = int(bad.sum())
    if n_bad:
        if not dropna:
            first = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"{n_bad} of {len(bad)} rows of {source} have missing or non-finite values "
                f"in the used columns (first at data row {first + 1}); fix them or pass "
                "--dropna to drop those rows."
            )
        x, y = x[~bad], y[~bad]
        notices.append(f"dropped {n_bad} row(s) with missing or non-finite values")

    if x.shape[0] < 2:
        raise DataError(
            f"{source} has {x.shape[0]} usable row(s); at least 2 are needed to fit anything."
        )

    const = [i for i in range(x.shape[1]) if np.all(x[:, i] == x[0, i])]
    if const and drop_constant:
        for i in const:
            notices.append(f"dropped constant input column '{names[i]}' (always {x[0, i]:g})")
        keep = [i for i in range(x.shape[1]) if i not in const]
        if not keep:
            raise DataError(
                f"every input column of {source} is constant; nothing can be learned from them."
            )
        x = x[:, keep]
        names = [names[i] for i in keep]

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

    for note in notices:
        logger.info("%s: %s", source, note)
    return Table(
        x=np.ascontiguousarray(x),
        y=np.ascontiguousarray(y),
        input_names=tuple(names),
        target_names=tuple(targets),
        notices=tuple(notices),
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
