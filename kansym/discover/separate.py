"""Structure discovery: split a law of many inputs into laws of one or two (AI Feynman).

A KAN trained without sparsification is a smooth oracle ``f`` of the law, accurate to its
held-out error ``eps``. AI Feynman (Udrescu & Tegmark 2020, Sci. Adv. 6, eaay2631, §2)
asks such an oracle whether the law separates, and AI Feynman 2.0 (Udrescu et al. 2020,
arXiv:2006.10782, §2.2, "graph modularity") reads the separation off a graph of the
inputs: two inputs are joined when they interact. Here the interaction of inputs ``i``
and ``j`` is the mixed difference of ``f`` between rows ``a`` and ``b`` of the data,

    D_ij = f(a) - f(a with a_i := b_i) - f(a with a_j := b_j) + f(a with a_i, a_j := b_i, b_j),

which is zero for every pair of rows exactly when ``f`` is a sum of a function without
``x_i`` and one without ``x_j`` (a discrete form of ``d^2 f / dx_i dx_j = 0``). Its RMS
over 256 pairs of rows is compared with the oracle's own error: inputs interact when it
exceeds ``NOISE_FACTOR * eps``. The connected components of the graph of interacting
inputs are the additive groups, ``f = sum_k g_k(x_Gk)``. Without an additive split the
product test runs on ``u = f - c`` (multiplicative separability, ``f = c + prod_k g_k``):
``M_ij = u(a) u(a with a_i, a_j := b_i, b_j) - u(a with a_i := b_i) u(a with a_j := b_j)``
vanishes exactly for a product, whatever the signs (no logarithm), its tolerance propagated
from ``eps``; ``c`` is 0 or the value that minimises the interactions (a grid refined by
Brent's method; products inside sums: ``a + b c d`` on the sub-problem of ``b, c, d``), a
fitted ``c`` with ``OFFSET_MARGIN`` times less tolerance. A symmetry of two inputs
(:mod:`kansym.discover.symmetry`) is tried after the product with ``c = 0`` and before one
with a fitted ``c``.

Each group becomes a sub-problem on the oracle with the other inputs fixed at a central
row of the data, split again (recursively), and a group of one or two inputs that does not
split is solved by the direct search (:func:`kansym.symbolic.direct.direct_search`). The
pieces recombine exactly (sums: ``sum_k h_k - (K - 1) f(b)``; products:
``c + prod_k h_k / (f(b) - c)**(K - 1)``, ``b`` the central row) and the whole formula's
constants are refined on the data (:func:`kansym.symbolic.refine.refine`). The result is
one candidate beside the KAN's formula and the direct search's; the verification of
:func:`kansym.discover.symbolify.choose_formula` decides.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import networkx as nx
import numpy as np
import sympy
from scipy.optimize import minimize_scalar

from kansym.deadline import Deadline, time_is_up
from kansym.discover.split import Split
from kansym.discover.symmetry import find_symmetry, reduced_problem
from kansym.symbolic.compose import lambdify_formula
from kansym.symbolic.direct import DirectCandidate, direct_search, selection_score
from kansym.symbolic.pareto import expression_complexity
from kansym.symbolic.refine import exact_as_floats, merge_numeric_factors, refine, refit_constants, simplify_formula
from kansym.symbolic.snap import clean_floats
from kansym.symbolic.verify import nrmse

__all__ = ["NOISE_FACTOR", "Split", "decompose", "interaction_graph", "structure_candidates"]

log = logging.getLogger("kansym")

NOISE_FACTOR = 5.0  # a mixed difference within this many oracle errors counts as zero
OFFSET_MARGIN = 2.0  # ... and within a half of that for a product whose offset was fitted
PAIRS = 256  # pairs of rows per mixed difference
LEAF_ROWS = 2000  # oracle rows a leaf's direct search works on (and data rows the refits use)
LEAF_ALTERNATIVES = 3  # candidates a leaf hands up
MAX_ALTERNATIVES = 8  # recombinations a node hands up (its best, then one piece swapped for a runner-up)
REFINED = 2  # recombinations refined on the data, of those best after a refit of their coefficients
MAX_DEPTH = 6

Oracle = Callable[[np.ndarray], np.ndarray]  # (N, d) -> (N,)


def _swapped_values(f: Oracle, z: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
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
    eps : float
        The oracle's RMS error, in the units of ``f``.
    offset : float, optional
        Test whether ``f - offset`` is a product (multiplicative separability); None: a sum.

    Returns
    -------
    (networkx.Graph, float)
        Nodes ``0..d-1``, an edge where the pair interacts (its ``ratio`` attribute: RMS mixed
        difference over ``NOISE_FACTOR`` times its noise); and the sum over pairs of
        ``log max(ratio, 1)`` (0 when nothing interacts).
    """
    values = _swapped_values(f, z, np.random.default_rng([seed, 31]))
    return _graph(_ratios(values, eps, offset), values[3], z.shape[1])


def _ratios(values, eps: float, offset: float | None) -> np.ndarray:
    """RMS mixed difference of each pair over ``NOISE_FACTOR`` times its noise.

    Additive (``offset`` None): ``D = f0 - f_i - f_j + f_ij``, noise ``eps``. Multiplicative:
    with ``u = f - offset``, ``M = u0 u_ij - u_i u_j`` (zero for every pair of rows when
    ``u = g(x_i, .) h(x_j, .)``, AI Feynman's product test, without logarithms, so ``u`` may
    change sign), noise ``eps * sqrt(mean(u0^2 + u_ij^2 + u_i^2 + u_j^2))``.
    """
    v0, v1, v2, pairs = values
    if not pairs:
        return np.zeros(0)
    i, j = (np.array([p[k] for p in pairs], dtype=int) for k in (0, 1))
    with np.errstate(all="ignore"):
        if offset is None:
            rms = np.sqrt(np.mean((v0[None, :] - v1[i] - v1[j] + v2) ** 2, axis=1))
            noise = np.full(len(pairs), NOISE_FACTOR * eps)
            scale = float(np.std(v0))
        else:
            u0, u1, u2 = v0 - offset, v1 - offset, v2 - offset
            rms = np.sqrt(np.mean((u0[None, :] * u2 - u1[i] * u1[j]) ** 2, axis=1))
            noise = NOISE_FACTOR * eps * np.sqrt(np.mean(u0[None, :] ** 2 + u2 ** 2 + u1[i] ** 2 + u1[j] ** 2, axis=1))
            scale = float(np.mean(u0 ** 2))
        noise = np.maximum(noise, 1e-12 * max(scale, 1e-300))
    return np.where(np.isfinite(rms), rms / noise, np.inf)


def _graph(ratios: np.ndarray, pairs, d: int) -> tuple[nx.Graph, float]:
    g = nx.Graph()
    g.add_nodes_from(range(d))
    g.add_edges_from((i, j, {"ratio": float(r)}) for (i, j), r in zip(pairs, ratios) if r > 1.0)
    return g, float(np.sum(np.log(np.maximum(ratios, 1.0))))


def _best_offset(values, eps: float, d: int) -> tuple[float, nx.Graph, float]:
    """The offset ``c`` for which ``f - c`` is most nearly a product: 0 first, then a grid of
    ``c`` over and beyond the range of ``f`` (``mid + span * sinh(t)``), its best point refined
    by Brent's method on the sum of log mixed differences; another offset must beat 0 clearly.
    ``values``: :func:`_swapped_values` of ``f`` (``d`` inputs)."""
    pairs = values[3]
    v = np.concatenate([values[0][None], values[1], values[2]])
    mid, span = 0.5 * float(np.min(v) + np.max(v)), max(float(np.ptp(v)), 1e-300)

    def offset(t: float) -> float:
        return mid + span * float(np.sinh(t))

    def smooth(t: float) -> float:  # the sum of log ratios, unclamped: sharp at a true offset
        return float(np.sum(np.log(np.maximum(_ratios(values, eps, offset(t)), 1e-300))))

    best = (_graph(_ratios(values, eps, 0.0), pairs, d)[1], 0.0)
    grid = np.linspace(-np.arcsinh(100.0), np.arcsinh(100.0), 41)
    scores = [smooth(t) for t in grid]
    k = int(np.argmin(scores))
    res = minimize_scalar(smooth, bounds=(grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]), method="bounded",
                          options={"xatol": 1e-9})
    for t in (grid[k], float(res.x)):
        cost = _graph(_ratios(values, eps, offset(t)), pairs, d)[1]
        if cost < best[0] - 1.0:  # a factor e in the interactions' product, over c = 0 or the last best
            best = (cost, offset(t))
    graph, cost = _graph(_ratios(values, eps, best[1]) * (OFFSET_MARGIN if best[1] else 1.0), pairs, d)
    return best[1], graph, cost


def _central_rows(z: np.ndarray, k: int = 64) -> np.ndarray:
    """Indices of the ``k`` data rows nearest the per-input medians (scaled by the
    interquartile range), nearest first."""
    med = np.median(z, axis=0)
    iqr = np.subtract(*np.percentile(z, [75, 25], axis=0))
    dist = np.sum(((z - med) / np.where(iqr > 0, iqr, 1.0)) ** 2, axis=1)
    return np.argsort(dist, kind="stable")[:k]


def _restrict(f: Oracle, base: np.ndarray, group: Sequence[int]) -> Oracle:
    """``f`` as a function of the inputs in ``group``, the others fixed at ``base``."""
    group = list(group)

    def sub(zg: np.ndarray) -> np.ndarray:
        full = np.repeat(base[None, :], zg.shape[0], axis=0)
        full[:, group] = zg
        return f(full)
    return sub


def decompose(f: Oracle, z: np.ndarray, symbols: Sequence[sympy.Symbol], eps: float, *,
              complexity_weight: float = 0.05, seed: int = 0, deadline: Deadline | None = None,
              _depth: int = 0) -> tuple[list[sympy.Expr], Split] | None:
    """Split ``f`` recursively and solve its pieces; the formulas (constants as the oracle
    gives them, not refined: the best first, then up to ``MAX_ALTERNATIVES - 1`` with one
    piece replaced by its runner-up, since a slice of the oracle can favour a wrong piece
    that the data then reject) and the decomposition, or None when a piece of three or
    more inputs does not split (or a leaf's search finds nothing).

    Parameters
    ----------
    f : callable, ``(N, d) -> (N,)``
    z : ndarray (N, d)
        Data rows of the inputs (their distribution is where ``f`` is probed).
    symbols : sequence of sympy.Symbol
        One per column of ``z``.
    eps : float
        The oracle's RMS error (units of ``f``).
    deadline : kansym.deadline.Deadline, optional
        Once it has expired no piece starts and the decomposition gives None.
    """
    if time_is_up(deadline):
        return None
    d = z.shape[1]
    names = tuple(s.name for s in symbols)
    if d >= 2 and _depth < MAX_DEPTH:
        values = _swapped_values(f, z, np.random.default_rng([seed, 31]))  # one set of probes for every test
        graph, _ = _graph(_ratios(values, eps, None), values[3], d)
        groups = sorted(sorted(c) for c in nx.connected_components(graph))
        if len(groups) > 1:
            return _combine(f, z, symbols, eps, groups, "sum", 0.0, complexity_weight, seed, _depth, deadline)
        graph, _ = _graph(_ratios(values, eps, 0.0), values[3], d)
        groups = sorted(sorted(c) for c in nx.connected_components(graph))
        if len(groups) > 1:
            return _combine(f, z, symbols, eps, groups, "product", 0.0, complexity_weight, seed, _depth, deadline)
        # a symmetry before a product with a fitted offset: the symmetry leaves nothing out, the
        # offset bends the test its way (sqrt(a^2 + b^2) passed as c - g(a) h(b) at the oracle's error)
        reduced = _by_symmetry(f, z, symbols, eps, complexity_weight, seed, _depth, deadline) if d > 2 else None
        if reduced is not None:
            return reduced
        offset, graph, _ = _best_offset(values, eps, d)
        groups = sorted(sorted(c) for c in nx.connected_components(graph))
        if len(groups) > 1:
            return _combine(f, z, symbols, eps, groups, "product", offset, complexity_weight, seed, _depth, deadline)
    if d > 2:
        log.debug("structure: %s do not separate", ", ".join(names))
        return None
    rows = z[np.linspace(0, len(z) - 1, min(len(z), LEAF_ROWS)).astype(int)]
    h = f(rows)
    # the oracle's values carry its error: below it every candidate is as good (simplest wins)
    floor = eps / max(float(np.std(h)), 1e-300)
    found = direct_search(rows, h, list(symbols), complexity_weight=complexity_weight, noise=floor, deadline=deadline)
    if not found:
        return None
    ranked = sorted(found, key=lambda c: (selection_score(max(c.error, floor), c.complexity, complexity_weight),
                                          c.complexity, str(c.expr)))
    exprs = list(dict.fromkeys(c.expr for c in ranked))[:LEAF_ALTERNATIVES]
    return exprs, Split("leaf", names)


def _by_symmetry(f, z, symbols, eps, complexity_weight, seed, depth, deadline):
    """Two inputs through one combination (:mod:`kansym.discover.symmetry`): one input fewer."""
    sym = find_symmetry(f, z, eps, seed=seed)
    if sym is None:
        return None
    g, z_red, s_red, w, w_expr = reduced_problem(f, z, symbols, sym)
    solved = decompose(g, z_red, s_red, eps, complexity_weight=complexity_weight, seed=seed, deadline=deadline,
                       _depth=depth + 1)
    if solved is None:
        return None
    names = tuple(s.name for s in symbols)
    relation = f"{w.name} = {w_expr}"
    log.debug("structure: %s depend on %s", ", ".join(names), relation)
    return [e.subs(w, w_expr) for e in solved[0]], Split("symmetry", names, children=(solved[1],), relation=relation)


def _combine(f, z, symbols, eps, groups, kind, offset, complexity_weight, seed, depth, deadline):
    """Solve each group with the other inputs at the central row and recombine exactly."""
    central = _central_rows(z)
    base = z[central[0]].copy()
    if kind == "product":  # f(b) - c divides the recombination: the central row where it is largest
        base = z[central[int(np.argmax(np.abs(f(z[central]) - offset)))]].copy()
    f_base = float(f(base[None, :])[0])
    parts, children = [], []
    for group in groups:
        sub = _restrict(f, base, group)
        if kind == "product":
            sub = (lambda h: (lambda zg: h(zg) - offset))(sub)
        solved = decompose(sub, z[:, group], [symbols[i] for i in group], eps,
                           complexity_weight=complexity_weight, seed=seed, deadline=deadline, _depth=depth + 1)
        if solved is None:
            return None
        parts.append(solved[0])
        children.append(solved[1])
    k = len(groups)

    def join(pieces: Sequence[sympy.Expr]) -> sympy.Expr:
        if kind == "sum":
            return sympy.Add(*pieces) - sympy.Float(k - 1) * sympy.Float(f_base)
        return sympy.Float(offset) + sympy.Mul(*pieces) / sympy.Float(f_base - offset) ** (k - 1)
    first = [p[0] for p in parts]
    exprs = [join(first)] + [join([*first[:i], alt, *first[i + 1:]]) for i, p in enumerate(parts) for alt in p[1:]]
    names = tuple(s.name for s in symbols)
    return exprs[:MAX_ALTERNATIVES], Split(kind, names, offset if kind == "product" else 0.0, tuple(children))


def structure_candidates(oracle: Oracle, eps: float, x: np.ndarray, y: np.ndarray,
                         symbols: Sequence[sympy.Symbol], *, complexity_weight: float = 0.05,
                         seed: int = 0, deadline: Deadline | None = None) -> tuple[list[DirectCandidate], Split | None]:
    """The formula of the decomposition of ``oracle``, refined on the data, as a candidate.

    Parameters
    ----------
    oracle : callable, ``(N, d) -> (N,)``
        A smooth model of ``y`` in the units of ``x, y`` (e.g. an unsparsified KAN).
    eps : float
        Its RMS error on held-out rows (units of ``y``).
    x : ndarray (N, d), d >= 3
    y : ndarray (N,)
        The fitting rows: the constants are refined and the error measured on them.
    symbols : sequence of sympy.Symbol
    deadline : kansym.deadline.Deadline, optional
        The search's share of the time limit: no piece starts after it, and the
        recombinations are refined only while it lasts (their refitted constants otherwise).

    Returns
    -------
    (list of DirectCandidate, Split or None)
        One candidate (error: normalised RMS on ``x, y``) with ``origin="structure"``, and
        the decomposition; an empty list and None when the law does not decompose.
    """
    solved = decompose(oracle, x, symbols, eps, complexity_weight=complexity_weight, seed=seed, deadline=deadline)
    if solved is None:
        return [], None
    raws, split = solved
    log.info("structure: %s", split.describe())
    rows = np.linspace(0, len(x) - 1, min(len(x), LEAF_ROWS)).astype(int)
    # each recombination's coefficients refitted on the data (a cheap screen); the best refined
    screened = sorted(((_error(e, symbols, x[rows], y[rows]), expression_complexity(e), str(e), e)
                       for e in (_refit(exact_as_floats(r), symbols, x[rows], y[rows]) for r in raws)),
                      key=lambda t: (selection_score(t[0], t[1], complexity_weight), t[1], t[2]))
    candidates = []
    for *_, expr in screened[:REFINED]:
        try:
            if not time_is_up(deadline):
                expr = refine(expr, symbols, x[rows], y[rows], deadline=deadline)
        except (ValueError, ArithmeticError) as exc:  # a refit that leaves the formula's domain
            log.debug("structure: refinement failed (%s); keeping the refitted constants", exc)
        expr = tidy(expr)
        error = _error(expr, symbols, x, y)
        if np.isfinite(error):
            candidates.append(DirectCandidate(expr, error, expression_complexity(expr), origin="structure"))
    return candidates, split


def tidy(expr: sympy.Expr) -> sympy.Expr:
    """The recombination written with its shared constants cancelled, values unchanged (to 1e-9):
    ``0.095 V p / (0.095 g - 0.095)`` is ``V p / (g - 1)``. A refinement the time limit skipped
    leaves the pieces' refitted constants as they are (the limit cut it at 120 s for 4 of the
    80 Feynman laws: ``0.785 E q / (m (0.785 w0^2 - 0.785 w^2))``)."""
    return clean_floats(merge_numeric_factors(simplify_formula(expr)))


def _refit(expr: sympy.Expr, symbols, x, y) -> sympy.Expr:
    try:
        return refit_constants(expr, symbols, x, y)
    except (ValueError, ArithmeticError):
        return expr


def _error(expr: sympy.Expr, symbols, x, y) -> float:
    """Normalised RMS error on ``x, y`` (inf where the formula is not finite)."""
    with np.errstate(all="ignore"):
        pred = np.broadcast_to(np.asarray(lambdify_formula(expr, symbols)(x), dtype=np.float64), y.shape)
    return nrmse(y, pred) if np.all(np.isfinite(pred)) else np.inf
