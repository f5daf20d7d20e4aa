"""The main job: from a table to a pruned KAN and a verified formula (docs/algorithms.md, "Architecture").

:func:`discover` chains the stages; each returns a new value and none mutates its input::

    rows -> input screening -> (direct search) -> train (L1 + entropy) -> prune(theta) -> fine-tune
         -> symbolify (per-edge primitives) -> Occam step -> compose -> refine -> verify

One :class:`Run` value holds the table and what each stage has finished (the screening's
verdict, the search's candidates, a finished shortcut, the KAN in training or trained); a
Ctrl-C is turned into the resumable checkpoint once, by :meth:`Run.interrupted`. A plain run
trains up to seven KANs: the input screening's short one, the structure search's oracles (up
to four), the additive shortcut and the main one.

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
from kansym.discover.progress import stage_deadline
from kansym.discover.choice import kept_run
from kansym.discover.config import DiscoverConfig
from kansym.discover.rows import ColumnScales, Rows, check_run, discovery_to_table, finetune_grid, working_scales
from kansym.discover.resume import (SYMBOLIC, ResumePoint, carried_direct, direct_entry, resume_record,
                                    trained_record)
from kansym.discover.progress import Stages
from kansym.discover.result import Discovery, RunInterrupted
from kansym.discover.structure_search import structure_stage, wants_structure
from kansym.discover.screen import bring_back_reason, kept_or_all, screening_entry, screening_plan
from kansym.discover.stages import finetune_stage, prune_stage, train_stage, symbolify_stage, wants_direct_search
from kansym.discover.structure_tests import additivity, interaction_error, table_space
from kansym.graph.build import to_networkx
from kansym.io.bundle import ModelBundle
from kansym.prune.scores import edge_scores
from kansym.symbolic.compose import input_symbols
from kansym.symbolic.direct import DirectCandidate, direct_search
from kansym.symbolic.monomial import monomial_candidates
from kansym.train.state import FitInterrupted

__all__ = ["discover", "train", "Run", "check_run", "Rows"]

log = logging.getLogger("kansym")


@dataclass
class Run:
    """One :func:`discover` (or :func:`train`) call as it goes: what it was given, and what its
    stages have finished (issue 35).

    The stages read the run's inputs from it and report what they finish to it; nothing
    else carries the run's progress. On Ctrl-C :meth:`interrupted` turns it, once, into the
    resumable checkpoint (:mod:`kansym.discover.resume`).

    Attributes
    ----------
    x, y : ndarray (N, d_in), (N, d_out)
        The table (CSV units).
    input_names, output_names : tuple of str
    config : DiscoverConfig
    stages : kansym.discover.progress.Stages
        The stage running (:attr:`Stages.current`) and the progress lines.
    deadline : kansym.deadline.Deadline or None
    progress : bool or None
        Progress bars (None: only on a terminal).
    resume : ResumePoint or None
        The interrupted run this one continues.
    screening : dict or None
        The record entry of the input screening's verdict, once made
        (:func:`kansym.discover.screen.screening_entry`).
    scales : ColumnScales or None
        The working units of the columns being searched.
    search : tuple or None
        The finished direct or structure search: its candidates (None: none ran), the
        reference model's held-out R², the config and the column names that shaped them
        (:func:`kansym.discover.resume.direct_entry`'s arguments; encoded only on Ctrl-C).
    shortcut : ModelBundle or None
        The finished additive shortcut's trained KAN (working units).
    model : ModelBundle or None
        The KAN of the training in progress (its last completed step) or of the finished
        training the later stages work on (working units), with ``record``, its resume record.
    record : dict or None
    """

    x: np.ndarray
    y: np.ndarray
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    config: DiscoverConfig
    stages: Stages
    deadline: Deadline | None = None
    progress: bool | None = None
    resume: ResumePoint | None = None
    screening: dict | None = None
    scales: ColumnScales | None = None
    search: tuple | None = None
    shortcut: ModelBundle | None = None
    model: ModelBundle | None = None
    record: dict | None = None

    def on_columns(self, scales: ColumnScales) -> None:
        """A search of other columns begins: what the last one finished is not this one's."""
        self.scales, self.search, self.shortcut, self.model, self.record = scales, None, None, None, None

    def interrupted(self) -> RunInterrupted:
        """The interruption of this run, with its resumable checkpoint (table units) when a KAN's
        training has begun; the one place a run's record is assembled."""
        stage = self.stages.current
        if self.model is None:  # before the KAN's training (screening, direct or structure search): nothing to resume
            return RunInterrupted(f"interrupted during the {stage}", stage=stage)
        direct = None if self.search is None else direct_entry(*self.search)
        entries = {k: v for k, v in (("screening", self.screening), ("direct", direct)) if v is not None}
        if self.shortcut is not None and self.record.get("run") == "main":
            entries["shortcut"] = self.shortcut.to_dict()
        record = {**entries, **self.record}
        if record["stage"] == SYMBOLIC:
            record["symbolic_stage"] = stage
            message = f"interrupted during the {stage}, after the training"
        else:
            stage = record["stage"]
            kan = "additive shortcut KAN" if stage == "shortcut" else "main KAN"
            message = f"interrupted in the {kan}'s training after {record['fit_state']['step']} completed steps"
        bundle = self.model.replace_model(self.model.model, resume=record)
        if self.scales is not None:
            bundle = self.scales.bundle_to_table(bundle)
        return RunInterrupted(message, bundle=bundle, stage=stage)


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
    run = Run(x, y, tuple(input_names), tuple(output_names), config, Stages(show=progress), progress=progress,
              resume=resume)
    scales = working_scales(x, y, input_names, output_names, config.space)  # extreme magnitudes: powers of two
    run.on_columns(scales)
    if resume is not None:
        resume = replace(resume, bundle=scales.bundle_to_working(resume.bundle))
    try:
        bundle = _train(run, scales.x_to_working(x), scales.y_to_working(y), input_names, config, config, resume,
                        "main")
    except KeyboardInterrupt:
        raise run.interrupted() from None
    return scales.bundle_to_table(bundle)


def _train(run: Run, x, y, input_names, config: DiscoverConfig, outer: DiscoverConfig, resume: ResumePoint | None,
           stage: str, label: str = "", deadline: Deadline | None = None) -> ModelBundle:
    """:func:`~kansym.discover.stages.train_stage` with ``config``'s options, reported to ``run``:
    on Ctrl-C its model at the last completed step, with a record naming ``stage`` and the
    whole run's config ``outer``. A :attr:`~kansym.discover.resume.ResumePoint.trained`
    ``resume`` is its model, no step taken."""
    run.model = run.record = None
    if resume is not None and resume.trained:
        resume.check_data(x, y)
        done = len(resume.bundle.meta.get("history", {}).get("step", ()))
        log.info("training: finished before the interruption (%d steps); the trained %s KAN of %s is taken as it is",
                 done, list(resume.bundle.model.width), resume.source)
        return resume.trained_bundle()
    tcfg = config.train.replace(seed=config.seed, device=config.device)
    on_step = run.stages.training(label.split(":")[0])
    try:
        return train_stage(
            x, y, input_names, run.output_names, hidden=config.hidden, grid_size=config.grid_size,
            spline_order=config.spline_order, space=config.space, train=tcfg, seed=config.seed, dtype=config.dtype,
            resume=resume, progress=run.progress, label=label, deadline=deadline, on_step=on_step,
        )
    except FitInterrupted as stop:
        cuts = () if run.deadline is None else run.deadline.cuts
        run.model, run.record = stop.bundle, resume_record(stop.state, outer, x, y, stage=stage, cuts=cuts)
        raise


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
        Progress bars and the line of each stage with the time it has left
        (:class:`kansym.discover.progress.Stages`; default: only on a terminal).
    resume : ResumePoint, optional
        Continue an interrupted run (:func:`kansym.discover.resume.load_resume`): its
        training from the last completed step, or, when the training had finished
        (``stage`` ``"symbolic"``), the stages after it on the trained model as it is.
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
        (:mod:`kansym.io.magnitude`, :mod:`kansym.discover.rows`).

    Raises
    ------
    RunInterrupted
        On Ctrl-C (or SIGTERM made one). During or after the KAN's training its ``bundle``
        is resumable (``meta["resume"]``, :mod:`kansym.discover.resume`; assembled once, by
        :meth:`Run.interrupted`); before it (screening, direct or structure search)
        ``bundle`` is None; ``stage`` names the stage.
    DataError
        Bad data, or a law that float64 cannot evaluate in the table's units
        (:func:`kansym.discover.rows.check_representable`).
    ConfigError, FitError
    """
    config = config or DiscoverConfig()
    deadline = Deadline(config.time_limit) if deadline is None else deadline
    x, y = _as_2d(x, y)
    run = Run(x, y, tuple(input_names), tuple(output_names), config, Stages(deadline, progress), deadline, progress,
              resume)
    try:
        with _blas_threads(config.train.num_threads):
            found = _screened(run)  # input screening (issue 19), then the search on the columns kept
    except KeyboardInterrupt:
        raise run.interrupted() from None
    found = replace(found, time_limit=deadline.seconds, cut_short=deadline.cuts)
    return _finish(found)


def _screened(run: Run) -> Discovery:
    """Screen the inputs, search the columns kept, and search every column again when the
    result is clearly worse than the screening's model of all of them
    (:mod:`kansym.discover.screen`). A resumed run continues on its checkpoint's columns."""
    plan, cols = screening_plan(run.x, run.y, run.input_names, run.config, run.resume, run.stages)
    run.screening = screening_entry(plan, run.config)
    found = replace(_on_columns(run, cols, run.resume), screening=plan)
    if run.resume is not None or plan is None or not plan.removed:
        return found
    worse = bring_back_reason(found, plan, run.x, run.y, run.config)
    if worse is None:
        return found
    log.info("bringing back the dropped columns: %s; running again on every column", worse)
    return kept_or_all(found, _on_columns(run, tuple(range(run.x.shape[1])), None), plan)


def _on_columns(run: Run, cols: Sequence[int], point: ResumePoint | None) -> Discovery:
    """The search of ``run.x``'s columns ``cols``: in working units, its result in the table's."""
    names = [run.input_names[i] for i in cols]
    xc = run.x if len(cols) == run.x.shape[1] else run.x[:, list(cols)]  # all columns: the caller's very array
    scales = working_scales(xc, run.y, names, run.output_names, run.config.space)
    run.on_columns(scales)
    if point is not None:
        point = replace(point, bundle=scales.bundle_to_working(point.bundle))
    found, rows = _discover(run, scales.x_to_working(xc), scales.y_to_working(run.y), names, point)
    return discovery_to_table(found, scales, scales.x_to_table(rows.x), scales.y_to_table(rows.y))


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


def _discover(run: Run, x, y, input_names, resume: ResumePoint | None) -> tuple[Discovery, Rows]:
    """The search of (working-unit) rows: its result (before :func:`_finish`) and the split rows.

    A resumed run continues where it was interrupted: the search before the training and
    a finished shortcut are taken from the record when it holds them
    (:mod:`kansym.discover.resume`), a finished training's model as it is; what runs
    again is deterministic, so the result equals the uninterrupted one.
    """
    rows = Rows.split(x, y, run.config)
    log.info("%s", rows.sizes(run.config))
    config = run.config.replace(space=table_space(run.config.space, x, y))  # every row, not the training subsample
    if resume is not None:
        resume.check_rows(rows)
        for cut in resume.cuts:  # what the interrupted run's limit had cut before its training ended
            run.deadline.cut(cut)
    t0 = time.perf_counter()
    carried = carried_direct(resume, config, input_names)
    direct, reference = carried or _search_whole(run, rows, input_names, config)
    run.search = (direct, reference, config, input_names)
    direct_seconds = time.perf_counter() - t0
    runs: list[Discovery] = []
    additive, floor = (additivity(rows.x_train, rows.y_train, config) if config.shortcut and config.hidden
                       else (False, 1.0))
    if additive:
        short = _run_once(run, rows, direct, input_names, config.replace(hidden=()), config,
                          resume and resume.for_run("shortcut"), "shortcut")
        f = short.formulas[0]
        if len(short.formulas) > 1 or (f.warning is None and f.r2_test >= floor):
            short = replace(short, seconds={**short.seconds, "direct": direct_seconds})
            return _referenced(short, reference, rows), rows
        if time_is_up(stage_deadline(run.deadline, "training")):  # it could not train
            run.deadline.cut("the hidden-layer KAN after the additive shortcut: skipped")
            short = replace(short, seconds={**short.seconds, "direct": direct_seconds})
            return _referenced(short, reference, rows), rows
        why = (f"has held-out R² {f.r2_test:.6g} < {floor:.6g}" if f.r2_test < floor
               else "is not a verified answer (partial, or flagged)")
        log.info("the additive KAN's formula %s; training the hidden layer too", why)
        runs.append(short)
        run.shortcut = short.trained
    runs.append(_run_once(run, rows, direct, input_names, config, config, resume and resume.for_run("main"), "main"))
    best = kept_run(runs)
    if len(runs) > 1:
        other = runs[0] if best is runs[1] else runs[1]
        log.info("kept the %s KAN's formula (held-out R² %.6g) over the %s KAN's (%.6g)",
                 list(best.trained.model.width), best.formulas[0].r2_test, list(other.trained.model.width),
                 other.formulas[0].r2_test)
    seconds = {k: sum(d.seconds.get(k, 0.0) for d in runs) for k in runs[-1].seconds}
    seconds["direct"] = direct_seconds
    return _referenced(replace(best, seconds=seconds, runs=len(runs)), reference, rows), rows


def _search_whole(run: Run, rows: Rows, input_names, config: DiscoverConfig) -> tuple[list[DirectCandidate] | None,
                                                                                     float]:
    """The search before the KAN: the direct search (1-2 inputs) or the structure search (3 or
    more, on an oracle KAN), each with the products of powers and sums of two read off the noisy
    rows (:func:`kansym.symbolic.monomial.monomial_candidates`); its candidates (None: neither ran) and
    the oracle's R²."""
    d_in, d_out = rows.x.shape[1], rows.y.shape[1]
    stages, deadline = run.stages, run.deadline

    def noise_floor() -> float | None:  # the constants' noise floor: a smooth fit's held-out error
        return None if rows.x_test is None else interaction_error(rows.x_train, rows.y_train[:, 0], rows.x_test,
                                                                  rows.y_test[:, 0])

    if wants_direct_search(config, d_in, d_out):
        stages.start("direct search", f"formulas of {', '.join(input_names)} searched whole")
        noise, share = noise_floor(), stage_deadline(deadline, "direct search")
        found = direct_search(rows.x, rows.y[:, 0], input_symbols(input_names),
                              complexity_weight=config.complexity_weight, noise=noise, deadline=share)
        return found + monomial_candidates(rows.x, rows.y[:, 0], input_symbols(input_names), noise=noise,
                                           deadline=share), float("nan")
    if wants_structure(config, d_in, d_out):
        stages.start("structure search", "a product of powers, then an unsparsified KAN as oracle and the law split "
                     "into laws of 1-2 inputs")
        share = stage_deadline(deadline, "direct search")
        monomial = monomial_candidates(rows.x, rows.y[:, 0], input_symbols(input_names), noise=noise_floor(),
                                       deadline=share)
        found, reference = structure_stage(rows, input_names, run.output_names, config, run.progress, deadline=share)
        return monomial + found, reference
    return None, float("nan")


def _referenced(found: Discovery, r2_reference: float, rows: Rows) -> Discovery:
    """``found`` with what its formulas' verification needs beyond their R²: the reference
    model's held-out R² and the residual test (:attr:`Formula.residual`)."""
    return replace(found, formulas=tuple(
        replace(f, r2_reference_test=r2_reference, residual=f.residual_test(
            rows.x, rows.y[:, k], rows.x_test, None if rows.y_test is None else rows.y_test[:, k]))
        for k, f in enumerate(found.formulas)))


def _finish(result: Discovery) -> Discovery:
    """Log, once, which candidate won and why, and any warning of the answer."""
    for f in result.formulas:
        if f.reason:
            log.info("%s", f.reason)
        if f.warning:
            log.warning("%s: %s", f.target, f.warning)
    return result


def _run_once(run: Run, rows: Rows, direct: Sequence[DirectCandidate] | None, input_names, config: DiscoverConfig,
              outer: DiscoverConfig, resume: ResumePoint | None, stage: str) -> Discovery:
    """One train -> prune -> fine-tune -> symbolify run on prepared rows.

    Each stage gets its share of ``run.deadline`` (:func:`kansym.discover.progress.stage_deadline`);
    once they are all up the run still does the least that gives a formula to verify: one
    training step, the pruning, per-edge linear fits and the verification. The trained model
    is reported to ``run``, resumable at the stages after the training
    (:func:`kansym.discover.resume.trained_record`).
    """
    seconds = {}
    t0 = time.perf_counter()
    label = "additive shortcut: no hidden layer" if stage == "shortcut" else ""
    trained = _train(run, rows.x_train, rows.y_train, input_names, config, outer, resume, stage, label,
                     stage_deadline(run.deadline, "training"))
    seconds["train"] = time.perf_counter() - t0
    run.model = trained
    run.record = trained_record(outer, rows, run=stage, cuts=run.deadline.cuts,
                                steps=len(trained.meta.get("history", {}).get("step", ())))
    return _after_training(trained, rows, direct, config, run.progress, run.deadline, run.stages, seconds)


def _after_training(trained: ModelBundle, rows: Rows, direct, config: DiscoverConfig, progress, deadline, stages,
                    seconds: dict) -> Discovery:
    """The stages of :func:`_run_once` after the training, on its model ``trained``."""
    t0 = time.perf_counter()
    stages.start("pruning", f"the nodes of the {list(trained.model.width)} KAN scoring below theta {config.theta:g}")
    pruned, result = prune_stage(trained, theta=config.theta)
    log.info("pruned %s -> %s (theta=%g)", list(trained.model.width), list(result.model.width), config.theta)
    grid = finetune_grid(config, rows.x_train.shape[0])
    stages.start("fine-tuning", f"{config.finetune.steps} LBFGS steps of the pruned KAN without sparsity"
                 f"{f' on a {grid}-interval grid' if grid else ''}")
    pruned = finetune_stage(
        pruned, rows.x_train, rows.y_train, train=config.finetune.replace(seed=config.seed, device=config.device),
        grid_size=grid, dtype=config.dtype, progress=progress, deadline=stage_deadline(deadline, "fine-tuning"),
    )
    seconds["prune"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    sym, formulas = symbolify_stage(
        pruned, rows.x, rows.y, rows.x_test, rows.y_test, library=config.library,
        r2_threshold=config.r2_threshold, min_edge_r2=config.min_edge_r2, simplify=config.simplify_edges,
        direct=direct, complexity_weight=config.complexity_weight, deadline=deadline, stages=stages,
    )
    seconds["symbolify"] = time.perf_counter() - t0

    scores = edge_scores(pruned.model, pruned.model_inputs(rows.x))
    graph = to_networkx(pruned.model, input_names=pruned.input_names, output_names=pruned.output_names,
                        edge_scores=scores, edge_fits=dict(sym.edges))
    return Discovery(trained=trained, pruned=pruned, prune_result=result, symbolic=sym, formulas=formulas,
                     graph=graph, seconds=seconds)
