"""KAN layers on other bases than B-splines: Chebyshev, Fourier, Gaussian RBF, monomials.

Every layer here has the interface of :class:`kansym.nn.layer.KANLayer`: an edge
function ``phi_ji(x) = w_b[j, i] silu(x) + w_s[j, i] sum_k c[j, i, k] f_k(x)`` on every
edge (Liu et al. 2024, "KAN: Kolmogorov–Arnold Networks", arXiv:2404.19756, eq. 2.10,
with the B-splines ``B_k`` replaced by the functions ``f_k`` of the basis), ``forward``
on ``(..., in) -> (..., out)``, coefficients ``coef (out, in, K)``, weights
``scale_base``/``scale_sp (out, in)`` and an edge ``mask (out, in)``.

Bases (``K`` functions per edge, see :func:`n_basis`):

- ``chebyshev``: ``T_0..T_d`` of ``tanh(x)`` (``K = d + 1``); as in ChebyKAN
  (SS et al. 2024, "Chebyshev Polynomial-Based Kolmogorov-Arnold Networks",
  arXiv:2405.07200), by the three-term recursion ``T_n = 2u T_{n-1} - T_{n-2}``.
- ``poly``: monomials ``1, u, ..., u^d`` of ``u = tanh(x)`` (``K = d + 1``): the same
  span as ``chebyshev`` in a worse-conditioned basis, kept as a baseline.
- ``fourier``: ``cos(m w x), sin(m w x)`` for ``m = 1..G``, ``w = pi / max|grid_range|``
  (``K = 2G``); as in FourierKAN (Xu et al. 2024, arXiv:2406.01034).
- ``rbf``: Gaussians ``exp(-((x - c_m) / h)^2)`` on ``G + 1`` evenly spaced centres of
  ``grid_range``, ``h`` their spacing (``K = G + 1``); as in FastKAN (Li 2024,
  arXiv:2405.06721), which shows they approximate cubic B-splines.
- ``bspline``: B-splines of order ``k`` on a fixed uniform grid of ``G`` intervals
  extended by ``k`` knots each side (``K = G + k``), the same functions as
  :class:`kansym.nn.layer.KANLayer` on its initial grid (Liu et al. 2024, eq. 2.10),
  evaluated locally: only the ``k + 1`` bases that are nonzero at ``x`` are computed
  (de Boor's recursion on uniform knots) and the derivative is the closed form
  ``B'_{i,k} = (B_{i,k-1} - B_{i+1,k-1}) / h`` (de Boor 1978), in a custom autograd
  function. For grids that adapt to data (``update_grid``), use ``KANLayer``.

Use :func:`make_kan_layer` to build any of them by name.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from kansym.errors import ConfigError

__all__ = [
    "BASES",
    "BasisKANLayer",
    "BSplineKANLayer",
    "ChebyshevKANLayer",
    "PolyKANLayer",
    "FourierKANLayer",
    "RBFKANLayer",
    "n_basis",
    "make_kan_layer",
    "kan_layer_params",
]

BASES = ("bspline", "chebyshev", "fourier", "rbf", "poly")


def n_basis(basis: str, grid_size: int, degree: int) -> int:
    """Number ``K`` of basis functions per edge.

    Parameters
    ----------
    basis : {"bspline", "chebyshev", "fourier", "rbf", "poly"}
    grid_size : int
        ``G``: grid intervals (bspline, rbf) or frequencies (fourier).
    degree : int
        Spline order ``k`` (bspline) or polynomial degree ``d`` (chebyshev, poly).

    Raises
    ------
    ConfigError
        For an unknown basis.
    """
    if basis == "bspline":
        return grid_size + degree
    if basis in ("chebyshev", "poly"):
        return degree + 1
    if basis == "fourier":
        return 2 * grid_size
    if basis == "rbf":
        return grid_size + 1
    raise ConfigError(f"unknown KAN basis {basis!r}; use one of {', '.join(BASES)}")


def kan_layer_params(in_features: int, out_features: int, basis: str, grid_size: int, degree: int) -> int:
    """Trainable parameters of one KAN layer: ``in * out * (K + 2)`` (coef, w_b, w_s)."""
    return in_features * out_features * (n_basis(basis, grid_size, degree) + 2)


class BasisKANLayer(nn.Module):
    """Base class: a KAN layer whose edges are ``w_b silu(x) + w_s sum_k c_k f_k(x)``.

    Subclasses define :meth:`basis`, mapping ``(N, in)`` to ``(N, in, K)``.

    Parameters
    ----------
    in_features, out_features : int
    grid_size : int
        ``G`` (meaning depends on the basis, see the module docstring).
    degree : int
        Polynomial degree (chebyshev, poly); ignored by fourier and rbf.
    grid_range : tuple of float
        Input range the basis is laid out on (fourier period, rbf centres).
    scale_noise : float
        Initial coefficients are uniform in ``±scale_noise / (2 K)`` (near-zero functions).
    scale_base_sigma, scale_sp : float
        ``w_b`` starts as ``scale_base_sigma * U(-1, 1) / sqrt(in)``, ``w_s`` as
        ``scale_sp / sqrt(in)``, as in :class:`kansym.nn.layer.KANLayer`.
    generator : torch.Generator, optional
        Source of the initial values (no global RNG is touched when given).

    Attributes
    ----------
    coef : Parameter (out, in, K)
    scale_base, scale_sp : Parameter (out, in)
    mask : buffer (out, in)
        1 for a live edge, 0 for a removed one.
    """

    basis_name = "abstract"

    def __init__(
        self,
        in_features: int,
        out_features: int,
        grid_size: int = 5,
        degree: int = 3,
        *,
        grid_range: tuple[float, float] = (-1.0, 1.0),
        scale_noise: float = 0.1,
        scale_base_sigma: float = 1.0,
        scale_sp: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if in_features < 1 or out_features < 1:
            raise ConfigError(f"a KAN layer needs at least one input and output, got {in_features}->{out_features}")
        if grid_size < 1 or degree < 0:
            raise ConfigError(f"grid_size must be >= 1 and degree >= 0, got {grid_size} and {degree}")
        self.in_features = in_features
        self.out_features = out_features
        self.grid_size = grid_size
        self.degree = degree
        self.grid_range = (float(grid_range[0]), float(grid_range[1]))
        k = n_basis(self.basis_name, grid_size, degree)
        self.register_buffer("mask", torch.ones(out_features, in_features))
        noise = torch.rand(out_features, in_features, k, generator=generator) - 0.5
        self.coef = nn.Parameter(noise * scale_noise / k)
        unit = torch.rand(out_features, in_features, generator=generator) * 2 - 1
        self.scale_base = nn.Parameter(scale_base_sigma * unit / math.sqrt(in_features))
        self.scale_sp = nn.Parameter(torch.full((out_features, in_features), scale_sp / math.sqrt(in_features)))

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"basis={self.basis_name}, grid_size={self.grid_size}, degree={self.degree}"
        )

    def basis(self, x: torch.Tensor) -> torch.Tensor:
        """Basis functions at ``x``: ``(N, in) -> (N, in, K)``."""
        raise NotImplementedError

    def _weight(self) -> torch.Tensor:
        return self.coef * (self.scale_sp * self.mask).unsqueeze(-1)  # (out, in, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Node outputs ``sum_i phi_ji(x_i)``: ``(..., in) -> (..., out)``."""
        lead = x.shape[:-1]
        x = x.reshape(-1, self.in_features)  # (N, in)
        base = F.linear(F.silu(x), self.scale_base * self.mask)  # (N, out)
        feats = self.basis(x).reshape(x.shape[0], -1)  # (N, in * K)
        out = base + feats @ self._weight().reshape(self.out_features, -1).T  # (N, out)
        return out.reshape(*lead, self.out_features)

    def edge_outputs(self, x: torch.Tensor) -> torch.Tensor:
        """Every edge function at the samples: ``(batch, in) -> (batch, out, in)``."""
        base = F.silu(x).unsqueeze(1) * (self.scale_base * self.mask)  # (batch, out, in)
        return base + torch.einsum("bik,oik->boi", self.basis(x), self._weight())


class ChebyshevKANLayer(BasisKANLayer):
    """KAN layer on Chebyshev polynomials ``T_0..T_d`` of ``tanh(x)`` (ChebyKAN)."""

    basis_name = "chebyshev"

    def basis(self, x: torch.Tensor) -> torch.Tensor:
        u = torch.tanh(x)  # (N, in)
        terms = [torch.ones_like(u)]
        if self.degree >= 1:
            terms.append(u)
        for _ in range(2, self.degree + 1):
            terms.append(2 * u * terms[-1] - terms[-2])
        return torch.stack(terms, dim=-1)  # (N, in, d + 1)


class PolyKANLayer(BasisKANLayer):
    """KAN layer on monomials ``1, u, ..., u^d`` of ``u = tanh(x)``."""

    basis_name = "poly"

    def basis(self, x: torch.Tensor) -> torch.Tensor:
        u = torch.tanh(x)  # (N, in)
        terms = [torch.ones_like(u)]
        for _ in range(self.degree):
            terms.append(terms[-1] * u)
        return torch.stack(terms, dim=-1)  # (N, in, d + 1)


class FourierKANLayer(BasisKANLayer):
    """KAN layer on ``cos(m w x), sin(m w x)``, ``m = 1..G``, period ``2 max|grid_range|``."""

    basis_name = "fourier"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        half = max(abs(self.grid_range[0]), abs(self.grid_range[1]))
        freqs = torch.arange(1, self.grid_size + 1, dtype=torch.float32) * (math.pi / half)
        self.register_buffer("freqs", freqs)  # (G,)

    def basis(self, x: torch.Tensor) -> torch.Tensor:
        angle = x.unsqueeze(-1) * self.freqs.to(x.dtype)  # (N, in, G)
        return torch.cat([torch.cos(angle), torch.sin(angle)], dim=-1)  # (N, in, 2G)


class RBFKANLayer(BasisKANLayer):
    """KAN layer on Gaussian bumps centred on ``G + 1`` points of ``grid_range`` (FastKAN)."""

    basis_name = "rbf"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        low, high = self.grid_range
        self.register_buffer("centers", torch.linspace(low, high, self.grid_size + 1))  # (G + 1,)
        self.spacing = (high - low) / self.grid_size

    def basis(self, x: torch.Tensor) -> torch.Tensor:
        z = (x.unsqueeze(-1) - self.centers.to(x.dtype)) / self.spacing  # (N, in, G + 1)
        return torch.exp(-z * z)


def _local_bspline_matrix(order: int) -> torch.Tensor:
    """``M (k + 1, k + 1)``: ``[1, u, .., u^k] @ M`` are the ``k + 1`` uniform B-splines ``B_{j-r}``
    nonzero on knot interval ``j`` at local coordinate ``u`` (column ``r``).

    Built from de Boor's recursion on uniform knots, evaluated at ``k + 1`` points and
    solved for the polynomial coefficients in float64.
    """
    u = torch.linspace(0.0, 1.0, order + 1, dtype=torch.float64) if order else torch.zeros(1, dtype=torch.float64)
    b = [torch.ones_like(u)]
    for p in range(1, order + 1):
        prev, b = b, []
        for r in range(p + 1):
            term = (u + r) * prev[r] if r < p else torch.zeros_like(u)
            if r >= 1:
                term = term + (p + 1 - r - u) * prev[r - 1]
            b.append(term / p)
    values = torch.stack(b, dim=-1)  # (k + 1 points, k + 1 bases)
    vander = u[:, None] ** torch.arange(order + 1, dtype=torch.float64)  # (k + 1, k + 1)
    return torch.linalg.solve(vander, values)


def _horner(coef: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``sum_p coef[p] u^p`` for every column of ``coef (P, m)`` at ``u (..., 1)``: ``(..., m)``."""
    acc = coef[-1].expand(*u.shape[:-1], coef.shape[-1])
    for p in range(coef.shape[0] - 2, -1, -1):
        acc = torch.addcmul(coef[p], acc, u)
    return acc


class _UniformBSpline(torch.autograd.Function):
    """Dense B-spline basis on a uniform extended grid, with an analytic backward.

    Only the ``k + 1`` bases ``B_{j-r}``, ``r = 0..k``, nonzero on the knot interval ``j``
    holding ``x`` are computed (a polynomial in the local coordinate ``u``), then
    scattered into the dense ``(N, in, G + k)`` basis; the derivative is the same
    polynomial differentiated, divided by the knot step ``h``.
    """

    @staticmethod
    def forward(ctx, x, low, h, grid_size, order, matrix):  # x: (N, in), matrix: (k + 1, k + 1)
        n_int = grid_size + 2 * order  # intervals of the extended grid
        s = (x - (low - order * h)) / h  # position in knot units (N, in)
        inside = ((s >= 0) & (s < n_int)).to(x.dtype).unsqueeze(-1)  # (N, in, 1)
        j = s.floor().clamp(0, n_int - 1)
        u = (s - j).unsqueeze(-1)  # local coordinate in [0, 1) (N, in, 1)
        # padded column j + k - r holds B_{j-r}; columns k .. k + G + k - 1 are the real bases
        idx = (j.long() + order).unsqueeze(-1) - torch.arange(order + 1, device=x.device)  # (N, in, k + 1)
        vals = _horner(matrix, u) * inside  # (N, in, k + 1)
        padded = torch.zeros(*x.shape, n_int + order, dtype=x.dtype, device=x.device).scatter_(-1, idx, vals)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(idx, u, inside, matrix)
            ctx.h = h
        return padded[..., order : grid_size + 2 * order]  # (N, in, G + k)

    @staticmethod
    def backward(ctx, grad):  # grad: (N, in, G + k)
        idx, u, inside, matrix = ctx.saved_tensors
        k = matrix.shape[0] - 1
        if k == 0:
            return torch.zeros_like(grad[..., 0]), None, None, None, None, None
        steps = torch.arange(1, k + 1, dtype=matrix.dtype, device=matrix.device)
        deriv = _horner(matrix[1:] * steps[:, None], u) * (inside / ctx.h)  # (N, in, k + 1)
        padded = F.pad(grad, (k, k))  # (N, in, G + 3k)
        grad_x = (padded.gather(-1, idx) * deriv).sum(-1)  # (N, in)
        return grad_x, None, None, None, None, None


class BSplineKANLayer(BasisKANLayer):
    """KAN layer on B-splines of order ``degree`` over a fixed uniform grid (fast local evaluation).

    Equals :class:`kansym.nn.layer.KANLayer`'s basis on the same uniform grid
    (``bspline_basis(x, make_grid(low, high, G, k), k)``) to rounding.
    """

    basis_name = "bspline"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        low, high = self.grid_range
        self.step = (high - low) / self.grid_size
        self.register_buffer("local_matrix", _local_bspline_matrix(self.degree), persistent=False)

    def basis(self, x: torch.Tensor) -> torch.Tensor:
        matrix = self.local_matrix.to(x.dtype)
        return _UniformBSpline.apply(x, self.grid_range[0], self.step, self.grid_size, self.degree, matrix)


_LAYERS = {
    "bspline": BSplineKANLayer,
    "chebyshev": ChebyshevKANLayer,
    "poly": PolyKANLayer,
    "fourier": FourierKANLayer,
    "rbf": RBFKANLayer,
}


def make_kan_layer(
    basis: str,
    in_features: int,
    out_features: int,
    grid_size: int = 5,
    degree: int = 3,
    *,
    grid_range: tuple[float, float] = (-1.0, 1.0),
    generator: torch.Generator | None = None,
) -> "BasisKANLayer":
    """Build a KAN layer of the named basis.

    Parameters
    ----------
    basis : {"bspline", "chebyshev", "fourier", "rbf", "poly"}
    in_features, out_features : int
    grid_size, degree : int
        See :func:`n_basis`; for ``bspline`` ``degree`` is the spline order.
    grid_range : tuple of float
    generator : torch.Generator, optional

    Returns
    -------
    BasisKANLayer
        With ``coef``, ``scale_base``, ``scale_sp`` and ``mask``; ``(..., in) -> (..., out)``.
        ``bspline`` gives a :class:`BSplineKANLayer` on a fixed uniform grid; for a grid
        that adapts to data use :class:`kansym.nn.layer.KANLayer`.

    Raises
    ------
    ConfigError
        For an unknown basis.
    """
    if basis not in _LAYERS:
        raise ConfigError(f"unknown KAN basis {basis!r}; use one of {', '.join(BASES)}")
    return _LAYERS[basis](in_features, out_features, grid_size, degree, grid_range=grid_range, generator=generator)
