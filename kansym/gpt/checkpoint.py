"""KAN-GPT checkpoints: model config, weights and vocabulary in one plain dict.

Layout (``kind = "kan-gpt"``, written by :func:`kansym.io.checkpoint.save_checkpoint`)::

    {"kind": "kan-gpt",
     "model": {"config": KANGPTConfig.to_dict(), "state_dict": {...}},
     "vocab": {"chars": [...]},
     "train": {...}}          # optional: training state (see kansym.gpt.train)

The unwrapped module is saved, never a ``torch.compile`` or DDP wrapper.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from kansym.errors import CheckpointError
from kansym.gpt.data import CharVocab
from kansym.gpt.model import KANGPT
from kansym.io.checkpoint import load_checkpoint, save_checkpoint

__all__ = ["LoadedGPT", "save_gpt", "load_gpt", "unwrap"]


@dataclass(frozen=True)
class LoadedGPT:
    """A KAN-GPT read back from a checkpoint.

    Attributes
    ----------
    model : KANGPT
        On CPU, in eval mode, with the dtype it was saved in.
    vocab : CharVocab
    checkpoint : dict
        The whole saved dict (training state under ``"train"`` when present).
    """

    model: KANGPT
    vocab: CharVocab
    checkpoint: dict


def unwrap(model: nn.Module) -> KANGPT:
    """The plain :class:`KANGPT` under DDP (``.module``) and ``torch.compile`` (``._orig_mod``) wrappers."""
    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif isinstance(getattr(model, "module", None), nn.Module):
            model = model.module
        else:
            return model


def save_gpt(path: str | os.PathLike[str], model: nn.Module, vocab: CharVocab, **extra) -> Path:
    """Write a KAN-GPT checkpoint atomically.

    Parameters
    ----------
    path : destination file
    model : KANGPT, possibly wrapped (the wrapper is removed)
    vocab : CharVocab
    **extra : plain data stored next to the model (e.g. ``train=...``, ``prune=...``)

    Returns
    -------
    pathlib.Path
    """
    obj = {"kind": "kan-gpt", "model": unwrap(model).state(), "vocab": vocab.to_dict(), **extra}
    return save_checkpoint(obj, path)


def load_gpt(path: str | os.PathLike[str]) -> LoadedGPT:
    """Read a KAN-GPT checkpoint (``weights_only`` loading).

    Raises
    ------
    CheckpointError
        Missing or corrupt file, another kind of checkpoint, or missing entries.
    """
    ckpt = load_checkpoint(path, kind="kan-gpt")
    if "model" not in ckpt or "vocab" not in ckpt:
        raise CheckpointError(f"'{path}' lacks the model or the vocabulary; re-create it with `kansym gpt train`")
    model = KANGPT.from_state(ckpt["model"])
    model.eval()
    return LoadedGPT(model=model, vocab=CharVocab.from_dict(ckpt["vocab"]), checkpoint=ckpt)
