"""GR-KAN's group rational (safe denominator, fitted initial values, gradients, groups) and its pruning and plots."""

import math

import pytest
import torch
import torch.nn.functional as F

from kansym.errors import ConfigError
from kansym.gpt.edges import plot_edges, strongest_edges
from kansym.gpt.ffn import sparsity_penalty
from kansym.gpt.grkan import RATIONAL_INITS, GroupRational, GRKANFFN, _rational, fit_rational, rational_second_moment
from kansym.gpt.model import KANGPT
from kansym.gpt.prune import prune_gpt, unit_strengths

from .conftest import tiny_config


def coefficients(name):
    a, b = RATIONAL_INITS[name]
    return torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)


def test_safe_denominator_is_never_below_one():
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([torch.linspace(-50, 50, 2001, dtype=torch.float64), torch.randn(5000, generator=gen, dtype=torch.float64) * 10])
    for _ in range(20):
        a = torch.randn(6, generator=gen, dtype=torch.float64) * 3
        b = torch.randn(4, generator=gen, dtype=torch.float64) * 3
        q = a.new_zeros(x.shape)
        for c in reversed(b):  # B(x) = sum_j b_j x^j, Q = 1 + |B|
            q = (q + c) * x
        q = 1 + q.abs()
        assert q.min() >= 1.0
        p = sum(c * x**k for k, c in enumerate(a))
        torch.testing.assert_close(_rational(x, a, b), p / q)  # Horner gives the same rational
        assert torch.isfinite(_rational(x, a, b)).all()


def test_initial_values_approximate_their_targets():
    x = torch.linspace(-3, 3, 2001, dtype=torch.float64)
    a, b = coefficients("identity")
    assert torch.equal(_rational(x, a, b), x)
    a, b = coefficients("gelu")
    err = (_rational(x, a, b) - F.gelu(x)).abs().max().item()
    assert err < 1e-3  # 7.6e-4 measured
    # the second moment on N(0, 1) inputs (variance-preserving init) equals GELU's, 0.4252...
    x_n = torch.linspace(-8, 8, 200_001, dtype=torch.float64)
    w = torch.exp(-0.5 * x_n**2) / math.sqrt(2 * math.pi) * (x_n[1] - x_n[0])
    assert rational_second_moment(a, b) == pytest.approx(float((w * F.gelu(x_n) ** 2).sum()), abs=1e-3)
    assert rational_second_moment(*coefficients("identity")) == pytest.approx(1.0, abs=1e-6)


def test_fit_rational_reproduces_the_stored_gelu_fit():
    a, b, err = fit_rational(F.gelu, refine=False)  # the linearised start alone
    assert err < 1e-3
    x = torch.linspace(-3, 3, 601, dtype=torch.float64)
    stored = _rational(x, *coefficients("gelu"))
    assert (_rational(x, a, b) - stored).abs().max() < 2e-3


def test_gradients_finite_also_where_the_denominator_polynomial_vanishes():
    act = GroupRational(6, groups=3, init="gelu").double()
    with torch.no_grad():
        act.denominator.add_(torch.randn(act.denominator.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    x = torch.tensor([[0.0, 1e-9, -4.6, 4.6, 30.0, -30.0]], dtype=torch.float64, requires_grad=True)  # B(0) = 0
    act(x).sum().backward()
    for g in (x.grad, act.numerator.grad, act.denominator.grad):
        assert torch.isfinite(g).all()
    assert act.numerator.grad.abs().sum() > 0 and act.denominator.grad.abs().sum() > 0
    # gradcheck away from the kink of |B| (B(x) != 0)
    x2 = torch.tensor([[0.3, -0.7, 1.1, -1.9, 2.5, 0.9]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: act(v), (x2,))


def test_the_autograd_node_equals_autograd_through_the_formula():
    gen = torch.Generator().manual_seed(3)
    act = GroupRational(12, groups=3, init="gelu").double()
    with torch.no_grad():
        act.denominator.add_(0.3 * torch.randn(act.denominator.shape, generator=gen, dtype=torch.float64))
    x = (2 * torch.randn(2, 7, 12, generator=gen, dtype=torch.float64)).requires_grad_(True)
    w = torch.randn(2, 7, 12, generator=gen, dtype=torch.float64)
    a, b = act.coefficients()
    (_rational(x, a, b) * w).sum().backward()
    ref = [t.grad.clone() for t in (x, act.numerator, act.denominator)]
    for t in (x, act.numerator, act.denominator):
        t.grad = None
    out = act(x)
    torch.testing.assert_close(out, _rational(x, a, b))
    (out * w).sum().backward()
    for got, want in zip((x.grad, act.numerator.grad, act.denominator.grad), ref):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_c_kernels_equal_the_tensor_path(dtype, tol):
    from kansym.nn import fast

    if fast.backends.native_kernels() is None:
        pytest.skip("no C++ compiler: the native kernels are not built")
    gen = torch.Generator().manual_seed(4)
    act = GroupRational(37, groups=5, init="gelu").to(dtype)
    with torch.no_grad():
        act.denominator.add_(0.3 * torch.randn(act.denominator.shape, generator=gen).to(dtype))
    x0 = (2 * torch.randn(3, 11, 37, generator=gen)).to(dtype)
    w = torch.randn(3, 11, 37, generator=gen).to(dtype)
    got = {}
    try:
        for path in ("auto", "torch"):
            fast.use_backend(path)
            act.zero_grad()
            x = x0.clone().requires_grad_(True)
            out = act(x)
            (out * w).sum().backward()
            got[path] = [out.detach(), x.grad, act.numerator.grad.clone(), act.denominator.grad.clone()]
    finally:
        fast.use_backend("auto")
    for native, tensor in zip(got["auto"], got["torch"]):
        assert (native - tensor).abs().max() <= tol * tensor.abs().max()


def test_identity_init_denominator_gets_a_gradient():
    # B = 0 everywhere at the identity init; a zero derivative of |B| there would freeze the denominator
    act = GroupRational(4, groups=2, init="identity").double()
    x = torch.linspace(0.5, 2.0, 8, dtype=torch.float64).reshape(2, 4)
    act(x).sum().backward()
    assert (act.denominator.grad.abs() > 0).all()
    assert act.denominator.grad[0, 0].item() == pytest.approx(-(x[:, :2] ** 2).sum().item())  # d/db_1 (x / (1 + b_1 x)) = -x^2


def test_coefficients_are_shared_within_groups():
    act = GroupRational(10, groups=4, init="identity").double()
    assert act.group.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]
    with torch.no_grad():
        act.numerator[2, 2] = 0.5  # x + 0.5 x^2 in group 2 only
    x = torch.full((1, 10), 2.0, dtype=torch.float64)
    assert act(x)[0].tolist() == [2.0] * 5 + [4.0] * 3 + [2.0] * 2
    assert act.numerator.shape == (4, 6) and act.denominator.shape == (4, 4)
    with pytest.raises(ConfigError, match="init"):
        GroupRational(4, init="tanh")
    with pytest.raises(ConfigError, match="degrees"):
        GroupRational(4, degrees=(3, 3))


def test_grkan_ffn_is_kat_at_init_and_variance_preserving():
    torch.manual_seed(0)
    model = KANGPT(tiny_config(ffn="grkan", n_embd=64, n_head=4)).double()
    ffn = model.blocks[0].ffn
    assert isinstance(ffn, GRKANFFN)
    x = torch.randn(4096, 64, dtype=torch.float64)  # LayerNorm'd inputs are about N(0, 1)
    pre = ffn.c_fc(ffn.act_in(x))
    assert pre.var().item() == pytest.approx(1.0, abs=0.1)  # variance preserved through F_1 (identity) and c_fc
    expected = ffn.c_proj(F.gelu(ffn.c_fc(x)))  # KAT's init: identity, then GELU
    # relative RMS: the fit is within 7.6e-4 of GELU on [-3, 3]; the few pre-activations beyond it add the rest
    assert ((ffn(x) - expected).norm() / expected.norm()).item() < 0.01
    assert ffn.c_proj.weight.std().item() == pytest.approx(0.02 / math.sqrt(4), rel=0.1)  # GPT-2's residual init


def test_sparsity_penalty_reaches_the_rationals_and_skips_swiglu():
    assert float(sparsity_penalty(KANGPT(tiny_config(ffn="swiglu")))) == 0.0
    model = KANGPT(tiny_config(ffn="grkan,swiglu"))
    pen = sparsity_penalty(model)
    pen.backward()
    assert pen > 0
    ffn = model.blocks[0].ffn
    assert ffn.c_fc.weight.grad.abs().sum() > 0 and ffn.act_hidden.numerator.grad.abs().sum() > 0
    assert model.blocks[1].ffn.c_fc.weight.grad is None


@pytest.mark.parametrize("score", ["weight", "sample", "output"])
def test_pruning_grkan_units_equals_masking_them(score):
    model = KANGPT(tiny_config(ffn="grkan,kan", kan_hidden=[24, 6])).double().eval()
    idx = torch.randint(11, (4, 8), generator=torch.Generator().manual_seed(2))
    result = prune_gpt(model, 0.5, idx=None if score == "weight" else idx, score=score, relative=True)
    keep = result.kept[0]
    assert 0 < len(keep) < 24 and result.model.config.kan_hidden[0] == len(keep)
    strength = unit_strengths(model, None if score == "weight" else idx, score=score, relative=True)[0]
    assert keep == torch.nonzero(strength > 0.5).flatten().tolist()
    masked = KANGPT.from_state(model.state()).double().eval()
    drop = [i for i in range(24) if i not in keep]
    drop_kan = [i for i in range(6) if i not in result.kept[1]]
    with torch.no_grad():
        masked.blocks[0].ffn.c_proj.weight[:, drop] = 0
        masked.blocks[1].ffn.fc.mask[drop_kan, :] = 0
        masked.blocks[1].ffn.proj.mask[:, drop_kan] = 0
    assert (result.model(idx)[0] - masked(idx)[0]).abs().max() < 1e-12
    assert result.model.blocks[0].ffn.act_hidden.group.tolist() == model.blocks[0].ffn.act_hidden.group[keep].tolist()
    again = KANGPT.from_state(result.model.state())  # the pruned group map survives a checkpoint
    assert torch.equal(again(idx)[0], result.model(idx)[0])


def test_swiglu_only_model_has_nothing_to_prune():
    with pytest.raises(ConfigError, match="no KAN or GR-KAN"):
        prune_gpt(KANGPT(tiny_config(ffn="swiglu")))


def test_rational_plots_and_strongest_edges(tmp_path):
    model = KANGPT(tiny_config(ffn="grkan,swiglu"))
    for part in ("fc", "proj"):
        path = plot_edges(model, 0, tmp_path / f"{part}.png", part=part)
        assert path.stat().st_size > 5000
    edges = strongest_edges(model, 0, "fc", top=5)
    w = model.blocks[0].ffn.edge_scores()[0]
    assert len(edges) == 5 and edges[0][2] == pytest.approx(w.max().item())
    with pytest.raises(ConfigError, match="a SwiGLU feed-forward block"):
        plot_edges(model, 1, tmp_path / "x.png")
