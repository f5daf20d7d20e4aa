"""The tests of a law's structure: smooth least-squares fits of the data, and the statistical tests of the
structure search on an oracle.

Smooth fits of the data, before any KAN is trained. Structure of a law read off its data before any KAN is trained.

Cheap least-squares fits that tell the pipeline how to set up the KAN:

- :func:`additive_r2` and :func:`interaction_r2`: AI Feynman's separability test
  (Udrescu & Tegmark 2020, "AI Feynman: a physics-inspired method for symbolic
  regression", Sci. Adv. 6:eaay2631, §2), done with fitted polynomial models instead of
  a neural network: an additive law scores 1 on the first; the second is the accuracy a
  smooth non-additive fit reaches (about the noise floor); :func:`interaction_error` is
  the same fit's error on held-out rows, a noise floor for the constants of a formula.
- :func:`choose_space`: whether the KAN learns in log units (a product of powers is
  additive there) or in linear units.

On an oracle: The statistical tests of the structure search on an oracle: its error at each value, mixed differences
(do two inputs interact?), and symmetries that remove an input.

How large the oracle's error is at each of its values: the separability and symmetry
tests (:mod:`kansym.discover.structure_search`) decide "zero" against the oracle's error. One RMS error
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

The mixed-difference tests of the structure search: do two inputs interact in an oracle?

A KAN trained without sparsification is a smooth oracle ``f`` of the law, accurate to its
held-out error. AI Feynman 2.0 (Udrescu et al. 2020, arXiv:2006.10782, §2.2, "graph
modularity") reads a law's separation off a graph of its inputs, two inputs joined when they
interact. Here the interaction of inputs ``i`` and ``j`` is the mixed difference of ``f``
between rows ``a`` and ``b`` of the data,

    D_ij = f(a) - f(a with a_i := b_i) - f(a with a_j := b_j) + f(a with a_i, a_j := b_i, b_j),

which is zero for every pair of rows exactly when ``f`` is a sum of a function without
``x_i`` and one without ``x_j`` (a discrete form of ``d^2 f / dx_i dx_j = 0``). Its RMS
over ``PAIRS`` pairs of rows is compared with the oracle's error propagated to it (one error
everywhere, or the error model above): inputs interact when it exceeds
``NOISE_FACTOR`` times that. The product test (AI Feynman, Udrescu & Tegmark 2020, Sci. Adv.
6, eaay2631, §2) runs on ``u = f - c``:
``M_ij = u(a) u(a with a_i, a_j := b_i, b_j) - u(a with a_i := b_i) u(a with a_j := b_j)``
vanishes exactly for a product, whatever the signs (no logarithm).

Symmetries of an oracle that remove one input: f depends on two inputs only through one combination.

AI Feynman (Udrescu & Tegmark 2020, Sci. Adv. 6, eaay2631, §2, "translational symmetry
and generalizations") tests whether a law ``f`` depends on inputs ``x_i, x_j`` only
through ``x_i - x_j``, ``x_i + x_j``, ``x_i / x_j`` or ``x_i x_j``; if it does, the two
inputs become one new variable ``w`` and the problem has one input fewer. Physical laws also
hold inputs through monomials of other powers (``x2**3 x3**2 / x4**2`` inside a ``tanh``), so
``x_i**a x_j**b`` is tested too, with ``(a, b)`` nominated by the oracle itself: for such an
``f`` the ratio of its log-slopes ``x_j f_j / (x_i f_i)`` is the constant ``b / a``
(:func:`monomial_exponents`; the gradient reading of AI Feynman 2.0's generalized symmetries,
Udrescu et al. 2020, arXiv:2006.10782, §2.3). Repeated, it reduces a function of one monomial
of any number of inputs to a function of one variable.

The test moves ``x_i`` of a data row ``a`` to its value in another row ``b`` and
compensates in ``x_j`` so that the combination keeps its value (``x_j + (b_i - a_i)`` for
the difference, ``x_j b_i / a_i`` for the ratio, ...). Only moved rows whose new ``x_j``
stays inside the data's range are used: the oracle is trusted only there. The law has the
symmetry when the change of ``f`` under the compensated move, each row's in units of the
oracle's error at both ends (below), has an RMS within
``NOISE_FACTOR``, while the same move without compensation changes ``f`` by more than
``EFFECT_FACTOR`` times that: the input must matter for its invariance to mean anything.

The reduced oracle ``g(rest, w)`` realises ``w`` by a pair ``(x_i, x_j)`` inside the
data's box (``x_j`` at the middle of the interval that keeps both inputs in range), so
the recursion's probes stay where the oracle was trained.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import networkx as nx
import numpy as np
import sympy
from scipy.optimize import nnls, minimize_scalar

from kansym.config import SEED
from kansym.errors import DataError
from kansym.symbolic.verify import nrmse, r2_score

__all__ = ['table_space', 'additive_r2', 'interaction_r2', 'choose_space', 'interaction_error', 'additivity', 'legendre_features',
    'OracleError', 'TransformedError', 'TRANSFORMS', 'TargetTransform', 'as_error', 'NOISE_FACTOR',
    'OFFSET_MARGIN', 'PAIRS', 'Oracle', 'best_offset', 'graph_of', 'groups_of', 'interaction_graph', 'ratios',
    'swapped_values', 'KINDS', 'Symmetry', 'find_symmetry', 'reduced_problem', 'monomial_exponents']

log = logging.getLogger("kansym")


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


NOISE_FACTOR = 5.0  # a mixed difference, or a compensated move, within this many oracle errors counts as zero
OFFSET_MARGIN = 2.0  # ... and within a half of that for a product whose offset was fitted
PAIRS = 256  # pairs of rows per mixed difference and per symmetry test

Oracle = Callable[[np.ndarray], np.ndarray]  # (N, d) -> (N,)


def swapped_values(f: Oracle, z: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """``f`` on ``PAIRS`` rows ``a``, on ``a`` with one input from row ``b``, and with two."""
    n, d = z.shape
    a = z[rng.integers(0, n, PAIRS)]
    b = z[rng.integers(0, n, PAIRS)]
    pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    blocks = [a]
    for i in range(d):
        s = a.copy()
        s[:, i] = b[:, i]
        blocks.append(s)
    for i, j in pairs:
        s = a.copy()
        s[:, [i, j]] = b[:, [i, j]]
        blocks.append(s)
    v = np.asarray(f(np.concatenate(blocks)), dtype=np.float64).reshape(len(blocks), PAIRS)
    return v[0], v[1:d + 1], v[d + 1:], pairs


def interaction_graph(f: Oracle, z: np.ndarray, eps: float, *, offset: float | None = None,
                      seed: int = SEED) -> tuple[nx.Graph, float]:
    """The graph of inputs that interact in ``f`` (additively, or in the product ``f - offset``).

    Parameters
    ----------
    f : callable, ``(N, d) -> (N,)``
        The oracle.
    z : ndarray (N, d)
        Rows whose values the mixed differences swap (the data's distribution).
    eps : float or kansym.discover.structure_tests.OracleError
        The oracle's RMS error, in the units of ``f``, or its error model.
    offset : float, optional
        Test whether ``f - offset`` is a product (multiplicative separability); None: a sum.

    Returns
    -------
    (networkx.Graph, float)
        Nodes ``0..d-1``, an edge where the pair interacts (its ``ratio`` attribute: RMS mixed
        difference over ``NOISE_FACTOR`` times its noise); and the sum over pairs of
        ``log max(ratio, 1)`` (0 when nothing interacts).
    """
    values = swapped_values(f, z, np.random.default_rng([seed, 31]))
    return graph_of(ratios(values, eps, offset), values[3], z.shape[1])


def ratios(values, eps: "float | OracleError | TransformedError", offset: float | None) -> np.ndarray:
    """RMS over the rows of each pair's mixed difference in units of its noise, over ``NOISE_FACTOR``.

    Additive (``offset`` None): ``D = f0 - f_i - f_j + f_ij``, its noise on a row
    ``sqrt((e0^2 + e_i^2 + e_j^2 + e_ij^2) / 4)`` with ``e = eps.at(f)``
    (:class:`OracleError`; one error ``eps`` everywhere gives ``eps``). Multiplicative:
    with ``u = f - offset``, ``M = u0 u_ij - u_i u_j`` (zero for every pair of rows when
    ``u = g(x_i, .) h(x_j, .)``, AI Feynman's product test, without logarithms, so ``u`` may
    change sign), its noise the first-order error
    ``sqrt(u_ij^2 e0^2 + u0^2 e_ij^2 + u_j^2 e_i^2 + u_i^2 e_j^2)``. Each row's difference is
    divided by its own noise before the RMS (a chi statistic): where the error is relative,
    the rows of small values count as much as those of large ones (``1 / (exp(a b / (c d)) - 1)``
    is a product of its inputs where it is large and not where it is small).
    """
    v0, v1, v2, pairs = values
    if not pairs:
        return np.zeros(0)
    err = as_error(eps)
    i, j = (np.array([p[k] for p in pairs], dtype=int) for k in (0, 1))
    e0, e1, e2 = err.at(v0)[None, :], err.at(v1), err.at(v2)
    with np.errstate(all="ignore"):
        if offset is None:
            diff = v0[None, :] - v1[i] - v1[j] + v2
            noise = np.sqrt((e0 ** 2 + e1[i] ** 2 + e1[j] ** 2 + e2 ** 2) / 4)
            scale = float(np.std(v0))
        else:
            u0, u1, u2 = v0[None, :] - offset, v1 - offset, v2 - offset
            diff = u0 * u2 - u1[i] * u1[j]
            noise = np.sqrt((u2 * e0) ** 2 + (u0 * e2) ** 2 + (u1[j] * e1[i]) ** 2 + (u1[i] * e1[j]) ** 2)
            scale = float(np.mean(u0 ** 2))
        noise = np.maximum(noise, 1e-12 * max(scale, 1e-300))
        chi = np.sqrt(np.mean((diff / noise) ** 2, axis=1)) / NOISE_FACTOR
    return np.where(np.isfinite(chi), chi, np.inf)


def graph_of(ratios: np.ndarray, pairs, d: int) -> tuple[nx.Graph, float]:
    """The graph of the pairs whose ``ratios`` exceed 1, and the sum of their log ratios."""
    g = nx.Graph()
    g.add_nodes_from(range(d))
    g.add_edges_from((i, j, {"ratio": float(r)}) for (i, j), r in zip(pairs, ratios) if r > 1.0)
    return g, float(np.sum(np.log(np.maximum(ratios, 1.0))))


def best_offset(values, eps: float, d: int) -> tuple[float, nx.Graph, float]:
    """The offset ``c`` for which ``f - c`` is most nearly a product: 0 first, then a grid of
    ``c`` over and beyond the range of ``f`` (``mid + span * sinh(t)``), its best point refined
    by Brent's method on the sum of log mixed differences; another offset must beat 0 clearly.
    ``values``: :func:`swapped_values` of ``f`` (``d`` inputs)."""
    pairs = values[3]
    v = np.concatenate([values[0][None], values[1], values[2]])
    mid, span = 0.5 * float(np.min(v) + np.max(v)), max(float(np.ptp(v)), 1e-300)

    def offset(t: float) -> float:
        return mid + span * float(np.sinh(t))

    def smooth(t: float) -> float:  # the sum of log ratios, unclamped: sharp at a true offset
        return float(np.sum(np.log(np.maximum(ratios(values, eps, offset(t)), 1e-300))))

    best = (graph_of(ratios(values, eps, 0.0), pairs, d)[1], 0.0)
    grid = np.linspace(-np.arcsinh(100.0), np.arcsinh(100.0), 41)
    scores = [smooth(t) for t in grid]
    k = int(np.argmin(scores))
    res = minimize_scalar(smooth, bounds=(grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]), method="bounded",
                          options={"xatol": 1e-9})
    for t in (grid[k], float(res.x)):
        cost = graph_of(ratios(values, eps, offset(t)), pairs, d)[1]
        if cost < best[0] - 1.0:  # a factor e in the interactions' product, over c = 0 or the last best
            best = (cost, offset(t))
    graph, cost = graph_of(ratios(values, eps, best[1]) * (OFFSET_MARGIN if best[1] else 1.0), pairs, d)
    return best[1], graph, cost


def groups_of(graph: nx.Graph) -> list[list[int]]:
    """The connected components of ``graph``, each sorted, in order."""
    return sorted(sorted(c) for c in nx.connected_components(graph))


KINDS = ("difference", "sum", "ratio", "product")  # and "power", for the exponents monomial_exponents nominates
SLOPE_STEP = 1e-3  # step in log x of the log-slopes that nominate a power's exponents
MAX_POWER = 3  # largest exponent of a power x_i**a x_j**b
POWER_TOLERANCE = 0.1  # a median slope ratio this close (relative) to b / a nominates it
EFFECT_FACTOR = 2.0  # the uncompensated move must change f by this many times the tolerance
MIN_ROWS = 32  # moved rows inside the box needed for a test


@dataclass(frozen=True)
class Symmetry:
    """``f`` depends on inputs ``i`` and ``j`` only through ``combine(x_i, x_j)``.

    Attributes
    ----------
    i, j : int
        Column indices, ``i != j``.
    kind : {"difference", "sum", "ratio", "product", "power"}
        ``x_i - x_j``, ``x_i + x_j``, ``x_i / x_j``, ``x_i * x_j`` or ``x_i**a * x_j**b``.
    ratio : float
        RMS compensated change over its tolerance (< 1 for a symmetry).
    a, b : int
        The exponents of ``"power"`` (coprime, ``a > 0``, ``b/a`` not ±1); 1 otherwise.
    """

    i: int
    j: int
    kind: str
    ratio: float
    a: int = 1
    b: int = 1

    def combine(self, xi, xj):
        """The combination, on arrays or sympy expressions."""
        return {"difference": lambda: xi - xj, "sum": lambda: xi + xj, "ratio": lambda: xi / xj,
                "product": lambda: xi * xj, "power": lambda: xi ** self.a * xj ** self.b}[self.kind]()


def _positive(col: np.ndarray) -> bool:
    return bool(np.all(col > 0))


def _compensate(kind: str, a_i, a_j, b_i, power: float = 1.0):
    """``x_j`` that keeps the combination of row ``a`` when ``x_i`` moves from ``a_i`` to ``b_i``
    (``power``: ``a / b`` of ``x_i**a x_j**b``)."""
    with np.errstate(all="ignore"):
        if kind == "difference":
            return a_j + (b_i - a_i)
        if kind == "sum":
            return a_j - (b_i - a_i)
        if kind == "ratio":
            return a_j * b_i / a_i
        if kind == "power":
            return a_j * (a_i / b_i) ** power
        return a_j * a_i / b_i


def _log_slopes(f: Oracle, rows: np.ndarray, positive: Sequence[int]) -> dict[int, np.ndarray]:
    """``x_k df/dx_k`` of ``f`` at ``rows`` for each input ``k`` of ``positive``, by central
    differences in ``log x_k`` (steps of ``SLOPE_STEP``)."""
    moved = []
    for k in positive:
        for sign in (1.0, -1.0):
            m = rows.copy()
            m[:, k] *= math.exp(sign * SLOPE_STEP)
            moved.append(m)
    if not moved:
        return {}
    with np.errstate(all="ignore"):
        v = np.asarray(f(np.concatenate(moved)), dtype=np.float64).reshape(len(moved), rows.shape[0])
    return {k: (v[2 * n] - v[2 * n + 1]) / (2 * SLOPE_STEP) for n, k in enumerate(positive)}


def monomial_exponents(f: Oracle, rows: np.ndarray, positive: Sequence[int]) -> dict[tuple[int, int], tuple[int, int]]:
    """For each pair ``i < j`` of positive inputs, the exponents ``(a, b)`` of ``x_i**a x_j**b``
    through which ``f`` would depend on both, read off the ratio of its log-slopes (constant,
    ``b / a``, for such an ``f``: ``x_j f_j / (x_i f_i) = b / a``), its median over the rows where
    both slopes are not small, snapped within ``POWER_TOLERANCE`` to ``b / a`` with
    ``1 <= a, |b| <= MAX_POWER``. Only a nomination: :func:`find_symmetry`'s compensated move
    decides. Pairs whose ratio is near ±1 (the product and ratio kinds) or no simple value are left out."""
    slopes = _log_slopes(f, rows, positive)
    simple = sorted({(sympy.Rational(b, a), a, b) for a in range(1, MAX_POWER + 1)
                     for b in range(-MAX_POWER, MAX_POWER + 1) if b and math.gcd(a, abs(b)) == 1})
    out = {}
    for i in positive:
        for j in positive:
            if j <= i:
                continue
            gi, gj = slopes[i], slopes[j]
            with np.errstate(all="ignore"):
                big = ((np.abs(gi) > 0.1 * np.sqrt(np.mean(gi ** 2))) & (np.abs(gj) > 0.1 * np.sqrt(np.mean(gj ** 2)))
                       & np.isfinite(gi) & np.isfinite(gj))
            if big.sum() < MIN_ROWS:
                continue
            q = float(np.median(gj[big] / gi[big]))
            r, a, b = min(simple, key=lambda t: abs(float(t[0]) - q))
            if abs(float(r) - q) <= POWER_TOLERANCE * abs(float(r)) and abs(r) != 1:
                out[(i, j)] = (a, b)
    return out


def find_symmetry(f: Oracle, z: np.ndarray, eps: float, *, seed: int = SEED) -> Symmetry | None:
    """The clearest two-input symmetry of ``f``, or None.

    Parameters
    ----------
    f : callable, ``(N, d) -> (N,)``
        The oracle.
    z : ndarray (N, d), ``d >= 2``
        Data rows (the box the oracle is trusted in).
    eps : float or kansym.discover.structure_tests.OracleError
        The oracle's RMS error (units of ``f``), or its error model (the tolerance of a move
        is then the RMS of the error at both ends).

    Returns
    -------
    Symmetry or None
        The pair and kind with the smallest compensated change among those that pass;
        ratio, product and power only for inputs of one strict sign (here: positive), power
        only with the exponents :func:`monomial_exponents` nominates.
    """
    n, d = z.shape
    rng = np.random.default_rng([seed, 47])
    a, b = z[rng.integers(0, n, PAIRS)], z[rng.integers(0, n, PAIRS)]
    lo, hi = z.min(axis=0), z.max(axis=0)
    f_a = np.asarray(f(a), dtype=np.float64)
    err = as_error(eps)
    e_a, floor = err.at(f_a), 1e-12 * float(np.std(f_a)) + 1e-300
    positive = [k for k in range(d) if _positive(z[:, k])]
    tried = [(i, j, kind, 1, 1) for i in range(d) for j in range(d) for kind in KINDS
             if j != i and (kind not in ("ratio", "product") or (i in positive and j in positive))
             and not (kind in ("sum", "product") and j < i)]  # symmetric in i, j: test each pair once
    tried += [(i, j, "power", pa, pb) for (i, j), (pa, pb) in monomial_exponents(f, a, positive).items()]
    best = None
    for i, j, kind, pa, pb in tried:
        moved = a.copy()
        moved[:, i] = b[:, i]
        new_j = _compensate(kind, a[:, i], a[:, j], b[:, i], pa / pb)
        keep = np.isfinite(new_j) & (new_j >= lo[j]) & (new_j <= hi[j])
        if keep.sum() < MIN_ROWS:
            continue
        comp = moved[keep].copy()
        comp[:, j] = new_j[keep]
        with np.errstate(all="ignore"):
            f_comp = np.asarray(f(comp), dtype=np.float64)
            # each row's change in units of its noise (the error at both ends), then RMS
            noise = NOISE_FACTOR * np.maximum(np.sqrt((err.at(f_comp) ** 2 + e_a[keep] ** 2) / 2), floor)
            change = np.sqrt(np.mean(((f_comp - f_a[keep]) / noise) ** 2))
            effect = np.sqrt(np.mean(((np.asarray(f(moved[keep])) - f_a[keep]) / noise) ** 2))
        if not (np.isfinite(change) and np.isfinite(effect)) or effect < EFFECT_FACTOR:
            continue
        if change < 1.0 and (best is None or change < best.ratio):
            best = Symmetry(i, j, kind, float(change), pa, pb)
    return best


def _realise(sym: Symmetry, w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A pair ``(x_i, x_j)`` in the box with ``combine(x_i, x_j) = w``: ``x_j`` mid-interval."""
    li, hi_i, lj, hj = lo[sym.i], hi[sym.i], lo[sym.j], hi[sym.j]
    with np.errstate(all="ignore"):
        if sym.kind == "difference":  # x_i = w + x_j
            low, high = np.maximum(lj, li - w), np.minimum(hj, hi_i - w)
        elif sym.kind == "sum":  # x_i = w - x_j
            low, high = np.maximum(lj, w - hi_i), np.minimum(hj, w - li)
        elif sym.kind == "ratio":  # x_i = w x_j
            low, high = np.maximum(lj, li / w), np.minimum(hj, hi_i / w)
        elif sym.kind == "power":  # x_i = (w / x_j**b)**(1/a): x_j**b between w / hi_i**a and w / li**a
            ends = (w / hi_i ** sym.a) ** (1 / sym.b), (w / li ** sym.a) ** (1 / sym.b)
            low, high = np.maximum(lj, np.minimum(*ends)), np.minimum(hj, np.maximum(*ends))
        else:  # x_i = w / x_j
            low, high = np.maximum(lj, w / hi_i), np.minimum(hj, w / li)
        high = np.maximum(high, low)  # an empty interval (w outside the data's): its nearer end
        x_j = np.sqrt(low * high) if sym.kind in ("ratio", "product", "power") else 0.5 * (low + high)
        x_i = {"difference": lambda: w + x_j, "sum": lambda: w - x_j, "ratio": lambda: w * x_j,
               "product": lambda: w / x_j, "power": lambda: (w / x_j ** sym.b) ** (1 / sym.a)}[sym.kind]()
    return x_i, x_j


def reduced_problem(f: Oracle, z: np.ndarray, symbols: Sequence[sympy.Symbol],
                    sym: Symmetry) -> tuple[Oracle, np.ndarray, list[sympy.Symbol], sympy.Symbol, sympy.Expr]:
    """The problem with ``x_i, x_j`` replaced by ``w = combine(x_i, x_j)`` (the last column).

    Returns
    -------
    (oracle, z, symbols, w, w_expr)
        ``g(rest, w)``, the data rows ``(N, d - 1)``, their symbols, the new symbol ``w``
        and its expression in the original symbols (to substitute back).
    """
    lo, hi = z.min(axis=0), z.max(axis=0)
    rest = [k for k in range(z.shape[1]) if k not in (sym.i, sym.j)]
    w_data = sym.combine(z[:, sym.i], z[:, sym.j])
    taken = {s.name for s in symbols}
    name = f"w_{symbols[sym.i].name}_{symbols[sym.j].name}"  # distinct names: the searches check them
    while name in taken:
        name += "_"
    w = sympy.Dummy(name, positive=True) if np.all(w_data > 0) else sympy.Dummy(name, real=True)
    d = z.shape[1]

    def g(zr: np.ndarray) -> np.ndarray:
        full = np.empty((zr.shape[0], d))
        full[:, rest] = zr[:, :-1]
        full[:, sym.i], full[:, sym.j] = _realise(sym, zr[:, -1], lo, hi)
        return f(full)

    w_expr = sym.combine(symbols[sym.i], symbols[sym.j])
    return g, np.column_stack([z[:, rest], w_data]), [symbols[k] for k in rest] + [w], w, w_expr


def legendre_features(x: np.ndarray, degree: int, pairs: int, lo: np.ndarray | None = None,
                      hi: np.ndarray | None = None) -> np.ndarray:
    """Columns: 1, Legendre P_1..P_degree of each input scaled to [-1, 1], and (``pairs > 0``)
    the products P_a(x_i) P_b(x_j), i < j, 1 <= a, b <= pairs. ``lo, hi``: the range mapped to
    [-1, 1] (default: that of ``x``; other rows are clipped to [-1.5, 1.5])."""
    lo = x.min(axis=0) if lo is None else lo
    hi = x.max(axis=0) if hi is None else hi
    u = np.clip(2 * (x - lo) / np.where(hi > lo, hi - lo, 1.0) - 1, -1.5, 1.5)  # (n, d) in [-1, 1]
    per = [np.polynomial.legendre.legvander(u[:, i], degree)[:, 1:] for i in range(x.shape[1])]  # d x (n, degree)
    cols = [np.ones((x.shape[0], 1))] + per
    for i in range(x.shape[1]):
        for j in range(i + 1, x.shape[1]):
            a, b = per[i][:, :pairs], per[j][:, :pairs]
            cols.append((a[:, :, None] * b[:, None, :]).reshape(x.shape[0], -1))
    return np.concatenate(cols, axis=1)


def _lstsq_r2(A: np.ndarray, y: np.ndarray) -> float:
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    return r2_score(y, A @ coef, nonfinite="-inf")


def _rows(x: np.ndarray, y: np.ndarray, max_rows: int) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y, dtype=np.float64).reshape(x.shape[0], -1)[:, 0]
    step = max(1, x.shape[0] // max_rows)
    return np.asarray(x, dtype=np.float64)[::step], y[::step]


def additive_r2(x: np.ndarray, y: np.ndarray, *, degree: int = 5, max_rows: int = 2000) -> float:
    """R² of the best additive model ``y ~ sum_i g_i(x_i)`` (each ``g_i`` a polynomial).

    Least squares on Legendre polynomials of degree ``degree`` of each input scaled to
    [-1, 1], on at most ``max_rows`` evenly spaced rows. An additive law scores 1; a law
    whose variables interact (``a * b`` in linear units) scores less. This is the
    separability test of AI Feynman (Udrescu & Tegmark 2020, Sci. Adv. 6, eaay2631, §2)
    done with a fitted additive model instead of a neural network.

    Parameters
    ----------
    x : ndarray (N, d)
    y : ndarray (N,) or (N, 1)
    """
    x, y = _rows(x, y, max_rows)
    return _lstsq_r2(legendre_features(x, degree, 0), y)


def interaction_r2(x: np.ndarray, y: np.ndarray, *, degree: int = 5, pairs: int = 2, max_rows: int = 2000) -> float:
    """R² of the additive model of :func:`additive_r2` plus pairwise interactions
    ``P_a(x_i) P_b(x_j)`` (``a, b <= pairs``): the accuracy a smooth non-additive fit
    reaches, i.e. about the noise floor of ``y``, to which the additive residual is compared."""
    x, y = _rows(x, y, max_rows)
    return _lstsq_r2(legendre_features(x, degree, pairs), y)


def interaction_error(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, *,
                      degree: int = 5, pairs: int = 2, max_rows: int = 2000, factor: np.ndarray | None = None,
                      factor_test: np.ndarray | None = None) -> float:
    """Normalised RMS error (:func:`kansym.symbolic.verify.nrmse`) on held-out rows of the
    model of :func:`interaction_r2` fitted on ``x, y``: a noise floor estimated from the data
    without the KAN (fitted and judged on different rows, so a table of few rows, where the
    polynomial would follow every point, gets no false floor). ``inf`` when it cannot be fitted.

    With ``factor`` and ``factor_test`` (a known positive factor of each row, shapes (N,) and
    (N_test,)) the model is fitted and judged on ``factor * y`` (weighted least squares, the
    errors of :func:`kansym.symbolic.direct.direct_search`'s ``factor``)."""
    x, y, w = *_rows(x, y, max_rows), None if factor is None else _rows(x, factor, max_rows)[1]  # the same rows
    w = np.ones(len(y)) if w is None else w
    xt = np.asarray(x_test, dtype=np.float64)
    yt = np.asarray(y_test, dtype=np.float64).reshape(xt.shape[0], -1)[:, 0]
    A = legendre_features(x, degree, pairs)
    if A.shape[1] >= x.shape[0] or not (np.all(np.isfinite(A)) and np.all(np.isfinite(y))):
        return float("inf")
    wt = np.ones(len(yt)) if factor_test is None else np.asarray(factor_test, dtype=np.float64)
    coef, *_ = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)
    return nrmse(wt * yt, wt * (legendre_features(xt, degree, pairs, x.min(axis=0), x.max(axis=0)) @ coef))


def table_space(space: str, *tables: np.ndarray) -> str:
    """``space`` for a run on these rows: ``"auto"`` becomes ``"linear"`` when some value of
    some table is not positive (log units are impossible there), else stays as it is.

    The stages choose their units (:func:`choose_space`) on the rows they train on, a
    subsample: a noisy target near 0 with one negative value among 10,000 rows let the KAN
    train in log units on 3,000 positive rows, and the refinement on all rows then failed.
    """
    if space != "auto":
        return space
    return space if all(bool(np.all(np.asarray(t) > 0)) for t in tables if t is not None) else "linear"


def choose_space(x: np.ndarray, y: np.ndarray, space: str = "auto", *, decades: float = 2.0) -> str:
    """Pick ``"linear"`` or ``"log"`` for a table.

    ``auto`` chooses log space when every input and target value is positive and
    either at least one column spans ``decades`` orders of magnitude or more, or
    (two inputs or more) the law is markedly more additive in log units than in
    linear units: the residual ``1 - R²`` of the additive model of :func:`additive_r2`
    in linear units exceeds 1e-3 and the one in log units is at most a quarter of it. A product of powers
    (``m a``, ``q1 q2 / r^2``) is additive in log units, so a KAN of linear edges
    represents it exactly there; a sum (``a + b``) is additive in linear units.

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
    if float(span.max()) >= decades:
        return "log"
    if x.shape[1] < 2 or y.shape[1] != 1:
        return "linear"
    res_lin = 1.0 - additive_r2(x, y)
    res_log = 1.0 - additive_r2(np.log(x), np.log(y))
    return "log" if res_lin > 1e-3 and res_log <= 0.25 * res_lin else "linear"


ADDITIVE_RESIDUAL = 1e-4  # 1 - R² of the additive model below which the law counts as additive
SHORTCUT_R2 = 0.9999  # held-out R² at which the additive (hidden-layer-free) run is kept alone


def additivity(x: np.ndarray, y: np.ndarray, config: Any) -> tuple[bool, float]:
    """Whether the law is additive in the units the KAN will learn in, and the held-out
    R² a formula of the additive KAN must reach to be kept alone.

    One input is always additive. Otherwise the residual ``1 - R²`` of the additive
    model must be at most ``ADDITIVE_RESIDUAL``, or at most twice that of the model with
    pairwise interactions when the latter is below 1 % (noise makes both equal; a law
    neither model follows is not called additive). The R² to reach is
    ``1 - max(1 - SHORTCUT_R2, 3 * r)``, ``r`` the residual of the model with interactions
    in CSV units (about the noise floor), and at least 0.999. ``config`` is the run's
    :class:`~kansym.discover.config.DiscoverConfig` (its ``space``).
    """
    if y.shape[1] != 1:
        return False, SHORTCUT_R2
    space = choose_space(x, y, config.space)
    g = np.log if space == "log" else (lambda a: a)
    fit_r2 = interaction_r2 if x.shape[1] > 1 else additive_r2  # one input: the polynomial is the full model
    res_full = max(1.0 - fit_r2(g(x), g(y)), 0.0)
    # the formula's R² is measured in CSV units: so is the noise floor it is held to
    noise = max(1.0 - fit_r2(x, y), 0.0)
    floor = 1.0 - min(max(1.0 - SHORTCUT_R2, 3.0 * noise), 1e-3)
    if x.shape[1] == 1:
        return True, floor
    res_add = 1.0 - additive_r2(g(x), g(y))
    return res_add <= ADDITIVE_RESIDUAL or (res_add <= 2.0 * res_full and res_full <= 0.01), floor
