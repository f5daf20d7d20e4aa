"""Native CPU kernels of the KAN layer: only the ``k + 1`` B-splines that can be nonzero.

Every input value has at most ``k + 1`` nonzero B-splines of order ``k``. On a uniform
cubic grid they are fixed polynomials of the position ``t`` of the input inside its knot
interval ``m = floor(s)``, ``s = (x - t_0) / h`` (de Boor 1978, ch. IX; Unser 1999, IEEE
Signal Processing Magazine 16(6), eq. 8)::

    6 B_{m-3} = (1 - t)^3,  6 B_{m-2} = 3t^3 - 6t^2 + 4,
    6 B_{m-1} = -3t^3 + 3t^2 + 3t + 1,  6 B_m = t^3.

On other grids (after ``update_grid``), of any order up to 7, they are the per-interval
polynomials of :func:`kansym.nn.fast.plan.make_plan`, evaluated by Horner's rule after a
count of the knots below the input (one feature at a time, the count vectorised across a
block of samples; for cubics the four polynomials of a sample form one 4-lane vector).
Layers of 8 inputs or more write each row of a uniform cubic grid from the symmetric
two-term form ``-6 B_i = 4 (1 - a)_+^3 - (2 - a)_+^3``, ``a = |s - i - 2|`` (Schoenberg
1946; Unser 1999, eq. 7), vectorised over the inputs; narrower ones compute the four
polynomials once per input across rows and store them. The backward computes the
derivatives times the matching entries of ``dL/dF``, so ``dF/dx`` is never stored. The
forward kernels also write ``sigmoid(x)`` (for ``silu`` and ``silu'``) with their own
vectorised exp (Cody and Waite 1980 reduction and a Taylor polynomial; within 2 ulp).
The weight assembly ``W = [w_b mask | c w_s mask scale]`` and the parameter gradients
through it are one pass each, and so are a small layer's edge values with their per-edge
L1 (loops over samples).
:func:`kansym.nn.fast.bound.bind` binds a plan's kernels and grid pointers once (the
layer's lean path).

The C source below is compiled on first use with the system C compiler (``cc``, or
``$CC``; ``-O3 -march=native -fno-math-errno -fno-trapping-math``, no fast-math, so NaN
inputs give NaN) into ``$XDG_CACHE_HOME/kansym`` (default ``~/.cache/kansym``; a per-user
temporary folder when that is read-only), written atomically and reused by later
processes; it is loaded with :mod:`ctypes` and called on the tensors' memory (contiguous
CPU float32/float64 tensors; row blocks on ``torch.get_num_threads()`` threads, since
ctypes releases the GIL). Without a compiler, or with ``KANSYM_NATIVE=0`` in the
environment, :func:`available` is False and the tensor kernels of
:mod:`kansym.nn.fast.kernels` are used: same values to rounding (both tested against the
reference Cox–de Boor recursion, ``tests/nn/test_native_kernels.py``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import socket
import stat
import subprocess
import tempfile
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

__all__ = ["available", "enable", "usable", "cubic_features", "cubic_input_grad", "weight", "param_grads"]

from kansym.nn.fast.native_source import _SOURCE  # the C kernels

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_state = {"tried": False, "enabled": os.environ.get("KANSYM_NATIVE", "1") != "0", "error": None}


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


def _cache_dirs() -> list[Path]:
    """Where the built libraries may live: the user cache, then a per-user temporary folder (trusted ones only)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return [f for f in (Path(base) / "kansym", Path(tempfile.gettempdir()) / f"kansym-{uid}") if _trusted(f)]


_KEEP_BUILDS = 3  # kernel builds of different sources kept in the cache folder, this one included


class CompileError(OSError):
    """The C compiler ran and failed (as opposed to an unusable cache folder)."""


def _compile(lib_path: Path) -> None:
    """Build the library at ``lib_path`` (atomically); of the other builds there keep the newest two.

    Raises
    ------
    CompileError
        The compiler failed.
    OSError
        The folder cannot be created or written.
    """
    lib_path.parent.parent.mkdir(parents=True, exist_ok=True)
    lib_path.parent.mkdir(mode=0o700, exist_ok=True)
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory(dir=lib_path.parent) as tmp:
        src, out = Path(tmp) / "kernels.c", Path(tmp) / "kernels.so"
        src.write_text(_SOURCE)
        flags = ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fPIC", "-shared"]
        try:
            done = subprocess.run([cc, *flags, str(src), "-o", str(out), "-lm"], capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:  # no such compiler, or it hung
            raise CompileError(f"{cc}: {exc}") from None
        if done.returncode != 0:
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            raise CompileError(f"{cc} exited with {done.returncode}" + (f": {lines[-1]}" if lines else ""))
        os.replace(out, lib_path)  # atomic: a concurrent process sees no file or the whole file
    # builds of other kansym versions: keep the newest few (two checkouts side by side would otherwise evict
    # each other's build on every start), remove the rest (a loaded one stays mapped)
    others = [p for p in lib_path.parent.glob("*.so")
              if p != lib_path and (p.name.startswith("kernels_") or p.name.startswith("cubic_"))]
    others.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0.0, reverse=True)
    for old in others[_KEEP_BUILDS - 1:]:
        old.unlink(missing_ok=True)


def _build() -> ctypes.CDLL:
    """Compile (once per machine and source) and load the kernels; raises OSError."""
    key = hashlib.sha256(f"{_SOURCE}{platform.machine()}{socket.gethostname()}".encode()).hexdigest()[:16]
    error: OSError | None = None
    for folder in _cache_dirs():
        lib_path = folder / f"kernels_{key}.so"
        if lib_path.exists():
            break
        try:
            _compile(lib_path)
            break
        except CompileError:
            raise
        except OSError as exc:  # the folder is unusable (read-only, a file, ...): try the next one
            error = exc
    else:
        raise error if error is not None else OSError("no writable cache folder")
    lib = ctypes.CDLL(str(lib_path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    for suffix in ("f32", "f64"):
        getattr(lib, f"kansym_cubic_fwd_{suffix}").argtypes = [ptr, ptr, ptr, ptr, i64, i64, i64, i64, ptr]
        getattr(lib, f"kansym_cubic_bwd_{suffix}").argtypes = [ptr, ptr, ptr, ptr, ptr, i64, i64, i64, i64, ptr]
        getattr(lib, f"kansym_pw_fwd_{suffix}").argtypes = [ptr] * 5 + [i64] * 6 + [ptr]
        getattr(lib, f"kansym_pw_bwd_{suffix}").argtypes = [ptr] * 6 + [i64] * 6 + [ptr]
        getattr(lib, f"kansym_l1_fwd_{suffix}").argtypes = [ptr, ptr] + [i64] * 4 + [ptr] * 4
        getattr(lib, f"kansym_l1_bwd_{suffix}").argtypes = [ptr] * 5 + [i64] * 4 + [ptr] * 3
        getattr(lib, f"kansym_weight_{suffix}").argtypes = [ptr] * 4 + [i64] * 4 + [ctypes.c_double, ptr, ptr]
        getattr(lib, f"kansym_param_grads_{suffix}").argtypes = [ptr] * 4 + [i64] * 4 + [ctypes.c_double] + [ptr] * 3
    return lib


def available() -> bool:
    """Whether the native kernels are enabled and built (compiles them on the first call).

    Returns False (and remembers why in ``native._state["error"]``) when disabled by
    :func:`enable` or ``KANSYM_NATIVE=0``, or when no C compiler could build them.
    """
    global _lib
    if not _state["enabled"]:
        return False
    if not _state["tried"]:
        with _lock:
            if not _state["tried"]:
                try:
                    _lib = _build()
                    _kernels.clear()
                except OSError as exc:
                    _state["error"] = f"{type(exc).__name__}: {exc}"
                    warnings.warn(  # the library's user should know: a warning, shown once
                        f"kansym: native spline kernels unavailable ({_state['error']}); using torch kernels",
                        stacklevel=2,
                    )
                _state["tried"] = True
    return _lib is not None


def enable(on: bool = True) -> None:
    """Turn the native kernels on (the default where a C compiler exists) or off (torch kernels)."""
    _state["enabled"] = bool(on)


def usable(x: torch.Tensor) -> bool:
    """True when ``x`` can go through the native kernels: a CPU float32/float64 tensor, kernels available."""
    return x.is_cpu and (x.dtype is torch.float32 or x.dtype is torch.float64) and available()


def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


def _as(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` in ``dtype``, contiguous; ``t`` itself when it already is (no dispatch: these calls are per step)."""
    return t if t.dtype == dtype and t.is_contiguous() else t.to(dtype).contiguous()


_kernels: dict = {}


def _kernel(name: str, dtype: torch.dtype):
    """The C function ``name`` for ``dtype`` (``_f32``/``_f64``), looked up once."""
    fn = _kernels.get((name, dtype))
    if fn is None:
        fn = _kernels[(name, dtype)] = getattr(_lib, f"{name}_{'f32' if dtype == torch.float32 else 'f64'}")
    return fn


_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_MIN_WORK = 1 << 16  # elements of F per thread below which one thread is faster


def _by_rows(run, n: int, row_elems: int) -> None:
    """``run(r0, r1)`` over row blocks covering ``range(n)``, on ``torch.get_num_threads()`` threads.

    ctypes releases the GIL during the C call, so the blocks run in parallel; a private
    thread pool avoids mixing an OpenMP runtime with torch's.
    """
    global _pool, _pool_size
    work = n * row_elems
    threads = 1 if work < 2 * _MIN_WORK else min(torch.get_num_threads(), work // _MIN_WORK)
    if threads <= 1:
        run(0, n)
        return
    if _pool_size < threads:
        _pool, _pool_size = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kansym-native"), threads
    step = -(-n // threads)
    list(_pool.map(lambda r0: run(r0, min(n, r0 + step)), range(0, n, step)))


def _call_features(fn, grid_ptrs, ints: tuple, x: torch.Tensor, n_basis: int, wb: int):
    """Run a forward kernel ``fn(x, sig, *grid, n, in, *ints, K, wb, out)`` on contiguous ``x``; returns ``(F, sig)``.

    Small inputs take one direct call; larger ones go over row blocks on the thread pool.
    """
    n, width = x.shape
    sig = torch.empty_like(x) if wb else None  # the kernel writes sigmoid(x) (its own vectorised exp)
    out = torch.empty(n, n_basis + wb, width, dtype=x.dtype)
    row, size = (n_basis + wb) * width, x.element_size()
    xp, sp, op = x.data_ptr(), (sig if wb else x).data_ptr(), out.data_ptr()
    if n * row < 2 * _MIN_WORK:  # one thread: no closure, no pool
        fn(xp, sp, *grid_ptrs, n, width, *ints, n_basis, wb, op)
        return out, sig
    _by_rows(lambda r0, r1: fn(xp + r0 * width * size, sp + r0 * width * size, *grid_ptrs, r1 - r0, width, *ints,
                               n_basis, wb, op + r0 * row * size), n, row)
    return out, sig


def _call_input_grad(fn, grid_ptrs, ints: tuple, g_feats: torch.Tensor, x: torch.Tensor, sig, n_basis: int):
    """Run a backward kernel ``fn(g, x, sig, *grid, n, in, *ints, K, wb, gx)`` on contiguous tensors; returns ``dL/dx``.

    ``g_feats`` holds ``dL/dF`` laid out ``(N, K + wb, in)`` (any view of that memory).
    """
    n, width = x.shape
    wb = int(sig is not None)
    out = torch.empty(n, width, dtype=x.dtype)
    row, size = (n_basis + wb) * width, x.element_size()
    gp, xp, sp, op = g_feats.data_ptr(), x.data_ptr(), (sig if wb else x).data_ptr(), out.data_ptr()
    if n * row < 2 * _MIN_WORK:
        fn(gp, xp, sp, *grid_ptrs, n, width, *ints, n_basis, wb, op)
        return out
    _by_rows(lambda r0, r1: fn(gp + r0 * row * size, xp + r0 * width * size, sp + r0 * width * size, *grid_ptrs,
                               r1 - r0, width, *ints, n_basis, wb, op + r0 * width * size), n, row)
    return out


def _run_features(kernel: str, x: torch.Tensor, grid: tuple, ints: tuple, n_basis: int, with_base: bool):
    """:func:`_call_features` of the kernel named ``kernel`` on the grid tensors ``grid``."""
    return _call_features(_kernel(kernel, x.dtype), [_ptr(t) for t in grid], ints, x, n_basis, int(with_base))


def _run_input_grad(kernel: str, g_feats: torch.Tensor, x: torch.Tensor, sig, grid: tuple, ints: tuple):
    """:func:`_call_input_grad` of the kernel named ``kernel``; ``g_feats (N, R, in)`` and ``sig`` any strides."""
    g_feats = g_feats if g_feats.is_contiguous() else g_feats.contiguous()
    if sig is not None and not sig.is_contiguous():
        sig = sig.contiguous()
    n_basis = g_feats.shape[1] - int(sig is not None)
    return _call_input_grad(_kernel(kernel, x.dtype), [_ptr(t) for t in grid], ints, g_feats, x, sig, n_basis)


def cubic_features(
    x: torch.Tensor, t0: torch.Tensor, inv_h: torch.Tensor, n_basis: int, with_base: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``F (N, n_basis + with_base, in)``: ``silu(x)`` in row 0 (with a base), then ``-6 B_i(x)``.

    Parameters
    ----------
    x : Tensor (N, in)
        CPU float32/float64 (see :func:`usable`).
    t0, inv_h : Tensor (in,)
        First knot and inverse knot step of each feature's uniform grid.
    n_basis : int
        ``K = G + 3``.
    with_base : bool
        Put ``silu(x)`` in row 0.

    Returns
    -------
    F : Tensor (N, n_basis + with_base, in)
    sig : Tensor (N, in) or None
        ``sigmoid(x)`` with a base (what :func:`cubic_input_grad` needs for ``silu'``).
    """
    x = x if x.is_contiguous() else x.contiguous()
    return _run_features("kansym_cubic_fwd", x, (_as(t0, x.dtype), _as(inv_h, x.dtype)), (), n_basis, with_base)


def cubic_input_grad(
    g_feats: torch.Tensor, x: torch.Tensor, sig: torch.Tensor | None, t0: torch.Tensor, inv_h: torch.Tensor
) -> torch.Tensor:
    """``dL/dx (N, in) = sum_r g_feats[:, r] dF_r/dx`` for the features of :func:`cubic_features`.

    Parameters
    ----------
    g_feats : Tensor (N, K + with_base, in)
        Gradient with respect to the features, same dtype as ``x``.
    x, t0, inv_h
        As in :func:`cubic_features`.
    sig : Tensor (N, in) or None
        ``sigmoid(x)`` from :func:`cubic_features` when row 0 is ``silu(x)``; None without a base.
    """
    x = x if x.is_contiguous() else x.contiguous()
    return _run_input_grad("kansym_cubic_bwd", g_feats, x, sig, (_as(t0, x.dtype), _as(inv_h, x.dtype)), ())


def params_usable(*tensors: torch.Tensor) -> bool:
    """True when the layer parameters can go through :func:`weight` / :func:`param_grads`."""
    dtype = tensors[0].dtype
    if dtype is not torch.float32 and dtype is not torch.float64:
        return False
    for t in tensors:  # a plain loop: this runs several times per layer and step
        if t.dtype is not dtype or not t.is_cpu or not t.is_contiguous():
            return False
    return available()


def weight(
    coef: torch.Tensor, scale_base: torch.Tensor, scale_sp: torch.Tensor, mask: torch.Tensor, scale: float, with_base: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``W (out, K + with_base, in)`` and ``live (out, in)`` of :func:`kansym.nn.fast.linear._weight` in one pass.

    All inputs contiguous CPU tensors of one float dtype (:func:`params_usable`); ``coef
    (out, in, K)``, the others ``(out, in)``; ``scale`` the plan's feature scale.
    """
    n_out, width, n_basis = coef.shape
    w = torch.empty(n_out, n_basis + int(with_base), width, dtype=coef.dtype)
    live = torch.empty(n_out, width, dtype=coef.dtype)
    fn = _lib.kansym_weight_f32 if coef.dtype == torch.float32 else _lib.kansym_weight_f64
    fn(_ptr(coef), _ptr(scale_base), _ptr(scale_sp), _ptr(mask), n_out, width, n_basis, int(with_base), scale,
       _ptr(w), _ptr(live))
    return w, live


def param_grads(
    g_w: torch.Tensor, coef: torch.Tensor, mask: torch.Tensor, live: torch.Tensor, scale: float, with_base: bool
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Gradients of ``coef (out, in, K)``, ``scale_base`` and ``scale_sp (out, in)`` from ``g_W (out, K + with_base, in)``.

    The inverse of :func:`weight` (chain rule through ``W``); ``g_base`` is None without a base.
    """
    g_w = _as(g_w, coef.dtype)
    n_out, width, n_basis = coef.shape
    g_coef = torch.empty_like(coef)
    g_sp = torch.empty(n_out, width, dtype=coef.dtype)
    g_base = torch.empty(n_out, width, dtype=coef.dtype) if with_base else None
    fn = _lib.kansym_param_grads_f32 if coef.dtype == torch.float32 else _lib.kansym_param_grads_f64
    fn(_ptr(g_w), _ptr(coef), _ptr(mask), _ptr(live), n_out, width, n_basis, int(with_base), scale, _ptr(g_coef),
       _ptr(g_base) if with_base else None, _ptr(g_sp))
    return g_coef, g_base, g_sp


MAX_ORDER = 7  # KMAX of the C source


def _pieces(plan) -> torch.Tensor:
    """The plan's table compacted to the ``k + 1`` bases that can be nonzero in each slot.

    ``(in (M + 1), 2, k + 1, k + 1)``: for slot ``s`` (interval ``s - 1``), entry
    ``[d, e, q]`` is the coefficient of ``u^e`` of basis ``i = s - 1 - k + q`` (``d = 0``)
    or of its derivative (``d = 1``); 0 where ``i`` is outside ``0..K-1``. Built once per
    plan.
    """
    cached = plan.__dict__.get("_native_pieces")
    if cached is not None:
        return cached
    table, k, n_basis = plan.table, plan.order, plan.n_basis  # (in (M + 1), k + 1, 2K)
    slots = plan.rows.shape[1] + 1
    s = torch.arange(table.shape[0], device=table.device) % slots  # slot of each row
    i = (s - 1 - k).view(-1, 1) + torch.arange(k + 1, device=table.device)  # (rows, k + 1)
    valid = (i >= 0) & (i < n_basis)
    idx = i.clamp(0, n_basis - 1)
    parts = []
    for d in (0, 1):
        cols = (idx + d * n_basis).unsqueeze(1).expand(-1, k + 1, -1)  # (rows, k + 1 [e], k + 1 [q])
        part = torch.gather(table, 2, cols) * valid.unsqueeze(1)  # (rows, e, q)
        parts.append(part)  # (rows, e, q)
    pieces = torch.stack(parts, dim=1).contiguous()  # (rows, 2, e, q)
    object.__setattr__(plan, "_native_pieces", pieces)  # a frozen plan: cached on the instance, dies with it
    return pieces


def _plan_tensors(plan, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Knots, origins and pieces of a piecewise plan in ``dtype``, contiguous; cached on the plan per dtype."""
    cache = plan.__dict__.setdefault("_native_tensors", {})
    grid = cache.get(dtype)
    if grid is None:
        grid = cache[dtype] = tuple(_as(t, dtype) for t in (plan.rows, plan.origins, _pieces(plan)))
    return grid


def piecewise_features(x: torch.Tensor, plan, with_base: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """As :func:`cubic_features` for a piecewise plan (any knots, order <= 7): ``F`` with ``B_i(x)`` (scale 1) and ``sig``.

    Parameters
    ----------
    x : Tensor (N, in)
        CPU float32/float64 (see :func:`usable`).
    plan : SplinePlan
        A plan with ``plan.piecewise`` (see :func:`kansym.nn.fast.plan.make_plan`).
    with_base : bool
        Put ``silu(x)`` in row 0.
    """
    x = x if x.is_contiguous() else x.contiguous()
    grid = _plan_tensors(plan, x.dtype)  # knots, origins, pieces
    return _run_features("kansym_pw_fwd", x, grid, (grid[0].shape[1], plan.order), plan.n_basis, with_base)


def piecewise_input_grad(g_feats: torch.Tensor, x: torch.Tensor, sig: torch.Tensor | None, plan) -> torch.Tensor:
    """As :func:`cubic_input_grad` for the features of :func:`piecewise_features`."""
    x = x if x.is_contiguous() else x.contiguous()
    grid = _plan_tensors(plan, x.dtype)  # knots, origins, pieces
    return _run_input_grad("kansym_pw_bwd", g_feats, x, sig, grid, (grid[0].shape[1], plan.order))


L1_MAX_EDGES = 4096  # in * out of the layers whose edge values the native kernels compute


def l1_usable(feats: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether :func:`l1_edges` applies: small layers (``in * out <= L1_MAX_EDGES``), one CPU float dtype."""
    return (
        weight.shape[0] * weight.shape[2] <= L1_MAX_EDGES
        and feats.dtype == weight.dtype
        and params_usable(feats, weight)
    )


def l1_edges(feats: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Edge values ``E (in, out, N)``, node outputs ``(N, out)`` and ``mean_N |E|`` as ``(out, in)``.

    Parameters
    ----------
    feats : Tensor (N, R, in)
    weight : Tensor (out, R, in)
        Contiguous, same float dtype, CPU (:func:`l1_usable`).
    """
    n, n_rows, width = feats.shape
    n_out = weight.shape[0]
    edges = torch.empty(width, n_out, n, dtype=feats.dtype)
    out = torch.empty(n, n_out, dtype=feats.dtype)
    l1 = torch.empty(n_out, width, dtype=feats.dtype)
    work = torch.empty((n_rows + n_out) * n, dtype=feats.dtype)
    fn = _lib.kansym_l1_fwd_f32 if feats.dtype == torch.float32 else _lib.kansym_l1_fwd_f64
    fn(_ptr(feats), _ptr(weight), n, n_rows, width, n_out, _ptr(edges), _ptr(out), _ptr(l1), _ptr(work))
    return edges, out, l1


def l1_edges_backward(
    feats: torch.Tensor, weight: torch.Tensor, edges: torch.Tensor, g_out: torch.Tensor, g_l1: torch.Tensor | None,
    need_feats: bool,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """``dL/dF (N, R, in)`` (or None) and ``dL/dW (out, R, in)`` through :func:`l1_edges`."""
    n, n_rows, width = feats.shape
    n_out = weight.shape[0]
    g_out = _as(g_out, feats.dtype)
    g_l1 = _as(g_l1, feats.dtype) if g_l1 is not None else None
    g_feats = torch.empty_like(feats) if need_feats else None
    g_w = torch.empty_like(weight)
    work = torch.empty((2 * n_rows + n_out + 1) * n, dtype=feats.dtype)
    fn = _lib.kansym_l1_bwd_f32 if feats.dtype == torch.float32 else _lib.kansym_l1_bwd_f64
    fn(_ptr(feats), _ptr(weight), _ptr(edges), _ptr(g_out), _ptr(g_l1) if g_l1 is not None else None, n, n_rows,
       width, n_out, _ptr(g_feats) if need_feats else None, _ptr(g_w), _ptr(work))
    return g_feats, g_w
