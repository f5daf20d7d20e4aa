"""Attention heads of a KAN-GPT: overlap of output projections, attention similarity,
ablation importance and an orthogonality penalty (docs/algorithms.md §10; reordering: head_order.py).

Per layer, the output projection of head ``h`` is ``W_O^(h)``, ``(d_head, C)``: the
attention output is ``sum_h y_h W_O^(h)``. Two overlap measures between heads ``i, j``:

- the seed's score ``||W_i W_j^T||_F^2 / (||W_i||_F^2 ||W_j||_F^2)``
  (:func:`frobenius_overlap`). It depends on the basis inside each head: replacing
  ``W_i`` by ``A W_i`` and the head's values by ``v A^{-1}`` (``A`` invertible) leaves
  the model's function unchanged but changes the score (:func:`change_head_basis`).
  For identical heads it equals ``sum s^4 / (sum s^2)^2`` over the singular values
  ``s`` of ``W_i``: 1 only for rank-one heads, ``1 / d_head`` for isotropic ones.
- principal angles between the row spaces of ``W_i`` and ``W_j`` (Björck & Golub 1973,
  "Numerical methods for computing angles between linear subspaces", Math. Comp. 27):
  with ``Q_i`` an orthonormal basis of the row space, the cosines are the singular
  values of ``Q_i^T Q_j`` (:func:`principal_cosines`). :func:`principal_overlap` reports
  their mean square (``||Q_i^T Q_j||_F^2 / k``) or the largest; both are invariant to
  any in-head change of basis. Identical heads score 1, orthogonal row spaces 0;
  random heads about ``d_head / C``.

Overlapping ``W_O`` is not the only redundancy: :func:`attention_similarity` compares
what heads attend to (Jensen–Shannon divergence, Lin 1991, IEEE Trans. Inf. Theory
37(1)), and :mod:`kansym.gpt.ablation` measures the loss increase when heads are removed
(Michel et al. 2019, "Are Sixteen Heads Really Better than One?", arXiv:1905.10650;
Voita et al. 2019, arXiv:1905.09418).
"""

from __future__ import annotations

import math
import torch

from kansym.errors import ConfigError
from kansym.gpt.model import KANGPT

__all__ = [
    "OVERLAP_KINDS", "frobenius_overlap", "principal_cosines", "principal_overlap", "pair_mean",
    "head_output_projections", "change_head_basis", "attention_maps", "attention_similarity",
    "ortho_penalty", "wo_sq_norm", "overlap", "overlap_summary",
]

OVERLAP_KINDS = ("frobenius", "principal")


def _check_wo(W_O: torch.Tensor) -> torch.Tensor:
    if W_O.dim() != 3:
        raise ConfigError(f"W_O must have shape (H, d_head, d_model), got {tuple(W_O.shape)}")
    return W_O


def frobenius_overlap(W_O: torch.Tensor) -> torch.Tensor:
    """The seed's entanglement score between every pair of heads (basis dependent).

    ``F[i, j] = ||W_i W_j^T||_F^2 / (||W_i||_F^2 ||W_j||_F^2)``; a head of zeros scores 0.
    Differentiable.

    Parameters
    ----------
    W_O : Tensor (H, d_head, d_model)
        Per-head output projections.

    Returns
    -------
    Tensor (H, H)
        Symmetric, entries in [0, 1].

    Raises
    ------
    ConfigError
        If ``W_O`` is not three-dimensional.
    """
    W = _check_wo(W_O)
    cross = torch.einsum("hdc,gec->hgde", W, W)  # (H, H, d, d): W_i W_j^T
    sq = W.pow(2).sum(dim=(1, 2))  # (H,)
    denom = sq[:, None] * sq[None, :]  # (H, H)
    return cross.pow(2).sum(dim=(2, 3)) / denom.clamp_min(torch.finfo(W.dtype).tiny)


def _row_bases(W: torch.Tensor, rtol: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """Orthonormal bases of the row spaces, (H, C, d) (zero columns past the rank), and ranks (H,).

    With gradients on, a reduced QR of ``W_h^T`` (differentiable; the heads must have full
    row rank, as trained heads do); otherwise an SVD that drops singular values below
    ``rtol`` times the largest.
    """
    if W.requires_grad and torch.is_grad_enabled():
        Q, _ = torch.linalg.qr(W.transpose(1, 2))  # (H, C, d)
        return Q, torch.full((W.shape[0],), W.shape[1], device=W.device)
    _, S, Vh = torch.linalg.svd(W, full_matrices=False)  # S (H, d), Vh (H, d, C)
    keep = S > rtol * S.amax(dim=1, keepdim=True).clamp_min(torch.finfo(W.dtype).tiny)  # (H, d)
    return (Vh * keep[..., None]).transpose(1, 2), keep.sum(dim=1)  # (H, C, d), (H,)


def principal_cosines(W_O: torch.Tensor) -> torch.Tensor:
    """Cosines of the principal angles between the row spaces of every pair of heads.

    Parameters
    ----------
    W_O : Tensor (H, d_head, d_model)

    Returns
    -------
    Tensor (H, H, d_head)
        ``[i, j]``: the singular values of ``Q_i^T Q_j`` in decreasing order (Björck &
        Golub 1973), padded with zeros past ``min(rank_i, rank_j)``.
    """
    Q, _ = _row_bases(_check_wo(W_O).detach())
    return torch.linalg.svdvals(torch.einsum("hcd,gce->hgde", Q, Q))  # (H, H, d)


def principal_overlap(W_O: torch.Tensor, reduce: str = "mean") -> torch.Tensor:
    """Basis-invariant overlap of every pair of heads' row spaces.

    Parameters
    ----------
    W_O : Tensor (H, d_head, d_model)
    reduce : {"mean", "max"}
        ``"mean"``: mean cos² of the ``k = min(rank_i, rank_j)`` principal angles,
        ``||Q_i^T Q_j||_F^2 / k`` (differentiable when ``W_O`` requires grad; then each
        head must have full row rank); ``"max"``: the largest cosine.

    Returns
    -------
    Tensor (H, H)
        Entries in [0, 1]; 1 on the diagonal (for non-zero heads).

    Raises
    ------
    ConfigError
        Bad shape or ``reduce``.
    """
    W = _check_wo(W_O)
    if reduce == "max":
        return principal_cosines(W)[..., 0]
    if reduce != "mean":
        raise ConfigError(f"reduce must be 'mean' or 'max', got {reduce!r}")
    Q, rank = _row_bases(W)
    k = torch.minimum(rank[:, None], rank[None, :]).to(W.dtype)  # (H, H)
    return torch.einsum("hcd,gce->hgde", Q, Q).pow(2).sum(dim=(2, 3)) / k.clamp_min(1)


def pair_mean(matrix: torch.Tensor) -> torch.Tensor:
    """Mean of the entries above the diagonal of an (H, H) matrix (0 for H = 1)."""
    H = matrix.shape[-1]
    i, j = torch.triu_indices(H, H, offset=1)
    return matrix[..., i, j].mean(dim=-1) if len(i) else matrix.new_zeros(matrix.shape[:-2])


def _layer(model: KANGPT, layer: int) -> int:
    n = model.config.n_layer
    if not -n <= layer < n:
        raise ConfigError(f"layer {layer} is out of range; the model has {n} layers (0..{n - 1})")
    return layer % n


def head_output_projections(model: KANGPT, layer: int) -> torch.Tensor:
    """``W_O`` of one layer, (H, d_head, C), in stored head order: a view (gradients flow).

    Raises
    ------
    ConfigError
        If ``layer`` is out of range.
    """
    return model.blocks[_layer(model, layer)].attn.head_output_weights()


def overlap(W_O: torch.Tensor, kind: str) -> torch.Tensor:
    """``frobenius_overlap`` or mean-cos² ``principal_overlap`` by name (``kind`` in :data:`OVERLAP_KINDS`).

    Raises
    ------
    ConfigError
        For an unknown ``kind``.
    """
    if kind == "frobenius":
        return frobenius_overlap(W_O)
    if kind == "principal":
        return principal_overlap(W_O)
    raise ConfigError(f"unknown overlap kind {kind!r}; use {' or '.join(OVERLAP_KINDS)}")


def ortho_penalty(model: KANGPT, kind: str = "principal") -> torch.Tensor:
    """Orthogonality penalty: mean over layers of ``mean_{i<j}`` overlap of ``W_O`` heads.

    Training adds ``ortho_lambda * ortho_penalty(model, kind)`` to the loss
    (``kind="frobenius"`` is the seed's penalty, ``"principal"`` the basis-invariant one).

    Returns
    -------
    Tensor (scalar), differentiable in the ``c_proj`` weights.

    Raises
    ------
    ConfigError
        For a ``kind`` other than ``"frobenius"`` or ``"principal"``.
    """
    return torch.stack([pair_mean(overlap(b.attn.head_output_weights(), kind)) for b in model.blocks]).mean()


def wo_sq_norm(model: KANGPT) -> torch.Tensor:
    """Mean over layers of ``||W_O||_F^2`` (all heads): the plain L2 control penalty. Differentiable."""
    return torch.stack([b.attn.c_proj.weight.pow(2).sum() for b in model.blocks]).mean()


@torch.no_grad()
def overlap_summary(model: KANGPT) -> dict[str, list[float]]:
    """Per layer ``mean_{i<j}`` of both overlap measures (and the largest principal cosine).

    Returns
    -------
    dict
        ``{"frobenius": [...], "principal": [...], "principal_max": [...]}``, one value per layer.
    """
    out: dict[str, list[float]] = {"frobenius": [], "principal": [], "principal_max": []}
    for block in model.blocks:
        W = block.attn.head_output_weights().detach()
        out["frobenius"].append(pair_mean(frobenius_overlap(W)).item())
        out["principal"].append(pair_mean(principal_overlap(W)).item())
        out["principal_max"].append(pair_mean(principal_overlap(W, "max")).item())
    return out


@torch.no_grad()
def change_head_basis(model: KANGPT, layer: int, head: int, A: torch.Tensor) -> KANGPT:
    """A copy of ``model`` with head ``head``'s basis changed; the function is unchanged.

    ``W_O^(h) -> A W_O^(h)`` and the head's value rows ``W_V^(h) -> A^{-T} W_V^(h)`` (and
    value bias), so ``y_h -> y_h A^{-1}`` and ``y_h W_O^(h)`` is unchanged (up to rounding).

    Parameters
    ----------
    model : KANGPT
    layer, head : int
        Stored indices.
    A : Tensor (d_head, d_head)
        Invertible.

    Returns
    -------
    KANGPT

    Raises
    ------
    ConfigError
        Bad indices, shape, or a singular ``A``.
    """
    attn = model.blocks[_layer(model, layer)].attn
    hs = attn.head_dim
    if not 0 <= head < attn.n_head:
        raise ConfigError(f"head {head} is out of range; the layer has {attn.n_head} heads")
    if tuple(A.shape) != (hs, hs):
        raise ConfigError(f"A must be ({hs}, {hs}), got {tuple(A.shape)}")
    A = A.to(attn.c_proj.weight.dtype)
    if torch.linalg.matrix_rank(A) < hs:
        raise ConfigError("A is singular; an in-head change of basis needs an invertible matrix")
    new = KANGPT.from_state(model.state())
    attn = new.blocks[_layer(model, layer)].attn
    cols = slice(head * hs, (head + 1) * hs)
    rows = slice(2 * attn.n_embd + head * hs, 2 * attn.n_embd + (head + 1) * hs)  # value rows
    attn.c_proj.weight[:, cols] = attn.c_proj.weight[:, cols] @ A.T  # W_O^(h) = weight[:, cols].T
    inv_t = torch.linalg.inv(A).T  # (hs, hs)
    attn.c_attn.weight[rows] = inv_t @ attn.c_attn.weight[rows]
    if attn.c_attn.bias is not None:
        attn.c_attn.bias[rows] = inv_t @ attn.c_attn.bias[rows]
    new.train(model.training)
    return new


@torch.no_grad()
def attention_maps(model: KANGPT, idx: torch.Tensor, layer: int) -> torch.Tensor:
    """Attention probabilities of every head of one layer on a batch of tokens.

    Parameters
    ----------
    model : KANGPT
    idx : LongTensor (B, T)
    layer : int

    Returns
    -------
    Tensor (B, H, T, T)
        ``[b, h, t, s]``: weight of key ``s`` for query ``t`` (zero for ``s > t``), stored head order.
    """
    layer = _layer(model, layer)
    attn = model.blocks[layer].attn
    captured = {}
    handle = attn.register_forward_pre_hook(lambda mod, args: captured.setdefault("x", args[0]))
    try:
        was = model.training
        model.eval()
        model(idx)
        model.train(was)
    finally:
        handle.remove()
    x = captured["x"]  # (B, T, C), ln_1 output
    B, T, C = x.shape
    W = attn.head_qkv_weights()  # (3, H, hs, C), stored order
    bias = None if attn.c_attn.bias is None else attn.c_attn.bias.view(3, attn.n_head, attn.head_dim)
    q = torch.einsum("btc,hdc->bhtd", x, W[0])  # (B, H, T, hs)
    k = torch.einsum("btc,hdc->bhtd", x, W[1])  # (B, H, T, hs)
    if bias is not None:
        q, k = q + bias[0][None, :, None], k + bias[1][None, :, None]
    scores = q @ k.transpose(-1, -2) / math.sqrt(attn.head_dim)  # (B, H, T, T)
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    return scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)


@torch.no_grad()
def attention_similarity(model: KANGPT, idx: torch.Tensor, layer: int) -> torch.Tensor:
    """Similarity ``1 - JS / ln 2`` of every pair of heads' attention maps.

    The Jensen–Shannon divergence (Lin 1991) between the two heads' attention
    distributions over keys, in nats, is averaged over the batch and over the query
    positions ``t >= 1`` (at ``t = 0`` every head attends to the first token only).

    Parameters
    ----------
    model : KANGPT
    idx : LongTensor (B, T), ``T >= 2``
        Real text.
    layer : int

    Returns
    -------
    Tensor (H, H)
        1 for identical attention, 0 for attention on disjoint keys.
    """
    P = attention_maps(model, idx, layer)[:, :, 1:]  # (B, H, T-1, T)
    if P.shape[2] == 0:
        raise ConfigError("attention similarity needs sequences of at least 2 tokens")
    Pi, Pj = P[:, :, None], P[:, None, :]  # (B, H, 1, T-1, T), (B, 1, H, T-1, T)
    M = 0.5 * (Pi + Pj)  # (B, H, H, T-1, T)
    js = 0.5 * (torch.xlogy(Pi, Pi) - torch.xlogy(Pi, M) + torch.xlogy(Pj, Pj) - torch.xlogy(Pj, M)).sum(-1)
    return 1.0 - js.mean(dim=(0, 3)).clamp_min(0) / math.log(2.0)  # (H, H)
