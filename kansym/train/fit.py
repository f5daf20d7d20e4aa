"""Training loop of a KAN: MSE plus sparsity regularisation, grid updates, history.

``loss = mean((model(x) - y)^2) + lamb * reg`` with ``reg`` of
:func:`kansym.train.regularization.regularization` (Liu et al. 2024, "KAN:
Kolmogorov–Arnold Networks", arXiv:2404.19756, eq. 2.20 and §2.5.1); grids adapt
to the training inputs during the first steps (§2.4). ``fit`` never mutates the
model it is given.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from tqdm.auto import tqdm

from kansym.deadline import Deadline, time_is_up
from kansym.errors import ConfigError, FitError
from kansym.nn.fast import FeatureCache
from kansym.nn.kan import KAN
from kansym.train.config import FINETUNE, OPTIMIZERS, TrainConfig
from kansym.train.history import FitResult, History
from kansym.train.optim import FlatParams, as_flat_lbfgs_state, make_optimizer
from kansym.train.regularization import sampled_regularization, training_loss
from kansym.train.state import FitInterrupted, FitState, check_resume, snapshot_optimizer

__all__ = ["TrainConfig", "History", "FitResult", "FitState", "FitInterrupted", "fit", "finetune", "OPTIMIZERS"]

logger = logging.getLogger("kansym")


def _as_tensor(a: Any, dtype: torch.dtype, device: torch.device, name: str) -> torch.Tensor:
    t = torch.as_tensor(a).to(device=device, dtype=dtype)
    if t.ndim == 1:
        t = t.unsqueeze(-1)  # (N,) -> (N, 1)
    if t.ndim != 2:
        raise ConfigError(f"{name} must be a 2-D array (rows, features), got shape {tuple(t.shape)}")
    return t


def _split(n: int, val_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n, generator=gen)
    n_val = int(round(n * val_fraction))
    return perm[n_val:], perm[:n_val]


def _objective(model: KAN, x: torch.Tensor, y: torch.Tensor, config: TrainConfig, cache: FeatureCache, *,
               combined: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(MSE, reg) on a batch; reg is a NaN scalar when lamb == 0 (fast path).

    ``combined``: ``(MSE + lamb * reg, NaN)``, the loss a step differentiates, from
    :func:`~kansym.train.regularization.training_loss` (one autograd node after the
    layers where it can be); every evaluation of the objective goes through here.
    ``cache`` holds the first layer's features of the run's fixed rows.
    """
    if combined:
        loss = training_loss(model, x, y, lamb=config.lamb, mu1=config.mu1, mu2=config.mu2, feature_cache=cache)
        return loss, torch.full((), math.nan, dtype=loss.dtype, device=loss.device)
    if config.lamb > 0:  # output and penalty in one pass per layer (no KANTrace)
        out, reg = sampled_regularization(model, x, mu1=config.mu1, mu2=config.mu2, feature_cache=cache)
        return torch.mean((out - y) ** 2), reg
    mse = torch.mean((model(x, feature_cache=cache) - y) ** 2)
    return mse, torch.full((), math.nan, dtype=mse.dtype, device=mse.device)


def _snapshot(model: KAN) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def fit(
    model: KAN,
    x: Any,
    y: Any,
    config: TrainConfig | None = None,
    *,
    progress: bool | None = None,
    resume: FitState | None = None,
    deadline: Deadline | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> FitResult:
    """Train a copy of ``model`` on ``(x, y)``.

    Each step minimises ``MSE + lamb * reg`` (KAN paper eq. 2.20) on the training
    rows; before steps ``0, e, 2e, ...`` below ``stop_grid_update_step`` the grids
    adapt to the training inputs (``e = grid_update_every``, paper §2.4).

    Faults. A step whose loss (or validation loss) is NaN or infinite is undone:
    the parameters and grids return to the end of the previous step and
    :class:`~kansym.errors.FitError` is raised. We stop rather than retry with a
    smaller step: LBFGS already chooses its step by a strong-Wolfe line search,
    so a non-finite loss means the objective itself is undefined there (overflow
    in the data scale, a penalty weight too large), which no step size fixes.
    Ctrl-C (``KeyboardInterrupt``) likewise rolls back to the last completed step
    and raises :class:`~kansym.train.state.FitInterrupted` carrying a
    :class:`~kansym.train.state.FitState`; ``fit(result.model, x, y, config,
    resume=state)`` then continues the same run (same grid-update schedule,
    batches and optimiser memory) to the same final parameters.

    Time limit. With a ``deadline``, the loop looks at it before every step but the
    first of the call and, once it has expired, stops there as early stopping would:
    the model of the last completed step (the best one with ``patience``), with
    ``cut_short=True``. At least one step is always taken. A deadline that does not
    expire changes nothing (the same steps, the same bits). Ctrl-C and its resumable
    state work as without one.

    Parameters
    ----------
    model : KAN
        Left unchanged; a deep copy is trained.
    x : array-like (N, in)
        Model inputs (already scaled, e.g. to [-1, 1]).
    y : array-like (N, out) or (N,)
        Targets (e.g. standardised).
    config : TrainConfig, optional
        Defaults to ``TrainConfig()``.
    progress : bool or None
        Show a tqdm bar; None shows it only when stderr is a terminal.
    resume : FitState, optional
        Continue an interrupted run; ``model`` must then be the interrupted
        run's model (``FitInterrupted.result.model``, or the checkpoint's).
    deadline : kansym.deadline.Deadline, optional
        The run's time limit (None: none).
    on_step : callable ``(steps_done, steps)``, optional
        Called after each completed step with the steps completed so far and the run's
        total (``kansym fit`` estimates the time left from the step rate).

    Returns
    -------
    FitResult

    Raises
    ------
    ConfigError
        If ``x``/``y`` shapes do not match the model or each other, there are too
        few rows for the split, or ``resume`` came from a run with other options
        (see :func:`~kansym.train.state.check_resume`).
    FitError
        If the loss becomes NaN or infinite. The run stops, the last finite state is
        restored, and that partial :class:`FitResult` is attached as
        ``error.result`` (its :class:`FitState` as ``error.state``).
    FitInterrupted
        On Ctrl-C (a ``KeyboardInterrupt``), with ``.result`` and ``.state``.
    """
    config = TrainConfig() if config is None else config
    if resume is not None:
        check_resume(config, resume)
    with _torch_threads(config.num_threads):
        return _fit(model, x, y, config, progress, resume, deadline, on_step)


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch threads (None: as they are), restoring the number after."""
    if n is None:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@dataclass
class _Run:
    """A fit in progress: model, data rows, RNG stream, optimizer's flat parameters, history, best and commit."""

    model: KAN
    config: TrainConfig
    device: torch.device
    x_tr: torch.Tensor
    y_tr: torch.Tensor
    x_va: torch.Tensor
    y_va: torch.Tensor
    has_val: bool
    gen: torch.Generator  # the mini-batch rows
    history: History
    best: tuple[float, int, dict[str, torch.Tensor]]  # (val objective, step, state)
    start: int  # the first step of this call
    # The end of the last completed step, replaced by one assignment so that a Ctrl-C
    # between two bytecodes sees either the old or the new record, never half of each:
    # (steps done, model state, optimizer state, generator state). An empty optimizer
    # state means a fresh optimizer (no step taken since it was made).
    commit: tuple[int, dict[str, torch.Tensor], dict, torch.Tensor]
    params: list[torch.nn.Parameter]
    cache: FeatureCache  # the first layer's input is the fixed x_tr (and x_va): its basis once per grid
    flat: FlatParams | None = None  # LBFGS's flat parameters, remade with every optimizer
    stopped_early: bool = False
    cut_short: bool = False


def _prepare_data(model: KAN, x: Any, y: Any, config: TrainConfig,
                  device: torch.device) -> tuple[KAN, tuple[torch.Tensor, ...], bool]:
    """Copy the model to the device, check the data's shapes, split the rows; returns the copy, rows and has_val."""
    model = copy.deepcopy(model).to(device)
    dtype = model.layers[0].coef.dtype
    x = _as_tensor(x, dtype, device, "x")
    y = _as_tensor(y, dtype, device, "y")
    if x.shape[0] != y.shape[0]:
        raise ConfigError(f"x and y need the same number of rows, got {x.shape[0]} and {y.shape[0]}")
    if x.shape[1] != model.in_features or y.shape[1] != model.out_features:
        raise ConfigError(
            f"the model maps {model.in_features} inputs to {model.out_features} outputs, "
            f"got x with {x.shape[1]} and y with {y.shape[1]} columns"
        )
    train_idx, val_idx = _split(x.shape[0], config.val_fraction, config.seed)
    if len(train_idx) < 2:
        raise ConfigError(f"too few training rows ({len(train_idx)}): give more data or lower val_fraction")
    train_idx, val_idx = train_idx.to(device), val_idx.to(device)
    return model, (x[train_idx], y[train_idx], x[val_idx], y[val_idx]), len(val_idx) > 0


def _start_run(model: KAN, x: Any, y: Any, config: TrainConfig, resume: FitState | None) -> _Run:
    """The run's state before its first step: fresh, or that of ``resume``."""
    device = torch.device(config.device)
    model, (x_tr, y_tr, x_va, y_va), has_val = _prepare_data(model, x, y, config, device)
    gen = torch.Generator().manual_seed(config.seed + 1)
    history = History()
    best = (math.inf, -1, _snapshot(model))
    start = 0
    if resume is not None:
        start = resume.step
        history = History(**{k: list(v) for k, v in resume.history.items()})
        gen.set_state(resume.generator)
        if resume.best_state is not None:
            best = (resume.best_score, resume.best_step, resume.best_state)
    commit = (len(history.step), _snapshot(model), resume.optimizer if resume else {}, gen.get_state())
    return _Run(model=model, config=config, device=device, x_tr=x_tr, y_tr=y_tr, x_va=x_va, y_va=y_va,
                has_val=has_val, gen=gen, history=history, best=best, start=start, commit=commit,
                params=list(model.parameters()), cache=FeatureCache())


def _new_optimizer(run: _Run) -> torch.optim.Optimizer:
    """A fresh optimizer of the model (LBFGS's flat parameters remade with it)."""
    optimizer, run.flat = make_optimizer(run.model, run.config, run.flat)
    return optimizer


def _load_optimizer_state(run: _Run, optimizer: torch.optim.Optimizer, saved: dict) -> None:
    """Load a resumed run's optimizer state, refusing one that does not fit the model."""
    try:
        optimizer.load_state_dict(as_flat_lbfgs_state(saved) if run.flat is not None else saved)
    except (ValueError, KeyError, RuntimeError) as exc:
        raise ConfigError(f"the saved optimizer state does not fit this model ({exc}); start a new run") from exc


def _roll_back(run: _Run) -> FitState:
    """Return the model and history to the last commit; its resumable state."""
    done, good, opt_state, gen_state = run.commit
    history, config, best = run.history, run.config, run.best
    for values in (history.step, history.train_loss, history.val_loss, history.reg):
        del values[done:]
    run.model.load_state_dict(good)
    keep_best = config.patience is not None
    return FitState(
        step=done, optimizer=opt_state, generator=gen_state, history=history.to_dict(),
        config=config.to_dict(), best_score=best[0] if keep_best else math.inf,
        best_step=best[1] if keep_best else -1, best_state=best[2] if keep_best else None,
    )


def _update_grid(run: _Run, optimizer: torch.optim.Optimizer, step: int) -> torch.optim.Optimizer:
    """Adapt the grids to the training inputs on the schedule's steps; the optimizer to go on with."""
    config = run.config
    every = config.grid_update_every
    if every and step % every == 0 and step < config.stop_grid_update_step:
        run.model.update_grid(run.x_tr)
        if config.optimizer == "lbfgs":
            optimizer = _new_optimizer(run)  # the curvature history refers to the old grid
    return optimizer


def _batch(run: _Run) -> tuple[torch.Tensor, torch.Tensor]:
    """The step's rows: all training rows, or a mini-batch drawn from the run's generator."""
    if run.config.batch_size is None:
        return run.x_tr, run.y_tr
    pick = torch.randint(0, run.x_tr.shape[0], (run.config.batch_size,), generator=run.gen).to(run.device)
    return run.x_tr[pick], run.y_tr[pick]


def _optimizer_step(run: _Run, optimizer: torch.optim.Optimizer, xb: torch.Tensor, yb: torch.Tensor) -> None:
    """One optimizer step on the batch's objective."""

    def closure() -> torch.Tensor:
        if run.flat is not None:  # the gradients are views of one flat tensor: zero it
            run.flat.zero_grad()
        else:
            for p in run.params:  # optimizer.zero_grad() without its profiler record (~0.1 ms a call)
                p.grad = None
        loss, _ = _objective(run.model, xb, yb, run.config, run.cache, combined=True)
        loss.backward()
        return loss

    optimizer.step(closure)


def _evaluate(run: _Run, step: int) -> tuple[float, float, float, torch.Tensor]:
    """(train MSE, reg, val MSE, val objective) after a step; rolls back and raises on a non-finite loss."""
    config, model = run.config, run.model
    with torch.no_grad():
        mse, reg = _objective(model, run.x_tr, run.y_tr, config, run.cache)
        val = (torch.mean((model(run.x_va, feature_cache=run.cache) - run.y_va) ** 2) if run.has_val
               else torch.tensor(math.nan, device=run.device))
        val_obj = val + config.lamb * reg if config.lamb > 0 and run.has_val else val
    train_loss, reg_value, val_loss = float(mse), float(reg), float(val)
    total = train_loss + (config.lamb * reg_value if config.lamb > 0 else 0.0)
    if not math.isfinite(total) or (run.has_val and not math.isfinite(val_loss)):
        state = _roll_back(run)
        bad = total if not math.isfinite(total) else val_loss
        raise FitError(
            f"the loss became {bad} at step {step}; the model was rolled back to its state after "
            f"{state.step} completed step(s): lower lamb or lr, or check the data scale",
            result=FitResult(model, run.history, best_step=state.step - 1), state=state,
        )
    return train_loss, reg_value, val_loss, val_obj


def _commit_step(run: _Run, optimizer: torch.optim.Optimizer, step: int, train_loss: float, val_loss: float,
                 reg_value: float) -> dict[str, torch.Tensor]:
    """Record the completed step in the history and the commit; returns the model's state."""
    good = _snapshot(run.model)
    opt_state, gen_state = snapshot_optimizer(optimizer), run.gen.get_state()
    history = run.history
    history.step.append(step)
    history.train_loss.append(train_loss)
    history.val_loss.append(val_loss)
    history.reg.append(reg_value)
    run.commit = (len(history.step), good, opt_state, gen_state)
    return good


def _stop_early(run: _Run, step: int, val_obj: torch.Tensor, good: dict[str, torch.Tensor]) -> bool:
    """With ``patience``: keep the best state, and say stop after ``patience`` steps without a better one."""
    config = run.config
    if config.patience is None:
        return False
    score = float(val_obj)
    if score < run.best[0]:
        run.best = (score, step, good)
    elif step - run.best[1] >= config.patience:
        run.stopped_early = step < config.steps - 1
        return True
    return False


def _run_steps(run: _Run, bar: tqdm, resume: FitState | None, deadline: Deadline | None,
               on_step: Callable[[int, int], None] | None) -> None:
    """The steps of ``bar`` (until the deadline or early stopping), each committed when it completes."""
    config = run.config
    optimizer = _new_optimizer(run)  # inside the try: the first one imports parts of torch (seconds)
    if resume is not None and resume.optimizer:
        _load_optimizer_state(run, optimizer, resume.optimizer)
    for step in bar:
        if step > run.start and time_is_up(deadline):
            run.cut_short = True  # a step boundary: the model is that of the last completed step
            break
        optimizer = _update_grid(run, optimizer, step)
        xb, yb = _batch(run)
        _optimizer_step(run, optimizer, xb, yb)
        train_loss, reg_value, val_loss, val_obj = _evaluate(run, step)
        good = _commit_step(run, optimizer, step, train_loss, val_loss, reg_value)
        if on_step is not None:
            on_step(len(run.history.step), config.steps)
        bar.set_postfix(train=f"{train_loss:.2e}", val=f"{val_loss:.2e}")
        logger.debug("step %d train %.3e val %.3e reg %.3e", step, train_loss, val_loss, reg_value)
        if _stop_early(run, step, val_obj, good):
            break


def _fit(model: KAN, x: Any, y: Any, config: TrainConfig, progress: bool | None, resume: FitState | None,
         deadline: Deadline | None, on_step: Callable[[int, int], None] | None = None) -> FitResult:
    """:func:`fit` once ``config`` is set and checked, with the torch threads it asks for."""
    run = _start_run(model, x, y, config, resume)
    show = sys.stderr.isatty() if progress is None else bool(progress)
    bar = tqdm(range(run.start, config.steps), disable=not show, desc="fit", leave=False)
    try:
        _run_steps(run, bar, resume, deadline, on_step)
    except KeyboardInterrupt:
        bar.close()
        state = _roll_back(run)
        raise FitInterrupted(
            f"interrupted during step {state.step} of {config.steps}; rolled back to the end of the "
            f"{state.step} completed step(s)",
            FitResult(run.model, run.history, best_step=state.step - 1),
            state,
        ) from None
    finally:
        if run.flat is not None:
            run.flat.release()
    bar.close()
    if config.patience is not None:
        run.model.load_state_dict(run.best[2])
        return FitResult(run.model, run.history, best_step=run.best[1], stopped_early=run.stopped_early,
                         cut_short=run.cut_short)
    return FitResult(run.model, run.history, best_step=len(run.history.step) - 1, cut_short=run.cut_short)


def finetune(
    model: KAN,
    x: Any,
    y: Any,
    *,
    grid_size: int | None = None,
    config: TrainConfig | None = None,
    progress: bool | None = None,
    deadline: Deadline | None = None,
) -> FitResult:
    """Polish a (pruned) model without sparsity, optionally on a finer grid.

    The grid is first extended to ``grid_size`` intervals on the inputs (KAN paper
    §2.4, grid extension), then :func:`fit` runs with ``config`` (default:
    :data:`kansym.train.config.FINETUNE`, ``TrainConfig(lamb=0.0, stop_grid_update_step=20)``:
    20 LBFGS steps without sparsity, grid updates every 5 steps throughout). On the hello world, the pruned
    ``(2, 1, 1)`` model polished on ``grid_size=10`` reaches validation MSE 1e-5..1e-7
    (standardised units).

    Parameters
    ----------
    model : KAN
        Left unchanged.
    x : array-like (N, in)
    y : array-like (N, out) or (N,)
    grid_size : int, optional
        New number of grid intervals; None keeps the model's grid.
    config : TrainConfig, optional
    progress : bool or None
    deadline : kansym.deadline.Deadline, optional
        As :func:`fit` (the grid extension always happens, then at least one step).

    Returns
    -------
    FitResult

    Raises
    ------
    ConfigError
        If ``grid_size < 1`` or the data do not match the model.
    FitError
        As :func:`fit`.
    """
    config = FINETUNE if config is None else config
    if grid_size is not None:
        if grid_size < 1:
            raise ConfigError(f"grid_size must be at least 1, got {grid_size}")
        ref = model.layers[0].coef
        xt = _as_tensor(x, ref.dtype, ref.device, "x")
        if xt.shape[1] != model.in_features:
            raise ConfigError(f"the model expects {model.in_features} input features, got {xt.shape[1]}")
        model = model.extend_grid(xt, grid_size)
    return fit(model, x, y, config, progress=progress, deadline=deadline)
