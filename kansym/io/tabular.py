"""Tables of numbers from CSV files, checked and ready for a KAN.

The first stage of the data flow (docs/algorithms.md, "Architecture")::

    data.csv --read_table--> Table(x (N, d_in), y (N, d_out), names, notices)

Every mistake a person can make with a CSV (a missing file, a typo in a column
name, a text column, a blank cell, a constant column) becomes a
:class:`~kansym.errors.DataError` with one actionable sentence; harmless
adjustments (a text column left out, a constant input dropped) are recorded as
human-readable ``notices`` on the returned :class:`Table` and logged.

This module reads the file (encoding, delimiter, header, ragged rows) and finds the
datasets shipped with kansym; the table rules and :class:`Table` itself are in
:mod:`kansym.io.table`. Both are re-exported here, with
:class:`~kansym.io.scaler.Scaler`, which holds the affine maps used to feed a KAN
(:func:`fit_scalers` gives the default pair for a table): ``kansym.io.tabular`` is
the one import path for tabular data.
"""

from __future__ import annotations

import csv
import io
from importlib import resources
from pathlib import Path
from typing import Sequence

import pandas as pd

from kansym.errors import DataError
from kansym.io.scaler import Scaler
from kansym.io.table import (
    LEAK_TOLERANCE, Leak, Table, _check_duplicates, columns_from_frame, fit_scalers, leak_record, proportional_inputs,
    read_table_from_frame,
)

__all__ = [
    "Scaler",
    "Table",
    "read_table",
    "read_table_from_frame",
    "read_frame",
    "check_data_path",
    "columns_from_frame",
    "fit_scalers",
    "Leak",
    "LEAK_TOLERANCE",
    "proportional_inputs",
    "leak_record",
    "embedded_dataset",
    "list_embedded",
]

_DELIMITERS = ",;\t"
_SNIFF_BYTES = 64 * 1024


# --------------------------------------------------------------------------- reading


def read_table(
    path: str | Path,
    target: str | Sequence[str],
    inputs: Sequence[str] | None = None,
    *,
    dropna: bool = False,
    drop_constant: bool = True,
    drop: Sequence[str] = (),
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
    drop : sequence of str
        Columns to leave out (with a notice): each must be in the file, and be
        neither a target nor one of ``inputs``.

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
    frame = read_frame(path)
    return read_table_from_frame(frame, target, inputs, dropna=dropna, drop_constant=drop_constant, drop=drop,
                                 source=str(path))


def check_data_path(path: str | Path) -> Path:
    """``path`` as a :class:`~pathlib.Path` if it names an existing file (commands call this
    before looking at their outputs, so that a mistyped input is the error they report).

    Raises
    ------
    DataError
        If nothing is at ``path``, or a directory is.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"data file '{path}' does not exist; check the path.")
    if path.is_dir():
        raise DataError(f"'{path}' is a directory; give the path of a CSV file.")
    return path


def read_frame(path: str | Path) -> pd.DataFrame:
    """Read a CSV (comma, semicolon or tab separated, UTF-8) into a DataFrame, column names stripped.

    Raises
    ------
    DataError
        If the file is missing, empty, not UTF-8, has duplicate or empty column names,
        a row with more fields than the header, or no data rows.
    """
    path = check_data_path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read data file '{path}': {exc.strerror}.") from exc
    try:
        text = raw.decode("utf-8-sig")
        del raw  # a wide table is hundreds of MB: one copy of it at a time
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
        rows = csv.reader(_lines(text), delimiter=sep)  # a StringIO would hold 4 bytes per character
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
        df = pd.read_csv(io.BytesIO(text.encode("utf-8")), sep=sep, skipinitialspace=True, index_col=False)
    except (pd.errors.ParserError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"cannot parse '{path}' as CSV ({first}); check the delimiter and quoting.") from exc
    df.columns = [str(c).strip() for c in df.columns]
    if len(df) == 0:
        raise DataError(f"data file '{path}' has a header but no data rows; add at least 2 rows.")
    return df


def _lines(text: str):
    """The lines of ``text``, each with its ``\\n``, one at a time (no list of them all)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


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
