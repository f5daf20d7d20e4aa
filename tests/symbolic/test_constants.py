"""Constants by description length (issue 16): the vocabulary (contexts, candidates, bits, rounding)
and, on small cases written here, each kind of invented constant that the former
closeness rule printed."""

import math

import numpy as np
import pytest
import sympy

from kansym.symbolic.constants import (constant_contexts, exact_candidates, float_bits, integer_bits,
                                       precision_step, rational_bits, round_to_step)
from kansym.symbolic.refine import refine, shorten_numbers, simplify_formula
from kansym.symbolic.snap import snap_constants

x = sympy.Symbol("x", positive=True)
x1, x2 = sympy.symbols("x1 x2", positive=True)


def _exact_numbers(expr):
    """The non-integer exact numbers of ``expr`` and whether pi is in it."""
    return {r for r in expr.atoms(sympy.Rational) if r.q != 1}, expr.has(sympy.pi)


def test_contexts_follow_the_position_in_the_tree():
    a, b, c, d, e = (sympy.Float(v) for v in (1.5, 2.25, 0.75, 3.5, 0.125))
    expr = b * x ** a + sympy.sin(d * x + c) + e
    assert constant_contexts(expr) == {a: "exponent", b: "factor", c: "phase", d: "factor", e: "offset"}
    inner = sympy.Float(0.3)
    assert constant_contexts(x ** (inner * x1)) == {inner: "exponent"}  # anything inside an exponent
    # log space: log f = log C + p log x; p is x's exponent, log C the log of a factor
    logc, p = sympy.Float(12.5), sympy.Float(1.49)
    assert constant_contexts(logc + p * sympy.log(x), log_space=True) == {logc: "log_factor", p: "exponent"}
    # a float in two places takes the stricter context
    both = sympy.Float(0.5)
    assert constant_contexts(both * x + x1 ** both) == {both: "exponent"}


def test_description_lengths_are_ai_feynman_2s():
    assert integer_bits(0) == 0 and integer_bits(7) == 3
    assert rational_bits(3, 2) == math.log2(8)
    # a float costs one bit plus log2(1 + (c/s)^2)/2: more the more precisely the data pin it down
    assert float_bits(1.5, 1.0) < float_bits(1.5, 1e-3) < float_bits(1.5, 1e-9)
    assert float_bits(1.5, 1e-3) == pytest.approx(1 + 0.5 * math.log2(1 + 1500 ** 2))


def test_candidates_depend_on_the_context():
    near = 14 / (3 * math.pi)  # 1.48545: a rational over pi
    assert any(c.expr == sympy.Rational(14, 3) / sympy.pi for c in exact_candidates(near, "factor", 1e-4))
    for cand in exact_candidates(near, "exponent", 0.2):  # no pi in an exponent, denominators <= 6
        assert not cand.expr.has(sympy.pi) and cand.expr.is_Rational and cand.expr.q <= 6
    assert sympy.Rational(3, 2) in [c.expr for c in exact_candidates(1.4999, "exponent", 1e-3)]
    phases = [c.expr for c in exact_candidates(math.pi / 2 - 1e-5, "phase", 1e-4)]
    assert sympy.pi / 2 in phases
    offsets = [c.expr for c in exact_candidates(-math.pi ** 2, "offset", 1e-6)]
    assert -sympy.pi ** 2 in offsets  # sqrt(x**2 - pi**2)
    assert not any(c.expr.has(sympy.pi) for c in exact_candidates(1 / math.pi, "offset", 1e-6))
    # log C of a factor: the candidates are logs of factors, never a bare 25/2 (= log of exp(25/2))
    logs = exact_candidates(math.log(1.5), "log_factor", 1e-6)
    assert logs and logs[0].expr == sympy.log(sympy.Rational(3, 2))
    # nothing of more than 9 digits, whatever the value
    assert all(max(abs(c.expr.p), c.expr.q) < 10 ** 9 for c in exact_candidates(3.2e20, "factor", 1e18)
               if c.expr.is_Rational)


@pytest.mark.parametrize("se, step", [(0.0012, 1e-4), (150.0, 10.0), (0.04, 0.01), (0.0097, 1e-3), (3.6, 1.0)])
def test_precision_step_is_the_pdg_rule(se, step):
    assert precision_step(se) == pytest.approx(step)


def test_round_to_step_gives_the_printed_decimal():
    assert round_to_step(1.485296, 1e-4) == 1.4853 and round_to_step(281377.93, 10.0) == 281380.0
    assert str(sympy.Float(round_to_step(1.485296, 1e-4)) * x) == "1.4853*x"


# --- the kinds of invented constants, each on a small case of its own -----------------------

RNG = np.random.default_rng(0)
X1 = RNG.uniform(1, 5, (1000, 1))
X2 = RNG.uniform(1, 5, (1000, 2))


def test_a_noisy_exponent_is_no_rational_over_pi():
    # the former rule printed 1.9996*x**(14/(3*pi)) for this (14/(3 pi) = 1.48545)
    y = 2.0 * X1[:, 0] ** 1.4853 * (1 + 1e-3 * np.random.default_rng(1).standard_normal(1000))
    out = refine(2.0 * x ** 1.4853, [x], X1, y, loss_space="log")
    exp = next(p.exp for p in out.atoms(sympy.Pow) if p.base == x)
    assert isinstance(exp, sympy.Float) and abs(float(exp) - 1.4853) < 1e-3
    assert not out.has(sympy.pi)
    assert len(str(float(exp))) <= 8  # rounded to what its standard error supports, not 16 digits


def test_an_offset_and_a_factor_are_not_snapped_to_pi_rationals_by_chance():
    # the former rule snapped 2.59 to 81/(10*pi) (within 1 %), simplify wrote that 8.1/(pi*x), and the
    # final refit printed -5.2095478395971 + 8.13461172776329/(pi*x): a float over pi
    rng = np.random.default_rng(3)
    y = -5.21 + 2.59 / X1[:, 0]
    y = y + 0.01 * np.std(y) * rng.standard_normal(1000)
    out = refine(-5.21 + 2.59 / x, [x], X1, y)
    assert not out.has(sympy.pi), out
    assert sorted(round(float(f), 2) for f in out.atoms(sympy.Float)) == [-5.21, 2.59]
    assert all(len(str(f).rstrip("0")) <= 9 for f in out.atoms(sympy.Float))  # rounded to their errors


def test_a_huge_constant_is_no_twenty_digit_integer():
    # the former rule printed 319995698545804312576*x
    y = 3.2e20 * X1[:, 0] * (1 + 1e-3 * np.random.default_rng(2).standard_normal(1000))
    out = refine(3.2e20 * x, [x], X1, y)
    assert not any(abs(r.p) >= 10 ** 9 for r in out.atoms(sympy.Rational))
    assert str(out).startswith("3.2") and "e+20" in str(out)


def test_no_rational_of_more_than_nine_digits_survives_simplification():
    long = sympy.Rational(95367431640625, 79792266297612001) * x ** 20  # (5*x/7)**20 multiplied out
    for out in (shorten_numbers(long), simplify_formula(long)):
        assert not any(max(abs(r.p), r.q) >= 10 ** 9 for r in out.atoms(sympy.Rational))
        assert out.atoms(sympy.Float)
    assert shorten_numbers(sympy.Rational(3, 7) * x) == sympy.Rational(3, 7) * x


def test_simplification_does_not_turn_exact_numbers_into_floats():
    e = sympy.Float(-5.23593193324435) + sympy.Rational(81, 10) / (sympy.pi * x)
    assert sympy.Rational(81, 10) in simplify_formula(e).atoms(sympy.Rational)  # simplify alone writes 8.1


def test_a_weighted_average_fitted_as_a_linear_law_keeps_its_floats_against_the_noise_floor():
    # y = (m1 x1 + m2 x2)/(m1 + m2) with the masses unseen: a linear formula in x1, x2 misses part of
    # the law. Judged by its own misfit its constants look like 1/2 and its small terms like 0
    # ((x1 + x2)/2, a confident wrong answer); judged against the model's noise floor (1e-4) they
    # are what they are: floats, rounded to their precision
    rng = np.random.default_rng(4)
    m1, m2 = rng.uniform(1, 3, 1000), rng.uniform(1, 3, 1000)
    y = (m1 * X2[:, 0] + m2 * X2[:, 1]) / (m1 + m2)
    start = 0.5 * x1 + 0.5 * x2 + 0.001 * x1 ** 2 - 0.002
    loose = refine(start, [x1, x2], X2, y)  # no floor: the misfit is taken for noise
    assert sympy.simplify(loose - (x1 + x2) / 2) == 0
    out = refine(start, [x1, x2], X2, y, noise=1e-4)
    assert not _exact_numbers(out)[0] and len(out.atoms(sympy.Float)) >= 3, out


def test_a_true_weighted_average_with_noise_loses_its_spurious_terms():
    rng = np.random.default_rng(5)
    y = 0.4 * X2[:, 0] + 0.6 * X2[:, 1] + 1e-3 * rng.standard_normal(1000)
    out = refine(0.4003 * x1 + 0.5998 * x2 + 0.0012 * x1 ** 2 - 0.0008, [x1, x2], X2, y, noise=1e-3)
    assert sympy.simplify(out - (2 * x1 + 3 * x2) / 5) == 0


def test_a_true_factor_of_pi_and_three_halves_are_still_found():
    y = np.pi * X1[:, 0] ** 1.5 * (1 + 1e-4 * np.random.default_rng(6).standard_normal(1000))
    out = refine(3.1413 * x ** 1.50007, [x], X1, y, noise=1e-4)
    assert out == sympy.pi * x ** sympy.Rational(3, 2)


def test_snapping_is_held_to_the_noise_floor_not_to_the_misfit():
    # a formula that misses a wiggle of the law, with a factor 16*pi fitted: against its own misfit
    # 16*pi is "within the noise"; against the model's floor (1e-4) it is not, and stays a float
    g = np.exp(-X1[:, 0])
    wiggle = g * (1 + 0.02 * np.sin(7 * X1[:, 0]))
    y = 16 * np.pi * 1.0003 * wiggle * float(g @ g / (wiggle @ g))  # least squares factor 16*pi*1.0003
    start = sympy.Float(50.28) * sympy.exp(-x)
    assert snap_constants(start, [x], X1, y) == 16 * sympy.pi * sympy.exp(-x)
    held = snap_constants(start, [x], X1, y, noise=1e-4)
    assert not held.has(sympy.pi) and held.atoms(sympy.Float)


def test_a_sum_fitted_as_a_power_product_gets_no_invented_exponents():
    # y = a + b fitted as C a^p b^q: the former rule printed a**(pi/8)*b**(pi/8)*exp(7/3) here
    a, b = sympy.symbols("a b", positive=True)
    X = np.random.default_rng(7).uniform(1, 5, (1000, 2))
    y = X[:, 0] + X[:, 1]
    start = 2.0 * a ** 0.5 * b ** 0.5
    for noise in (None, 1e-4):  # against its own misfit, and against a noise floor
        out = refine(start, [a, b], X, y, loss_space="log", noise=noise)
        exponents = [p.exp for p in out.atoms(sympy.Pow) if p.base in (a, b)]
        assert exponents and all(isinstance(e, sympy.Float) for e in exponents), out
        assert not any(isinstance(f, sympy.exp) for f in out.atoms(sympy.Function)), out
    assert not out.has(sympy.pi) and not _exact_numbers(out)[0]  # held to the floor: floats only


def test_a_formula_that_misses_the_law_keeps_its_frequency_a_float_not_a_rational_over_pi():
    # 0.33*cos(w t) fitted to a damped oscillation exp(-t/2)*cos(3t): its error is far above the
    # noise floor. Coded to the precision the floor alone would give, w = 2.99681 cost more bits
    # than 113/(12*pi) = 2.99739: the former rule printed 0.3239*cos(113*t/(12*pi)). Coded to
    # the formula's own precision it stays a float.
    t = sympy.Symbol("t", real=True)
    X = np.random.default_rng(0).uniform(0, 6, (1500, 1))
    y = np.exp(-0.5 * X[:, 0]) * np.cos(3 * X[:, 0])
    out = refine(sympy.Float(0.33) * sympy.cos(sympy.Float(2.9974) * t), [t], X, y, noise=1e-3)
    assert not out.has(sympy.pi), out
    (w,) = [a.args[0].as_coeff_Mul()[0] for a in out.atoms(sympy.cos)]
    assert isinstance(w, sympy.Float) and abs(float(w) - 2.9968) < 1e-3, out


def test_a_named_constant_takes_a_short_coefficient_only():
    # regression (III.15.14, h**2/(8 pi**2 E d**2)): 1/(8 pi**2) was out of reach (q <= 4 for
    # pi**-2) and printed as 0.012665147955292 at noise 0
    c = 1 / (8 * math.pi ** 2)
    assert exact_candidates(c, "factor", 1e-9)[0].expr == 1 / (8 * sympy.pi ** 2)
    rng = np.random.default_rng(0)
    X = rng.uniform(1, 3, (200, 2))
    y = c * X[:, 0] ** 2 / X[:, 1]
    assert snap_constants(sympy.Float(c) * x1 ** 2 / x2, [x1, x2], X, y) == x1 ** 2 / (8 * sympy.pi ** 2 * x2)
    # regression (README's Kepler example): a fitted factor 281380.0 became 34844827/(4 pi**3),
    # an 8-digit numerator in front of pi**-3; no named constant takes a numerator of 100 or more
    assert not any(c.expr.has(sympy.pi) for c in exact_candidates(281380.0, "factor", 1.0))
    assert all(abs(sympy.fraction(c.expr / b)[0]) < 100 for c in exact_candidates(281380.0, "factor", 50.0)
               for b in (sympy.pi, 1 / sympy.pi, sympy.pi ** 2, sympy.pi ** -2, sympy.pi ** 3, sympy.pi ** -3)
               if (c.expr / b).is_Rational)


def test_a_float_exponent_just_off_a_simple_value_is_a_near_miss():
    from kansym.symbolic.constants import near_miss_exponents

    x, y = sympy.symbols("x y", positive=True)
    # a random law at 1 % noise: sqrt(1 + 3 u^2) came back as the power u**0.99969 of its large-u limit
    assert near_miss_exponents(4 * x ** sympy.Float(0.99969) * y) == [(sympy.Float(0.99969), 1)]
    assert near_miss_exponents(x ** sympy.Float(1.49937) / y ** sympy.Float(0.4996)) == [
        (sympy.Float(1.49937), sympy.Rational(3, 2)), (sympy.Float(-0.4996), sympy.Rational(-1, 2))]
    # far from every simple value, or exactly one written as a float: nothing to say
    assert near_miss_exponents(x ** sympy.Float(0.2221) + y ** sympy.Float(1.0478)) == []
    assert near_miss_exponents(x ** sympy.Float(1.5) + x ** sympy.Rational(3, 2)) == []
    # near 0 the tolerance is absolute: an input the law may not hold
    assert near_miss_exponents(x ** sympy.Float(0.00025) * y) == [(sympy.Float(0.00025), 0)]
    assert near_miss_exponents(x ** sympy.Float(0.05) * y) == []


def test_fitted_exponents_are_the_floats_no_simple_rational():
    from kansym.symbolic.constants import fitted_exponents

    x, y = sympy.symbols("x y", positive=True)
    expr = (1 + x ** sympy.Float(0.8633)) ** sympy.Float(1.16374) * y ** sympy.Float(1.5) * x ** sympy.Rational(1, 3)
    assert fitted_exponents(expr) == [sympy.Float(1.16374), sympy.Float(0.8633)]
    assert fitted_exponents(x ** sympy.Float(0.25) * y ** -2) == []  # 1/4 written as a float is simple
    assert fitted_exponents(x ** sympy.Float(0.2)) == [sympy.Float(0.2)]  # 1/5: denominators up to 4 only
