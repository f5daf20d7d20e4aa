"""Resumable runs: what an interrupted ``kansym train`` / ``kansym fit`` saves, and how it continues.

An interrupted run is saved as an ordinary KAN checkpoint
(:class:`~kansym.io.bundle.ModelBundle`, usable by ``prune`` and ``symbolify``)
whose ``meta["resume"]`` holds, as plain data:

- ``fit_state``: the :class:`~kansym.train.state.FitState` (optimiser memory,
  batch generator, history) at the end of the last completed step;
- ``discover_config``: the :class:`~kansym.discover.config.DiscoverConfig` of the run;
- ``data_sha256``: a fingerprint of the training rows, so that resuming on other
  data is refused instead of silently continuing a different problem;
- ``stage``: which training of the run was interrupted (``"shortcut"`` or ``"main"``).

The record is read once (:func:`load_resume` or :func:`read_resume`) into a
:class:`ResumePoint`, which the pipeline takes as it is.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kansym.discover.config import DiscoverConfig
from kansym.errors import CheckpointError, ConfigError, DataError
from kansym.io.bundle import ModelBundle
from kansym.train.state import FitState

__all__ = ["ResumePoint", "ResumeConflict", "data_fingerprint", "resume_record", "read_resume", "load_resume",
           "merge_resume_config", "TRAINING_FIELDS"]

# DiscoverConfig fields (dotted for nested TrainConfig fields) that shape the training of a run:
# a resumed run must keep them
TRAINING_FIELDS = ("hidden", "grid_size", "space", "seed", "train.lamb")


def data_fingerprint(x: np.ndarray, y: np.ndarray) -> str:
    """SHA-256 of the training rows (float64 values and shapes), CSV units."""
    h = hashlib.sha256()
    for a in (x, y):
        a = np.ascontiguousarray(a, dtype=np.float64)
        h.update(repr(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def resume_record(state: FitState, config: DiscoverConfig, x: np.ndarray, y: np.ndarray, *,
                  stage: str = "main") -> dict:
    """The plain ``meta["resume"]`` entry of an interrupted run.

    Parameters
    ----------
    state : FitState
    config : DiscoverConfig
        The whole run's config (not the config of the stage that was running).
    x, y : ndarray, CSV units
        The rows the interrupted training trains on.
    stage : str
        The training stage that was interrupted.
    """
    return {"fit_state": state.to_dict(), "discover_config": config.to_dict(), "data_sha256": data_fingerprint(x, y),
            "stage": stage}


@dataclass(frozen=True)
class ResumePoint:
    """An interrupted run, read once from its checkpoint.

    Attributes
    ----------
    bundle : ModelBundle
        The model at the end of the last completed step, with its transform.
    state : FitState
    config : DiscoverConfig
        The interrupted run's config.
    data_sha256 : str
        Fingerprint of the rows it trains on (:func:`data_fingerprint`).
    stage : str
        ``"shortcut"`` or ``"main"`` for ``kansym fit``; ``"main"`` for ``kansym train``.
    source : str
        The checkpoint's path, for messages.
    """

    bundle: ModelBundle
    state: FitState
    config: DiscoverConfig
    data_sha256: str
    stage: str = "main"
    source: str = "the resumed checkpoint"

    def check_data(self, x: np.ndarray, y: np.ndarray) -> None:
        """Refuse rows other than those the run was given.

        Raises
        ------
        DataError
        """
        if data_fingerprint(x, y) != self.data_sha256:
            raise DataError(
                f"the data differ from the rows '{self.source}' was trained on; resume with the same file, "
                "target, inputs and --dropna"
            )


class ResumeConflict(ConfigError):
    """A resumed run was given a training option with another value than the saved one.

    Attributes
    ----------
    field : str
        The :data:`TRAINING_FIELDS` entry (``"train.lamb"``, ``"hidden"``, ...).
    given, saved : object
        The two values.
    """

    def __init__(self, field: str, given: Any, saved: Any) -> None:
        super().__init__(f"cannot resume with {field} = {_show(given)}: the run was started with {_show(saved)}; "
                         f"keep {field} or start a new run")
        self.field, self.given, self.saved = field, given, saved


def _config_from_record(data: Any) -> DiscoverConfig:
    try:
        return DiscoverConfig.from_dict(dict(data))
    except (KeyError, TypeError, ValueError) as exc:  # ConfigError is a ValueError
        raise CheckpointError(f"the saved run options cannot be read ({exc}); the run cannot be resumed") from exc


def read_resume(bundle: ModelBundle, source: str = "the resumed checkpoint") -> ResumePoint:
    """The resume point stored in ``bundle``.

    Raises
    ------
    CheckpointError
        The checkpoint holds no (readable) resume state: it is a finished model.
    """
    record = bundle.meta.get("resume")
    if not isinstance(record, dict):
        raise CheckpointError(
            f"'{source}' is a finished model, not an interrupted run; only checkpoints saved on Ctrl-C can be resumed"
        )
    state = FitState.from_dict(record.get("fit_state", {}))
    config = _config_from_record(record.get("discover_config", {}))
    return ResumePoint(bundle=bundle, state=state, config=config, data_sha256=str(record.get("data_sha256", "")),
                       stage=str(record.get("stage", "main")), source=source)


def load_resume(path: str | Path) -> ResumePoint:
    """Read the checkpoint of an interrupted run (``weights_only`` load) and its resume record.

    Raises
    ------
    CheckpointError
        Missing, corrupt or finished checkpoint.
    """
    return read_resume(ModelBundle.load(path), str(path))


def merge_resume_config(saved: DiscoverConfig, current: DiscoverConfig, given: set[str]) -> DiscoverConfig:
    """The config of a resumed run: the saved training options, the rest from ``current``.

    Parameters
    ----------
    saved : DiscoverConfig
        The interrupted run's config.
    current : DiscoverConfig
        The new invocation's config (defaults where nothing was given).
    given : set of str
        The fields the caller set explicitly, dotted for nested ones (``"train.lamb"``,
        ``"train.steps"``). A given :data:`TRAINING_FIELDS` entry must equal the saved
        value; a given ``"train.steps"`` makes the run longer or shorter (not below the
        steps already done, see :meth:`kansym.train.state.check_resume`).

    Raises
    ------
    ResumeConflict
        A field of :data:`TRAINING_FIELDS` was given with another value than the saved one.
    """
    for name in TRAINING_FIELDS:
        if name in given and _get(current, name) != _get(saved, name):
            raise ResumeConflict(name, _get(current, name), _get(saved, name))
    train = saved.train.replace(device=current.device)
    if "train.steps" in given:
        train = train.replace(steps=current.train.steps)
    return current.replace(
        hidden=saved.hidden, grid_size=saved.grid_size, spline_order=saved.spline_order, space=saved.space,
        seed=saved.seed, dtype=saved.dtype, train=train,
    )


def _get(config: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        config = getattr(config, part)
    return config


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)
