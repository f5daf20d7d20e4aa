"""The map between CSV units and the units a KAN is trained in.

Inputs go to ``u = (g(x) - in_shift) / in_scale`` and the model output ``o`` comes back as
``y = g^{-1}(o * out_scale + out_shift)``, with ``g = log`` in log space and the identity
otherwise. Log space turns a multiplicative law (``y = C a^p b^q``) into an additive one
that a KAN of linear edges represents exactly (used when every column is positive and
spans orders of magnitude, e.g. Kepler's third law).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy
import torch

from kansym.errors import DataError

__all__ = ["DataTransform", "choose_space"]


def choose_space(x: np.ndarray, y: np.ndarray, space: str = "auto", *, decades: float = 2.0) -> str:
    """Pick ``"linear"`` or ``"log"`` for a table.

    ``auto`` chooses log space when every input and target value is positive and at
    least one column spans ``decades`` orders of magnitude or more.

    Parameters
    ----------
    x : ndarray (N, d_in)
    y : ndarray (N, d_out)
    space : {"auto", "linear", "log"}

    Raises
    ------
    DataError
        ``space="log"`` with a non-positive value.
    """
    positive = bool(np.all(x > 0) and np.all(y > 0))
    if space == "log":
        if not positive:
            raise DataError("log space needs every input and target value to be positive; use --space linear")
        return "log"
    if space == "linear":
        return "linear"
    if not positive:
        return "linear"
    both = np.concatenate([x, y], axis=1)
    span = np.log10(both.max(axis=0) / both.min(axis=0))
    return "log" if float(span.max()) >= decades else "linear"


@dataclass(frozen=True)
class DataTransform:
    """Per-column affine maps (and an optional log) between CSV and model units.

    Attributes
    ----------
    in_shift, in_scale : tuple of float, length d_in
        Inputs are min-max scaled to [-1, 1] (after the log in log space).
    out_shift, out_scale : tuple of float, length d_out
        Targets are standardised (mean 0, std 1, after the log in log space).
    log_space : bool
    """

    in_shift: tuple[float, ...]
    in_scale: tuple[float, ...]
    out_shift: tuple[float, ...]
    out_scale: tuple[float, ...]
    log_space: bool = False

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, *, log_space: bool = False) -> "DataTransform":
        """Transform fitted to data ``x (N, d_in)``, ``y (N, d_out)``.

        Raises
        ------
        DataError
            A constant column (zero range) or a non-positive value in log space.
        """
        if log_space:
            if np.any(x <= 0) or np.any(y <= 0):
                raise DataError("log space needs every input and target value to be positive")
            x, y = np.log(x), np.log(y)
        lo, hi = x.min(axis=0), x.max(axis=0)
        if np.any(hi - lo <= 0):
            raise DataError("an input column is constant; drop it before fitting")
        std = y.std(axis=0)
        if np.any(std <= 0):
            raise DataError("the target column is constant; there is no law to find")
        return cls(
            in_shift=tuple(float(v) for v in (hi + lo) / 2),
            in_scale=tuple(float(v) for v in (hi - lo) / 2),
            out_shift=tuple(float(v) for v in y.mean(axis=0)),
            out_scale=tuple(float(v) for v in std),
            log_space=log_space,
        )

    def inputs(self, x: np.ndarray) -> np.ndarray:
        """CSV inputs ``(N, d_in)`` -> model inputs."""
        x = np.log(x) if self.log_space else x
        return (x - np.asarray(self.in_shift)) / np.asarray(self.in_scale)

    def targets(self, y: np.ndarray) -> np.ndarray:
        """CSV targets ``(N, d_out)`` -> model targets."""
        y = np.log(y) if self.log_space else y
        return (y - np.asarray(self.out_shift)) / np.asarray(self.out_scale)

    def outputs(self, o: np.ndarray) -> np.ndarray:
        """Model outputs ``(N, d_out)`` -> CSV units."""
        y = o * np.asarray(self.out_scale) + np.asarray(self.out_shift)
        return np.exp(y) if self.log_space else y

    def outputs_torch(self, o: torch.Tensor) -> torch.Tensor:
        """Same as :meth:`outputs` on tensors (differentiable)."""
        y = o * torch.as_tensor(self.out_scale, dtype=o.dtype, device=o.device)
        y = y + torch.as_tensor(self.out_shift, dtype=o.dtype, device=o.device)
        return torch.exp(y) if self.log_space else y

    def inputs_torch(self, x: torch.Tensor) -> torch.Tensor:
        """Same as :meth:`inputs` on tensors."""
        x = torch.log(x) if self.log_space else x
        shift = torch.as_tensor(self.in_shift, dtype=x.dtype, device=x.device)
        return (x - shift) / torch.as_tensor(self.in_scale, dtype=x.dtype, device=x.device)

    def input_exprs(self, symbols: list[sympy.Symbol]) -> list[sympy.Expr]:
        """The model inputs as sympy expressions of the CSV symbols."""
        out = []
        for s, shift, scale in zip(symbols, self.in_shift, self.in_scale):
            v = sympy.log(s) if self.log_space else s
            out.append((v - sympy.Float(shift)) / sympy.Float(scale))
        return out

    def output_expr(self, o: sympy.Expr, index: int = 0) -> sympy.Expr:
        """A model output expression in CSV units."""
        y = o * sympy.Float(self.out_scale[index]) + sympy.Float(self.out_shift[index])
        return sympy.exp(y) if self.log_space else y

    def to_dict(self) -> dict:
        return {
            "in_shift": list(self.in_shift),
            "in_scale": list(self.in_scale),
            "out_shift": list(self.out_shift),
            "out_scale": list(self.out_scale),
            "log_space": self.log_space,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "DataTransform":
        return cls(
            in_shift=tuple(data["in_shift"]),
            in_scale=tuple(data["in_scale"]),
            out_shift=tuple(data["out_shift"]),
            out_scale=tuple(data["out_scale"]),
            log_space=bool(data["log_space"]),
        )
