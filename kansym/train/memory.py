"""Will a KAN's training fit in this machine's memory? Refuse early, in one sentence.

A ``--hidden 100000`` or ``--grid-size 100000`` typed by mistake would otherwise start
training and be killed by the kernel (or raise a 160 GB allocation error) minutes later.
:func:`training_bytes` is an upper estimate of what one full-batch training step holds
at once (float64), counted from the layer shapes:

- per row and layer: the basis features ``F (1 + G + k, in)`` and their input
  derivatives, the edge values ``(out, in)`` of the sparsity penalty's trace
  (KAN paper eq. 2.17) and their gradient;
- per parameter (``out * in * (G + k + 2)``: spline coefficients, base and spline
  scales): the parameter, its gradient and LBFGS's 10 curvature pairs (Nocedal & Wright
  2006, Alg. 7.4) plus the line search's copies;
- per grid: the spline plan's per-interval polynomials (``(G + 2k) (k + 1) (G + k)``
  numbers, :mod:`kansym.nn.fast.plan`) and the grid update's least-squares designs
  (KAN paper §2.4).
"""

from __future__ import annotations

import os
from typing import Sequence

from kansym.errors import ConfigError

__all__ = ["training_bytes", "physical_memory", "check_training_memory", "MEMORY_SHARE"]

MEMORY_SHARE = 0.5  # the most of the machine's memory a training may plan to use
_PER_PARAMETER = 2 + 2 * 10 + 4  # value, gradient, LBFGS's s and y pairs, line-search copies


def training_bytes(width: Sequence[int], grid_size: int, spline_order: int, n_rows: int, *, itemsize: int = 8) -> int:
    """Upper estimate (bytes) of what one full-batch training step of a KAN holds at once.

    Parameters
    ----------
    width : sequence of int
        ``(d_in, *hidden, d_out)``.
    grid_size, spline_order : int
        ``G`` and ``k``.
    n_rows : int
        Rows of the batch.
    itemsize : int
        Bytes per number (8: float64).
    """
    basis = grid_size + spline_order + 1
    layers = list(zip(width[:-1], width[1:]))
    per_row = sum(2 * i * basis + 2 * i * o + o for i, o in layers)
    params = sum(i * o * (basis + 1) for i, o in layers)
    # a grid update refits every edge by least squares on an (N, G + k) design, and the
    # spline plan holds (G + 2k) intervals x (k + 1) x (G + k) polynomial coefficients
    grid = len(layers) * (grid_size + 2 * spline_order) * (spline_order + 1) * (grid_size + spline_order)
    refit = max(i for i, _ in layers) * n_rows * (grid_size + spline_order) * 2
    return itemsize * (n_rows * per_row + params * _PER_PARAMETER + 4 * grid + refit)


def physical_memory() -> int | None:
    """Bytes of physical memory of this machine, or None where the OS does not say."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def check_training_memory(width: Sequence[int], grid_size: int, spline_order: int, n_rows: int, *,
                          itemsize: int = 8, available: int | None = None) -> None:
    """Raise ConfigError when training would plan more than :data:`MEMORY_SHARE` of the memory.

    Parameters
    ----------
    available : int, optional
        Bytes to compare with (default: :func:`physical_memory`; no check where unknown).

    Raises
    ------
    ConfigError
        Naming the width, grid and rows and what they need.
    """
    total = physical_memory() if available is None else available
    if total is None:
        return
    need = training_bytes(width, grid_size, spline_order, n_rows, itemsize=itemsize)
    if need > MEMORY_SHARE * total:
        raise ConfigError(
            f"training a {list(width)} KAN with grid size {grid_size} on {n_rows} rows needs about "
            f"{need / 2**30:.1f} GiB, more than half of this machine's {total / 2**30:.1f} GiB; "
            "choose a smaller --hidden or --grid-size"
        )
