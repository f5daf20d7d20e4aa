"""What discovery produces: :class:`Formula`, :class:`Discovery`, :class:`RunInterrupted`,
and the held-out split every stage agrees on (:func:`split_holdout`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kansym.discover.config import MIN_HOLDOUT_ROWS, MIN_ROWS  # settings of a run, defined with its config
from kansym.io.bundle import ModelBundle
from kansym.prune.prune import PruneResult
from kansym.symbolic.compose import SymbolicKAN, lambdify_formula
from kansym.symbolic.constants import fitted_exponents, near_miss_exponents
from kansym.symbolic.fit import edge_labels
from kansym.symbolic.verify import RESIDUAL_ALPHA, ResidualTest, formula_residual_test, Fidelity

__all__ = ["Formula", "ClosedForm", "Discovery", "RunInterrupted", "split_holdout", "MIN_ROWS", "MIN_HOLDOUT_ROWS",
           "R2_GAP"]

R2_GAP = 0.01  # a formula this much below the model's held-out R² is flagged
REFERENCE_FACTOR = 10.0  # a formula with this many times the reference model's 1 - R² is flagged ...
REFERENCE_FLOOR = 1e-4  # ... when its 1 - R² is above this


@dataclass(frozen=True)
class ClosedForm:
    """The best formula without numeric edges found beside a partial one (:attr:`Formula.closed_form`).

    Attributes
    ----------
    expr : sympy.Expr
        A closed form (no opaque ``phi_l_i_j`` function), its constants refined.
    r2_test : float
        Its R² on the rows the partial formula is verified on (held out when there are some).
    complexity : int
        :func:`kansym.symbolic.pareto.expression_complexity`.
    origin : str
        ``"kan"`` (a formula the Occam step tried) or ``"direct search"``.
    """

    expr: sympy.Expr
    r2_test: float
    complexity: int
    origin: str = "kan"

    def to_dict(self) -> dict:
        return {"sympy": str(self.expr), "r2_test": self.r2_test, "complexity": self.complexity, "origin": self.origin}


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
    origin : str
        What produced it: ``"kan"`` (the pruned KAN's composition, refined), ``"direct
        search"``, ``"units"`` (a constant times the monomial of the dimensional
        analysis) or ``"pysr"``.
    reason : str
        Why it was chosen over the other kinds ("" when nothing competed).
    r2_reference_test : float
        Held-out R² of the reference model: the KAN of the run's width trained without
        sparsification (the oracle of :mod:`kansym.discover.structure_search`); NaN when none was
        trained. A formula that falls short of it misses structure the data hold, even when
        the pruned model it came from falls short too.
    structure : dict or None
        For ``origin="structure"``: the decomposition of the law into sub-laws
        (:class:`kansym.discover.structure_search.Split`, as a dict); None otherwise.
    closed_form : ClosedForm or None
        For a partial formula (:attr:`partial`), the best closed form found beside it (by
        held-out R², then complexity), which did not pass the verification (a verified one
        would have replaced the partial formula); None otherwise or when none was found.
    residual : kansym.symbolic.verify.ResidualTest
        Whether the held-out rows' residuals are predicted from those of their nearest
        fitting rows better than noise allows (:func:`kansym.symbolic.verify.residual_test`):
        its R² (:attr:`r2_residual`: about 0 or below when the formula's error is noise, near 1
        when it is a function of the inputs) and p-value (:attr:`p_residual`). No verdict (NaN)
        for an exact fit to float rounding, too few rows, a partial formula.
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
    origin: str = "kan"
    reason: str = ""
    structure: dict | None = None
    r2_reference_test: float = float("nan")
    closed_form: ClosedForm | None = None
    residual: ResidualTest = ResidualTest()

    @property
    def r2_residual(self) -> float:
        """The residual test's R² (:attr:`residual`); NaN: no verdict."""
        return self.residual.r2

    @property
    def p_residual(self) -> float:
        """The residual test's p-value (:attr:`residual`); NaN: no verdict."""
        return self.residual.p

    @property
    def numeric_edges(self) -> tuple[str, ...]:
        """Names of the edges kept numeric (opaque ``phi_l_i_j`` functions in :attr:`expr`)."""
        return tuple(sorted({str(f.func) for f in self.expr.atoms(AppliedUndef)}))

    @property
    def partial(self) -> bool:
        """Whether :attr:`expr` keeps numeric edges: a partial result, never "the formula"
        (no closed form was verified; :attr:`closed_form` is the best one found)."""
        return bool(self.numeric_edges)

    @property
    def status(self) -> str:
        """``"verified"`` (no :attr:`warning`), ``"unverified"`` (a closed form with a warning)
        or ``"partial"`` (numeric edges)."""
        return "partial" if self.partial else ("unverified" if self.warning else "verified")

    @property
    def warning(self) -> str | None:
        """Why this formula must not be taken as the answer as it stands, or None.

        Set when its R² on the held-out rows (the fitting rows if none were held out)
        is below the model's by more than ``R2_GAP`` = 0.01 or not above 0 (no better than
        the target's mean, whatever the model's); when its ``1 - R²`` there is over
        ``REFERENCE_FACTOR`` = 10 times that of the reference model
        (:attr:`r2_reference_test`) and above ``REFERENCE_FLOOR`` = 1e-4 (a lack-of-fit test:
        with noise both approach the noise floor, without it an invented formula stays far
        above the reference); when the residual test (:attr:`residual`) finds the held-out
        residuals predicted from their neighbours' better than noise allows, at p below
        ``RESIDUAL_ALPHA`` = 0.01 (the error is a function of the inputs, not noise: a close
        approximation, which no R² threshold that noisy tables also pass can catch; a formula
        that is the law is flagged so at most once in a hundred tables); when an exponent stays a
        float within 2 % of a simple rational it is not (``u**0.9997``:
        :func:`kansym.symbolic.constants.near_miss_exponents`), or any other exponent stays a float
        no simple rational (:func:`kansym.symbolic.constants.fitted_exponents`: the refinement
        snaps every exponent the data allow); or when some edge fitted no
        primitive and stayed numeric (:attr:`partial`).
        """
        notes = []
        if not np.isfinite(self.r2_test) or self.r2_test < self.r2_model_test - R2_GAP:
            notes.append(f"the formula's R² ({self.r2_test:.4f}) is below the model's ({self.r2_model_test:.4f}) "
                         f"by more than {R2_GAP}: it misses part of what the model learned")
        elif 1.0 - self.r2_test > max(REFERENCE_FACTOR * (1.0 - self.r2_reference_test), REFERENCE_FLOOR):
            notes.append(f"the formula's R² ({self.r2_test:.6f}) leaves over {REFERENCE_FACTOR:g} times the "
                         f"unexplained variance of a KAN trained without sparsification ({self.r2_reference_test:.6f}): "
                         "the data hold structure it misses")
        elif self.r2_test <= 0:  # the model fails too (e.g. one outlying row dominates every squared error)
            notes.append(f"the formula's R² ({self.r2_test:.4f}) is not above 0: it explains nothing of the target's "
                         "variation")
        if not notes and self.residual.rejects:
            notes.append(f"its residuals are a function of the inputs, not noise (each row's is predicted "
                         f"from its nearest other rows' with R² {self.r2_residual:.2f}, which noise reaches with "
                         f"p = {self.p_residual:.2g} < {RESIDUAL_ALPHA}): the formula approximates the law without "
                         "being it")
        near = near_miss_exponents(self.expr)
        if not notes and near:
            shown = ", ".join(f"{float(v):.6g} (near {r})" for v, r in near)
            notes.append(f"its exponents {shown} are off the simple values they are near: the data reject those "
                         "values (or the refinement was cut short), the mark of a law of another form there")
        fitted = [] if notes or near else fitted_exponents(self.expr)
        if fitted:
            notes.append(f"its exponents {', '.join(f'{float(v):.6g}' for v in fitted)} are fitted floats, no simple "
                         "value the data allow: an empirical fit, not a law's powers (or a law of another form)")
        if self.numeric_edges:
            notes.append(f"edges {edge_labels(self.numeric_edges)} fit no primitive and stay numeric: a partial "
                         "formula, no closed form was verified")
        return "; ".join(notes) or None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Evaluate on CSV inputs ``(N, d_in)`` -> ``(N,)``."""
        return lambdify_formula(self.expr, self.symbols)(x)

    def residual_test(self, x_fit: np.ndarray, y_fit: np.ndarray, x_test: np.ndarray | None = None,
                      y_test: np.ndarray | None = None) -> ResidualTest:
        """The residual test on these rows (:func:`kansym.symbolic.verify.formula_residual_test`);
        no verdict for a partial formula."""
        return ResidualTest() if self.partial else formula_residual_test(self, x_fit, y_fit, x_test, y_test)


@dataclass(frozen=True)
class Discovery:
    """Everything :func:`discover` produced.

    ``seconds`` sums the stages over all runs; ``runs`` is 1, or 2 when the additive
    shortcut was tried before the hidden-layer KAN (:class:`DiscoverConfig` ``shortcut``).
    ``screening`` is the :class:`kansym.discover.screen.Screening` of the inputs (None when
    it was off): the models and formulas use the kept columns only.
    ``time_limit`` is the run's limit in seconds (None: none) and ``cut_short`` what it cut
    short or skipped (:attr:`kansym.deadline.Deadline.cuts`; empty when it did not bind,
    and then the run is the same as without a limit).
    """

    trained: ModelBundle
    pruned: ModelBundle
    prune_result: PruneResult
    symbolic: SymbolicKAN
    formulas: tuple[Formula, ...]
    graph: nx.DiGraph
    seconds: dict
    runs: int = 1
    screening: Any = None
    time_limit: float | None = None
    cut_short: tuple[str, ...] = ()


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM turned into one) during a discovery or training run.

    A ``KeyboardInterrupt``, so code that does not know it still stops as on any Ctrl-C.
    Raised in one place, :meth:`kansym.discover.run.Run.interrupted`.

    Attributes
    ----------
    bundle : ModelBundle or None
        A resumable checkpoint (its ``meta["resume"]`` is the record of
        :mod:`kansym.discover.resume`): the model of the last completed step of the
        interrupted training, or the trained model when a stage after the training was
        interrupted; None when the run was stopped before the KAN's training and nothing
        can be resumed.
    stage : str
        The stage that was running: the training (``"shortcut"`` or ``"main"``) or the
        :attr:`kansym.discover.progress.Stages.current` one (``"per-edge fits"``,
        ``"direct search"``, ...).
    """

    def __init__(self, message: str, *, bundle: ModelBundle | None = None, stage: str = "main") -> None:
        super().__init__(message)
        self.bundle = bundle
        self.stage = stage


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
