"""``kansym fit --time-limit`` and ``KANRegressor(time_limit=...)`` (issue 16): silent when the
limit does not bind (the same bytes), explicit when it does (the printed line and formula.json)."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from kansym import KANRegressor
from kansym.cli.main import cli
from kansym.deadline import Deadline


@pytest.fixture()
def law_csv(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.5, 1.5, (500, 2))
    path = tmp_path / "law.csv"
    pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "y": np.sin(x[:, 0]) + x[:, 1] ** 2}).to_csv(path, index=False)
    return path


def _fit(csv, out, *options):
    result = CliRunner().invoke(cli, ["fit", str(csv), "--target", "y", "-o", str(out), *options])
    assert result.exit_code == 0, result.output
    return result


def test_a_limit_that_does_not_bind_writes_the_same_formula_json(law_csv, tmp_path):
    limited = _fit(law_csv, tmp_path / "a", "--time-limit", "300")
    free = _fit(law_csv, tmp_path / "b", "--time-limit", "0")
    assert (tmp_path / "a" / "formula.json").read_bytes() == (tmp_path / "b" / "formula.json").read_bytes()
    assert limited.stdout == free.stdout and "time limit" not in limited.output  # stdout and the log (stderr)


def test_a_limit_that_binds_is_named_in_the_output_and_in_formula_json(law_csv, tmp_path, monkeypatch, step_clock):
    monkeypatch.setattr("kansym.cli.fit.Deadline", lambda seconds: Deadline(seconds, clock=step_clock(2)))
    result = _fit(law_csv, tmp_path / "o", "--time-limit", "20", "-q")
    lines = result.stdout.splitlines()
    note = [ln for ln in lines if ln.startswith("NOTE: the time limit (20 s) cut short: ")]
    assert len(note) == 1 and "direct search: 1 of " in note[0] and "training (additive shortcut): 1 of 20 steps" in note[0]
    assert "the formula may differ from that of an unhurried run" in note[0]
    assert not any(ln.startswith("WARNING") for ln in lines)  # the best so far is a verified formula here
    record = json.loads((tmp_path / "o" / "formula.json").read_text())
    assert record["time_limit"]["seconds"] == 20.0 and record["time_limit"]["cut_short"][0].startswith("direct search")
    assert record["sympy"] != "0" and record["warning"] is None


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_an_impossible_time_limit_is_one_line_error(law_csv, tmp_path, value):
    result = CliRunner().invoke(cli, ["fit", str(law_csv), "--target", "y", "-o", str(tmp_path / "o"),
                                      "--time-limit", value])
    assert result.exit_code == 2 and "--time-limit" in result.output and "Traceback" not in result.output


def test_the_estimator_warns_when_its_time_limit_binds_and_records_it(monkeypatch, step_clock):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x1": rng.uniform(-1.5, 1.5, 500), "x2": rng.uniform(-1.5, 1.5, 500)})
    y = np.sin(X["x1"]) + X["x2"] ** 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not binding: no warning at all
        calm = KANRegressor(time_limit=300).fit(X, y)
    assert "time_limit" not in calm.to_record()
    monkeypatch.setattr("kansym.discover.run.Deadline", lambda seconds: Deadline(seconds, clock=step_clock(2)))
    with pytest.warns(UserWarning, match=r"the time limit \(7 s\) cut short: direct search"):
        hurried = KANRegressor(time_limit=7).fit(X, y)
    assert hurried.to_record()["time_limit"]["cut_short"] == list(hurried.discovery_.cut_short)
    assert hurried.score(X, y) > 0.9999
