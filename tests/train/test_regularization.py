import math

import pytest
import torch

from kansym.errors import ConfigError
from kansym.nn import KAN, KANConfig
from kansym.train.regularization import edge_l1, edge_weight_l1, layer_penalty, regularization, weight_regularization


def _two_edge_kan():
    """KAN (2, 1): edge 0 is the constant 2 (spline only), edge 1 is silu(x) (residual only)."""
    model = KAN(KANConfig(width=(2, 1), grid_size=5, spline_order=3)).double()
    with torch.no_grad():
        model.layers[0].scale_sp.fill_(1.0)
        model.layers[0].scale_base.copy_(torch.tensor([[0.0, 1.0]]))
        model.layers[0].coef.zero_()
        model.layers[0].coef[0, 0] = 2.0  # B-splines sum to 1 inside the grid
    return model


X = torch.tensor([[0.5, 0.5], [-0.5, -0.5]], dtype=torch.float64)


def test_edge_l1_by_hand():
    l1 = edge_l1(_two_edge_kan().trace(X))
    assert len(l1) == 1 and l1[0].shape == (1, 2)
    silu_mean = (0.5 / (1 + math.exp(-0.5)) + 0.5 / (1 + math.exp(0.5))) / 2  # mean |silu(+-0.5)| = 0.25
    torch.testing.assert_close(l1[0], torch.tensor([[2.0, silu_mean]], dtype=torch.float64))


def test_regularization_matches_hand_computation():
    trace = _two_edge_kan().trace(X)
    # |phi|_1 = [2, 0.25] -> |Phi|_1 = 2.25, p = [8/9, 1/9]
    entropy = -(8 / 9 * math.log(8 / 9) + 1 / 9 * math.log(1 / 9))  # 0.348832...
    assert abs(entropy - 0.348832) < 1e-6
    assert regularization(trace).item() == pytest.approx(2.25 + entropy, abs=1e-12)
    assert regularization(trace, mu1=2.0, mu2=0.5).item() == pytest.approx(4.5 + 0.5 * entropy, abs=1e-12)
    assert regularization(trace, mu1=0.0, mu2=1.0).item() == pytest.approx(entropy, abs=1e-12)


def test_masked_edge_is_gradient_safe():
    model = _two_edge_kan()
    with torch.no_grad():
        model.layers[0].mask[0, 1] = 0.0
    reg = regularization(model.trace(X))
    # one live edge: |Phi|_1 = 2, entropy 0
    assert reg.item() == pytest.approx(2.0, abs=1e-12)
    reg.backward()
    for p in model.parameters():
        assert torch.isfinite(p.grad).all()
    assert float(model.layers[0].coef.grad[0, 1].abs().sum()) == 0.0
    assert float(model.layers[0].scale_base.grad[0, 1]) == 0.0


def test_all_zero_layer_gives_zero_and_finite_gradients():
    model = _two_edge_kan()
    with torch.no_grad():
        model.layers[0].mask.zero_()
    reg = regularization(model.trace(X))
    reg.backward()
    assert reg.item() == 0.0
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_weight_regularization_by_hand():
    model = _two_edge_kan()
    with torch.no_grad():
        model.layers[0].coef[0, 1] = -1.0
        model.layers[0].scale_sp.copy_(torch.tensor([[0.5, 2.0]]))
    # mean |c| * |w_s| = [2 * 0.5, 1 * 2] = [1, 2]
    torch.testing.assert_close(edge_weight_l1(model)[0], torch.tensor([[1.0, 2.0]], dtype=torch.float64))
    entropy = -(1 / 3 * math.log(1 / 3) + 2 / 3 * math.log(2 / 3))
    assert weight_regularization(model, mu1=1.0, mu2=1.0).item() == pytest.approx(3.0 + entropy, abs=1e-12)


def test_negative_mu_raises():
    with pytest.raises(ConfigError):
        regularization(_two_edge_kan().trace(X), mu1=-1.0)


def test_sampled_regularization_equals_the_trace_based_one_in_chunks():
    from kansym.train.regularization import sampled_regularization

    model = KAN(KANConfig(width=(3, 4, 2), seed=2)).double()
    with torch.no_grad():
        for layer in model.layers:
            layer.coef.normal_(generator=torch.Generator().manual_seed(1))
    x = torch.rand(50, 3, dtype=torch.float64) * 2 - 1
    params = list(model.parameters())
    trace = model.trace(x)
    ref = regularization(trace, mu1=1.0, mu2=0.5) + trace.output.square().mean()
    ref_grads = torch.autograd.grad(ref, params)
    out, reg = sampled_regularization(model, x, mu1=1.0, mu2=0.5, chunk_elements=7 * 12)  # 7-row chunks
    torch.testing.assert_close(out, trace.output.detach(), atol=1e-12, rtol=0)
    total = reg + out.square().mean()
    torch.testing.assert_close(total.detach(), ref.detach(), atol=1e-12, rtol=0)
    for g, r in zip(torch.autograd.grad(total, params), ref_grads):
        torch.testing.assert_close(g, r, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("mu2", [0.0, 0.5])
def test_one_pass_sampled_regularization_equals_the_trace_based_one(mu2):
    """Whole batch in one chunk: KANLayer.forward_l1 (one autograd node per layer), masks and a moved grid."""
    from kansym.train.regularization import sampled_regularization

    model = KAN(KANConfig(width=(3, 4, 2), seed=3)).double()
    x = torch.rand(60, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(4)) * 2 - 1
    model.update_grid(x)  # non-uniform grids: the piecewise-polynomial basis
    with torch.no_grad():
        model.layers[0].mask[1, 2] = 0.0
        model.layers[1].mask[0, 3] = 0.0
    params = list(model.parameters())
    trace = model.trace(x)
    ref = regularization(trace, mu1=0.7, mu2=mu2) + trace.output.square().mean()
    ref_grads = torch.autograd.grad(ref, params)
    out, reg = sampled_regularization(model, x, mu1=0.7, mu2=mu2)
    total = reg + out.square().mean()
    torch.testing.assert_close(out, trace.output.detach(), atol=1e-12, rtol=0)
    torch.testing.assert_close(total.detach(), ref.detach(), atol=1e-12, rtol=0)
    grads = torch.autograd.grad(total, params)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, atol=1e-10, rtol=1e-10)
    coef_grad = dict(zip([n for n, _ in model.named_parameters()], grads))["layers.0.coef"]
    assert torch.equal(coef_grad[1, 2], torch.zeros_like(coef_grad[1, 2]))  # a masked edge gets no gradient


def test_layer_penalty_without_entropy_is_the_l1_term():
    scores = torch.tensor([[0.5, 0.0], [0.25, 1.0]], dtype=torch.float64, requires_grad=True)
    value = layer_penalty(scores, mu1=2.0, mu2=0.0)
    assert value.item() == 2.0 * 1.75
    (grad,) = torch.autograd.grad(value, scores)
    torch.testing.assert_close(grad, torch.full((2, 2), 2.0, dtype=torch.float64))


@pytest.mark.parametrize("lamb, mu2, chunk_elements", [(0.2, 0.0, 1 << 20), (0.0, 0.0, 1 << 20), (0.2, 0.5, 1 << 20),
                                                       (0.2, 0.0, 64)])
def test_training_loss_equals_the_composed_objective(lamb, mu2, chunk_elements):
    """One node (L1 only, or no penalty) or the composed path (entropy, chunks): the same value
    bit for bit, the same gradients; a masked edge keeps a zero gradient."""
    from kansym.train.regularization import sampled_regularization, training_loss

    gen = torch.Generator().manual_seed(1)
    model = KAN(KANConfig(width=(3, 4, 2), grid_size=5, spline_order=3, seed=2)).double()
    with torch.no_grad():
        model.layers[0].mask[1, 2] = 0.0
    x = torch.rand(50, 3, generator=gen, dtype=torch.float64) * 2 - 1
    y = torch.rand(50, 2, generator=gen, dtype=torch.float64)

    def grads(loss):
        model.zero_grad()
        loss.backward()
        return [p.grad.clone() for p in model.parameters()]

    out, reg = sampled_regularization(model, x, mu1=0.7, mu2=mu2, chunk_elements=chunk_elements)
    ref = torch.mean((out - y) ** 2) + lamb * reg if lamb else torch.mean((model(x) - y) ** 2)
    loss = training_loss(model, x, y, lamb=lamb, mu1=0.7, mu2=mu2, chunk_elements=chunk_elements)
    assert loss.item() == ref.item() and loss.item() > 0
    for a, b in zip(grads(ref), grads(loss)):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-15)
    assert model.layers[0].coef.grad[1, 2].abs().max() == 0  # masked edge
    with pytest.raises(ConfigError):
        training_loss(model, x, y, lamb=lamb, mu1=-1.0, mu2=mu2)
