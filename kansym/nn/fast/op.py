"""The KAN layer as one C++ torch operator, built in the background on first use.

A Python ``torch.autograd.Function`` costs about 60-100 us per forward+backward on
these machines (the context object, the saved-tensor bookkeeping, the engine calling
back into Python), and each :mod:`ctypes` call a few more: for a 1024 x 16 layer that is
a third of its step. The operator ``kan_linear`` (:mod:`kansym.nn.fast.op_source`) does
the work of :class:`kansym.nn.fast.linear._KANLinearNative` (same C kernels, same
matmuls, the same values bit for bit) as a C++ ``torch::autograd::Function``: one
dispatcher call per forward, no Python in the backward.

It needs the C++ compiler (``$CXX``, else ``c++``/``g++``) and torch's headers, and takes
about 20 s to compile (torch's headers). So the first layer call that wants it starts
the build as a detached, ``nice``-d process and goes on with the ctypes path; later calls
check for the finished library at most twice a second and switch to it once loaded.
Builds land next to the C kernels (:func:`kansym.nn.fast.native._cache_dirs`), keyed by
the sources, torch's version, the machine and the host, written atomically; a failed
build leaves ``op_<key>.failed`` (the failing step, its exit status and the compiler's
last lines; :func:`status` names it) and is not retried for a day unless it is deleted;
another compiler (``$CC``/``$CXX``) is another build. ``KANSYM_OP=0`` (or :func:`enable`)
keeps the ctypes path; ``KANSYM_NATIVE=0`` turns both off.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import torch

from kansym.nn.fast import native
from kansym.nn.fast.native_source import _SOURCE
from kansym.nn.fast.op_source import _CXX_SOURCE

__all__ = ["get", "wait", "enable", "status"]

_RETRY_AFTER_S = 24 * 3600  # a failed build is tried again after a day
_POLL_S = 0.5
_lock = threading.Lock()
_OP = None  # the loaded operator (an OpOverload) while enabled: the one thing the hot path reads
_state: dict = {
    "enabled": os.environ.get("KANSYM_OP", "1") != "0",
    "loaded": None,  # the operator once loaded (kept while disabled)
    "proc": None,  # the build process this process started
    "waiting": False,  # for another process's build
    "error": None,
    "next_poll": 0.0,
}


def _torch_dirs() -> tuple[Path, Path, Path]:
    root = Path(torch.__file__).resolve().parent
    return root / "include", root / "include" / "torch" / "csrc" / "api" / "include", root / "lib"


def _compilers() -> tuple[str | None, str | None]:
    cc = os.environ.get("CC", "cc")
    cxx = os.environ.get("CXX") or next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)
    return (cc if shutil.which(cc) else None), (cxx if cxx and shutil.which(cxx) else None)


def _key() -> str:
    """The build's identity: sources, torch, compilers (another ``$CXX`` is another build), machine and host."""
    facts = (_SOURCE, _CXX_SOURCE, torch.__version__, str(_torch_dirs()[0]), *map(str, _compilers()),
             platform.machine(), socket.gethostname())
    return hashlib.sha256("\0".join(facts).encode()).hexdigest()[:16]


def _script(cc: str, cxx: str, ns: str, lib: Path, failed: Path, lock: Path) -> str:
    """The build as one shell script run in its own folder: compile, link, move into place, clean up (and unlock)."""
    inc, api, libdir = _torch_dirs()
    abi = int(torch.compiled_with_cxx11_abi())
    c_flags = "-O3 -march=native -fno-math-errno -fno-trapping-math -fPIC -fvisibility=hidden"
    cxx_flags = (f"-O1 -std=c++20 -w -fPIC -fvisibility=hidden -D_GLIBCXX_USE_CXX11_ABI={abi} -DKS_NS={ns} "
                 f"-I{shlex.quote(str(inc))} -I{shlex.quote(str(api))}")
    link = f"-shared -L{shlex.quote(str(libdir))} -ltorch -ltorch_cpu -lc10 -lm"
    q = shlex.quote
    return (
        f'lock={q(str(lock))}; here="$PWD"; trap \'cd / && rm -rf "$here" "$lock"\' EXIT\n'
        # the failure note: which step, its exit status, then the compiler's last lines
        f'fail() {{ st=$?; {{ echo "$step exited with status $st"; tail -n 5 log; }} > failed; '
        f"mv failed {q(str(failed))}; exit 1; }}\n"
        f": > log\n"
        f'step={q(cc + " (the C kernels)")}; {q(cc)} {c_flags} -c kernels.c -o kernels.o >> log 2>&1 || fail\n'
        f'step={q(cxx + " (the operator)")}; {q(cxx)} {cxx_flags} -c op.cpp -o op.o >> log 2>&1 || fail\n'
        f'step={q(cxx + " (linking)")}; {q(cxx)} op.o kernels.o {link} -o op.so >> log 2>&1 || fail\n'
        f"mv op.so {q(str(lib))}\n"
    )


def _paths(folder: Path, key: str) -> tuple[Path, Path]:
    return folder / f"op_{key}.so", folder / f"op_{key}.failed"


def _load(lib: Path, ns: str):
    torch.ops.load_library(str(lib))
    return getattr(torch.ops, ns).kan_linear.default


_STALE_LOCK_S = 600  # a build lock older than this was left by a build that died


def _fresh_lock(lock: Path) -> bool:
    try:
        return time.time() - lock.stat().st_mtime < _STALE_LOCK_S
    except OSError:  # no lock (or it just went)
        return False


def _start(folder: Path, key: str, cc: str, cxx: str) -> subprocess.Popen | None:
    """Launch the build in ``folder``; None when another process is building it (raises OSError when the folder is unusable).

    ``op_<key>.building`` (created exclusively, removed by the build script) keeps
    concurrent processes, e.g. a test suite's subprocesses, from each compiling.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir(mode=0o700, exist_ok=True)
    lock = folder / f"op_{key}.building"
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        if _fresh_lock(lock):
            return None
        lock.unlink(missing_ok=True)  # stale: take it over
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    for old in folder.glob(".op-build-*"):  # builds killed midway (a crash, a reboot)
        try:
            if time.time() - old.stat().st_mtime > 3600:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    try:
        tmp = Path(tempfile.mkdtemp(prefix=".op-build-", dir=folder))
        (tmp / "kernels.c").write_text(_SOURCE)
        (tmp / "op.cpp").write_text(_CXX_SOURCE)
        lib, failed = _paths(folder, key)
        cmd = ["sh", "-c", _script(cc, cxx, f"kansym_{key}", lib, failed, lock)]
        if shutil.which("nice"):
            cmd = ["nice", "-n", "10", *cmd]
        return subprocess.Popen(cmd, cwd=tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        lock.unlink(missing_ok=True)
        raise


def _prune(lib: Path) -> None:
    """Of the other operator builds in ``lib``'s folder keep the newest two (as the C kernels' builds)."""
    others = [p for p in lib.parent.glob("op_*.so") if p != lib]
    others.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0.0, reverse=True)
    for old in others[native._KEEP_BUILDS - 1:]:
        old.unlink(missing_ok=True)


def _advance() -> None:
    """One step of the state machine: load a finished build, notice a failed one, or start one."""
    global _OP
    if _state["loaded"] is not None:
        _OP = _state["loaded"]
        return
    if _state["error"] is not None or not native._state["enabled"]:  # failed, or KANSYM_NATIVE=0 / enable(False)
        return
    if not native.available():  # enabled but not built (no C compiler): nothing to link the operator with
        _state["error"] = f"the native C kernels are unavailable ({native._state['error']})"
        return
    key = _key()
    ns = f"kansym_{key}"
    for folder in native._cache_dirs():
        lib, failed = _paths(folder, key)
        if lib.exists():
            try:
                _state["loaded"] = _OP = _load(lib, ns)
                _prune(lib)
            except (OSError, RuntimeError) as exc:
                _state["error"] = f"loading {lib.name}: {exc}"
            return
        if failed.exists() and time.time() - failed.stat().st_mtime < _RETRY_AFTER_S:
            note = failed.read_text(errors="replace").strip().replace("\n", " | ")
            _state["error"] = f"the build failed ({failed}; delete it to retry before a day has passed): {note}"
            return
    proc = _state["proc"]
    if proc is not None:
        if proc.poll() is not None:  # finished, and neither its library nor its failure note is there
            _state["error"] = f"the build exited with {proc.returncode} and left no library"
        return
    if _state["waiting"]:  # another process's build: wait for its library (or its lock to go stale)
        if any(_fresh_lock(f / f"op_{key}.building") for f in native._cache_dirs()):
            return
        _state["waiting"] = False
    cc, cxx = _compilers()
    if cc is None or cxx is None or not _torch_dirs()[0].is_dir():
        _state["error"] = "needs a C and a C++ compiler and torch's C++ headers"
        return
    for folder in native._cache_dirs():
        try:
            _state["proc"] = _start(folder, key, cc, cxx)
            _state["waiting"] = _state["proc"] is None
            return
        except OSError:
            continue
    _state["error"] = "no writable cache folder"


def get():
    """The ``kan_linear`` operator when it is built and enabled, else None (starting or checking on the build).

    Cheap enough for every layer call: after the first call it reads a module global,
    or a clock while the build runs.
    """
    if _OP is not None or not _state["enabled"]:
        return _OP
    now = time.monotonic()
    if now < _state["next_poll"]:
        return None
    _state["next_poll"] = now + _POLL_S
    with _lock:
        _advance()
    return _OP


def wait(timeout: float = 300.0) -> bool:
    """Block until the operator is loaded (starting its build if needed); False on failure or timeout.

    For benchmarks and tests, which should not time or test the ctypes path by accident.
    """
    if not _state["enabled"] or not native._state["enabled"]:
        return False
    end = time.monotonic() + timeout
    while True:
        with _lock:
            _advance()
        if _OP is not None or not _state["enabled"] or _state["error"] is not None:
            return _OP is not None
        proc = _state["proc"]
        if time.monotonic() > end:
            return False
        if proc is not None:
            try:
                proc.wait(timeout=min(1.0, max(0.0, end - time.monotonic())))
            except subprocess.TimeoutExpired:
                pass
        else:
            time.sleep(0.05)


def enable(on: bool = True) -> None:
    """Use the operator when built (the default) or keep the ctypes path (``KANSYM_OP=0``)."""
    global _OP
    _state["enabled"] = bool(on)
    _OP = _state["loaded"] if on else None
    _state["next_poll"] = 0.0


def status() -> str:
    """One line: loaded, building, disabled, or why it is unavailable."""
    if not _state["enabled"] or not native._state["enabled"]:  # KANSYM_OP=0, or KANSYM_NATIVE=0 (both off)
        return "disabled"
    if _state["loaded"] is not None:
        return "loaded"
    if _state["error"] is not None:
        return f"unavailable: {_state['error']}"
    if _state["proc"] is not None or _state["waiting"]:
        return "building"
    return "not started"
