"""Squares out of roots (kansym.symbolic.refine): the sign of each factor is read on the data."""

import numpy as np
import sympy

from kansym.symbolic.refine import take_out_squares

RNG = np.random.default_rng(0)
c, t, u, x = sympy.symbols("c t u x", positive=True)
# the relativistic coordinate transformation's ranges: x - u t > 0 on every row
ROWS = np.c_[RNG.uniform(3, 10, 400), RNG.uniform(1, 2, 400), RNG.uniform(1, 2, 400), RNG.uniform(5, 10, 400)]


def test_the_square_under_a_root_comes_out_with_the_sign_it_has_on_the_rows():
    # regression: the direct search's y = c/sqrt((c²-u²)/(t²u² - 2tux + x²)) hid (x - u t)/sqrt(1 - u²/c²)
    hidden = c / sympy.sqrt((c**2 - u**2) / (t**2 * u**2 - 2 * t * u * x + x**2))
    out = take_out_squares(hidden, [c, t, u, x], ROWS)
    assert sympy.simplify(out - (x - u * t) / sympy.sqrt(1 - u**2 / c**2)) == 0, out
    assert not any(p.exp.is_Rational and p.exp.q == 2 and p.base.has(x) for p in out.atoms(sympy.Pow)), out


def test_a_negative_factor_comes_out_negated():
    a, b = sympy.symbols("a b")
    rows = np.c_[RNG.uniform(2, 3, 50), RNG.uniform(1, 2, 50)]  # 1 - a < 0
    out = take_out_squares(sympy.sqrt(b * (1 - a) ** 2), [a, b], rows)
    assert sympy.simplify(out - (a - 1) * sympy.sqrt(b)) == 0, out


def test_a_factor_that_changes_sign_on_the_rows_stays_inside():
    a, b = sympy.symbols("a b")
    rows = np.c_[RNG.uniform(0, 2, 50), RNG.uniform(1, 2, 50)]  # 1 - a of both signs: sqrt((1-a)²) = |1 - a|
    e = sympy.sqrt(b / (a**2 - 2 * a + 1))
    assert take_out_squares(e, [a, b], rows) == e


def test_floats_odd_powers_and_other_functions_are_left_alone():
    a, b = sympy.symbols("a b")
    rows = np.c_[RNG.uniform(2, 3, 50), RNG.uniform(1, 2, 50)]
    for e in (sympy.sqrt(b * (a - 1.0001) ** 2), sympy.sqrt(b * (a - 1) ** 3 + 1), sympy.sqrt(b) * sympy.sin(a),
              (a - 1) ** 2 * b):
        assert take_out_squares(e, [a, b], rows) == e, e
