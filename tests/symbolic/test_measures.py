"""The one R² and normalised-error definition (kansym.symbolic.verify) and its corner cases.

Every formula score in kansym (reports, the Pareto front, the Occam step, the direct
search, the per-edge fits, the plots) goes through ``r2_from_sse``, ``r2_score`` or
``nrmse``; the last tests check that the callers agree with them.
"""

import math

import numpy as np
import pytest
import sympy

from kansym.errors import ConfigError, DataError
from kansym.symbolic.verify import nrmse, r2_from_sse, r2_score

RNG = np.random.default_rng(0)
Y = RNG.normal(size=50)


# --- r2_from_sse -------------------------------------------------------------------------

def test_r2_from_sse_is_one_minus_the_ratio():
    assert r2_from_sse(1.0, 4.0) == 0.75
    assert r2_from_sse(0.0, 4.0) == 1.0
    assert r2_from_sse(8.0, 4.0) == -1.0  # worse than the mean: negative, unbounded below
    assert r2_from_sse(math.inf, 4.0) == -math.inf


def test_r2_from_sse_floor_replaces_a_tiny_sst():
    assert r2_from_sse(1e-20, 1e-20, sst_floor=1e-18) == pytest.approx(0.99)  # noise-level SST
    assert r2_from_sse(1.0, 4.0, sst_floor=1e-18) == 0.75  # a real SST is untouched


def test_r2_from_sse_constant_target_convention():
    assert r2_from_sse(0.0, 0.0) == 1.0
    assert r2_from_sse(1e-30, 0.0) == 0.0


# --- r2_score ----------------------------------------------------------------------------

def test_r2_score_matches_the_textbook_formula():
    pred = Y + 0.3 * RNG.normal(size=Y.size)
    want = 1 - np.sum((Y - pred) ** 2) / np.sum((Y - Y.mean()) ** 2)
    assert r2_score(Y, pred) == want
    assert r2_score(Y[:, None], pred) == want  # any shapes of N elements


def test_r2_score_constant_target_is_exact_equality():
    c = np.full(5, 2.5)
    assert r2_score(c, c) == 1.0
    assert r2_score(c, c + 1e-15) == 0.0  # no tolerance: scikit-learn's convention


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_r2_score_nonfinite_prediction_raises_or_scores_minus_inf(bad):
    pred = Y.copy()
    pred[3] = bad
    with pytest.raises(DataError, match="NaN or inf"):
        r2_score(Y, pred)
    assert r2_score(Y, pred, nonfinite="-inf") == -math.inf
    assert r2_score(pred, Y, nonfinite="-inf") == -math.inf  # a non-finite target too


def test_r2_score_rejects_mismatched_or_empty_input_and_unknown_modes():
    with pytest.raises(DataError, match="equal size"):
        r2_score(Y, Y[:-1], nonfinite="-inf")  # a size mismatch is a mistake, never a score
    with pytest.raises(DataError):
        r2_score([], [])
    with pytest.raises(ConfigError, match="nonfinite"):
        r2_score(Y, Y, nonfinite="nan")


# --- nrmse -------------------------------------------------------------------------------

def test_nrmse_is_rms_over_std_and_sqrt_of_one_minus_r2():
    pred = Y + 0.3 * RNG.normal(size=Y.size)
    assert nrmse(Y, pred) == float(np.sqrt(np.mean((pred - Y) ** 2)) / np.std(Y))
    assert nrmse(Y, pred) == pytest.approx(math.sqrt(1 - r2_score(Y, pred)), rel=1e-12)
    assert nrmse(3 * Y + 7, 3 * pred + 7) == pytest.approx(nrmse(Y, pred), rel=1e-12)  # unit-free


def test_nrmse_resolves_errors_that_sqrt_of_one_minus_r2_loses():
    pred = Y + 1e-12 * np.std(Y) * np.sign(RNG.normal(size=Y.size))
    assert r2_score(Y, pred) == 1.0  # 1 - R² = 1e-24 cancels
    assert nrmse(Y, pred) == pytest.approx(1e-12, rel=1e-3)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nrmse_nonfinite_or_overflowing_is_inf(bad):
    pred = Y.copy()
    pred[0] = bad
    assert nrmse(Y, pred) == math.inf
    assert nrmse(pred, Y) == math.inf
    assert nrmse(Y, Y * 1e200) == math.inf  # finite, but its squared error overflows


def test_nrmse_constant_target_is_zero_or_inf():
    c = np.full(5, 2.5)
    assert nrmse(c, c) == 0.0
    assert nrmse(c, c + 1e-15) == math.inf
    with pytest.raises(DataError, match="equal size"):
        nrmse(Y, Y[:-1])


# --- the callers use them ----------------------------------------------------------------

def test_pareto_front_scores_are_r2_score_and_nrmse():
    from kansym.symbolic.compose import lambdify_formula
    from kansym.symbolic.pareto import pareto_front

    a = sympy.Symbol("a")
    x = RNG.uniform(0.5, 2.0, (80, 1))
    y = 3 * x[:, 0] ** 2 + 0.01 * RNG.normal(size=80)
    exprs = [sympy.Float(3.0) * a**2, sympy.Float(3.0) * a**2 + sympy.Float(0.01) * a, sympy.log(a - 1)]
    front = pareto_front(exprs, exprs[0], [a], x, y)
    for e in front:
        pred = lambdify_formula(e.expr, [a])(x)
        assert e.r2 == r2_score(y, pred) and e.error == nrmse(y, pred)
    undefined = pareto_front([], exprs[2], [a], x, y)[0]  # log of a negative number on some rows
    assert undefined.r2 == -math.inf and undefined.error == math.inf



def test_the_front_lists_no_term_the_data_cannot_resolve():
    """Issue 34 (random laws, tuning range, noise 0.01): Pareto alternatives were printed with a term
    below 1e-6 of their sum (``-3.9e-8*x1 + 6.66e-12*x2 + 0.0796``, ``2.95e-48*exp(...) + ...``)."""
    from kansym.symbolic.pareto import drop_negligible_terms, pareto_front

    a, b = sympy.symbols("a b", positive=True)
    x = RNG.uniform(1.0, 10.0, (200, 2))
    y = 0.0795980118514721 - 3.90081876308056e-8 * x[:, 0]  # the alternative is exact, so it is listed
    junk = sympy.Float(-3.90081876308056e-8) * a + sympy.Float(6.65916686575319e-12) * b + sympy.Float(0.0795980118514721)
    assert drop_negligible_terms(junk, [a, b], x) == sympy.Float(-3.90081876308056e-8) * a + sympy.Float(0.0795980118514721)
    nested = sympy.Float(2.0) * sympy.exp(-a + sympy.Float(1e-13) * b) + sympy.Float(3e-12) * a ** 2
    assert drop_negligible_terms(nested, [a, b], x) == sympy.Float(2.0) * sympy.exp(-a)
    kept = sympy.Float(1e-3) * a + b  # small but resolved: stays
    assert drop_negligible_terms(kept, [a, b], x) is kept
    chosen = sympy.Rational(1, 4) / sympy.pi
    front = pareto_front([junk], chosen, [a, b], x, y)
    assert [e.expr for e in front if not e.chosen] == [sympy.Float(-3.90081876308056e-8) * a
                                                       + sympy.Float(0.0795980118514721)]

def test_occam_and_direct_errors_are_nrmse():
    from kansym.symbolic.compose import lambdify_formula
    from kansym.symbolic.direct import _error
    from kansym.symbolic.occam import formula_error

    a = sympy.Symbol("a", positive=True)
    x = RNG.uniform(0.5, 2.0, (80, 1))
    y = 2 * x[:, 0] ** 1.5 * (1 + 0.01 * RNG.normal(size=80))
    expr = sympy.Float(2.0) * a ** sympy.Rational(3, 2)
    pred = lambdify_formula(expr, [a])(x)
    assert formula_error(expr, [a], x, y, log_space=False) == nrmse(y, pred)
    assert formula_error(expr, [a], x, y, log_space=True) == nrmse(np.log(y), np.log(pred))
    assert _error(expr, [a], x, y) == nrmse(y, pred)
    assert formula_error(sympy.log(a - 1), [a], x, y, log_space=False) == math.inf


def test_edge_fit_r2_is_r2_score_except_below_float_noise():
    from kansym.symbolic.fit import select_edge_fit

    x = RNG.uniform(-1, 1, 200)
    y = np.sin(2 * x) + 0.01 * RNG.normal(size=200)
    fit, _ = select_edge_fit(x, y)
    assert fit.primitive == "sin"
    assert 1 - fit.r2 == pytest.approx(1 - r2_score(y, fit.numpy(x)), rel=1e-9)
    # a dead edge (output constant up to float64 noise): the SST floor makes every
    # primitive explain it equally well, so the simplest, "0", wins with R² near 1;
    # without the floor the noise would be the signal and R² about 0
    flat = 0.3 + 1e-13 * RNG.normal(size=200)
    fit, _ = select_edge_fit(x, flat)
    assert fit.primitive == "0" and fit.r2 > 0.999
    assert r2_score(flat, fit.numpy(x)) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("text, nodes", [
    ("1 + x**2", 5), ("1 - x**2", 5),  # a subtraction is one binary operator, as an addition
    ("x - y", 3), ("-x - y", 4),  # a sum of negated terms pays one node for the sign
    ("-x", 3),  # Mul(-1, x) outside a sum
    ("1/sqrt(1 - x**2)", 7), ("1/sqrt(2*cos(x) - 1)", 8),  # regression: Feynman I.48.2 with units at noise 0.01
    ("a**(3/2)", 3), ("a**1.49937", 4),  # a float counts twice
    ("x - 2*y", 5), ("x - y/2", 5),  # only the coefficient -1 is a sign
    # an exact constant counts as a float at most (regression: the Gaussian lost to its float twin)
    ("exp(-x**2/2)/sqrt(2*pi)", 9), ("0.3989*exp(-0.5*x**2)", 10), ("x/(2*pi)", 4), ("0.159*x", 4),
    ("sqrt(2)*x", 4), ("2*pi", 2), ("x**(3/2)", 3),
])
def test_expression_complexity_counts_pysr_nodes(text, nodes):
    from kansym.symbolic.pareto import expression_complexity

    assert expression_complexity(sympy.sympify(text)) == nodes
