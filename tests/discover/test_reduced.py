"""A ``--units`` run whose KAN learns on dimensionless groups, seen from the table's columns:
its record (inputs, reduction) and ``kansym predict`` on its checkpoints (kansym.discover.dimensional).

d = L exp(-t / tau): the units leave the group pi1 = t/tau, so the KAN is trained on ``pi1``
with the target ``d_reduced = d / L``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from kansym.cli.main import cli
from kansym.discover.units import model_columns, model_target, outside_training_range, predict_columns
from kansym.io.bundle import ModelBundle

UNITS = {"L": "m", "t": "s", "tau": "s", "d": "m"}


def _decay(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"L": rng.uniform(1, 3, n), "t": rng.uniform(0.1, 2, n), "tau": rng.uniform(1, 3, n)})
    frame["d"] = frame["L"] * np.exp(-frame["t"] / frame["tau"])
    return frame


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("units")
    _decay().to_csv(d / "d.csv", index=False)
    res = CliRunner().invoke(cli, ["fit", str(d / "d.csv"), "-t", "d", "--units", ",".join(f"{k}={v}" for k, v in UNITS.items()),
                                   "-o", str(d / "out"), "-q"])
    assert res.exit_code == 0, res.output
    return d


def test_the_record_names_the_columns_and_the_groups_as_their_exponents(run):
    rec = json.loads((run / "out" / "formula.json").read_text())
    assert rec["inputs"] == ["L", "t", "tau"] and rec["symbols"] == {"L": "L", "t": "t", "tau": "tau"}
    assert rec["reduction"]["exponents"] == {"pi1": [0, 1, -1]} and rec["reduction"]["p"] == {"L": "1"}
    assert rec["units"] == UNITS and rec["width_trained"] == rec["width_pruned"] == [1, 1]
    pruned = ModelBundle.load(run / "out" / "pruned.pt")
    assert pruned.input_names == ("pi1",) and pruned.meta["reduction"] == rec["reduction"]
    assert model_columns(pruned) == ("L", "t", "tau") and model_target(pruned) == ("d",)


def test_the_reduced_model_predicts_from_the_columns(run):
    frame = _decay(50, seed=1)
    x = frame[["L", "t", "tau"]].to_numpy()
    for name, rtol in (("model.pt", 0.2), ("pruned.pt", 1e-3)):  # model.pt: before the fine-tuning
        y = predict_columns(ModelBundle.load(run / "out" / name), x)
        assert y.shape == (50, 1) and np.allclose(y[:, 0], frame["d"], rtol=rtol)


@pytest.mark.parametrize("checkpoint", ["model.pt", "pruned.pt"])
def test_kansym_predict_on_a_units_run(run, tmp_path, checkpoint):
    frame = _decay(20, seed=2)
    frame.loc[len(frame)] = {"L": 2.0, "t": 9.0, "tau": 1.0, "d": 2 * np.exp(-9.0)}  # t/tau far outside 0.03..2
    frame.loc[len(frame)] = {"L": 2.0, "t": 0.0, "tau": 0.0, "d": 2.0}  # 0/0: the formula has no value
    frame.to_csv(tmp_path / "new.csv", index=False)
    res = CliRunner().invoke(cli, ["predict", str(run / "out" / checkpoint), str(tmp_path / "new.csv"),
                                   "-o", str(tmp_path / "p.csv")])
    assert res.exit_code == 0, res.output
    table = pd.read_csv(tmp_path / "p.csv")
    assert list(table.columns) == ["L", "t", "tau", "d_model", "d_formula"]
    assert np.allclose(table["d_formula"][:21], frame["d"][:21], rtol=1e-9)
    assert np.allclose(table["d_model"][:20], frame["d"][:20], rtol=0.2 if checkpoint == "model.pt" else 1e-3)
    lines = res.stderr.splitlines()
    assert "note: 2 of 22 rows lie outside the range the model was trained on" in res.stderr
    assert sum("note: the formula gives no finite value on 1 of 22 rows" in line for line in lines) == 1
    assert outside_training_range(ModelBundle.load(run / "out" / checkpoint), frame[["L", "t", "tau"]].to_numpy()[:20]) == 0


def test_the_estimator_with_units_writes_the_columns_into_its_record(tmp_path):
    from kansym import KANRegressor

    frame = _decay()
    est = KANRegressor(units=UNITS).fit(frame[["L", "t", "tau"]], frame["d"])
    assert est.discovery_.pruned.input_names == ("pi1",)  # a KAN was trained, on the group
    rec = est.to_record()
    assert rec["inputs"] == ["L", "t", "tau"] and rec["reduction"]["exponents"] == {"pi1": [0, 1, -1]}
    assert rec["width_pruned"] == list(est.discovery_.prune_result.model.width)
    back = KANRegressor.from_record(est.write_record(tmp_path / "d.json"))
    assert np.allclose(back.predict(frame[["L", "t", "tau"]]), frame["d"], rtol=1e-9)
