"""The rows of one discovery run (:class:`Rows`: fitting, held out, training) and what they allow
(:func:`check_run`: enough rows, a training that fits in memory)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kansym.discover.config import DiscoverConfig
from kansym.discover.result import MIN_ROWS, split_holdout
from kansym.errors import DataError
from kansym.train.memory import check_training_memory

__all__ = ["Rows", "check_run", "finetune_grid"]


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
    grid = finetune_grid(config, n_train)
    if grid:
        check_training_memory((d_in, *config.hidden, d_out), grid, config.spline_order, n_train)


def finetune_grid(config: DiscoverConfig, n_rows: int) -> int | None:
    """The polishing grid, never finer than about 20 rows per interval (small tables overfit)."""
    if not config.finetune_grid_size:
        return None
    return max(config.spline_order, min(config.finetune_grid_size, n_rows // 20))
