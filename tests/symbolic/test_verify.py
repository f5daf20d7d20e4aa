"""Tests of exact-recovery checks and fidelity."""

import math

import numpy as np
import pytest
import sympy

from kansym.errors import DataError
from kansym.symbolic.verify import Fidelity, fidelity, is_exact_recovery, nrmse, nrmse_in, r2_score, round_floats

x, y = sympy.symbols("x y")


def test_constant_difference_is_exact():
    assert is_exact_recovery(2 * x + 1, 2 * x)


def test_constant_ratio_is_exact():
    assert is_exact_recovery(x * y, 3.0001 * x * y)


def test_different_powers_are_not():
    assert not is_exact_recovery(x**2, x**3)
    assert not is_exact_recovery(sympy.sin(x), sympy.sin(1.01 * x))


def test_rounding_rule():
    assert round_floats(1.00004 * x + 0.00003) == 1.0 * x
    assert is_exact_recovery(x, 1.00004 * x + 0.00003)
    assert is_exact_recovery(x, 1.004 * x**1.0004)  # both round to 1.00
    assert not is_exact_recovery(x, x**1.02)  # 3 significant digits keep 1.02

def test_symbols_matched_by_name_and_strings():
    xp = sympy.Symbol("x", positive=True)
    assert is_exact_recovery(sympy.exp(xp) * y, "2.5*exp(x)*y")
    assert is_exact_recovery("sin(pi*x)", sympy.sin(sympy.pi * x))


def test_pi_as_float_mode():
    cand = sympy.sin(3.14159265 * x)
    assert is_exact_recovery(sympy.sin(sympy.pi * x), cand, pi_as_float=False) is False  # 3.14 != pi
    assert is_exact_recovery(3 * sympy.pi * x, 9.42477 * x, pi_as_float=True)


def test_constant_candidate():
    assert not is_exact_recovery(x, 3.0)
    assert is_exact_recovery(sympy.Integer(2), 5.0)


def test_r2_score():
    t = np.array([1.0, 2.0, 3.0, 4.0])
    assert r2_score(t, t) == 1.0
    assert r2_score(t, np.full(4, t.mean())) == pytest.approx(0.0)
    assert r2_score(np.ones(3), np.ones(3)) == 1.0
    assert r2_score(np.ones(3), np.zeros(3)) == 0.0
    with pytest.raises(DataError):
        r2_score(t, t[:3])


def test_fidelity():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (100, 2))
    target = X[:, 0] ** 2 + X[:, 1]
    f = lambda A: A[:, 0] ** 2 + A[:, 1] + 0.01  # noqa: E731
    fid = fidelity(f, X, target, y_model=target + 0.01)
    assert isinstance(fid, Fidelity)
    assert fid.r2_model == pytest.approx(1.0)
    assert fid.max_abs_err == pytest.approx(0.01) and fid.rmse == pytest.approx(0.01)
    assert 0.99 < fid.r2_data < 1.0
    assert math.isnan(fidelity(f, X, target).r2_model)
    with pytest.raises(DataError):
        fidelity(lambda A: A[:3, 0], X, target)


def test_a_domain_decides_the_sign_of_a_root_sympy_cannot():
    c, v, w = sympy.symbols("c v omega_0", positive=True)
    truth = (1 + v / c) / sympy.sqrt(1 - v ** 2 / c ** 2) * w
    cand = sympy.sympify("omega_0*sqrt(c + v)*sqrt(1/(c - v))")  # equal where c > v
    names = ["c", "v", "omega_0"]
    domain = ([3.0, 1.0, 1.0], [10.0, 2.0, 5.0])
    assert not is_exact_recovery(truth, cand, symbols=names)  # sympy alone: c - v of unknown sign
    assert is_exact_recovery(truth, cand, symbols=names, domain=domain)
    # an approximation is no recovery, with or without the domain
    close = sympy.sympify("omega_0*sqrt(c + v)*sqrt(1/(c - 1.01*v))")
    assert not is_exact_recovery(truth, close, symbols=names, domain=domain)
    with pytest.raises(ValueError, match="one low and one high per symbol"):
        is_exact_recovery(truth, cand, symbols=names, domain=([1.0], [2.0]))


def test_nrmse_in_log_space_is_the_error_of_the_logs_and_inf_off_the_positive_values():
    y = np.array([1.0, 10.0, 100.0, 1000.0])
    pred = y * np.array([1.1, 0.9, 1.1, 0.9])
    assert nrmse_in(y, pred, log_space=False) == nrmse(y, pred)
    assert nrmse_in(y, pred, log_space=True) == pytest.approx(nrmse(np.log(y), np.log(pred)), rel=1e-12)
    # a 10 % error on every value is the same in log units whatever the row's magnitude
    assert nrmse_in(y, pred, log_space=True) == pytest.approx(0.1003 / np.std(np.log(y)), rel=0.01)
    assert nrmse_in(y, -pred, log_space=True) == float("inf")
