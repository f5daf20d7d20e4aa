"""Options of the discovery pipeline: :class:`DiscoverConfig` (the defaults of ``kansym fit``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kansym.config import R2_THRESHOLD, PlainConfig, check_seed
from kansym.deadline import DEFAULT_TIME_LIMIT
from kansym.errors import ConfigError
from kansym.nn.config import KANConfig
from kansym.train.config import TrainConfig

__all__ = ["DiscoverConfig", "MIN_ROWS", "MIN_HOLDOUT_ROWS"]

MIN_ROWS = 10  # fewer rows cannot train and validate a KAN
MIN_HOLDOUT_ROWS = 20  # fewer held-out rows than this would make a noisy verdict


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
        (:mod:`kansym.symbolic.fit`) instead of being forced into that primitive.
    holdout : float
        Share of the rows (seeded) held out from training, symbolification and
        refinement, on which the formula and the model are verified (R² on held-out
        rows); tables of fewer than ``MIN_HOLDOUT_ROWS / holdout`` rows hold none out and are
        verified on the fitting rows. 0 disables it.
    max_train_rows : int or None
        The KAN trains on at most this many (seeded) rows of the fitting rows;
        symbolification and refinement use them all. None: no cap.
    screen : bool
        Test before the KAN which inputs the law uses and run on those only
        (:mod:`kansym.discover.screen`: held-out permutation tests of a smooth model and a
        short sparsified KAN of all columns); a run clearly worse than those models brings
        the dropped columns back. Off for fewer than 3 inputs or 400 fitting rows.
    keep_inputs : tuple of str
        Input columns the screening never drops.
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
    structure : bool
        With one output, three inputs or more and the whole library, also split the law
        into sub-laws of one or two inputs on an unsparsified KAN (AI Feynman's
        separability tests, :mod:`kansym.discover.structure_search`) and let the formula they make
        compete with the KAN's.
    complexity_weight : float
        ``w`` of the choice between the KAN's formula and the direct-search candidates:
        the answer minimises ``log10(max(error, 1e-9)) + w * complexity``, error the
        normalised RMS error on the held-out rows, complexity that of the Pareto front
        (:func:`kansym.symbolic.direct.selection_score`). Must be >= 0.
    time_limit : float or None
        Seconds the run may take (:class:`kansym.deadline.Deadline`; None: no limit).
        Once they are spent, each stage stops at its next check with what it has, the
        stages after it are skipped, and the answer is the best verified formula found
        so far; :attr:`Discovery.cut_short <kansym.discover.result.Discovery>` names what
        was cut. The default, :data:`kansym.deadline.DEFAULT_TIME_LIMIT` = 300, is 23 to 54 times the
        median time of a Feynman equation on 2 cores (docs/algorithms.md §7d). The
        other budgets count work, so a limit that does not bind changes nothing.
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
    r2_threshold: float = R2_THRESHOLD
    min_edge_r2: float = 0.9
    holdout: float = 0.2
    max_train_rows: int | None = 3000
    screen: bool = True
    keep_inputs: tuple[str, ...] = ()
    shortcut: bool = True
    simplify_edges: bool = True
    direct_search: bool = True
    structure: bool = True
    complexity_weight: float = 0.05
    time_limit: float | None = DEFAULT_TIME_LIMIT
    seed: int = 0
    device: str = "cpu"
    dtype: str = "float64"

    def __post_init__(self) -> None:
        check_seed(self.seed)
        if not (self.theta >= 0 and np.isfinite(self.theta)):
            raise ConfigError(f"theta must be a finite number >= 0, got {self.theta}")
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
        if self.time_limit is not None and not (isinstance(self.time_limit, (int, float))
                                                and np.isfinite(self.time_limit) and self.time_limit > 0):
            raise ConfigError(f"time_limit must be a finite number of seconds > 0 or None, got {self.time_limit!r}")
        if not (np.isfinite(self.complexity_weight) and self.complexity_weight >= 0):
            raise ConfigError(f"complexity_weight must be a finite number >= 0, got {self.complexity_weight}")
        if self.library is not None:
            from kansym.symbolic.library import get_library  # sympy and torch: only for a library given

            get_library(self.library)  # raises ConfigError listing valid names
        KANConfig(width=(1, *self.hidden, 1), grid_size=self.grid_size, spline_order=self.spline_order)

    @classmethod
    def from_dict(cls, data: dict) -> "DiscoverConfig":
        """Inverse of :meth:`to_dict`, nested :class:`TrainConfig` and tuples included.

        Raises
        ------
        ConfigError
            Unknown fields or impossible values.
        """
        d = dict(data)
        for name in ("train", "finetune"):
            if isinstance(d.get(name), dict):
                d[name] = TrainConfig.from_dict(d[name])
        for name in ("hidden", "library", "keep_inputs"):
            if isinstance(d.get(name), list):
                d[name] = tuple(d[name])
        return super().from_dict(d)
