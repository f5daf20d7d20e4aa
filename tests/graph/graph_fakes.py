"""Fake KAN models and edge fits for graph tests (no dependency on kansym.nn)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import SimpleNamespace

import torch


def fake_kan(width, masks=None):
    """A SimpleNamespace with the KAN interface the graph builder reads."""
    layers = []
    for l in range(len(width) - 1):
        n_in, n_out = width[l], width[l + 1]
        mask = torch.ones(n_out, n_in) if masks is None else torch.as_tensor(masks[l], dtype=torch.float32)
        layers.append(SimpleNamespace(in_features=n_in, out_features=n_out, mask=mask))
    return SimpleNamespace(width=tuple(width), layers=layers)


@dataclass(frozen=True)
class FakeFit:
    primitive: str
    a: float
    b: float
    c: float
    d: float
    r2: float
    p: float | None = None

    def to_dict(self):
        return asdict(self)
