"""Builds of the layer's native code with :func:`torch.utils.cpp_extension.load` (ninja, ``$CXX`` or ``c++``).

Two extensions, from the C++ sources shipped in ``kansym/nn/fast/csrc/``:

- ``kansym_kernels_<key>``: ``kan_kernels.cpp`` alone (no torch headers, about 2 s), the C
  ABI of ``kan_kernels.h`` that :mod:`kansym.nn.fast.native` calls through :mod:`ctypes`;
  built synchronously on first use, so even the first run has them.
- ``kansym_op_<key>``: ``kan_op.cpp`` (torch's headers, 10-20 s), the layer as one torch
  operator, linked against the kernels library above (the same machine code, so the same
  numbers bit for bit); built by a detached, ``nice``-d Python process (:func:`main`)
  while the ctypes path serves.

``<key>`` hashes the sources, the flags, torch's version, the compiler, the machine and the
host, so a changed source or another ``$CXX`` is another build and a finished build is never
stale: a library found in its folder is loaded without calling ``cpp_extension`` again.
Each extension builds in its own folder under the first trusted cache folder
(``$XDG_CACHE_HOME/kansym``, default ``~/.cache/kansym``, then a per-user temporary folder):
trusted means absent (then created private) or this user's and writable by no one else, so
no one can plant a library there. One build per folder at a time: ``flock`` on
``build.lock`` there (released by the kernel when its holder dies, so a killed build blocks
no one; the baton ``lock`` of ``cpp_extension`` it may leave behind is cleaned up by the
next build). A failed build writes ``failed`` (its last compiler lines) next to it; the
operator's is not retried for a day (:data:`RETRY_AFTER_S`) unless deleted. Of each
extension's other builds the newest two stay (two checkouts side by side do not evict
each other's).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

try:
    import fcntl  # POSIX: the build lock
except ImportError:  # Windows: cpp_extension's own baton is the only lock
    fcntl = None

__all__ = ["BuildError", "Extension", "kernels_extension", "op_extension", "cache_dirs", "find", "failure",
           "build", "start_background"]

CSRC = Path(__file__).resolve().parent / "csrc"
KERNEL_FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math")  # no fast-math: NaN stays NaN
OP_FLAGS = ("-O1", "-w", "-fvisibility=hidden")  # torch's headers: -O1 keeps the build near 20 s
RETRY_AFTER_S = 24 * 3600.0  # a failed operator build is tried again after a day
KEEP_BUILDS = 3  # builds of one extension kept in a cache folder, the current one included


class BuildError(RuntimeError):
    """A native build failed or cannot run (no compiler, no ninja, no usable cache folder)."""


@dataclass(frozen=True)
class Extension:
    """One native library: what :func:`torch.utils.cpp_extension.load` gets, named by its key.

    Attributes
    ----------
    kind : {"kernels", "op"}
    name : str
        ``kansym_<kind>_<key>``: the library's file stem, its folder's name and, for the
        operator, its torch namespace (``TORCH_EXTENSION_NAME``).
    sources : tuple of Path
    cflags, ldflags : tuple of str
        Besides cpp_extension's own (torch's include paths, ``-fPIC -std=c++20``).
    """

    kind: str
    name: str
    sources: tuple[Path, ...]
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...] = ()

    def library(self, folder: Path) -> Path:
        """The built library in the cache folder ``folder``."""
        return folder / self.name / f"{self.name}.so"


def _compiler() -> str:
    return os.environ.get("CXX", "c++")  # what cpp_extension compiles with


def _extension(kind: str, sources: tuple[Path, ...], cflags: tuple[str, ...], ldflags: tuple[str, ...] = (),
               extra: tuple[str, ...] = ()) -> Extension:
    facts = [kind, *cflags, *ldflags, *extra, torch.__version__, _compiler(), platform.machine(), socket.gethostname()]
    digest = hashlib.sha256("\0".join(facts).encode())
    for src in sorted({*sources, CSRC / "kan_kernels.h"}):
        digest.update(src.read_bytes())
    return Extension(kind, f"kansym_{kind}_{digest.hexdigest()[:16]}", sources, cflags, ldflags)


def kernels_extension() -> Extension:
    """The C kernels' library (``kan_kernels.cpp``)."""
    return _extension("kernels", (CSRC / "kan_kernels.cpp",), KERNEL_FLAGS)


def op_extension(kernels_library: Path) -> Extension:
    """The operator's library (``kan_op.cpp``), linked against the loaded kernels library."""
    return _extension("op", (CSRC / "kan_op.cpp",), OP_FLAGS, (str(kernels_library),), (kernels_library.parent.name,))


def _trusted(folder: Path) -> bool:
    """Whether code built in ``folder`` may be loaded: it does not exist yet (it is created
    private), or it is a folder of this user that no one else can write (a shared temporary
    folder someone else created could hold a planted library)."""
    if not hasattr(os, "getuid"):
        return True
    try:
        st = folder.stat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def cache_dirs() -> list[Path]:
    """Where builds may live: the user cache, then a per-user temporary folder (trusted ones only)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return [f for f in (Path(base) / "kansym", Path(tempfile.gettempdir()) / f"kansym-{uid}") if _trusted(f)]


def _held(here: Path) -> bool:
    """Whether a process holds the build lock of the build folder ``here`` (is building there now)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(here / "build.lock", os.O_RDWR)
    except OSError:  # no lock file: no build ever ran here
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


@contextlib.contextmanager
def _exclusive(here: Path, timeout_s: float):
    """Hold the build lock of ``here`` (``flock`` on ``build.lock``: the kernel releases it when its holder dies)."""
    if fcntl is None:
        yield
        return
    fd = os.open(here / "build.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        end = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > end:
                    raise BuildError(f"another process has been building in {here} for {timeout_s:.0f} s") from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)


def find(ext: Extension) -> tuple[str, Path | None]:
    """Where ``ext`` stands: ``("ready", library)``, ``("building", folder)``, ``("failed", note)`` or ``("absent", None)``.

    Looks in every trusted cache folder. A library counts once its build completed: no
    build holds the folder's lock and cpp_extension's baton (``lock``, removed when its
    build ends, left by a killed one) is gone.
    """
    for folder in cache_dirs():
        here = folder / ext.name
        if not here.is_dir():
            continue
        if _held(here):
            return "building", here
        if ext.library(folder).exists() and not (here / "lock").exists():
            return "ready", ext.library(folder)
        if (here / "failed").exists():
            return "failed", here / "failed"
    return "absent", None


def failure(note: Path, retry_after_s: float) -> str | None:
    """The failure recorded in ``note`` (one line), or None when it is older than ``retry_after_s``."""
    try:
        if time.time() - note.stat().st_mtime >= retry_after_s:
            return None
        return note.read_text(errors="replace").strip().replace("\n", " | ")
    except OSError:
        return None


@contextlib.contextmanager
def _ninja_on_path():
    """``ninja`` for cpp_extension (which runs it by name): the ``ninja`` package's when none is on ``PATH``."""
    if shutil.which("ninja") is not None:
        yield
        return
    try:
        import ninja  # the PyPI package: its binary sits next to an un-activated virtual environment's python
    except ImportError:
        raise BuildError("ninja is not installed (pip install ninja)") from None
    before = os.environ.get("PATH", "")
    os.environ["PATH"] = before + os.pathsep + ninja.BIN_DIR
    try:
        yield
    finally:
        os.environ["PATH"] = before


def _last_lines(text: str, count: int = 5) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-count:])


def _folder_for(ext: Extension) -> tuple[Path, Path]:
    """The first cache folder where ``ext``'s build folder exists or can be made (private): ``(folder, build folder)``."""
    for folder in cache_dirs():
        here = folder / ext.name
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            here.mkdir(mode=0o700, exist_ok=True)
        except OSError:  # read-only, or a file: try the next folder
            continue
        if _trusted(here):
            return folder, here
    raise BuildError("no writable cache folder (set XDG_CACHE_HOME to a folder of yours)")


def build(ext: Extension, *, timeout_s: float = 600.0) -> Path:
    """Build ``ext`` with :func:`torch.utils.cpp_extension.load` (or wait for another process's build) and return its library.

    Raises
    ------
    BuildError
        The compiler or ninja failed or is missing (``failed`` is written in the build's
        folder), no cache folder can be written, or another process held the folder's lock
        for ``timeout_s``.
    """
    folder, here = _folder_for(ext)
    lib = ext.library(folder)
    with _exclusive(here, timeout_s):
        if (here / "lock").exists():  # cpp_extension's baton of a build that was killed: start clean
            for item in here.iterdir():
                if item.name != "build.lock":
                    shutil.rmtree(item) if item.is_dir() else item.unlink(missing_ok=True)
        if lib.exists():
            return lib  # built by the process we waited for
        from torch.utils import cpp_extension  # imports setuptools: only when something is to be built

        try:
            with _ninja_on_path():
                cpp_extension.load(ext.name, [str(s) for s in ext.sources], extra_cflags=list(ext.cflags),
                                   extra_ldflags=list(ext.ldflags), build_directory=str(here),
                                   is_python_module=False, verbose=False)
        except Exception as exc:  # noqa: BLE001 - any failure of the toolchain (RuntimeError, CalledProcessError, OSError)
            lib.unlink(missing_ok=True)
            note = f"{_compiler()} could not build {ext.name} ({type(exc).__name__})\n{_last_lines(str(exc))}"
            with contextlib.suppress(OSError):
                (here / "failed").write_text(note + "\n")
            raise BuildError(note.replace("\n", " | ")) from None
        (here / "failed").unlink(missing_ok=True)
    _prune(folder, ext)
    return lib


def _prune(folder: Path, ext: Extension) -> None:
    """Of the other builds of ``ext.kind`` in ``folder`` keep the newest ones, remove the rest (unless building)."""
    others = [p for p in folder.glob(f"kansym_{ext.kind}_*") if p.name != ext.name and p.is_dir()]
    others.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0.0, reverse=True)
    for old in others[KEEP_BUILDS - 1:]:
        if not _held(old):
            shutil.rmtree(old, ignore_errors=True)  # a library loaded from there stays mapped


_CHILD = "import sys; from kansym.nn.fast.build import main; sys.exit(main(sys.argv[1:]))"


def start_background(kernels_library: Path, ext: Extension) -> subprocess.Popen:
    """Start the operator's build in a detached, ``nice``-d Python process (output discarded, failures noted)."""
    package_root = str(Path(__file__).resolve().parents[3])  # the folder holding kansym, for the child's import
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    cmd = [sys.executable, "-c", _CHILD, str(kernels_library), ext.name]
    if shutil.which("nice"):
        cmd = ["nice", "-n", "10", *cmd]
    return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def main(argv: list[str]) -> int:
    """The background build of :func:`start_background`: ``argv = [KERNELS_LIBRARY, OP_NAME]``; 0 when built."""
    kernels_library, name = Path(argv[0]), argv[1]
    ext = op_extension(kernels_library)
    if ext.name != name:  # the parent saw other sources or another environment: build nothing
        return 2
    try:
        build(ext)
    except BuildError:
        return 1  # noted in the build folder
    return 0
