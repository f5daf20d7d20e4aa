"""The product of powers read off the rows above the noise (kansym.symbolic.monomial)."""

import numpy as np
import sympy

from kansym.symbolic.monomial import monomial_candidates, sum_of_two
from kansym.symbolic.verify import is_exact_recovery

NAMES = ["a", "b", "c", "d", "e", "f"]
SYMS = [sympy.Symbol(n, positive=True) for n in NAMES]


def _table(law, n=6000, seed=0, noise=0.01):
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.uniform(0.2, 5.0, n), rng.uniform(0.4, 30.0, n), rng.uniform(0.4, 8.0, n),
                         rng.uniform(3.0, 200.0, n), rng.uniform(8.0, 160.0, n), rng.uniform(1.0, 10.0, n)])
    y = law(x)
    return x, y + rng.normal(0.0, noise * np.sqrt(np.mean(y ** 2)), n)


def test_a_monomial_of_five_inputs_under_noise_that_crosses_zero_is_found_and_the_unused_column_dropped():
    """Regression (random law, seed 3, at 1 % noise): most rows of a target spanning decades are at
    the noise, some below 0, so the table was learned in linear units and came back as a partial formula."""
    law = lambda x: 2 * np.sqrt(x[:, 0]) * x[:, 2] * x[:, 4] ** 3 / (np.sqrt(x[:, 1]) * x[:, 3])
    x, y = _table(law)
    assert np.mean(y <= 0) > 0.01  # log units are out of reach
    found = monomial_candidates(x, y, SYMS)[0]
    truth = 2 * sympy.sqrt(SYMS[0]) * SYMS[2] * SYMS[4] ** 3 / (sympy.sqrt(SYMS[1]) * SYMS[3])
    assert found is not None and found.origin == "monomial"
    assert is_exact_recovery(truth, found.expr, symbols=NAMES), found.expr
    assert SYMS[5] not in found.expr.free_symbols and 0.005 < found.error < 0.05


def test_a_negative_law_keeps_its_sign():
    law = lambda x: -x[:, 0] * x[:, 1] ** 2 / (4 * np.pi * x[:, 2])
    x, y = _table(law, seed=1)
    found = monomial_candidates(x[:, :3], y, SYMS[:3])[0]
    assert found is not None and is_exact_recovery(-SYMS[0] * SYMS[1] ** 2 / (4 * sympy.pi * SYMS[2]), found.expr,
                                                   symbols=NAMES[:3]), found.expr


def test_no_candidate_without_positive_columns_and_a_sum_is_not_made_a_product():
    law = lambda x: x[:, 0] * x[:, 1] + x[:, 2]
    x, y = _table(law, seed=2)
    shifted = x.copy()
    shifted[0, 0] = -1.0
    assert monomial_candidates(shifted, y, SYMS) == []
    product = monomial_candidates(x[:, :3], y, SYMS[:3])[0]
    assert product.error > 0.05  # no product of powers fits a sum: the choice passes it over


def test_a_sum_of_two_products_of_either_sign_is_found_under_noise():
    """As random law seed 47 at 1 % noise (2 c^2/b^2 - b/(2 a d^2) there): no line in any units."""
    law = lambda x: 2 * x[:, 2] ** 2 / x[:, 1] ** 2 - x[:, 1] * np.sqrt(x[:, 3]) / (2 * x[:, 0])
    x, y = _table(law, seed=4)
    a, b, c, d = SYMS[:4]
    truth = 2 * c ** 2 / b ** 2 - b * sympy.sqrt(d) / (2 * a)
    found = monomial_candidates(x[:, :4], y, SYMS[:4])
    assert len(found) == 2 and is_exact_recovery(truth, found[1].expr, symbols=NAMES[:4]), [f.expr for f in found]
    (p, c1), (q, c2) = sum_of_two(x[:, :4], law(x))  # without noise: the two products and their coefficients
    terms = {tuple(p): c1, tuple(q): c2}
    assert terms.keys() == {(0.0, -2.0, 2.0, 0.0), (-1.0, 1.0, 0.0, 0.5)}
    assert np.allclose([terms[(0.0, -2.0, 2.0, 0.0)], terms[(-1.0, 1.0, 0.0, 0.5)]], [2.0, -0.5])
    assert monomial_candidates(x[:, :2], y, SYMS[:2])[1:] == []  # two inputs: the direct search's
