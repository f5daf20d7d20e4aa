"""Shared behaviour of kansym's frozen configuration dataclasses (docs/algorithms.md, "Conventions").

Every config (``KANConfig``, ``TrainConfig``, ``DiscoverConfig``, ``KANGPTConfig``,
``GPTTrainConfig``) is a frozen dataclass validated in ``__post_init__``; this mixin gives
them one ``replace`` / ``to_dict`` / ``from_dict``.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Sequence, TypeVar

from kansym.errors import ConfigError

__all__ = ["PlainConfig", "check_seed", "MAX_SEED", "MAX_STEPS", "R2_THRESHOLD", "THETA", "MIN_EDGE_R2", "COMPLEXITY_WEIGHT",
           "HOLDOUT", "R2_TOLERANCE", "check_numbers"]

C = TypeVar("C", bound="PlainConfig")

MAX_SEED = 2**63 - 1  # numpy's SeedSequence takes no negative seed, torch.manual_seed none above 2**64 - 1
MAX_STEPS = 10**9  # optimiser steps of one run: more would not end in a lifetime, and overflow the progress bar
# R² an edge's primitive must reach to be taken outright (else the trade-off with complexity decides;
# kansym.symbolic.fit.select_edge_fit): the one default of every r2_threshold (configs, CLI, estimator)
R2_THRESHOLD = 0.999
# R² by which two versions of one formula (rounded or refitted constants, a rewrite, the table's units
# instead of the working ones) may differ and still count as equal: float64 rounding, not fit
R2_TOLERANCE = 1e-6
# a term of a sum whose median size on the rows is below this share of the sum's largest term: no
# data resolve it (issue 34: a printed formula keeps no such term), kansym.symbolic.pareto
NEGLIGIBLE_TERM = 1e-6
# The defaults below are DiscoverConfig's (kansym.discover.config, where their meaning is given and
# from which kansym fit's options and KANRegressor's parameters are generated); they are defined here,
# in the lowest layer, because functions of the lower layers take them as defaults too.
SEED = 0  # seed of every random choice when none is given (configs, the CLI's --seed)
DEVICE = "cpu"  # torch device when none is given (configs, the CLI's --device)
THETA = 1e-2  # node pruning threshold (KAN paper §2.5.1): kansym.prune.prune, kansym.gpt.prune
MIN_EDGE_R2 = 0.9  # an edge's best primitive below this R² leaves the edge numeric (kansym.symbolic.compose)
COMPLEXITY_WEIGHT = 0.05  # w of the formula choice log10(error) + w * complexity (kansym.symbolic.direct)
HOLDOUT = 0.2  # share of the rows held out to verify a formula (kansym.discover.pysr too)


def check_seed(seed: Any, name: str = "seed") -> None:
    """Raise ConfigError unless ``seed`` is an integer in ``[0, MAX_SEED]``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"{name} must be an integer from 0 to 2**63 - 1, got {seed!r}")


def check_numbers(config: Any, names: Sequence[str], *, integer: bool = False) -> None:
    """Raise ConfigError naming the first of ``names`` whose value on ``config`` is not a number.

    Parameters
    ----------
    config : object
        A config dataclass.
    names : sequence of str
        Its fields to check; None passes (a field that may be None is checked for it elsewhere).
    integer : bool
        Whether they must be integers. A bool is neither.

    Raises
    ------
    ConfigError
        ``lamb='abc'``: ``lamb must be a number, got 'abc'`` (a comparison would raise TypeError).
    """
    kind = numbers.Integral if integer else numbers.Real
    for name in names:
        value = getattr(config, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            raise ConfigError(f"{name} must be {'an integer' if integer else 'a number'}, got {value!r}")


class PlainConfig:
    """Mixin for frozen config dataclasses: copy with changes, plain-dict round trip."""

    def replace(self: C, **changes: Any) -> C:
        """A copy with some fields changed (validated again by ``__post_init__``)."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def to_dict(self) -> dict:
        """Plain dict of the fields, fit for a checkpoint: tuples become lists, nested configs dicts."""

        def plain(value: Any) -> Any:
            if isinstance(value, PlainConfig):
                return value.to_dict()
            if isinstance(value, tuple):
                return [plain(v) for v in value]
            return value

        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls: type[C], data: dict) -> C:
        """Inverse of :meth:`to_dict` for flat configs.

        Raises
        ------
        ConfigError
            For keys that are not fields of the config.
        """
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        if unknown:
            raise ConfigError(f"unknown {cls.__name__} fields: {', '.join(sorted(unknown))}")
        return cls(**data)
