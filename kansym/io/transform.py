"""The map between CSV units and the units a KAN is trained in.

Inputs go to ``u = (g(x) - in_shift) / in_scale`` and the model output ``o`` comes back as
``y = g^{-1}(o * out_scale + out_shift)``, with ``g = log`` in log space and the identity
otherwise. Log space turns a multiplicative law (``y = C a^p b^q``) into an additive one
that a KAN of linear edges represents exactly (used when every column is positive and
spans orders of magnitude, e.g. Kepler's third law). A target that is negative on every
row is learned as ``-y`` (:class:`kansym.io.magnitude.ColumnScales`); in log space the
sign then stays outside the log, ``y = s exp(o * out_scale + out_shift)`` with
``s = output_sign = -1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy
import torch

from kansym.errors import DataError
from kansym.io.scaler import Scaler

__all__ = ["DataTransform"]


@dataclass(frozen=True)
class DataTransform:
    """Per-column scalers (and an optional log) between CSV and model units.

    Attributes
    ----------
    inputs_scaler : Scaler
        Inputs min-max scaled to [-1, 1] (after the log in log space).
    targets_scaler : Scaler
        Targets standardised to mean 0 and std 1 (after the log in log space).
    log_space : bool
    output_sign : tuple of float
        Per target, the sign ``s`` outside the log in log space (``y = s exp(...)``); empty
        (the default) for all ``+1``. In linear units a sign is part of the targets' scaler.
    """

    inputs_scaler: Scaler
    targets_scaler: Scaler
    log_space: bool = False
    output_sign: tuple[float, ...] = ()

    def _sign(self) -> np.ndarray:
        return np.asarray(self.output_sign, dtype=np.float64) if self.output_sign else np.ones(1)

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
        if np.any(x.max(axis=0) - x.min(axis=0) <= 0):
            raise DataError("an input column is constant; drop it before fitting")
        if np.any(y.max(axis=0) - y.min(axis=0) <= 0):  # not std: it underflows to 0 for |y| < 1e-162
            raise DataError("the target column is constant; there is no law to find")
        return cls(Scaler.minmax(x), Scaler.standard(y), log_space)

    @classmethod
    def affine(cls, in_shift, in_scale, out_shift, out_scale, *, log_space: bool = False) -> "DataTransform":
        """A transform from explicit shifts and scales (one per column)."""
        return cls(Scaler(np.asarray(in_shift), np.asarray(in_scale)), Scaler(np.asarray(out_shift), np.asarray(out_scale)), log_space)

    def inputs(self, x: np.ndarray) -> np.ndarray:
        """CSV inputs ``(N, d_in)`` -> model inputs."""
        return self.inputs_scaler.transform(np.log(x) if self.log_space else x)

    def targets(self, y: np.ndarray) -> np.ndarray:
        """CSV targets ``(N, d_out)`` -> model targets."""
        return self.targets_scaler.transform(np.log(y * self._sign()) if self.log_space else y)

    def outputs(self, o: np.ndarray) -> np.ndarray:
        """Model outputs ``(N, d_out)`` -> CSV units."""
        y = self.targets_scaler.inverse(o)
        return np.exp(y) * self._sign() if self.log_space else y

    def inputs_torch(self, x: torch.Tensor) -> torch.Tensor:
        """Same as :meth:`inputs` on tensors."""
        return self.inputs_scaler.transform(torch.log(x) if self.log_space else x)

    def outputs_torch(self, o: torch.Tensor) -> torch.Tensor:
        """Same as :meth:`outputs` on tensors (differentiable)."""
        y = self.targets_scaler.inverse(o)
        if not self.log_space:
            return y
        y = torch.exp(y)
        return y * torch.as_tensor(self._sign(), dtype=y.dtype, device=y.device) if self.output_sign else y

    def input_exprs(self, symbols: list[sympy.Symbol]) -> list[sympy.Expr]:
        """The model inputs as sympy expressions of the CSV symbols."""
        sc = self.inputs_scaler
        out = []
        for s, shift, scale in zip(symbols, sc.shift, sc.scale):
            v = sympy.log(s) if self.log_space else s
            out.append((v - sympy.Float(float(shift))) / sympy.Float(float(scale)))
        return out

    def output_expr(self, o: sympy.Expr, index: int = 0) -> sympy.Expr:
        """A model output expression in CSV units."""
        sc = self.targets_scaler
        y = o * sympy.Float(float(sc.scale[index])) + sympy.Float(float(sc.shift[index]))
        if not self.log_space:
            return y
        return sympy.exp(y) * (int(self.output_sign[index]) if self.output_sign else 1)

    def to_dict(self) -> dict:
        return {
            "inputs": self.inputs_scaler.to_dict(),
            "targets": self.targets_scaler.to_dict(),
            "log_space": self.log_space,
            **({"output_sign": list(self.output_sign)} if self.output_sign else {}),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "DataTransform":
        sign = tuple(float(s) for s in data.get("output_sign", ()))
        if any(s not in (-1.0, 1.0) for s in sign):
            raise DataError(f"the transform's output_sign {list(sign)} holds a value other than -1 or 1")
        return cls(Scaler.from_dict(data["inputs"]), Scaler.from_dict(data["targets"]), bool(data["log_space"]),
                   sign)
