"""Which fast path the KAN layer runs on: one object, chosen once (:func:`backend`, :func:`use_backend`).

Paths, for CPU float32/float64 inputs (other devices and dtypes always take ``"torch"``):

- ``"op"``: the layer as one C++ torch operator (``csrc/kan_op.cpp``): one dispatcher
  call per forward, no Python in the backward;
- ``"native"``: the C kernels (``csrc/kan_kernels.cpp``) through :mod:`ctypes` inside a
  Python ``torch.autograd.Function`` (:mod:`kansym.nn.fast.native`);
- ``"torch"``: the tensor kernels of :mod:`kansym.nn.fast.kernels`.

``"op"`` and ``"native"`` run the same machine code and give the same numbers bit for bit;
``"torch"`` gives the same values to rounding per call, but LBFGS amplifies rounding, so a
whole training run can end elsewhere. Requests:

- ``"auto"`` (the default): the operator once it is built; until then the C kernels (the
  first layer call builds them, about 2 s once per machine, and starts the operator's
  background build, about 20 s); the tensor kernels where nothing can be compiled;
- ``"op"``: as ``"auto"``, but :func:`use_backend` waits for the operator's build;
- ``"native"``: the C kernels, never the operator;
- ``"torch"``: no native code at all (nothing is built).

The default is read once, at import, from the environment: ``KANSYM_NATIVE=0`` asks for
``"torch"``, else ``KANSYM_OP=0`` for ``"native"``, else ``"auto"``. Builds:
:mod:`kansym.nn.fast.build`. The state below is the one record the layer's hot path reads
(:func:`native_kernels`, :func:`operator`).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import warnings
from dataclasses import dataclass

import torch

from kansym.errors import ConfigError
from kansym.nn.fast import build
from kansym.nn.fast.native import NativeKernels

__all__ = ["Backend", "backend", "use_backend", "native_kernels", "operator", "REQUESTS"]

REQUESTS = ("auto", "op", "native", "torch")
_WITH_OP = ("auto", "op")
_POLL_S = 0.5  # how often a layer call looks for the finished operator build


@dataclass(frozen=True)
class Backend:
    """The KAN layer's fast path as :func:`backend` reports it.

    Attributes
    ----------
    requested : {"auto", "op", "native", "torch"}
        What was asked for (``source`` says by whom).
    path : {"op", "native", "torch"}
        What a layer call on a CPU float32/float64 input runs on now.
    reason : str
        One sentence: why ``path``.
    source : str
        ``"default"``, ``"KANSYM_NATIVE=0"``, ``"KANSYM_OP=0"`` or ``"use_backend"``.
    kernels : str
        The C kernels: ``"loaded"``, ``"off"`` or ``"unavailable: <why>"``.
    operator : str
        The C++ operator: ``"loaded"``, ``"building"``, ``"not started"``, ``"off"`` or
        ``"unavailable: <why>"``.
    """

    requested: str
    path: str
    reason: str
    source: str
    kernels: str
    operator: str


class _State:
    """What is asked, what is loaded (kept while switched off) and the hot path's two answers."""

    def __init__(self, requested: str, source: str) -> None:
        self.requested, self.source = requested, source
        self.lock = threading.RLock()
        self.kernels_tried = False
        self.kernels_loaded: NativeKernels | None = None
        self.kernels_error: str | None = None
        self.op_loaded = None  # the kan_linear OpOverload
        self.op_error: str | None = None
        self.op_proc: subprocess.Popen | None = None
        self.op_next_poll = 0.0
        self.kernels: NativeKernels | None = None  # the hot path's: loaded and allowed, else None
        self.op = None  # likewise

    def refresh(self) -> None:
        """Recompute the hot path's answers after a request or a load."""
        self.kernels = self.kernels_loaded if self.requested != "torch" else None
        self.op = self.op_loaded if self.requested in _WITH_OP and self.kernels is not None else None
        self.op_next_poll = 0.0


def _from_environment() -> _State:
    if os.environ.get("KANSYM_NATIVE", "1") == "0":
        return _State("torch", "KANSYM_NATIVE=0")
    if os.environ.get("KANSYM_OP", "1") == "0":
        return _State("native", "KANSYM_OP=0")
    return _State("auto", "default")


_state = _from_environment()


def native_kernels() -> NativeKernels | None:
    """The C kernels when the backend allows them, else None; the first call builds or loads them.

    Cheap enough for every layer call: after the first, one attribute read. A failed build
    warns once and leaves the tensor kernels in use for this process.
    """
    kernels = _state.kernels
    if kernels is None and not _state.kernels_tried and _state.requested != "torch":
        kernels = _load_kernels()
    return kernels


def _load_kernels() -> NativeKernels | None:
    with _state.lock:
        if not _state.kernels_tried:
            try:
                ext = build.kernels_extension()
                status, path = build.find(ext)
                _state.kernels_loaded = NativeKernels(path if status == "ready" else build.build(ext))
            except (build.BuildError, OSError, AttributeError) as exc:  # AttributeError: a kernel missing in the library
                _state.kernels_error = str(exc)
                warnings.warn(  # the library's user should know (numbers differ in the last bits): shown once
                    f"kansym: native spline kernels unavailable ({exc}); using torch kernels", stacklevel=4)
            _state.kernels_tried = True
            _state.refresh()
    return _state.kernels


def operator():
    """The ``kan_linear`` operator when the backend uses it now, else None.

    While the operator is wanted but not loaded, looks for its finished build (starting
    the build if none runs) at most twice a second; otherwise one attribute read.
    """
    kan_op = _state.op
    if kan_op is not None or _state.requested not in _WITH_OP:
        return kan_op
    now = time.monotonic()
    if now < _state.op_next_poll:
        return None
    _state.op_next_poll = now + _POLL_S
    with _state.lock:
        _advance_op()
    return _state.op


def _advance_op() -> None:
    """One step of the operator's life: load a finished build, notice a failed one, or start one (lock held)."""
    s = _state
    if s.op_loaded is not None or s.op_error is not None:
        return
    kernels = native_kernels()
    if kernels is None:  # nothing to link the operator with
        if s.requested != "torch":
            s.op_error = f"the native C kernels are unavailable ({s.kernels_error})"
        return
    ext = build.op_extension(kernels.path)
    status, where = build.find(ext)
    if status == "ready":
        try:
            torch.ops.load_library(str(where))
            s.op_loaded = getattr(torch.ops, ext.name).kan_linear.default
        except (OSError, RuntimeError, AttributeError) as exc:
            s.op_error = f"loading {where}: {exc}"
        s.refresh()
        return
    if status == "failed":
        note = build.failure(where, build.RETRY_AFTER_S)
        if note is not None:
            s.op_error = f"the build failed ({where}; delete it to retry before a day has passed): {note}"
            return
    if status == "building":  # ours, or another process's (its lock goes when it ends or dies)
        return
    if s.op_proc is not None:
        if s.op_proc.poll() is not None:  # ended, and left neither a library nor a failure note
            s.op_error = f"the build exited with status {s.op_proc.returncode} and left no library"
        return  # else still starting up
    try:
        s.op_proc = build.start_background(kernels.path, ext)
    except OSError as exc:
        s.op_error = f"the build could not start: {exc}"


def _wait_for_op(timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while True:
        with _state.lock:
            _advance_op()
        if _state.op_loaded is not None or _state.op_error is not None or time.monotonic() > end:
            return
        proc = _state.op_proc
        if proc is not None and proc.poll() is None:
            try:
                proc.wait(timeout=min(1.0, max(0.0, end - time.monotonic())))
            except subprocess.TimeoutExpired:
                pass
        else:
            time.sleep(0.2)


def use_backend(name: str = "auto", *, timeout: float = 600.0) -> Backend:
    """Pick the KAN layer's fast path for this process (see :mod:`kansym.nn.fast.backends`).

    Parameters
    ----------
    name : {"auto", "op", "native", "torch"}
        ``"native"`` and ``"op"`` build what they need now (the C kernels; ``"op"`` also
        waits for the operator's build, up to ``timeout`` seconds).
    timeout : float
        Seconds ``"op"`` waits for the operator's build.

    Returns
    -------
    Backend
        :func:`backend` after the switch. A path that is unavailable falls back to the next
        one (op -> native -> torch) with a warning naming the reason.

    Raises
    ------
    ConfigError
        If ``name`` is not one of the four.
    """
    if name not in REQUESTS:
        raise ConfigError(f"unknown backend {name!r}: choose one of {', '.join(map(repr, REQUESTS))}")
    with _state.lock:
        _state.requested, _state.source = name, "use_backend"
        _state.refresh()
    if name in ("op", "native"):
        native_kernels()
    if name == "op":
        _wait_for_op(timeout)
    chosen = backend()
    if name != "auto" and chosen.path != name:
        warnings.warn(f"kansym: backend {name!r} is unavailable ({chosen.reason}); using {chosen.path!r}",
                      stacklevel=2)
    return chosen


def backend() -> Backend:
    """What a KAN layer call on a CPU float32/float64 input runs on now, and why.

    Does first what that call would do: build or load the C kernels, look for (or start)
    the operator's build; it does not wait for the operator.
    """
    s = _state
    kernels = native_kernels()
    if kernels is not None and s.requested in _WITH_OP:
        with s.lock:
            _advance_op()
            s.refresh()
    with s.lock:
        requested = s.requested
        k_status = ("off" if requested == "torch" else "loaded" if s.kernels_loaded is not None
                    else f"unavailable: {s.kernels_error}" if s.kernels_tried else "not built")
        if requested not in _WITH_OP:
            o_status = "off"
        elif s.op_loaded is not None:
            o_status = "loaded"
        elif s.op_error is not None:
            o_status = f"unavailable: {s.op_error}"
        elif kernels is None:
            o_status = f"unavailable: the native C kernels are unavailable ({s.kernels_error})"
        else:
            building = s.op_proc is not None or build.find(build.op_extension(kernels.path))[0] == "building"
            o_status = "building" if building else "not started"
        if s.kernels is None:
            path = "torch"
            reason = (f"asked for ({s.source})" if requested == "torch"
                      else f"the native C kernels are unavailable ({s.kernels_error})")
        elif requested == "native":
            path, reason = "native", f"asked for ({s.source})"
        elif s.op is not None:
            path, reason = "op", "the C++ operator is built and loaded"
        elif s.op_error is not None:
            path, reason = "native", f"the C++ operator is unavailable ({s.op_error})"
        else:
            path, reason = "native", "the C++ operator is building in the background; the C kernels serve meanwhile"
        return Backend(requested, path, reason, s.source, k_status, o_status)
