"""Atomic file writes: a temp file in the same directory, fsync, then ``os.replace``.

A reader (or a crash, or SIGKILL mid-write) sees either the old file or the complete
new one, never a torn file; the temp file is removed when the write fails.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import BinaryIO, Callable

from kansym.errors import DataError, KansymError

__all__ = ["atomic_write", "atomic_write_text"]


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(
    path: str | os.PathLike[str],
    write: Callable[[BinaryIO], object],
    *,
    error: type[KansymError] = DataError,
    what: str = "file",
) -> Path:
    """Write ``path`` atomically through ``write(fileobj)``.

    Parameters
    ----------
    path : str or PathLike
        Destination; parent directories are created.
    write : callable
        Receives a binary file object open for writing.
    error : KansymError subclass
        Raised (with one sentence) when the file cannot be written.
    what : str
        Word for the file in the error message ("checkpoint", "graph", ...).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    KansymError
        Of type ``error`` for an OS error; the previous file is left intact.
    """
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise error(
            f"cannot write {what} '{path}': {exc.strerror or exc}; check the directory exists, "
            "is writable and has free space."
        ) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def atomic_write_text(path: str | os.PathLike[str], text: str, *, what: str = "file") -> Path:
    """UTF-8 text version of :func:`atomic_write`."""
    return atomic_write(path, lambda fh: fh.write(text.encode("utf-8")), what=what)
