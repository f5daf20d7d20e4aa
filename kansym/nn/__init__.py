"""KAN building blocks: pure B-spline math, the KAN layer and the KAN model.

The names below import their module on first use (PEP 562), so that
``kansym.nn.config`` (:class:`KANConfig`) is read without torch, e.g. by ``kansym --help``.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["KAN", "KANConfig", "KANLayer", "KANTrace", "LayerTrace"]

_WHERE = {"KAN": "kan", "KANTrace": "kan", "LayerTrace": "kan", "KANConfig": "config", "KANLayer": "layer"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"kansym.nn.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'kansym.nn' has no attribute {name!r}")
