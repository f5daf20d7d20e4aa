"""kansym.io.magnitude: exact power-of-two working units for tables of extreme magnitude, and the way back."""

from fractions import Fraction

import numpy as np
import pytest
import sympy
import torch

from kansym.errors import DataError
from kansym.io.bundle import ModelBundle
from kansym.io.magnitude import ColumnScales, tidy_numbers
from kansym.io.transform import DataTransform
from kansym.nn.config import KANConfig
from kansym.nn.kan import KAN

RNG = np.random.default_rng(0)


def _table(x_scale, y_scale, n=50, signed=False):
    lo = -1.0 if signed else 1.0
    x = np.c_[RNG.uniform(lo, 3, n) * x_scale, RNG.uniform(1, 2, n)]
    return x, (RNG.uniform(1, 3, n) * y_scale)[:, None]


def test_moderate_tables_keep_their_units():
    for xs, ys in [(1.0, 1.0), (1e-6, 1e9), (5e9, 1e-5)]:
        assert ColumnScales.fit(*_table(xs, ys, signed=True)).identity
    # in log units (positive, spanning decades) up to float32's range: Kepler's masses stay in kg
    x = np.c_[10 ** RNG.uniform(23, 30.3, 30), 10 ** RNG.uniform(4, 9.8, 30)]
    assert ColumnScales.fit(x, RNG.uniform(1, 9e4, (30, 1))).identity
    assert not ColumnScales.fit(x * 1e10, RNG.uniform(1, 9e4, (30, 1))).identity


@pytest.mark.parametrize("xs, ys", [(1.0, 1e307), (1e-300, 1e-300), (1e150, 1.0), (1e20, 1e20), (1e-10, 1.0)])
def test_an_extreme_table_moves_every_column_near_1_exactly(xs, ys):
    x, y = _table(xs, ys, signed=True)
    s = ColumnScales.fit(x, y)
    assert not s.identity
    xw, yw = s.x_to_working(x), s.y_to_working(y)
    for col in np.c_[xw, yw].T:
        assert 1.0 <= np.abs(col).max() < 2.0
    assert np.array_equal(s.x_to_table(xw), x) and np.array_equal(s.y_to_table(yw), y)  # bit for bit


def test_a_column_spanning_more_than_float64s_normal_range_loses_nothing():
    x = np.array([[1e300], [1e-30], [5e-300], [0.0]])
    s = ColumnScales.fit(x, np.ones((4, 1)) * 1e307)
    xw = s.x_to_working(x)
    assert np.all((np.abs(xw[:3]) >= 2.0 ** -1022)) and np.array_equal(s.x_to_table(xw), x)


def test_a_formula_goes_back_with_exact_powers_of_two():
    a, b = sympy.symbols("a b", positive=True)
    s = ColumnScales((40, -3), (45,))
    # y' = a'/3 + b'  ->  y = 2**45 (a 2**-40 / 3 + b 2**3)
    assert s.expr_to_table(a / 3 + b, [a, b]) == sympy.Rational(32, 3) * a + sympy.Float(2.0 ** 48) * b
    back = s.expr_to_table(sympy.Float(0.25) * a ** sympy.Rational(3, 2) / sympy.sqrt(b), [a, b])
    x = np.array([[2.0 ** 41, 0.5], [3.0 * 2 ** 40, 0.125]])
    want = 2.0 ** 45 * 0.25 * (x[:, 0] * 2.0 ** -40) ** 1.5 / np.sqrt(x[:, 1] * 2.0 ** 3)
    got = sympy.lambdify([a, b], back)(x[:, 0], x[:, 1])
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert len(back.atoms(sympy.Float)) == 1 and not back.atoms(sympy.Pow) - {a ** sympy.Rational(3, 2), b ** -sympy.Rational(1, 2)}
    assert s.expr_to_working(back, [a, b]).equals(sympy.Float(0.25) * a ** sympy.Rational(3, 2) / sympy.sqrt(b))


def test_tidy_numbers_multiplies_out_what_the_powers_of_two_leave():
    x, p = sympy.Symbol("x", real=True), sympy.Symbol("p", positive=True)
    assert tidy_numbers(x / 2 ** 60) == sympy.Float(2.0 ** -60) * x
    assert tidy_numbers(32 * x / 3) == 32 * x / 3  # short exact numbers stay
    assert tidy_numbers(sympy.log(p / 2 ** 32)) == sympy.log(p) - sympy.Float(32 * np.log(2))
    assert not tidy_numbers(sympy.Float(3.1e20) * sympy.sqrt(2) * x).has(sympy.sqrt(2))
    assert all(abs(int(r.p)) < 10 for r in tidy_numbers(2 ** sympy.Integer(700) * (x - 3) / 7).atoms(sympy.Rational))


@pytest.mark.parametrize("log_space", [False, True])
def test_a_bundle_trained_in_working_units_predicts_the_tables_units(log_space):
    x, y = _table(1e-300, 1e300, n=40)
    s = ColumnScales.fit(x, y, "log" if log_space else "linear")
    xw, yw = s.x_to_working(x), s.y_to_working(y)
    model = KAN(KANConfig(width=(2, 1), grid_size=3, seed=0)).to(torch.float64)
    bundle = ModelBundle.create(model, DataTransform.fit(xw, yw, log_space=log_space), ["a", "b"], ["y"], xw, yw)
    table = s.bundle_to_table(bundle)
    assert np.array_equal(table.x_cal, x) and np.array_equal(table.y_cal, y)
    np.testing.assert_allclose(table.predict(x), s.y_to_table(bundle.predict(xw)), rtol=1e-12)
    back = s.bundle_to_working(table)
    np.testing.assert_allclose(back.predict(xw), bundle.predict(xw), rtol=1e-12)


def test_rational_exponents_go_back_too():
    a = sympy.Symbol("a", positive=True)
    s = ColumnScales((Fraction(1),), (Fraction(1, 2),))
    assert s.expr_to_table(a, [a]) == sympy.sqrt(2) * a / 2
    np.testing.assert_allclose(s.y_to_table(np.array([[2.0]])), [[2.0 * np.sqrt(2)]])


@pytest.mark.parametrize("log_space", [False, True])
@pytest.mark.parametrize("ys", [1.0, 1e300])
def test_a_target_negative_on_every_row_is_worked_on_with_its_sign_turned(log_space, ys):
    x, y = _table(1.0, -ys, n=40)
    s = ColumnScales.fit(x, y, "log" if log_space else "linear")
    assert not s.identity and s.y_sign == (-1,)
    xw, yw = s.x_to_working(x), s.y_to_working(y)
    assert np.all(yw > 0) and np.array_equal(s.y_to_table(yw), y)  # bit for bit
    a, b = sympy.symbols("a b", positive=True)
    law = s.expr_to_table(a * b, [a, b])  # y' = a' b'  ->  y = -(...)
    np.testing.assert_allclose(sympy.lambdify([a, b], law)(*x.T), s.y_to_table((xw[:, 0] * xw[:, 1])[:, None])[:, 0],
                               rtol=1e-14)
    model = KAN(KANConfig(width=(2, 1), grid_size=3, seed=0)).to(torch.float64)
    bundle = ModelBundle.create(model, DataTransform.fit(xw, yw, log_space=log_space), ["a", "b"], ["y"], xw, yw)
    table = s.bundle_to_table(bundle)
    assert np.all(table.predict(x) < 0) and np.array_equal(table.y_cal, y)
    np.testing.assert_allclose(table.predict(x), s.y_to_table(bundle.predict(xw)), rtol=1e-12)
    t = DataTransform.from_dict(table.transform.to_dict())  # the sign survives the checkpoint
    np.testing.assert_allclose(t.outputs(bundle.model(bundle.model_inputs(xw)).detach().numpy()), table.predict(x),
                               rtol=1e-12)
    np.testing.assert_allclose(s.bundle_to_working(table).predict(xw), bundle.predict(xw), rtol=1e-12)


def test_a_target_of_both_signs_keeps_its_sign():
    x, y = _table(1.0, 1.0, n=40)
    y[0] = -1.0
    assert ColumnScales.fit(x, y).identity and ColumnScales.fit(x, -np.abs(y)).y_sign == (-1,)
    with pytest.raises(DataError, match="output_sign"):
        DataTransform.from_dict({**DataTransform.fit(x, np.abs(y)).to_dict(), "output_sign": [2.0]})
