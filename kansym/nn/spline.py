"""Pure B-spline functions on per-feature knot vectors.

Everything here is a small pure function of tensors; :class:`kansym.nn.layer.KANLayer`
builds on them. Shapes follow the KAN layer: ``in`` input features, ``G`` grid
intervals, ``k`` spline order, knots ``(in, G + 2k + 1)`` (the grid extended by
``k`` knots on each side), basis ``(batch, in, G + k)``, coefficients
``(out, in, G + k)``.

Source: de Boor, "A Practical Guide to Splines" (1978), the Cox–de Boor
recursion; grid extension and update as in Liu et al. 2024, "KAN:
Kolmogorov–Arnold Networks", arXiv:2404.19756, §2.2 and §2.4.
"""

from __future__ import annotations

import torch

from kansym.nn.config import GRID_EPS

__all__ = [
    "make_grid",
    "grid_from_samples",
    "bspline_basis",
    "coef_to_curve",
    "curve_to_coef",
]


def make_grid(
    low: torch.Tensor | float,
    high: torch.Tensor | float,
    grid_size: int,
    spline_order: int,
    in_features: int | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Uniform knot vectors on ``[low, high]`` extended by ``spline_order`` knots each side.

    Parameters
    ----------
    low, high : float or Tensor of shape (in,)
        Ends of the grid, per feature if tensors.
    grid_size : int
        Number of intervals ``G`` inside ``[low, high]``.
    spline_order : int
        Order ``k`` of the splines (3 = cubic).
    in_features : int, optional
        Number of features when ``low``/``high`` are floats.

    Returns
    -------
    Tensor of shape (in, G + 2k + 1)
        Sorted knots; the interior knots ``[:, k:-k]`` (or all, for ``k = 0``) span ``[low, high]``.
    """
    low_t = torch.as_tensor(low, dtype=dtype, device=device).reshape(-1)
    high_t = torch.as_tensor(high, dtype=dtype, device=device).reshape(-1)
    if in_features is not None:
        low_t = low_t.expand(in_features)
        high_t = high_t.expand(in_features)
    h = (high_t - low_t) / grid_size  # (in,)
    steps = torch.arange(-spline_order, grid_size + spline_order + 1, dtype=dtype, device=device)
    return low_t[:, None] + steps[None, :] * h[:, None]  # (in, G + 2k + 1)


def grid_from_samples(
    x: torch.Tensor, grid_size: int, spline_order: int, *, grid_eps: float = GRID_EPS, margin: float = 0.0
) -> torch.Tensor:
    """Knots adapted to samples: a mix of sample quantiles and a uniform grid.

    ``knots = (1 - grid_eps) * quantiles + grid_eps * uniform`` on the sample range,
    then extended by ``spline_order`` uniform steps on each side (KAN paper §2.4;
    ``grid_eps = 1`` is a uniform grid, ``0`` a purely adaptive one).

    Parameters
    ----------
    x : Tensor of shape (batch, in)
        Samples of each input feature.
    grid_size, spline_order : int
        ``G`` and ``k``.
    grid_eps : float
        Weight of the uniform grid in [0, 1].
    margin : float
        Widening of the sample range on each side, in input units.

    Returns
    -------
    Tensor of shape (in, G + 2k + 1)
    """
    x_sorted = torch.sort(x, dim=0).values  # (batch, in)
    n = x_sorted.shape[0]
    idx = torch.linspace(0, n - 1, grid_size + 1, device=x.device).round().long()
    adaptive = x_sorted[idx].T  # (in, G + 1)
    low = x_sorted[0] - margin
    high = x_sorted[-1] + margin
    span = torch.clamp(high - low, min=1e-6)
    high = low + span
    uniform = make_grid(low, high, grid_size, 0, dtype=x.dtype, device=x.device)  # (in, G + 1)
    adaptive = adaptive.clone()
    adaptive[:, 0], adaptive[:, -1] = low, high
    core = grid_eps * uniform + (1.0 - grid_eps) * adaptive  # (in, G + 1)
    h = span / grid_size  # (in,)
    steps = torch.arange(1, spline_order + 1, dtype=x.dtype, device=x.device)
    left = core[:, :1] - h[:, None] * steps.flip(0)[None, :]
    right = core[:, -1:] + h[:, None] * steps[None, :]
    return torch.cat([left, core, right], dim=1)


def bspline_basis(x: torch.Tensor, grid: torch.Tensor, spline_order: int) -> torch.Tensor:
    """B-spline basis functions by the Cox–de Boor recursion.

    Parameters
    ----------
    x : Tensor of shape (batch, in)
    grid : Tensor of shape (in, G + 2k + 1)
        Sorted knots per feature (see :func:`make_grid`).
    spline_order : int
        Order ``k``.

    Returns
    -------
    Tensor of shape (batch, in, G + k)
        ``B_i(x)``; outside ``[grid[k], grid[-k-1])`` the bases do not sum to one and
        they vanish beyond the extended knots. Agrees with ``scipy.interpolate.BSpline``.
    """
    x = x.unsqueeze(-1)  # (batch, in, 1)
    g = grid.unsqueeze(0)  # (1, in, G + 2k + 1)
    basis = ((x >= g[..., :-1]) & (x < g[..., 1:])).to(x.dtype)  # (batch, in, G + 2k)
    for p in range(1, spline_order + 1):
        left_den = g[..., p:-1] - g[..., : -(p + 1)]
        right_den = g[..., p + 1 :] - g[..., 1:-p]
        left = (x - g[..., : -(p + 1)]) / left_den * basis[..., :-1]
        right = (g[..., p + 1 :] - x) / right_den * basis[..., 1:]
        basis = left + right  # (batch, in, G + 2k - p)
    return basis


def coef_to_curve(x: torch.Tensor, grid: torch.Tensor, coef: torch.Tensor, spline_order: int) -> torch.Tensor:
    """Evaluate spline curves ``sum_i coef[o, j, i] B_i(x_j)`` for every edge.

    Parameters
    ----------
    x : Tensor of shape (batch, in)
    grid : Tensor of shape (in, G + 2k + 1)
    coef : Tensor of shape (out, in, G + k)
    spline_order : int

    Returns
    -------
    Tensor of shape (batch, out, in)
    """
    basis = bspline_basis(x, grid, spline_order)  # (batch, in, G + k)
    return torch.einsum("bik,oik->boi", basis, coef)


def curve_to_coef(
    x: torch.Tensor, y: torch.Tensor, grid: torch.Tensor, spline_order: int, *, ridge: float = 1e-8
) -> torch.Tensor:
    """Least-squares spline coefficients that reproduce sampled curves.

    Solves ``min_c sum_b (sum_i c_i B_i(x_b) - y_b)^2 + ridge * |c|^2`` per edge; the
    tiny ridge keeps bases with no samples in their support at zero instead of failing.

    Parameters
    ----------
    x : Tensor of shape (batch, in)
    y : Tensor of shape (batch, out, in)
        Target values of each edge function at the samples.
    grid : Tensor of shape (in, G + 2k + 1)
    spline_order : int
    ridge : float
        Tikhonov weight, relative to the mean diagonal of the normal matrix.

    Returns
    -------
    Tensor of shape (out, in, G + k)
    """
    basis = bspline_basis(x, grid, spline_order).permute(1, 0, 2)  # (in, batch, G + k)
    gram = basis.transpose(1, 2) @ basis  # (in, G + k, G + k)
    scale = gram.diagonal(dim1=1, dim2=2).mean(dim=1).clamp(min=1e-12)  # (in,)
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
    gram = gram + ridge * scale[:, None, None] * eye
    rhs = basis.transpose(1, 2) @ y.permute(2, 0, 1)  # (in, G + k, out)
    coef = torch.linalg.solve(gram, rhs)  # (in, G + k, out)
    return coef.permute(2, 0, 1).contiguous()  # (out, in, G + k)
