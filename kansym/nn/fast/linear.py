"""One autograd node per KAN layer: ``F(x) W^T`` with hand-written backward, and the L1 variant.

See :mod:`kansym.nn.fast` for the algorithms and their sources.
"""

from __future__ import annotations

import functools
import threading

import torch

from kansym.nn.fast import bound as _bound
from kansym.nn.fast import native
from kansym.nn.fast import op as _op
from kansym.nn.fast.cache import FeatureCache
from kansym.nn.fast.native import _as
from kansym.nn.fast.kernels import contract, features, input_grad, recomputes_derivative
from kansym.nn.fast.plan import SplinePlan

__all__ = ["FeatureCache", "kan_linear", "kan_linear_l1", "spline_basis"]

def _first_order_only(backward):
    """Refuse ``create_graph`` through a hand-written backward, with a message (else torch returns a gradient with no graph)."""

    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        if torch.is_grad_enabled():  # the engine runs backward with grad mode on only for create_graph=True
            raise RuntimeError(
                "kansym's KAN layer has first derivatives only (hand-written backward): second derivatives "
                "(create_graph=True) are not supported; kansym.nn.spline.bspline_basis is differentiable to any order"
            )
        return backward(ctx, *grads)

    return wrapper


def _features(x, xc, plan, cache, with_base, with_deriv, aux=False):
    if cache is None:
        return features(xc, plan, with_base=with_base, with_deriv=with_deriv, aux=aux)
    return cache.features(x, xc, plan, with_base=with_base, with_deriv=with_deriv, aux=aux)


def _compute_dtype(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


class _Basis(torch.autograd.Function):
    """``x (N, in) -> B(x) / plan.scale (N, K, in)`` with an analytic backward."""

    @staticmethod
    def forward(ctx, x, plan):
        xc = _compute_dtype(x.detach())
        feats, deriv = features(xc, plan, with_base=False, with_deriv=ctx.needs_input_grad[0])
        ctx.save_for_backward(deriv)
        return feats

    @staticmethod
    @_first_order_only
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
        xc = _compute_dtype(x.detach())
        weight, live = _weight(coef, scale_base, scale_sp, mask, plan, with_base)
        weight = weight.view(coef.shape[0], -1)  # (out, (K + with_base) in)
        # native or compiled cubic kernels recompute dF/dx in the backward instead of saving it
        recompute = ctx.needs_input_grad[0] and recomputes_derivative(plan, xc)
        feats, deriv = _features(x, xc, plan, cache, with_base, ctx.needs_input_grad[0] and not recompute, recompute)
        flat = feats.view(xc.shape[0], -1)  # (N, (K + with_base) in)
        out = flat @ _as(weight, flat.dtype).T  # (N, out); autocast may run it in bf16/fp16
        ctx.with_base, ctx.x_dtype, ctx.scale = with_base, x.dtype, plan.scale
        ctx.plan = plan if recompute else None
        ctx.save_for_backward(flat, weight, deriv, xc if recompute else None, coef, scale_sp, mask, live)
        return out

    @staticmethod
    @_first_order_only
    def backward(ctx, grad):  # grad: (N, out)
        flat, weight, deriv, x_saved, coef, scale_sp, mask, live = ctx.saved_tensors
        grad = _as(grad, flat.dtype)
        n_out, width, _ = coef.shape
        g_x = g_coef = g_base = g_sp = None
        if ctx.needs_input_grad[0]:
            w = _as(weight, grad.dtype)
            g_feats = torch.mm(grad, w, out=_workspace(grad.shape[0], w.shape[1], grad))  # (N, (K + with_base) in)
            g_x = _as(_grad_input(ctx, g_feats.view(grad.shape[0], -1, width), deriv, x_saved), ctx.x_dtype)  # (N, in)
        if any(ctx.needs_input_grad[1:4]):
            g_w = _as((grad.T @ flat).view(n_out, -1, width), coef.dtype)  # (out, K + with_base, in)
            g_coef, g_base, g_sp = _param_grads(ctx, g_w, coef, scale_sp, mask, live, ctx.needs_input_grad[1:4])
        return g_x, g_coef, g_base, g_sp, None, None, None, None


_local = threading.local()


WORKSPACE_MAX_BYTES = 16 << 20


def workspace_bytes() -> int:
    """Bytes held by this thread's ``dL/dF`` scratch matrices (see :func:`_workspace`)."""
    pool = getattr(_local, "pool", {})
    return sum(t.numel() * t.element_size() for t in pool.values())


def _workspace(rows: int, cols: int, like: torch.Tensor) -> torch.Tensor | None:
    """A ``(rows, cols)`` scratch matrix reused across backward passes of this thread, or None.

    ``dL/dF`` lives only inside one backward; reusing its memory spares the allocator a
    fresh multi-megabyte block (and its page faults, about a tenth of a 1024 x 64 layer's
    step on CPU) per layer and step. Only up to ``WORKSPACE_MAX_BYTES`` (16 MB) per dtype
    and device are kept; larger matrices are allocated per call, where the faults are
    small next to the matmul.
    """
    if rows * cols * like.element_size() > WORKSPACE_MAX_BYTES:
        return None
    key = (like.dtype, like.device)
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = {}
    buf = pool.get(key)
    if buf is None or buf.numel() < rows * cols:
        buf = pool[key] = torch.empty(rows * cols, dtype=like.dtype, device=like.device)
    return buf[: rows * cols].view(rows, cols)


def _grad_input(ctx, g_feats: torch.Tensor, deriv: torch.Tensor | None, x: torch.Tensor | None) -> torch.Tensor:
    """``dL/dx (N, in)`` from ``dL/dF (N, R, in)`` (any strides; may be overwritten).

    ``deriv`` is ``dF/dx`` or, when the forward chose to recompute it (``ctx.plan`` set),
    the auxiliary tensor of :func:`kansym.nn.fast.kernels.features` for the input ``x``.
    """
    if ctx.plan is None:
        return contract(g_feats, deriv)
    g_x = input_grad(g_feats, x, deriv, ctx.plan, ctx.with_base)
    if g_x is None:  # the kernels were switched off (or failed to compile) since the forward
        g_x = contract(g_feats, features(x, ctx.plan, with_base=ctx.with_base, with_deriv=True)[1])
    return g_x


def _weight(coef, scale_base, scale_sp, mask, plan, with_base):
    """``W (out, K + with_base, in)``: ``w_b mask`` in row 0 and ``c w_s mask scale`` (and ``live = w_s mask scale``)."""
    if native.params_usable(coef, scale_base, scale_sp, mask):
        return native.weight(coef, scale_base, scale_sp, mask, plan.scale, with_base)
    n_out, width, _ = coef.shape
    off = int(with_base)
    live = (scale_sp * mask).mul_(plan.scale)  # (out, in)
    weight = torch.empty(n_out, plan.n_basis + off, width, dtype=coef.dtype, device=coef.device)
    if with_base:
        torch.mul(scale_base, mask, out=weight[:, 0])
    torch.mul(coef.transpose(1, 2), live.unsqueeze(1), out=weight[:, off:])  # (out, K, in)
    return weight, live


def _param_grads(ctx, g_w, coef, scale_sp, mask, live, needs):
    """Gradients of ``coef``, ``scale_base``, ``scale_sp`` from that of ``W`` (out, K + with_base, in)."""
    if native.params_usable(coef, mask, live):
        grads = native.param_grads(g_w, coef, mask, live, ctx.scale, ctx.with_base)  # coef, base, sp
        return tuple(g if need else None for g, need in zip(grads, (needs[0], needs[1], needs[2])))
    off = int(ctx.with_base)
    g_coef = g_base = g_sp = None
    g_spline = g_w[:, off:].transpose(1, 2)  # (out, in, K)
    if needs[0]:
        g_coef = g_spline * live.unsqueeze(-1)
    if needs[2]:
        g_sp = (g_spline * coef).sum(dim=-1) * mask * ctx.scale
    if ctx.with_base and needs[1]:
        g_base = g_w[:, 0] * mask
    return g_coef, g_base, g_sp


class _KANLinearL1(torch.autograd.Function):
    """Node outputs and ``mean_s |phi_ji(x_s)|`` of every edge, one autograd node for both.

    The edge values ``E (in, N, out)`` come from one batched matmul of the features with
    the weights (``(in, out, N)`` from the native kernels of small layers, whose loops run
    over samples) and are saved (the backward needs their signs); nodes are ``E`` summed
    over ``in``. Meant for models whose ``(N, out, in)`` edges fit in memory (training
    small KANs with the sample-based penalty).
    """

    @staticmethod
    def forward(ctx, x, coef, scale_base, scale_sp, mask, plan, with_base, cache):
        xc = _compute_dtype(x.detach())
        weight, live = _weight(coef, scale_base, scale_sp, mask, plan, with_base)  # (out, R, in)
        recompute = ctx.needs_input_grad[0] and recomputes_derivative(plan, xc)
        feats, deriv = _features(x, xc, plan, cache, with_base, ctx.needs_input_grad[0] and not recompute, recompute)
        weight = _as(weight, feats.dtype)
        ctx.native = native.l1_usable(feats, weight)
        if ctx.native:  # small layer: one native pass instead of a batched matmul and its copies
            edges, out, l1 = native.l1_edges(feats, weight)
            w_p = weight  # (out, R, in)
        else:
            w_p = weight.permute(2, 1, 0)  # (in, R, out)
            edges = torch.bmm(feats.permute(2, 0, 1), w_p)  # (in, N, out)
            out = edges.sum(dim=0)  # (N, out)
            l1 = edges.abs().mean(dim=1).T  # (out, in)
        ctx.with_base, ctx.x_dtype, ctx.scale = with_base, x.dtype, plan.scale
        ctx.plan = plan if recompute else None
        ctx.save_for_backward(feats, w_p, deriv, xc if recompute else None, edges, coef, scale_sp, mask, live)
        return out, l1

    @staticmethod
    @_first_order_only
    def backward(ctx, g_out, g_l1):  # (N, out), (out, in)
        feats, w_p, deriv, x_saved, edges, coef, scale_sp, mask, live = ctx.saved_tensors
        if ctx.native:
            g_feats, g_w = native.l1_edges_backward(feats, w_p, edges, g_out, g_l1, ctx.needs_input_grad[0])
            g_x = _as(_grad_input(ctx, g_feats, deriv, x_saved), ctx.x_dtype) if ctx.needs_input_grad[0] else None
            g_coef = g_base = g_sp = None
            if any(ctx.needs_input_grad[1:4]):
                g_coef, g_base, g_sp = _param_grads(ctx, g_w, coef, scale_sp, mask, live, ctx.needs_input_grad[1:4])
            return g_x, g_coef, g_base, g_sp, None, None, None, None
        width, n = edges.shape[0], edges.shape[1]
        g_edges = g_out.to(edges.dtype).unsqueeze(0).expand(width, n, -1)  # (in, N, out)
        if g_l1 is not None:
            g_edges = torch.sign(edges).mul_((g_l1.T.to(edges.dtype) / n).unsqueeze(1)).add_(g_edges)
        g_x = None
        if ctx.needs_input_grad[0]:
            g_feats = torch.bmm(g_edges, w_p.transpose(1, 2))  # (in, N, R)
            g_x = _grad_input(ctx, g_feats.permute(1, 2, 0), deriv, x_saved).to(ctx.x_dtype)  # (N, in)
        g_coef = g_base = g_sp = None
        if any(ctx.needs_input_grad[1:4]):
            g_w = torch.bmm(feats.permute(2, 1, 0), g_edges).permute(2, 1, 0).to(coef.dtype)  # (out, R, in)
            g_coef, g_base, g_sp = _param_grads(ctx, g_w, coef, scale_sp, mask, live, ctx.needs_input_grad[1:4])
        return g_x, g_coef, g_base, g_sp, None, None, None, None


def kan_linear_l1(
    x: torch.Tensor,
    coef: torch.Tensor,
    scale_base: torch.Tensor,
    scale_sp: torch.Tensor,
    mask: torch.Tensor,
    plan: SplinePlan,
    *,
    with_base: bool = True,
    cache: FeatureCache | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Node outputs of a B-spline KAN layer and the L1 norm of each edge on the samples.

    Parameters
    ----------
    x : Tensor (N, in)
    coef, scale_base, scale_sp, mask, plan, with_base, cache
        As in :func:`kan_linear`.

    Returns
    -------
    out : Tensor (N, out)
        As :func:`kan_linear`.
    l1 : Tensor (out, in)
        ``|phi_ji|_1 = mean_s |phi_ji(x_s)|`` (KAN paper eq. 2.17), masked edges 0 with a
        zero gradient; both outputs differentiable in ``x`` and the parameters.

    Notes
    -----
    Holds the ``(N, out, in)`` edge values until the backward: for layers whose edges
    fit in memory (see :func:`kansym.train.regularization.sampled_regularization` for
    the chunked alternative).
    """
    return _KANLinearL1.apply(x, coef, scale_base, scale_sp, mask, plan, with_base, cache)


_BLOCK_ELEMS = 1 << 18  # features per row block of the blocked path (1 MB in float32)
_BLOCKED_MIN_BYTES = 8 << 20  # F above this goes through memory anyway: blocks pay; below, one block is as fast


def _block_kernels(plan: SplinePlan, x: torch.Tensor, with_base: bool):
    """``(features(x_b) -> (F_b, sig_b), input_grad(g_b, x_b, sig_b) -> dL/dx_b)``: the native kernels of ``plan``, bound once."""
    if plan.uniform:
        t0, inv_h, n_basis = _as(plan.t0, x.dtype), _as(plan.inv_h, x.dtype), plan.n_basis
        return (
            lambda xb: native.cubic_features(xb, t0, inv_h, n_basis, with_base),
            lambda gb, xb, sb: native.cubic_input_grad(gb, xb, sb, t0, inv_h),
        )
    return (
        lambda xb: native.piecewise_features(xb, plan, with_base),
        lambda gb, xb, sb: native.piecewise_input_grad(gb, xb, sb, plan),
    )


def _blocked_applies(x: torch.Tensor, plan: SplinePlan, cache, coef, scale_base, scale_sp, mask) -> bool:
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
    )


class _KANLinearBlocked(torch.autograd.Function):
    """:class:`_KANLinear` in row blocks whose features stay in cache, recomputed in the backward.

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
        weight, live = _weight(coef, scale_base, scale_sp, mask, plan, with_base)
        weight = weight.view(coef.shape[0], -1)  # (out, R in)
        n, rows = x.shape[0], max(1, _BLOCK_ELEMS // weight.shape[1])
        out = torch.empty(n, coef.shape[0], dtype=x.dtype)
        sig = torch.empty_like(x) if with_base else None
        feats_of, _ = _block_kernels(plan, x, with_base)
        w_t = weight.T
        for r0 in range(0, n, rows):
            feats, s_b = feats_of(x[r0 : r0 + rows])
            if with_base:
                sig[r0 : r0 + rows] = s_b
            torch.mm(feats.view(feats.shape[0], -1), w_t, out=out[r0 : r0 + rows])
        ctx.plan, ctx.with_base, ctx.scale, ctx.rows = plan, with_base, plan.scale, rows
        ctx.save_for_backward(x, sig, weight, coef, mask, live)
        return out

    @staticmethod
    @_first_order_only
    def backward(ctx, grad):  # (N, out)
        x, sig, weight, coef, mask, live = ctx.saved_tensors
        grad = _as(grad, x.dtype)
        need_x, need_w = ctx.needs_input_grad[0], any(ctx.needs_input_grad[1:4])
        g_x = torch.empty_like(x) if need_x else None
        g_w = torch.zeros_like(weight) if need_w else None
        n, width = x.shape
        feats_of, input_grad_of = _block_kernels(ctx.plan, x, ctx.with_base)
        for r0 in range(0, n, ctx.rows):
            xb, gb = x[r0 : r0 + ctx.rows], grad[r0 : r0 + ctx.rows]
            if need_w:
                feats = feats_of(xb)[0]
                g_w.addmm_(gb.T, feats.view(feats.shape[0], -1))
            if need_x:
                g_feats = torch.mm(gb, weight, out=_workspace(gb.shape[0], weight.shape[1], gb))
                sb = sig[r0 : r0 + ctx.rows] if ctx.with_base else None
                g_x[r0 : r0 + ctx.rows] = input_grad_of(g_feats.view(gb.shape[0], -1, width), xb, sb)
        g_coef = g_base = g_sp = None
        if need_w:
            g_coef, g_base, g_sp = _param_grads(ctx, g_w.view(coef.shape[0], -1, width), coef, None, mask, live,
                                                ctx.needs_input_grad[1:4])
        return g_x, g_coef, g_base, g_sp, None, None, None


class _KANLinearNative(torch.autograd.Function):
    """:class:`_KANLinear` on the native CPU kernels, with their arguments bound once (:func:`kansym.nn.fast.bound.bind`).

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
    @_first_order_only
    def backward(ctx, grad):  # (N, out)
        flat, w2, x, sig, coef, mask, live = ctx.saved_tensors
        bound, needs = ctx.bound, ctx.needs_input_grad
        grad = _as(grad, flat.dtype)
        g_x = g_coef = g_base = g_sp = None
        if needs[0]:
            g_feats = torch.mm(grad, w2, out=_workspace(grad.shape[0], w2.shape[1], grad))  # (N, R in)
            g_x = bound.input_grad(g_feats, x, sig)
        if needs[1] or needs[2] or needs[3]:
            g_coef, g_base, g_sp = bound.param_grads(torch.mm(grad.t(), flat), coef, mask, live)
            g_coef, g_base, g_sp = (g if need else None for g, need in zip((g_coef, g_base, g_sp), needs[1:4]))
        return g_x, g_coef, g_base, g_sp, None, None, None


def _native_bound(x, plan, with_base, coef, scale_base, scale_sp, mask):
    """The bound native kernels when the lean path applies (2-D CPU input of the parameters' float dtype, no autocast)."""
    if x.dim() != 2 or x.dtype is not coef.dtype or not native.params_usable(x, coef, scale_base, scale_sp, mask):
        return None
    if torch.is_autocast_enabled("cpu"):
        return None
    return _bound.bind(plan, x.dtype, with_base)


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
        Reuse the features of ``x`` when it is the tensor seen last (a fixed input).

    Returns
    -------
    Tensor (N, out)
        ``sum_i mask (w_b silu(x_i) + w_s sum_m c_m B_m(x_i))`` (KAN paper eq. 2.10);
        differentiable in ``x``, ``coef``, ``scale_base`` and ``scale_sp``.
    """
    if _blocked_applies(x, plan, cache, coef, scale_base, scale_sp, mask):
        return _KANLinearBlocked.apply(x, coef, scale_base, scale_sp, mask, plan, with_base)
    bound = _native_bound(x, plan, with_base, coef, scale_base, scale_sp, mask)
    if bound is not None:
        kan_op = _op.get()
        if kan_op is not None and not torch.compiler.is_compiling():  # the same work without Python autograd
            feats, sig = (None, None) if cache is None else cache.features(
                x, x, plan, with_base=with_base, with_deriv=False, aux=True)
            return kan_op(x, coef, scale_base, scale_sp, mask, bound.grid, bound.order, with_base, bound.scale,
                          feats, sig)
        return _KANLinearNative.apply(x, coef, scale_base, scale_sp, mask, bound, cache)
    return _KANLinear.apply(x, coef, scale_base, scale_sp, mask, plan, with_base, cache)


def spline_basis(x: torch.Tensor, plan: SplinePlan) -> torch.Tensor:
    """Differentiable basis ``B(x)`` of shape ``(N, in, K)`` (the layout of ``bspline_basis``)."""
    out = _Basis.apply(x, plan) * plan.scale  # (N, K, in)
    return out.transpose(1, 2).to(x.dtype)
