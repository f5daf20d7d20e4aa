"""Tests of the LaTeX, Python, torch and JSON exporters."""

import numpy as np
import pytest
import sympy
import torch

from kansym.errors import ConfigError
from kansym.symbolic.export import to_latex, to_python, to_torch

a, T = sympy.symbols("semi_major_axis_km period")
x1, x2 = sympy.symbols("x1 x2")
EXPR = 1.23456789 * sympy.exp(-0.5 * x1) * sympy.sin(sympy.pi * x2) + x1**2 / 3 + sympy.sqrt(x2**2 + 1)


def test_latex_float_precision():
    assert to_latex(sympy.Float(3.14159265) * x1, precision=3) == "3.14 x_{1}"
    assert "1.235" in to_latex(EXPR, precision=4)
    assert r"10^{-5}" in to_latex(sympy.Float(1.5e-5) * x1)
    with pytest.raises(ConfigError):
        to_latex(x1, precision=0)


def test_latex_readable_column_names():
    tex = to_latex(2.0 * a**1.5)
    assert r"\mathrm{semi\_major\_axis\_km}" in tex
    assert to_latex(x1, symbol_names={"x1": r"\rho"}) == r"\rho"


def _random_inputs(n=50):
    return np.random.default_rng(0).uniform(-2, 2, (n, 2))


def test_python_export_matches_lambdify():
    X = _random_inputs()
    src = to_python(EXPR, [x1, x2], func_name="law")
    ns = {}
    exec(compile(src, "<formula>", "exec"), ns)  # test only: the library never execs
    ref = sympy.lambdify([x1, x2], EXPR, "numpy")(*X.T)
    np.testing.assert_allclose(ns["law"](X), ref, rtol=1e-10, atol=1e-10)
    const_src = to_python(sympy.Float(2.5), [x1, x2])
    exec(compile(const_src, "<c>", "exec"), ns)
    assert ns["f"](X).shape == (50,)


def test_python_export_unsafe_names():
    s = sympy.Symbol("lambda")
    src = to_python(2 * s, [s])
    ns = {}
    exec(compile(src, "<formula>", "exec"), ns)
    np.testing.assert_allclose(ns["f"](np.ones((3, 1))), 2.0)
    with pytest.raises(ConfigError):
        to_python(x1 + x2, [x1])


def test_torch_export_matches_lambdify():
    X = _random_inputs()
    mod = to_torch(EXPR, [x1, x2])
    out = mod(torch.tensor(X, dtype=torch.float64))
    assert out.shape == (50,) and out.dtype == torch.float64
    ref = sympy.lambdify([x1, x2], EXPR, "numpy")(*X.T)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-10, atol=1e-10)
    out32 = mod(torch.tensor(X, dtype=torch.float32))
    assert out32.dtype == torch.float32
    np.testing.assert_allclose(out32.detach().numpy(), ref, rtol=1e-4, atol=1e-5)
    out.sum().backward()  # constants are trainable
    assert mod.constants.grad is not None and mod.constants.grad.shape == mod.constants.shape
    with pytest.raises(ConfigError):
        to_torch(sympy.gamma(x1), [x1])


