"""The KAN layer's autograd nodes on the native CPU kernels: the lean path and the blocked path.

:class:`KANLinearNative` runs ``F(x) W^T`` on the C kernels with their arguments bound once
(:func:`kansym.nn.fast.bound.bind`); the C++ operator (``csrc/kan_op.cpp``) does the same
work without Python. :class:`KANLinearBlocked` does it in row blocks whose features stay in
cache, for layers whose ``F`` exceeds 8 MB. See :mod:`kansym.nn.fast` for the algorithms and
their sources.
"""

from __future__ import annotations

import torch

from kansym.nn.fast import backends, native
from kansym.nn.fast.autograd import assemble_weight, first_order_only, param_grads, workspace
from kansym.nn.fast.bound import Bound, bind
from kansym.nn.fast.kernels import recomputes_derivative
from kansym.nn.fast.native import NativeKernels, _as
from kansym.nn.fast.plan import SplinePlan

__all__ = ["KANLinearNative", "KANLinearBlocked", "native_bound", "blocked_applies"]

_BLOCK_ELEMS = 1 << 18  # features per row block of the blocked path (1 MB in float32)
_BLOCKED_MIN_BYTES = 8 << 20  # F above this goes through memory anyway: blocks pay; below, one block is as fast


def _block_kernels(kernels: NativeKernels, plan: SplinePlan, x: torch.Tensor, with_base: bool):
    """``(features(x_b) -> (F_b, sig_b), input_grad(g_b, x_b, sig_b) -> dL/dx_b)``: the native kernels of ``plan``, bound once."""
    if plan.uniform:
        t0, inv_h, n_basis = _as(plan.t0, x.dtype), _as(plan.inv_h, x.dtype), plan.n_basis
        return (
            lambda xb: kernels.cubic_features(xb, t0, inv_h, n_basis, with_base),
            lambda gb, xb, sb: kernels.cubic_input_grad(gb, xb, sb, t0, inv_h),
        )
    return (
        lambda xb: kernels.piecewise_features(xb, plan, with_base),
        lambda gb, xb, sb: kernels.piecewise_input_grad(gb, xb, sb, plan),
    )


def blocked_applies(x: torch.Tensor, plan: SplinePlan, cache, coef, scale_base, scale_sp, mask) -> bool:
    """The blocked native path: CPU native kernels, no feature cache, no autocast, ``F`` over 8 MB."""
    return (
        cache is None
        and x.dim() == 2
        and x.shape[0] * (plan.n_basis + 1) * x.shape[1] * x.element_size() > _BLOCKED_MIN_BYTES
        and not torch.is_autocast_enabled("cpu")
        and x.dtype == coef.dtype
        and recomputes_derivative(plan, x)
        and native.usable(x)
        and native.params_usable(coef, scale_base, scale_sp, mask)
        and backends.native_kernels() is not None
    )


class KANLinearBlocked(torch.autograd.Function):
    """:class:`kansym.nn.fast.linear._KANLinear` in row blocks whose features stay in cache, recomputed in the backward.

    Per block of ``b`` rows (``b (K + 1) in`` about ``_BLOCK_ELEMS``): the native kernel
    writes ``F_b``, one matmul gives ``out_b = F_b W^T``. Nothing of size ``F`` is kept:
    the backward recomputes ``F_b`` (cheap next to the matmuls) for ``dL/dW += g_b^T F_b``
    and ``dL/dF_b = g_b W``, whose input gradient the native kernel takes at once. Each
    block's ``F_b`` is written and read while in cache instead of round trips of the whole
    ``(N, (K + 1) in)`` matrix through memory; saved are ``x`` and ``sigmoid(x)`` only.
    """

    @staticmethod
    def forward(ctx, x, coef, scale_base, scale_sp, mask, plan, with_base):
        x = x.detach().contiguous()
        kernels = backends.native_kernels()
        weight, live = assemble_weight(coef, scale_base, scale_sp, mask, plan, with_base)
        weight = weight.view(coef.shape[0], -1)  # (out, R in)
        n, rows = x.shape[0], max(1, _BLOCK_ELEMS // weight.shape[1])
        out = torch.empty(n, coef.shape[0], dtype=x.dtype)
        sig = torch.empty_like(x) if with_base else None
        feats_of, _ = _block_kernels(kernels, plan, x, with_base)
        w_t = weight.T
        for r0 in range(0, n, rows):
            feats, s_b = feats_of(x[r0 : r0 + rows])
            if with_base:
                sig[r0 : r0 + rows] = s_b
            torch.mm(feats.view(feats.shape[0], -1), w_t, out=out[r0 : r0 + rows])
        ctx.kernels, ctx.plan, ctx.with_base, ctx.scale, ctx.rows = kernels, plan, with_base, plan.scale, rows
        ctx.save_for_backward(x, sig, weight, coef, mask, live)
        return out

    @staticmethod
    @first_order_only
    def backward(ctx, grad):  # (N, out)
        x, sig, weight, coef, mask, live = ctx.saved_tensors
        grad = _as(grad, x.dtype)
        need_x, need_w = ctx.needs_input_grad[0], any(ctx.needs_input_grad[1:4])
        g_x = torch.empty_like(x) if need_x else None
        g_w = torch.zeros_like(weight) if need_w else None
        n, width = x.shape
        feats_of, input_grad_of = _block_kernels(ctx.kernels, ctx.plan, x, ctx.with_base)
        for r0 in range(0, n, ctx.rows):
            xb, gb = x[r0 : r0 + ctx.rows], grad[r0 : r0 + ctx.rows]
            if need_w:
                feats = feats_of(xb)[0]
                g_w.addmm_(gb.T, feats.view(feats.shape[0], -1))
            if need_x:
                g_feats = torch.mm(gb, weight, out=workspace(gb.shape[0], weight.shape[1], gb))
                sb = sig[r0 : r0 + ctx.rows] if ctx.with_base else None
                g_x[r0 : r0 + ctx.rows] = input_grad_of(g_feats.view(gb.shape[0], -1, width), xb, sb)
        g_coef = g_base = g_sp = None
        if need_w:
            g_coef, g_base, g_sp = param_grads(ctx, g_w.view(coef.shape[0], -1, width), coef, None, mask, live,
                                                ctx.needs_input_grad[1:4])
        return g_x, g_coef, g_base, g_sp, None, None, None


class KANLinearNative(torch.autograd.Function):
    """:class:`kansym.nn.fast.linear._KANLinear` on the native CPU kernels, with their arguments bound once (:func:`kansym.nn.fast.bound.bind`).

    The same arithmetic (native ``W`` and ``F``, one matmul; in the backward ``F^T g``
    and the parameter gradients, ``g W`` and the native input gradient), without the
    per-call dispatch of the general path: for a small layer that Python work was a
    third of a forward+backward. Saves ``F``, ``W``, the parameters it needs and, when
    ``x`` requires grad, ``x`` and ``sigmoid(x)``.
    """

    @staticmethod
    def forward(ctx, x, coef, scale_base, scale_sp, mask, bound, cache):
        # x (N, in) contiguous, every tensor CPU and of bound.dtype (kan_linear checked)
        weight, live = bound.weight(coef, scale_base, scale_sp, mask)  # (out, R, in), (out, in)
        if cache is None:
            feats, sig = bound.features(x)
        else:
            feats, sig = cache.features(x, x, bound.plan, with_base=bool(bound.wb), with_deriv=False, aux=True)
        flat, w2 = feats.view(x.shape[0], -1), weight.view(weight.shape[0], -1)
        ctx.bound = bound
        need_x = ctx.needs_input_grad[0]
        ctx.save_for_backward(flat, w2, x if need_x else None, sig if need_x else None, coef, mask, live)
        return torch.mm(flat, w2.t())

    @staticmethod
    @first_order_only
    def backward(ctx, grad):  # (N, out)
        flat, w2, x, sig, coef, mask, live = ctx.saved_tensors
        bound, needs = ctx.bound, ctx.needs_input_grad
        grad = _as(grad, flat.dtype)
        g_x = g_coef = g_base = g_sp = None
        if needs[0]:
            g_feats = torch.mm(grad, w2, out=workspace(grad.shape[0], w2.shape[1], grad))  # (N, R in)
            g_x = bound.input_grad(g_feats, x, sig)
        if needs[1] or needs[2] or needs[3]:
            g_coef, g_base, g_sp = bound.param_grads(torch.mm(grad.t(), flat), coef, mask, live)
            g_coef, g_base, g_sp = (g if need else None for g, need in zip((g_coef, g_base, g_sp), needs[1:4]))
        return g_x, g_coef, g_base, g_sp, None, None, None


def native_bound(x, plan, with_base, coef, scale_base, scale_sp, mask) -> Bound | None:
    """The bound native kernels when the lean path applies (2-D CPU input of the parameters' float dtype, no autocast)."""
    if x.dim() != 2 or x.dtype is not coef.dtype or not native.params_usable(x, coef, scale_base, scale_sp, mask):
        return None
    if torch.is_autocast_enabled("cpu"):
        return None
    return bind(plan, x.dtype, with_base)


