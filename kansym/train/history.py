"""What :func:`kansym.train.fit.fit` returns: the per-step :class:`History` and the :class:`FitResult`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kansym.nn.kan import KAN

__all__ = ["History", "FitResult"]


@dataclass(frozen=True)
class History:
    """Per-step record of a training run (the model after each step).

    Attributes
    ----------
    step : list of int
        Step index, from 0.
    train_loss : list of float
        MSE on the training rows.
    val_loss : list of float
        MSE on the validation rows (NaN without a validation split).
    reg : list of float
        The penalty ``reg`` on the training rows, without ``lamb`` (NaN when
        ``lamb = 0``: no trace is computed then).
    """

    step: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    reg: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain dict of lists."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class FitResult:
    """Outcome of :func:`kansym.train.fit.fit`.

    Attributes
    ----------
    model : KAN
        The trained copy, on ``config.device``.
    history : History
    best_step : int
        Step whose state the model holds (the last one without early stopping).
    stopped_early : bool
        True when early stopping ended the run before ``steps``.
    cut_short : bool
        True when the ``deadline`` of :func:`~kansym.train.fit.fit` ended the run before ``steps`` (at a
        step boundary: ``len(history.step)`` steps were done).
    """

    model: KAN
    history: History
    best_step: int
    stopped_early: bool = False
    cut_short: bool = False
