"""Fit one edge's samples ``(x, y)`` to ``c * f(a * x + b) + d`` and choose ``f``.

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

The numeric engine lives in :mod:`kansym.symbolic._search`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

import numpy as np
import sympy
import torch

from kansym.config import R2_THRESHOLD
from kansym.errors import ConfigError, FitError
from kansym.symbolic import _search as se
from kansym.symbolic.library import PRIMITIVES, Primitive, get_library
from kansym.symbolic.numeric import NUMERIC, NumericEdge

__all__ = ["EdgeFit", "fit_primitive", "select_edge_fit"]

logger = logging.getLogger("kansym")


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
        :class:`~kansym.symbolic.numeric.NumericEdge`, which has the same interface.
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


def _opts(kwargs: dict[str, Any]) -> se.Opts:
    unknown = set(kwargs) - set(se.Opts.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"unknown fit options {sorted(unknown)}; use {sorted(se.Opts.__dataclass_fields__)}.")
    o = se.Opts(**{k: tuple(map(float, v)) if k.endswith("_range") else v for k, v in kwargs.items()})
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


def _to_input_units(fit: "EdgeFit", m: float, s: float) -> "EdgeFit":
    """``c f(a x_n + b) + d`` with ``x_n = (x - m) / s``, rewritten in ``x``."""
    if (m, s) == (0.0, 1.0) or fit.primitive == "0":
        return fit
    if fit.prim.inner == "none":  # linear: a = 1, b = 0 stay fixed
        return EdgeFit(fit.primitive, fit.a, fit.b, fit.c / s, fit.d - fit.c * m / s, fit.r2, fit.p)
    a, b, c, d = fit.a / s, fit.b - fit.a * m / s, fit.c, fit.d
    if fit.prim.inner == "shift" and a != 0:
        # back to the canonical a = ±1: f(a x + b) = k^n f(±x + b/k) with k = |a| for the
        # homogeneous primitives of degree n; log(a x + b) = log k + log(±x + b/k)
        k = abs(a)
        if fit.primitive == "log":
            d = d + c * math.log(k)
        else:
            c = c * k ** _DEGREE.get(fit.primitive, fit.p if fit.p is not None else 1.0)
        a, b = math.copysign(1.0, a), b / k
    return EdgeFit(fit.primitive, a, b, c, d, fit.r2, fit.p)


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
    return _to_input_units(EdgeFit(prim.name, *se.fit(prim, se.prepare(xn, y, o.max_grid_points), o)), m, sc)


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
    data = se.prepare(x, y, o.max_grid_points)
    fits = _fit_by_complexity(prims, data, o, r2_threshold, exhaustive)
    fits.sort(key=lambda f: (f.complexity, -round(f.r2, 10)))  # stable: R² ties keep library order
    chosen = _choose_fit(fits, prims, r2_threshold, complexity_weight)
    if data.xs.size < data.x.size and chosen.prim.inner != "none":
        polished = EdgeFit(chosen.primitive, *se.fit(chosen.prim, data, o, polish=True))
        if polished.r2 >= chosen.r2:
            fits[fits.index(chosen)] = chosen = polished
    return _to_input_units(chosen, m, sc), [_to_input_units(f, m, sc) for f in fits]


def _fit_by_complexity(prims: Sequence[Primitive], data: se.Data, o: se.Opts, r2_threshold: float,
                       exhaustive: bool) -> list[EdgeFit]:
    """Fit ``prims`` (sorted by complexity) in order, up to the level where one first clears the threshold."""
    fits: list[EdgeFit] = []
    cleared_at: int | None = None
    for prim in prims:  # in order of complexity
        if not exhaustive and cleared_at is not None and prim.complexity > cleared_at:
            break  # no more complex primitive can be chosen: not even its grid is searched
        if prim.inner == "none":
            fit = se.fit_simple(prim, data)
        else:
            grid = se.grid_stage(prim, data, o)
            if grid is None:
                fit = se.failed(prim, data)
            else:
                worth = exhaustive or (grid.r2 >= 0.5 and (cleared_at is None or prim.complexity <= cleared_at))
                fit = se.finish(prim, data, grid, o, refine=worth, polish=False)
        fits.append(EdgeFit(prim.name, *fit))
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
