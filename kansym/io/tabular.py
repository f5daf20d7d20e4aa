"""Tables of numbers from CSV files, checked and ready for a KAN.

The first stage of the data flow (DESIGN.md §2)::

    data.csv --read_table--> Table(x (N, d_in), y (N, d_out), names, notices)

Every mistake a person can make with a CSV (a missing file, a typo in a column
name, a text column, a blank cell, a constant column) becomes a
:class:`~kansym.errors.DataError` with one actionable sentence; harmless
adjustments (a text column left out, a constant input dropped) are recorded as
human-readable ``notices`` on the returned :class:`Table` and logged.

:class:`~kansym.io.scaler.Scaler` (re-exported here) holds the affine maps
used to feed a KAN; :func:`fit_scalers` gives the default pair for a table.
"""

from __future__ import annotations

import csv
import io
import logging
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from kansym.errors import DataError
from kansym.io.scaler import Scaler

__all__ = [
    "Scaler",
    "Table",
    "read_table",
    "read_table_from_frame",
    "fit_scalers",
    "embedded_dataset",
    "list_embedded",
]

logger = logging.getLogger("kansym")

_DELIMITERS = ",;\t"
_SNIFF_BYTES = 64 * 1024


# --------------------------------------------------------------------------- Table


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


# --------------------------------------------------------------------------- reading


def read_table(
    path: str | Path,
    target: str | Sequence[str],
    inputs: Sequence[str] | None = None,
    *,
    dropna: bool = False,
    drop_constant: bool = True,
) -> Table:
    """Read a CSV (comma, semicolon or tab separated, UTF-8) into a :class:`Table`.

    Parameters
    ----------
    path : str or Path
        The file; the first line is the header.
    target : str or sequence of str
        Target column name(s).
    inputs : sequence of str, optional
        Input column names. By default every other numeric column; text columns
        are then left out with a notice.
    dropna : bool
        Drop rows with missing or non-finite values in the used columns (with a
        notice) instead of raising.
    drop_constant : bool
        Drop constant input columns (with a notice). Pass False when reading
        data for an existing model, whose input columns must all be kept.

    Returns
    -------
    Table

    Raises
    ------
    DataError
        If the file is missing, empty, not UTF-8, has duplicate or empty column
        names, a row with more fields than the header, or fewer than 2 data rows,
        or for any reason listed in :func:`read_table_from_frame`.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"data file '{path}' does not exist; check the path.")
    if path.is_dir():
        raise DataError(f"'{path}' is a directory; give the path of a CSV file.")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read data file '{path}': {exc.strerror}.") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"data file '{path}' is not UTF-8 text (bad byte at offset {exc.start}); "
            "re-save it as UTF-8 CSV."
        ) from exc
    if not text.strip():
        raise DataError(f"data file '{path}' is empty; it needs a header and at least 2 rows.")

    text = text.replace("\r\n", "\n").replace("\r", "\n")  # Windows and classic-Mac line ends
    sep = _sniff_delimiter(text)
    try:
        rows = csv.reader(io.StringIO(text), delimiter=sep)
        header = [h.strip() for h in next(rows, [])]
        _check_duplicates(header, str(path))
        unnamed = [i for i, h in enumerate(header) if not h]
        if unnamed:
            raise DataError(
                f"column {unnamed[0] + 1} of '{path}' has no name in the header line; name every column."
            )
        for line_no, row in enumerate(rows, start=2):
            if len(row) > len(header):
                # pandas would silently turn the extra leading field into an index
                raise DataError(
                    f"line {line_no} of '{path}' has {len(row)} fields but the header has "
                    f"{len(header)}; fix that row or the header."
                )
    except csv.Error as exc:
        raise DataError(f"cannot parse '{path}' as CSV ({exc}); check the delimiter and quoting.") from exc
    try:
        df = pd.read_csv(io.StringIO(text), sep=sep, skipinitialspace=True, index_col=False)
    except (pd.errors.ParserError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"cannot parse '{path}' as CSV ({first}); check the delimiter and quoting.") from exc
    df.columns = [str(c).strip() for c in df.columns]
    if len(df) == 0:
        raise DataError(f"data file '{path}' has a header but no data rows; add at least 2 rows.")
    return read_table_from_frame(
        df, target, inputs, dropna=dropna, drop_constant=drop_constant, source=str(path)
    )


def _sniff_delimiter(text: str) -> str:
    sample = text[:_SNIFF_BYTES]
    lines = sample.splitlines()
    if len(sample) == _SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut in the middle
    sample = "\n".join(lines[:50])
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
    except csv.Error:
        # The sniffer gives up on one-column files and some ragged ones: pick the
        # candidate that occurs most often in the header, else a comma.
        head = lines[0] if lines else ""
        counts = {d: head.count(d) for d in _DELIMITERS}
        best = max(counts, key=lambda d: counts[d])
        return best if counts[best] > 0 else ","


def _check_duplicates(columns: Sequence[str], source: str) -> None:
    seen: set[str] = set()
    dups: list[str] = []
    for c in columns:
        if c in seen and c not in dups:
            dups.append(c)
        seen.add(c)
    if dups:
        raise DataError(
            f"{source} has duplicate column name(s) {', '.join(repr(d) for d in dups)}; "
            "rename them so each column is unique."
        )


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
    _check_duplicates(targets, "the target list")
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
        _check_duplicates(names, "the input list")
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


# --------------------------------------------------------------------------- embedded data


def list_embedded() -> list[str]:
    """Names of the datasets shipped inside the package (``kansym/data/*.csv``).

    Returns
    -------
    list of str
        Sorted names, e.g. ``['kepler']``.
    """
    root = resources.files("kansym").joinpath("data")
    return sorted(p.name[:-4] for p in root.iterdir() if p.name.endswith(".csv"))


def embedded_dataset(name: str) -> Path:
    """Path of a dataset shipped inside the package.

    Parameters
    ----------
    name : str
        Dataset name without extension, e.g. ``'kepler'``.

    Returns
    -------
    pathlib.Path
        The CSV file (the package must be installed as files, not zipped).

    Raises
    ------
    DataError
        If no dataset of that name ships with kansym (the message lists them).
    """
    names = list_embedded()
    if name not in names:
        raise DataError(
            f"no embedded dataset named '{name}'; available: {', '.join(names) or 'none'}."
        )
    return Path(str(resources.files("kansym").joinpath("data").joinpath(f"{name}.csv")))
