"""Safe checkpoints: plain dicts of tensors, written atomically, loaded without code.

A kansym checkpoint is ``torch.save`` of a plain dict (docs/algorithms.md, "Conventions") carrying a
header::

    {"format": "kansym", "version": 1, "kind": "kan" | "kan-gpt" | ..., ...}

Only dicts, lists, tuples, tensors, str, int, float, bool and None may be saved
(:func:`save_checkpoint` checks this before writing), and loading always uses
``torch.load(..., weights_only=True)``, which refuses any pickle that would run
code. Writes go to a temporary file in the same directory, are flushed and
fsynced, then renamed over the target, so a crash never leaves half a file.
"""

from __future__ import annotations

import collections
import logging
import os
import warnings
from pathlib import Path
from typing import Any, Sequence

import torch

from kansym.io.atomic import atomic_write
from kansym.errors import CheckpointError

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "save_checkpoint",
    "load_checkpoint",
    "validate_plain",
]

logger = logging.getLogger("kansym")

CHECKPOINT_FORMAT = "kansym"
CHECKPOINT_VERSION = 1

# How to tell a person which commands accept a checkpoint of each kind.
_KIND_HINTS = {
    "kan": "use it with `kansym prune`, `kansym symbolify` or `kansym graph`",
    "kan-gpt": "use `kansym gpt ...` with it",
}

_SCALARS = (str, int, float, bool, type(None))
_MAPPINGS = (dict, collections.OrderedDict)


def validate_plain(obj: Any, where: str = "checkpoint") -> None:
    """Check that ``obj`` holds only what ``weights_only`` loading accepts.

    Allowed: ``dict``/``OrderedDict`` with str or int keys, ``list``, ``tuple``,
    ``torch.Tensor`` (and ``nn.Parameter``), ``str``, ``int``, ``float``,
    ``bool`` and ``None``, nested to any depth.

    Parameters
    ----------
    obj : object
        The value to check.
    where : str
        Name of ``obj`` used in the message.

    Raises
    ------
    TypeError
        On the first value of another type, naming its location, e.g.
        ``checkpoint['config']['act']`` is a function.
    """
    stack: list[tuple[Any, str]] = [(obj, where)]
    seen: set[int] = set()
    while stack:
        value, loc = stack.pop()
        t = type(value)
        if t in _SCALARS:
            continue
        if t is torch.Tensor or t is torch.nn.Parameter:
            continue
        if id(value) in seen:
            raise TypeError(f"{loc} refers back to itself; a checkpoint must be a tree.")
        if t in _MAPPINGS:
            seen.add(id(value))
            for k, v in value.items():
                if type(k) not in (str, int):
                    raise TypeError(
                        f"{loc} has a key of type {type(k).__name__}; use str or int keys."
                    )
                stack.append((v, f"{loc}[{k!r}]"))
            continue
        if t in (list, tuple):
            seen.add(id(value))
            stack.extend((v, f"{loc}[{i}]") for i, v in enumerate(value))
            continue
        hint = ""
        if hasattr(value, "tolist"):
            hint = " (convert arrays with torch.as_tensor or .tolist())"
        elif isinstance(value, torch.nn.Module):
            hint = " (save module.state_dict() and the config instead)"
        elif callable(value):
            hint = " (store functions by name)"
        raise TypeError(
            f"{loc} is a {t.__module__}.{t.__qualname__}; a checkpoint may hold only "
            f"dicts, lists, tuples, tensors, str, int, float, bool and None{hint}."
        )


def save_checkpoint(
    obj: dict[str, Any],
    path: str | os.PathLike[str],
    *,
    overwrite_protect: Sequence[str | os.PathLike[str]] = (),
) -> Path:
    """Write a checkpoint dict atomically with ``torch.save``.

    The header entries ``format`` and ``version`` are added when absent (in a
    copy; ``obj`` is not modified). Parent directories are created.

    Parameters
    ----------
    obj : dict
        Plain data (see :func:`validate_plain`) with a ``'kind'`` entry such as
        ``'kan'`` or ``'kan-gpt'``.
    path : str or PathLike
        Destination file.
    overwrite_protect : sequence of paths
        Files that must never be replaced by the checkpoint (e.g. the input data).

    Returns
    -------
    pathlib.Path
        The written path.

    Raises
    ------
    TypeError
        If ``obj`` is not a dict or holds a value that is not plain data.
    ValueError
        If ``obj`` has no str ``'kind'`` entry.
    CheckpointError
        If ``path`` is one of ``overwrite_protect``, is a directory, or cannot be
        written (the previous file, if any, is then left intact).
    """
    if type(obj) not in _MAPPINGS:
        raise TypeError(f"a checkpoint must be a dict, got {type(obj).__name__}.")
    validate_plain(obj)
    if not isinstance(obj.get("kind"), str):
        raise ValueError("a checkpoint dict needs a 'kind' entry such as 'kan' or 'kan-gpt'.")
    payload = dict(obj)
    payload.setdefault("format", CHECKPOINT_FORMAT)
    payload.setdefault("version", CHECKPOINT_VERSION)

    path = Path(path)
    for protected in overwrite_protect:
        if _same_file(path, Path(protected)):
            raise CheckpointError(
                f"refusing to overwrite '{protected}' with a checkpoint; choose another output path."
            )
    if path.is_dir():
        raise CheckpointError(f"'{path}' is a directory; give a file name for the checkpoint.")

    return atomic_write(path, lambda fh: torch.save(payload, fh), error=CheckpointError, what="checkpoint")


def load_checkpoint(path: str | os.PathLike[str], *, kind: str | None = None) -> dict[str, Any]:
    """Load a kansym checkpoint safely (``weights_only=True``, tensors on CPU).

    Parameters
    ----------
    path : str or PathLike
        A file written by :func:`save_checkpoint`.
    kind : str, optional
        Expected ``'kind'`` (``'kan'``, ``'kan-gpt'``, ...); any kind if None.

    Returns
    -------
    dict
        The saved dict, header included.

    Raises
    ------
    CheckpointError
        If the file is missing, truncated or corrupt, holds anything but plain
        data (a pickle that would run code is refused, never executed), is not a
        kansym checkpoint, has an unknown format version, or is of another kind.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint '{path}' does not exist; check the path.")
    if path.is_dir():
        raise CheckpointError(f"'{path}' is a directory; give the checkpoint file.")
    try:
        with warnings.catch_warnings():
            # Raw pickles of protocol > 2 make torch warn before it refuses them.
            warnings.filterwarnings("ignore", message=".*pickle protocol", category=UserWarning)
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types on bad bytes; all mean one thing
        msg = str(exc)
        logger.debug("loading %s failed: %s", path, msg)
        if "GLOBAL" in msg or "Unsupported global" in msg:
            raise CheckpointError(
                f"'{path}' contains objects other than plain tensors and containers and was "
                "refused for safety; load only checkpoints written by kansym."
            ) from exc
        raise CheckpointError(
            f"'{path}' is not a readable checkpoint (truncated or corrupt); re-create it."
        ) from exc

    if not isinstance(obj, dict) or obj.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"'{path}' is not a kansym checkpoint; give a file saved by kansym.")
    version = obj.get("version")
    if type(version) is not int or version != CHECKPOINT_VERSION:
        if type(version) is int and version > CHECKPOINT_VERSION:
            advice = "it was written by a newer kansym; upgrade kansym to read it"
        else:
            advice = "re-create it with this kansym, or use the kansym release that wrote it"
        raise CheckpointError(
            f"'{path}' has checkpoint format version {version!r} but this kansym reads "
            f"version {CHECKPOINT_VERSION}; {advice}."
        )
    got = obj.get("kind")
    if kind is not None and got != kind:
        hint = _KIND_HINTS.get(str(got), f"a '{kind}' checkpoint is needed here")
        raise CheckpointError(f"'{path}' is a {got} checkpoint; {hint}.")
    return obj


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)
