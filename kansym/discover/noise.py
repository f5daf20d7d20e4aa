"""How large the structure search's oracle error is at each of its values.

The separability and symmetry tests (:mod:`kansym.discover.separate`,
:mod:`kansym.discover.symmetry`) decide "zero" against the oracle's error. One RMS error
for the whole table is right when the error is the same everywhere (a model in linear
units, or noise of one size). A law spanning decades, learned in log units, has an error
proportional to its value instead: one RMS error, set by the largest values, then hides
every effect among the small ones (``m c^2 / sqrt(1 - v^2/c^2)`` split as ``g(m, c) + h(v)``:
the ``v`` effect is a few per cent of values up to 500).

The error is modelled as a variance function of the oracle's value ``v``,

    err(v)^2 = a^2 + (r v)^2,

an absolute part (noise of one size) and a relative part, fitted by non-negative least
squares of the squared held-out residuals on ``[1, v^2]`` (the variance-function
regression of Carroll & Ruppert 1988, "Transformation and Weighting in Regression", §3.3).
Its mean over the held-out rows is the mean squared error, so a constant error gives the
one RMS error of before.

A sub-problem whose values are a function of the oracle's (``f - c`` of a product, ``f^2``
or ``1 / f`` of a transformed target, :data:`TRANSFORMS`) carries the error propagated to
first order: ``err_T(T(v)) = |T'(v)| err(v)``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, NamedTuple

import numpy as np
import sympy
from scipy.optimize import nnls

__all__ = ["OracleError", "TransformedError", "TRANSFORMS", "TargetTransform", "as_error"]


class TargetTransform(NamedTuple):
    """A transform ``T`` of the oracle's values that may make a law additive (AI Feynman,
    Udrescu & Tegmark 2020, §2: the target's square, inverse, ... are tried too).

    ``forward(v)``; ``inverse(w, sign)`` on arrays and ``symbolic(e, sign)`` on sympy (``sign``
    the strict sign of ``v`` on the data); ``slope(v) = |T'(v)|``; ``text`` a template of the
    inverse for descriptions (``{}`` the transformed law).
    """

    forward: Callable[[np.ndarray], np.ndarray]
    inverse: Callable[[np.ndarray, int], np.ndarray]
    symbolic: Callable[[sympy.Expr, int], sympy.Expr]
    slope: Callable[[np.ndarray], np.ndarray]
    text: str


TRANSFORMS: dict[str, TargetTransform] = {
    # sqrt(x^2 + y^2 + z^2): its square is a sum
    "square": TargetTransform(np.square, lambda w, s: s * np.sqrt(np.maximum(w, 0.0)),
                              lambda e, s: s * sympy.sqrt(e), lambda v: 2.0 * np.abs(v), "sqrt({})"),
    # 1 / (a + b): its inverse is a sum
    "inverse": TargetTransform(lambda v: 1.0 / v, lambda w, s: 1.0 / w, lambda e, s: 1 / e,
                               lambda v: 1.0 / np.square(v), "1/({})"),
}


@dataclass(frozen=True)
class OracleError:
    """The oracle's RMS error at its value ``v``: ``sqrt(absolute^2 + (relative (v + shift))^2)``.

    Attributes
    ----------
    absolute : float
        The part of one size, in the units of the oracle.
    relative : float
        The part proportional to the oracle's value (dimensionless).
    shift : float
        Added to ``v`` before the relative part: a sub-problem ``f - c`` keeps the error of ``f``.
    """

    absolute: float
    relative: float = 0.0
    shift: float = 0.0

    @classmethod
    def fit(cls, pred: np.ndarray, y: np.ndarray) -> "OracleError":
        """The variance function of the held-out residuals ``pred - y`` (both ``(N,)``).

        Non-finite rows are left out; without finite rows the error is infinite (nothing is
        decided zero).
        """
        pred, y = np.asarray(pred, dtype=np.float64), np.asarray(y, dtype=np.float64)
        ok = np.isfinite(pred) & np.isfinite(y)
        if not np.any(ok):
            return cls(np.inf)
        p, r2 = pred[ok], (pred[ok] - y[ok]) ** 2
        scale = max(float(np.max(np.abs(p))), 1e-300)  # columns of order 1 for the solve
        design = np.column_stack([np.ones_like(p), (p / scale) ** 2])
        unit = max(float(np.mean(r2)), 1e-300)
        coef, _ = nnls(design, r2 / unit)
        a2, r2_rel = coef[0] * unit, coef[1] * unit / scale**2
        if not (np.isfinite(a2) and np.isfinite(r2_rel)) or a2 + r2_rel == 0.0:
            return cls(float(np.sqrt(np.mean(r2))))
        return cls(float(np.sqrt(a2)), float(np.sqrt(r2_rel)))

    def at(self, v: np.ndarray) -> np.ndarray:
        """The error at the oracle's values ``v`` (any shape)."""
        v = np.asarray(v, dtype=np.float64)
        with np.errstate(all="ignore"):
            return np.sqrt(self.absolute ** 2 + (self.relative * (v + self.shift)) ** 2)

    def rms(self, v: np.ndarray) -> float:
        """The RMS error over the values ``v``."""
        with np.errstate(all="ignore"):
            return float(np.sqrt(np.mean(self.at(v) ** 2)))

    def shifted(self, offset: float) -> "OracleError":
        """The error of ``f - offset`` in terms of its own values."""
        return replace(self, shift=self.shift + float(offset))


@dataclass(frozen=True)
class TransformedError:
    """The error of ``T(f) - shift`` at its values, from the error ``inner`` of ``f``.

    Attributes
    ----------
    inner : OracleError or TransformedError
    transform : str
        A key of :data:`TRANSFORMS`.
    sign : int
        The strict sign of ``f`` on the data (``+1`` or ``-1``).
    shift : float
    """

    inner: "OracleError | TransformedError"
    transform: str
    sign: int = 1
    shift: float = 0.0

    def at(self, w: np.ndarray) -> np.ndarray:
        """The error at the values ``w`` of ``T(f) - shift``: ``|T'(v)| inner.at(v)``, ``v = f``."""
        t = TRANSFORMS[self.transform]
        with np.errstate(all="ignore"):
            v = t.inverse(np.asarray(w, dtype=np.float64) + self.shift, self.sign)
            return t.slope(v) * self.inner.at(v)

    def rms(self, w: np.ndarray) -> float:
        """The RMS error over the values ``w``."""
        with np.errstate(all="ignore"):
            return float(np.sqrt(np.mean(self.at(w) ** 2)))

    def shifted(self, offset: float) -> "TransformedError":
        """The error of ``T(f) - shift - offset`` in terms of its own values."""
        return replace(self, shift=self.shift + float(offset))


def as_error(eps: "float | OracleError | TransformedError") -> "OracleError | TransformedError":
    """An error model from one RMS error (the same everywhere), or the model as it is."""
    return eps if isinstance(eps, (OracleError, TransformedError)) else OracleError(float(eps))
