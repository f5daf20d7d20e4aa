"""The fast KAN layer path (kansym.nn.fast) against the reference spline math, in float64."""

import pytest
import torch
import torch.nn.functional as F

from kansym.nn import KANLayer
from kansym.nn import fast
from kansym.nn.spline import bspline_basis, make_grid

DT = torch.float64


def _random_layer(in_f, out_f, grid_size, order, gen, *, base_fun="silu"):
    """A layer with random coefficients and weights on a random uniform grid per feature."""
    layer = KANLayer(in_f, out_f, grid_size, order, base_fun=base_fun, generator=gen).to(DT)
    low = torch.rand(in_f, generator=gen, dtype=DT) * 4 - 3  # (in,)
    high = low + 0.5 + torch.rand(in_f, generator=gen, dtype=DT) * 3
    layer.grid = make_grid(low, high, grid_size, order, dtype=DT)
    with torch.no_grad():
        layer.coef.copy_(torch.randn(layer.coef.shape, generator=gen, dtype=DT))
        layer.scale_base.copy_(torch.randn(layer.scale_base.shape, generator=gen, dtype=DT))
        layer.scale_sp.copy_(torch.randn(layer.scale_sp.shape, generator=gen, dtype=DT))
        layer.mask.copy_((torch.rand(layer.mask.shape, generator=gen) > 0.2).to(DT))
    return layer


def _inputs(layer, n, gen):
    """Samples inside, at the edges of and beyond each feature's extended grid."""
    lo, hi = layer.grid[:, 0], layer.grid[:, -1]  # (in,)
    span = hi - lo
    u = torch.rand(n, layer.in_features, generator=gen, dtype=DT) * 1.6 - 0.3  # 30% outside on each side
    return lo + u * span


def _reference_forward(layer, x):
    """eq. 2.10 written with the Cox–de Boor basis and autograd: (N, in) -> (N, out)."""
    basis = bspline_basis(x, layer.grid, layer.spline_order)  # (N, in, K)
    spline = torch.einsum("nik,oik->no", basis, layer.coef * (layer.scale_sp * layer.mask).unsqueeze(-1))
    if layer.base_fun == "silu":
        spline = spline + F.silu(x) @ (layer.scale_base * layer.mask).T
    return spline


def _grads(fn, layer, x, weight):
    x = x.clone().requires_grad_(True)
    params = [layer.coef, layer.scale_base, layer.scale_sp]
    out = fn(layer, x)
    grads = torch.autograd.grad((out * weight).sum(), [x, *params])
    return out.detach(), grads


@pytest.mark.parametrize("order", [1, 2, 3, 4])
@pytest.mark.parametrize("grid_size", [1, 3, 5, 12])
def test_uniform_fast_path_equals_reference_values_and_gradients(order, grid_size):
    gen = torch.Generator().manual_seed(100 * order + grid_size)
    for trial in range(3):  # three random grids per (order, G)
        layer = _random_layer(3, 4, grid_size, order, gen)
        assert layer.plan().uniform
        x = _inputs(layer, 120, gen)
        torch.testing.assert_close(layer.basis(x), bspline_basis(x, layer.grid, order), atol=1e-12, rtol=0)
        weight = torch.randn(120, 4, generator=gen, dtype=DT)
        out, grads = _grads(lambda m, t: m(t), layer, x, weight)
        ref, ref_grads = _grads(_reference_forward, layer, x, weight)
        torch.testing.assert_close(out, ref, atol=1e-11, rtol=1e-11)
        for name, g, r in zip(["x", "coef", "scale_base", "scale_sp"], grads, ref_grads):
            torch.testing.assert_close(g, r, atol=1e-10, rtol=1e-10, msg=f"grad of {name}, trial {trial}")


@pytest.mark.parametrize("order", [1, 2, 3])
def test_non_uniform_grid_after_update_grid_matches_reference(order):
    gen = torch.Generator().manual_seed(7 + order)
    layer = _random_layer(3, 2, 5, order, gen)
    samples = torch.randn(500, 3, generator=gen, dtype=DT) ** 3  # skewed: quantile knots are far from uniform
    layer.update_grid(samples)
    plan = layer.plan()
    assert not plan.uniform  # the grid moved to the data, the Cox–de Boor path is used
    x = _inputs(layer, 150, gen)
    torch.testing.assert_close(layer.basis(x), bspline_basis(x, layer.grid, order), atol=1e-12, rtol=0)
    weight = torch.randn(150, 2, generator=gen, dtype=DT)
    out, grads = _grads(lambda m, t: m(t), layer, x, weight)
    ref, ref_grads = _grads(_reference_forward, layer, x, weight)
    torch.testing.assert_close(out, ref, atol=1e-11, rtol=1e-11)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("order", [0, 1, 3])
def test_gradcheck_of_layer_in_every_argument(order):
    gen = torch.Generator().manual_seed(order)
    layer = _random_layer(2, 3, 4, order, gen)
    x = _inputs(layer, 9, gen).requires_grad_(True)
    coef = layer.coef.detach().clone().requires_grad_(True)
    scale_base = layer.scale_base.detach().clone().requires_grad_(True)
    scale_sp = layer.scale_sp.detach().clone().requires_grad_(True)

    def fn(x, coef, scale_base, scale_sp):
        return fast.kan_linear(x, coef, scale_base, scale_sp, layer.mask, layer.plan())

    assert torch.autograd.gradcheck(fn, (x, coef, scale_base, scale_sp))


def test_outside_the_grid_the_spline_part_vanishes_like_the_reference():
    gen = torch.Generator().manual_seed(3)
    layer = _random_layer(2, 2, 5, 3, gen, base_fun="zero")
    far = torch.stack([layer.grid[:, 0] - 10.0, layer.grid[:, -1] + 10.0, layer.grid[:, -1]])  # (3, in)
    out = layer(far)
    assert torch.equal(out, torch.zeros_like(out))
    assert torch.equal(layer.basis(far), bspline_basis(far, layer.grid, 3))


def test_plan_follows_grid_changes_in_place_and_by_assignment():
    layer = KANLayer(2, 2, 4, 3).to(DT)
    x = torch.linspace(-0.9, 0.9, 50, dtype=DT)[:, None].expand(50, 2)
    first = layer.plan()
    assert first.uniform and layer.plan() is first  # cached
    with torch.no_grad():
        layer.grid[0, 5] += 0.05  # an in-place edit makes the grid non-uniform
    assert not layer.plan().uniform
    torch.testing.assert_close(layer(x), _reference_forward(layer, x), atol=1e-12, rtol=0)
    layer.grid = make_grid(-2.0, 2.0, 4, 3, 2, dtype=DT)
    assert layer.plan().uniform
    torch.testing.assert_close(layer(x), _reference_forward(layer, x), atol=1e-12, rtol=0)


def test_no_batch_out_in_tensor_is_saved_for_backward():
    n, in_f, out_f = 64, 8, 32
    layer = KANLayer(in_f, out_f, 5, 3)
    x = torch.randn(n, in_f, requires_grad=True)
    saved = []

    def pack(t):
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = layer(x)
    # x, features F (N, K + 1, in), dF/dx (N, K + 1, in) and (out, in)-sized weights only
    assert max(saved) == n * 9 * in_f < n * out_f * in_f
    assert sum(saved) <= 2 * n * 9 * in_f + 4 * out_f * 9 * in_f
    out.sum().backward()
    assert x.grad.shape == (n, in_f)


def test_first_layer_saves_no_derivative():
    n, in_f, out_f = 64, 8, 32
    layer = KANLayer(in_f, out_f, 5, 3)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        layer(torch.randn(n, in_f))  # input without grad: dF/dx is neither computed nor saved
    assert n * 9 * in_f <= sum(saved) <= n * 9 * in_f + 4 * out_f * 9 * in_f


def test_compile_free_pure_kernel_equals_in_place_kernel():
    layer = KANLayer(5, 3, 6, 3).double()
    layer.grid = make_grid(-1.5, 2.0, 6, 3, 5, dtype=DT)
    plan = layer.plan()
    x = _inputs(layer, 300, torch.Generator().manual_seed(1))
    feats, deriv = fast.features(x, plan, with_base=True, with_deriv=True)
    centers = (torch.arange(plan.n_basis, dtype=DT) + 2.0).view(-1, 1)
    pure_f, pure_d = fast.kernels._cubic_pure(x, plan.t0, plan.inv_h, plan.dfac, centers, True, True)
    torch.testing.assert_close(pure_f, feats, atol=1e-12, rtol=0)
    torch.testing.assert_close(pure_d, deriv, atol=1e-10, rtol=0)


def test_old_checkpoint_without_grid_loads_with_the_uniform_grid():
    from kansym.nn.bases import BSplineKANLayer

    layer = BSplineKANLayer(3, 2, 4, 3, grid_range=(-2.0, 2.0), generator=torch.Generator().manual_seed(0))
    state = {k: v for k, v in layer.state_dict().items() if k != "grid"}  # the former fixed-grid layer's keys
    again = BSplineKANLayer(3, 2, 4, 3, grid_range=(-2.0, 2.0))
    again.load_state_dict(state)
    x = torch.randn(10, 3)
    torch.testing.assert_close(again(x), layer(x))
    torch.testing.assert_close(again.grid, make_grid(-2.0, 2.0, 4, 3, 3))


def test_bspline_basis_layer_keeps_its_initialisation():
    from kansym.nn.bases import BSplineKANLayer

    gen = torch.Generator().manual_seed(4)
    layer = BSplineKANLayer(3, 2, 5, 3, scale_noise=0.1, generator=gen)
    gen = torch.Generator().manual_seed(4)
    noise = torch.rand(2, 3, 8, generator=gen) - 0.5
    torch.testing.assert_close(layer.coef.detach(), noise * 0.1 / 8)  # ±scale_noise / (2 K), K = G + k
    assert isinstance(layer, KANLayer) and layer.degree == 3


def test_bf16_autocast_runs_the_matmul_low_and_the_basis_in_float32():
    gen = torch.Generator().manual_seed(5)
    first, second = KANLayer(8, 16, generator=gen), KANLayer(16, 4, generator=gen)
    x = torch.randn(64, 8, generator=gen, requires_grad=True)
    ref = second(first(x))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        hidden = first(x)
        out = second(hidden)  # a bf16 input: its basis is evaluated in float32
    assert hidden.dtype == out.dtype == torch.bfloat16
    assert (out.float() - ref).abs().max().item() < 0.02 * ref.abs().max().item()
    out.float().sum().backward()
    assert x.grad.dtype == torch.float32 and torch.isfinite(x.grad).all()
    assert first.coef.grad.dtype == torch.float32 and first.coef.grad.abs().sum() > 0


def _random_knots(in_f, grid_size, order, gen):
    """Sorted, strictly increasing, far from uniform knots (in, G + 2k + 1)."""
    steps = torch.rand(in_f, grid_size + 2 * order, generator=gen, dtype=DT) ** 3 + 0.02
    low = torch.rand(in_f, 1, generator=gen, dtype=DT) * 2 - 3
    return torch.cat([low, low + steps.cumsum(dim=1)], dim=1)


@pytest.mark.parametrize("order", [0, 1, 2, 3, 4])
def test_piecewise_polynomials_equal_cox_de_boor_on_random_knots(order):
    gen = torch.Generator().manual_seed(20 + order)
    for trial in range(3):
        grid = _random_knots(3, 6, order, gen)
        plan = fast.make_plan(grid, order)
        assert plan.piecewise and not plan.uniform
        ref_plan = fast.make_plan(grid, order, force_reference=True)
        lo, hi = grid[:, 0], grid[:, -1]
        x = lo + (torch.rand(400, 3, generator=gen, dtype=DT) * 1.6 - 0.3) * (hi - lo)
        x = torch.cat([x, grid.T, (grid[:, :-1] + grid[:, 1:]).T / 2])  # exactly at every knot and midpoint
        x_before = x.clone()
        feats, deriv = fast.features(x, plan, with_base=True, with_deriv=True)
        ref_f, ref_d = fast.features(x, ref_plan, with_base=True, with_deriv=True)
        assert torch.equal(x, x_before)
        torch.testing.assert_close(feats, ref_f, atol=1e-12, rtol=0)
        torch.testing.assert_close(deriv, ref_d, atol=1e-10, rtol=0)
        torch.testing.assert_close(feats[:, 1:].transpose(1, 2), bspline_basis(x, grid, order), atol=1e-12, rtol=0)


def test_piecewise_path_leaves_a_single_feature_input_unchanged():
    """(N, 1) inputs: the transposed copy shares x's memory, so nothing may write into it."""
    gen = torch.Generator().manual_seed(9)
    layer = KANLayer(1, 2, 5, 3, generator=gen).to(DT)
    layer.update_grid(torch.randn(200, 1, generator=gen, dtype=DT) ** 3)
    assert layer.plan().piecewise
    x = torch.randn(50, 1, generator=gen, dtype=DT)
    before = x.clone()
    out = layer(x)
    assert torch.equal(x, before)
    torch.testing.assert_close(out, _reference_forward(layer, x), atol=1e-12, rtol=0)


@pytest.mark.parametrize("uniform", [True, False])
def test_forward_l1_equals_edge_outputs_values_and_gradients(uniform):
    gen = torch.Generator().manual_seed(11)
    layer = _random_layer(3, 4, 5, 3, gen)
    if not uniform:
        layer.update_grid(torch.randn(300, 3, generator=gen, dtype=DT) ** 3)
    x = _inputs(layer, 80, gen).requires_grad_(True)
    w_out = torch.randn(80, 4, generator=gen, dtype=DT)
    w_l1 = torch.randn(4, 3, generator=gen, dtype=DT)
    params = [x, layer.coef, layer.scale_base, layer.scale_sp]
    out, l1 = layer.forward_l1(x)
    edges = layer.edge_outputs(x)  # (N, out, in)
    torch.testing.assert_close(out, edges.sum(-1), atol=1e-11, rtol=0)
    torch.testing.assert_close(l1, edges.abs().mean(0), atol=1e-12, rtol=0)
    got = torch.autograd.grad((out * w_out).sum() + (l1 * w_l1).sum(), params)
    ref = torch.autograd.grad((edges.sum(-1) * w_out).sum() + (edges.abs().mean(0) * w_l1).sum(), params)
    for name, g, r in zip(["x", "coef", "scale_base", "scale_sp"], got, ref):
        torch.testing.assert_close(g, r, atol=1e-10, rtol=1e-10, msg=f"grad of {name}")


def test_gradcheck_of_forward_l1():
    gen = torch.Generator().manual_seed(12)
    layer = _random_layer(2, 3, 4, 3, gen)
    layer.update_grid(torch.randn(100, 2, generator=gen, dtype=DT))
    x = _inputs(layer, 7, gen).requires_grad_(True)
    coef = layer.coef.detach().clone().requires_grad_(True)
    scale_base = layer.scale_base.detach().clone().requires_grad_(True)
    scale_sp = layer.scale_sp.detach().clone().requires_grad_(True)

    def fn(x, coef, scale_base, scale_sp):
        return fast.kan_linear_l1(x, coef, scale_base, scale_sp, layer.mask, layer.plan())

    assert torch.autograd.gradcheck(fn, (x, coef, scale_base, scale_sp))


def test_feature_cache_reuses_only_the_same_unchanged_input_on_the_same_grid():
    gen = torch.Generator().manual_seed(13)
    layer = _random_layer(2, 3, 5, 3, gen)
    cache = fast.FeatureCache()
    x = _inputs(layer, 40, gen)
    first = layer(x, cache=cache)
    assert cache.hits == 0
    torch.testing.assert_close(layer(x, cache=cache), first, atol=0, rtol=0)
    assert cache.hits == 1
    x2 = x.clone()
    layer(x2, cache=cache)  # another tensor, even with equal values: recomputed
    assert cache.hits == 1
    layer(x, cache=cache)  # two entries: training rows and validation rows alternate without recomputing
    layer(x2, cache=cache)
    assert cache.hits == 3
    with torch.no_grad():
        x2.mul_(0.5)  # edited in place: recomputed
    torch.testing.assert_close(layer(x2, cache=cache), _reference_forward(layer, x2), atol=1e-11, rtol=0)
    assert cache.hits == 3
    layer.update_grid(x2)  # new grid, new plan: recomputed
    torch.testing.assert_close(layer(x2, cache=cache), _reference_forward(layer, x2), atol=1e-11, rtol=0)
    assert cache.hits == 3
    layer(x.clone(), cache=cache)
    layer(x.clone(), cache=cache)  # a third tensor pushes out the oldest entry (size 2)
    assert len(cache._entries) == 2
    layer(x2)  # without the argument nothing is cached or reused: the layer keeps no state
    assert cache.hits == 3 and not hasattr(layer, "feature_cache")
