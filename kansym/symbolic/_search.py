"""Numeric engine of :mod:`kansym.symbolic.fit`: grid search and least-squares refinement.

Private module; the algorithm and its degeneracy guards are documented in
:mod:`kansym.symbolic.fit`. Everything here works on numpy arrays and returns
plain :class:`Fit` tuples that ``fit.py`` wraps into ``EdgeFit``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import least_squares

from kansym.errors import DataError
from kansym.symbolic.library import Primitive
from kansym.symbolic.verify import r2_from_sse

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
            fit = Fit(a, b, c, d, _r2(s, data), float(p) if prim.n_params else None)
            if best is None or fit.r2 > best.r2:
                best = fit
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


def fit(prim: Primitive, data: Data, o: Opts, polish: bool = True) -> Fit:
    if prim.inner == "none":
        return fit_simple(prim, data)
    grid = grid_stage(prim, data, o)
    return failed(prim, data) if grid is None else finish(prim, data, grid, o, True, polish)
