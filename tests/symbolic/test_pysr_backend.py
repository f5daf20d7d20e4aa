"""The PySR backend without PySR: error paths and the translation of its equation table.

PySR (and Julia) are never imported here; the import is made to fail through
``sys.modules`` / ``importlib``. A test that runs the real search is skipped unless
PySR imports.
"""

import importlib
import sys
import types

import numpy as np
import pandas as pd
import pytest
import sympy

from kansym.config import HOLDOUT
from kansym.errors import ConfigError, FitError
from kansym.discover import pysr as dp, pysr as pb
from kansym.discover.result import split_holdout
from kansym.symbolic.verify import is_exact_recovery


def test_missing_pysr_is_one_clear_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pysr", None)  # "import pysr" raises ModuleNotFoundError
    with pytest.raises(ConfigError, match=r"needs PySR, which is not installed: pip install 'kansym\[pysr\]'") as err:
        pb.import_pysr()
    assert "\n" not in str(err.value)


def test_julia_failure_is_one_clear_fit_error(monkeypatch):
    real = importlib.import_module

    def fake(name, *a, **k):
        if name == "pysr":
            raise RuntimeError("Julia download failed: could not resolve host julialang-s3.julialang.org\nstack...")
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", fake)
    with pytest.raises(FitError, match=r"could not start Julia \(RuntimeError: Julia download failed") as err:
        pb.import_pysr()
    assert "\n" not in str(err.value) and "--backend kan" in str(err.value)


def test_discover_pysr_fails_cleanly_without_pysr(monkeypatch):
    monkeypatch.setitem(sys.modules, "pysr", None)
    x = np.random.default_rng(0).uniform(1, 2, (50, 2))
    with pytest.raises(ConfigError, match="not installed"):
        dp.discover_pysr(x, x[:, 0] * x[:, 1], ["I", "gamma"], "y")


def _fake_pysr(monkeypatch, seen: dict) -> None:
    """A stand-in ``pysr`` module (PySR itself is never imported here): its regressor records
    the rows it is given and answers with a fixed equation table."""
    class PySRRegressor:
        def __init__(self, **kwargs):
            seen["kwargs"] = kwargs

        def fit(self, x, y, variable_names):
            seen["x"], seen["y"], seen["names"] = x, y, variable_names
            self.equations_ = pd.DataFrame({"complexity": [1, 3], "loss": [1.0, 1e-14],
                                            "equation": ["2.0", f"{variable_names[0]} * {variable_names[1]}"]})

    monkeypatch.setitem(sys.modules, "pysr", types.SimpleNamespace(PySRRegressor=PySRRegressor))


@pytest.mark.parametrize("n, seed", [(200, 0), (200, 3), (4000, 1), (50, 0)])
def test_pysr_searches_the_fitting_rows_of_the_runs_split_and_is_verified_on_the_held_out_ones(monkeypatch, n, seed):
    # the split of a discovery run (Rows.split): HOLDOUT of the rows, seeded; every fitting row goes to
    # PySR (max_train_rows caps the KAN's training rows, not PySR's); 50 rows hold none out
    seen: dict = {}
    _fake_pysr(monkeypatch, seen)
    x = np.random.default_rng(seed).uniform(1, 3, (n, 2))
    y = x[:, 0] * x[:, 1]
    f = dp.discover_pysr(x, y, ["m", "a"], "F", pb.PySRConfig(seed=seed), seed=seed)
    fit_idx, test_idx = split_holdout(n, HOLDOUT, seed)
    assert np.array_equal(seen["x"], x[fit_idx]) and np.array_equal(seen["y"], y[fit_idx])
    assert seen["names"] == ["m", "a"] and seen["kwargs"]["random_state"] == seed
    assert f.n_test == (0 if test_idx is None else len(test_idx)) and (n > 50) == (test_idx is not None)
    assert str(f.expr) == "a*m" and f.r2_test == pytest.approx(1.0) and f.origin == "pysr"


def test_parse_uses_kansym_symbols_and_pysr_operators():
    I, gamma = sympy.Symbol("I", real=True), sympy.Symbol("gamma", real=True)
    e = pb.parse_pysr_equation("square(I) * inv(gamma - 1.0) + neg(cube(x1)) ^ 1", [I, gamma])
    assert e.free_symbols == {I, gamma}
    assert sympy.simplify(e - (I**2 / (gamma - 1) - gamma**3)) == 0
    with pytest.raises(FitError, match="unknown names"):
        pb.parse_pysr_equation("foo * I", [I, gamma])
    with pytest.raises(FitError, match="could not read"):
        pb.parse_pysr_equation("I * (", [I, gamma])


def test_pysr_best_is_pysr_rule():
    # losses: a big drop at complexity 5, then small gains; the 1.5x rule excludes 3 and 1
    assert pb.pysr_best([1, 3, 5, 9], [1.0, 0.5, 1e-6, 0.9e-6]) == 2
    assert pb.pysr_best([1, 3], [1.0, 1.0]) == 0


def test_table_becomes_a_verified_formula_with_front():
    rng = np.random.default_rng(0)
    x = rng.uniform(1, 3, (200, 2))
    y = x[:, 0] * x[:, 1] ** 2
    table = pd.DataFrame({
        "complexity": [1, 3, 5, 7],
        "loss": [2.0, 0.3, 1e-14, 1e-14],
        "equation": ["5.1", "m * 3.2", "m * square(a)", "(m * square(a)) + 1e-9"],
    })
    m, a = sympy.symbols("m a", real=True)
    f = dp.formulas_from_table(table, [m, a], "F", x[:150], y[:150], x[150:], y[150:])
    assert is_exact_recovery(m * a**2, f.expr) and f.r2_test == pytest.approx(1.0)
    assert f.n_test == 50 and f.warning is None and f.target == "F"
    chosen = [e for e in f.front if e.chosen]
    assert len(chosen) == 1 and chosen[0].expr == f.expr
    assert [e.complexity for e in f.front] == sorted(e.complexity for e in f.front)
    with pytest.raises(FitError, match="no equation"):
        dp.formulas_from_table(table.iloc[:0], [m, a], "F", x, y)


def test_real_pysr_search_when_available():
    try:
        pb.import_pysr()
    except (ConfigError, FitError) as exc:
        pytest.skip(f"PySR unavailable here: {exc}")
    x = np.random.default_rng(0).uniform(1, 3, (200, 2))
    f = dp.discover_pysr(x, x[:, 0] * x[:, 1], ["m", "a"], "F", pb.PySRConfig(niterations=5))
    assert f.r2_test > 0.999
