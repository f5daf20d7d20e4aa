import pytest
import torch

from kansym.errors import ConfigError
from kansym.nn import KAN, KANConfig, KANLayer


def _trained_like_layer(seed=0):
    gen = torch.Generator().manual_seed(seed)
    layer = KANLayer(3, 2, grid_size=5, spline_order=3, generator=gen).double()
    with torch.no_grad():
        layer.coef.copy_(torch.randn(layer.coef.shape, generator=gen, dtype=torch.float64))
    return layer


def test_forward_equals_sum_of_edges_and_accepts_leading_dims():
    layer = _trained_like_layer()
    x = torch.rand(4, 7, 3, dtype=torch.float64) * 2 - 1
    out = layer(x)
    assert out.shape == (4, 7, 2)
    edges = layer.edge_outputs(x.reshape(-1, 3))
    torch.testing.assert_close(out.reshape(-1, 2), edges.sum(-1))
    # each edge is w_b silu(x) + w_s spline(x): check one edge by hand
    xi = x.reshape(-1, 3)[:, 1]
    from kansym.nn.spline import bspline_basis

    basis = bspline_basis(x.reshape(-1, 3), layer.grid, 3)[:, 1, :]
    manual = layer.scale_base[0, 1] * torch.nn.functional.silu(xi) + layer.scale_sp[0, 1] * basis @ layer.coef[0, 1]
    torch.testing.assert_close(edges[:, 0, 1], manual)


def test_grid_update_keeps_the_function():
    # a smooth learned function per edge (as after training): sin(a x) + x^2 shapes
    layer = KANLayer(3, 2, grid_size=5, spline_order=3).double()
    xs = torch.linspace(-1, 1, 400, dtype=torch.float64)[:, None].expand(400, 3)
    amp = torch.tensor([[0.5, 1.0, 1.5], [2.0, -1.0, 0.7]], dtype=torch.float64)  # (out, in)
    target = torch.sin(amp[None] * xs[:, None, :]) + 0.3 * xs[:, None, :] ** 2  # (400, out, in)
    from kansym.nn.spline import curve_to_coef

    with torch.no_grad():
        layer.coef.copy_(curve_to_coef(xs, target, layer.grid, 3))
    x = torch.rand(2000, 3, dtype=torch.float64) * 1.6 - 0.9  # inside the old grid
    before = layer(x)
    layer.update_grid(x)
    after = layer(x)
    assert (after - before).abs().max().item() < 1e-3
    assert layer.grid[:, 3].min() >= -0.9 - 1e-9  # new knots follow the data


def test_grid_extension_keeps_the_function_and_model_unchanged():
    model = KAN(KANConfig(width=(2, 3, 1), grid_size=5, seed=3)).double()
    with torch.no_grad():
        for layer in model.layers:
            layer.coef.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))
    x = torch.rand(3000, 2, dtype=torch.float64) * 2 - 1
    before = model(x)
    finer = model.extend_grid(x, 20)
    assert finer.layers[0].coef.shape == (3, 2, 23)
    assert (finer(x) - before).abs().max().item() < 1e-3
    torch.testing.assert_close(model(x), before)  # receiver untouched


def test_mask_removes_edge():
    layer = _trained_like_layer()
    x = torch.rand(10, 3, dtype=torch.float64)
    layer.mask[1, 2] = 0
    assert torch.all(layer.edge_outputs(x)[:, 1, 2] == 0)
    torch.testing.assert_close(layer(x), layer.edge_outputs(x).sum(-1))


def test_trace_matches_forward_and_same_seed_same_model():
    a = KAN(KANConfig(width=(3, 4, 2), seed=7))
    b = KAN(KANConfig(width=(3, 4, 2), seed=7))
    x = torch.randn(16, 3)
    tr = a.trace(x)
    assert [t.edges.shape for t in tr.layers] == [(16, 4, 3), (16, 2, 4)]
    torch.testing.assert_close(tr.output, a(x), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(a(x), b(x), atol=0, rtol=0)
    assert a.width == (3, 4, 2)


def test_state_round_trip():
    a = KAN(KANConfig(width=(2, 3, 1), grid_size=4, seed=1))
    b = KAN.from_state(a.state())
    x = torch.randn(8, 2)
    torch.testing.assert_close(a(x), b(x), atol=0, rtol=0)


@pytest.mark.parametrize(
    "kwargs, msg",
    [({"width": (2,)}, "at least an input"), ({"width": (2, 0, 1)}, "at least one node"), ({"grid_size": 0}, "grid_size")],
)
def test_bad_config_is_a_config_error(kwargs, msg):
    with pytest.raises(ConfigError, match=msg):
        KANConfig(**kwargs)


def test_wrong_input_width_is_a_config_error():
    with pytest.raises(ConfigError, match="expects 2 input features"):
        KAN(KANConfig(width=(2, 1)))(torch.zeros(3, 5))
