"""Evaluation plans of a layer's knots: closed form on uniform grids, per-interval polynomials otherwise.

See :mod:`kansym.nn.fast` for the algorithms and their sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["SplinePlan", "make_plan"]

@dataclass(frozen=True)
class SplinePlan:
    """How to evaluate the basis of one layer's grid (built by :func:`make_plan`).

    Attributes
    ----------
    order : int
        Spline order ``k``.
    n_basis : int
        ``K = G + k``.
    uniform : bool
        Closed form on ``t_0 + i h`` when True; otherwise per-interval polynomials (``piecewise``),
        or Cox–de Boor on the samples with ``force_reference``.
    t0, inv_h : Tensor (in,) or None
        First knot and inverse knot step per feature (uniform plans).
    knots : Tensor (G + 2k + 1, in)
        The knots, transposed (every plan).
    scale : float
        The stored features are ``B / scale`` (``scale`` is folded into the weights).
    dfac : Tensor (in,) or None
        The stored derivative times ``dfac`` is ``d (B / scale) / dx`` (None: 1).
    centers : Tensor (K, 1) or None
        ``i + 2``, the centres of the cubic B-splines in knot steps (cubic uniform plans).
    rows : Tensor (in, M) or None
        The knots per feature, contiguous, for ``searchsorted`` (piecewise plans;
        ``M = G + 2k + 1``).
    origins : Tensor (in * (M + 1),) or None
        ``t_{s-1}``, the origin of the local variable in slot ``s`` (piecewise plans).
    table : Tensor (in * (M + 1), k + 1, 2K) or None
        Slot ``s = #{knots <= x}`` of feature ``f`` is row ``f (M + 1) + s``: entry
        ``[e, i]`` is the coefficient of ``u^e`` of basis ``i`` on ``[t_{s-1}, t_s)``,
        ``[e, K + i]`` that of its derivative (0 for ``e = k``); slots ``0`` and ``M``
        (outside the extended grid) are zero.
    offsets : Tensor (in, 1) or None
        ``f (M + 1)`` (piecewise plans).
    """

    order: int
    n_basis: int
    uniform: bool
    t0: torch.Tensor | None
    inv_h: torch.Tensor | None
    knots: torch.Tensor
    scale: float
    dfac: torch.Tensor | None
    centers: torch.Tensor | None = None
    rows: torch.Tensor | None = None
    origins: torch.Tensor | None = None
    table: torch.Tensor | None = None
    offsets: torch.Tensor | None = None

    @property
    def piecewise(self) -> bool:
        """True when the basis is evaluated from the per-interval polynomials."""
        return self.table is not None


def make_plan(grid: torch.Tensor, order: int, *, force_reference: bool = False) -> SplinePlan:
    """Inspect a knot tensor and choose the evaluation path (one host sync).

    Parameters
    ----------
    grid : Tensor (in, G + 2k + 1)
        Sorted knots per input feature.
    order : int
        Spline order ``k``.
    force_reference : bool
        Use the Cox–de Boor recursion on the samples, whatever the grid (for tests).

    Returns
    -------
    SplinePlan
        Uniform when every row is an arithmetic progression to within 64 float32 ulps of
        its magnitude (what :func:`kansym.nn.spline.make_grid` produces, also after a cast
        to float64); the closed form then uses the exact progression ``t_0 + i h``, whose
        knots differ from the stored ones by that rounding at most. Otherwise piecewise
        polynomials of the stored knots (see :func:`_piecewise_table`).
    """
    grid = grid.detach()
    n_knots = grid.shape[1]
    n_basis = n_knots - 1 - order
    knots = grid.T.contiguous()  # (G + 2k + 1, in)
    t0 = grid[:, 0].clone()
    h = (grid[:, -1] - t0) / (n_knots - 1)  # (in,)
    # float32 precision for every dtype: a grid built in float32 and cast to float64 is still uniform
    tol = 64 * torch.finfo(torch.float32).eps * grid.abs().amax(dim=1).clamp_min(1.0)
    uniform = (not force_reference) and bool(
        ((grid.diff(dim=1) - h[:, None]).abs().amax(dim=1) <= tol).all() and (h > 0).all()
    )
    if force_reference:
        return SplinePlan(order, n_basis, False, None, None, knots, 1.0, None)
    if not uniform:
        rows = grid.contiguous()  # (in, M)
        origins, table = _piecewise_table(rows, order)
        offsets = (torch.arange(rows.shape[0], device=grid.device) * (n_knots + 1)).view(-1, 1)  # (in, 1)
        return SplinePlan(order, n_basis, False, None, None, knots, 1.0, None, None, rows, origins, table, offsets)
    if order == 3:  # stored as -6 B (see _cubic_into)
        centers = (torch.arange(n_basis, dtype=grid.dtype, device=grid.device) + 2.0).view(-1, 1)
        return SplinePlan(order, n_basis, True, t0, 1.0 / h, knots, -1.0 / 6.0, 3.0 / h, centers)
    return SplinePlan(order, n_basis, True, t0, 1.0 / h, knots, 1.0 / math.factorial(order), 1.0 / h)



def _piecewise_table(rows: torch.Tensor, order: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Polynomial pieces of every B-spline of order ``order`` on the knots ``rows (in, M)``.

    Runs the Cox–de Boor recursion (de Boor 1978) on coefficient vectors in float64: on
    interval ``j`` with ``u = x - t_j``, ``x - t_i = u + (t_j - t_i)`` and ``t_{i+p+1} - x
    = (t_{i+p+1} - t_j) - u``, so each level multiplies the pieces of order ``p - 1`` by a
    linear polynomial. A zero knot span contributes 0 (the convention ``0 / 0 = 0``).

    Returns
    -------
    origins : Tensor (in * (M + 1),)
    table : Tensor (in * (M + 1), k + 1, 2K)
        See :class:`SplinePlan`; in the dtype of ``rows``.
    """
    g = rows.to(torch.float64)
    n_f, m = g.shape
    n_int = m - 1  # intervals [t_j, t_{j+1})
    t_j = g[:, :n_int, None]  # (in, J, 1)
    # q[f, j, i, e]: coefficient of u^e of B_{i,p} on interval j
    q = torch.eye(n_int, dtype=g.dtype, device=g.device).expand(n_f, n_int, n_int).unsqueeze(-1)  # (in, J, J, 1)
    for p in range(1, order + 1):
        nb = m - 1 - p
        t_i, t_ip, t_i1, t_ip1 = g[:, :nb], g[:, p : p + nb], g[:, 1 : 1 + nb], g[:, p + 1 : p + 1 + nb]  # (in, nb)
        dl, dr = t_ip - t_i, t_ip1 - t_i1
        inv_l = torch.where(dl > 0, 1.0 / torch.where(dl > 0, dl, 1.0), 0.0)[:, None, :, None]  # (in, 1, nb, 1)
        inv_r = torch.where(dr > 0, 1.0 / torch.where(dr > 0, dr, 1.0), 0.0)[:, None, :, None]
        low, high = q[:, :, :nb] * inv_l, q[:, :, 1 : nb + 1] * inv_r  # (in, J, nb, p)
        shift_l = (t_j - t_i[:, None, :]).unsqueeze(-1)  # (in, J, nb, 1): t_j - t_i
        shift_r = (t_ip1[:, None, :] - t_j).unsqueeze(-1)  # t_{i+p+1} - t_j
        new = torch.zeros(n_f, n_int, nb, p + 1, dtype=g.dtype, device=g.device)
        new[..., :p] += low * shift_l + high * shift_r
        new[..., 1:] += low - high
        q = new
    # q (in, J, K, k + 1) -> slots (in, M + 1, k + 1, 2K): [pieces | derivative pieces], zero outside
    n_basis = q.shape[2]
    powers = torch.arange(1, order + 1, dtype=g.dtype, device=g.device)  # (k,)
    table = torch.zeros(n_f, m + 1, order + 1, 2 * n_basis, dtype=g.dtype, device=g.device)
    table[:, 1:m, :, :n_basis] = q.transpose(-1, -2)
    table[:, 1:m, :order, n_basis:] = (q[..., 1:] * powers).transpose(-1, -2)  # d/du u^e = e u^(e-1)
    origins = torch.cat([g[:, :1], g], dim=1)  # (in, M + 1): slot s -> t_{s-1}
    return origins.reshape(-1).to(rows.dtype), table.reshape(n_f * (m + 1), order + 1, -1).to(rows.dtype)


