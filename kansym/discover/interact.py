"""The mixed-difference tests of the structure search: do two inputs interact in an oracle?

A KAN trained without sparsification is a smooth oracle ``f`` of the law, accurate to its
held-out error. AI Feynman 2.0 (Udrescu et al. 2020, arXiv:2006.10782, §2.2, "graph
modularity") reads a law's separation off a graph of its inputs, two inputs joined when they
interact. Here the interaction of inputs ``i`` and ``j`` is the mixed difference of ``f``
between rows ``a`` and ``b`` of the data,

    D_ij = f(a) - f(a with a_i := b_i) - f(a with a_j := b_j) + f(a with a_i, a_j := b_i, b_j),

which is zero for every pair of rows exactly when ``f`` is a sum of a function without
``x_i`` and one without ``x_j`` (a discrete form of ``d^2 f / dx_i dx_j = 0``). Its RMS
over ``PAIRS`` pairs of rows is compared with the oracle's error propagated to it (one error
everywhere, or an error model, :mod:`kansym.discover.noise`): inputs interact when it exceeds
``NOISE_FACTOR`` times that. The product test (AI Feynman, Udrescu & Tegmark 2020, Sci. Adv.
6, eaay2631, §2) runs on ``u = f - c``:
``M_ij = u(a) u(a with a_i, a_j := b_i, b_j) - u(a with a_i := b_i) u(a with a_j := b_j)``
vanishes exactly for a product, whatever the signs (no logarithm).
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import numpy as np
from scipy.optimize import minimize_scalar

from kansym.discover.noise import OracleError, TransformedError, as_error

__all__ = ["NOISE_FACTOR", "OFFSET_MARGIN", "PAIRS", "Oracle", "best_offset", "graph_of", "groups_of",
           "interaction_graph", "ratios", "swapped_values"]

NOISE_FACTOR = 5.0  # a mixed difference within this many oracle errors counts as zero
OFFSET_MARGIN = 2.0  # ... and within a half of that for a product whose offset was fitted
PAIRS = 256  # pairs of rows per mixed difference

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
                      seed: int = 0) -> tuple[nx.Graph, float]:
    """The graph of inputs that interact in ``f`` (additively, or in the product ``f - offset``).

    Parameters
    ----------
    f : callable, ``(N, d) -> (N,)``
        The oracle.
    z : ndarray (N, d)
        Rows whose values the mixed differences swap (the data's distribution).
    eps : float or kansym.discover.noise.OracleError
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
    (:mod:`kansym.discover.noise`; one error ``eps`` everywhere gives ``eps``). Multiplicative:
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
