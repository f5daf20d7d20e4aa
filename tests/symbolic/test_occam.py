"""The Occam step prefers simpler edges when the data allow it (by BIC)."""

import numpy as np

from kansym.symbolic.compose import SymbolicKAN, input_symbols
from kansym.symbolic.fit import EdgeFit
from kansym.symbolic.occam import information_criterion, simplify_edges
from kansym.io.transform import DataTransform


def test_information_criterion_prefers_fewer_constants_at_equal_fit():
    import sympy

    x = sympy.Symbol("x")
    two = sympy.Float(2.0) * x + sympy.Float(1.0)
    four = sympy.Float(2.0) * sympy.sin(sympy.Float(0.001) * x) * sympy.Float(1000.0) + sympy.Float(1.0)
    assert information_criterion(two, 1e-9, 100) < information_criterion(four, 1e-9, 100)
    # a clearly better fit beats fewer constants
    assert information_criterion(four, 1e-4, 100) < information_criterion(two, 1e-1, 100)


def test_wiggly_edges_on_a_linear_law_become_linear():
    # y = 3 a - 2 b + 1 exactly; the network explains it with a Gaussian and a sine edge
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (60, 2))
    y = 3 * x[:, 0] - 2 * x[:, 1] + 1
    wiggly = {
        (0, 0, 0): EdgeFit("sin", 0.3, 0.0, 10.0, 0.4, 0.999),
        (0, 1, 0): EdgeFit("gaussian", 0.2, 1.0, -5.0, 0.3, 0.998),
    }
    linear = {
        (0, 0, 0): EdgeFit("x", 1.0, 0.0, 3.0, 0.5, 0.99),
        (0, 1, 0): EdgeFit("x", 1.0, 0.0, -2.0, 0.2, 0.99),
    }
    candidates = {k: [linear[k], wiggly[k]] for k in wiggly}
    transform = DataTransform.affine((0.0, 0.0), (1.0, 1.0), (0.0,), (1.0,))
    sym = SymbolicKAN((2, 1), wiggly, transform, ("a", "b"), ("y",))
    out, tried = simplify_edges(sym, candidates, input_symbols(["a", "b"]), x, y)
    assert {f.primitive for f in out.edges.values()} == {"x"}
    assert tried[0].accepted and tried[1].accepted  # start, then the all-linear network
    assert tried[1].error < 1e-8


def test_needed_primitive_is_kept():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (400, 1))
    y = np.sin(np.pi * x[:, 0])
    good = EdgeFit("sin", np.pi, 0.0, 1.0, 0.0, 1.0)
    poor = EdgeFit("x", 1.0, 0.0, 0.9, 0.0, 0.8)
    transform = DataTransform.affine((0.0,), (1.0,), (0.0,), (1.0,))
    sym = SymbolicKAN((1, 1), {(0, 0, 0): good}, transform, ("x",), ("y",))
    out, tried = simplify_edges(sym, {(0, 0, 0): [poor, good]}, input_symbols(["x"]), x, y)
    assert out.edges[(0, 0, 0)].primitive == "sin"
    assert not tried[-1].accepted
