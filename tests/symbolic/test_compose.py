"""Composition: the formula and the symbolic model's forward are one walk, so they agree."""

import numpy as np
import pytest
import sympy
import torch

from kansym.nn import KAN, KANConfig
from kansym.errors import DataError
from kansym.symbolic.compose import SymbolicKAN, formula_values, input_symbols, lambdify_formula, predictions, symbolify
from kansym.symbolic.fit import EdgeFit
from kansym.symbolic.library import get_library
from kansym.io.transform import DataTransform


def _hand_network(log_space=False):
    edges = {
        (0, 0, 0): EdgeFit("sin", 3.0, 0.2, 1.5, -0.1, 1.0),
        (0, 1, 0): EdgeFit("x^2", 1.0, 0.3, 0.7, 0.05, 1.0),
        (0, 1, 1): EdgeFit("x", 1.0, 0.0, -2.0, 0.4, 1.0),
        (1, 0, 0): EdgeFit("exp", 0.8, 0.0, 1.1, -0.3, 1.0),
        (1, 1, 0): EdgeFit("tanh", 1.3, -0.2, 0.9, 0.0, 1.0),
    }
    transform = DataTransform.affine((0.5, -1.0), (2.0, 0.5), (3.0,), (1.5,), log_space=log_space)
    return SymbolicKAN((2, 2, 1), edges, transform, ("a", "b"), ("y",))


def test_formula_equals_symbolic_forward_float64():
    sym = _hand_network()
    rng = np.random.default_rng(1)
    x = np.column_stack([rng.uniform(-1.5, 2.5, 500), rng.uniform(-1.5, -0.5, 500)])
    expr = sym.expressions()[0]
    assert {s.name for s in expr.free_symbols} == {"a", "b"}
    f = lambdify_formula(expr, input_symbols(["a", "b"]))
    forward = sym(torch.as_tensor(x, dtype=torch.float64)).numpy()[:, 0]
    np.testing.assert_allclose(f(x), forward, rtol=1e-10, atol=1e-8)
    # hand check of one row: y = 1.5 * node + 3 with the two-edge node sums
    a, b = x[0]
    u = ((a - 0.5) / 2.0, (b + 1.0) / 0.5)
    h0 = 1.5 * np.sin(3.0 * u[0] + 0.2) - 0.1 + 0.7 * (u[1] + 0.3) ** 2 + 0.05
    h1 = -2.0 * u[1] + 0.4
    o = 1.1 * np.exp(0.8 * h0) - 0.3 + 0.9 * np.tanh(1.3 * h1 - 0.2)
    assert abs(forward[0] - (1.5 * o + 3.0)) < 1e-10


def test_log_space_formula_is_in_csv_units():
    sym = _hand_network(log_space=True)
    x = np.exp(np.random.default_rng(2).uniform(-0.5, 0.5, (200, 2)))
    assert np.all(np.isfinite(sym(torch.as_tensor(x, dtype=torch.float64)).numpy()))
    expr = sym.expressions()[0]
    f = lambdify_formula(expr, input_symbols(["a", "b"], positive=True))
    forward = sym(torch.as_tensor(x, dtype=torch.float64)).numpy()[:, 0]
    np.testing.assert_allclose(f(x), forward, rtol=1e-10)


def test_dict_round_trip():
    sym = _hand_network()
    back = SymbolicKAN.from_dict(sym.to_dict())
    x = torch.rand(20, 2, dtype=torch.float64)
    torch.testing.assert_close(back(x), sym(x), atol=0, rtol=0)


def test_symbolify_recovers_primitives_of_a_model_with_known_edges():
    # a (2, 1) KAN whose splines are set to x1 -> sin(pi x1), x2 -> x2^2
    from kansym.nn.spline import curve_to_coef

    model = KAN(KANConfig(width=(2, 1), grid_size=20, base_fun="zero")).double()
    xs = torch.linspace(-1, 1, 400, dtype=torch.float64)[:, None].expand(400, 2)
    target = torch.stack([torch.sin(torch.pi * xs[:, 0]), xs[:, 1] ** 2], dim=1)[:, None, :]  # (400, 1, 2)
    with torch.no_grad():
        model.layers[0].scale_sp.fill_(1.0)
        model.layers[0].coef.copy_(curve_to_coef(xs, target, model.layers[0].grid, 3))
    transform = DataTransform.affine((0.0, 0.0), (1.0, 1.0), (0.0,), (1.0,))
    x = torch.rand(1000, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 2 - 1
    sym, cands = symbolify(model, x, transform, ["x1", "x2"], ["y"])
    assert sym.edges[(0, 0, 0)].primitive == "sin"
    assert sym.edges[(0, 1, 0)].primitive == "x^2"
    assert all(c[0].complexity <= c[-1].complexity for c in cands.values())
    x1, x2 = sympy.symbols("x1 x2", real=True)
    expr = sym.expressions([x1, x2])[0]
    f = sympy.lambdify([x1, x2], expr - (sympy.sin(sympy.pi * x1) + x2**2))
    assert np.max(np.abs(f(*x.numpy().T))) < 1e-3


def test_symbolify_without_exhaustive_refinement_chooses_the_same_edges():
    # exhaustive=False (no Occam step follows) skips refining the primitives more complex
    # than the first that clears the threshold: the chosen fits must be the same
    from kansym.nn.spline import curve_to_coef

    model = KAN(KANConfig(width=(2, 1), grid_size=20, base_fun="zero")).double()
    xs = torch.linspace(-1, 1, 400, dtype=torch.float64)[:, None].expand(400, 2)
    target = torch.stack([torch.sin(torch.pi * xs[:, 0]), torch.exp(0.7 * xs[:, 1])], dim=1)[:, None, :]
    with torch.no_grad():
        model.layers[0].scale_sp.fill_(1.0)
        model.layers[0].coef.copy_(curve_to_coef(xs, target, model.layers[0].grid, 3))
    transform = DataTransform.affine((0.0, 0.0), (1.0, 1.0), (0.0,), (1.0,))
    x = torch.rand(800, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 2 - 1
    full, full_cands = symbolify(model, x, transform, ["x1", "x2"], ["y"])
    lean, lean_cands = symbolify(model, x, transform, ["x1", "x2"], ["y"], exhaustive=False)
    assert [full.edges[e].primitive for e in sorted(full.edges)] == ["sin", "exp"]
    for e in full.edges:
        assert lean.edges[e] == full.edges[e]
        # the primitives up to the chosen one's complexity are reported (the unrefined ones at grid
        # precision), every primitive of the library with exhaustive refinement
        simple = {c.primitive for c in full_cands[e] if c.complexity <= full.edges[e].complexity}
        assert {c.primitive for c in lean_cands[e]} == simple
        assert len(full_cands[e]) == len(get_library(None)) > len(simple)


def test_lambdify_formula_reuses_the_generated_function_but_never_confuses_two_numeric_edges():
    from sympy.utilities.lambdify import implemented_function

    from kansym.symbolic import compose

    x = sympy.Symbol("x", real=True)
    expr = sympy.exp(x) + 2 * x
    compose._lambdified.cache_clear()
    a, b = lambdify_formula(expr, [x]), lambdify_formula(expr, [x])
    assert compose._lambdified.cache_info().hits == 1
    X = np.array([[0.0], [1.0]])
    np.testing.assert_allclose(a(X), [1.0, np.e + 2])
    np.testing.assert_array_equal(a(X), b(X))
    # two opaque edges of the same name with other implementations (two runs) stay apart
    one = implemented_function(sympy.Function("phi_0_0_0"), lambda v: v + 1)(x)
    ten = implemented_function(sympy.Function("phi_0_0_0"), lambda v: 10 * v)(x)
    np.testing.assert_array_equal(lambdify_formula(one, [x])(X), [1.0, 2.0])
    np.testing.assert_array_equal(lambdify_formula(ten, [x])(X), [0.0, 10.0])
    # the same formula in other symbols (another sign assumption) is another function
    y = sympy.Symbol("x", positive=True)
    assert lambdify_formula(expr.xreplace({x: y}), [y])(X)[1] == pytest.approx(np.e + 2)


def test_predictions_is_the_one_evaluation_and_never_raises():
    a, b = sympy.symbols("a b")
    x = np.array([[1.0, 4.0], [2.0, -9.0], [3.0, 1.0]])
    np.testing.assert_allclose(predictions(a * sympy.sqrt(b), [a, b], x)[[0, 2]], [2.0, 3.0])
    assert np.isnan(predictions(a * sympy.sqrt(b), [a, b], x)[1])  # off the domain: that row only
    np.testing.assert_array_equal(predictions(sympy.Integer(7), [a, b], x), [7.0, 7.0, 7.0])  # a constant, one per row
    opaque = sympy.Function("phi_0_0_0")(a) + b  # an edge's curve without its numbers: no value anywhere
    assert np.isnan(predictions(opaque, [a, b], x)).all()
    with pytest.raises(DataError, match="cannot be evaluated with numpy"):
        formula_values(opaque, [a, b], x)


def test_a_formula_holding_complex_infinity_evaluates_to_nan_instead_of_raising():
    # regression: a random law at noise 0 (validation range, 2026-12-07) crashed the whole run
    # with KeyError: 'ComplexInfinity' from sympy's numpy printer on a candidate holding zoo
    x, y = sympy.symbols("x y", positive=True)
    rows = np.array([[1.0, 2.0], [3.0, 4.0]])
    out = predictions(x + sympy.zoo * y, [x, y], rows)
    assert out.shape == (2,) and np.all(np.isnan(out))
    assert np.all(np.isnan(formula_values(x + sympy.zoo, [x, y], rows)))  # not finite anywhere, as documented
    assert np.allclose(predictions(x + 2 * y, [x, y], rows), [5.0, 11.0])
