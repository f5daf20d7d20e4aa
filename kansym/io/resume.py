"""Resumable KAN checkpoints: what an interrupted ``kansym train``/``kansym fit`` saves.

An interrupted run is saved as an ordinary KAN checkpoint
(:class:`~kansym.io.bundle.ModelBundle`, usable by ``prune`` and ``symbolify``)
whose ``meta["resume"]`` holds, as plain data:

- ``fit_state``: the :class:`~kansym.train.state.FitState` (optimiser memory,
  batch generator, history) at the end of the last completed step;
- ``discover_config``: the :class:`~kansym.pipeline.DiscoverConfig` of the run;
- ``data_sha256``: a fingerprint of the training rows, so that resuming on other
  data is refused instead of silently continuing a different problem.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from kansym.errors import CheckpointError, ConfigError, DataError
from kansym.train.fit import TrainConfig
from kansym.train.state import FitState

__all__ = ["ResumePoint", "data_fingerprint", "resume_record", "read_resume", "discover_config_from_dict",
           "merge_resume_config", "TRAINING_OPTIONS"]

# CLI option -> (DiscoverConfig field, TrainConfig field or None): the options that shape training.
TRAINING_OPTIONS = {
    "hidden": ("hidden", None),
    "grid_size": ("grid_size", None),
    "space": ("space", None),
    "seed": ("seed", None),
    "lamb": ("train", "lamb"),
}


def data_fingerprint(x: np.ndarray, y: np.ndarray) -> str:
    """SHA-256 of the training rows (float64 values and shapes), CSV units."""
    h = hashlib.sha256()
    for a in (x, y):
        a = np.ascontiguousarray(a, dtype=np.float64)
        h.update(repr(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def resume_record(state: FitState, config: Any, x: np.ndarray, y: np.ndarray) -> dict:
    """The plain ``meta["resume"]`` entry of an interrupted run.

    Parameters
    ----------
    state : FitState
    config : DiscoverConfig
    x, y : ndarray, CSV units
        The rows the run trains on.
    """
    return {"fit_state": state.to_dict(), "discover_config": config.to_dict(), "data_sha256": data_fingerprint(x, y)}


@dataclass(frozen=True)
class ResumePoint:
    """What :func:`read_resume` found in a checkpoint."""

    state: FitState
    config: Any  # DiscoverConfig
    data_sha256: str


def discover_config_from_dict(data: dict) -> Any:
    """Rebuild a :class:`~kansym.pipeline.DiscoverConfig` from ``to_dict`` output (nested configs included).

    Raises
    ------
    CheckpointError
        If the dict does not describe a valid config.
    """
    from kansym.pipeline import DiscoverConfig

    try:
        d = dict(data)
        d["hidden"] = tuple(d["hidden"])
        d["train"] = TrainConfig.from_dict(d["train"])
        d["finetune"] = TrainConfig.from_dict(d["finetune"])
        if d.get("library") is not None:
            d["library"] = tuple(d["library"])
        return DiscoverConfig.from_dict(d)
    except (KeyError, TypeError, ValueError) as exc:  # ConfigError is a ValueError
        raise CheckpointError(f"the saved run options cannot be read ({exc}); the run cannot be resumed") from exc


def read_resume(bundle: Any, source: str, x: np.ndarray | None = None, y: np.ndarray | None = None) -> ResumePoint:
    """The resume point stored in ``bundle`` (a :class:`~kansym.io.bundle.ModelBundle`).

    Parameters
    ----------
    bundle : ModelBundle
    source : str
        The checkpoint's path, for messages.
    x, y : ndarray, optional
        The rows of the resumed run; when given they must be the interrupted run's.

    Raises
    ------
    CheckpointError
        The checkpoint holds no (readable) resume state: it is a finished model.
    DataError
        ``x, y`` differ from the rows the run was trained on.
    """
    record = bundle.meta.get("resume")
    if not isinstance(record, dict):
        raise CheckpointError(
            f"'{source}' is a finished model, not an interrupted run; only checkpoints saved on Ctrl-C can be resumed"
        )
    state = FitState.from_dict(record.get("fit_state", {}))
    config = discover_config_from_dict(record.get("discover_config", {}))
    sha = str(record.get("data_sha256", ""))
    if x is not None and y is not None and data_fingerprint(x, y) != sha:
        raise DataError(
            f"the data differ from the rows '{source}' was trained on; resume with the same file, "
            "target, inputs and --dropna"
        )
    return ResumePoint(state=state, config=config, data_sha256=sha)


def merge_resume_config(saved: Any, current: Any, given: set[str], steps_given: bool) -> Any:
    """The config of a resumed run: the saved training options, the rest from the command line.

    Parameters
    ----------
    saved : DiscoverConfig
        The interrupted run's config.
    current : DiscoverConfig
        Built from the command line (defaults where an option was not given).
    given : set of str
        CLI option names given explicitly (keys of :data:`TRAINING_OPTIONS` matter).
    steps_given : bool
        Whether ``--steps`` was given (the run may then be made longer or shorter,
        down to the steps already done).

    Raises
    ------
    ConfigError
        An option that shapes training was given with another value than the saved one.
    """
    for option, (field, sub) in TRAINING_OPTIONS.items():
        if option not in given:
            continue
        now, then = getattr(current, field), getattr(saved, field)
        if sub is not None:
            now, then = getattr(now, sub), getattr(then, sub)
        if now != then:
            flag = "--" + option.replace("_", "-")
            raise ConfigError(
                f"cannot resume with {flag} {_show(now)}: the run was started with {_show(then)}; "
                f"drop {flag} or start a new run"
            )
    train = saved.train.replace(device=current.device)
    if steps_given:
        train = train.replace(steps=current.train.steps)
    return current.replace(
        hidden=saved.hidden, grid_size=saved.grid_size, spline_order=saved.spline_order, space=saved.space,
        seed=saved.seed, dtype=saved.dtype, train=train,
    )


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)
