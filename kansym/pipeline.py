"""The main job: from a table to a pruned KAN and a verified formula (DESIGN.md §2).

``discover`` chains the stages; each returns a new value and none mutates its input::

    table -> DataTransform -> KAN -> fit (L1 + entropy) -> prune(theta) -> fit (fine-tune)
          -> symbolify (per-edge primitives) -> compose (sympy) -> refine -> verify
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Sequence

import networkx as nx
import numpy as np
import torch

from kansym.config import PlainConfig
from kansym.errors import ConfigError, DataError
from kansym.graph.build import to_networkx
from kansym.io.bundle import ModelBundle
from kansym.io.resume import read_resume, resume_record
from kansym.nn.config import KANConfig
from kansym.nn.kan import KAN
from kansym.prune.prune import PruneResult, prune
from kansym.prune.scores import edge_scores
from kansym.formula import Formula, split_holdout, symbolify_bundle, uses_direct_search
from kansym.symbolic.compose import SymbolicKAN, input_symbols
from kansym.symbolic.direct import direct_search
from kansym.symbolic.library import get_library
from kansym.symbolic.pareto import expression_complexity
from kansym.symbolic.verify import r2_score
from kansym.train.fit import TrainConfig, finetune, fit
from kansym.train.state import FitInterrupted
from kansym.transform import DataTransform, additive_r2, choose_space, interaction_r2

__all__ = ["DiscoverConfig", "Discovery", "Formula", "discover", "train_bundle", "symbolify_bundle", "split_holdout"]

log = logging.getLogger("kansym")

MIN_ROWS = 10
ADDITIVE_RESIDUAL = 1e-4  # 1 - R² of the additive model below which the law counts as additive
SHORTCUT_R2 = 0.9999  # held-out R² at which the additive (hidden-layer-free) run is kept alone


@dataclass(frozen=True)
class DiscoverConfig(PlainConfig):
    """Options of :func:`discover` (the defaults are those of ``kansym fit``).

    Parameters
    ----------
    hidden : tuple of int
        Hidden layer widths; the model is ``(d_in, *hidden, d_out)``.
    grid_size, spline_order : int
        Spline grid of the trained model.
    train : TrainConfig
        Sparsifying training (lamb > 0); one CPU thread by default (small KANs
        train fastest that way, and a busy machine does not slow them down). Its
        ``num_threads`` also holds numpy/scipy's BLAS during :func:`discover`
        (``threadpoolctl``).
    theta : float
        Node pruning threshold (KAN paper §2.5.1).
    finetune : TrainConfig
        Training of the pruned model (lamb = 0, grid updates throughout).
    finetune_grid_size : int or None
        Grid of the pruned model after extension (None keeps ``grid_size``); capped
        at one interval per 20 rows so that small tables are not overfit.
    space : {"auto", "linear", "log"}
        Units the KAN learns in (see :func:`kansym.transform.choose_space`).
    library : tuple of str or None
        Primitive names (None = the whole library).
    r2_threshold : float
        Per-edge R² an edge's primitive must reach.
    min_edge_r2 : float
        An edge whose best primitive stays below this R² is kept numeric and flagged
        (:mod:`kansym.symbolic.numeric`) instead of being forced into that primitive.
    holdout : float
        Share of the rows (seeded) held out from training, symbolification and
        refinement, on which the formula and the model are verified (R² on held-out
        rows); tables of fewer than ``MIN_HOLDOUT_ROWS / holdout`` rows hold none out and are
        verified on the fitting rows. 0 disables it.
    max_train_rows : int or None
        The KAN trains on at most this many (seeded) rows of the fitting rows;
        symbolification and refinement use them all. None: no cap.
    shortcut : bool
        When the law is additive in the KAN's units (one input, or the residual of
        :func:`kansym.transform.additive_r2` at most 1e-4 or at most twice that of
        :func:`kansym.transform.interaction_r2`, the noise floor: AI Feynman's
        separability test, Udrescu & Tegmark 2020), first train a KAN without hidden layer, whose edges
        are then the terms of the law; keep it if its formula is verified with a
        held-out R² of at least 0.9999, else also train the hidden layer and keep the
        formula with the better held-out R² (then the smaller complexity).
    simplify_edges : bool
        Try simpler primitives per edge in the whole formula (:mod:`kansym.symbolic.occam`).
    direct_search : bool
        With one output, at most two inputs and the whole library (``library`` None), also search small formulas directly
        (:mod:`kansym.symbolic.direct`) and let them compete with the KAN's formula.
    complexity_weight : float
        ``w`` of the choice between the KAN's formula and the direct-search candidates:
        the answer minimises ``log10(max(error, 1e-9)) + w * complexity``, error the
        normalised RMS error on the held-out rows, complexity that of the Pareto front
        (:func:`kansym.symbolic.direct.selection_score`). Must be >= 0.
    seed : int
    device : str
    dtype : {"float64", "float32"}
    """

    hidden: tuple[int, ...] = (5,)
    grid_size: int = 5
    spline_order: int = 3
    train: TrainConfig = field(default_factory=lambda: TrainConfig(num_threads=1))
    theta: float = 1e-2
    finetune: TrainConfig = field(
        default_factory=lambda: TrainConfig(lamb=0.0, stop_grid_update_step=20, num_threads=1)
    )
    finetune_grid_size: int | None = 10
    space: str = "auto"
    library: tuple[str, ...] | None = None
    r2_threshold: float = 0.999
    min_edge_r2: float = 0.9
    holdout: float = 0.2
    max_train_rows: int | None = 3000
    shortcut: bool = True
    simplify_edges: bool = True
    direct_search: bool = True
    complexity_weight: float = 0.05
    seed: int = 0
    device: str = "cpu"
    dtype: str = "float64"

    def __post_init__(self) -> None:
        if self.theta < 0:
            raise ConfigError(f"theta must be >= 0, got {self.theta}")
        if self.space not in ("auto", "linear", "log"):
            raise ConfigError(f"space must be auto, linear or log, got {self.space!r}")
        if self.dtype not in ("float64", "float32"):
            raise ConfigError(f"dtype must be float64 or float32, got {self.dtype!r}")
        if any(w < 1 for w in self.hidden):
            raise ConfigError(f"hidden widths must be >= 1, got {list(self.hidden)}")
        if not 0.0 <= self.holdout < 0.9:
            raise ConfigError(f"holdout must lie in [0, 0.9), got {self.holdout}")
        if self.max_train_rows is not None and self.max_train_rows < MIN_ROWS:
            raise ConfigError(f"max_train_rows must be at least {MIN_ROWS}, got {self.max_train_rows}")
        if not 0.0 < self.r2_threshold <= 1.0:
            raise ConfigError(f"r2_threshold must lie in (0, 1], got {self.r2_threshold}")
        if not (np.isfinite(self.complexity_weight) and self.complexity_weight >= 0):
            raise ConfigError(f"complexity_weight must be a finite number >= 0, got {self.complexity_weight}")
        if self.library is not None:
            get_library(self.library)  # raises ConfigError listing valid names
        KANConfig(width=(1, *self.hidden, 1), grid_size=self.grid_size, spline_order=self.spline_order)



@dataclass(frozen=True)
class Discovery:
    """Everything :func:`discover` produced.

    ``seconds`` sums the stages over all runs; ``runs`` is 1, or 2 when the additive
    shortcut was tried before the hidden-layer KAN (:class:`DiscoverConfig` ``shortcut``).
    """

    trained: ModelBundle
    pruned: ModelBundle
    prune_result: PruneResult
    symbolic: SymbolicKAN
    formulas: tuple[Formula, ...]
    graph: nx.DiGraph
    seconds: dict
    runs: int = 1


def _dtype(name: str) -> torch.dtype:
    return torch.float64 if name == "float64" else torch.float32


def _finetune_grid(config: DiscoverConfig, n_rows: int) -> int | None:
    """The polishing grid, never finer than about 20 rows per interval (small tables overfit)."""
    if not config.finetune_grid_size:
        return None
    return max(config.spline_order, min(config.finetune_grid_size, n_rows // 20))


def train_bundle(
    x: np.ndarray,
    y: np.ndarray,
    input_names: Sequence[str],
    output_names: Sequence[str],
    config: DiscoverConfig,
    *,
    progress: bool | None = None,
    resume: ModelBundle | None = None,
) -> ModelBundle:
    """Train a sparsified KAN on CSV-unit data and bundle it with its transform.

    Parameters
    ----------
    x : ndarray (N, d_in)
    y : ndarray (N, d_out)
    resume : ModelBundle, optional
        A checkpoint saved on Ctrl-C (:mod:`kansym.io.resume`): training continues
        from it on the same rows (``config`` should come from
        :func:`kansym.io.resume.merge_resume_config`).

    Raises
    ------
    FitInterrupted
        On Ctrl-C; its ``bundle`` attribute is the resumable partial model.
    """
    if x.shape[0] < MIN_ROWS:
        raise DataError(
            f"kansym needs at least {MIN_ROWS} rows to train and validate a KAN, got {x.shape[0]}"
        )
    dtype = _dtype(config.dtype)
    state = None
    if resume is not None:
        state = read_resume(resume, "the resumed checkpoint", x, y).state
        space, transform, model = resume.meta.get("space", config.space), resume.transform, resume.model.to(dtype)
    else:
        space = choose_space(x, y, config.space)
        transform = DataTransform.fit(x, y, log_space=space == "log")
        kcfg = KANConfig(
            width=(x.shape[1], *config.hidden, y.shape[1]),
            grid_size=config.grid_size,
            spline_order=config.spline_order,
            seed=config.seed,
        )
        model = KAN(kcfg).to(dtype)
    u = torch.as_tensor(transform.inputs(x), dtype=dtype)
    v = torch.as_tensor(transform.targets(y), dtype=dtype)
    tcfg = config.train.replace(seed=config.seed, device=config.device)
    try:
        result = fit(model, u, v, tcfg, progress=progress, resume=state)
    except FitInterrupted as stop:
        meta = {"space": space, "train_config": tcfg.to_dict(), "history": stop.result.history.to_dict(),
                "resume": resume_record(stop.state, config, x, y)}
        stop.bundle = ModelBundle.create(stop.result.model.cpu(), transform, input_names, output_names, x, y,
                                         meta=meta, seed=config.seed)
        raise
    trained = result.model.cpu()
    meta = {"space": space, "train_config": tcfg.to_dict(), "history": result.history.to_dict()}
    return ModelBundle.create(trained, transform, input_names, output_names, x, y, meta=meta, seed=config.seed)


def prune_bundle(bundle: ModelBundle, theta: float = 1e-2) -> tuple[ModelBundle, PruneResult]:
    """Prune a bundled model on its calibration rows (no data file needed).

    The report saved in the new bundle's meta also holds the model's R² on the
    calibration rows before and after pruning (``r2_before``, ``r2_after``, CSV units),
    since removing a node whose incoming edges are weak also removes the (nearly
    constant) contribution of its outgoing edges.
    """
    result = prune(bundle.model, bundle.model_inputs(), theta=theta)
    pruned = bundle.replace_model(result.model)
    report = result.report.to_dict()
    report["r2_before"] = float(r2_score(bundle.y_cal.ravel(), bundle.predict(bundle.x_cal).ravel()))
    report["r2_after"] = float(r2_score(bundle.y_cal.ravel(), pruned.predict(bundle.x_cal).ravel()))
    return bundle.replace_model(result.model, prune_report=report), result


def discover(
    x: np.ndarray,
    y: np.ndarray,
    input_names: Sequence[str],
    output_names: Sequence[str],
    config: DiscoverConfig | None = None,
    *,
    progress: bool | None = None,
    resume: ModelBundle | None = None,
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
    progress : bool, optional
        Progress bars (default: only on a terminal).
    resume : ModelBundle, optional
        Continue the training stage of an interrupted run (see :func:`train_bundle`).

    Returns
    -------
    Discovery

    Raises
    ------
    DataError, ConfigError, FitError
    """
    config = config or DiscoverConfig()
    with _blas_threads(config.train.num_threads):
        return _discover(x, y, input_names, output_names, config, progress, resume)


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


def _discover(x, y, input_names, output_names, config: DiscoverConfig, progress, resume) -> Discovery:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if y.ndim == 1:
        y = y[:, None]
    fit_idx, test_idx = split_holdout(x.shape[0], config.holdout, config.seed)
    x_test = y_test = None
    if test_idx is not None:
        x_test, y_test = x[test_idx], y[test_idx]
        x, y = x[fit_idx], y[fit_idx]
    x_train, y_train = x, y
    if config.max_train_rows is not None and x.shape[0] > config.max_train_rows:
        sub = np.sort(np.random.default_rng([config.seed, 11]).choice(x.shape[0], config.max_train_rows, replace=False))
        x_train, y_train = x[sub], y[sub]
    data = (x, y, x_test, y_test, x_train, y_train)
    t0 = time.perf_counter()
    direct = None
    if uses_direct_search(config, x, y):
        direct = direct_search(x, y[:, 0], input_symbols(input_names), complexity_weight=config.complexity_weight)
    direct_seconds = time.perf_counter() - t0
    data = data + (direct,)
    runs = []
    # A resumed run continues the stage it was interrupted in; the stages before it are
    # deterministic and run again, so the result equals the uninterrupted one.
    stage = resume.meta.get("resume", {}).get("stage", "main") if resume is not None else None
    additive, floor = _additivity(x_train, y_train, config) if config.shortcut and config.hidden else (False, 1.0)
    if additive:
        short = _resumable_stage(
            "shortcut", config, data, input_names, output_names, config.replace(hidden=()), progress,
            resume if stage == "shortcut" else None,
        )
        f = short.formulas[0]
        if len(short.formulas) > 1 or (f.warning is None and f.r2_test >= floor):
            return replace(short, seconds={**short.seconds, "direct": direct_seconds})
        log.info("additive shortcut gave R² %.6g; training the hidden layer too", f.r2_test)
        runs.append(short)
    runs.append(_resumable_stage("main", config, data, input_names, output_names, config, progress,
                                 resume if stage != "shortcut" else None))
    best = max(runs, key=lambda d: (round(_score(d.formulas[0]), 6), -expression_complexity(d.formulas[0].expr)))
    seconds = {k: sum(d.seconds.get(k, 0.0) for d in runs) for k in runs[-1].seconds}
    seconds["direct"] = direct_seconds
    return replace(best, seconds=seconds, runs=len(runs))


def _resumable_stage(stage, outer, data, input_names, output_names, config, progress, resume) -> Discovery:
    """``_discover_once``; on Ctrl-C the resumable bundle records the stage and the whole run's config."""
    try:
        return _discover_once(data, input_names, output_names, config, progress, resume)
    except FitInterrupted as stop:
        if getattr(stop, "bundle", None) is not None:
            stop.bundle.meta["resume"].update(stage=stage, discover_config=outer.to_dict())
        raise


def _score(f: Formula) -> float:
    return f.r2_test if np.isfinite(f.r2_test) else -np.inf


def _additivity(x: np.ndarray, y: np.ndarray, config: DiscoverConfig) -> tuple[bool, float]:
    """Whether the law is additive in the units the KAN will learn in, and the held-out
    R² a formula of the additive KAN must reach to be kept alone.

    One input is always additive. Otherwise the residual ``1 - R²`` of the additive
    model must be at most ``ADDITIVE_RESIDUAL``, or at most twice that of the model with
    pairwise interactions when the latter is below 1 % (noise makes both equal; a law
    neither model follows is not called additive). The R² to reach is
    ``1 - max(1 - SHORTCUT_R2, 3 * r)``, ``r`` the residual of the model with interactions
    in CSV units (about the noise floor), and at least 0.999.
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


def _discover_once(data, input_names, output_names, config: DiscoverConfig, progress, resume) -> Discovery:
    """One train -> prune -> fine-tune -> symbolify run on prepared rows."""
    x, y, x_test, y_test, x_train, y_train, direct = data
    seconds = {}
    t0 = time.perf_counter()
    trained = train_bundle(x_train, y_train, input_names, output_names, config, progress=progress, resume=resume)
    seconds["train"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    pruned, result = prune_bundle(trained, config.theta)
    u = torch.as_tensor(trained.transform.inputs(x_train), dtype=_dtype(config.dtype))
    v = torch.as_tensor(trained.transform.targets(y_train), dtype=_dtype(config.dtype))
    ft = finetune(
        pruned.model,
        u,
        v,
        grid_size=_finetune_grid(config, x_train.shape[0]),
        config=config.finetune.replace(seed=config.seed, device=config.device),
        progress=progress,
    )
    pruned = pruned.replace_model(ft.model.cpu(), finetune_history=ft.history.to_dict())
    seconds["prune"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    sym, formulas = symbolify_bundle(pruned, config, x, y, x_test, y_test, direct=direct)
    seconds["symbolify"] = time.perf_counter() - t0

    scores = edge_scores(pruned.model, pruned.model_inputs(x))
    graph = to_networkx(
        pruned.model,
        input_names=pruned.input_names,
        output_names=pruned.output_names,
        edge_scores=scores,
        edge_fits=dict(sym.edges),
    )
    return Discovery(
        trained=trained,
        pruned=pruned,
        prune_result=result,
        symbolic=sym,
        formulas=formulas,
        graph=graph,
        seconds=seconds,
    )
