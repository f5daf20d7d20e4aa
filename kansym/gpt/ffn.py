"""Feed-forward blocks of a KAN-GPT: MLP, KAN, KAN with a linear shortcut.

All map ``(B, T, C) -> (B, T, C)``. The KAN FFN replaces GPT-2's
``Linear(C, 4C) -> GELU -> Linear(4C, C)`` by two KAN layers ``C -> h -> C``
(Liu et al. 2024, "KAN: Kolmogorov–Arnold Networks", arXiv:2404.19756, eq. 2.10), on
any basis of :mod:`kansym.nn.bases`.

Sparsification here is *weight-based* (DESIGN.md §3): the magnitude of edge ``(i, j)``
is ``|w_b,ji| + |w_s,ji| mean_k |c_jik|`` instead of the sampled ``mean_s |phi_ji(x_s)|``
of the paper's eq. 2.17, because a ``(B T, out, in)`` activation tensor per layer is
too large for a GPT. Unlike :func:`kansym.train.regularization.edge_weight_l1` it
includes the SiLU residual weight ``w_b``: an edge is only negligible when both parts
are, which is what node pruning needs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from kansym.gpt.config import KANGPTConfig
from kansym.nn.bases import make_kan_layer

__all__ = ["MLPFFN", "KANFFN", "build_ffn", "edge_scores", "sparsity_penalty"]


class MLPFFN(nn.Module):
    """GPT-2 feed-forward: ``Linear(C, h) -> GELU -> Linear(h, C) -> Dropout``."""

    kind = "mlp"

    def __init__(self, n_embd: int, hidden: int, *, bias: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.c_fc = nn.Linear(n_embd, hidden, bias=bias)
        self.c_proj = nn.Linear(hidden, n_embd, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.c_fc(x))  # (B, T, h)
        return self.dropout(self.c_proj(h))  # (B, T, C)


class KANFFN(nn.Module):
    """Two KAN layers ``C -> h -> C``, optionally plus a linear shortcut ``W x``.

    Parameters
    ----------
    n_embd, hidden : int
        ``C`` and ``h``.
    basis, grid_size, degree, grid_range :
        Passed to :func:`kansym.nn.bases.make_kan_layer`.
    residual : bool
        Add a bias-free ``Linear(C, C)`` of the input to the KAN output (``kan-residual``):
        the linear part of the map is learnt directly, the KAN learns the rest.
    dropout : float
    generator : torch.Generator, optional
        Initial values of the KAN layers.

    Attributes
    ----------
    fc, proj : KAN layers ``(C -> h)`` and ``(h -> C)``; their ``mask`` marks live edges.
    shortcut : nn.Linear or None
    """

    def __init__(
        self,
        n_embd: int,
        hidden: int,
        *,
        basis: str = "bspline",
        grid_size: int = 5,
        degree: int = 3,
        grid_range: tuple[float, float] = (-2.0, 2.0),
        residual: bool = False,
        dropout: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.kind = "kan-residual" if residual else "kan"
        opts = dict(grid_size=grid_size, degree=degree, grid_range=grid_range, generator=generator)
        self.fc = make_kan_layer(basis, n_embd, hidden, **opts)
        self.proj = make_kan_layer(basis, hidden, n_embd, **opts)
        self.shortcut = nn.Linear(n_embd, n_embd, bias=False) if residual else None
        self.dropout = nn.Dropout(dropout)

    @property
    def hidden(self) -> int:
        """Hidden width ``h``."""
        return self.fc.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.proj(self.fc(x))  # (B, T, C)
        if self.shortcut is not None:
            out = out + self.shortcut(x)
        return self.dropout(out)


def build_ffn(config: KANGPTConfig, layer: int, generator: torch.Generator | None = None) -> nn.Module:
    """The FFN of block ``layer`` as the config says (``config.ffn[layer]``)."""
    kind = config.ffn[layer]
    if kind == "mlp":
        return MLPFFN(config.n_embd, config.mlp_hidden, bias=config.bias, dropout=config.dropout)
    return KANFFN(
        config.n_embd,
        config.kan_hidden[layer],
        basis=config.kan_basis,
        grid_size=config.kan_grid_size,
        degree=config.kan_degree,
        grid_range=config.kan_grid_range,
        residual=kind == "kan-residual",
        dropout=config.dropout,
        generator=generator,
    )


def edge_scores(layer: nn.Module) -> torch.Tensor:
    """Weight-based magnitude of every edge of a KAN layer.

    Parameters
    ----------
    layer : KANLayer or BasisKANLayer

    Returns
    -------
    Tensor (out, in)
        ``(|w_b| + |w_s| mean_k |c_k|) * mask``; differentiable.
    """
    spline = layer.scale_sp.abs() * layer.coef.abs().mean(dim=-1)  # (out, in)
    return (layer.scale_base.abs() + spline) * layer.mask


def sparsity_penalty(model: nn.Module, *, mu1: float = 1.0, mu2: float = 1.0) -> torch.Tensor:
    """``sum_l mu1 |Phi_l|_1 + mu2 S(Phi_l)`` over the KAN layers of every KAN FFN.

    ``|Phi|_1 = sum_ij e_ij`` and ``S = -sum_ij p_ij log p_ij`` with ``p = e / |Phi|_1``
    (KAN paper eqs. 2.18-2.20) on the weight-based magnitudes ``e`` of
    :func:`edge_scores`. Multiply by ``lamb`` and add to the loss.

    Parameters
    ----------
    model : nn.Module
        Any module; its :class:`KANFFN` submodules are penalised.
    mu1, mu2 : float

    Returns
    -------
    Tensor (scalar)
        0 when the model has no KAN FFN.
    """
    total = None
    for module in model.modules():
        if not isinstance(module, KANFFN):
            continue
        for layer in (module.fc, module.proj):
            e = edge_scores(layer)  # (out, in)
            l1 = e.sum()
            p = e / (l1 + 1e-12)
            entropy = -(p * torch.log(p + 1e-12)).sum()
            term = mu1 * l1 + mu2 * entropy
            total = term if total is None else total + term
    if total is None:
        return torch.zeros(())
    return total
