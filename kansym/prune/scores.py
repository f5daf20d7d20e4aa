"""Importance scores of KAN edges and hidden nodes, measured on data.

Source: Liu et al. 2024, "KAN: Kolmogorov–Arnold Networks", arXiv:2404.19756,
§2.5.1 (docs/algorithms.md §4). An edge's score is ``|phi|_1 = mean_s |phi(x_s)|`` (eq. 2.17);
hidden node ``i`` of layer ``l`` has the incoming score
``I_{l,i} = max_j |phi_{l-1,i,j}|_1`` and the outgoing score
``O_{l,i} = max_k |phi_{l+1,k,i}|_1``.
"""

from __future__ import annotations

from typing import Any

import torch

from kansym.errors import ConfigError
from kansym.nn.kan import KAN
from kansym.train.regularization import edge_l1

__all__ = ["edge_scores", "node_scores", "input_scores"]


def _inputs(model: KAN, x: Any) -> torch.Tensor:
    ref = model.layers[0].coef
    t = torch.as_tensor(x).to(device=ref.device, dtype=ref.dtype)
    if t.ndim != 2 or t.shape[1] != model.in_features:
        raise ConfigError(f"scores need x of shape (rows, {model.in_features}), got {tuple(t.shape)}")
    if t.shape[0] == 0:
        raise ConfigError("scores need at least one row of data")
    return t


@torch.no_grad()
def edge_scores(model: KAN, x: Any) -> list[torch.Tensor]:
    """``|phi_ij|_1`` of every edge on the samples ``x``.

    Parameters
    ----------
    model : KAN
    x : array-like (N, in)
        Model inputs (scaled like the training data).

    Returns
    -------
    list of Tensor (out, in)
        One per layer; masked edges score 0.

    Raises
    ------
    ConfigError
        If ``x`` is not ``(N, in_features)`` with ``N >= 1``.
    """
    return [s.detach() for s in edge_l1(model.trace(_inputs(model, x)))]


def node_scores_from_edges(edges: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Incoming and outgoing scores of the hidden nodes from edge scores.

    Parameters
    ----------
    edges : list of Tensor (out, in)
        Edge scores per layer (as :func:`edge_scores` returns).

    Returns
    -------
    list of (Tensor (n_l,), Tensor (n_l,))
        For hidden layers ``l = 1 .. L-1`` (index ``l - 1`` of the list):
        ``(I_l, O_l)`` with ``I_{l,i} = max_j edges[l-1][i, j]`` and
        ``O_{l,i} = max_k edges[l][k, i]``.
    """
    return [(edges[l - 1].amax(dim=1), edges[l].amax(dim=0)) for l in range(1, len(edges))]


def node_scores(model: KAN, x: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Incoming and outgoing scores of every hidden node (KAN paper §2.5.1).

    Parameters
    ----------
    model : KAN
    x : array-like (N, in)

    Returns
    -------
    list of (Tensor (n_l,), Tensor (n_l,))
        ``(I_l, O_l)`` for hidden layers ``l = 1 .. L-1``; empty for a one-layer KAN.

    Raises
    ------
    ConfigError
        If ``x`` does not fit the model.
    """
    return node_scores_from_edges(edge_scores(model, x))


def input_scores(model: KAN, x: Any) -> torch.Tensor:
    """Largest outgoing edge score of each input feature, shape (in,)."""
    return edge_scores(model, x)[0].amax(dim=0)
