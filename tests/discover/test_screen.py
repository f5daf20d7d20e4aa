"""Input screening before the KAN (kansym.discover.screen, issue 19): which columns are kept,
forced columns, the bring-back of a wrongly dropped column, and the run through ``kansym fit``."""

from dataclasses import dataclass

import numpy as np
import pytest
import sympy

from kansym.discover.config import DiscoverConfig
from kansym.discover.screen import marginal_screen
from kansym.discover.result import split_holdout
from kansym.discover.screen import (
    MIN_INPUTS, _smooth_residual, screen_inputs, screening_from_record, screening_to_record, with_kept,
)
from kansym.errors import ConfigError


def _marginal(x, y, **kw):
    return marginal_screen(x, y, _smooth_residual, **kw)


def _table(n, d, law, noise=0.0, seed=1, lo=-2.0, hi=2.0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(lo, hi, (n, d))
    y = law(x)
    y = y + noise * np.std(y) * rng.standard_normal(n)
    return x, y[:, None], [f"x{i}" for i in range(d)]


def test_keeps_exactly_the_columns_the_law_uses():
    x, y, names = _table(3000, 10, lambda x: x[:, 3] * x[:, 7] + x[:, 1])
    plan = screen_inputs(x, y, names, DiscoverConfig())
    assert plan.kept == (1, 3, 7)
    assert plan.removed == (0, 2, 4, 5, 6, 8, 9)
    assert plan.z_threshold == pytest.approx(3.2905, abs=1e-3)  # Bonferroni: 1 - 0.01 / 20
    assert min(plan.z_smooth[i] for i in plan.kept) > 10  # the used columns stand out by far
    assert max(max(plan.z_smooth[i], plan.z_kan[i]) for i in plan.removed) < plan.z_threshold
    rec = plan.removed_record()
    assert [r["name"] for r in rec] == ["x0", "x2", "x4", "x5", "x6", "x8", "x9"]
    assert all(r["z_threshold"] == plan.z_threshold and "permutation" in r["reason"] for r in rec)


def test_keeps_a_small_but_real_effect():
    # x2 moves y by 5 % of x1's effect, under 1 % noise
    x, y, names = _table(4000, 8, lambda x: x[:, 1] + 0.05 * x[:, 2], noise=0.01)
    assert screen_inputs(x, y, names, DiscoverConfig()).kept == (1, 2)
    # a 3 % modulation of a product, no noise
    x, y, names = _table(2000, 8, lambda x: x[:, 1] * (1 + 0.03 * x[:, 2]), seed=2)
    assert screen_inputs(x, y, names, DiscoverConfig()).kept == (1, 2)


def test_positive_multiplicative_law_is_screened_in_log_units():
    x, y, names = _table(3000, 8, lambda x: x[:, 3] * np.exp(-x[:, 6]), lo=1.0, hi=3.0)
    plan = screen_inputs(x, y, names, DiscoverConfig())
    assert plan.kept == (3, 6)


def test_a_law_neither_model_explains_drops_nothing():
    # x1 x2 x3 of symmetric inputs is orthogonal to every pairwise polynomial term
    x, y, names = _table(3000, 6, lambda x: x[:, 1] * x[:, 2] * x[:, 3])
    plan = screen_inputs(x, y, names, DiscoverConfig())
    assert plan.r2 < 0.9 and plan.kept == tuple(range(6)) and plan.removed == ()


def test_keep_inputs_forces_a_column_and_bad_names_are_refused():
    x, y, names = _table(2000, 6, lambda x: x[:, 0] + x[:, 1] ** 2)
    plan = screen_inputs(x, y, names, DiscoverConfig(keep_inputs=("x4",)))
    assert plan.kept == (0, 1, 4) and plan.forced == (4,)
    with pytest.raises(ConfigError, match="'nope'"):
        screen_inputs(x, y, names, DiscoverConfig(keep_inputs=("nope",)))


def test_screening_is_off_where_it_cannot_pay():
    x, y, names = _table(2000, MIN_INPUTS - 1, lambda x: x[:, 0] * x[:, 1])
    assert screen_inputs(x, y, names, DiscoverConfig()) is None
    x, y, names = _table(300, 6, lambda x: x[:, 0])  # 240 fitting rows
    assert screen_inputs(x, y, names, DiscoverConfig()) is None
    x, y, names = _table(2000, 6, lambda x: x[:, 0])
    assert screen_inputs(x, y, names, DiscoverConfig(screen=False)) is None


def test_a_table_wider_than_the_smooth_model_is_prescreened_column_by_column():
    # issue 37: 400 columns; the smooth model of 1,200 rows holds 199 (before: StopIteration)
    x, y, names = _table(3000, 400, lambda x: x[:, 5] * x[:, 17] / x[:, 300] ** 2, lo=1.0, hi=5.0)
    plan = screen_inputs(x, y, names, DiscoverConfig(keep_inputs=("x42",)))
    assert plan.marginal_kept == (5, 17, 42, 300) and plan.kept == (5, 17, 42, 300) and plan.forced == (42,)
    assert plan.removed == tuple(i for i in range(400) if i not in (5, 17, 42, 300))
    assert plan.marginal_threshold == pytest.approx(0.01 / 2400)  # Bonferroni: 2 tests x 3 rounds x 400 columns
    assert max(plan.marginal_p[i] for i in (5, 17, 300)) < 1e-30 and plan.marginal_p[42] == 1.0  # forced: untested
    assert min(plan.marginal_p[i] for i in plan.removed) > 1e-3  # the noise columns are far from the level
    assert plan.z_threshold == pytest.approx(3.0233, abs=1e-3)  # the permutation tests: 8 tests (4 columns)
    assert min(plan.z_smooth[i] for i in (5, 17, 300)) > 10 and plan.z_smooth[0] == -np.inf
    assert plan.reference is None  # no bring-back: it would rerun on all 400 columns
    rec = plan.removed_record()
    assert len(rec) == 396 and rec[0]["name"] == "x0" and rec[0]["z_smooth"] is None
    assert all(r["reason"].startswith("marginal pre-screen") and ">= 4.17e-06" in r["reason"] for r in rec)
    back = screening_from_record(screening_to_record(plan))
    assert back.marginal_kept == plan.marginal_kept and back.marginal_p == plan.marginal_p
    old = {k: v for k, v in screening_to_record(plan).items() if not k.startswith("marginal")}  # before issue 37
    assert screening_from_record(old).marginal_kept == ()


def test_the_marginal_prescreen_sees_interactions_weak_effects_and_keeps_its_cap():
    # symmetric inputs: x3 x7 leaves E[y | x3] flat; the spread test sees it
    x, y, _ = _table(2000, 200, lambda x: x[:, 3] * x[:, 7] + x[:, 1], seed=3)
    assert _marginal(x, y)[0] == (1, 3, 7)
    # x9's 5 % effect is hidden by x5's marginally; the second round (on what x5 leaves) finds it
    x, y, _ = _table(3000, 200, lambda x: x[:, 5] + 0.05 * x[:, 9], noise=0.01, seed=2)
    kept, p, level = _marginal(x, y)
    assert {5, 9} <= set(kept) and p[9] < level and level == pytest.approx(0.01 / 1200)
    assert _marginal(x, y, cap=1)[0] == (5,)
    assert _marginal(x, y, forced=(0, 1, 2, 3), cap=4)[0] == (0, 1, 2, 3)
    # pure noise: nothing passes; the MIN_INPUTS most significant go on to the permutation tests
    kept, p, level = _marginal(x, np.random.default_rng(5).standard_normal(3000))
    assert len(kept) == MIN_INPUTS and p.min() > level


@dataclass(frozen=True)
class _Model:
    cols: tuple

    def predict(self, xk):
        return np.zeros((xk.shape[0], 1)) if 1 not in self.cols else _law(xk, self.cols)[:, None]


def _law(xk, cols):
    return sum(xk[:, cols.index(c)] * w for c, w in ((0, 1.0), (1, 0.5)) if c in cols)


@dataclass(frozen=True)
class _Formula:
    cols: tuple
    r2_test: float
    origin: str = "kan"

    @property
    def expr(self):  # as kept_run measures its size
        return sympy.Add(*sympy.symbols([f"x{i}" for i in self.cols]))

    def __call__(self, xk):
        return _law(xk, self.cols)


@dataclass(frozen=True)
class _Found:
    """A stand-in for a Discovery: the formula and model of a run on ``cols``."""

    cols: tuple
    formulas: tuple
    pruned: _Model
    screening: object = None


def _screened(monkeypatch, search, x, y, names, config):
    """:func:`kansym.discover.run.discover`'s screening step with ``search(cols)`` standing in for
    the search of the columns ``cols``."""
    import kansym.discover.run as run_module
    from kansym.discover.progress import Stages

    monkeypatch.setattr(run_module, "_on_columns", lambda run, cols, point: search(tuple(cols)))
    run = run_module.Run(x, y, tuple(names), ("y",), config, Stages(show=False))
    return run_module._screened(run)


def test_a_wrongly_dropped_column_is_brought_back(monkeypatch):
    x, y, names = _table(2000, 5, lambda x: x[:, 0] + 0.5 * x[:, 1])
    config = DiscoverConfig()
    plan = screen_inputs(x, y, names, config)
    assert plan.kept == (0, 1)
    calls = []

    def search(cols):
        calls.append(cols)
        test = split_holdout(x.shape[0], config.holdout, config.seed)[1]
        pred = _law(x[test][:, list(cols)], cols)
        r2 = 1 - np.mean((y[test, 0] - pred) ** 2) / np.var(y[test, 0])
        return _Found(cols, (_Formula(cols, r2),), _Model(cols))

    import kansym.discover.screen as screen  # where screening_plan looks it up

    wrong = with_kept(plan, (0, 2), x, y, config)  # x1 (a fifth of the variance) dropped
    with monkeypatch.context() as patch:
        patch.setattr(screen, "screen_inputs", lambda *a, **k: wrong)
        found = _screened(patch, search, x, y, names, config)
    assert calls == [(0, 2), (0, 1, 2, 3, 4)]
    assert found.cols == (0, 1, 2, 3, 4) and found.screening.brought_back
    assert found.screening.removed_record() == []
    # the right verdict runs once, on the kept columns
    calls.clear()
    found = _screened(monkeypatch, search, x, y, names, config)
    assert calls == [(0, 1)] and not found.screening.brought_back
    assert [r["name"] for r in found.screening.removed_record()] == ["x2", "x3", "x4"]


def test_a_kan_shortfall_alone_brings_nothing_back(monkeypatch):
    # the run on the right columns is poor, but a smooth model of those columns is not: no rerun
    x, y, names = _table(2000, 5, lambda x: x[:, 0] + 0.5 * x[:, 1])
    config = DiscoverConfig()
    calls = []

    def search(cols):
        calls.append(cols)
        return _Found(cols, (_Formula((0,), 0.8),), _Model((0,)))

    found = _screened(monkeypatch, search, x, y, names, config)
    assert calls == [(0, 1)] and not found.screening.brought_back


@pytest.fixture(scope="module")
def wide_fit(tmp_path_factory):
    """``kansym fit`` on an n10-like table: 2,000 rows, 10 columns, ``y = x3*x7 + x1``."""
    import pandas as pd
    from click.testing import CliRunner

    from kansym.cli.main import cli

    tmp = tmp_path_factory.mktemp("wide")
    x, y, names = _table(2000, 10, lambda x: x[:, 3] * x[:, 7] + x[:, 1], seed=3)
    csv = tmp / "n10.csv"
    pd.DataFrame(np.column_stack([x, y]), columns=[*names, "y"]).to_csv(csv, index=False)
    res = CliRunner().invoke(cli, ["fit", str(csv), "--target", "y", "-o", str(tmp / "out"), "--quiet"])
    assert res.exit_code == 0, res.output
    return tmp, x


@pytest.mark.slow
def test_fit_on_a_wide_table_drops_the_noise_columns_and_predicts_from_the_full_csv(wide_fit):
    import json

    import pandas as pd
    from click.testing import CliRunner

    from kansym.cli.main import cli

    tmp, x = wide_fit
    record = json.loads((tmp / "out" / "formula.json").read_text())
    assert record["inputs"] == ["x1", "x3", "x7"] and record["width_trained"][0] == 3
    assert [r["name"] for r in record["removed_inputs"]] == ["x0", "x2", "x4", "x5", "x6", "x8", "x9"]
    pred = CliRunner().invoke(cli, ["predict", str(tmp / "out" / "pruned.pt"), str(tmp / "n10.csv"),
                                    "-o", str(tmp / "p.csv")])
    assert pred.exit_code == 0, pred.output
    p = pd.read_csv(tmp / "p.csv")
    assert list(p.columns)[:4] == ["x1", "x3", "x7", "y_model"]  # the model of 3 inputs reads them from 10 by name
    assert np.array_equal(p["x7"].to_numpy(), x[:, 7])


@pytest.mark.slow
def test_fit_on_a_wide_table_recovers_the_law_exactly(wide_fit):
    """Issue 19, acceptance 1: screening keeps x1, x3, x7; the structure search then splits
    x1 + x3 x7 (the [3, 5, 1] KAN alone prunes to [3, 1, 1] and misses it)."""
    import json

    from kansym.symbolic.verify import is_exact_recovery

    record = json.loads((wide_fit[0] / "out" / "formula.json").read_text())
    x1, x3, x7 = sympy.symbols("x1 x3 x7")
    assert is_exact_recovery(x3 * x7 + x1, record["sympy"]), record["sympy"]


def test_the_log_says_how_many_rows_each_stage_uses():
    from kansym.discover.run import Rows

    x, y, _ = _table(5000, 3, lambda x: x[:, 0])
    text = Rows.split(x, y, DiscoverConfig()).sizes(DiscoverConfig())
    assert text == ("rows: 5000 = 4000 fitting + 1000 held out (verification); the KAN trains on 3000 of the "
                    "fitting rows (600 of them validate; max_train_rows 3000); symbolic fits and refinement use up "
                    "to 4000")
    text = Rows.split(x, y, DiscoverConfig(max_train_rows=500)).sizes(DiscoverConfig(max_train_rows=500))
    assert "the KAN trains on 500 of the fitting rows (100 of them validate; max_train_rows 500)" in text


def test_estimator_predicts_from_every_feature_after_screening(tmp_path):
    from kansym import KANRegressor
    from kansym.discover.record import read_record

    x, y, names = _table(800, 4, lambda x: 2 * x[:, 0] + x[:, 2], seed=4)
    est = KANRegressor(seed=0).fit(x, y[:, 0], feature_names=names)
    assert est.discovery_.screening.kept == (0, 2)
    assert [s.name for s in est.formula_.symbols] == ["x0", "x2"]
    assert np.allclose(est.predict(x), 2 * x[:, 0] + x[:, 2], atol=1e-6)  # all four columns in, two used
    est.write_record(tmp_path / "f.json")
    rec = read_record(tmp_path / "f.json")
    assert rec.inputs == ("x0", "x2")
    assert [r["name"] for r in rec.data["removed_inputs"]] == ["x1", "x3"]
    # off: every column reaches the KAN
    assert KANRegressor(seed=0, screen=False).fit(x, y[:, 0]).discovery_.screening is None
