"""Configuration of a KAN model (one frozen dataclass, docs/algorithms.md, "Conventions")."""

from __future__ import annotations

from dataclasses import dataclass

from kansym.config import SEED, PlainConfig, check_seed
from kansym.errors import ConfigError

__all__ = ["KANConfig", "BASE_FUNCTIONS", "GRID_EPS", "GRID_SIZE", "SPLINE_ORDER"]

BASE_FUNCTIONS = ("silu", "zero")
GRID_SIZE = 5  # intervals of a B-spline grid: every grid_size default (KANs, their layers, KAN-GPT FFNs)
SPLINE_ORDER = 3  # cubic B-splines (KAN paper §2.2, k = 3): every spline_order default
GRID_EPS = 0.02  # weight of the uniform grid when grids adapt to samples (KAN paper §2.4): every grid_eps default


@dataclass(frozen=True)
class KANConfig(PlainConfig):
    """Architecture and initialisation of a :class:`kansym.nn.KAN`.

    Parameters
    ----------
    width : tuple of int
        Nodes per layer, inputs first and outputs last, e.g. ``(2, 5, 1)``.
    grid_size : int
        Number of grid intervals ``G`` of every B-spline.
    spline_order : int
        Order ``k`` of the B-splines (3 = cubic).
    grid_range : tuple of float
        Initial grid ``[low, high]`` in (scaled) input units; data-driven grid
        updates move it later.
    scale_noise : float
        Amplitude of the random initial spline coefficients (near-zero splines).
    scale_base_mu, scale_base_sigma : float
        The residual weights ``w_b`` start as ``(mu + sigma * U(-1, 1)) / sqrt(in)``.
    scale_sp : float
        The spline weights ``w_s`` start as ``scale_sp / sqrt(in)``.
    base_fun : {"silu", "zero"}
        Residual function ``b(x)`` of eq. 2.10 in the KAN paper.
    grid_eps : float
        Weight of the uniform grid when grids adapt to samples (KAN paper §2.4).
    seed : int
        Seed of the initialisation; the constructor uses a private generator.

    Raises
    ------
    ConfigError
        For an impossible value (empty width, a zero-width layer, ``grid_size < 1``...).
    """

    width: tuple[int, ...] = (2, 5, 1)
    grid_size: int = GRID_SIZE
    spline_order: int = SPLINE_ORDER
    grid_range: tuple[float, float] = (-1.0, 1.0)
    scale_noise: float = 0.1
    scale_base_mu: float = 0.0
    scale_base_sigma: float = 1.0
    scale_sp: float = 1.0
    base_fun: str = "silu"
    grid_eps: float = GRID_EPS
    seed: int = SEED

    def __post_init__(self) -> None:
        check_seed(self.seed)
        object.__setattr__(self, "width", tuple(int(w) for w in self.width))
        object.__setattr__(self, "grid_range", tuple(float(v) for v in self.grid_range))
        if len(self.width) < 2:
            raise ConfigError(f"width needs at least an input and an output layer, got {list(self.width)}")
        if any(w < 1 for w in self.width):
            raise ConfigError(f"every layer of width needs at least one node, got {list(self.width)}")
        if self.grid_size < 1:
            raise ConfigError(f"grid_size must be at least 1, got {self.grid_size}")
        if self.spline_order < 0:
            raise ConfigError(f"spline_order must be >= 0, got {self.spline_order}")
        if not self.grid_range[0] < self.grid_range[1]:
            raise ConfigError(f"grid_range must be increasing, got {self.grid_range}")
        if self.base_fun not in BASE_FUNCTIONS:
            raise ConfigError(f"base_fun must be one of {', '.join(BASE_FUNCTIONS)}, got {self.base_fun!r}")
        if not 0.0 <= self.grid_eps <= 1.0:
            raise ConfigError(f"grid_eps must lie in [0, 1], got {self.grid_eps}")


