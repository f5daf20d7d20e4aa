"""The symbolic stage of discovery and its result: :class:`Formula`.

``symbolify_bundle`` turns a (pruned) model bundle into verified formulas:
symbolify (per-edge primitives) -> Occam step -> compose -> refine -> verify on
held-out rows -> Pareto front (DESIGN.md §2; docs/algorithms.md §5-§9).
``split_holdout`` draws the held-out rows :func:`kansym.pipeline.discover` keeps apart.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kansym.io.bundle import ModelBundle
from kansym.symbolic.compose import SymbolicKAN, input_symbols, lambdify_formula, symbolify
from kansym.symbolic.direct import DirectCandidate, direct_search, selection_score
from kansym.symbolic.occam import simplify_edges
from kansym.symbolic.pareto import expression_complexity, pareto_front
from kansym.symbolic.refine import refine
from kansym.symbolic.verify import Fidelity, fidelity, r2_score

if TYPE_CHECKING:
    from kansym.pipeline import DiscoverConfig

__all__ = ["Formula", "symbolify_bundle", "split_holdout", "uses_direct_search", "R2_GAP", "MIN_HOLDOUT_ROWS"]

log = logging.getLogger("kansym")

MIN_ROWS = 10
MIN_HOLDOUT_ROWS = 20  # fewer held-out rows than this would make a noisy verdict
R2_GAP = 0.01  # a formula this much below the model's held-out R² is flagged
EXACT_DIRECT_ERROR = 1e-9  # a direct formula this close (normalised RMS error) skips the KAN's Occam step and refit
DIRECT_MARGIN = 0.5  # score lead a direct-search formula needs over a verified KAN formula


@dataclass(frozen=True)
class Formula:
    """A discovered formula for one output.

    Attributes
    ----------
    expr : sympy.Expr
        In CSV units and CSV names.
    raw : sympy.Expr
        The composition before refinement (equals the symbolic model's forward).
    symbols : tuple of sympy.Symbol
    fidelity : Fidelity
        R² on the data and against the model.
    target : str
    candidates : tuple of kansym.symbolic.occam.Candidate
        Every formula the Occam step evaluated (complexity, error, BIC, accepted),
        before the final refinement.
    r2_test, r2_model_test : float
        R² of the formula and of the model on the held-out rows (on the fitting rows
        when none were held out, ``n_test == 0``).
    n_test : int
        Number of held-out rows.
    front : tuple of kansym.symbolic.pareto.FrontEntry
        The complexity/error Pareto front of the candidates and the final formula, the
        chosen one marked (:func:`kansym.symbolic.pareto.pareto_front`).
    """

    expr: sympy.Expr
    raw: sympy.Expr
    symbols: tuple[sympy.Symbol, ...]
    fidelity: Fidelity
    target: str
    candidates: tuple = ()
    r2_test: float = float("nan")
    r2_model_test: float = float("nan")
    n_test: int = 0
    front: tuple = ()

    @property
    def numeric_edges(self) -> tuple[str, ...]:
        """Names of the edges kept numeric (opaque ``phi_l_i_j`` functions in :attr:`expr`)."""
        return tuple(sorted({str(f.func) for f in self.expr.atoms(AppliedUndef)}))

    @property
    def warning(self) -> str | None:
        """Why this formula must not be taken as the answer as it stands, or None.

        Set when its R² on the held-out rows (the fitting rows if none were held out)
        is below the model's by more than ``R2_GAP`` = 0.01, or when some edge fitted no
        primitive and stayed numeric.
        """
        notes = []
        if not np.isfinite(self.r2_test) or self.r2_test < self.r2_model_test - R2_GAP:
            notes.append(f"the formula's R² ({self.r2_test:.4f}) is below the model's ({self.r2_model_test:.4f}) "
                         f"by more than {R2_GAP}: it misses part of what the model learned")
        if self.numeric_edges:
            notes.append(f"edges {', '.join(self.numeric_edges)} fit no primitive and stay numeric")
        return "; ".join(notes) or None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Evaluate on CSV inputs ``(N, d_in)`` -> ``(N,)``."""
        return lambdify_formula(self.expr, self.symbols)(x)



def symbolify_bundle(
    bundle: ModelBundle,
    config: DiscoverConfig,
    x: np.ndarray | None = None,
    y: np.ndarray | None = None,
    x_test: np.ndarray | None = None,
    y_test: np.ndarray | None = None,
    direct: Sequence[DirectCandidate] | None = None,
) -> tuple[SymbolicKAN, tuple[Formula, ...]]:
    """Symbolify a bundled model, compose, refine and verify its formulas.

    With one output, at most two inputs, ``config.direct_search`` and the whole primitive
    library (``config.library`` None), the small formulas
    of :func:`kansym.symbolic.direct.direct_search` (on ``x, y``) compete with the KAN's
    formula: the one of lowest :func:`kansym.symbolic.direct.selection_score` on the
    held-out rows (``config.complexity_weight``) is the answer (docs/algorithms.md).

    Parameters
    ----------
    bundle : ModelBundle
    config : DiscoverConfig
        ``library``, ``r2_threshold`` and ``min_edge_r2`` are used.
    x, y : ndarray, optional
        CSV-unit data for the refit and the fidelity (default: the calibration rows).
    x_test, y_test : ndarray, optional
        Held-out CSV-unit rows on which the formula and the model are compared
        (:attr:`Formula.r2_test`, :attr:`Formula.warning`); default: ``x, y``.
    direct : sequence of DirectCandidate, optional
        Candidates of the direct search already computed on ``x, y`` (None: search here).
    """
    x = bundle.x_cal if x is None else x
    y = bundle.y_cal if y is None else y
    held_out = x_test is not None and y_test is not None
    if not held_out:
        x_test, y_test = x, y
    symbols = tuple(input_symbols(bundle.input_names, positive=bundle.transform.log_space))
    tried: list = []
    if direct is None and uses_direct_search(config, x, y):
        direct = direct_search(x, y[:, 0], symbols, complexity_weight=config.complexity_weight)
    # an exact direct formula makes the KAN's Occam step and refit (minutes on some 2-input
    # laws) moot
    exact_direct = bool(direct) and min(c.error for c in direct) <= EXACT_DIRECT_ERROR
    occam = len(bundle.output_names) == 1 and config.simplify_edges and not exact_direct
    sym, candidates = symbolify(
        bundle.model,
        bundle.model_inputs(x).double(),
        bundle.transform,
        bundle.input_names,
        bundle.output_names,
        library=config.library,
        r2_threshold=config.r2_threshold,
        min_r2=config.min_edge_r2,
        exhaustive=occam,  # the alternatives of every edge are refined only for the Occam step
    )
    if occam:
        sym, tried = simplify_edges(sym, candidates, symbols, x, y[:, 0])
    y_model = bundle.predict(x)
    y_model_test = bundle.predict(x_test)
    loss_space = "log" if bundle.transform.log_space else "linear"
    formulas = []
    for k, raw in enumerate(sym.expressions(symbols)):
        # with an exact direct formula the KAN's composition is only shown, not refined
        expr = raw if exact_direct else refine(raw, symbols, x, y[:, k], loss_space=loss_space)
        fid = fidelity(lambdify_formula(expr, symbols), x, y[:, k], y_model[:, k]) if _finite(expr, symbols, x) else None
        # a composition undefined on some rows (an edge's fit left its domain) is scored as such
        raw_fid = fidelity(lambdify_formula(raw, symbols), x, y[:, k], y_model[:, k]) if _finite(raw, symbols, x) \
            else UNDEFINED
        if fid is None or fid.r2_data < raw_fid.r2_data - 1e-6:
            log.info("refinement lowered R² (%s < %.6g); keeping the raw composition",
                     "nan" if fid is None else f"{fid.r2_data:.6g}", raw_fid.r2_data)
            expr, fid = raw, raw_fid
        yt = y_test[:, k]
        front = pareto_front([c.expr for c in tried] + [raw], expr, symbols, x_test, yt)
        r2_test = next(e.r2 for e in front if e.chosen)
        formulas.append(
            Formula(
                expr=expr, raw=raw, symbols=symbols, fidelity=fid, target=bundle.output_names[k],
                candidates=tuple(tried), r2_test=r2_test, r2_model_test=r2_score(yt, y_model_test[:, k]),
                n_test=int(x_test.shape[0]) if held_out else 0, front=front,
            )
        )
        if uses_direct_search(config, x, y):
            formulas[-1] = _compete(formulas[-1], direct, config.complexity_weight, x, y[:, 0], y_model[:, 0],
                                    x_test, yt)
        if formulas[-1].warning:
            log.warning("%s: %s", bundle.output_names[k], formulas[-1].warning)
    return sym, tuple(formulas)


def uses_direct_search(config: DiscoverConfig, x: np.ndarray, y: np.ndarray) -> bool:
    """Whether the direct search runs: ``config.direct_search``, the whole primitive
    library (a user who restricts ``library`` restricts the vocabulary of the formula),
    one output and at most two inputs."""
    return bool(config.direct_search and config.library is None and y.shape[1] == 1 and x.shape[1] <= 2)


def _compete(kan: Formula, direct: Sequence[DirectCandidate], weight: float, x: np.ndarray, y: np.ndarray,
             y_model: np.ndarray, x_test: np.ndarray, y_test: np.ndarray) -> Formula:
    """The KAN's formula or a direct-search candidate, whichever has the lowest
    :func:`~kansym.symbolic.direct.selection_score` (normalised RMS error on the held-out
    rows, complexity); the Pareto front lists both kinds.

    A verified KAN formula (no :attr:`Formula.warning`) is displaced by a formula that is
    not simpler only with a score lower by ``DIRECT_MARGIN`` (a 10**0.5-fold smaller
    error at equal complexity): on real
    measurements a few free exponents of the direct search fit the data's systematics
    slightly better than the KAN's snapped law (Kepler's ``M**0.5016`` against ``sqrt(M)``).
    Nor is it ever displaced by a candidate whose held-out R² is more than
    ``R2_GAP`` below the model's (the verification rule), whatever the weight."""
    def score(expr: sympy.Expr, r2: float) -> float:
        err = math.sqrt(max(1.0 - r2, 0.0)) if math.isfinite(r2) else math.inf
        return selection_score(err, expression_complexity(expr), weight)

    best, best_r2 = kan.expr, kan.r2_test
    kan_score, kan_complexity = score(kan.expr, kan.r2_test), expression_complexity(kan.expr)
    best_score = math.inf
    for c in direct:
        expr = c.expr.xreplace({s: t for s in c.expr.free_symbols for t in kan.symbols if s.name == t.name})
        if not _finite(expr, kan.symbols, x_test):
            continue
        r2 = r2_score(y_test, lambdify_formula(expr, kan.symbols)(x_test))
        if not kan.warning and r2 < kan.r2_model_test - R2_GAP:
            continue  # never trade a verified formula for one that fails verification (e.g. a heavy weight's constant)
        margin = 0.0 if kan.warning or expression_complexity(expr) < kan_complexity else DIRECT_MARGIN
        if score(expr, r2) < min(best_score, kan_score - margin) - 1e-12:
            best, best_r2, best_score = expr, r2, score(expr, r2)
    if best is kan.expr:
        return kan
    others = [e.expr for e in kan.front] + [kan.expr]
    others += [c.expr.xreplace({s: t for s in c.expr.free_symbols for t in kan.symbols if s.name == t.name})
               for c in direct]
    front = pareto_front(others, best, kan.symbols, x_test, y_test)
    log.info("direct search: %s (R² %.6g) replaces the KAN's %s", best, best_r2, kan.expr)
    return Formula(expr=best, raw=kan.raw, symbols=kan.symbols,
                   fidelity=fidelity(lambdify_formula(best, kan.symbols), x, y, y_model), target=kan.target,
                   candidates=kan.candidates, r2_test=next(e.r2 for e in front if e.chosen),
                   r2_model_test=kan.r2_model_test, n_test=kan.n_test, front=front)


UNDEFINED = Fidelity(-math.inf, -math.inf, math.inf, math.inf)  # a formula that is NaN/inf on some rows


def _finite(expr: sympy.Expr, symbols: Sequence[sympy.Symbol], x: np.ndarray) -> bool:
    with np.errstate(all="ignore"):
        return bool(np.all(np.isfinite(lambdify_formula(expr, symbols)(x))))


def split_holdout(n: int, holdout: float, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Seeded split of ``n`` rows into fitting and held-out indices (sorted).

    No rows are held out (``None``) when fewer than :data:`MIN_HOLDOUT_ROWS` would be,
    or when fewer than :data:`MIN_ROWS` would remain to fit.
    """
    n_test = int(round(n * holdout))
    if n_test < MIN_HOLDOUT_ROWS or n - n_test < MIN_ROWS:
        return np.arange(n), None
    perm = np.random.default_rng([seed, 7]).permutation(n)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])
