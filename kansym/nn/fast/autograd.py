"""Pieces shared by the KAN layer's autograd functions: the weight assembly and its gradients, scratch, guards.

The layer's matmul weight ``W (out, K + with_base, in)`` holds ``w_b mask`` in row 0 and
``c w_s mask scale`` below (KAN paper eq. 2.10, Liu et al. 2024, arXiv:2404.19756, with the
plan's feature scale folded in); :func:`assemble_weight` builds it and :func:`param_grads` takes the
chain rule back through it, natively on CPU when the C kernels are loaded. See
:mod:`kansym.nn.fast` for the algorithms and their sources.
"""

from __future__ import annotations

import functools
import threading

import torch

from kansym.nn.fast import backends, native
from kansym.nn.fast.kernels import contract, features, input_grad

__all__ = ["first_order_only", "compute_dtype", "assemble_weight", "param_grads", "grad_input", "workspace", "workspace_bytes",
           "WORKSPACE_MAX_BYTES"]

WORKSPACE_MAX_BYTES = 16 << 20
_local = threading.local()


def first_order_only(backward):
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


def compute_dtype(x: torch.Tensor) -> torch.Tensor:
    """``x`` in the dtype the basis is evaluated in: float32 for float16/bfloat16 (autocast), else ``x`` itself."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def workspace_bytes() -> int:
    """Bytes held by this thread's ``dL/dF`` scratch matrices (see :func:`workspace`)."""
    pool = getattr(_local, "pool", {})
    return sum(t.numel() * t.element_size() for t in pool.values())


def workspace(rows: int, cols: int, like: torch.Tensor) -> torch.Tensor | None:
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


def grad_input(ctx, g_feats: torch.Tensor, deriv: torch.Tensor | None, x: torch.Tensor | None) -> torch.Tensor:
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


def assemble_weight(coef, scale_base, scale_sp, mask, plan, with_base):
    """``W (out, K + with_base, in)``: ``w_b mask`` in row 0 and ``c w_s mask scale`` (and ``live = w_s mask scale``).

    Parameters
    ----------
    coef : Tensor (out, in, K)
    scale_base, scale_sp, mask : Tensor (out, in)
    plan : SplinePlan
        Its ``scale`` is folded into ``live``.
    with_base : bool

    Returns
    -------
    W : Tensor (out, K + with_base, in)
    live : Tensor (out, in)
    """
    kernels = backends.native_kernels() if native.params_usable(coef, scale_base, scale_sp, mask) else None
    if kernels is not None:  # (CUDA parameters never ask for the native build)
        return kernels.weight(coef, scale_base, scale_sp, mask, plan.scale, with_base)
    n_out, width, _ = coef.shape
    off = int(with_base)
    live = (scale_sp * mask).mul_(plan.scale)  # (out, in)
    w = torch.empty(n_out, plan.n_basis + off, width, dtype=coef.dtype, device=coef.device)
    if with_base:
        torch.mul(scale_base, mask, out=w[:, 0])
    torch.mul(coef.transpose(1, 2), live.unsqueeze(1), out=w[:, off:])  # (out, K, in)
    return w, live


def param_grads(ctx, g_w, coef, scale_sp, mask, live, needs):
    """Gradients of ``coef``, ``scale_base``, ``scale_sp`` from that of ``W`` (out, K + with_base, in).

    ``needs`` says which of the three are wanted (the others come back None); ``ctx``
    carries ``with_base`` and the plan's ``scale``.
    """
    kernels = backends.native_kernels() if native.params_usable(coef, mask, live) else None
    if kernels is not None:
        grads = kernels.param_grads(g_w, coef, mask, live, ctx.scale, ctx.with_base)  # coef, base, sp
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
