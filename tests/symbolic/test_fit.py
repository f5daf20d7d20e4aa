"""Tests of per-edge symbolic fitting and selection."""

import math

import numpy as np
import pytest
import sympy
import torch

from kansym.errors import ConfigError, DataError
from kansym.symbolic.fit import EdgeFit, fit_primitive, select_edge_fit
from kansym.symbolic.library import get_library

RNG = np.random.default_rng(0)
X11 = np.sort(RNG.uniform(-1, 1, 400))


def test_recovers_sine_parameters():
    y = 1.7 * np.sin(2.3 * X11 + 0.4) - 0.5
    fit = fit_primitive(X11, y, "sin")
    assert fit.primitive == "sin"
    # canonical form: a > 0, phase in (-pi/2, pi/2] -> the generating parameters themselves
    np.testing.assert_allclose([fit.a, fit.b, fit.c, fit.d], [2.3, 0.4, 1.7, -0.5], atol=1e-3)
    assert fit.r2 > 1 - 1e-10
    np.testing.assert_allclose(fit.numpy(X11), y, atol=1e-8)


def test_recovers_sine_from_negative_scale_and_shifted_phase():
    y = -0.8 * np.sin(-3.0 * X11 + 2.0) + 0.1  # = 0.8 sin(3x - 2) + 0.1 = -0.8 sin(3x - 2 + pi) + 0.1
    fit = fit_primitive(X11, y, "sin")
    np.testing.assert_allclose(fit.numpy(X11), y, atol=1e-8)
    assert fit.a > 0 and -math.pi / 2 < fit.b <= math.pi / 2


@pytest.mark.parametrize("name, x, y", [
    ("x^2", X11, 3 * X11**2 - 1),
    ("exp", np.linspace(-1, 2, 300), np.exp(np.linspace(-1, 2, 300))),
    ("sin", X11, np.sin(np.pi * X11)),
    ("0", X11, np.full_like(X11, 2.5)),
    ("x", X11, -2 * X11 + 0.3),
    ("log", np.linspace(0.2, 4, 300), 2 * np.log(np.linspace(0.2, 4, 300) + 0.5)),
    ("1/x", np.linspace(0.5, 3, 300), 1 / np.linspace(0.5, 3, 300)),
    ("tanh", X11, np.tanh(2 * X11 - 0.3)),
])
def test_selection_picks_simplest_good_primitive(name, x, y):
    chosen, cands = select_edge_fit(x, y)
    assert chosen.primitive == name
    assert chosen.r2 >= 0.999
    assert [c.complexity for c in cands] == sorted(c.complexity for c in cands)
    # every primitive up to the chosen one's complexity is tried, none beyond (none could be chosen)
    assert {c.primitive for c in cands} == {p.name for p in get_library(None) if p.complexity <= chosen.complexity}


def test_exhaustive_selection_fits_every_primitive_and_chooses_the_same():
    y = np.sin(np.pi * X11)
    lean, lean_cands = select_edge_fit(X11, y)
    chosen, cands = select_edge_fit(X11, y, exhaustive=True)
    assert chosen == lean and chosen.primitive == "sin"
    assert {c.primitive for c in cands} == {p.name for p in get_library(None)}
    assert {c.primitive for c in lean_cands} == {"0", "x", "x^2", "exp", "x^3", "sin", "cos", "sqrt", "1/x", "log"}
    # the refined R² of a rejected primitive is at least its grid R²
    grid_r2 = {c.primitive: c.r2 for c in lean_cands}
    assert all(c.r2 >= grid_r2[c.primitive] - 1e-12 for c in cands if c.primitive in grid_r2)


def test_power_law_exponent():
    x = np.linspace(0.0, 3.0, 300)
    fit = fit_primitive(x, 2 * x**1.5, "x^p")
    assert fit.p == pytest.approx(1.5, abs=1e-6) and fit.c == pytest.approx(2.0, abs=1e-5)


def test_domain_check_refuses_log_across_zero():
    x = np.linspace(-2, 2, 200)
    # a shift of at most 1 cannot keep x + b > 0 over [-2, 2]
    fit = fit_primitive(x, x**2, "log", b_range=(-1.0, 1.0))
    assert fit.r2 == -math.inf
    ok = fit_primitive(x, np.log(x + 3), "log")
    assert ok.r2 > 1 - 1e-10 and ok.a * x.min() + ok.b > 0


def test_degenerate_cosine_cannot_mimic_parabola():
    x = np.linspace(-0.1, 0.1, 200)  # tiny range: cos(a x) with a -> 0 would be a parabola
    fit = fit_primitive(x, x**2, "cos")
    assert abs(fit.a) * (x.max() - x.min()) >= 1.0 - 1e-9
    chosen, _ = select_edge_fit(x, x**2)
    assert chosen.primitive == "x^2"


def test_fallback_tradeoff_on_noisy_data():
    y = np.sin(2 * X11) + 0.2 * RNG.normal(size=X11.size)
    chosen, cands = select_edge_fit(X11, y, ["0", "x", "sin", "x^4"], complexity_weight=1e-3)
    assert chosen.r2 < 0.999
    score = lambda f: (1 - f.r2) + 1e-3 * f.complexity  # noqa: E731
    assert score(chosen) == pytest.approx(min(score(f) for f in cands))


def test_edgefit_forms_agree_and_roundtrip():
    fit = fit_primitive(X11, 0.7 * np.tanh(1.3 * X11 + 0.2) + 0.1, "tanh")
    xs = sympy.Symbol("x")
    expr_vals = sympy.lambdify(xs, fit.sympy(xs))(X11)
    np.testing.assert_allclose(expr_vals, fit.numpy(X11), atol=1e-12)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        xt = torch.tensor(X11, dtype=dtype, requires_grad=True)
        out = fit.torch(xt)
        assert out.dtype == dtype
        out.sum().backward()
        assert xt.grad is not None and torch.all(torch.isfinite(xt.grad))
        np.testing.assert_allclose(out.detach().double().numpy(), fit.numpy(X11), atol=tol)
    assert EdgeFit.from_dict(fit.to_dict()) == fit
    assert fit.complexity == 4
    const = EdgeFit("0", 1.0, 0.0, 0.0, 2.0, 1.0)
    assert float(const.sympy(xs)) == 2.0 and np.all(const.numpy(X11) == 2.0)


def test_errors():
    with pytest.raises(ConfigError):
        fit_primitive(X11, X11, "sinh")
    with pytest.raises(ConfigError):
        EdgeFit("nope", 1, 0, 1, 0, 1.0)
    with pytest.raises(ConfigError):
        EdgeFit.from_dict({"primitive": "x"})
    with pytest.raises(DataError):
        fit_primitive(X11, X11[:-1], "x")
    with pytest.raises(DataError):
        fit_primitive(np.array([0.0, np.nan, 1.0]), np.zeros(3), "x")
    with pytest.raises(ConfigError):
        select_edge_fit(X11, X11, n_gird=3)


def test_fit_is_scale_invariant_for_shrunk_hidden_nodes():
    # regression: a hidden node squeezed to [-0.05, 0.05] by the L1 penalty made exp
    # unfittable (R² = -inf) and a power law with p ~ 230 imitated it instead
    import numpy as np

    from kansym.symbolic.fit import select_edge_fit

    h = np.linspace(-0.05, 0.04, 400)
    y = 3.0 * np.exp(25.0 * h) - 1.0
    chosen, _ = select_edge_fit(h, y)
    assert chosen.primitive == "exp"
    np.testing.assert_allclose(chosen.numpy(h), y, rtol=1e-6, atol=1e-6)
    assert abs(chosen.a - 25.0) < 1e-3


def test_fit_far_from_zero_inputs():
    import numpy as np

    from kansym.symbolic.fit import select_edge_fit

    x = np.linspace(100.0, 101.0, 300)
    y = np.sin(3.0 * x)
    chosen, _ = select_edge_fit(x, y)
    assert chosen.primitive in ("sin", "cos")
    np.testing.assert_allclose(chosen.numpy(x), y, atol=1e-6)


@pytest.mark.parametrize("name", ["x^2", "x^3", "sqrt", "1/x", "log", "1/x^2", "abs", "x^p"])
def test_shift_primitives_map_back_to_input_units(name):
    from kansym.symbolic.fit import fit_primitive
    from kansym.symbolic.library import PRIMITIVES

    x = np.linspace(2.0, 5.0, 200)
    p = 1.7 if name == "x^p" else None
    u = x - 1.0
    f = PRIMITIVES[name].numpy_fn
    y = 0.7 * (f(u, p) if p is not None else f(u)) + 0.3
    fit = fit_primitive(x, y, name)
    assert fit.r2 > 1 - 1e-9
    assert abs(fit.a) == 1.0  # canonical form
    np.testing.assert_allclose(fit.numpy(x), y, rtol=1e-6, atol=1e-8)
