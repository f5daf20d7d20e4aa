"""kansym.KANRegressor: a scikit-learn style facade over the discovery pipeline."""

import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import sympy

import kansym
from kansym.errors import ConfigError, DataError
from kansym.symbolic.verify import is_exact_recovery


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.uniform(1, 5, (600, 2)), columns=["m", "a"])
    y = pd.Series(X["m"] * X["a"], name="F")  # Newton's second law, F = m a
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a verified formula comes without a warning
        est = kansym.KANRegressor(steps=10, seed=0).fit(X, y)
    return est, X, y


@pytest.mark.slow
def test_recovers_a_simple_law_and_predicts_with_it(fitted):
    est, X, y = fitted
    m, a = sympy.symbols("m a", positive=True)
    assert is_exact_recovery(m * a, est.sympy()), est.sympy()
    assert est.score(X, y) > 0.99999
    assert np.allclose(est.predict(X.to_numpy()[:5]), (X["m"] * X["a"]).to_numpy()[:5], rtol=1e-6)
    assert est.latex() in {"a m", "m a"}
    assert list(est.feature_names_in_) == ["m", "a"] and est.n_features_in_ == 2
    assert est.formula_.target == "F" and est.warning_ is None


@pytest.mark.slow
def test_equations_table_is_the_pareto_front(fitted):
    est, X, y = fitted
    eq = est.equations_
    assert list(eq.columns) == ["complexity", "r2", "error", "sympy", "chosen", "dominated", "partial"]
    assert eq["chosen"].sum() == 1 and not eq[eq["chosen"]].iloc[0]["partial"]
    assert est.status_ == "verified" and est.closed_form_ is None
    assert est.summary().splitlines()[1] == f"sympy: {est.sympy()}"  # as kansym fit prints it
    chosen = eq[eq["chosen"]].iloc[0]
    assert chosen["r2"] > 0.99999 and sympy.sympify(chosen["sympy"]) == sympy.sympify(str(est.sympy()))
    front = eq[~eq["dominated"]]
    assert front["complexity"].is_monotonic_increasing and front["r2"].is_monotonic_increasing


def test_params_roundtrip_and_errors():
    est = kansym.KANRegressor(theta=0.05, library=["x", "sin"])
    params = est.get_params()
    assert params["theta"] == 0.05 and params["library"] == ["x", "sin"] and params["seed"] == 0
    assert est.set_params(seed=3, hidden=(4,)) is est and est.seed == 3 and est.hidden == (4,)
    assert "theta=0.05" in repr(est)
    with pytest.raises(ConfigError, match="no parameter 'thetta'"):
        est.set_params(thetta=1)
    with pytest.raises(ConfigError, match="not fitted"):
        est.predict(np.ones((2, 2)))
    with pytest.raises(ConfigError, match="unknown primitive 'sinn'"):
        kansym.KANRegressor(library=["sinn"]).fit(np.ones((20, 1)) * np.arange(20)[:, None], np.arange(20.0))
    with pytest.raises(DataError, match="y must have shape"):
        kansym.KANRegressor().fit(np.ones((20, 2)), np.ones(19))
    # the CLI's --complexity-weight is a parameter too (it was missing), validated like the CLI's
    assert kansym.KANRegressor(complexity_weight=0.2).get_params()["complexity_weight"] == 0.2
    with pytest.raises(ConfigError, match="complexity_weight"):
        kansym.KANRegressor(complexity_weight=-1).fit(np.ones((20, 1)) * np.arange(20)[:, None], np.arange(20.0))


@pytest.mark.slow
def test_predict_checks_columns(fitted):
    est, *_ = fitted
    with pytest.raises(DataError, match="fitted on 2"):
        est.predict(np.ones((3, 3)))


def test_package_import_stays_light():
    code = "import sys, kansym; print('kansym.estimator' in sys.modules, 'torch' in sys.modules)"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
