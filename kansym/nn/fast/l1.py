"""Node outputs of a KAN layer and the sample-based L1 norm of every edge, in one autograd node.

``|phi_ji|_1 = mean_s |phi_ji(x_s)|`` (Liu et al. 2024, "KAN: Kolmogorov–Arnold Networks",
arXiv:2404.19756, eq. 2.17), the penalty of sparsifying training
(:func:`kansym.train.regularization.training_loss`). See :mod:`kansym.nn.fast` for the
basis algorithms and their sources.
"""

from __future__ import annotations

import torch

from kansym.nn.fast import backends, native
from kansym.nn.fast.autograd import assemble_weight, compute_dtype, first_order_only, grad_input, param_grads
from kansym.nn.fast.cache import FeatureCache, features_of
from kansym.nn.fast.kernels import recomputes_derivative
from kansym.nn.fast.native import _as
from kansym.nn.fast.plan import SplinePlan

__all__ = ["kan_linear_l1"]


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
        xc = compute_dtype(x.detach())
        weight, live = assemble_weight(coef, scale_base, scale_sp, mask, plan, with_base)  # (out, R, in)
        recompute = ctx.needs_input_grad[0] and recomputes_derivative(plan, xc)
        feats, deriv = features_of(x, xc, plan, cache, with_base, ctx.needs_input_grad[0] and not recompute, recompute)
        weight = _as(weight, feats.dtype)
        ctx.native = backends.native_kernels() if native.l1_usable(feats, weight) else None
        if ctx.native is not None:  # small layer: one native pass instead of a batched matmul and its copies
            edges, out, l1 = ctx.native.l1_edges(feats, weight)
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
    @first_order_only
    def backward(ctx, g_out, g_l1):  # (N, out), (out, in)
        feats, w_p, deriv, x_saved, edges, coef, scale_sp, mask, live = ctx.saved_tensors
        if ctx.native is not None:  # the kernels of the forward (even if switched off since)
            g_feats, g_w = ctx.native.l1_edges_backward(feats, w_p, edges, g_out, g_l1, ctx.needs_input_grad[0])
            g_x = _as(grad_input(ctx, g_feats, deriv, x_saved), ctx.x_dtype) if ctx.needs_input_grad[0] else None
            g_coef = g_base = g_sp = None
            if any(ctx.needs_input_grad[1:4]):
                g_coef, g_base, g_sp = param_grads(ctx, g_w, coef, scale_sp, mask, live, ctx.needs_input_grad[1:4])
            return g_x, g_coef, g_base, g_sp, None, None, None, None
        width, n = edges.shape[0], edges.shape[1]
        g_edges = g_out.to(edges.dtype).unsqueeze(0).expand(width, n, -1)  # (in, N, out)
        if g_l1 is not None:
            g_edges = torch.sign(edges).mul_((g_l1.T.to(edges.dtype) / n).unsqueeze(1)).add_(g_edges)
        g_x = None
        if ctx.needs_input_grad[0]:
            g_feats = torch.bmm(g_edges, w_p.transpose(1, 2))  # (in, N, R)
            g_x = grad_input(ctx, g_feats.permute(1, 2, 0), deriv, x_saved).to(ctx.x_dtype)  # (N, in)
        g_coef = g_base = g_sp = None
        if any(ctx.needs_input_grad[1:4]):
            g_w = torch.bmm(feats.permute(2, 1, 0), g_edges).permute(2, 1, 0).to(coef.dtype)  # (out, R, in)
            g_coef, g_base, g_sp = param_grads(ctx, g_w, coef, scale_sp, mask, live, ctx.needs_input_grad[1:4])
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
