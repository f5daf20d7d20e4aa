"""One run at a time per output: an exclusive ``flock`` held for the whole run.

Two ``kansym fit -o same_dir`` started together used to write into one directory at
once, each replacing some of the other's files. :func:`output_lock` takes an exclusive,
non-blocking ``fcntl.flock`` on a lock file (``OUT_DIR/.kansym-lock`` for ``fit``,
``.NAME.lock`` beside ``NAME`` for ``train -o NAME``) before the run's first write and
holds it until its last; a second run refuses at once with one line naming the holder
(its PID and command, recorded in the lock file) and exit status 2, before it writes
anything. The kernel drops the lock of a process that dies (even by SIGKILL), so a lock
file left behind never blocks a later run; a finished run removes its lock file.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Iterator

from kansym.cli.common import CLIError

try:
    import fcntl
except ImportError:  # not POSIX (Windows): runs are not locked
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_NAME", "output_lock", "dir_lock_path", "file_lock_path"]

LOCK_NAME = ".kansym-lock"


def dir_lock_path(out_dir: Path) -> Path:
    """The lock file of an output directory (``kansym fit -o OUT_DIR``)."""
    return out_dir / LOCK_NAME


def file_lock_path(output: Path) -> Path:
    """The lock file of an output file, beside it (``kansym train -o model.pt``: ``.model.pt.lock``)."""
    return output.with_name(f".{output.name}.lock")


def _holder(fd: int) -> str:
    """``PID 123: kansym fit ...`` of the lock file's holder, or ``""`` if it wrote nothing yet."""
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
    except OSError:
        return ""
    pid, _, command = text.strip().partition("\n")
    return f"PID {pid}: {' '.join(command.split())}" if pid.isdigit() else ""


def _command() -> str:
    """This process's command line as typed (``kansym fit ...`` also under ``python -m kansym``)."""
    prog = os.path.basename(sys.argv[0]) if sys.argv else ""
    if prog in ("kansym", "__main__.py"):
        return shlex.join(["kansym", *sys.argv[1:]])
    return shlex.join(sys.argv)


def _acquire(lock: Path) -> tuple[int | None, str]:
    """``(descriptor, "")`` holding ``lock``'s exclusive flock, or ``(None, holder)`` if another process holds it."""
    for _ in range(100):  # the holder may unlink the file between our open and our flock: retry
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            for _ in range(50):  # the holder writes its PID and command right after taking the lock
                holder = _holder(fd)
                if holder:
                    break
                time.sleep(0.01)  # only the message waits for it; the refusal does not depend on it
            os.close(fd)
            return None, holder
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd, ""
        os.close(fd)  # we locked a file its previous holder has just removed
    raise CLIError(f"cannot lock {lock}: it keeps being replaced; is another kansym run starting and stopping there?")


@contextlib.contextmanager
def output_lock(lock: Path, target: Path, flag: str) -> Iterator[None]:
    """Hold ``lock`` exclusively while the block runs (the whole run that writes ``target``).

    Directories missing on the way to ``lock`` are created, and removed again when the
    block fails and leaves them empty (a failed run leaves no empty directory).

    Raises
    ------
    CLIError
        Another process holds the lock: ``error: TARGET is being written by another kansym
        run (PID 123: kansym fit ...); wait for it to finish or choose another FLAG`` (exit 2).
    """
    if fcntl is None:
        yield
        return
    created: list[Path] = []
    try:
        created = _make_dirs(lock.parent)
        fd, holder = _acquire(lock)
    except OSError as exc:
        _remove_empty(created)
        raise CLIError(f"cannot write {target}: {exc.strerror or exc} ({exc.filename or lock}); "
                       f"choose another {flag}") from exc
    except BaseException:
        _remove_empty(created)
        raise
    if fd is None:
        who = f" ({holder})" if holder else ""
        _remove_empty(created)
        raise CLIError(f"{target} is being written by another kansym run{who}; wait for it to finish or choose "
                       f"another {flag}")
    ok = False
    try:
        with contextlib.suppress(OSError):  # who holds it is for the message only (a full disk has no room)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n{_command()}\n".encode("utf-8", "replace"), 0)
        yield
        ok = True
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()  # before the unlock: a run that opens it later gets a fresh file
        os.close(fd)
        if not ok:
            _remove_empty(created)


def _make_dirs(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; those created, outermost first."""
    missing = []
    d = directory
    while not d.exists():
        missing.append(d)
        if d.parent == d:
            break
        d = d.parent
    created = []
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:  # another run made it at the same moment: not ours to remove
            continue
        created.append(d)
    return created


def _remove_empty(created: list[Path]) -> None:
    for d in reversed(created):
        with contextlib.suppress(OSError):
            d.rmdir()  # only if empty
