"""KAN layers on every basis: shapes, masks, edge outputs, gradients."""

import pytest
import torch

from kansym.errors import ConfigError
from kansym.nn.bases import BASES, kan_layer_params, make_kan_layer, n_basis


@pytest.mark.parametrize("basis", BASES)
def test_layer_interface(basis):
    gen = torch.Generator().manual_seed(0)
    layer = make_kan_layer(basis, 5, 3, grid_size=4, degree=3, grid_range=(-2, 2), generator=gen).double()
    k = n_basis(basis, 4, 3)
    assert layer.coef.shape == (3, 5, k)
    assert layer.mask.shape == layer.scale_base.shape == layer.scale_sp.shape == (3, 5)
    assert sum(p.numel() for p in layer.parameters()) == kan_layer_params(5, 3, basis, 4, 3)
    x = torch.randn(2, 7, 5, dtype=torch.float64, requires_grad=True)  # any leading dims
    out = layer(x)
    assert out.shape == (2, 7, 3)
    edges = layer.edge_outputs(x.reshape(-1, 5))  # (N, out, in)
    torch.testing.assert_close(edges.sum(-1), out.reshape(-1, 3))
    out.square().sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    assert layer.coef.grad.abs().sum() > 0


@pytest.mark.parametrize("basis", BASES)
def test_masked_edge_is_zero(basis):
    layer = make_kan_layer(basis, 4, 2, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        layer.mask[1, 2] = 0
    x = torch.randn(10, 4)
    assert torch.equal(layer.edge_outputs(x)[:, 1, 2], torch.zeros(10))
    x2 = x.clone()
    x2[:, 2] += 1.0  # input 2 no longer reaches output 1
    assert torch.allclose(layer(x)[:, 1], layer(x2)[:, 1])


def test_same_generator_same_layer():
    a = make_kan_layer("chebyshev", 3, 2, generator=torch.Generator().manual_seed(5))
    b = make_kan_layer("chebyshev", 3, 2, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a.coef, b.coef) and torch.equal(a.scale_base, b.scale_base)


def test_unknown_basis():
    with pytest.raises(ConfigError, match="basis"):
        make_kan_layer("wavelet", 2, 2)


@pytest.mark.parametrize("order", [0, 1, 2, 3, 4])
def test_fast_bspline_equals_cox_de_boor_and_has_exact_gradients(order):
    from kansym.nn.bases import BSplineKANLayer
    from kansym.nn.spline import bspline_basis, make_grid

    layer = BSplineKANLayer(3, 2, 4, order, grid_range=(-2.0, 2.0)).double()
    x = torch.linspace(-5, 5, 301, dtype=torch.float64)[:, None].repeat(1, 3)  # inside and outside the grid
    ref = bspline_basis(x, make_grid(-2.0, 2.0, 4, order, 3, dtype=torch.float64), order)
    torch.testing.assert_close(layer.basis(x), ref, atol=1e-12, rtol=0)
    sample = (torch.rand(12, 3, dtype=torch.float64) * 8 - 4).requires_grad_()
    assert torch.autograd.gradcheck(layer.basis, (sample,))
