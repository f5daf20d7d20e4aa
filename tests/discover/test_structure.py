import numpy as np
import pytest
import sympy
import torch

from kansym.errors import DataError
from kansym.discover.structure_tests import choose_space
from kansym.io.transform import DataTransform


def test_choose_space():
    rng = np.random.default_rng(0)
    pos_wide = np.exp(rng.uniform(0, 10, (50, 2)))
    assert choose_space(pos_wide, pos_wide[:, :1], "auto") == "log"
    narrow = rng.uniform(1, 2, (50, 2))
    assert choose_space(narrow, narrow[:, :1], "auto") == "linear"  # positive but < 2 decades
    signed = rng.uniform(-1, 1, (50, 2))
    assert choose_space(signed, np.abs(signed[:, :1]) + 1, "auto") == "linear"
    assert choose_space(signed, signed[:, :1], "linear") == "linear"
    with pytest.raises(DataError, match="positive"):
        choose_space(signed, signed[:, :1], "log")


def test_choose_space_by_additivity():
    # within one decade: a product is additive only in log units, a sum only in linear units
    x = np.random.default_rng(1).uniform(1, 5, (500, 3))
    assert choose_space(x, (x[:, 0] * x[:, 1] / x[:, 2] ** 2)[:, None]) == "log"
    assert choose_space(x, (x[:, 0] + x[:, 1] + x[:, 2])[:, None]) == "linear"
    assert choose_space(x, (x[:, 0] * x[:, 1] + x[:, 2])[:, None]) == "linear"
    assert choose_space(x[:, :1], x[:, :1] ** 2) == "linear"  # one input: the span rule alone


def test_linear_transform_scales_and_inverts():
    x = np.array([[0.0, 10.0], [2.0, 30.0], [4.0, 20.0]])
    y = np.array([[1.0], [3.0], [5.0]])
    t = DataTransform.fit(x, y)
    np.testing.assert_allclose(t.inputs(x), [[-1, -1], [0, 1], [1, 0]])
    z = t.targets(y)
    np.testing.assert_allclose(z.mean(), 0, atol=1e-12)
    np.testing.assert_allclose(z.std(), 1)
    np.testing.assert_allclose(t.outputs(z), y)
    torch.testing.assert_close(t.outputs_torch(torch.as_tensor(z)), torch.as_tensor(y))
    back = DataTransform.from_dict(t.to_dict())
    np.testing.assert_allclose(back.inputs(x), t.inputs(x))


def test_log_transform_and_expressions_agree():
    rng = np.random.default_rng(1)
    x = np.exp(rng.uniform(0, 8, (40, 2)))
    y = x[:, :1] ** 1.5
    t = DataTransform.fit(x, y, log_space=True)
    a, b = sympy.symbols("a b", positive=True)
    exprs = t.input_exprs([a, b])
    f = sympy.lambdify([a, b], exprs[0])
    np.testing.assert_allclose(f(x[:, 0], x[:, 1]), t.inputs(x)[:, 0])
    o = sympy.Symbol("o")
    g = sympy.lambdify([o], t.output_expr(o))
    z = t.targets(y)[:, 0]
    np.testing.assert_allclose(g(z), y[:, 0], rtol=1e-10)


def test_constant_columns_are_refused():
    x = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0]])
    with pytest.raises(DataError, match="input column is constant"):
        DataTransform.fit(x, np.array([[1.0], [2.0], [3.0]]))
    with pytest.raises(DataError, match="target column is constant"):
        DataTransform.fit(x[:, :1], np.ones((3, 1)))


def test_additivity_against_the_noise_floor():
    from kansym.discover.config import DiscoverConfig
    from kansym.discover.structure_tests import additivity as _additivity
    from kansym.discover.structure_tests import additive_r2, interaction_r2

    rng = np.random.default_rng(2)
    x = rng.uniform(1, 5, (3000, 2))
    prod = x[:, 0] * x[:, 1]
    noisy = prod + rng.normal(0, 0.01 * np.sqrt(np.mean(prod**2)), prod.shape)
    # in linear units a product is not additive, and the interaction model shows it
    assert 1 - additive_r2(x, prod) > 0.05 and 1 - interaction_r2(x, prod) < 1e-10
    # in log units (chosen by choose_space) it is, even with 1 % noise
    additive, floor = _additivity(x, noisy[:, None], DiscoverConfig())
    assert additive and 0.999 <= floor < 0.9999
    additive, floor = _additivity(x, prod[:, None], DiscoverConfig())
    assert additive and floor == 0.9999
    signed = x[:, 0] * np.sin(x[:, 1])  # crosses zero: linear units, not additive
    assert _additivity(x, signed[:, None], DiscoverConfig())[0] is False


def test_one_non_positive_row_outside_the_training_subsample_rules_out_log_units():
    # noise 0.01 on a target near 0 left one negative value among 10,000 rows; the KAN trained in
    # log units on 3,000 positive ones and the refinement on all rows raised a DataError (stop 24)
    from kansym.discover import DiscoverConfig, discover
    from kansym.discover.rows import Rows
    from kansym.discover.structure_tests import table_space

    rng = np.random.default_rng(0)
    x = 10 ** rng.uniform(0, 2, (1500, 2))
    y = x[:, 0] / x[:, 1] ** 2
    config = DiscoverConfig(max_train_rows=300, time_limit=60)
    rows = Rows.split(x, y[:, None], config)
    outside = next(i for i in range(len(x)) if not np.any(np.all(rows.x_train == x[i], axis=1)))
    y[outside] = -1e-4
    assert choose_space(rows.x_train, rows.y_train) == "log"  # what the training rows alone allow
    assert table_space("auto", x, y) == "linear" and table_space("log", x, y) == "log"
    assert table_space("auto", x, np.abs(y)) == "auto"
    found = discover(x, y, ["a", "b"], ["y"], config, progress=False)
    assert found.trained.transform.log_space is False and np.isfinite(found.formulas[0].r2_test)


def test_interaction_error_with_a_factor_is_the_weighted_fit_judged_on_the_factor_times_y():
    from kansym.discover.structure_tests import interaction_error, legendre_features
    from kansym.symbolic.verify import nrmse

    rng = np.random.default_rng(3)
    x, xt = rng.uniform(0, 1, (400, 1)), rng.uniform(0, 1, (100, 1))
    f, ft = rng.uniform(1, 10, 400), rng.uniform(1, 10, 100)
    y = np.exp(x[:, 0]) + rng.normal(0, 1, 400) / f
    yt = np.exp(xt[:, 0]) + rng.normal(0, 1, 100) / ft
    A = legendre_features(x, 5, 2)
    coef, *_ = np.linalg.lstsq(A * f[:, None], y * f, rcond=None)
    expected = nrmse(ft * yt, ft * (legendre_features(xt, 5, 2, x.min(axis=0), x.max(axis=0)) @ coef))
    assert interaction_error(x, y, xt, yt, factor=f, factor_test=ft) == pytest.approx(expected, rel=1e-12)
    ones = interaction_error(x, y, xt, yt, factor=np.ones(400), factor_test=np.ones(100))
    assert ones == pytest.approx(interaction_error(x, y, xt, yt), rel=1e-12)
