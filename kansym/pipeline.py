"""The main job: from a table to a pruned KAN and a verified formula (DESIGN.md §2).

``discover`` chains the stages; each returns a new value and none mutates its input::

    table -> DataTransform -> KAN -> fit (L1 + entropy) -> prune(theta) -> fit (fine-tune)
          -> symbolify (per-edge primitives) -> compose (sympy) -> refine -> verify
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Sequence

import networkx as nx
import numpy as np
import sympy
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
from kansym.symbolic.compose import SymbolicKAN, input_symbols, lambdify_formula, symbolify
from kansym.symbolic.library import get_library
from kansym.symbolic.occam import simplify_edges
from kansym.symbolic.refine import refine
from kansym.symbolic.verify import Fidelity, fidelity, r2_score
from kansym.train.fit import TrainConfig, finetune, fit
from kansym.train.state import FitInterrupted
from kansym.transform import DataTransform, choose_space

__all__ = ["DiscoverConfig", "Discovery", "Formula", "discover", "train_bundle", "symbolify_bundle"]

log = logging.getLogger("kansym")

MIN_ROWS = 10


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
        train fastest that way, and a busy machine does not slow them down).
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
    simplify_edges : bool
        Try simpler primitives per edge in the whole formula (:mod:`kansym.symbolic.occam`).
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
    simplify_edges: bool = True
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
        if not 0.0 < self.r2_threshold <= 1.0:
            raise ConfigError(f"r2_threshold must lie in (0, 1], got {self.r2_threshold}")
        if self.library is not None:
            get_library(self.library)  # raises ConfigError listing valid names
        KANConfig(width=(1, *self.hidden, 1), grid_size=self.grid_size, spline_order=self.spline_order)



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
        before the final refinement: the complexity/error front of the search.
    """

    expr: sympy.Expr
    raw: sympy.Expr
    symbols: tuple[sympy.Symbol, ...]
    fidelity: Fidelity
    target: str
    candidates: tuple = ()

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Evaluate on CSV inputs ``(N, d_in)`` -> ``(N,)``."""
        return lambdify_formula(self.expr, self.symbols)(x)


@dataclass(frozen=True)
class Discovery:
    """Everything :func:`discover` produced."""

    trained: ModelBundle
    pruned: ModelBundle
    prune_result: PruneResult
    symbolic: SymbolicKAN
    formulas: tuple[Formula, ...]
    graph: nx.DiGraph
    seconds: dict


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


def symbolify_bundle(
    bundle: ModelBundle,
    config: DiscoverConfig,
    x: np.ndarray | None = None,
    y: np.ndarray | None = None,
) -> tuple[SymbolicKAN, tuple[Formula, ...]]:
    """Symbolify a bundled model, compose, refine and verify its formulas.

    Parameters
    ----------
    bundle : ModelBundle
    config : DiscoverConfig
        ``library`` and ``r2_threshold`` are used.
    x, y : ndarray, optional
        CSV-unit data for the refit and the fidelity (default: the calibration rows).
    """
    x = bundle.x_cal if x is None else x
    y = bundle.y_cal if y is None else y
    sym, candidates = symbolify(
        bundle.model,
        bundle.model_inputs(x).double(),
        bundle.transform,
        bundle.input_names,
        bundle.output_names,
        library=config.library,
        r2_threshold=config.r2_threshold,
    )
    symbols = tuple(input_symbols(bundle.input_names, positive=bundle.transform.log_space))
    tried: list = []
    if len(bundle.output_names) == 1 and config.simplify_edges:
        sym, tried = simplify_edges(sym, candidates, symbols, x, y[:, 0])
    y_model = bundle.predict(x)
    loss_space = "log" if bundle.transform.log_space else "linear"
    formulas = []
    for k, raw in enumerate(sym.expressions(symbols)):
        expr = refine(raw, symbols, x, y[:, k], loss_space=loss_space)
        fid = fidelity(lambdify_formula(expr, symbols), x, y[:, k], y_model[:, k])
        raw_fid = fidelity(lambdify_formula(raw, symbols), x, y[:, k], y_model[:, k])
        if not np.isfinite(fid.r2_data) or fid.r2_data < raw_fid.r2_data - 1e-6:
            log.info("refinement lowered R² (%.6g < %.6g); keeping the raw composition", fid.r2_data, raw_fid.r2_data)
            expr, fid = raw, raw_fid
        formulas.append(
            Formula(expr=expr, raw=raw, symbols=symbols, fidelity=fid, target=bundle.output_names[k], candidates=tuple(tried))
        )
    return sym, tuple(formulas)


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
    y : ndarray (N, d_out), CSV units
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
    seconds = {}
    t0 = time.perf_counter()
    trained = train_bundle(x, y, input_names, output_names, config, progress=progress, resume=resume)
    seconds["train"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    pruned, result = prune_bundle(trained, config.theta)
    u = torch.as_tensor(trained.transform.inputs(x), dtype=_dtype(config.dtype))
    v = torch.as_tensor(trained.transform.targets(y), dtype=_dtype(config.dtype))
    ft = finetune(
        pruned.model,
        u,
        v,
        grid_size=_finetune_grid(config, x.shape[0]),
        config=config.finetune.replace(seed=config.seed, device=config.device),
        progress=progress,
    )
    pruned = pruned.replace_model(ft.model.cpu(), finetune_history=ft.history.to_dict())
    seconds["prune"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    sym, formulas = symbolify_bundle(pruned, config, x, y)
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
