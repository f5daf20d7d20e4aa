"""The first layer's feature cache, passed to forward explicitly (KAN.forward, KANLayer.forward, training_loss)."""

import pytest
import torch

from kansym.nn import KAN, KANConfig
from kansym.nn.fast import FeatureCache
from kansym.train.regularization import sampled_regularization, training_loss


def _model(seed=3):
    model = KAN(KANConfig(width=(3, 4, 2), grid_size=5, seed=seed)).double()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in model.layers:
            layer.coef.copy_(torch.randn(layer.coef.shape, generator=gen, dtype=torch.float64) * 0.3)
    return model


def _value_and_grads(model, fn):
    model.zero_grad()
    out = fn()
    (out if out.dim() == 0 else out.square().sum()).backward()
    return [out.detach()] + [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("updated", [False, True], ids=["uniform", "updated-grid"])
def test_the_same_numbers_with_and_without_the_cache(updated):
    model = _model()
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(64, 3, generator=gen, dtype=torch.float64) * 2 - 1
    if updated:
        model.update_grid(x ** 3)
    cache = FeatureCache()
    plain = _value_and_grads(model, lambda: model(x))
    first = _value_and_grads(model, lambda: model(x, feature_cache=cache))
    again = _value_and_grads(model, lambda: model(x, feature_cache=cache))  # the first layer's features reused
    assert cache.hits == 1
    for a, b, c in zip(plain, first, again):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_a_cache_filled_on_one_input_is_not_used_for_another():
    model = _model()
    gen = torch.Generator().manual_seed(1)
    x1 = torch.rand(40, 3, generator=gen, dtype=torch.float64) * 2 - 1
    x2 = torch.rand(40, 3, generator=gen, dtype=torch.float64) * 2 - 1  # same shape, other values
    cache = FeatureCache(size=1)
    y1 = model(x1, feature_cache=cache)
    y2 = model(x2, feature_cache=cache)
    assert cache.hits == 0 and not torch.equal(y1, y2)
    assert torch.equal(y2, model(x2))  # x2's own features, not x1's
    with torch.no_grad():
        x2.add_(0.25)  # the same tensor, edited in place: its cached features are stale
    assert torch.equal(model(x2, feature_cache=cache), model(x2)) and cache.hits == 0
    other = _model(seed=4)  # another model (another grid, another plan): nothing shared
    assert torch.equal(other(x2, feature_cache=cache), other(x2)) and cache.hits == 0
    assert all(not hasattr(layer, "feature_cache") for layer in model.layers)


@pytest.mark.parametrize("lamb, mu2, chunk_elements", [(0.0, 0.0, 1 << 20), (0.2, 0.0, 1 << 20), (0.2, 0.5, 1 << 20),
                                                       (0.2, 0.0, 64)])
def test_training_loss_and_the_penalty_take_the_cache_with_the_same_numbers(lamb, mu2, chunk_elements):
    model = _model()
    gen = torch.Generator().manual_seed(2)
    x = torch.rand(50, 3, generator=gen, dtype=torch.float64) * 2 - 1
    y = torch.rand(50, 2, generator=gen, dtype=torch.float64)
    cache = FeatureCache()

    def loss(c):
        return training_loss(model, x, y, lamb=lamb, mu1=0.7, mu2=mu2, chunk_elements=chunk_elements, feature_cache=c)

    plain = _value_and_grads(model, lambda: loss(None))
    for _ in range(2):
        cached = _value_and_grads(model, lambda: loss(cache))
        assert all(torch.equal(a, b) for a, b in zip(plain, cached))
    assert cache.hits == 1
    reg = _value_and_grads(model, lambda: sampled_regularization(model, x, mu1=0.7, mu2=mu2,
                                                                 chunk_elements=chunk_elements)[1])
    reg_cached = _value_and_grads(model, lambda: sampled_regularization(model, x, mu1=0.7, mu2=mu2,
                                                                        chunk_elements=chunk_elements,
                                                                        feature_cache=cache)[1])
    assert all(torch.equal(a, b) for a, b in zip(reg, reg_cached))
    assert cache.hits == (1 if lamb == 0 else 2)  # lamb = 0 cached the plain forward's features, not the penalty's
