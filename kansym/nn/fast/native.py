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

The kernels are C++ templates behind a C ABI (``csrc/kan_kernels.cpp`` and ``.h``), built
by :mod:`kansym.nn.fast.build` with ``torch.utils.cpp_extension`` (``-O3 -march=native
-fno-math-errno -fno-trapping-math``, no fast-math, so NaN inputs give NaN) and loaded here
with :mod:`ctypes` (:class:`NativeKernels`); they run on the tensors' memory (contiguous CPU
float32/float64 tensors; row blocks on ``torch.get_num_threads()`` threads, since ctypes
releases the GIL). Whether they are used is the backend's choice
(:func:`kansym.nn.fast.backend`); without them the tensor kernels of
:mod:`kansym.nn.fast.kernels` run: same values to rounding (both tested against the
reference Cox–de Boor recursion, ``tests/nn/test_native_kernels.py``).
"""

from __future__ import annotations

import ctypes
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

__all__ = ["NativeKernels", "usable", "params_usable", "l1_usable", "MAX_ORDER", "L1_MAX_EDGES"]

MAX_ORDER = 7  # KMAX of csrc/kan_kernels.cpp
L1_MAX_EDGES = 4096  # in * out of the layers whose edge values the native kernels compute
_F32, _F64 = torch.float32, torch.float64


def usable(x: torch.Tensor) -> bool:
    """True when the native kernels take ``x``: a CPU float32/float64 tensor (whether they are loaded is the backend's)."""
    return x.is_cpu and (x.dtype is _F32 or x.dtype is _F64)


def params_usable(*tensors: torch.Tensor) -> bool:
    """True when layer parameters can go through :meth:`NativeKernels.weight` / :meth:`NativeKernels.param_grads`."""
    dtype = tensors[0].dtype
    if dtype is not _F32 and dtype is not _F64:
        return False
    for t in tensors:  # a plain loop: this runs several times per layer and step
        if t.dtype is not dtype or not t.is_cpu or not t.is_contiguous():
            return False
    return True


def l1_usable(feats: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether :meth:`NativeKernels.l1_edges` applies: small layers (``in * out <= L1_MAX_EDGES``), one CPU float dtype."""
    return weight.shape[0] * weight.shape[2] <= L1_MAX_EDGES and feats.dtype == weight.dtype and params_usable(
        feats, weight)


def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


def _as(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` in ``dtype``, contiguous; ``t`` itself when it already is (no dispatch: these calls are per step)."""
    return t if t.dtype == dtype and t.is_contiguous() else t.to(dtype).contiguous()


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


def call_features(fn, grid_ptrs, ints: tuple, x: torch.Tensor, n_basis: int, wb: int):
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


def call_input_grad(fn, grid_ptrs, ints: tuple, g_feats: torch.Tensor, x: torch.Tensor, sig, n_basis: int):
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


def plan_tensors(plan, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Knots ``(in, M)``, origins and pieces of a piecewise plan in ``dtype``, contiguous; cached on the plan per dtype."""
    cache = plan.__dict__.setdefault("_native_tensors", {})
    grid = cache.get(dtype)
    if grid is None:
        grid = cache[dtype] = tuple(_as(t, dtype) for t in (plan.rows, plan.origins, _pieces(plan)))
    return grid


_SIGNATURES = {  # argument types of the C ABI (csrc/kan_kernels.h), per kernel
    "kansym_cubic_fwd": ["p"] * 4 + ["i"] * 4 + ["p"],
    "kansym_cubic_bwd": ["p"] * 5 + ["i"] * 4 + ["p"],
    "kansym_pw_fwd": ["p"] * 5 + ["i"] * 6 + ["p"],
    "kansym_pw_bwd": ["p"] * 6 + ["i"] * 6 + ["p"],
    "kansym_l1_fwd": ["p"] * 2 + ["i"] * 4 + ["p"] * 4,
    "kansym_l1_bwd": ["p"] * 5 + ["i"] * 4 + ["p"] * 3,
    "kansym_weight": ["p"] * 4 + ["i"] * 4 + ["d"] + ["p"] * 2,
    "kansym_param_grads": ["p"] * 4 + ["i"] * 4 + ["d"] + ["p"] * 3,
    "kansym_rational_fwd": ["p"] * 3 + ["i"] * 4 + ["p"],
    "kansym_rational_bwd": ["p"] * 4 + ["i"] * 4 + ["p"] * 3,
}
_CTYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int64, "d": ctypes.c_double}


class NativeKernels:
    """The C kernels of one built library (:func:`kansym.nn.fast.build.kernels_extension`), called through ctypes.

    Methods take CPU float32/float64 tensors (:func:`usable`, :func:`params_usable`;
    non-contiguous ones are copied) and return new tensors.

    Parameters
    ----------
    path : Path
        The built library.

    Raises
    ------
    OSError
        The library cannot be loaded, or lacks a kernel.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lib = ctypes.CDLL(str(path))
        self._fns = {}
        for name, sig in _SIGNATURES.items():
            for dtype, suffix in ((_F32, "f32"), (_F64, "f64")):
                fn = getattr(self.lib, f"{name}_{suffix}")
                fn.argtypes, fn.restype = [_CTYPES[c] for c in sig], None
                self._fns[name, dtype] = fn

    def fn(self, name: str, dtype: torch.dtype):
        """The C function ``name`` (without ``_f32``/``_f64``) for ``dtype``."""
        return self._fns[name, dtype]

    def cubic_features(
        self, x: torch.Tensor, t0: torch.Tensor, inv_h: torch.Tensor, n_basis: int, with_base: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``F (N, n_basis + with_base, in)``: ``silu(x)`` in row 0 (with a base), then ``-6 B_i(x)``.

        Parameters
        ----------
        x : Tensor (N, in)
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
            ``sigmoid(x)`` with a base (what :meth:`cubic_input_grad` needs for ``silu'``).
        """
        x = _as(x, x.dtype)
        grid = (_as(t0, x.dtype).data_ptr(), _as(inv_h, x.dtype).data_ptr())
        return call_features(self._fns["kansym_cubic_fwd", x.dtype], grid, (), x, n_basis, int(with_base))

    def cubic_input_grad(
        self, g_feats: torch.Tensor, x: torch.Tensor, sig: torch.Tensor | None, t0: torch.Tensor, inv_h: torch.Tensor
    ) -> torch.Tensor:
        """``dL/dx (N, in) = sum_r g_feats[:, r] dF_r/dx`` for the features of :meth:`cubic_features`.

        Parameters
        ----------
        g_feats : Tensor (N, K + with_base, in)
            Gradient with respect to the features, same dtype as ``x``.
        x, t0, inv_h
            As in :meth:`cubic_features`.
        sig : Tensor (N, in) or None
            ``sigmoid(x)`` from :meth:`cubic_features` when row 0 is ``silu(x)``; None without a base.
        """
        x = _as(x, x.dtype)
        grid = (_as(t0, x.dtype).data_ptr(), _as(inv_h, x.dtype).data_ptr())
        return self._input_grad("kansym_cubic_bwd", g_feats, x, sig, grid, ())

    def piecewise_features(self, x: torch.Tensor, plan, with_base: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """As :meth:`cubic_features` for a piecewise plan (any knots, order <= 7): ``F`` with ``B_i(x)`` (scale 1) and ``sig``.

        ``plan`` is a :class:`~kansym.nn.fast.plan.SplinePlan` with ``plan.piecewise``.
        """
        x = _as(x, x.dtype)
        grid = plan_tensors(plan, x.dtype)  # knots, origins, pieces
        ints = (grid[0].shape[1], plan.order)
        return call_features(self._fns["kansym_pw_fwd", x.dtype], [_ptr(t) for t in grid], ints, x, plan.n_basis,
                             int(with_base))

    def piecewise_input_grad(self, g_feats: torch.Tensor, x: torch.Tensor, sig: torch.Tensor | None, plan):
        """As :meth:`cubic_input_grad` for the features of :meth:`piecewise_features`."""
        x = _as(x, x.dtype)
        grid = plan_tensors(plan, x.dtype)
        return self._input_grad("kansym_pw_bwd", g_feats, x, sig, [_ptr(t) for t in grid], (grid[0].shape[1], plan.order))

    def _input_grad(self, name: str, g_feats: torch.Tensor, x: torch.Tensor, sig, grid_ptrs, ints: tuple):
        g_feats = _as(g_feats, g_feats.dtype)  # (N, R, in), any strides before
        if sig is not None:
            sig = _as(sig, sig.dtype)
        n_basis = g_feats.shape[1] - int(sig is not None)
        return call_input_grad(self._fns[name, x.dtype], grid_ptrs, ints, g_feats, x, sig, n_basis)

    def weight(
        self, coef: torch.Tensor, scale_base: torch.Tensor, scale_sp: torch.Tensor, mask: torch.Tensor, scale: float,
        with_base: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``W (out, K + with_base, in)`` and ``live (out, in)`` of the layer's matmul in one pass.

        ``W = [w_b mask | c w_s mask scale]``; all inputs contiguous CPU tensors of one float
        dtype (:func:`params_usable`); ``coef (out, in, K)``, the others ``(out, in)``;
        ``scale`` the plan's feature scale.
        """
        n_out, width, n_basis = coef.shape
        w = torch.empty(n_out, n_basis + int(with_base), width, dtype=coef.dtype)
        live = torch.empty(n_out, width, dtype=coef.dtype)
        self._fns["kansym_weight", coef.dtype](_ptr(coef), _ptr(scale_base), _ptr(scale_sp), _ptr(mask), n_out, width,
                                               n_basis, int(with_base), scale, _ptr(w), _ptr(live))
        return w, live

    def param_grads(
        self, g_w: torch.Tensor, coef: torch.Tensor, mask: torch.Tensor, live: torch.Tensor, scale: float,
        with_base: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Gradients of ``coef (out, in, K)``, ``scale_base`` and ``scale_sp (out, in)`` from ``g_W (out, K + with_base, in)``.

        The inverse of :meth:`weight` (chain rule through ``W``); ``g_base`` is None without a base.
        """
        g_w = _as(g_w, coef.dtype)
        n_out, width, n_basis = coef.shape
        g_coef = torch.empty_like(coef)
        g_sp = torch.empty(n_out, width, dtype=coef.dtype)
        g_base = torch.empty(n_out, width, dtype=coef.dtype) if with_base else None
        self._fns["kansym_param_grads", coef.dtype](
            _ptr(g_w), _ptr(coef), _ptr(mask), _ptr(live), n_out, width, n_basis, int(with_base), scale, _ptr(g_coef),
            _ptr(g_base) if with_base else None, _ptr(g_sp))
        return g_coef, g_base, g_sp

    def l1_edges(self, feats: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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
        self._fns["kansym_l1_fwd", feats.dtype](_ptr(feats), _ptr(weight), n, n_rows, width, n_out, _ptr(edges),
                                                _ptr(out), _ptr(l1), _ptr(work))
        return edges, out, l1

    def l1_edges_backward(
        self, feats: torch.Tensor, weight: torch.Tensor, edges: torch.Tensor, g_out: torch.Tensor,
        g_l1: torch.Tensor | None, need_feats: bool,
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """``dL/dF (N, R, in)`` (or None) and ``dL/dW (out, R, in)`` through :meth:`l1_edges`."""
        n, n_rows, width = feats.shape
        n_out = weight.shape[0]
        g_out = _as(g_out, feats.dtype)
        g_l1 = _as(g_l1, feats.dtype) if g_l1 is not None else None
        g_feats = torch.empty_like(feats) if need_feats else None
        g_w = torch.empty_like(weight)
        work = torch.empty((2 * n_rows + n_out + 1) * n, dtype=feats.dtype)
        self._fns["kansym_l1_bwd", feats.dtype](
            _ptr(feats), _ptr(weight), _ptr(edges), _ptr(g_out), _ptr(g_l1) if g_l1 is not None else None, n, n_rows,
            width, n_out, _ptr(g_feats) if need_feats else None, _ptr(g_w), _ptr(work))
        return g_feats, g_w

    def rational(self, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """GR-KAN's rational ``P / (1 + |B|)`` of ``x (N, ch)`` with coefficient rows ``a (m1, ch)``, ``b (nb, ch)``."""
        x, a, b = (_as(t, x.dtype) for t in (x, a, b))
        out = torch.empty_like(x)
        self._fns["kansym_rational_fwd", x.dtype](_ptr(x), _ptr(a), _ptr(b), x.shape[0], x.shape[1], a.shape[0],
                                                  b.shape[0], _ptr(out))
        return out

    def rational_backward(self, g: torch.Tensor, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor):
        """Gradients ``(gx (N, ch), ga (m1, ch), gb (nb, ch))`` of :meth:`rational` from ``g (N, ch)``."""
        g, x, a, b = (_as(t, x.dtype) for t in (g, x, a, b))
        gx, ga, gb = torch.empty_like(x), torch.empty_like(a), torch.empty_like(b)
        self._fns["kansym_rational_bwd", x.dtype](_ptr(g), _ptr(x), _ptr(a), _ptr(b), x.shape[0], x.shape[1],
                                                  a.shape[0], b.shape[0], _ptr(gx), _ptr(ga), _ptr(gb))
        return gx, ga, gb
