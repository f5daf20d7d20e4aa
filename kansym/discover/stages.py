"""The model stages of discovery: train (L1 + entropy), prune, fine-tune (docs/algorithms.md, "Architecture").

Each stage takes the options it uses as keyword arguments, returns a new
:class:`~kansym.io.bundle.ModelBundle` and leaves its input unchanged. With the run's
:class:`~kansym.deadline.Deadline`, training and fine-tuning stop at a step boundary once
it has expired (fine-tuning is skipped when it has expired before), and say so. The symbolic
stages are in :mod:`kansym.discover.symbolify`; :func:`kansym.discover.run.discover`
chains them all.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from kansym.discover.result import MIN_ROWS, RunInterrupted
from kansym.discover.resume import ResumePoint
from kansym.deadline import Deadline, time_is_up
from kansym.discover.structure import choose_space
from kansym.errors import DataError
from kansym.io.bundle import ModelBundle
from kansym.io.transform import DataTransform
from kansym.nn.config import KANConfig
from kansym.nn.kan import KAN
from kansym.prune.prune import PruneResult, prune
from kansym.symbolic.verify import r2_score
from kansym.train.config import TrainConfig
from kansym.train.fit import finetune, fit
from kansym.train.memory import check_training_memory
from kansym.train.state import FitInterrupted, FitState

__all__ = ["train_stage", "prune_stage", "finetune_stage", "torch_dtype"]

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
        Units it learns in (:func:`kansym.discover.structure.choose_space`).
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
    RunInterrupted
        On Ctrl-C: ``bundle`` is the model at the last completed step (no resume record
        yet: :func:`kansym.discover.run.train` and :func:`~kansym.discover.run.discover`
        add it), ``state`` the training state.
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
        partial = start.bundle(stop.result, train, input_names, output_names, x, y, seed)
        raise RunInterrupted(str(stop), bundle=partial, state=stop.state) from None
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


def prune_stage(bundle: ModelBundle, *, theta: float = 1e-2) -> tuple[ModelBundle, PruneResult]:
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
