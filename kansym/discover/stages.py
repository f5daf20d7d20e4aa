"""The stages of discovery: train (L1 + entropy), prune, fine-tune, then symbolify -> Occam step -> compose ->
refine -> verify (docs/algorithms.md, "Architecture").

Each stage takes the options it uses as keyword arguments, returns a new
:class:`~kansym.io.bundle.ModelBundle` and leaves its input unchanged. With the run's
:class:`~kansym.deadline.Deadline`, training and fine-tuning stop at a step boundary once
it has expired (fine-tuning is skipped when it has expired before), and say so. :func:`kansym.discover.run.discover` chains them all.

The symbolic stages: symbolify -> Occam step -> compose -> refine -> verify.

:func:`symbolify_stage` turns a (pruned) model bundle into verified formulas
(docs/algorithms.md §5-§9): a primitive per edge
(:func:`kansym.symbolic.compose.symbolify`), simpler primitives where the data allow
(:func:`kansym.symbolic.occam.simplify_edges`), composition, refinement of the constants
(:func:`kansym.symbolic.refine.refine`), verification on held-out rows and the Pareto
front; with direct-search candidates given, the KAN's formula competes with them
(:func:`kansym.discover.choice.choose_formula`). :func:`symbolify_bundle` is the same for a checkpoint alone
(``kansym symbolify``): it decides about and runs the direct search itself.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np
import sympy
import torch

from kansym.config import COMPLEXITY_WEIGHT, MIN_EDGE_R2, R2_THRESHOLD, R2_TOLERANCE, THETA
from kansym.deadline import Deadline, time_is_up
from kansym.discover.choice import choose_formula, settle_partial
from kansym.discover.config import DiscoverConfig
from kansym.discover.progress import stage_deadline, Stages
from kansym.discover.result import MIN_ROWS, Formula
from kansym.discover.resume import ResumePoint
from kansym.discover.rows import check_representable, formula_to_table, symbolic_to_table, working_scales
from kansym.discover.structure_tests import choose_space, interaction_error
from kansym.errors import DataError
from kansym.io.bundle import ModelBundle
from kansym.io.transform import DataTransform
from kansym.nn.config import KANConfig
from kansym.nn.kan import KAN
from kansym.prune.prune import PruneResult, prune
from kansym.symbolic.compose import SymbolicKAN, input_symbols, lambdify_formula, symbolify, predictions
from kansym.symbolic.direct import ERROR_FLOOR, DirectCandidate, direct_search
from kansym.symbolic.occam import Candidate, simplify_edges
from kansym.symbolic.pareto import pareto_front
from kansym.symbolic.refine import exact_as_floats, refine
from kansym.symbolic.snap import round_constants
from kansym.symbolic.verify import r2_score, Fidelity, fidelity, nrmse_in
from kansym.train.config import TrainConfig
from kansym.train.fit import finetune, fit
from kansym.train.memory import check_training_memory
from kansym.train.state import FitInterrupted, FitState

__all__ = ['train_stage', 'prune_stage', 'finetune_stage', 'torch_dtype', 'symbolify_stage', 'symbolify_bundle',
    'wants_direct_search', 'occam_candidates', 'noise_floor']

log = logging.getLogger("kansym")


def torch_dtype(name: str) -> torch.dtype:
    """``"float64"`` or ``"float32"`` as a torch dtype."""
    return torch.float64 if name == "float64" else torch.float32


def train_stage(
    x: np.ndarray,
    y: np.ndarray,
    input_names: Sequence[str],
    output_names: Sequence[str],
    *,
    hidden: Sequence[int],
    grid_size: int,
    spline_order: int,
    space: str,
    train: TrainConfig,
    seed: int,
    dtype: str = "float64",
    resume: ResumePoint | None = None,
    progress: bool | None = None,
    label: str = "",
    deadline: Deadline | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> ModelBundle:
    """Train a sparsified KAN of width ``(d_in, *hidden, d_out)`` on CSV-unit rows and bundle it.

    Parameters
    ----------
    x : ndarray (N, d_in), CSV units
    y : ndarray (N, d_out), CSV units
    input_names, output_names : sequence of str
    hidden, grid_size, spline_order
        The KAN (:class:`~kansym.nn.config.KANConfig`; seeded by ``seed``).
    space : {"auto", "linear", "log"}
        Units it learns in (:func:`kansym.discover.structure_tests.choose_space`).
    train : TrainConfig
        The sparsifying fit (L1 + entropy, KAN paper eqs. 2.17-2.20).
    seed : int
    dtype : {"float64", "float32"}
    resume : ResumePoint, optional
        Continue this interrupted training on the same rows (its model, transform and
        space replace the options above).
    progress : bool, optional
    label : str
        Said in the log line (e.g. ``"additive shortcut"``).
    deadline : kansym.deadline.Deadline, optional
        The run's time limit: training stops at the first step boundary after it (one
        step at least) and the cut is recorded (``"training: 6 of 20 steps"``).
    on_step : callable ``(steps_done, steps)``, optional
        :func:`kansym.train.fit.fit`'s, e.g. :meth:`kansym.discover.progress.Stages.training`.

    Raises
    ------
    DataError
        Fewer than :data:`~kansym.discover.result.MIN_ROWS` rows, or a constant column.
    ConfigError
        The training would not fit in memory (:func:`kansym.train.memory.check_training_memory`).
    FitInterrupted
        On Ctrl-C, with ``bundle`` besides its ``state``: the model at the last completed step,
        bundled as a finished one is (the resume record is :class:`kansym.discover.run.Run`'s).
    FitError
        The loss diverged.
    """
    if x.shape[0] < MIN_ROWS:
        raise DataError(f"kansym needs at least {MIN_ROWS} rows to train and validate a KAN, got {x.shape[0]}")
    start = _starting_point(x, y, resume, hidden=hidden, grid_size=grid_size, spline_order=spline_order, space=space,
                            seed=seed, dtype=dtype)
    from_step = f" from step {start.state.step}" if start.state is not None else ""
    what = f" ({label})" if label else ""
    log.info("training a %s KAN%s in %s units on %d rows for %d steps%s", list(start.model.width), what, start.space,
             x.shape[0], train.steps, from_step)
    u = torch.as_tensor(start.transform.inputs(x), dtype=start.dtype)
    v = torch.as_tensor(start.transform.targets(y), dtype=start.dtype)
    try:
        result = fit(start.model, u, v, train, progress=progress, resume=start.state, deadline=deadline,
                     on_step=on_step)
    except FitInterrupted as stop:
        stop.bundle = start.bundle(stop.result, train, input_names, output_names, x, y, seed)
        raise
    if result.cut_short:
        run = f" ({label.split(':')[0]})" if label else ""
        deadline.cut(f"training{run}: {len(result.history.step)} of {train.steps} steps")
    return start.bundle(result, train, input_names, output_names, x, y, seed)


@dataclass(frozen=True)
class _Start:
    """Where a training starts: its units, data transform, model (in ``dtype``) and state (None: step 0)."""

    space: str
    transform: DataTransform
    model: KAN
    state: FitState | None
    dtype: torch.dtype

    def bundle(self, result, train: TrainConfig, input_names, output_names, x, y, seed: int) -> ModelBundle:
        """The fitted (or interrupted) ``result``'s model bundled with its space, config and history."""
        meta = {"space": self.space, "train_config": train.to_dict(), "history": result.history.to_dict()}
        return ModelBundle.create(result.model.cpu(), self.transform, input_names, output_names, x, y, meta=meta,
                                  seed=seed)


def _starting_point(x: np.ndarray, y: np.ndarray, resume: ResumePoint | None, *, hidden: Sequence[int],
                    grid_size: int, spline_order: int, space: str, seed: int, dtype: str) -> _Start:
    """The interrupted training ``resume`` (its model, transform and space), or a new seeded KAN on ``x, y``."""
    torch_type = torch_dtype(dtype)
    if resume is not None:
        resume.check_data(x, y)
        bundle = resume.bundle
        return _Start(bundle.meta.get("space", space), bundle.transform, bundle.model.to(torch_type), resume.state,
                      torch_type)
    check_training_memory((x.shape[1], *hidden, y.shape[1]), grid_size, spline_order, x.shape[0])
    space = choose_space(x, y, space)
    transform = DataTransform.fit(x, y, log_space=space == "log")
    kcfg = KANConfig(width=(x.shape[1], *hidden, y.shape[1]), grid_size=grid_size, spline_order=spline_order,
                     seed=seed)
    return _Start(space, transform, KAN(kcfg).to(torch_type), None, torch_type)


def prune_stage(bundle: ModelBundle, *, theta: float = THETA) -> tuple[ModelBundle, PruneResult]:
    """Prune a bundled model's hidden nodes on its calibration rows (KAN paper §2.5.1).

    The report saved in the new bundle's meta (``prune_report``) also holds the model's
    R² on the calibration rows before and after pruning (``r2_before``, ``r2_after``,
    CSV units), since removing a node whose incoming edges are weak also removes the
    (nearly constant) contribution of its outgoing edges.

    Raises
    ------
    ConfigError
        ``theta`` negative or not finite.
    """
    result = prune(bundle.model, bundle.model_inputs(), theta=theta)
    pruned = bundle.replace_model(result.model)
    report = result.report.to_dict()
    report["r2_before"] = float(r2_score(bundle.y_cal.ravel(), bundle.predict(bundle.x_cal).ravel()))
    report["r2_after"] = float(r2_score(bundle.y_cal.ravel(), pruned.predict(bundle.x_cal).ravel()))
    return bundle.replace_model(result.model, prune_report=report), result


def finetune_stage(
    bundle: ModelBundle,
    x: np.ndarray,
    y: np.ndarray,
    *,
    train: TrainConfig,
    grid_size: int | None,
    dtype: str = "float64",
    progress: bool | None = None,
    deadline: Deadline | None = None,
) -> ModelBundle:
    """Polish a (pruned) bundled model on CSV-unit rows without sparsity, on a grid of
    ``grid_size`` intervals (KAN paper §2.4, grid extension; None keeps the grid).

    With an expired ``deadline`` (:class:`~kansym.deadline.Deadline`) the bundle is
    returned as it is (grid included) and the skip recorded; one that expires during
    the polish stops it at a step boundary.

    Raises
    ------
    FitError
        The loss diverged.
    """
    if time_is_up(deadline):
        deadline.cut("fine-tuning: skipped")
        return bundle
    torch_type = torch_dtype(dtype)
    cfg = bundle.model.config
    check_training_memory(bundle.model.width, grid_size or cfg.grid_size, cfg.spline_order, x.shape[0])
    u = torch.as_tensor(bundle.transform.inputs(x), dtype=torch_type)
    v = torch.as_tensor(bundle.transform.targets(y), dtype=torch_type)
    ft = finetune(bundle.model, u, v, grid_size=grid_size, config=train, progress=progress, deadline=deadline)
    if ft.cut_short:
        deadline.cut(f"fine-tuning: {len(ft.history.step)} of {train.steps} steps")
    return bundle.replace_model(ft.model.cpu(), finetune_history=ft.history.to_dict())


UNDEFINED = Fidelity(-math.inf, -math.inf, math.inf, math.inf)  # a formula that is NaN/inf on some rows


def wants_direct_search(config: DiscoverConfig, d_in: int, d_out: int) -> bool:
    """Whether the direct search runs: ``config.direct_search``, the whole primitive
    library (a user who restricts ``library`` restricts the vocabulary of the formula),
    one output and at most two inputs."""
    return bool(config.direct_search and config.library is None and d_out == 1 and d_in <= 2)


def symbolify_stage(
    bundle: ModelBundle,
    x: np.ndarray,
    y: np.ndarray,
    x_test: np.ndarray | None = None,
    y_test: np.ndarray | None = None,
    *,
    library: Sequence[str] | None = None,
    r2_threshold: float = R2_THRESHOLD,
    min_edge_r2: float = MIN_EDGE_R2,
    simplify: bool = True,
    direct: Sequence[DirectCandidate] | None = None,
    complexity_weight: float = COMPLEXITY_WEIGHT,
    deadline: Deadline | None = None,
    stages: Stages | None = None,
) -> tuple[SymbolicKAN, tuple[Formula, ...]]:
    """Symbolify a bundled model, compose, refine and verify its formulas.

    Parameters
    ----------
    bundle : ModelBundle
    x, y : ndarray (N, d_in), (N, d_out)
        CSV-unit fitting rows (symbolification, the Occam step, the refit, the fidelity).
    x_test, y_test : ndarray, optional
        Held-out CSV-unit rows on which the formula and the model are compared
        (:attr:`Formula.r2_test`, :attr:`Formula.warning`); default: ``x, y``.
    library : sequence of str, optional
        Primitive names an edge may take (None: all).
    r2_threshold : float
        Per-edge R² a primitive must reach.
    min_edge_r2 : float
        An edge whose best primitive stays below this R² is kept numeric and flagged.
    simplify : bool
        Run the Occam step (single output only).
    direct : sequence of DirectCandidate, optional
        Candidates of :func:`kansym.symbolic.direct.direct_search` on ``x, y`` (single
        output): they compete with the KAN's formula (:func:`~kansym.discover.choice.choose_formula`); None: no
        competition.
    complexity_weight : float
        ``w`` of :func:`~kansym.symbolic.direct.selection_score`.
    deadline : kansym.deadline.Deadline, optional
        The run's time limit. The per-edge fits, the Occam step and the refinement each
        stop early once their share of it is up (:func:`kansym.discover.progress.stage_deadline`;
        see theirs), and a step whose share is up before it starts is skipped (the Occam
        step: the per-edge choices stand; the refinement: the Occam step's last accepted
        formula stands); each cut is recorded. The verification and the choice against
        the direct search always run: the answer is the best verified formula found so far.
    stages : kansym.discover.progress.Stages, optional
        Told as each step starts (its line on a terminal; the stage of an interrupt).

    Returns
    -------
    (SymbolicKAN, tuple of Formula)
        One formula per output.
    """
    held_out = x_test is not None and y_test is not None
    if not held_out:
        x_test, y_test = x, y
    symbols = tuple(input_symbols(bundle.input_names, positive=bundle.transform.log_space))
    # an exact direct formula makes the KAN's Occam step and refit (minutes on some 2-input laws) moot
    exact_direct = bool(direct) and min(c.error for c in direct) <= ERROR_FLOOR
    occam = len(bundle.output_names) == 1 and simplify and not exact_direct
    fits_by, occam_by, refine_by = (stage_deadline(deadline, s) for s in ("per-edge fits", "Occam step", "refinement"))
    stages = stages or Stages(show=False)
    sym, tried = _edge_primitives(bundle, x, y, symbols, stages, occam=occam, fits_by=fits_by, occam_by=occam_by,
                                  library=library, r2_threshold=r2_threshold, min_edge_r2=min_edge_r2)
    outputs = _Outputs(bundle=bundle, x=x, y=y, x_test=x_test, y_test=y_test, held_out=held_out,
                       y_model=bundle.predict(x), y_model_test=bundle.predict(x_test), symbols=symbols, tried=tried,
                       direct=direct, exact_direct=exact_direct, complexity_weight=complexity_weight,
                       deadline=deadline, refine_by=refine_by, stages=stages)
    formulas = [_output_formula(outputs, k, raw) for k, raw in enumerate(sym.expressions(symbols))]
    return sym, tuple(formulas)


def _edge_primitives(bundle: ModelBundle, x: np.ndarray, y: np.ndarray, symbols: tuple, stages: Stages, *,
                     occam: bool, fits_by: Deadline | None, occam_by: Deadline | None, library: Sequence[str] | None,
                     r2_threshold: float, min_edge_r2: float) -> tuple[SymbolicKAN, list]:
    """A primitive for each edge, then (``occam``) simpler ones where the data allow; the Occam step's trials."""
    tried: list = []
    width = bundle.model.width
    stages.start("per-edge fits", f"a primitive for each of the {sum(a * b for a, b in zip(width, width[1:]))} edges")
    sym, candidates = symbolify(
        bundle.model, bundle.model_inputs(x).double(), bundle.transform, bundle.input_names, bundle.output_names,
        library=library, r2_threshold=r2_threshold, min_r2=min_edge_r2,
        exhaustive=occam and not time_is_up(occam_by),  # the alternatives are refined only for the Occam step
        deadline=fits_by,
    )
    if occam and time_is_up(occam_by):
        occam_by.cut("Occam step: skipped")
    elif occam:
        stages.start("Occam step", "simpler primitives where the data allow (BIC)")
        sym, tried = simplify_edges(sym, candidates, symbols, x, y[:, 0], deadline=occam_by)
    return sym, tried


@dataclass(frozen=True)
class _Outputs:
    """What each output's formula is refined, verified and chosen on: the fitting rows, the held-out ones (the
    fitting rows when none are held out), the model's predictions on both, the Occam step's trials, the direct
    search's candidates and the run's deadline (``refine_by``: the refinement's share)."""

    bundle: ModelBundle
    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    held_out: bool
    y_model: np.ndarray
    y_model_test: np.ndarray
    symbols: tuple
    tried: list
    direct: Sequence[DirectCandidate] | None
    exact_direct: bool
    complexity_weight: float
    deadline: Deadline | None
    refine_by: Deadline | None
    stages: Stages

    @property
    def loss_space(self) -> str:
        """The units of the refits: ``"log"`` for a model that learned in log space, else ``"linear"``."""
        return "log" if self.bundle.transform.log_space else "linear"


def _output_formula(out: _Outputs, k: int, raw: sympy.Expr) -> Formula:
    """Output ``k``'s formula from the KAN's composition ``raw``: refined, verified, set against the direct search."""
    loss_space = out.loss_space
    # the noise floor of the constants' snapping: the model's or a smooth fit's held-out error
    noise = noise_floor(out.y_test[:, k], out.y_model_test[:, k], loss_space,
                        smooth=(out.x, out.y[:, k], out.x_test, out.y_test[:, k]) if out.held_out else None)
    expr = _refined_composition(out, k, raw, noise)
    expr, fid = _verified(out, k, raw, expr, noise)
    yt = out.y_test[:, k]
    front = pareto_front([c.expr for c in out.tried] + [raw], expr, out.symbols, out.x_test, yt)
    formula = Formula(
        expr=expr, raw=raw, symbols=out.symbols, fidelity=fid, target=out.bundle.output_names[k],
        candidates=tuple(out.tried), r2_test=next(e.r2 for e in front if e.chosen),
        r2_model_test=r2_score(yt, out.y_model_test[:, k]), n_test=int(out.x_test.shape[0]) if out.held_out else 0,
        front=front,
    )
    if out.direct is not None and len(out.bundle.output_names) == 1:
        formula = choose_formula(formula, out.direct, out.complexity_weight, out.x, out.y[:, 0], out.y_model[:, 0],
                                 out.x_test, yt, log_space=loss_space == "log")
    # numeric edges make a partial formula, never the answer (kansym.discover.choice)
    return settle_partial(formula, out.direct, out.x, out.y[:, k], out.y_model[:, k], out.x_test, yt,
                          loss_space=loss_space, noise=noise, deadline=out.deadline)


def _refined_composition(out: _Outputs, k: int, raw: sympy.Expr, noise: float | None) -> sympy.Expr:
    """Output ``k``'s composition with its constants refit and snapped (as it is beside an exact direct formula)."""
    if out.exact_direct:  # with an exact direct formula the KAN's composition is only shown, not refined
        return raw
    if time_is_up(out.refine_by):  # the best so far: the Occam step's last accepted formula (constants refit)
        out.refine_by.cut("refinement: skipped")
        return next((c.expr for c in reversed(out.tried) if c.accepted), raw)
    out.stages.start("refinement", f"the constants of {out.bundle.output_names[k]}'s formula refit and snapped")
    return refine(raw, out.symbols, out.x, out.y[:, k], loss_space=out.loss_space, noise=noise,
                  deadline=out.refine_by)


def _verified(out: _Outputs, k: int, raw: sympy.Expr, expr: sympy.Expr,
              noise: float | None) -> tuple[sympy.Expr, Fidelity]:
    """``expr`` and its fidelity on output ``k``'s fitting rows, or the raw composition where ``expr`` scores lower."""
    x, y, y_model, symbols, loss_space = out.x, out.y[:, k], out.y_model[:, k], out.symbols, out.loss_space
    out.stages.start("verification",
                     f"{out.bundle.output_names[k]}'s formula against the model and the other candidates")
    fid = fidelity(lambdify_formula(expr, symbols), x, y, y_model) if _finite(expr, symbols, x) else None
    # a composition undefined on some rows (an edge's fit left its domain) is scored as such
    raw_fid = fidelity(lambdify_formula(raw, symbols), x, y, y_model) if _finite(raw, symbols, x) else UNDEFINED
    if fid is None or fid.r2_data < raw_fid.r2_data - R2_TOLERANCE:
        log.info("refinement lowered R² (%s < %.6g); keeping the raw composition",
                 "nan" if fid is None else f"{fid.r2_data:.6g}", raw_fid.r2_data)
        expr, fid = _rounded_raw(raw, raw_fid, symbols, x, y, y_model, loss_space, noise, out.deadline)
    if loss_space == "log" and fid is not None and expr.has(sympy.Float) and not time_is_up(out.refine_by):
        expr, fid = _refined_in_linear_space(expr, fid, symbols, x, y, y_model, out.refine_by,
                                             noise_floor(out.y_test[:, k], out.y_model_test[:, k], "linear"))
    return expr, fid


def symbolify_bundle(
    bundle: ModelBundle,
    config: DiscoverConfig,
    x: np.ndarray | None = None,
    y: np.ndarray | None = None,
) -> tuple[SymbolicKAN, tuple[Formula, ...]]:
    """:func:`symbolify_stage` on a checkpoint alone (``kansym symbolify``).

    Uses ``config``'s ``library``, ``r2_threshold``, ``min_edge_r2``,
    ``simplify_edges``, ``direct_search`` and ``complexity_weight``; the rows are
    ``x, y`` (CSV units) or the bundle's calibration rows, none held out. The direct
    search runs when :func:`wants_direct_search` says so. Columns of extreme magnitude are
    worked on in exact power-of-two units, as in :func:`kansym.discover.run.discover`.

    Raises
    ------
    DataError
        A law that float64 cannot evaluate in the table's units
        (:func:`kansym.discover.rows.check_representable`).
    """
    x = bundle.x_cal if x is None else x
    y = bundle.y_cal if y is None else y
    scales = working_scales(x, y, bundle.input_names, bundle.output_names,
                            "log" if bundle.transform.log_space else "linear")
    xw, yw = scales.x_to_working(x), scales.y_to_working(y)
    direct = None
    if wants_direct_search(config, x.shape[1], y.shape[1]):
        symbols = input_symbols(bundle.input_names, positive=bundle.transform.log_space)
        direct = direct_search(xw, yw[:, 0], symbols, complexity_weight=config.complexity_weight)
    sym, formulas = symbolify_stage(
        scales.bundle_to_working(bundle), xw, yw, library=config.library, r2_threshold=config.r2_threshold,
        min_edge_r2=config.min_edge_r2, simplify=config.simplify_edges, direct=direct,
        complexity_weight=config.complexity_weight,
    )
    # the residual test on the rows, in the working units (none held out: the odd rows
    # predicted from the even ones)
    formulas = tuple(replace(f, residual=f.residual_test(xw, yw[:, k])) for k, f in enumerate(formulas))
    formulas = tuple(formula_to_table(f, scales, k) for k, f in enumerate(formulas))
    for k, f in enumerate(formulas):
        check_representable(f, x, y[:, k], scales)
    sym = symbolic_to_table(sym, scales)
    for f in formulas:
        if f.reason:
            log.info("%s", f.reason)
        if f.warning:
            log.warning("%s: %s", f.target, f.warning)
    return sym, formulas


def occam_candidates(bundle: ModelBundle, *, library: Sequence[str] | None = None, r2_threshold: float = R2_THRESHOLD,
                     max_evaluations: int = 30_000) -> list[Candidate]:
    """The formulas the Occam step tries on a bundled (pruned) single-output model.

    Runs :func:`kansym.symbolic.compose.symbolify` and
    :func:`kansym.symbolic.occam.simplify_edges` on the calibration rows, with a
    smaller work budget than the pipeline's: no new trial starts after
    ``max_evaluations`` formula evaluations (a few seconds; a count, not a clock, so the
    front is the same on a busy machine). Kepler's whole search (7,000) fits in it; that
    of a 3-input law with a hidden layer (about 50,000) is cut about halfway.

    Returns
    -------
    list of Candidate
        Every formula tried, with its complexity, normalised error and whether the
        search moved to it (the last accepted one is the choice), in the table's units
        (tables of extreme magnitude are tried in exact power-of-two units, as in
        :func:`symbolify_bundle`).
    """
    scales = working_scales(bundle.x_cal, bundle.y_cal, bundle.input_names, bundle.output_names,
                            "log" if bundle.transform.log_space else "linear")
    bundle = scales.bundle_to_working(bundle)
    sym, candidates = symbolify(bundle.model, bundle.model_inputs().double(), bundle.transform, bundle.input_names,
                                bundle.output_names, library=library, r2_threshold=r2_threshold)
    symbols = input_symbols(bundle.input_names, positive=bundle.transform.log_space)
    _, tried = simplify_edges(sym, candidates, symbols, bundle.x_cal, bundle.y_cal[:, 0],
                              max_evaluations=max_evaluations)
    return [replace(c, expr=scales.expr_to_table(c.expr, symbols)) for c in tried]


def _rounded_raw(raw: sympy.Expr, raw_fid: Fidelity, symbols, x: np.ndarray, y: np.ndarray, y_model: np.ndarray,
                 loss_space: str, noise: float | None, deadline: Deadline | None = None) -> tuple[sympy.Expr, Fidelity]:
    """The raw composition with its floats rounded to the precision of their standard errors
    (:func:`kansym.symbolic.snap.round_constants`, which stops with ``deadline``), when that
    keeps its R² within :data:`~kansym.config.R2_TOLERANCE`; else as it is."""
    if not np.isfinite(raw_fid.r2_data):
        return raw, raw_fid
    try:
        rounded = round_constants(raw, symbols, x, y, loss_space=loss_space, noise=noise, deadline=deadline)
    except (ValueError, ArithmeticError, TypeError):
        return raw, raw_fid
    if not _finite(rounded, symbols, x):
        return raw, raw_fid
    fid = fidelity(lambdify_formula(rounded, symbols), x, y, y_model)
    return (rounded, fid) if fid.r2_data >= raw_fid.r2_data - R2_TOLERANCE else (raw, raw_fid)


def _refined_in_linear_space(expr: sympy.Expr, fid: Fidelity, symbols, x: np.ndarray, y: np.ndarray,
                             y_model: np.ndarray, deadline: Deadline | None,
                             noise: float | None) -> tuple[sympy.Expr, Fidelity]:
    """A formula refined in log space, refined again from its floats in linear space: kept when
    it has fewer floats and an R² on ``x, y`` not lower (to :data:`~kansym.config.R2_TOLERANCE`); else ``expr`` as it is.

    Noise added to ``y`` (SRBench's model) is not additive in ``log y``: it grows where ``y``
    is small and biases the mean of the logs there, so a refit of the logs moves constants off
    their values and the snapping rule, which assumes one noise level, keeps them
    (``exp(-t^2/2)/sqrt(2 pi)`` with 1 % noise: ``0.3919 exp(-0.4861 t^2.0268)``)."""
    try:
        linear = refine(exact_as_floats(expr), symbols, x, y, loss_space="linear", noise=noise, deadline=deadline)
    except (ValueError, ArithmeticError, TypeError):
        return expr, fid
    if len(linear.atoms(sympy.Float)) >= len(expr.atoms(sympy.Float)) or not _finite(linear, symbols, x):
        return expr, fid
    # a float traded for a long rational is no law's constant (Kepler: 281380 -> 34844827/(4 pi^3))
    if any(max(abs(int(r.p)), int(r.q)) >= 10 ** 4 for r in linear.atoms(sympy.Rational) - expr.atoms(sympy.Rational)):
        return expr, fid
    lin_fid = fidelity(lambdify_formula(linear, symbols), x, y, y_model)
    if lin_fid.r2_data < fid.r2_data - R2_TOLERANCE:
        return expr, fid
    log.info("refinement in linear space: %s (R² %.6g) for %s (R² %.6g)", linear, lin_fid.r2_data, expr, fid.r2_data)
    return linear, lin_fid


def noise_floor(y: np.ndarray, y_model: np.ndarray, loss_space: str, smooth: tuple | None = None) -> float | None:
    """The noise floor :func:`kansym.symbolic.refine.refine` holds a formula's constants to: the
    smaller of the model's normalised RMS error on ``y`` (held-out rows) and, given ``smooth =
    (x, y, x_test, y_test)``, that of a smooth polynomial fit on ``x, y`` judged on the held-out
    rows (:func:`kansym.discover.structure_tests.interaction_error`: a model the KAN did not learn well
    says nothing about the noise), in the loss space of the refit (of the logs in log space). None
    when neither can be computed (a non-positive value in log space)."""
    log_space = loss_space == "log"
    out = []
    with np.errstate(all="ignore"):
        if not log_space or (np.all(y > 0) and np.all(y_model > 0)):
            out.append(nrmse_in(y, y_model, log_space=log_space))
        if smooth is not None:
            xs, ys, xt, yt = smooth
            if log_space and np.all(xs > 0) and np.all(xt > 0) and np.all(ys > 0) and np.all(yt > 0):
                out.append(interaction_error(np.log(xs), np.log(ys), np.log(xt), np.log(yt)))
            elif not log_space:
                out.append(interaction_error(xs, ys, xt, yt))
    out = [float(e) for e in out if math.isfinite(e)]
    return min(out) if out else None


def _finite(expr: sympy.Expr, symbols: Sequence[sympy.Symbol], x: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(predictions(expr, symbols, x))))
