"""Options of the discovery pipeline: :class:`DiscoverConfig` (the defaults of ``kansym fit``)."""

from __future__ import annotations

import math
import numbers
import textwrap
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from kansym.config import (
    COMPLEXITY_WEIGHT, DEVICE, HOLDOUT, MAX_SEED, MAX_STEPS, MIN_EDGE_R2, R2_THRESHOLD, SEED, THETA, PlainConfig, check_numbers,
    check_seed,
)
from kansym.deadline import DEFAULT_TIME_LIMIT
from kansym.errors import ConfigError
from kansym.nn.config import KANConfig
from kansym.train.config import FINETUNE, TrainConfig

__all__ = ["DiscoverConfig", "MIN_ROWS", "MIN_HOLDOUT_ROWS", "SPACES", "Setting", "SETTINGS", "setting", "settings_config",
           "settings_doc"]

MIN_ROWS = 10  # fewer rows cannot train and validate a KAN
MIN_HOLDOUT_ROWS = 20  # fewer held-out rows than this would make a noisy verdict
SPACES = ("auto", "linear", "log")  # units the KAN may learn in (kansym.discover.structure_tests.choose_space)


@dataclass(frozen=True)
class DiscoverConfig(PlainConfig):
    """Options of :func:`discover` (the defaults are those of ``kansym fit``).

    The fields a user sets (``kansym fit``'s options, :class:`kansym.KANRegressor`'s parameters,
    both generated from it) are listed with their meaning, flag and range in :data:`SETTINGS`.

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
    grid_size: int = KANConfig.grid_size  # the trained KAN's defaults are KANConfig's
    spline_order: int = KANConfig.spline_order
    train: TrainConfig = field(default_factory=lambda: TrainConfig(num_threads=1))
    theta: float = THETA
    finetune: TrainConfig = field(default_factory=lambda: FINETUNE.replace(num_threads=1))
    finetune_grid_size: int | None = 10
    space: str = "auto"
    library: tuple[str, ...] | None = None
    r2_threshold: float = R2_THRESHOLD
    min_edge_r2: float = MIN_EDGE_R2
    holdout: float = HOLDOUT
    max_train_rows: int | None = 3000
    screen: bool = True
    keep_inputs: tuple[str, ...] = ()
    shortcut: bool = True
    simplify_edges: bool = True
    direct_search: bool = True
    structure: bool = True
    complexity_weight: float = COMPLEXITY_WEIGHT
    time_limit: float | None = DEFAULT_TIME_LIMIT
    seed: int = SEED
    device: str = DEVICE
    dtype: str = "float64"

    def __post_init__(self) -> None:
        check_seed(self.seed)
        check_numbers(self, ("theta", "r2_threshold", "min_edge_r2", "holdout", "complexity_weight", "time_limit"))
        check_numbers(self, ("grid_size", "spline_order", "finetune_grid_size", "max_train_rows"), integer=True)
        if any(isinstance(w, bool) or not isinstance(w, numbers.Integral) for w in self.hidden):
            raise ConfigError(f"hidden widths must be integers, got {self.hidden!r}")
        if not (self.theta >= 0 and math.isfinite(self.theta)):
            raise ConfigError(f"theta must be a finite number >= 0, got {self.theta}")
        if self.space not in SPACES:
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
                                                and math.isfinite(self.time_limit) and self.time_limit > 0):
            raise ConfigError(f"time_limit must be a finite number of seconds > 0 or None, got {self.time_limit!r}")
        if not (math.isfinite(self.complexity_weight) and self.complexity_weight >= 0):
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


@dataclass(frozen=True)
class Setting:
    """One user-facing setting of a discovery run, with its meaning: a parameter of
    :class:`kansym.KANRegressor` and an option of ``kansym fit`` / ``kansym train``, both
    generated from this row (:data:`SETTINGS`); its default is :class:`DiscoverConfig`'s.

    Parameters
    ----------
    name : str
        The estimator's parameter; the command line's flag is ``--name`` with dashes
        (``--no-name`` for a switch on by default) unless ``flag`` names it.
    field : str
        The :class:`DiscoverConfig` field it sets, dotted inside a nested
        :class:`~kansym.train.config.TrainConfig` (``"train.steps"``).
    kind : {"int", "float", "choice", "ints", "names", "switch", "text"}
        A number in ``[low, high]`` (``low_open``: ``low`` excluded; a float bounded below
        only is also finite); one of ``choices``; a tuple of integers or of names
        (comma-separated on the command line); a bool; a string.
    help : str
        What it means (``--help``, the estimator's docstring).
    none : str
        What None means, for a setting that may be None.
    cli : str
        What the command line adds to ``help`` (its syntax).
    off : float or None
        The command-line value that stands for None (``--time-limit 0``: no limit).
    flag : str or None
        The command line's flag when it is not derived from ``name``.
    """

    name: str
    field: str
    kind: Literal["int", "float", "choice", "ints", "names", "switch", "text"]
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple[str, ...] = ()
    none: str = ""
    cli: str = ""
    off: float | None = None
    flag: str | None = None

    def default(self) -> Any:
        """The value of :attr:`field` in ``DiscoverConfig()``."""
        value: Any = DiscoverConfig()
        for part in self.field.split("."):
            value = getattr(value, part)
        return value

    def doc_type(self) -> str:
        """The numpydoc type of the estimator's parameter (``float or None``)."""
        kinds = {"int": "int", "float": "float", "ints": "tuple of int", "names": "sequence of str",
                 "switch": "bool", "text": "str"}
        kind = kinds.get(self.kind) or "{" + ", ".join(f'"{c}"' for c in self.choices) + "}"
        return f"{kind} or None" if self.none else kind


SETTINGS = (
    Setting("hidden", "hidden", "ints", "Hidden layer widths: the KAN is (inputs, *hidden, outputs).", low=1,
            cli="E.g. 5 or 5,3."),
    Setting("grid_size", "grid_size", "int", "B-spline grid intervals G of the trained KAN.", low=1),
    Setting("steps", "train.steps", "int", "LBFGS steps of the sparsifying training.", low=1, high=MAX_STEPS),
    Setting("lamb", "train.lamb", "float",
            "Sparsification strength lamb (>= 0) of the L1 + entropy penalty (KAN paper eq. 2.20).", low=0.0),
    Setting("space", "space", "choice", "Units the KAN learns in: log space (positive multiplicative laws), "
            "linear space, or auto (chosen from the data).", choices=SPACES),
    Setting("theta", "theta", "float", "Node pruning threshold theta (>= 0): a hidden node survives iff its largest "
            "incoming and outgoing edge scores both exceed it (KAN paper §2.5.1).", low=0.0),
    Setting("library", "library", "names", "Primitive names an edge may take.", none="all", flag="--lib",
            cli="Comma-separated, e.g. sin,exp,x^2."),
    Setting("r2_threshold", "r2_threshold", "float", "R² an edge's primitive must reach.", low=0, high=1, low_open=True),
    Setting("min_edge_r2", "min_edge_r2", "float",
            "Below this R² an edge keeps no primitive: it stays numeric and the formula is flagged."),
    Setting("holdout", "holdout", "float", "Share of the rows (seeded) held out to verify the formula, in [0, 0.9)."),
    Setting("max_train_rows", "max_train_rows", "int", "Rows the KAN trains on at most (a seeded sample of the "
            "fitting rows; the symbolic stages and the verification use the others too).", low=MIN_ROWS,
            none="no cap"),
    Setting("screen", "screen", "switch", "Screen the inputs before the KAN: columns that a held-out permutation "
            "test finds unused are dropped, with a notice.",
            cli="--no-screen keeps every input column."),
    Setting("keep_inputs", "keep_inputs", "names", "Input columns the screening never drops.", cli="Comma-separated."),
    Setting("complexity_weight", "complexity_weight", "float", "Weight w of the choice of formula: minimise "
            "log10(error) + w * complexity (1, 2 inputs: direct search vs the KAN's formula).", low=0.0),
    Setting("finetune_steps", "finetune.steps", "int", "LBFGS steps of the fine-tuning after pruning.", low=1,
            high=MAX_STEPS),
    Setting("time_limit", "time_limit", "float", "Seconds the run may take, counted from its start. When they run "
            "out, the stages stop early, the best verified formula found so far is the answer, and what was cut short "
            "is named. A limit that does not bind changes nothing.",
            low=0.0, none="no limit", off=0.0),
    Setting("seed", "seed", "int", "Seed of every random choice of the run.", low=0, high=MAX_SEED),
    Setting("device", "device", "text", "Torch device: cpu, cuda, cuda:0, ..."),
)
"""The user-facing settings of a discovery run, in the order of ``kansym fit --help``."""

_BY_NAME = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    """The row of :data:`SETTINGS` named ``name``.

    Raises
    ------
    ConfigError
        No setting has that name.
    """
    if name not in _BY_NAME:
        raise ConfigError(f"unknown setting {name!r}; valid: {', '.join(_BY_NAME)}")
    return _BY_NAME[name]


def settings_config(values: Mapping[str, Any]) -> DiscoverConfig:
    """The :class:`DiscoverConfig` of the settings ``values`` (by :attr:`Setting.name`) over its defaults.

    Sequences become tuples (``hidden`` of ints, ``library`` and ``keep_inputs`` of str).

    Raises
    ------
    ConfigError
        An unknown name, or the config's own checks (e.g. a NaN ``lamb``).
    """
    config = DiscoverConfig()
    changes: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        row = setting(name)
        if row.kind == "ints":
            value = tuple(int(v) for v in value)
        elif row.kind == "names" and value is not None:
            value = tuple(str(v) for v in value)
        top, _, inner = row.field.partition(".")
        if inner:
            nested.setdefault(top, {})[inner] = value
        else:
            changes[top] = value
    for top, inner_changes in nested.items():
        changes[top] = getattr(config, top).replace(**inner_changes)
    return config.replace(**changes)


def settings_doc(names: list[str], extra: Mapping[str, str] | None = None, notes: Mapping[str, str] | None = None) -> str:
    """numpydoc ``Parameters`` entries of the settings ``names``, indented for a class docstring:
    ``name : type, default=value`` (the config's) and the setting's meaning.

    Parameters
    ----------
    names : list of str
        Setting names, or names of ``extra``.
    extra : mapping of str to str
        The whole entry (type line and text) of a name that is no setting.
    notes : mapping of str to str
        A sentence the caller adds to a setting's meaning.
    """
    extra, notes, entries = extra or {}, notes or {}, []
    for name in names:
        if name in extra:
            entries.append(textwrap.indent(extra[name].strip("\n"), "    "))
            continue
        s = setting(name)
        text = " ".join(t for t in (s.help, f"None: {s.none}." if s.none else "", notes.get(name, "")) if t)
        entries.append(f"    {s.name} : {s.doc_type()}, default={s.default()!r}\n"
                       + textwrap.fill(text, 100, initial_indent=" " * 8, subsequent_indent=" " * 8))
    return "\n".join(entries)
