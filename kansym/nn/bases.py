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
- ``bspline``: B-splines of order ``k`` on a uniform grid of ``G`` intervals extended
  by ``k`` knots each side (``K = G + k``): :class:`kansym.nn.layer.KANLayer` itself
  (Liu et al. 2024, eq. 2.10), with its closed-form fast path and custom backward
  (:mod:`kansym.nn.fast`) and its grid buffer (``update_grid`` works too).

Use :func:`make_kan_layer` to build any of them by name.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from kansym.errors import ConfigError
from kansym.nn.config import GRID_SIZE
from kansym.nn.layer import KANLayer

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
        grid_size: int = GRID_SIZE,
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


class BSplineKANLayer(KANLayer):
    """:class:`kansym.nn.layer.KANLayer` with the constructor of the other bases (``degree`` = spline order).

    The same layer as KAN models use (one implementation: closed-form uniform-grid fast
    path, Cox–de Boor after a grid update, see :mod:`kansym.nn.fast`), initialised like
    :class:`BasisKANLayer`: coefficients uniform in ``±scale_noise / (2 K)``, ``w_b`` in
    ``±scale_base_sigma / sqrt(in)``, ``w_s = scale_sp / sqrt(in)``.
    """

    basis_name = "bspline"

    def __init__(
        self,
        in_features: int,
        out_features: int,
        grid_size: int = GRID_SIZE,
        degree: int = 3,
        *,
        grid_range: tuple[float, float] = (-1.0, 1.0),
        scale_noise: float = 0.1,
        scale_base_sigma: float = 1.0,
        scale_sp: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> None:
        if in_features < 1 or out_features < 1:
            raise ConfigError(f"a KAN layer needs at least one input and output, got {in_features}->{out_features}")
        if grid_size < 1 or degree < 0:
            raise ConfigError(f"grid_size must be >= 1 and degree >= 0, got {grid_size} and {degree}")
        k = n_basis("bspline", grid_size, degree)
        super().__init__(
            in_features,
            out_features,
            grid_size,
            degree,
            grid_range=grid_range,
            scale_noise=scale_noise * grid_size / k,  # KANLayer divides by G, the other bases by K
            scale_base_sigma=scale_base_sigma,
            scale_sp=scale_sp,
            generator=generator,
        )
        self.degree = degree
        self.grid_range = (float(grid_range[0]), float(grid_range[1]))

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"basis={self.basis_name}, grid_size={self.grid_size}, degree={self.degree}"
        )


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
    grid_size: int = GRID_SIZE,
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
        ``bspline`` gives a :class:`BSplineKANLayer`, a :class:`kansym.nn.layer.KANLayer`.

    Raises
    ------
    ConfigError
        For an unknown basis.
    """
    if basis not in _LAYERS:
        raise ConfigError(f"unknown KAN basis {basis!r}; use one of {', '.join(BASES)}")
    return _LAYERS[basis](in_features, out_features, grid_size, degree, grid_range=grid_range, generator=generator)
