"""One autograd node per KAN layer: ``F(x) W^T`` with hand-written backward, dispatched to the fastest path.

:func:`kan_linear` runs, for CPU float32/float64 inputs, the C++ operator or the native
:class:`~kansym.nn.fast.native_linear.KANLinearNative` (the backend's choice,
:func:`kansym.nn.fast.backend`), the row-blocked native node for large ``F``, and
otherwise :class:`_KANLinear` on the tensor kernels (any device, autocast). See
:mod:`kansym.nn.fast` for the algorithms and their sources.
"""

from __future__ import annotations

import torch

from kansym.nn.fast import backends
from kansym.nn.fast.autograd import (
    assemble_weight, compute_dtype, first_order_only, grad_input, param_grads, workspace,
)
from kansym.nn.fast.cache import FeatureCache, features_of
from kansym.nn.fast.kernels import features, recomputes_derivative
from kansym.nn.fast.native import _as
from kansym.nn.fast.native_linear import KANLinearBlocked, KANLinearNative, blocked_applies, native_bound
from kansym.nn.fast.plan import SplinePlan

__all__ = ["kan_linear", "spline_basis"]


class _Basis(torch.autograd.Function):
    """``x (N, in) -> B(x) / plan.scale (N, K, in)`` with an analytic backward."""

    @staticmethod
    def forward(ctx, x, plan):
        xc = compute_dtype(x.detach())
        feats, deriv = features(xc, plan, with_base=False, with_deriv=ctx.needs_input_grad[0])
        ctx.save_for_backward(deriv)
        return feats

    @staticmethod
    @first_order_only
    def backward(ctx, grad):  # grad: (N, K, in)
        (deriv,) = ctx.saved_tensors
        return (grad.to(deriv.dtype) * deriv).sum(dim=1), None


class _KANLinear(torch.autograd.Function):
    """``F(x) W^T`` with ``W`` assembled from the layer's parameters; saves ``F``, ``W`` and (if needed) ``dF/dx``.

    With the compiled cubic kernels (:func:`kansym.nn.fast.compile_kernels`) the input is
    saved instead of ``dF/dx``, which the backward recomputes inside its fused reduction.

    The weight assembly (``w_b mask``, ``c w_s mask scale``) and its backward are done
    here by hand, so one autograd node covers the whole layer.
    """

    @staticmethod
    def forward(ctx, x, coef, scale_base, scale_sp, mask, plan, with_base, cache):
        # x (N, in); coef (out, in, K); scale_base, scale_sp, mask (out, in)
        xc = compute_dtype(x.detach())
        weight, live = assemble_weight(coef, scale_base, scale_sp, mask, plan, with_base)
        weight = weight.view(coef.shape[0], -1)  # (out, (K + with_base) in)
        # native or compiled cubic kernels recompute dF/dx in the backward instead of saving it
        recompute = ctx.needs_input_grad[0] and recomputes_derivative(plan, xc)
        feats, deriv = features_of(x, xc, plan, cache, with_base, ctx.needs_input_grad[0] and not recompute, recompute)
        flat = feats.view(xc.shape[0], -1)  # (N, (K + with_base) in)
        out = flat @ _as(weight, flat.dtype).T  # (N, out); autocast may run it in bf16/fp16
        ctx.with_base, ctx.x_dtype, ctx.scale = with_base, x.dtype, plan.scale
        ctx.plan = plan if recompute else None
        ctx.save_for_backward(flat, weight, deriv, xc if recompute else None, coef, scale_sp, mask, live)
        return out

    @staticmethod
    @first_order_only
    def backward(ctx, grad):  # grad: (N, out)
        flat, weight, deriv, x_saved, coef, scale_sp, mask, live = ctx.saved_tensors
        grad = _as(grad, flat.dtype)
        n_out, width, _ = coef.shape
        g_x = g_coef = g_base = g_sp = None
        if ctx.needs_input_grad[0]:
            w = _as(weight, grad.dtype)
            g_feats = torch.mm(grad, w, out=workspace(grad.shape[0], w.shape[1], grad))  # (N, (K + with_base) in)
            g_x = _as(grad_input(ctx, g_feats.view(grad.shape[0], -1, width), deriv, x_saved), ctx.x_dtype)  # (N, in)
        if any(ctx.needs_input_grad[1:4]):
            g_w = _as((grad.T @ flat).view(n_out, -1, width), coef.dtype)  # (out, K + with_base, in)
            g_coef, g_base, g_sp = param_grads(ctx, g_w, coef, scale_sp, mask, live, ctx.needs_input_grad[1:4])
        return g_x, g_coef, g_base, g_sp, None, None, None, None


def kan_linear(
    x: torch.Tensor,
    coef: torch.Tensor,
    scale_base: torch.Tensor,
    scale_sp: torch.Tensor,
    mask: torch.Tensor,
    plan: SplinePlan,
    *,
    with_base: bool = True,
    cache: FeatureCache | None = None,
) -> torch.Tensor:
    """Node outputs of a B-spline KAN layer in one fused matmul (one autograd node).

    Parameters
    ----------
    x : Tensor (N, in)
    coef : Tensor (out, in, K)
    scale_base, scale_sp, mask : Tensor (out, in)
        ``w_b``, ``w_s`` and the live-edge mask.
    plan : SplinePlan
    with_base : bool
        Whether the SiLU residual ``w_b silu(x)`` is present.
    cache : FeatureCache, optional
        Reuse the features of ``x`` when this very tensor, unchanged, was seen recently
        on this grid (a fixed input, e.g. a training loop's rows); never used for another.

    Returns
    -------
    Tensor (N, out)
        ``sum_i mask (w_b silu(x_i) + w_s sum_m c_m B_m(x_i))`` (KAN paper eq. 2.10);
        differentiable in ``x``, ``coef``, ``scale_base`` and ``scale_sp``.
    """
    if blocked_applies(x, plan, cache, coef, scale_base, scale_sp, mask):
        return KANLinearBlocked.apply(x, coef, scale_base, scale_sp, mask, plan, with_base)
    bound = native_bound(x, plan, with_base, coef, scale_base, scale_sp, mask)
    if bound is not None:  # the "op" or "native" backend (kansym.nn.fast.backend)
        kan_op = backends.operator()
        if kan_op is not None and not torch.compiler.is_compiling():  # the same work without Python autograd
            feats, sig = (None, None) if cache is None else cache.features(
                x, x, plan, with_base=with_base, with_deriv=False, aux=True)
            return kan_op(x, coef, scale_base, scale_sp, mask, bound.grid, bound.order, with_base, bound.scale,
                          feats, sig)
        return KANLinearNative.apply(x, coef, scale_base, scale_sp, mask, bound, cache)
    return _KANLinear.apply(x, coef, scale_base, scale_sp, mask, plan, with_base, cache)


def spline_basis(x: torch.Tensor, plan: SplinePlan) -> torch.Tensor:
    """Differentiable basis ``B(x)`` of shape ``(N, in, K)`` (the layout of ``bspline_basis``)."""
    out = _Basis.apply(x, plan) * plan.scale  # (N, K, in)
    return out.transpose(1, 2).to(x.dtype)
