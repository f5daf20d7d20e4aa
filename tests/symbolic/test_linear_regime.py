"""Functions used only in their linear regime become lines (kansym.symbolic.refine)."""

import numpy as np
import sympy

from kansym.symbolic.refine import linearize, refine

p, s, r = sympy.symbols("p s r")


def _rows(seed=0, n=2000, noise=0.0):
    rng = np.random.default_rng(seed)
    X = rng.uniform([1, -1.5, 1], [3, 1.5, 2], size=(n, 3))
    y = 0.12 * X[:, 0] * np.sin(X[:, 1]) / X[:, 2] ** 3
    return X, y + noise * np.std(y) * rng.standard_normal(n)


def test_a_log_and_an_asin_of_tiny_arguments_become_the_law_with_one_constant():
    # a refit reached p sin(s) through two nonlinear functions with invented constants
    X, y = _rows(noise=0.01)
    fitted = -115079 * sympy.log(1 - 1.7e-5 * p) * sympy.asin(0.0609 * sympy.sin(s) + 2.4e-5) / r ** 3
    lined = linearize(fitted, [p, s, r], X, y, noise=0.01)
    assert not lined.has(sympy.log, sympy.asin)
    out = refine(fitted, [p, s, r], X, y, noise=0.01)
    assert not out.has(sympy.log, sympy.asin)
    ratio = sympy.simplify(out / (p * sympy.sin(s) / r ** 3))
    assert ratio.is_number and abs(float(ratio) - 0.12) < 0.002


def test_a_function_the_data_need_stays():
    # exp over a range where its curvature is far above the noise: no line
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 2, size=(1000, 1))
    y = np.exp(X[:, 0])
    x = sympy.Symbol("x")
    assert linearize(1.0 * sympy.exp(1.0 * x), [x], X, y) == 1.0 * sympy.exp(1.0 * x)


def test_a_nearly_linear_function_stays_when_the_noise_is_below_its_curvature():
    # log(1 + x/100) on [0, 1]: a line to 1e-3 of its spread, but exact data see the curvature
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, size=(2000, 1))
    x = sympy.Symbol("x")
    expr = sympy.log(1 + 0.01 * x)
    exact = np.log(1 + 0.01 * X[:, 0])
    assert linearize(expr, [x], X, exact) == expr
    # at 5 % noise 2000 rows cannot tell it from its line (the rise is 2e-3 against 9 * 0.05**2)
    noisy = exact + 0.05 * np.std(exact) * np.random.default_rng(3).standard_normal(2000)
    assert not linearize(expr, [x], X, noisy, noise=0.05).has(sympy.log)
    # while log(1 + x) at the same noise stays: its curvature is 10 % of its spread
    wide = np.log(1 + X[:, 0])
    wide = wide + 0.05 * np.std(wide) * np.random.default_rng(3).standard_normal(2000)
    assert linearize(sympy.log(1 + 1.0 * x), [x], X, wide, noise=0.05).has(sympy.log)
