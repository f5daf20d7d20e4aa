"""Sparsity regularisation of KANs: L1 of the edge functions plus their entropy.

Source: Liu et al. 2024, "KAN: Kolmogorov–Arnold Networks", arXiv:2404.19756,
§2.5.1, eqs. 2.17–2.20 (docs/algorithms.md §3):

- ``|phi|_1 = (1 / N) sum_s |phi(x_s)|`` (eq. 2.17), the mean magnitude of an
  edge function on the samples;
- ``|Phi|_1 = sum_ij |phi_ij|_1`` (eq. 2.18), the L1 norm of a layer;
- ``S(Phi) = -sum_ij p_ij log p_ij`` with ``p_ij = |phi_ij|_1 / |Phi|_1`` (eq. 2.19);
- ``reg = sum_l mu1 |Phi_l|_1 + mu2 S(Phi_l)`` (eq. 2.20), added to the prediction
  loss with weight ``lamb`` by :func:`kansym.train.fit.fit`.

:func:`regularization` uses sampled activations (a :class:`kansym.nn.KANTrace`), as the
paper does. :func:`weight_regularization` replaces ``|phi_ij|_1`` by the weight proxy
``mean_k |c_ijk| * |w_s,ij|`` so that models too large for a ``(batch, out, in)``
activation tensor (KAN-GPT) can be sparsified too; it ignores the residual weights
``w_b`` (as efficient-kan's regulariser does) and does not depend on the data.
:func:`sampled_regularization` computes the same penalty as :func:`regularization`
from the inputs, in row chunks whose ``(chunk, out, in)`` edge values are recomputed
in the backward (activation checkpointing) instead of kept: memory
``O(chunk out in)`` instead of ``O(batch out in)`` per layer, for one extra evaluation
of the edges; the model output comes from the fast layer path. A layer whose
``(batch, out, in)`` values fit in one chunk is evaluated in one pass instead
(:meth:`kansym.nn.KANLayer.forward_l1`: one autograd node for the node values and
``|phi_ij|_1``), which is what training the small KANs of formula discovery uses.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from kansym.errors import ConfigError
from kansym.nn.fast import FeatureCache
from kansym.nn.kan import KAN, KANTrace

__all__ = [
    "edge_l1",
    "edge_weight_l1",
    "layer_penalty",
    "regularization",
    "sampled_regularization",
    "training_loss",
    "weight_regularization",
]

CHUNK_ELEMENTS = 1 << 20  # default largest (chunk, out, in) block of edge values held at once


def edge_l1(trace: KANTrace) -> list[torch.Tensor]:
    """Mean magnitude of every edge function on the traced samples.

    Parameters
    ----------
    trace : KANTrace
        Activations of a batch, from :meth:`kansym.nn.KAN.trace`.

    Returns
    -------
    list of Tensor (out, in)
        One per layer: ``|phi_ij|_1 = mean_s |phi_ij(x_s)|`` (KAN paper eq. 2.17);
        differentiable, and masked edges give exactly 0 with a 0 gradient.
    """
    return [layer.edges.abs().mean(dim=0) for layer in trace.layers]


def edge_weight_l1(model: KAN) -> list[torch.Tensor]:
    """Data-free proxy of ``|phi_ij|_1``: ``mean_k |c_ijk| * |w_s,ij|`` per live edge.

    Parameters
    ----------
    model : KAN

    Returns
    -------
    list of Tensor (out, in)
        One per layer; masked edges are 0.
    """
    return [
        layer.coef.abs().mean(dim=-1) * layer.scale_sp.abs() * layer.mask  # (out, in)
        for layer in model.layers
    ]


def layer_penalty(scores: torch.Tensor, *, mu1: float = 1.0, mu2: float = 1.0) -> torch.Tensor:
    """``mu1 |Phi|_1 + mu2 S(Phi)`` of one layer from its edge magnitudes.

    Parameters
    ----------
    scores : Tensor (out, in)
        Non-negative ``|phi_ij|_1`` of the layer's edges.
    mu1, mu2 : float
        Weights of the L1 and entropy terms (KAN paper eq. 2.20).

    Returns
    -------
    Tensor (scalar)

    Notes
    -----
    ``0 log 0`` is taken as 0 and the gradient stays finite (zero) for edges whose
    magnitude is exactly 0, such as masked ones; a layer whose edges are all 0 has
    entropy 0.
    """
    total = scores.sum()
    if mu2 == 0:  # the same value and gradient as adding 0 * entropy, without its ten ops
        return mu1 * total
    p = scores / total.clamp_min(torch.finfo(scores.dtype).tiny)  # (out, in)
    positive = p > 0
    safe = torch.where(positive, p, torch.ones_like(p))
    entropy = -torch.where(positive, p * torch.log(safe), torch.zeros_like(p)).sum()
    return mu1 * total + mu2 * entropy


def _check(mu1: float, mu2: float) -> None:
    if mu1 < 0 or mu2 < 0:
        raise ConfigError(f"mu1 and mu2 must be >= 0, got mu1={mu1}, mu2={mu2}")


def regularization(trace: KANTrace, *, mu1: float = 1.0, mu2: float = 1.0) -> torch.Tensor:
    """Sparsity penalty of a traced KAN, ``sum_l mu1 |Phi_l|_1 + mu2 S(Phi_l)``.

    Parameters
    ----------
    trace : KANTrace
        Activations of the (training) batch.
    mu1, mu2 : float
        Weights of the L1 and entropy terms (KAN paper eqs. 2.18–2.20).

    Returns
    -------
    Tensor (scalar)
        Differentiable with respect to the model's parameters.

    Raises
    ------
    ConfigError
        If ``mu1`` or ``mu2`` is negative.
    """
    _check(mu1, mu2)
    terms = [layer_penalty(s, mu1=mu1, mu2=mu2) for s in edge_l1(trace)]
    return torch.stack(terms).sum()


def weight_regularization(model: KAN, *, mu1: float = 1.0, mu2: float = 1.0) -> torch.Tensor:
    """The weight-based sparsity penalty (no activations needed).

    Same aggregation as :func:`regularization` with ``|phi_ij|_1`` replaced by
    :func:`edge_weight_l1` (``mean_k |c_ijk| * |w_s,ij|``); meant for models whose
    ``(batch, out, in)`` edge activations do not fit in memory.

    Parameters
    ----------
    model : KAN
    mu1, mu2 : float
        Weights of the L1 and entropy terms.

    Returns
    -------
    Tensor (scalar)

    Raises
    ------
    ConfigError
        If ``mu1`` or ``mu2`` is negative.
    """
    _check(mu1, mu2)
    terms = [layer_penalty(s, mu1=mu1, mu2=mu2) for s in edge_weight_l1(model)]
    return torch.stack(terms).sum()


def _abs_edge_sum(layer, x: torch.Tensor) -> torch.Tensor:
    return layer.edge_outputs(x).abs().sum(dim=0)  # (out, in)


def sampled_regularization(
    model: KAN, x: torch.Tensor, *, mu1: float = 1.0, mu2: float = 1.0, chunk_elements: int = CHUNK_ELEMENTS,
    feature_cache: FeatureCache | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Model output and the sample-based penalty, without keeping ``(batch, out, in)`` tensors.

    Equals ``(model.trace(x).output, regularization(model.trace(x), mu1=mu1, mu2=mu2))``
    (KAN paper eqs. 2.17–2.20) to rounding, values and gradients. Each layer's
    ``|phi_ij|_1 = mean_s |phi_ij(x_s)|`` is summed over row chunks of at most
    ``chunk_elements`` edge values; a chunk's edge values are freed after the forward and
    recomputed in the backward (``torch.utils.checkpoint``). The node values come from
    the fast layer forward (one matmul per layer). A layer whose whole batch fits in one
    chunk takes the one-pass :meth:`kansym.nn.KANLayer.forward_l1` (no recomputation).

    Parameters
    ----------
    model : KAN
    x : Tensor (batch, in)
    mu1, mu2 : float
        Weights of the L1 and entropy terms.
    chunk_elements : int
        Largest ``chunk * out * in`` held at once.
    feature_cache : FeatureCache, optional
        Handed to the first layer (see :meth:`kansym.nn.KAN.forward`).

    Returns
    -------
    output : Tensor (batch, out)
    penalty : Tensor (scalar)

    Raises
    ------
    ConfigError
        If ``mu1`` or ``mu2`` is negative.
    """
    _check(mu1, mu2)
    terms = []
    h, cache = x, feature_cache
    for layer in model.layers:
        rows = max(1, chunk_elements // (layer.in_features * layer.out_features))
        if rows >= h.shape[0]:
            h, l1 = layer.forward_l1(h, cache=cache)  # (batch, out), (out, in)
            terms.append(layer_penalty(l1, mu1=mu1, mu2=mu2))
            cache = None  # the first layer's only
            continue
        total = None
        for start in range(0, h.shape[0], rows):
            part = checkpoint(_abs_edge_sum, layer, h[start : start + rows], use_reentrant=False)
            total = part if total is None else total + part
        terms.append(layer_penalty(total / h.shape[0], mu1=mu1, mu2=mu2))
        h, cache = layer(h, cache=cache), None
    return h, torch.stack(terms).sum()


class _MSEPlusL1(torch.autograd.Function):
    """``mean((out - y)^2) + lamb * sum_l mu1 sum_ij l1_l[i, j]`` as one autograd node.

    The forward runs the same tensor ops as the composed expression (same value bit for
    bit); the backward is the analytic gradient, ``2 (out - y) / N`` for ``out`` and
    ``lamb mu1`` for every ``|phi_ij|_1``, the products autograd forms there too.
    """

    @staticmethod
    def forward(ctx, out, y, lamb, mu1, *l1s):  # out, y (N, d_out); l1s (out_l, in_l) each
        diff = out - y
        mse = torch.mean(diff**2)
        ctx.save_for_backward(diff)
        ctx.weight, ctx.shapes = lamb * mu1, [l1.shape for l1 in l1s]
        reg = torch.stack([mu1 * l1.sum() for l1 in l1s]).sum()
        return mse + lamb * reg

    @staticmethod
    def backward(ctx, grad):
        (diff,) = ctx.saved_tensors
        g_out = diff * (grad * (2.0 / diff.numel())) if ctx.needs_input_grad[0] else None
        g_l1 = [torch.full(shape, ctx.weight, dtype=diff.dtype, device=diff.device) * grad for shape in ctx.shapes]
        return (g_out, None, None, None, *g_l1)


def training_loss(
    model: KAN, x: torch.Tensor, y: torch.Tensor, *, lamb: float, mu1: float = 1.0, mu2: float = 1.0,
    chunk_elements: int = CHUNK_ELEMENTS, feature_cache: FeatureCache | None = None,
) -> torch.Tensor:
    """The objective a training step minimises: ``mean((model(x) - y)^2) + lamb * reg``.

    ``reg`` is :func:`sampled_regularization`'s penalty (KAN paper eq. 2.20), left out
    when ``lamb == 0``. Equal in value to composing those functions (bit for bit), and in
    gradient to rounding. When the penalty is the L1 term alone (``mu2 == 0``, the
    default of :class:`~kansym.train.config.TrainConfig`) and every layer's edge values
    fit in one chunk, the loss and penalty after the layers are one autograd node with
    a hand-written backward instead of about ten built-in ones (the sparsifying LBFGS
    closure of the hello world's ``[2, 5, 1]`` KAN: 1.12 -> 1.03 ms, best of 30 x 20).

    Parameters
    ----------
    model : KAN
    x : Tensor (batch, in)
    y : Tensor (batch, out)
    lamb, mu1, mu2 : float
        Penalty weight and the weights of its L1 and entropy terms.
    chunk_elements : int
        As :func:`sampled_regularization`.
    feature_cache : FeatureCache, optional
        Handed to the first layer (see :meth:`kansym.nn.KAN.forward`).

    Returns
    -------
    Tensor (scalar)

    Raises
    ------
    ConfigError
        If ``mu1`` or ``mu2`` is negative.
    """
    _check(mu1, mu2)
    if lamb == 0:  # three built-in nodes cost what one Python-backward node does
        return torch.mean((model(x, feature_cache=feature_cache) - y) ** 2)
    one_pass = all(max(1, chunk_elements // (layer.in_features * layer.out_features)) >= x.shape[0]
                   for layer in model.layers)
    if mu2 != 0 or not one_pass:
        out, reg = sampled_regularization(model, x, mu1=mu1, mu2=mu2, chunk_elements=chunk_elements,
                                          feature_cache=feature_cache)
        return torch.mean((out - y) ** 2) + lamb * reg
    h, l1s, cache = x, [], feature_cache
    for layer in model.layers:
        h, l1 = layer.forward_l1(h, cache=cache)  # (batch, out), (out, in)
        l1s.append(l1)
        cache = None  # the first layer's only
    return _MSEPlusL1.apply(h, y, lamb, mu1, *l1s)
