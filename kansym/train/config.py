"""How :func:`kansym.train.fit.fit` trains a KAN: :class:`TrainConfig` (validated, plain-dict round trip)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kansym.config import DEVICE, MAX_STEPS, SEED, PlainConfig, check_numbers, check_seed
from kansym.errors import ConfigError

__all__ = ["TrainConfig", "OPTIMIZERS", "FINETUNE"]

OPTIMIZERS = ("lbfgs", "adam")


@dataclass(frozen=True)
class TrainConfig(PlainConfig):
    """How :func:`fit` trains a KAN.

    The defaults are the sparsification recipe that turns the KAN paper's hello
    world (``exp(sin(pi x1) + x2^2)``, inputs in [-1, 1], standardised target) from
    width ``(2, 5, 1)`` into ``(2, 1, 1)`` after :func:`kansym.prune.prune` with
    ``theta = 1e-2``: 20 LBFGS steps with ``lamb = 0.2``, the L1 term only
    (``mu2 = 0``), and grid updates at steps 0 and 5. Grid updates stop early because
    ``|phi|_1`` is not scale invariant: while the next layer's grid follows them, the
    hidden activations can shrink at no cost to the fit, and the L1 term then drives
    the surviving node's incoming scores towards ``theta``. The entropy term (eq. 2.19),
    in our measurements, left more multi-node minima on this task (2-3 of 5 seeds
    pruned to ``(2, 1, 1)`` with ``mu2`` in 0.1..2 against 5 of 5 with ``mu2 = 0``).
    For a plain (dense) fit use ``lamb = 0`` (see :func:`finetune`).

    Parameters
    ----------
    optimizer : {"lbfgs", "adam"}
        LBFGS (full batch, strong Wolfe line search) or Adam.
    steps : int
        Optimiser steps (an LBFGS step runs up to ``lbfgs_max_iter`` iterations).
    lr : float
        Learning rate (1.0 suits LBFGS, ~1e-2 Adam).
    lamb : float
        Weight of the sparsity penalty; 0 disables it (fast path, no trace).
    mu1, mu2 : float
        Weights of the L1 and entropy terms inside the penalty (eq. 2.20).
    grid_update_every : int
        Update the grids every this many steps (0 = never).
    stop_grid_update_step : int
        No grid update at or after this step.
    val_fraction : float
        Share of the rows held out for validation, in [0, 1).
    patience : int or None
        Early stopping: stop after this many steps without a better validation
        objective (validation MSE, plus ``lamb * reg`` of the training rows when
        ``lamb > 0``) and restore the best state (needs ``val_fraction > 0``).
        None trains all ``steps`` and keeps the last state.
    batch_size : int or None
        Rows per Adam step; None is the full batch (required by LBFGS).
    lbfgs_max_iter : int
        Iterations per LBFGS step.
    seed : int
        Seed of the train/validation split and of mini-batch sampling.
    device : str
        Torch device on which the model and data live during training.
    num_threads : int or None
        CPU threads torch may use during the fit (restored afterwards); None leaves
        torch's setting. Small KANs train fastest with 1, especially on a busy machine.

    Raises
    ------
    ConfigError
        For an impossible value (``lamb < 0``, ``steps < 1``, unknown optimizer...).
    """

    optimizer: str = "lbfgs"
    steps: int = 20
    lr: float = 1.0
    lamb: float = 0.2
    mu1: float = 1.0
    mu2: float = 0.0
    grid_update_every: int = 5
    stop_grid_update_step: int = 10
    val_fraction: float = 0.2
    patience: int | None = None
    batch_size: int | None = None
    lbfgs_max_iter: int = 20
    seed: int = SEED
    device: str = DEVICE
    num_threads: int | None = None

    def __post_init__(self) -> None:
        check_seed(self.seed)
        check_numbers(self, ("lr", "lamb", "mu1", "mu2", "val_fraction"))
        check_numbers(self, ("steps", "grid_update_every", "stop_grid_update_step", "patience", "batch_size",
                             "lbfgs_max_iter", "num_threads"), integer=True)
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if not 1 <= self.steps <= MAX_STEPS:
            raise ConfigError(f"steps must lie in 1..{MAX_STEPS:,}, got {self.steps}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ConfigError(f"lr must be a finite positive number, got {self.lr}")
        if not (self.lamb >= 0 and math.isfinite(self.lamb)):
            raise ConfigError(f"lamb must be a finite number >= 0, got {self.lamb}")
        if not (self.mu1 >= 0 and self.mu2 >= 0 and math.isfinite(self.mu1) and math.isfinite(self.mu2)):
            raise ConfigError(f"mu1 and mu2 must be finite numbers >= 0, got mu1={self.mu1}, mu2={self.mu2}")
        if self.grid_update_every < 0 or self.stop_grid_update_step < 0:
            raise ConfigError("grid_update_every and stop_grid_update_step must be >= 0")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ConfigError(f"val_fraction must lie in [0, 1), got {self.val_fraction}")
        if self.patience is not None and self.patience < 1:
            raise ConfigError(f"patience must be at least 1 or None, got {self.patience}")
        if self.patience is not None and self.val_fraction == 0:
            raise ConfigError("early stopping (patience) needs a validation split: set val_fraction > 0")
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1 or None, got {self.batch_size}")
        if self.batch_size is not None and self.optimizer == "lbfgs":
            raise ConfigError("LBFGS trains on the full batch: set batch_size=None or optimizer='adam'")
        if self.lbfgs_max_iter < 1:
            raise ConfigError(f"lbfgs_max_iter must be at least 1, got {self.lbfgs_max_iter}")
        if self.num_threads is not None and self.num_threads < 1:
            raise ConfigError(f"num_threads must be at least 1 or None, got {self.num_threads}")
        if self.device != "cpu":  # always a torch device; the check imports torch (a second), which --help need not
            import torch

            try:
                torch.device(self.device)
            except (RuntimeError, TypeError) as exc:
                raise ConfigError(f"device {self.device!r} is not a torch device: {exc}") from None


FINETUNE = TrainConfig(lamb=0.0, stop_grid_update_step=20)
"""The fine-tuning recipe (:func:`kansym.train.fit.finetune`, ``DiscoverConfig.finetune``): 20 LBFGS
steps without sparsity, grid updates every 5 steps throughout."""
