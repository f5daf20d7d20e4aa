"""Edges that fit no primitive: kept numeric (a sampled curve) and flagged.

When the best primitive of the library explains an edge's samples with an R² below
``min_r2`` (:func:`kansym.symbolic.compose.symbolify`), forcing that primitive would put
a wrong term in the formula and hide the problem (pykan's ``auto_symbolic`` always
picks a primitive). The edge is kept as a piecewise-linear interpolant of its samples
instead, appears in the formula as an opaque function ``phi_l_i_j(...)`` and is listed
by :attr:`kansym.discover.result.Formula.numeric_edges` so the CLI can flag it. The opaque
function carries its numpy implementation (``sympy.implemented_function``), so the
formula still evaluates, refits and verifies numerically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy
import torch
from sympy.utilities.lambdify import implemented_function

from kansym.errors import ConfigError

__all__ = ["NumericEdge", "NUMERIC", "numeric_edge", "edge_labels"]

NUMERIC = "numeric"
COMPLEXITY = 10  # dearer than every primitive: the Occam step replaces it when it can


@dataclass(frozen=True)
class NumericEdge:
    """A numeric edge: ``y = interp(x; knots, values)``, linear beyond the ends.

    Has the interface of :class:`kansym.symbolic.fit.EdgeFit` (``primitive``, ``a, b, c, d``,
    ``r2``, ``complexity``, ``numpy``, ``torch``, ``sympy``, ``to_dict``).

    Attributes
    ----------
    name : str
        Name of the opaque sympy function (``phi_l_i_j`` for edge ``(l, i, j)``).
    knots, values : tuple of float
        Increasing sample positions (model units of the edge input) and edge outputs.
    r2 : float
        R² of the best primitive the library had (why the edge stayed numeric).
    best : str
        That primitive's name.
    """

    name: str
    knots: tuple[float, ...]
    values: tuple[float, ...]
    r2: float
    best: str = ""
    primitive: str = NUMERIC
    a: float = 1.0
    b: float = 0.0
    c: float = 1.0
    d: float = 0.0
    p: None = None

    def __post_init__(self) -> None:
        k = np.asarray(self.knots)
        if k.ndim != 1 or k.size < 2 or len(self.values) != k.size or np.any(np.diff(k) <= 0):
            raise ConfigError("a numeric edge needs at least 2 increasing knots and one value per knot.")

    @property
    def complexity(self) -> int:
        return COMPLEXITY

    def numpy(self, x: Any) -> np.ndarray:
        """Evaluate on an array of any shape (float64), linear extrapolation past the ends."""
        x = np.asarray(x, dtype=np.float64)
        k, v = np.asarray(self.knots), np.asarray(self.values)
        y = np.interp(x, k, v)
        lo_slope = (v[1] - v[0]) / (k[1] - k[0])
        hi_slope = (v[-1] - v[-2]) / (k[-1] - k[-2])
        y = np.where(x < k[0], v[0] + lo_slope * (x - k[0]), y)
        return np.where(x > k[-1], v[-1] + hi_slope * (x - k[-1]), y)

    def torch(self, x: torch.Tensor) -> torch.Tensor:
        """Same as :meth:`numpy` on a tensor (differentiable in ``x``)."""
        k = torch.as_tensor(self.knots, dtype=x.dtype, device=x.device)
        v = torch.as_tensor(self.values, dtype=x.dtype, device=x.device)
        idx = torch.clamp(torch.searchsorted(k, x.detach().contiguous()) - 1, 0, k.numel() - 2)
        k0, k1, v0, v1 = k[idx], k[idx + 1], v[idx], v[idx + 1]
        return v0 + (v1 - v0) * (x - k0) / (k1 - k0)

    def sympy(self, x_expr: sympy.Expr) -> sympy.Expr:
        """``phi_l_i_j(x_expr)``: an opaque function that lambdify evaluates with :meth:`numpy`."""
        return implemented_function(sympy.Function(self.name), self.numpy)(x_expr)

    def to_dict(self) -> dict[str, Any]:
        return {"primitive": NUMERIC, "name": self.name, "knots": list(self.knots),
                "values": list(self.values), "r2": self.r2, "best": self.best,
                "a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0, "p": None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "NumericEdge":
        try:
            return cls(str(data["name"]), tuple(map(float, data["knots"])), tuple(map(float, data["values"])),
                       float(data["r2"]), str(data.get("best", "")))
        except KeyError as exc:
            raise ConfigError(f"numeric edge dict lacks {exc}; pass the output of to_dict().") from None


def numeric_edge(edge: tuple[int, int, int], x: np.ndarray, y: np.ndarray, *, r2: float, best: str,
                 n_knots: int = 256) -> NumericEdge:
    """Sample an edge's curve at ``n_knots`` quantiles of its inputs.

    Parameters
    ----------
    edge : (layer, i_in, j_out)
    x, y : ndarray (N,)
        Edge input and output samples (model units).
    r2, best : float, str
        The best primitive's R² and name (kept for the report).
    """
    order = np.argsort(x, kind="stable")
    xs, ys = np.asarray(x, float)[order], np.asarray(y, float)[order]
    q = np.unique(np.quantile(xs, np.linspace(0, 1, n_knots)))
    vals = np.interp(q, xs, ys)
    if q.size < 2:
        q, vals = np.array([xs[0], xs[0] + 1.0]), np.array([ys[0], ys[0]])
    return NumericEdge("phi_{}_{}_{}".format(*edge), tuple(map(float, q)), tuple(map(float, vals)), float(r2), best)


def edge_labels(names) -> str:
    """``phi_l_i_j`` names as printed to a user, each with the edge the log calls it by:
    ``"phi_0_4_0 (edge 0:4->0)"``; names of another form are left as they are.

    >>> edge_labels(["phi_0_4_0", "phi_1_0_0"])
    'phi_0_4_0 (edge 0:4->0), phi_1_0_0 (edge 1:0->0)'
    """
    out = []
    for name in names:
        parts = name.split("_")
        if len(parts) == 4 and parts[0] == "phi" and all(p.isdigit() for p in parts[1:]):
            out.append(f"{name} (edge {parts[1]}:{parts[2]}->{parts[3]})")
        else:
            out.append(name)
    return ", ".join(out)

