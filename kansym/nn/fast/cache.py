"""The first layer's features kept across the closures of a training loop (:class:`FeatureCache`), passed explicitly.

See :mod:`kansym.nn.fast` for the algorithms and their sources.
"""

from __future__ import annotations

import weakref

import torch

from kansym.nn.fast.kernels import features
from kansym.nn.fast.plan import SplinePlan

__all__ = ["FeatureCache", "features_of"]


class FeatureCache:
    """The features of a layer's recent inputs, reused while an input and the grid stay the same.

    A training loop feeds the first layer the same data tensor in every closure; its
    features ``F (N, K + 1, in)`` depend only on that tensor and the grid, so they are
    computed once per grid. A hit needs the very same tensor object (held by weak
    reference, so a freed input cannot alias a new one), unchanged since
    (``Tensor._version``), the same plan object (replaced on every grid change) and the
    same options, so a cache filled on one input is never used for another. Keeps the
    ``size`` most recent inputs (default 2: the training rows and the validation rows of
    :func:`kansym.train.fit.fit`, which passes one to every forward of a fit,
    ``model(x, feature_cache=cache)``); memory: their ``F`` (and ``dF/dx`` where asked
    for). Nothing is kept on the layer: a forward without the argument computes afresh.

    Parameters
    ----------
    size : int
        Entries kept, at least 1.
    """

    def __init__(self, size: int = 2) -> None:
        self.size = max(1, int(size))
        self._entries: list[tuple] = []  # (weakref to x, key, plan, (F, dF/dx)), most recent last
        self.hits = 0

    def features(
        self, x: torch.Tensor, xc: torch.Tensor, plan: SplinePlan, *, with_base: bool, with_deriv: bool, aux: bool = False
    ):
        """:func:`features` of ``xc`` (``x`` in the compute dtype), from the cache when ``x`` was seen recently."""
        key = (x._version, with_base, x.dtype, aux)
        for i, (ref, k, p, value) in enumerate(self._entries):
            if ref() is x and k == key and p is plan and (value[1] is not None or not with_deriv):
                self.hits += 1
                self._entries.append(self._entries.pop(i))
                return value
        value = features(xc, plan, with_base=with_base, with_deriv=with_deriv, aux=aux)
        self._entries = [e for e in self._entries if e[0]() is not None and e[0]() is not x][-(self.size - 1) :]
        if self.size == 1:
            self._entries = []
        self._entries.append((weakref.ref(x), key, plan, value))
        return value

    def clear(self) -> None:
        """Drop every entry."""
        self._entries = []


def features_of(x: torch.Tensor, xc: torch.Tensor, plan: SplinePlan, cache: FeatureCache | None, with_base: bool,
                with_deriv: bool, aux: bool = False):
    """:func:`kansym.nn.fast.kernels.features` of ``xc`` (``x`` in the compute dtype), through ``cache`` when given."""
    if cache is None:
        return features(xc, plan, with_base=with_base, with_deriv=with_deriv, aux=aux)
    return cache.features(x, xc, plan, with_base=with_base, with_deriv=with_deriv, aux=aux)
