"""Floats the data cannot tell apart become one constant (kansym.symbolic.refine)."""

import numpy as np
import sympy

from kansym.symbolic.refine import refine, tie_constants

w = sympy.Symbol("w", positive=True)


def _rows(law, noise, seed=0, n=2000):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.3, 3.0, size=(n, 1))
    y = law(X[:, 0])
    return X, y + noise * np.std(y) * rng.standard_normal(n)


def test_one_constant_in_two_places_is_one_and_the_formula_simplifies():
    X, y = _rows(lambda v: 0.565 / np.cosh(1 / v), 0.01)
    fitted = sympy.exp(1 / w) / (sympy.Float(0.8848) * sympy.exp(2 / w) + sympy.Float(0.885))
    tied = tie_constants(fitted, [w], X, y, noise=0.01)
    assert len(tied.atoms(sympy.Float)) == 1
    out = refine(fitted, [w], X, y, noise=0.01)
    assert out.has(sympy.cosh) and len(out.atoms(sympy.Float)) == 1, out
    c = float(next(iter(out.atoms(sympy.Float))))
    assert abs(c - 0.565) < 0.005


def test_floats_the_data_tell_apart_stay_two():
    # 0.8 and 0.9 exp(-w): 10 % apart, far beyond 1e-3 noise on 2000 rows
    X, y = _rows(lambda v: 0.8 * v + 0.9 * np.exp(-v), 0.001)
    fitted = sympy.Float(0.8) * w + sympy.Float(0.9) * sympy.exp(-w)
    assert tie_constants(fitted, [w], X, y, noise=0.001) == fitted
