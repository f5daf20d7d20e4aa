"""The main job: from a table to a pruned KAN and a verified formula (docs/algorithms.md, "Architecture").

:func:`discover` chains the stages; each returns a new value and none mutates its input::

    rows -> input screening -> (direct search) -> train (L1 + entropy) -> prune(theta) -> fine-tune
         -> symbolify (per-edge primitives) -> Occam step -> compose -> refine -> verify

:func:`train` is the training stage alone with its resumable checkpoint (``kansym train``).

Under a time limit (``DiscoverConfig.time_limit``, ``kansym fit --time-limit``) one
:class:`~kansym.deadline.Deadline` goes to every stage; a stage it has expired in returns
what it has, the stages that cannot start are skipped, and the answer is the best verified
formula found by then (:attr:`Discovery.cut_short` names the cuts).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from kansym.deadline import Deadline, time_is_up
from kansym.discover.budget import stage_deadline
from kansym.discover.config import DiscoverConfig
from kansym.discover.magnitude import discovery_to_table, interrupted_to_table, working_scales
from kansym.discover.result import MIN_ROWS, Discovery, Formula, RunInterrupted, split_holdout
from kansym.discover.resume import ResumePoint, resume_record
from kansym.discover.oracle import structure_stage, wants_structure
from kansym.discover.screen import screened_discover
from kansym.discover.stages import finetune_stage, prune_stage, train_stage
from kansym.discover.structure import additivity, interaction_error
from kansym.discover.symbolify import symbolify_stage, wants_direct_search
from kansym.graph.build import to_networkx
from kansym.io.bundle import ModelBundle
from kansym.prune.scores import edge_scores
from kansym.symbolic.compose import input_symbols
from kansym.symbolic.direct import DirectCandidate, direct_search
from kansym.errors import DataError
from kansym.symbolic.pareto import expression_complexity
from kansym.train.memory import check_training_memory

__all__ = ["discover", "train", "check_run", "Rows"]

log = logging.getLogger("kansym")



@dataclass(frozen=True)
class Rows:
    """The rows of one discovery run, CSV units.

    Attributes
    ----------
    x, y : ndarray (N, d_in), (N, d_out)
        Fitting rows: symbolification, refinement and the fidelity use them all.
    x_test, y_test : ndarray or None
        Held-out rows (:func:`~kansym.discover.result.split_holdout`) on which the
        formula is verified against the model; None when the table is too small.
    x_train, y_train : ndarray
        The fitting rows the KAN trains on (at most ``max_train_rows`` of them, seeded).
    """

    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray | None
    y_test: np.ndarray | None
    x_train: np.ndarray
    y_train: np.ndarray

    @classmethod
    def split(cls, x: np.ndarray, y: np.ndarray, config: DiscoverConfig) -> "Rows":
        """Hold out ``config.holdout`` of the rows and cap the training rows (both seeded)."""
        fit_idx, test_idx = split_holdout(x.shape[0], config.holdout, config.seed)
        x_test = y_test = None
        if test_idx is not None:
            x_test, y_test = x[test_idx], y[test_idx]
            x, y = x[fit_idx], y[fit_idx]
        x_train, y_train = x, y
        if config.max_train_rows is not None and x.shape[0] > config.max_train_rows:
            sub = np.sort(np.random.default_rng([config.seed, 11]).choice(x.shape[0], config.max_train_rows,
                                                                          replace=False))
            x_train, y_train = x[sub], y[sub]
        return cls(x, y, x_test, y_test, x_train, y_train)

    def sizes(self, config: DiscoverConfig) -> str:
        """The rows each stage really uses, in words (for the log)."""
        n_fit, n_test = self.x.shape[0], 0 if self.x_test is None else self.x_test.shape[0]
        n_val = int(round(self.x_train.shape[0] * config.train.val_fraction))
        held = f"{n_fit} fitting + {n_test} held out (verification)" if n_test else f"{n_fit} fitting, none held out"
        return (f"rows: {n_fit + n_test} = {held}; the KAN trains on {self.x_train.shape[0]} of the fitting rows "
                f"({n_val} of them validate; max_train_rows {config.max_train_rows}); symbolic fits and refinement "
                f"use up to {n_fit}")


def check_run(n_rows: int, d_in: int, d_out: int, config: DiscoverConfig, *, holdout: bool = True) -> None:
    """Refuse at once what a run would refuse later: too few rows, or a training that would
    not fit in memory (:func:`kansym.train.memory.check_training_memory`).

    Parameters
    ----------
    n_rows, d_in, d_out : int
        The table's shape.
    holdout : bool
        Whether rows are held out as :func:`discover` does (False for :func:`train`).

    Raises
    ------
    DataError, ConfigError
    """
    if n_rows < MIN_ROWS:
        raise DataError(f"kansym needs at least {MIN_ROWS} rows to train and validate a KAN, got {n_rows}")
    test = split_holdout(n_rows, config.holdout, config.seed)[1] if holdout else None
    n_fit = n_rows - (0 if test is None else len(test))
    n_train = n_fit if config.max_train_rows is None else min(n_fit, config.max_train_rows)
    check_training_memory((d_in, *config.hidden, d_out), config.grid_size, config.spline_order, n_train)
    grid = _finetune_grid(config, n_train)
    if grid:
        check_training_memory((d_in, *config.hidden, d_out), grid, config.spline_order, n_train)


def train(
    x: np.ndarray,
    y: np.ndarray,
    input_names: Sequence[str],
    output_names: Sequence[str],
    config: DiscoverConfig | None = None,
    *,
    progress: bool | None = None,
    resume: ResumePoint | None = None,
) -> ModelBundle:
    """Train a sparsified KAN on all of ``x, y`` (CSV units) and bundle it (``kansym train``).

    Parameters
    ----------
    x : ndarray (N, d_in)
    y : ndarray (N, d_out)
    config : DiscoverConfig, optional
        ``hidden``, ``grid_size``, ``spline_order``, ``space``, ``train``, ``seed``,
        ``device`` and ``dtype`` are used.
    resume : ResumePoint, optional
        Continue this interrupted run on the same rows (``config`` should come from
        :func:`kansym.discover.resume.merge_resume_config`).

    Raises
    ------
    RunInterrupted
        On Ctrl-C; its ``bundle`` is the resumable checkpoint.
    DataError, ConfigError, FitError
    """
    config = config or DiscoverConfig()
    x, y = _as_2d(x, y)
    scales = working_scales(x, y, input_names, output_names, config.space)  # extreme magnitudes: powers of two
    if resume is not None:
        resume = replace(resume, bundle=scales.bundle_to_working(resume.bundle))
    try:
        bundle = _train(scales.x_to_working(x), scales.y_to_working(y), input_names, output_names, config, config,
                        progress, resume, "main")
    except RunInterrupted as stop:
        raise interrupted_to_table(stop, scales) from None
    return scales.bundle_to_table(bundle)


def _train(x, y, input_names, output_names, config: DiscoverConfig, outer: DiscoverConfig, progress,
           resume: ResumePoint | None, stage: str, label: str = "", deadline: Deadline | None = None) -> ModelBundle:
    """:func:`~kansym.discover.stages.train_stage` with ``config``'s options; on Ctrl-C the
    resumable checkpoint records ``stage`` and the whole run's config ``outer``."""
    tcfg = config.train.replace(seed=config.seed, device=config.device)
    try:
        return train_stage(
            x, y, input_names, output_names, hidden=config.hidden, grid_size=config.grid_size,
            spline_order=config.spline_order, space=config.space, train=tcfg, seed=config.seed, dtype=config.dtype,
            resume=resume, progress=progress, label=label, deadline=deadline,
        )
    except RunInterrupted as stop:
        if stop.bundle is None:
            raise
        record = resume_record(stop.state, outer, x, y, stage=stage)
        bundle = stop.bundle.replace_model(stop.bundle.model, resume=record)
        raise RunInterrupted(str(stop), bundle=bundle, state=stop.state, stage=stage) from None


def discover(
    x: np.ndarray,
    y: np.ndarray,
    input_names: Sequence[str],
    output_names: Sequence[str],
    config: DiscoverConfig | None = None,
    *,
    progress: bool | None = None,
    resume: ResumePoint | None = None,
    deadline: Deadline | None = None,
) -> Discovery:
    """Find a formula for ``y`` as a function of ``x``: train, prune, symbolify, verify.

    Parameters
    ----------
    x : ndarray (N, d_in), CSV units
    y : ndarray (N, d_out) or (N,), CSV units
        A share ``config.holdout`` of the rows is held out (seeded) to verify the
        formula against the model (:attr:`Formula.r2_test`); the KAN trains on at most
        ``config.max_train_rows`` of the others.
    input_names, output_names : sequence of str
        Column names; they become the formula's symbols.
    config : DiscoverConfig, optional
        With ``screen`` (the default) the inputs are first screened and the run uses only
        the columns a held-out permutation test finds used (:mod:`kansym.discover.screen`;
        the result's ``screening`` says which and why).
    progress : bool, optional
        Progress bars (default: only on a terminal).
    resume : ResumePoint, optional
        Continue the training stage of an interrupted run
        (:func:`kansym.discover.resume.load_resume`).
    deadline : kansym.deadline.Deadline, optional
        The run's time limit, if it started earlier than this call (the CLI starts it
        before reading the CSV); default: ``Deadline(config.time_limit)`` from now. The
        run stops soon after it (each stage at its next check, then the verification)
        with the best verified formula found by then; :attr:`Discovery.cut_short` says
        what was cut. A limit that does not bind leaves the result as without one.

    Returns
    -------
    Discovery
        In the table's units. A table with columns of extreme magnitude (largest value
        outside about 1e-6 to 1e10, or outside float32's range in log units) is searched
        with every column divided by an exact power of two and the results written back
        (:mod:`kansym.io.magnitude`, :mod:`kansym.discover.magnitude`).

    Raises
    ------
    RunInterrupted
        On Ctrl-C during training (its ``bundle`` is resumable) or elsewhere (``bundle`` None).
    DataError
        Bad data, or a law that float64 cannot evaluate in the table's units
        (:func:`kansym.discover.magnitude.check_representable`).
    ConfigError, FitError
    """
    config = config or DiscoverConfig()
    deadline = Deadline(config.time_limit) if deadline is None else deadline
    x, y = _as_2d(x, y)

    def run(cols: Sequence[int], point: ResumePoint | None) -> Discovery:
        names = [input_names[i] for i in cols]
        xc = x if len(cols) == x.shape[1] else x[:, list(cols)]  # all columns: the caller's very array
        scales = working_scales(xc, y, names, output_names, config.space)
        if point is not None:
            point = replace(point, bundle=scales.bundle_to_working(point.bundle))
        try:
            found, rows = _discover(scales.x_to_working(xc), scales.y_to_working(y), names, output_names, config,
                                    progress, point, deadline)
        except RunInterrupted as stop:
            raise interrupted_to_table(stop, scales) from None
        return discovery_to_table(found, scales, scales.x_to_table(rows.x), scales.y_to_table(rows.y))

    with _blas_threads(config.train.num_threads):
        found = screened_discover(run, x, y, input_names, config, resume)  # input screening (issue 19)
    found = replace(found, time_limit=deadline.seconds, cut_short=deadline.cuts)
    return _finish(found)


def _as_2d(x, y) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return x, (y[:, None] if y.ndim == 1 else y)


def _blas_threads(n: int | None):
    """Hold numpy/scipy's BLAS to ``n`` threads (None: unchanged) while the block runs.

    The symbolic stages solve many tiny least-squares problems; on a busy machine the
    BLAS worker threads of a 2-thread OpenBLAS spin for a core without speeding them up
    (measured on the hello world at load 5: symbolify + direct search 0.66 + 0.66-1.09 s of
    CPU with one thread against 0.96-1.13 + 1.29-1.73 s with two). Uses ``threadpoolctl``
    (a dependency; an environment without it keeps BLAS's own setting).
    """
    if n is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it BLAS keeps its own setting
        return contextlib.nullcontext()
    return threadpool_limits(limits=n, user_api="blas")


def _discover(x, y, input_names, output_names, config: DiscoverConfig, progress, resume,
              deadline: Deadline) -> tuple[Discovery, Rows]:
    """The run on (working-unit) rows: its result (before :func:`_finish`) and the split rows."""
    rows = Rows.split(x, y, config)
    log.info("%s", rows.sizes(config))
    t0 = time.perf_counter()
    direct, reference = None, float("nan")
    if wants_direct_search(config, x.shape[1], y.shape[1]):
        # the constants' noise floor: a smooth fit's held-out error (structure.interaction_error)
        noise = None if rows.x_test is None else interaction_error(rows.x_train, rows.y_train[:, 0], rows.x_test,
                                                                   rows.y_test[:, 0])
        direct = direct_search(rows.x, rows.y[:, 0], input_symbols(input_names),
                               complexity_weight=config.complexity_weight, noise=noise,
                               deadline=stage_deadline(deadline, "direct search"))
    elif wants_structure(config, x.shape[1], y.shape[1]):
        direct, reference = structure_stage(rows, input_names, output_names, config, progress,
                                            deadline=stage_deadline(deadline, "direct search"))
    direct_seconds = time.perf_counter() - t0
    runs = []
    # A resumed run continues the stage it was interrupted in; the stages before it are
    # deterministic and run again, so the result equals the uninterrupted one.
    stage = resume.stage if resume is not None else None
    additive, floor = additivity(rows.x_train, rows.y_train, config) if config.shortcut and config.hidden \
        else (False, 1.0)
    if additive:
        short = _run_once(rows, direct, input_names, output_names, config.replace(hidden=()), config, progress,
                          resume if stage == "shortcut" else None, "shortcut", deadline)
        f = short.formulas[0]
        if len(short.formulas) > 1 or (f.warning is None and f.r2_test >= floor):
            return _referenced(replace(short, seconds={**short.seconds, "direct": direct_seconds}), reference), rows
        if time_is_up(stage_deadline(deadline, "training")):  # it could not train
            deadline.cut("the hidden-layer KAN after the additive shortcut: skipped")
            return _referenced(replace(short, seconds={**short.seconds, "direct": direct_seconds}), reference), rows
        log.info("the additive KAN's formula has held-out R² %.6g < %.6g; training the hidden layer too",
                 f.r2_test, floor)
        runs.append(short)
    runs.append(_run_once(rows, direct, input_names, output_names, config, config, progress,
                          resume if stage != "shortcut" else None, "main", deadline))
    best = max(runs, key=lambda d: (round(_score(d.formulas[0]), 6), -expression_complexity(d.formulas[0].expr)))
    if len(runs) > 1:
        other = runs[0] if best is runs[1] else runs[1]
        log.info("kept the %s KAN's formula (held-out R² %.6g) over the %s KAN's (%.6g)",
                 list(best.trained.model.width), best.formulas[0].r2_test, list(other.trained.model.width),
                 other.formulas[0].r2_test)
    seconds = {k: sum(d.seconds.get(k, 0.0) for d in runs) for k in runs[-1].seconds}
    seconds["direct"] = direct_seconds
    return _referenced(replace(best, seconds=seconds, runs=len(runs)), reference), rows


def _referenced(found: Discovery, r2_reference: float) -> Discovery:
    """``found`` with the reference model's held-out R² on its formulas (their verification)."""
    return replace(found, formulas=tuple(replace(f, r2_reference_test=r2_reference) for f in found.formulas))


def _finish(result: Discovery) -> Discovery:
    """Log, once, which candidate won and why, and any warning of the answer."""
    for f in result.formulas:
        if f.reason:
            log.info("%s", f.reason)
        if f.warning:
            log.warning("%s: %s", f.target, f.warning)
    return result


def _score(f: Formula) -> float:
    return f.r2_test if np.isfinite(f.r2_test) else -np.inf


def _finetune_grid(config: DiscoverConfig, n_rows: int) -> int | None:
    """The polishing grid, never finer than about 20 rows per interval (small tables overfit)."""
    if not config.finetune_grid_size:
        return None
    return max(config.spline_order, min(config.finetune_grid_size, n_rows // 20))


def _run_once(rows: Rows, direct: Sequence[DirectCandidate] | None, input_names, output_names,
              config: DiscoverConfig, outer: DiscoverConfig, progress, resume: ResumePoint | None,
              stage: str, deadline: Deadline | None = None) -> Discovery:
    """One train -> prune -> fine-tune -> symbolify run on prepared rows.

    Each stage gets its share of ``deadline`` (:func:`kansym.discover.budget.stage_deadline`);
    once they are all up the run still does the least that gives a formula to verify: one
    training step, the pruning, per-edge linear fits and the verification.
    """
    seconds = {}
    t0 = time.perf_counter()
    label = "additive shortcut: no hidden layer" if stage == "shortcut" else ""
    trained = _train(rows.x_train, rows.y_train, input_names, output_names, config, outer, progress, resume, stage,
                     label, stage_deadline(deadline, "training"))
    seconds["train"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    pruned, result = prune_stage(trained, theta=config.theta)
    log.info("pruned %s -> %s (theta=%g)", list(trained.model.width), list(result.model.width), config.theta)
    pruned = finetune_stage(
        pruned, rows.x_train, rows.y_train, train=config.finetune.replace(seed=config.seed, device=config.device),
        grid_size=_finetune_grid(config, rows.x_train.shape[0]), dtype=config.dtype, progress=progress,
        deadline=stage_deadline(deadline, "fine-tuning"),
    )
    seconds["prune"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    sym, formulas = symbolify_stage(
        pruned, rows.x, rows.y, rows.x_test, rows.y_test, library=config.library,
        r2_threshold=config.r2_threshold, min_edge_r2=config.min_edge_r2, simplify=config.simplify_edges,
        direct=direct, complexity_weight=config.complexity_weight, deadline=deadline,
    )
    seconds["symbolify"] = time.perf_counter() - t0

    scores = edge_scores(pruned.model, pruned.model_inputs(rows.x))
    graph = to_networkx(pruned.model, input_names=pruned.input_names, output_names=pruned.output_names,
                        edge_scores=scores, edge_fits=dict(sym.edges))
    return Discovery(trained=trained, pruned=pruned, prune_result=result, symbolic=sym, formulas=formulas,
                     graph=graph, seconds=seconds)
