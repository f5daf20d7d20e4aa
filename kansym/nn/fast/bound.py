"""A plan's native kernels bound once: the lean per-call path of the KAN layer on CPU.

:func:`bind` looks up, per plan, dtype and base choice, the C functions of
:class:`kansym.nn.fast.native.NativeKernels` and the pointers and sizes of the plan's grid tensors, and
caches the result on the plan, so a layer call does one dictionary lookup instead of
re-deriving them (for a small layer that Python work was a third of a forward+backward).
"""

from __future__ import annotations

import torch

from kansym.nn.fast import backends, native

__all__ = ["Bound", "bind"]


class Bound:
    """The native kernels of one plan, dtype and base choice, with their arguments bound once.

    Built by :func:`bind` and cached on the plan, so a layer call does a dictionary
    lookup instead of re-deriving the kernel, its grid pointers and sizes: the fixed
    cost of a small layer's step is mostly such Python work. Methods take contiguous
    CPU tensors of the bound dtype (the caller checks, see :func:`kansym.nn.fast.native.params_usable`).
    """

    __slots__ = ("plan", "dtype", "wb", "n_basis", "rows", "scale", "order", "grid", "_fwd", "_bwd", "_weight", "_grads",
                 "_grid", "_ptrs", "_ints")

    def __init__(self, kernels: native.NativeKernels, plan, dtype: torch.dtype, with_base: bool) -> None:
        self.plan, self.dtype, self.wb = plan, dtype, int(with_base)
        self.n_basis = plan.n_basis
        self.rows = plan.n_basis + self.wb  # R: rows of F per input
        self.scale = plan.scale
        if plan.uniform:
            self._grid = (native._as(plan.t0, dtype), native._as(plan.inv_h, dtype))
            self._fwd, self._bwd = kernels.fn("kansym_cubic_fwd", dtype), kernels.fn("kansym_cubic_bwd", dtype)
            self._ints = ()
        else:
            self._grid = native.plan_tensors(plan, dtype)
            self._fwd, self._bwd = kernels.fn("kansym_pw_fwd", dtype), kernels.fn("kansym_pw_bwd", dtype)
            self._ints = (self._grid[0].shape[1], plan.order)
        self._ptrs = tuple(t.data_ptr() for t in self._grid)
        self.order, self.grid = plan.order, list(self._grid)  # the arguments of the C++ operator (csrc/kan_op.cpp)
        self._weight, self._grads = kernels.fn("kansym_weight", dtype), kernels.fn("kansym_param_grads", dtype)

    def features(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``F (N, R, in)`` and ``sigmoid(x)`` (None without a base), as :meth:`NativeKernels.cubic_features`."""
        return native.call_features(self._fwd, self._ptrs, self._ints, x, self.n_basis, self.wb)

    def input_grad(self, g_feats: torch.Tensor, x: torch.Tensor, sig: torch.Tensor | None) -> torch.Tensor:
        """``dL/dx (N, in)`` from contiguous ``dL/dF`` laid out ``(N, R, in)``, as :meth:`NativeKernels.cubic_input_grad`."""
        return native.call_input_grad(self._bwd, self._ptrs, self._ints, g_feats, x, sig, self.n_basis)

    def weight(self, coef, scale_base, scale_sp, mask) -> tuple[torch.Tensor, torch.Tensor]:
        """``W (out, R, in)`` and ``live (out, in)``, as :meth:`NativeKernels.weight`."""
        n_out, width, k = coef.shape
        w = torch.empty(n_out, self.rows, width, dtype=self.dtype)
        live = torch.empty(n_out, width, dtype=self.dtype)
        self._weight(coef.data_ptr(), scale_base.data_ptr(), scale_sp.data_ptr(), mask.data_ptr(), n_out, width, k,
                     self.wb, self.scale, w.data_ptr(), live.data_ptr())
        return w, live

    def param_grads(self, g_w, coef, mask, live) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Gradients of ``coef``, ``scale_base`` (None without a base) and ``scale_sp`` from contiguous ``g_W``, as :meth:`NativeKernels.param_grads`."""
        n_out, width, k = coef.shape
        g_coef = torch.empty_like(coef)
        g_sp = torch.empty(n_out, width, dtype=self.dtype)
        g_base = torch.empty(n_out, width, dtype=self.dtype) if self.wb else None
        self._grads(g_w.data_ptr(), coef.data_ptr(), mask.data_ptr(), live.data_ptr(), n_out, width, k, self.wb,
                    self.scale, g_coef.data_ptr(), g_base.data_ptr() if self.wb else None, g_sp.data_ptr())
        return g_coef, g_base, g_sp


class _EmptyOnCopy(dict):
    """A cache kept on a plan that deep-copies and pickles as empty (its ctypes functions cannot be; a copy rebinds)."""

    def __deepcopy__(self, memo) -> "_EmptyOnCopy":
        return _EmptyOnCopy()

    def __reduce__(self):
        return (_EmptyOnCopy, ())


def bind(plan, dtype: torch.dtype, with_base: bool) -> Bound | None:
    """The :class:`Bound` kernels of ``plan`` for ``dtype``, or None (no native kernel for it, or unavailable).

    Native kernels exist for cubic uniform plans and piecewise plans of order <= 7, in
    float32 and float64. Cached on the plan (a new plan comes with every grid change).
    """
    kernels = backends.native_kernels()  # on every call: use_backend("torch") switches them off at once
    if kernels is None:
        return None
    cache = plan.__dict__.get("_native_bound")
    if cache is None:
        cache = plan.__dict__["_native_bound"] = _EmptyOnCopy()
    key = (dtype, with_base, id(kernels))
    found = cache.get(key, False)
    if found is not False:
        return found
    ok = (dtype is torch.float32 or dtype is torch.float64) and (
        (plan.uniform and plan.order == 3) or (plan.piecewise and plan.order <= native.MAX_ORDER)
    )
    cache[key] = bound = Bound(kernels, plan, dtype, with_base) if ok else None
    return bound
