"""kansym.train: sparsity regularisation (KAN paper eqs. 2.17-2.20) and the training loop.

The names below import their module on first use (PEP 562), so that
``kansym.train.config`` (:class:`TrainConfig`) is read without torch, e.g. by ``kansym --help``.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__all__ = [
    "FitResult",
    "History",
    "TrainConfig",
    "edge_l1",
    "edge_weight_l1",
    "finetune",
    "fit",
    "regularization",
    "weight_regularization",
]

_WHERE = {"FitResult": "history", "History": "history", "finetune": "fit", "fit": "fit", "TrainConfig": "config",
          **dict.fromkeys(("edge_l1", "edge_weight_l1", "regularization", "weight_regularization"), "regularization")}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"kansym.train.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'kansym.train' has no attribute {name!r}")


class _Package(types.ModuleType):
    """``kansym.train.fit`` and ``kansym.train.regularization`` stay the functions, although
    importing the submodules of those names binds the modules here (import them with
    ``importlib.import_module``)."""

    def __getattribute__(self, name: str) -> Any:
        if name in ("fit", "regularization"):
            return getattr(importlib.import_module(f"kansym.train.{name}"), name)
        return super().__getattribute__(name)


sys.modules[__name__].__class__ = _Package
