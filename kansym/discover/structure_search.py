"""Structure search (AI Feynman): the reference model (the oracle) and the split of a law of many inputs
into laws of one or two.

One node of a decomposition found by the structure search (below).

Structure discovery: split a law of many inputs into laws of one or two (AI Feynman).

A KAN trained without sparsification is a smooth oracle ``f`` of the law, accurate to its
held-out error (one RMS error, or an error model of it, :mod:`kansym.discover.structure_tests`).
AI Feynman (Udrescu & Tegmark 2020, Sci. Adv. 6, eaay2631, §2) asks such an oracle whether
the law separates; the tests are the mixed differences of :mod:`kansym.discover.structure_tests`.
In order, for a (sub-)law of ``d`` inputs:

1. additive groups, ``f = sum_k g_k(x_Gk)`` (the connected components of the graph of
   interacting inputs);
2. multiplicative groups of ``u = f - c`` with ``c = 0``, ``f = prod_k g_k``;
3. a symmetry of two inputs (:mod:`kansym.discover.structure_tests`: ``f`` depends on ``x_i, x_j``
   only through ``x_i - x_j``, ``x_i + x_j``, ``x_i / x_j`` or ``x_i x_j``): one input fewer.
   It comes before a fitted offset: the symmetry leaves nothing out, the offset bends the
   test its way (``sqrt(a^2 + b^2)`` passed as ``c - g(a) h(b)`` at the oracle's error,
   ``(1 + v/c) / sqrt(1 - v^2/c^2)`` as ``3.5 + g(c) h(v)``); of two inputs it leaves a law
   of one;
4. multiplicative groups with a fitted ``c`` (a grid refined by Brent's method; products
   inside sums: ``a + b c d`` on the sub-problem of ``b, c, d``), with ``OFFSET_MARGIN``
   times less tolerance;
5. for ``d >= 3``: additive groups of the target's square or inverse (AI Feynman's
   transformed targets: ``sqrt(a^2 + b^2 + c^2)``, ``1 / (a + b + c)``), the oracle's error
   propagated to them.

Each group becomes a sub-problem on the oracle with the other inputs fixed at a central
row of the data, split again (recursively), and a group of one or two inputs that does not
split is solved by the direct search (:func:`kansym.symbolic.direct.direct_search`). The
pieces recombine exactly (sums: ``sum_k h_k - (K - 1) f(b)``; products:
``c + prod_k h_k / (f(b) - c)**(K - 1)``, ``b`` the central row; transforms: the inverse
transform of the sum) and the whole formula's constants are refined on the data
(:func:`kansym.symbolic.refine.refine`). The result is one candidate beside the KAN's
formula and the direct search's; the verification of
:func:`kansym.discover.choice.choose_formula` decides.

The reference model of a run: its KAN trained without sparsification, and the structure
search on it (below).

The sparsified KAN of the main stages trades accuracy for a network small enough to read;
the reference keeps all of it. Its held-out R² is the standard a formula is verified
against (:attr:`kansym.discover.result.Formula.r2_reference_test`: a formula far below it
misses structure the data hold), and it is the oracle the separability tests probe.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace


import numpy as np
import sympy

from kansym.config import COMPLEXITY_WEIGHT, SEED
from kansym.deadline import Deadline, time_is_up
from kansym.discover.stages import train_stage
from kansym.discover.structure_tests import choose_space
from kansym.discover.structure_tests import (TRANSFORMS, NOISE_FACTOR, PAIRS, Oracle, best_offset, graph_of, groups_of,
    interaction_graph, ratios, swapped_values, TransformedError, as_error, find_symmetry, reduced_problem, OracleError)
from kansym.symbolic.compose import input_symbols, predictions
from kansym.symbolic.direct import DirectCandidate, direct_search, selection_score
from kansym.symbolic.pareto import expression_complexity
from kansym.symbolic.refine import (exact_as_floats, merge_numeric_factors, monic_denominators, refine,
    refit_constants, simplify_formula)
from kansym.symbolic.snap import clean_floats
from kansym.symbolic.verify import nrmse, r2_score

__all__ = ['Split', 'NOISE_FACTOR', 'decompose', 'interaction_graph', 'structure_candidates', 'wants_structure',
    'structure_stage', 'MAX_ORACLE_ERROR', 'MIN_LIMIT']

log = logging.getLogger("kansym")


@dataclass(frozen=True)
class Split:
    """One node of a decomposition.

    Attributes
    ----------
    kind : {"sum", "product", "symmetry", "transform", "leaf"}
    variables : tuple of str
        The inputs of this node.
    offset : float
        ``c`` of a product node, ``f = c + prod_k g_k`` (0 for the others).
    children : tuple of Split
    relation : str
        Of a symmetry node: the new variable of its one child, ``"w = a - b"``
        (:mod:`kansym.discover.structure_tests`); of a transform node: the transform whose value of
        the law its one child solves (``"square"``, ``"inverse"``,
        :data:`kansym.discover.structure_tests.TRANSFORMS`).
    """

    kind: str
    variables: tuple[str, ...]
    offset: float = 0.0
    children: tuple[Split, ...] = ()
    relation: str = ""

    def describe(self) -> str:
        """``"a + (b * c)"``-style text of the decomposition (leaves as ``f(a, b)``)."""
        if self.kind == "leaf":
            return f"f({', '.join(self.variables)})"
        if self.kind == "symmetry":
            return f"{self.children[0].describe()} with {self.relation}"
        if self.kind == "transform":
            return TRANSFORMS[self.relation].text.format(self.children[0].describe())
        parts = [c.describe() if c.kind == "leaf" else f"({c.describe()})" for c in self.children]
        text = (" + " if self.kind == "sum" else " * ").join(parts)
        return f"{self.offset:.6g} + {text}" if self.kind == "product" and self.offset else text

    def to_dict(self) -> dict:
        out: dict = {"kind": self.kind, "variables": list(self.variables)}
        if self.kind == "product" and self.offset:
            out["offset"] = self.offset
        if self.relation:
            out["relation"] = self.relation
        if self.children:
            out["children"] = [c.to_dict() for c in self.children]
        return out


LEAF_ROWS = 2000  # oracle rows a leaf's direct search works on (and data rows the refits use)
LEAF_ALTERNATIVES = 12  # candidates a leaf hands up: its best, its most accurate, then by score
MAX_ALTERNATIVES = 16  # recombinations a node hands up (its best, then one piece swapped for a runner-up)
REFINED = 2  # recombinations refined on the data, of those best after a refit of their coefficients
RETRY_FACTOR = 3.0  # a structure whose best formula misses the data by more oracle errors is tried again
MAX_DEPTH = 6
SIMPLE = 4  # a leaf whose best form has at most this complexity (c x^k, c + x) needs no second search
FIRST_REFINE_SECONDS = 10.0  # the best recombination's refinement once the search's share is up: at most this long

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
              complexity_weight: float = COMPLEXITY_WEIGHT, seed: int = SEED, deadline: Deadline | None = None,
              avoid: frozenset[str] = frozenset(), _depth: int = 0) -> tuple[list[sympy.Expr], Split] | None:
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
    eps : float or kansym.discover.structure_tests.OracleError
        The oracle's RMS error (units of ``f``), or its error model (the error at each value,
        :mod:`kansym.discover.structure_tests`).
    deadline : kansym.deadline.Deadline, optional
        Once it has expired no piece starts and the decomposition gives None.
    avoid : frozenset of str
        Splits not taken at the top, nor at the top of a symmetry reduction of it (the pieces
        may take them): ``"sum"``, ``"product"``, ``"symmetry"``, ``"offset"`` (a product with a
        fitted offset), ``"transform"`` (:func:`split_kind`): the structure search's second try
        after the data rejected the first.
    """
    if time_is_up(deadline):
        return None
    d = z.shape[1]
    names = tuple(s.name for s in symbols)
    if d >= 2 and _depth < MAX_DEPTH:
        values = swapped_values(f, z, np.random.default_rng([seed, 31]))  # one set of probes for every test
        additive, product = ratios(values, eps, None), ratios(values, eps, 0.0)
        log.debug("structure: %s: interactions (sum, product) %s", ", ".join(names),
                  ", ".join(f"{names[i]}-{names[j]} {a:.3g} {b:.3g}" for (i, j), a, b in zip(values[3], additive, product)))
        groups = groups_of(graph_of(additive, values[3], d)[0])
        if len(groups) > 1 and "sum" not in avoid:
            return _combine(f, z, symbols, eps, groups, "sum", 0.0, complexity_weight, seed, _depth, deadline)
        groups = groups_of(graph_of(product, values[3], d)[0])
        if len(groups) > 1 and "product" not in avoid:
            return _combine(f, z, symbols, eps, groups, "product", 0.0, complexity_weight, seed, _depth, deadline)
        # a symmetry before a product with a fitted offset: the symmetry leaves nothing out, the
        # offset bends the test its way (sqrt(a^2 + b^2) passed as c - g(a) h(b) at the oracle's error)
        reduced = None if "symmetry" in avoid else _by_symmetry(f, z, symbols, eps, complexity_weight, seed,
                                                                 _depth, deadline, avoid)
        if reduced is not None:
            return reduced
        offset, graph, _ = best_offset(values, eps, d)
        groups = groups_of(graph)
        if len(groups) > 1 and "offset" not in avoid:
            return _combine(f, z, symbols, eps, groups, "product", offset, complexity_weight, seed, _depth, deadline)
    if d > 2:
        transformed = None if "transform" in avoid else _by_transform(f, z, symbols, eps, complexity_weight, seed,
                                                                      _depth, deadline)
        if transformed is not None:
            return transformed
        log.debug("structure: %s do not separate", ", ".join(names))
        return None
    return _solved_leaf(f, z, symbols, eps, complexity_weight, deadline)


def _solved_leaf(f: Oracle, z: np.ndarray, symbols: Sequence[sympy.Symbol], eps, complexity_weight: float,
                 deadline: Deadline | None) -> tuple[list[sympy.Expr], Split] | None:
    """A piece of one or two inputs not split further, solved by the direct search on the oracle's values: its
    best formulas (up to ``LEAF_ALTERNATIVES``) and the leaf, or None when the search finds nothing."""
    names = tuple(s.name for s in symbols)
    rows = z[np.linspace(0, len(z) - 1, min(len(z), LEAF_ROWS)).astype(int)]
    h = f(rows)
    # the oracle's values carry its error: below it every candidate is as good (simplest wins)
    scale = max(float(np.std(h)), 1e-300)
    e_row = np.maximum(as_error(eps).at(h), 1e-12 * scale)
    floor = float(np.sqrt(np.mean(e_row ** 2))) / scale
    # an error nearer proportional to the values than of one size: the search weighs rows alike
    # in relative terms (and its floor is in log units), else a fit of the large values wins
    with np.errstate(all="ignore"):
        relative = bool(np.all(h > 0) and np.std(np.log(e_row / h)) < np.std(np.log(e_row)))
        floor_search = (float(np.sqrt(np.mean((e_row / h) ** 2)) / max(float(np.std(np.log(h))), 1e-300))
                        if relative else floor)
    found = direct_search(rows, h, list(symbols), complexity_weight=complexity_weight, noise=floor_search,
                          relative=relative, deadline=deadline)
    # each candidate's error weighed row by row by the oracle's error there (in units of the
    # floor: the plain normalised error when the error is the same everywhere): where it is
    # relative, a fit that is good on the large values and wrong on the small ones does not pass
    errors = {c.expr: floor * _chi(c.expr, symbols, rows, h, e_row) for c in found}

    def rank(cands):
        return sorted(cands, key=lambda c: (selection_score(max(errors[c.expr], floor), c.complexity,
                                                            complexity_weight), c.complexity, str(c.expr)))
    if relative and not time_is_up(deadline) and (not found or rank(found)[0].complexity > SIMPLE):
        # and the plain search: the oracle's own error is no model of the law's, and its other
        # ranking keeps other forms ((1 + w)/sqrt(1 - w^2) among them); not needed when a form
        # as simple as c x^k fits within the floor
        plain = direct_search(rows, h, list(symbols), complexity_weight=complexity_weight, noise=floor,
                              refine_top=2, deadline=deadline)
        errors.update({c.expr: floor * _chi(c.expr, symbols, rows, h, e_row) for c in plain})
        found += plain
    if not found:
        return None
    ranked = rank(found)
    # and the most accurate: the data, not the oracle's floor, decide between it and the simpler ones
    sharp = min(found, key=lambda c: (errors[c.expr], c.complexity, str(c.expr)))
    exprs = list(dict.fromkeys([ranked[0].expr, sharp.expr] + [c.expr for c in ranked[1:]]))[:LEAF_ALTERNATIVES]
    log.debug("structure: leaf f(%s) (noise floor %.3g): %s", ", ".join(names), floor,
              "; ".join(f"{e} ({errors[e]:.3g})" for e in exprs))
    return exprs, Split("leaf", names)


def _chi(expr: sympy.Expr, symbols, x: np.ndarray, h: np.ndarray, e_row: np.ndarray) -> float:
    """RMS of ``(expr(x) - h) / e_row`` (inf where ``expr`` is not finite)."""
    pred = predictions(expr, symbols, x)
    with np.errstate(all="ignore"):
        chi = float(np.sqrt(np.mean(((pred - h) / e_row) ** 2)))
    return chi if np.isfinite(chi) else np.inf


def _by_transform(f, z, symbols, eps, complexity_weight, seed, depth, deadline):
    """A law of three or more inputs whose square or inverse is a sum (``sqrt(a^2 + b^2 + c^2)``,
    ``1 / (a + b + c)``): AI Feynman's transformed targets. Only for ``f`` of one strict sign on
    the probes; the additive test runs on ``T(f)`` with the error propagated to it."""
    if depth >= MAX_DEPTH:
        return None
    probe = np.asarray(f(z[np.linspace(0, len(z) - 1, min(len(z), PAIRS)).astype(int)]), dtype=np.float64)
    sign = 1 if np.all(probe > 0) else -1 if np.all(probe < 0) else 0
    if sign == 0 or not np.all(np.isfinite(probe)):
        return None
    for name, t in TRANSFORMS.items():
        if time_is_up(deadline):
            return None
        ft = (lambda tf: (lambda zz: tf(f(zz))))(t.forward)
        err = TransformedError(as_error(eps), name, sign)
        values = swapped_values(ft, z, np.random.default_rng([seed, 37]))
        graph, _ = graph_of(ratios(values, err, None), values[3], z.shape[1])
        groups = groups_of(graph)
        if len(groups) < 2:
            continue
        solved = _combine(ft, z, symbols, err, groups, "sum", 0.0, complexity_weight, seed, depth, deadline)
        if solved is None:
            continue
        names = tuple(s.name for s in symbols)
        log.debug("structure: %s: %s is a sum", ", ".join(names), name)
        return ([t.symbolic(e, sign) for e in solved[0]],
                Split("transform", names, children=(solved[1],), relation=name))
    return None


def _by_symmetry(f, z, symbols, eps, complexity_weight, seed, depth, deadline, avoid=frozenset()):
    """Two inputs through one combination (:mod:`kansym.discover.structure_tests`): one input fewer.

    The reduced function is ``f`` itself in fewer variables, not a piece of it: a split the
    data rejected at the top stays avoided there (``1 / (exp(h w / (k T)) - 1)`` reduced by
    ``T / h`` and ``k T / h`` is again a near-product of ``w`` and ``k T / h``).
    """
    sym = find_symmetry(f, z, eps, seed=seed)
    if sym is None:
        return None
    g, z_red, s_red, w, w_expr = reduced_problem(f, z, symbols, sym)
    solved = decompose(g, z_red, s_red, eps, complexity_weight=complexity_weight, seed=seed, deadline=deadline,
                       avoid=avoid, _depth=depth + 1)
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
        solved = decompose(sub, z[:, group], [symbols[i] for i in group],
                           as_error(eps).shifted(offset) if kind == "product" else eps,
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
    # the best, then one piece swapped for its k-th alternative, k = 1, 2, ... across the pieces
    exprs = [join(first)] + [join([*first[:i], p[k], *first[i + 1:]])
                             for k in range(1, max(map(len, parts))) for i, p in enumerate(parts) if k < len(p)]
    names = tuple(s.name for s in symbols)
    return exprs[:MAX_ALTERNATIVES], Split(kind, names, offset if kind == "product" else 0.0, tuple(children))


def structure_candidates(oracle: Oracle, eps: float, x: np.ndarray, y: np.ndarray,
                         symbols: Sequence[sympy.Symbol], *, complexity_weight: float = COMPLEXITY_WEIGHT,
                         seed: int = SEED, deadline: Deadline | None = None) -> tuple[list[DirectCandidate], Split | None]:
    """The formulas of the decomposition of ``oracle``, refined on the data, as candidates.

    When the best of them misses the data by more than ``RETRY_FACTOR`` times the oracle's own
    error, the split at the top was not the law's (a test passed within the oracle's
    tolerance: ``1 / (exp(h w / (k T)) - 1)`` is a product of its inputs to within 2 % where
    ``h w / (k T)`` is small), and the decomposition is tried once more without it (AI
    Feynman's recursion likewise moves on when a split's solution fails on the data).

    Parameters
    ----------
    oracle : callable, ``(N, d) -> (N,)``
        A smooth model of ``y`` in the units of ``x, y`` (e.g. an unsparsified KAN).
    eps : float or kansym.discover.structure_tests.OracleError
        Its RMS error on held-out rows (units of ``y``), or its error model
        (:meth:`kansym.discover.structure_tests.OracleError.fit` of those rows).
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
        The candidates (error: normalised RMS on ``x, y``) with ``origin="structure"`` and
        their decomposition (``structure``: :meth:`Split.to_dict`), and the decomposition of
        the best; an empty list and None when the law does not decompose.
    """
    rows = np.linspace(0, len(x) - 1, min(len(x), LEAF_ROWS)).astype(int)
    # the oracle's own normalised error on the data: a split whose formula misses by far more
    # than that is not the law's (a near-product at the oracle's tolerance: 1 / (exp(u) - 1))
    with np.errstate(all="ignore"):
        oracle_error = nrmse(y[rows], np.asarray(oracle(x[rows]), dtype=np.float64))
    candidates, best, avoid = [], None, frozenset()
    for _ in range(2):
        solved = decompose(oracle, x, symbols, eps, complexity_weight=complexity_weight, seed=seed,
                           deadline=deadline, avoid=avoid)
        if solved is None:
            break
        found = _refined(solved[0], symbols, x, y, rows, complexity_weight, deadline)
        record = solved[1].to_dict()
        log.info("structure: %s (normalised error %s)", solved[1].describe(),
                 f"{min(c.error for c in found):.3g}" if found else "-")
        candidates += [replace(c, structure=record) for c in found]
        if found and (best is None or min(c.error for c in found) < best[0]):
            best = (min(c.error for c in found), solved[1])
        if (best is not None and best[0] <= RETRY_FACTOR * oracle_error) or time_is_up(deadline) or avoid:
            break
        avoid = frozenset({split_kind(solved[1])})
        log.info("structure: the data reject it (normalised error above %g times the oracle's %.3g); "
                 "trying again without a top-level %s", RETRY_FACTOR, oracle_error, split_kind(solved[1]))
    return candidates, (None if best is None else best[1])


def split_kind(split: Split) -> str:
    """The test that made ``split``: its kind, ``"offset"`` for a product with a fitted offset."""
    return "offset" if split.kind == "product" and split.offset else split.kind


def _refined(raws, symbols, x, y, rows, complexity_weight, deadline) -> list[DirectCandidate]:
    """The recombinations' coefficients refitted on the data (a cheap screen), the best
    ``REFINED`` distinct ones refined (:func:`kansym.symbolic.refine.refine`) and tidied.

    The best of the screen is refined also when ``deadline`` is up (for at most
    ``FIRST_REFINE_SECONDS``; the direct search, too, always refines its best), the others only
    while it is not. The screen scores each with the complexity it would have with every float exact (a
    refinement makes a float one exact node; ``V pr / (c1 gamma - c2)`` with 4 floats is 5
    nodes then): by its raw complexity the law lost to an approximation with fewer floats.
    Recombinations equal to an earlier one to 1e-9 in error and complexity count once.
    """
    refitted = (_refit(monic_denominators(exact_as_floats(r)), symbols, x[rows], y[rows]) for r in raws)
    scored = [(_error(e, symbols, x[rows], y[rows]), expression_complexity(e) - len(e.atoms(sympy.Float)), str(e), e)
              for e in refitted]
    screened, seen = [], []
    for t in sorted(scored, key=lambda t: (selection_score(t[0], t[1], complexity_weight), t[1], t[2])):
        if not any(t[1] == c and abs(t[0] - err) <= 1e-9 * max(err, 1e-300) for err, c in seen):
            seen.append((t[0], t[1]))
            screened.append(t)
    log.debug("structure: recombinations refitted on the data: %s",
              "; ".join(f"{e} ({err:.3g})" for err, _, _, e in screened[:4]))
    candidates = []
    for n, (*_, expr) in enumerate(screened[:REFINED]):
        try:
            if not time_is_up(deadline):
                expr = refine(expr, symbols, x[rows], y[rows], deadline=deadline)
            elif n == 0:  # the best is refined anyway (as the direct search's is): its pieces' fitted offsets
                # and scales printed as they are were the answer to a law at 1 % noise, (-0.0013 + 1/e)*(...)
                expr = refine(tidy(expr), symbols, x[rows], y[rows], deadline=Deadline(FIRST_REFINE_SECONDS))
        except (ValueError, ArithmeticError) as exc:  # a refit that leaves the formula's domain
            log.debug("structure: refinement failed (%s); keeping the refitted constants", exc)
        expr = tidy(expr)
        error = _error(expr, symbols, x, y)
        if np.isfinite(error):
            candidates.append(DirectCandidate(expr, error, expression_complexity(expr), origin="structure"))
    return candidates


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
    pred = predictions(expr, symbols, x)
    return nrmse(y, pred) if np.all(np.isfinite(pred)) else np.inf


MIN_LIMIT = 30.0  # under this time limit (s) the structure search does not run: the main KAN gets it all
# a second oracle beside the run's KAN: two hidden layers of 5, 100 LBFGS steps. A sum
# inside a function (the distance sqrt((x2-x1)^2 + (y2-y1)^2)) needs the second layer. On
# the tuning half's 27 equations of three inputs or more (3,000 rows, linear units) its
# held-out error was lower on 21 (geometric mean 6.9e-3 against 1.5e-2) and up to 4x higher
# on 6, so both are trained and the better one is kept (geometric mean 6.2e-3)
ORACLE_HIDDEN = (5, 5)
ORACLE_STEPS = 100
MAX_ORACLE_ERROR = 0.05  # oracle RMS error over std(y) above which its tests mean nothing (R² < 0.9975)


def wants_structure(config, d_in: int, d_out: int) -> bool:
    """Whether the structure search runs: ``config.structure``, the whole primitive library
    (its leaves are direct searches), one output and three inputs or more (one or two go to
    the direct search whole)."""
    return bool(config.structure and config.library is None and d_out == 1 and d_in >= 3)


def structure_stage(rows, input_names: Sequence[str], output_names: Sequence[str], config,
                    progress: bool | None = None, *,
                    deadline: Deadline | None = None) -> tuple[list[DirectCandidate], float]:
    """Train the oracle (the run's KAN without sparsification, on the training rows), measure
    its error on the held-out rows and return :func:`structure_candidates` on the fitting rows.

    Parameters
    ----------
    rows : kansym.discover.run.Rows
        Working-unit rows; without held-out rows the oracle's error is unknown and nothing
        is tried.
    config : DiscoverConfig
    deadline : kansym.deadline.Deadline, optional
        This stage's share of the run's time limit: the oracle's training stops with it, and
        once it has expired no search starts.

    Returns
    -------
    (list of DirectCandidate, float)
        The candidates and the oracle's held-out R² (NaN without held-out rows).
    """
    if rows.x_test is None or time_is_up(deadline):
        return [], float("nan")
    if deadline is not None and deadline.seconds is not None and deadline.seconds < MIN_LIMIT:  # the run's limit
        deadline.cut(f"structure search: skipped (a time limit under {MIN_LIMIT:g} s goes to the main KAN)")
        return [], float("nan")
    space = choose_space(rows.x_train, rows.y_train, config.space)
    shapes = [(config.hidden, config.train.steps), (ORACLE_HIDDEN, ORACLE_STEPS)]
    tries = [(space, *shape) for shape in shapes]
    if config.space == "auto":  # the other units, only when neither oracle is good enough in these
        tries += [("linear" if space == "log" else "log", *shape) for shape in shapes]
    oracle, eps, r2, error, pred = None, np.inf, float("nan"), None, None
    trained = []  # the held-out predictions of every oracle trained
    for k, (units, hidden, steps) in enumerate(tries):
        if time_is_up(deadline) or (k >= len(shapes) and eps <= MAX_ORACLE_ERROR * np.std(rows.y_test[:, 0])):
            break
        other = _oracle(rows, input_names, output_names, config, units, hidden, steps, progress, deadline)
        if other[0] is not None:
            trained.append(other[4])
            if oracle is None or other[1] < eps:
                oracle, eps, r2, error, pred = other
    if time_is_up(deadline):
        deadline.cut("structure search: skipped (the oracle's training took its share)")
        return [], r2
    if not eps <= MAX_ORACLE_ERROR * np.std(rows.y_test[:, 0]):
        log.info("structure: not searched (the oracle's held-out R² %.4g is too low for its tests)", r2)
        return [], r2
    error = _without_noise(error, pred, [p for p in trained if p is not pred])
    log.debug("structure: the oracle's error %s", error)
    candidates, _ = structure_candidates(lambda z: oracle.predict(z)[:, 0], error, rows.x, rows.y[:, 0],
                                             input_symbols(input_names), complexity_weight=config.complexity_weight,
                                             seed=config.seed, deadline=deadline)
    if time_is_up(deadline):
        deadline.cut("structure search: stopped at its share of the time limit")
    return candidates, r2


def _oracle(rows, input_names, output_names, config, space: str, hidden, steps: int, progress, deadline=None):
    """The unsparsified KAN of width ``(d, *hidden, 1)`` trained for ``steps`` in ``space``, its RMS
    error, R² and error model (:class:`kansym.discover.structure_tests.OracleError`: fitted to the held-out
    residuals in log units, their one RMS error in linear units)."""
    kind = "linear" if space == "linear" else "log"
    if kind == "log" and not (np.all(rows.x_train > 0) and np.all(rows.y_train > 0)):
        return None, np.inf, -np.inf, None, None
    oracle = train_stage(
        rows.x_train, rows.y_train, input_names, output_names, hidden=hidden, grid_size=config.grid_size,
        spline_order=config.spline_order, space=kind,
        train=config.train.replace(lamb=0.0, steps=steps, seed=config.seed, device=config.device),
        seed=config.seed,
        dtype=config.dtype, progress=progress, label="the oracle of the structure search: no sparsification",
        deadline=deadline,
    )
    with np.errstate(all="ignore"):
        pred = oracle.predict(rows.x_test)[:, 0]
    eps = float(np.sqrt(np.mean((pred - rows.y_test[:, 0]) ** 2)))
    # its error model: a model fitted in log units errs in proportion to its value (plus the
    # data's noise, of one size); one fitted in linear units errs alike everywhere
    error = OracleError.fit(pred, rows.y_test[:, 0]) if kind == "log" else OracleError(eps)
    return (oracle, (eps if np.isfinite(eps) else np.inf), r2_score(rows.y_test[:, 0], pred, nonfinite="-inf"),
            error, pred)


def _without_noise(error: OracleError, pred: np.ndarray, others: Sequence[np.ndarray]) -> OracleError:
    """The oracle's error model, or that of its disagreement with another oracle when that is
    smaller.

    The held-out residuals hold the data's noise besides the oracle's error; the oracle, fitted
    to thousands of rows, averages most of the noise away, and the separability tests probe
    the oracle, not the data. Two oracles of other shapes trained on the same rows disagree by
    about the root sum of squares of their own errors, without the noise: both the residuals
    and the disagreement bound the better oracle's error from above, and the smaller bound is
    kept. At noise 0.01 the residuals were twice the disagreement on
    ``mom sqrt(Bx^2 + By^2 + Bz^2)``, whose inputs then stood as a product within the residuals'
    tolerance. Without noise the residuals are mostly the smaller.
    """
    best = error
    for other in others:
        with np.errstate(all="ignore"):
            ok = np.isfinite(pred) & np.isfinite(other)
            if ok.sum() < 10:
                continue
            gap = (OracleError.fit(pred[ok], other[ok]) if error.relative > 0
                   else OracleError(float(np.sqrt(np.mean((pred[ok] - other[ok]) ** 2)))))
            log.debug("structure: the oracles disagree by %s (RMS %.3g; residuals' %.3g)", gap, gap.rms(pred[ok]),
                      best.rms(pred[ok]))
            if gap.rms(pred[ok]) < best.rms(pred[ok]):
                best = gap
    return best
