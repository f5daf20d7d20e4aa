"""Fit one edge's samples ``(x, y)`` to ``c * f(a * x + b) + d`` and choose ``f``; an edge no primitive fits stays numeric.

Algorithm (docs/algorithms.md §5, "Per-edge symbolic fit"; the grid-then-refine scheme of
Liu et al. 2024, arXiv:2404.19756, §2.5.1 "symbolic snapping"):

1. Grid search over the inner parameters ``(a, b)`` (and the exponent ``p`` of
   ``x^p``). For every grid point at once (numpy broadcasting) the outer
   ``(c, d)`` are the closed-form linear least-squares solution, so the grid is
   scored by its residual sum of squares. The grid runs on at most
   ``max_grid_points`` evenly spread samples.
2. The best grid points seed :func:`scipy.optimize.least_squares` on all the
   data, by variable projection (Golub & Pereyra 1973): the optimiser moves the
   inner parameters, ``(c, d)`` are re-solved in closed form inside the
   residual, so the result is the joint least-squares optimum of
   ``(a, b, c, d[, p])``.

Guards against degenerate fits:

* identifiable parameterisation (see :mod:`kansym.symbolic.library`): ``a`` is
  only a sign for homogeneous primitives, ``b = 0`` for ``exp``;
* for primitives with a fitted scale ``a`` (``exp``, ``sin``, ``cos``, ``tanh``,
  ``arcsin``, ``gaussian``) the argument must sweep at least ``min_arg_span``
  over the data: ``|a| * (max x - min x) >= min_arg_span``, both on the grid and
  as a bound of the refinement, so ``cos(a x)`` with ``a -> 0`` cannot pose as
  a parabola, nor ``exp(a x)`` as a line;
* a fit whose ``f(a x + b)`` is flat to ``1e-6`` relative (so ``|c|`` would
  have to be huge) is rejected;
* domain-restricted primitives are accepted only if ``a x + b`` stays inside
  one interval of their domain over the whole data range, ``1e-4`` times the
  argument's span away from open ends; otherwise the fit gets ``r2 = -inf``.

Edges that fit no primitive: kept numeric (a sampled curve) and flagged.

When the best primitive of the library explains an edge's samples with an R² below
``min_r2`` (:func:`kansym.symbolic.compose.symbolify`), forcing that primitive would put
a wrong term in the formula and hide the problem (pykan's ``auto_symbolic`` always
picks a primitive). The edge is kept as a piecewise-linear interpolant of its samples
instead, appears in the formula as an opaque function ``phi_l_i_j(...)`` and is listed
by :attr:`kansym.discover.result.Formula.numeric_edges` so the CLI can flag it. The opaque
function carries its numpy implementation (``sympy.implemented_function``), so the
formula still evaluates, refits and verifies numerically.

The numeric engine (grid search and least-squares refinement) works on numpy arrays and
returns plain :class:`Fit` tuples that :func:`fit_primitive` and :func:`select_edge_fit` wrap into
:class:`EdgeFit`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, asdict
from typing import Any, NamedTuple, Iterable, Sequence

import numpy as np
import sympy
import torch
from scipy.optimize import least_squares
from sympy.utilities.lambdify import implemented_function

from kansym.config import R2_THRESHOLD
from kansym.errors import ConfigError, DataError, FitError
from kansym.symbolic.library import Primitive, PRIMITIVES, get_library
from kansym.symbolic.verify import r2_from_sse

__all__ = ['NumericEdge', 'NUMERIC', 'numeric_edge', 'edge_labels', 'EdgeFit', 'fit_primitive', 'select_edge_fit']

logger = logging.getLogger("kansym")


NUMERIC = "numeric"
COMPLEXITY = 10  # dearer than every primitive: the Occam step replaces it when it can


@dataclass(frozen=True)
class NumericEdge:
    """A numeric edge: ``y = interp(x; knots, values)``, linear beyond the ends.

    Has the interface of :class:`EdgeFit` (``primitive``, ``a, b, c, d``,
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


DOMAIN_MARGIN = 1e-4  # relative to the argument's span
FLAT_TOL = 1e-6  # std(f(u)) below this times max|f(u)| counts as flat


class Fit(NamedTuple):
    """Parameters and R² of one fitted primitive (``p`` only for ``x^p``)."""

    a: float
    b: float
    c: float
    d: float
    r2: float
    p: float | None


@dataclass(frozen=True)
class Data:
    x: np.ndarray  # (N,)
    y: np.ndarray  # (N,)
    xs: np.ndarray  # (n,) grid subsample
    ys: np.ndarray  # (n,)
    x_min: float
    x_max: float
    sst_floor: float


def prepare(x: Any, y: Any, max_grid_points: int) -> Data:
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or y.shape != x.shape:
        raise DataError(f"x and y must be 1-D of equal length, got shapes {x.shape} and {y.shape}.")
    if x.size < 3:
        raise DataError(f"an edge fit needs at least 3 samples, got {x.size}.")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise DataError("x and y contain NaN or inf; drop those samples before fitting.")
    order = np.argsort(x, kind="stable")
    idx = order[np.unique(np.linspace(0, x.size - 1, min(x.size, max_grid_points)).round().astype(int))]
    yscale = max(1.0, float(np.max(np.abs(y))))
    # SST floor of every R² here: an output varying by less than float64 noise is not
    # explained better by one primitive than by another (kansym.symbolic.verify.r2_from_sse)
    return Data(x, y, x[idx], y[idx], float(x.min()), float(x.max()),
                 sst_floor=x.size * (1e-10 * yscale) ** 2)


def _closed_form(F: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least-squares ``(c, d)`` of ``y ~ c F + d`` for every row of ``F`` (G, n) at once."""
    fm = F.mean(axis=1)  # (G,)
    Fc = F - fm[:, None]  # (G, n)
    yc = y - y.mean()
    var = np.einsum("gn,gn->g", Fc, Fc)
    cov = Fc @ yc
    flat = np.sqrt(var / F.shape[1]) <= FLAT_TOL * np.max(np.abs(F), axis=1)
    safe = np.where(flat, 1.0, var)
    c = np.where(flat, 0.0, cov / safe)
    d = y.mean() - c * fm
    sse = np.maximum(yc @ yc - c * cov, 0.0)
    return c, d, np.where(flat, np.inf, sse)


def _a_min(data: Data, min_arg_span: float) -> float:
    span = data.x_max - data.x_min
    return min_arg_span / span if span > 0 else math.inf


def _grid(prim: Primitive, data: Data, a_range: tuple[float, float], b_range: tuple[float, float],
          n_grid: int, min_arg_span: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flattened grid ``(A, B, P)`` of candidate inner parameters, each (G,)."""
    if prim.inner == "shift":
        signs = [1.0] if prim.parity else [1.0, -1.0]
        b_list = [np.linspace(*b_range, n_grid)]
        if prim.domain is not None:  # seed shifts that put the domain edge just past the data
            span = max(data.x_max - data.x_min, 1e-12)
            offs = span * np.array([1e-3, 1e-2, 0.1, 0.3, 1.0, 3.0])
            for s in signs:
                for x_edge in (data.x_min, data.x_max):
                    b_list += [-s * x_edge + offs, -s * x_edge - offs]
        b_all = np.concatenate(b_list)
        b_all = b_all[(b_all >= b_range[0]) & (b_all <= b_range[1])]
        A = np.repeat(signs, b_all.size)
        B = np.tile(b_all, len(signs))
    else:
        a_min = _a_min(data, min_arg_span)
        a = np.linspace(*a_range, n_grid)
        a = a[np.abs(a) >= a_min]
        if prim.parity:
            a = a[a > 0]
        if prim.inner == "scale":
            A, B = a, np.zeros_like(a)
        else:
            if prim.period is not None:
                b = np.linspace(-prim.period / 2, prim.period / 2, n_grid, endpoint=False)
            else:
                b = np.linspace(*b_range, n_grid)
            A, B = np.repeat(a, b.size), np.tile(b, a.size)
    if prim.n_params == 0:
        return A, B, np.full(A.shape, np.nan)
    p = np.linspace(*prim.p_range, int(round(2 * (prim.p_range[1] - prim.p_range[0]))) + 1)  # steps of 1/2
    p = p[np.abs(p) > 0.05]
    return np.repeat(A, p.size), np.repeat(B, p.size), np.tile(p, A.size)


def _eval(prim: Primitive, u: np.ndarray, p: Any) -> np.ndarray:
    with np.errstate(all="ignore"):
        return prim.numpy_fn(u, p) if prim.n_params else prim.numpy_fn(u)


def _valid(prim: Primitive, a: Any, b: Any, data: Data) -> Any:
    """Domain check of ``u = a x + b`` over the data range (elementwise in ``a, b``)."""
    u1, u2 = a * data.x_min + b, a * data.x_max + b
    lo, hi = np.minimum(u1, u2), np.maximum(u1, u2)
    return prim.in_domain(lo, hi, DOMAIN_MARGIN * np.maximum(hi - lo, 1e-12))


def _r2(sse: float, data: Data) -> float:
    """R² on all samples from the SSE of a fit (:func:`~kansym.symbolic.verify.r2_from_sse`, SST floored)."""
    yc = data.y - data.y.mean()
    return r2_from_sse(sse, float(yc @ yc), data.sst_floor)


def _canonical(prim: Primitive, a: float, b: float, c: float) -> tuple[float, float, float]:
    if prim.inner == "affine" and a < 0 and prim.parity is not None:
        a, b = -a, -b
        if prim.parity == "odd":
            c = -c
    if prim.period is not None:  # sin and cos: f(u + period/2) = -f(u)
        half = prim.period / 2
        b = (b + half) % prim.period - half  # in [-half, half)
        if b > half / 2:
            b, c = b - half, -c
        elif b <= -half / 2:
            b, c = b + half, -c
    return float(a), float(b), float(c)


def _cd1(F: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Closed-form ``(c, d, sse)`` for one row ``F`` (n,); ``sse = inf`` if ``F`` is flat."""
    c, d, sse = _closed_form(F[None, :], y)
    return float(c[0]), float(d[0]), float(sse[0])


def _refine(prim: Primitive, data: Data, seed: tuple[float, float, float], o: "Opts",
            polish: bool) -> tuple[float, float, float]:
    """Variable-projection refinement of the inner parameters ``(a, b, p)`` from one grid seed.

    Runs on the grid subsample, then (``polish``) on all samples when there are more.
    """
    a0, b0, _ = seed
    a_min = _a_min(data, o.min_arg_span)
    free: list[tuple[int, float, float]] = []  # (index into (a, b, p), lower, upper)
    if prim.inner in ("scale", "affine"):
        free.append((0, max(a_min, o.a_range[0]), o.a_range[1]) if a0 > 0
                    else (0, o.a_range[0], min(-a_min, o.a_range[1])))
    if prim.inner in ("shift", "affine"):
        per = prim.period
        free.append((1, b0 - per, b0 + per) if per is not None else (1, *o.b_range))
    if prim.n_params:
        free.append((2, *prim.p_range))
    idx = [k for k, _, _ in free]
    lo, hi = np.array([f[1] for f in free]), np.array([f[2] for f in free])
    if not free or np.any(lo >= hi):
        return seed
    u1, u2 = a0 * data.x_min + b0, a0 * data.x_max + b0
    margin = DOMAIN_MARGIN * max(abs(u2 - u1), 1e-12)
    region = None
    if prim.domain is not None:
        region = next(iv for iv in prim.domain if iv.contains(min(u1, u2), max(u1, u2), margin))

    def unpack(theta: np.ndarray) -> tuple[float, float, float]:
        vals = list(seed)
        for k, t in zip(idx, theta):
            vals[k] = float(t)
        return vals[0], vals[1], vals[2]

    def solve(theta0: np.ndarray, x: np.ndarray, y: np.ndarray, max_nfev: int) -> np.ndarray:
        def resid(theta: np.ndarray) -> np.ndarray:
            a, b, p = unpack(theta)
            u = a * x + b
            F = _eval(prim, u if region is None else region.clip(u, margin), p)
            if not np.all(np.isfinite(F)):
                return np.full(y.shape, 1e10)
            c, d, _ = _cd1(F, y)
            return c * F + d - y

        return least_squares(resid, np.clip(theta0, lo, hi), bounds=(lo, hi), method="trf",
                             xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=max_nfev).x

    theta = solve(np.array([seed[k] for k in idx]), data.xs, data.ys, 100)
    if polish and data.xs.size < data.x.size:
        theta = solve(theta, data.x, data.y, 20)
    return unpack(theta)


@dataclass(frozen=True)
class Opts:
    a_range: tuple[float, float] = (-10.0, 10.0)
    b_range: tuple[float, float] = (-10.0, 10.0)
    n_grid: int = 41
    min_arg_span: float = 1.0
    max_grid_points: int = 256
    n_starts: int = 1


@dataclass(frozen=True)
class GridResult:
    A: np.ndarray  # (G,) inner scales
    B: np.ndarray  # (G,) inner shifts
    P: np.ndarray  # (G,) exponents (NaN without)
    sse: np.ndarray  # (G,) on the subsample
    r2: float  # best grid R² on the subsample


def grid_stage(prim: Primitive, data: Data, o: Opts) -> GridResult | None:
    """Score every grid point; ``None`` if no grid point is inside the domain."""
    A, B, P = _grid(prim, data, o.a_range, o.b_range, o.n_grid, o.min_arg_span)
    if prim.domain is not None and A.size:
        ok = _valid(prim, A, B, data)
        A, B, P = A[ok], B[ok], P[ok]
    if A.size == 0:
        return None
    F = _eval(prim, A[:, None] * data.xs[None, :] + B[:, None], P[:, None])  # (G, n)
    finite = np.all(np.isfinite(F), axis=1)
    _, _, sse = _closed_form(np.where(finite[:, None], F, 0.0), data.ys)
    sse = np.where(finite, sse, np.inf)
    if not np.isfinite(sse).any():
        return None
    yc = data.ys - data.ys.mean()
    r2 = r2_from_sse(float(sse.min()), float(yc @ yc), data.sst_floor * data.ys.size / data.y.size)
    return GridResult(A, B, P, sse, r2)


def failed(prim: Primitive, data: Data) -> Fit:
    return Fit(1.0, 0.0, 0.0, float(data.y.mean()), -math.inf, 1.0 if prim.n_params else None)


def finish(prim: Primitive, data: Data, grid: GridResult, o: Opts, refine: bool,
            polish: bool) -> Fit:
    """Refine the best grid points (if ``refine``) and evaluate them on all samples."""
    n_starts = max(o.n_starts, 2) if prim.period is not None else o.n_starts  # periodic: many basins
    best: Fit | None = None
    for g in np.argsort(grid.sse, kind="stable")[:n_starts]:
        if not np.isfinite(grid.sse[g]):
            break
        seed = (float(grid.A[g]), float(grid.B[g]), float(grid.P[g]))
        # a list, seed first: a set of these tuples iterated in an order set by hash(nan),
        # which is the object's address (Python >= 3.10) for a primitive without exponent,
        # so a tie between the seed and its refinement went either way from run to run
        tries = [seed, _refine(prim, data, seed, o, polish)] if refine else [seed]
        for a, b, p in tries:
            if prim.domain is not None and not _valid(prim, a, b, data):
                continue
            F1 = _eval(prim, a * data.x + b, p)
            if not np.all(np.isfinite(F1)):
                continue
            c, d, s = _cd1(F1, data.y)
            if not math.isfinite(s):
                continue
            a, b, c = _canonical(prim, a, b, c)
            tried = Fit(a, b, c, d, _r2(s, data), float(p) if prim.n_params else None)
            if best is None or tried.r2 > best.r2:
                best = tried
    return best if best is not None else failed(prim, data)


def fit_simple(prim: Primitive, data: Data) -> Fit:
    """Primitives without inner parameters (``0`` and ``x``): closed form only."""
    if not prim.outer:
        d = float(data.y.mean())
        return Fit(1.0, 0.0, 0.0, d, _r2(float(np.sum((data.y - d) ** 2)), data), None)
    c, d, sse = _cd1(_eval(prim, data.x, None), data.y)
    if not math.isfinite(sse):  # constant x: no slope to fit
        c, sse = 0.0, float(np.sum((data.y - d) ** 2))
    return Fit(1.0, 0.0, c, d, _r2(sse, data), None)


def fit_prepared(prim: Primitive, data: Data, o: Opts, polish: bool = True) -> Fit:
    if prim.inner == "none":
        return fit_simple(prim, data)
    grid = grid_stage(prim, data, o)
    return failed(prim, data) if grid is None else finish(prim, data, grid, o, True, polish)


def _num(v: float) -> sympy.Expr:
    """A sympy number: exact for 0 and +-1, a Float otherwise."""
    if v in (0.0, 1.0, -1.0):
        return sympy.Integer(int(v))
    return sympy.Float(v)


@dataclass(frozen=True)
class EdgeFit:
    """A fitted edge function ``c * f(a * x + b) + d`` (``c * (a x + b)**p + d`` for ``x^p``).

    Attributes
    ----------
    primitive : str
        Name of ``f`` in :data:`kansym.symbolic.library.PRIMITIVES`.
    a, b, c, d : float
        Inner scale and shift, outer scale and offset.
    r2 : float
        Coefficient of determination on the fitted samples (``-inf`` if the
        primitive could not be fitted, e.g. out of its domain).
    p : float or None
        Exponent of ``x^p``; ``None`` for every other primitive.
    """

    primitive: str
    a: float
    b: float
    c: float
    d: float
    r2: float
    p: float | None = None

    def __post_init__(self) -> None:
        if self.primitive not in PRIMITIVES:
            get_library([self.primitive])  # raises ConfigError with the valid names

    @property
    def prim(self) -> Primitive:
        """The :class:`Primitive` named by :attr:`primitive`."""
        return PRIMITIVES[self.primitive]

    @property
    def complexity(self) -> int:
        """Complexity of the primitive."""
        return self.prim.complexity

    def _extra(self) -> tuple[float, ...]:
        if self.prim.n_params == 0:
            return ()
        if self.p is None:
            raise ConfigError(f"primitive {self.primitive!r} needs its exponent p; set EdgeFit.p.")
        return (self.p,)

    def numpy(self, x: np.ndarray) -> np.ndarray:
        """Evaluate on an array of any shape; returns float64 of the same shape."""
        x = np.asarray(x, dtype=np.float64)
        with np.errstate(all="ignore"):
            fx = self.prim.numpy_fn(self.a * x + self.b, *self._extra())
            return self.c * fx + self.d

    def torch(self, x: torch.Tensor) -> torch.Tensor:
        """Evaluate on a tensor of any shape, keeping its dtype; differentiable in ``x``."""
        u = self.a * x + self.b
        return self.c * self.prim.torch_fn(u, *self._extra()) + self.d

    def sympy(self, x_expr: sympy.Expr) -> sympy.Expr:
        """The edge as a sympy expression of ``x_expr`` (constants as Floats, 0 and +-1 exact)."""
        if not self.prim.outer:
            return _num(self.d)
        u = _num(self.a) * x_expr + _num(self.b)
        return _num(self.c) * self.prim.sympy_fn(u, *self._extra()) + _num(self.d)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (primitive by name) for checkpoints and JSON."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EdgeFit":
        """Rebuild from :meth:`to_dict`; raises ConfigError on missing keys or unknown primitive.

        A record of a numeric edge (``primitive == "numeric"``) gives a
        :class:`NumericEdge`, which has the same interface.
        """
        if data.get("primitive") == NUMERIC:
            return NumericEdge.from_dict(data)
        missing = {"primitive", "a", "b", "c", "d", "r2"} - set(data)
        if missing:
            raise ConfigError(f"EdgeFit dict lacks {sorted(missing)}; pass the output of to_dict().")
        p = data.get("p")
        return cls(
            primitive=str(data["primitive"]),
            a=float(data["a"]), b=float(data["b"]), c=float(data["c"]), d=float(data["d"]),
            r2=float(data["r2"]), p=None if p is None else float(p),
        )


def _resolve(library: Iterable[str | Primitive] | str | Primitive | None) -> tuple[Primitive, ...]:
    if library is None or isinstance(library, (str, Primitive)):
        library = None if library is None else [library]
    if library is None:
        return get_library(None)
    items = list(library)
    names = [p.name if isinstance(p, Primitive) else p for p in items]
    return get_library(names)


def _opts(kwargs: dict[str, Any]) -> Opts:
    unknown = set(kwargs) - set(Opts.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"unknown fit options {sorted(unknown)}; use {sorted(Opts.__dataclass_fields__)}.")
    o = Opts(**{k: tuple(map(float, v)) if k.endswith("_range") else v for k, v in kwargs.items()})
    if o.a_range[0] >= o.a_range[1] or o.b_range[0] >= o.b_range[1] or o.n_grid < 2:
        raise ConfigError("a_range and b_range must be increasing pairs and n_grid at least 2.")
    if o.n_starts < 1 or o.max_grid_points < 3 or o.min_arg_span < 0:
        raise ConfigError("n_starts must be >= 1, max_grid_points >= 3 and min_arg_span >= 0.")
    return o


def _normalise(x: Any) -> tuple[Any, float, float]:
    """Map ``x`` to [-1, 1]: returns ``(x_n, m, s)`` with ``x = m + s * x_n``.

    Fits run on ``x_n`` so that the (a, b) search ranges mean the same for an edge whose
    inputs span [-0.05, 0.05] (a hidden node shrunk by the L1 penalty) as for one on
    [-1, 1]; :func:`_to_input_units` maps the parameters back.
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        return x, 0.0, 1.0  # let the fitting code raise its own DataError
    lo, hi = float(arr.min()), float(arr.max())
    m, s = (hi + lo) / 2, (hi - lo) / 2
    if not s > 0:
        return x, 0.0, 1.0
    return (arr - m) / s, m, s


def _to_input_units(edge: "EdgeFit", m: float, s: float) -> "EdgeFit":
    """``c f(a x_n + b) + d`` with ``x_n = (x - m) / s``, rewritten in ``x``."""
    if (m, s) == (0.0, 1.0) or edge.primitive == "0":
        return edge
    if edge.prim.inner == "none":  # linear: a = 1, b = 0 stay fixed
        return EdgeFit(edge.primitive, edge.a, edge.b, edge.c / s, edge.d - edge.c * m / s, edge.r2, edge.p)
    a, b, c, d = edge.a / s, edge.b - edge.a * m / s, edge.c, edge.d
    if edge.prim.inner == "shift" and a != 0:
        # back to the canonical a = ±1: f(a x + b) = k^n f(±x + b/k) with k = |a| for the
        # homogeneous primitives of degree n; log(a x + b) = log k + log(±x + b/k)
        k = abs(a)
        if edge.primitive == "log":
            d = d + c * math.log(k)
        else:
            c = c * k ** _DEGREE.get(edge.primitive, edge.p if edge.p is not None else 1.0)
        a, b = math.copysign(1.0, a), b / k
    return EdgeFit(edge.primitive, a, b, c, d, edge.r2, edge.p)


_DEGREE = {"x^2": 2.0, "x^3": 3.0, "x^4": 4.0, "1/x": -1.0, "1/x^2": -2.0, "sqrt": 0.5, "abs": 1.0}


def fit_primitive(x: Any, y: Any, primitive: str | Primitive, *,
                  a_range: tuple[float, float] = (-10.0, 10.0),
                  b_range: tuple[float, float] = (-10.0, 10.0), n_grid: int = 41,
                  min_arg_span: float = 1.0, max_grid_points: int = 256,
                  n_starts: int = 1) -> EdgeFit:
    """Fit ``y ~ c * f(a * x + b) + d`` for one primitive ``f``.

    Parameters
    ----------
    x, y : array_like, shape (N,)
        Edge input and output samples, finite, ``N >= 3``.
    primitive : str or Primitive
        The primitive ``f`` (name in :data:`~kansym.symbolic.library.PRIMITIVES`).
    a_range, b_range : (float, float)
        Search ranges of the inner scale ``a`` and shift ``b``, for ``x`` mapped to
        [-1, 1] (the returned parameters are in the units of ``x``)
        (sines and cosines search ``b`` over one period instead).
    n_grid : int
        Grid points per axis.
    min_arg_span : float
        Least sweep ``|a| * (max x - min x)`` of the argument for primitives
        with a fitted scale (degeneracy guard, module docstring).
    max_grid_points : int
        Samples used by the grid stage (evenly spread over sorted ``x``).
    n_starts : int
        Best grid points refined by least squares (at least 2 for ``sin``
        and ``cos``, whose loss has many basins).

    Returns
    -------
    EdgeFit
        In canonical form (``a > 0`` for symmetric primitives, the phase of
        ``sin``/``cos`` in ``(-pi/2, pi/2]``); ``r2 = -inf`` if no parameters
        keep the argument inside the primitive's domain.

    Raises
    ------
    DataError
        If ``x``/``y`` are not 1-D of equal length, too short, or not finite.
    ConfigError
        If the primitive or an option is unknown, or a range is empty.
    """
    o = _opts(dict(a_range=a_range, b_range=b_range, n_grid=n_grid, min_arg_span=min_arg_span,
                   max_grid_points=max_grid_points, n_starts=n_starts))
    (prim,) = _resolve(primitive)
    xn, m, sc = _normalise(x)
    return _to_input_units(EdgeFit(prim.name, *fit_prepared(prim, prepare(xn, y, o.max_grid_points), o)), m, sc)


def select_edge_fit(x: Any, y: Any, library: Sequence[str | Primitive] | None = None, *,
                    r2_threshold: float = R2_THRESHOLD, complexity_weight: float = 1e-3,
                    exhaustive: bool = False, **options: Any) -> tuple[EdgeFit, list[EdgeFit]]:
    """Fit the primitives of ``library`` and choose the simplest good one.

    Selection rule: among fits with ``r2 >= r2_threshold`` take the one of least
    complexity (ties: higher ``r2``, then library order). If none clears the threshold, take the
    minimiser of ``(1 - r2) + complexity_weight * complexity`` (scores within 1 % of it are
    ties: the simpler, then library order);
    this fallback is logged at DEBUG level on the ``"kansym"`` logger.

    Speed: the primitives are fitted in order of complexity. Unless ``exhaustive``,
    least-squares refinement is spent only on primitives whose grid R² is at least
    0.5 (the others are reported at grid precision), and the search stops after the
    complexity level at which a fit first clears the threshold: more complex
    primitives could not be chosen, so they are neither fitted nor listed among the
    candidates (on the hello world's three edges this halves the stage: the grids of
    ``x^p``, ``softplus`` and ``gaussian`` were most of its time). ``exhaustive``
    fits and refines every primitive. Candidates are refined on the grid subsample;
    the chosen fit is polished on all samples.

    Parameters
    ----------
    x, y : array_like, shape (N,)
        Edge samples.
    library : sequence of str or Primitive, optional
        Primitives to try; all of :data:`~kansym.symbolic.library.PRIMITIVES` by default.
    r2_threshold : float
        R² an explanation must reach to count as good.
    complexity_weight : float
        Price of one unit of complexity in the fallback trade-off.
    exhaustive : bool
        Fit and refine every primitive (slower; every primitive among the candidates,
        each with its refined R²), as the Occam step needs.
    **options
        Search options of :func:`fit_primitive`.

    Returns
    -------
    chosen : EdgeFit
    candidates : list of EdgeFit
        One fit per primitive tried (every primitive if ``exhaustive``), sorted by
        complexity, then by decreasing ``r2``.

    Raises
    ------
    DataError, ConfigError
        As :func:`fit_primitive`.
    FitError
        If no primitive could be fitted at all (every ``r2`` is ``-inf``).
    """
    o = _opts(options)
    prims = sorted(_resolve(library), key=lambda p: p.complexity)
    x, m, sc = _normalise(x)
    data = prepare(x, y, o.max_grid_points)
    fits = _fit_by_complexity(prims, data, o, r2_threshold, exhaustive)
    fits.sort(key=lambda f: (f.complexity, -round(f.r2, 10)))  # stable: R² ties keep library order
    chosen = _choose_fit(fits, prims, r2_threshold, complexity_weight)
    if data.xs.size < data.x.size and chosen.prim.inner != "none":
        polished = EdgeFit(chosen.primitive, *fit_prepared(chosen.prim, data, o, polish=True))
        if polished.r2 >= chosen.r2:
            fits[fits.index(chosen)] = chosen = polished
    return _to_input_units(chosen, m, sc), [_to_input_units(f, m, sc) for f in fits]


def _fit_by_complexity(prims: Sequence[Primitive], data: Data, o: Opts, r2_threshold: float,
                       exhaustive: bool) -> list[EdgeFit]:
    """Fit ``prims`` (sorted by complexity) in order, up to the level where one first clears the threshold."""
    fits: list[EdgeFit] = []
    cleared_at: int | None = None
    for prim in prims:  # in order of complexity
        if not exhaustive and cleared_at is not None and prim.complexity > cleared_at:
            break  # no more complex primitive can be chosen: not even its grid is searched
        if prim.inner == "none":
            result = fit_simple(prim, data)
        else:
            grid = grid_stage(prim, data, o)
            if grid is None:
                result = failed(prim, data)
            else:
                worth = exhaustive or (grid.r2 >= 0.5 and (cleared_at is None or prim.complexity <= cleared_at))
                result = finish(prim, data, grid, o, refine=worth, polish=False)
        fits.append(EdgeFit(prim.name, *result))
        if cleared_at is None and fits[-1].r2 >= r2_threshold:
            cleared_at = prim.complexity
    return fits


def _choose_fit(fits: Sequence[EdgeFit], prims: Sequence[Primitive], r2_threshold: float,
                complexity_weight: float) -> EdgeFit:
    """The first fit clearing the threshold, else the complexity trade-off's choice (raises FitError if none fits)."""
    good = [f for f in fits if f.r2 >= r2_threshold]
    if good:
        return good[0]
    finite = [f for f in fits if math.isfinite(f.r2)]
    if not finite:
        raise FitError("no primitive of the library fits these samples; widen the library or the ranges.")
    score = {id(f): (1.0 - f.r2) + complexity_weight * f.complexity for f in finite}
    best = min(score.values())
    # scores within 1 % of the best are ties (sin and cos fit one curve to the last digits,
    # which differ between machines): the simpler, then the library's order
    order = {p.name: k for k, p in enumerate(prims)}
    chosen = min((f for f in finite if score[id(f)] <= best + 0.01 * abs(best)),
                 key=lambda f: (f.complexity, order.get(f.primitive, len(order))))
    logger.debug("no primitive reached r2 >= %g; chose %r (r2=%.4g) by the complexity trade-off",
                r2_threshold, chosen.primitive, chosen.r2)
    return chosen
