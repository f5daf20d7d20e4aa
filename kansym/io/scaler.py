"""Affine per-column scaling between CSV units and the units a KAN sees.

Inputs are scaled onto ``[-1, 1]`` by min/max (the default B-spline grid range);
targets are standardised to mean 0 and std 1 (docs/algorithms.md §1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kansym.errors import DataError

__all__ = ["Scaler"]


@dataclass(frozen=True)
class Scaler:
    """Per-column affine map ``z = (a - shift) / scale`` and its inverse.

    Parameters
    ----------
    shift, scale : np.ndarray, shape (d,)
        Centre and half-width (min/max scaling) or mean and std (standardising)
        of each of the ``d`` columns, in the column's own units. ``scale`` must be
        finite and non-zero; the constructors :meth:`minmax` and :meth:`standard`
        replace the zero scale of a constant column by 1.

    Raises
    ------
    DataError
        If ``shift`` and ``scale`` are not 1-D of the same length, or ``scale``
        holds a zero or non-finite value.
    """

    shift: np.ndarray
    scale: np.ndarray

    def __post_init__(self) -> None:
        shift = np.asarray(self.shift, dtype=np.float64).reshape(-1).copy()
        scale = np.asarray(self.scale, dtype=np.float64).reshape(-1).copy()
        if shift.shape != scale.shape:
            raise DataError(
                f"scaler shift has {shift.size} values but scale has {scale.size}; "
                "give one of each per column."
            )
        if not np.all(np.isfinite(scale)) or np.any(scale == 0):
            raise DataError("scaler scale values must be finite and non-zero.")
        object.__setattr__(self, "shift", shift)
        object.__setattr__(self, "scale", scale)

    @property
    def dim(self) -> int:
        """Number of columns ``d`` the scaler maps."""
        return int(self.shift.size)

    @classmethod
    def minmax(cls, a: np.ndarray) -> "Scaler":
        """Scaler mapping each column of ``a`` onto ``[-1, 1]``.

        ``shift = (max + min) / 2`` and ``scale = (max - min) / 2``; a constant
        column gets ``scale = 1`` (it is then merely centred on 0).

        Parameters
        ----------
        a : array_like, shape (N, d)

        Returns
        -------
        Scaler
        """
        a = _as_2d(a)
        lo, hi = a.min(axis=0), a.max(axis=0)
        with np.errstate(over="ignore", invalid="ignore"):
            scale, shift = (hi - lo) / 2.0, (hi + lo) / 2.0
        if not (np.isfinite(scale).all() and np.isfinite(shift).all()):  # |values| near 1e308
            scale, shift = hi / 2.0 - lo / 2.0, hi / 2.0 + lo / 2.0
        return cls(shift=shift, scale=np.where(scale > 0, scale, 1.0))

    @classmethod
    def standard(cls, a: np.ndarray) -> "Scaler":
        """Scaler standardising each column of ``a`` to mean 0 and std 1.

        Uses the population standard deviation (``ddof=0``); a constant column
        gets ``scale = 1``.

        Parameters
        ----------
        a : array_like, shape (N, d)

        Returns
        -------
        Scaler
        """
        a = _as_2d(a)
        with np.errstate(over="ignore", invalid="ignore"):
            mean, std = a.mean(axis=0), a.std(axis=0)
        spread = a.max(axis=0) > a.min(axis=0)
        if not (np.isfinite(mean).all() and np.isfinite(std).all()) or np.any(spread & (std == 0)):
            # the squares overflow above |a| ~ 1e154 (or underflow below ~1e-162): work in units of max|a|
            m = np.abs(a).max(axis=0)
            m = np.where(m > 0, m, 1.0)
            mean, std = (a / m).mean(axis=0) * m, (a / m).std(axis=0) * m
        return cls(shift=mean, scale=np.where(std > 0, std, 1.0))

    @classmethod
    def identity(cls, d: int) -> "Scaler":
        """Scaler that leaves ``d`` columns unchanged."""
        return cls(shift=np.zeros(d), scale=np.ones(d))

    def transform(self, a: Any) -> Any:
        """Map raw values to scaled ones: ``(a - shift) / scale``.

        Parameters
        ----------
        a : np.ndarray or torch.Tensor, shape (N, d) or (d,)
            Values in column units. A tensor stays a tensor (same dtype/device).

        Returns
        -------
        np.ndarray or torch.Tensor, same shape as ``a``

        Raises
        ------
        DataError
            If the last dimension of ``a`` is not ``d``.
        """
        shift, scale = self._params_like(a)
        return (a - shift) / scale

    def inverse(self, a: Any) -> Any:
        """Map scaled values back to column units: ``a * scale + shift``.

        Parameters
        ----------
        a : np.ndarray or torch.Tensor, shape (N, d) or (d,)

        Returns
        -------
        np.ndarray or torch.Tensor, same shape as ``a``

        Raises
        ------
        DataError
            If the last dimension of ``a`` is not ``d``.
        """
        shift, scale = self._params_like(a)
        return a * scale + shift

    def to_dict(self) -> dict[str, list[float]]:
        """Plain-list form, safe for checkpoints and JSON."""
        return {"shift": self.shift.tolist(), "scale": self.scale.tolist()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Scaler":
        """Rebuild from :meth:`to_dict` output (lists, arrays or tensors).

        Raises
        ------
        DataError
            If a key is missing or the values are inconsistent.
        """
        try:
            shift, scale = d["shift"], d["scale"]
        except (KeyError, TypeError) as exc:
            raise DataError("a scaler needs both 'shift' and 'scale' entries.") from exc
        return cls(shift=_to_numpy(shift), scale=_to_numpy(scale))

    def _params_like(self, a: Any) -> tuple[Any, Any]:
        shape = tuple(getattr(a, "shape", ()))
        if not shape or shape[-1] != self.dim:
            raise DataError(
                f"expected values with {self.dim} columns, got an array of shape {shape}."
            )
        if type(a).__module__.startswith("torch"):
            return (
                a.new_tensor(self.shift),
                a.new_tensor(self.scale),
            )
        return self.shift, self.scale


def _to_numpy(v: Any) -> np.ndarray:
    if hasattr(v, "detach"):  # torch.Tensor
        v = v.detach().cpu().numpy()
    return np.asarray(v, dtype=np.float64)


def _as_2d(a: Any) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[0] == 0:
        raise DataError(f"expected a non-empty (N, d) array, got shape {a.shape}.")
    return a
