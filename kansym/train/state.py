"""Resumable training state of :func:`kansym.train.fit.fit`, and the Ctrl-C that carries it.

A run of ``fit`` is fully determined by the model, the data, the
:class:`~kansym.train.fit.TrainConfig` and three pieces of state that change
step by step: the optimiser's state (LBFGS curvature pairs or Adam moments),
the mini-batch generator and the history (plus, with early stopping, the best
state so far). :class:`FitState` holds them as plain data, so a checkpoint can
carry it (``torch.load(weights_only=True)`` reads it back) and
``fit(..., resume=state)`` continues the very same run: the same grid-update
schedule (by step index), the same batches, the same LBFGS memory, hence
bit-identical parameters at the end on the same machine and thread count.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import torch

from kansym.errors import CheckpointError, ConfigError

__all__ = ["FitState", "FitInterrupted", "check_resume"]

# TrainConfig fields a resumed run may change: more steps, another device or thread count.
RESUMABLE_CHANGES = ("steps", "device", "num_threads")


@dataclass(frozen=True)
class FitState:
    """Where a :func:`~kansym.train.fit.fit` run stands after ``step`` completed steps.

    The model's parameters are not part of it: they travel with the model
    (e.g. in the same checkpoint), rolled back to the end of step ``step - 1``.

    Attributes
    ----------
    step : int
        Steps completed; the resumed run starts at this step index.
    optimizer : dict
        ``optimizer.state_dict()`` at the end of the last completed step (plain data).
    generator : torch.Tensor
        ``torch.Generator.get_state()`` of the mini-batch sampler at that point.
    history : dict
        :meth:`~kansym.train.fit.History.to_dict` of the completed steps.
    config : dict
        :meth:`~kansym.train.fit.TrainConfig.to_dict` of the run.
    best_score : float
        Best validation objective so far (early stopping; ``inf`` before any step).
    best_step : int
        Step of ``best_state`` (-1 before any step).
    best_state : dict or None
        Model ``state_dict`` at ``best_step`` when early stopping is on, else None.
    """

    step: int
    optimizer: dict
    generator: torch.Tensor
    history: dict
    config: dict
    best_score: float = math.inf
    best_step: int = -1
    best_state: dict | None = None

    def to_dict(self) -> dict:
        """Plain dict (tensors, lists, numbers) for a checkpoint."""
        return {
            "step": self.step,
            "optimizer": self.optimizer,
            "generator": self.generator,
            "history": self.history,
            "config": self.config,
            "best_score": self.best_score,
            "best_step": self.best_step,
            "best_state": self.best_state,
        }

    @classmethod
    def from_dict(cls, data: Any) -> "FitState":
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        CheckpointError
            If ``data`` lacks an entry or holds one of the wrong type.
        """
        try:
            state = cls(
                step=int(data["step"]),
                optimizer=dict(data["optimizer"]),
                generator=data["generator"],
                history={k: list(v) for k, v in dict(data["history"]).items()},
                config=dict(data["config"]),
                best_score=float(data.get("best_score", math.inf)),
                best_step=int(data.get("best_step", -1)),
                best_state=data.get("best_state"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CheckpointError(f"the saved training state is incomplete ({type(exc).__name__}: {exc}); "
                                  "it cannot be resumed") from exc
        if not isinstance(state.generator, torch.Tensor) or state.step < 0:
            raise CheckpointError("the saved training state is corrupt (generator or step); it cannot be resumed")
        return state


class FitInterrupted(KeyboardInterrupt):
    """Ctrl-C (``KeyboardInterrupt``) during :func:`~kansym.train.fit.fit`, with what is needed to resume.

    A subclass of ``KeyboardInterrupt``, so code that does not know about it
    still stops as on any Ctrl-C.

    Attributes
    ----------
    result : FitResult
        The model rolled back to the end of the last completed step, and the
        history so far.
    state : FitState
        Pass to ``fit(result.model, x, y, config, resume=state)`` to continue.
    """

    def __init__(self, message: str, result: Any, state: FitState) -> None:
        super().__init__(message)
        self.result = result
        self.state = state


def check_resume(config: Any, state: FitState) -> None:
    """Refuse to resume ``state`` with a config that would make it another run.

    Parameters
    ----------
    config : TrainConfig
        The config of the resumed run; only ``steps``, ``device`` and
        ``num_threads`` may differ from the saved one, and ``steps`` may not be
        below the steps already done.

    Raises
    ------
    ConfigError
        Naming the first field that differs, or too few steps.
    """
    now = config.to_dict()
    for name, saved in state.config.items():
        if name in RESUMABLE_CHANGES or name not in now:
            continue
        if now[name] != saved and not (_nan(now[name]) and _nan(saved)):
            raise ConfigError(
                f"cannot resume with {name}={now[name]!r}: the run was started with {name}={saved!r}; "
                "drop that option or start a new run"
            )
    if config.steps < state.step:
        raise ConfigError(
            f"the run already completed {state.step} steps; give at least that many (--steps {state.step})"
        )


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def snapshot_optimizer(optimizer: torch.optim.Optimizer) -> dict:
    """A detached deep copy of ``optimizer.state_dict()`` (plain data).

    Tensors are cloned and containers rebuilt by :func:`_copy_state`, which equals
    ``copy.deepcopy`` on this data (dicts, lists, tuples, tensors, numbers, strings,
    None) at a fraction of its cost: ``fit`` takes one snapshot per step, and
    ``deepcopy`` of LBFGS's history (per-tensor ``__deepcopy__`` and memo bookkeeping)
    was about 5 % of a small KAN's training time.
    """
    return _copy_state(optimizer.state_dict())


def _copy_state(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _copy_state(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_copy_state(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_copy_state(v) for v in obj)
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return obj
    return copy.deepcopy(obj)
