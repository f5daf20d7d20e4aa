"""Tests of the primitive registry."""

import math

import numpy as np
import pytest
import sympy
import torch

from kansym.errors import ConfigError
from kansym.symbolic.library import PRIMITIVES, Interval, get_library

EXPECTED = {"0": 0, "x": 1, "x^2": 2, "exp": 2, "x^3": 3, "sin": 3, "cos": 3, "sqrt": 3, "1/x": 3,
            "log": 3, "x^4": 4, "1/x^2": 4, "tanh": 4, "abs": 4, "x^p": 4, "gaussian": 4, "softplus": 4,
            "arcsin": 5}


def test_names_and_complexities():
    assert {n: p.complexity for n, p in PRIMITIVES.items()} == EXPECTED


def test_registry_is_read_only():
    with pytest.raises(TypeError):
        PRIMITIVES["new"] = PRIMITIVES["x"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        PRIMITIVES["x"].complexity = 9  # frozen dataclass


def test_get_library_order_and_dedup():
    lib = get_library(["sin", "x", "sin"])
    assert [p.name for p in lib] == ["sin", "x"]
    assert len(get_library(None)) == len(PRIMITIVES)


def test_unknown_name_lists_valid_names():
    with pytest.raises(ConfigError) as info:
        get_library(["x", "sinh"])
    msg = str(info.value)
    assert "'sinh'" in msg and "'x^2'" in msg and "'arcsin'" in msg


@pytest.mark.parametrize("name", [n for n in PRIMITIVES if n != "x^p"])
def test_numpy_torch_sympy_agree(name):
    prim = PRIMITIVES[name]
    u = np.linspace(0.1, 0.9, 7)  # inside every domain
    ref = prim.numpy_fn(u)
    got_torch = prim.torch_fn(torch.tensor(u, dtype=torch.float64)).numpy()
    s = sympy.Symbol("u")
    got_sympy = sympy.lambdify(s, prim.sympy_fn(s), "numpy")(u) * np.ones_like(u)
    np.testing.assert_allclose(got_torch, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_sympy, ref, rtol=1e-12, atol=1e-12)


def test_power_law_forms_agree():
    prim = PRIMITIVES["x^p"]
    u = np.linspace(0.1, 2.0, 5)
    s = sympy.Symbol("u")
    np.testing.assert_allclose(prim.numpy_fn(u, 1.5), u**1.5)
    np.testing.assert_allclose(prim.torch_fn(torch.tensor(u), 1.5).numpy(), u**1.5)
    np.testing.assert_allclose(sympy.lambdify(s, prim.sympy_fn(s, 1.5))(u), u**1.5)
    assert prim.n_params == 1


def test_domains():
    assert PRIMITIVES["log"].in_domain(0.5, 3.0)
    assert not PRIMITIVES["log"].in_domain(-0.5, 3.0)
    assert PRIMITIVES["sqrt"].in_domain(0.0, 1.0)  # closed at 0
    assert not PRIMITIVES["1/x"].in_domain(-1.0, 1.0)  # crosses the pole
    assert PRIMITIVES["1/x"].in_domain(-3.0, -1.0)
    assert PRIMITIVES["arcsin"].in_domain(-1.0, 1.0)
    assert not PRIMITIVES["arcsin"].in_domain(-1.0, 1.01)
    assert PRIMITIVES["sin"].in_domain(-1e9, 1e9)
    assert not PRIMITIVES["sin"].in_domain(-math.inf, 0.0)
    assert not Interval(0.0, 1.0).contains(0.0, 0.5)  # open end
