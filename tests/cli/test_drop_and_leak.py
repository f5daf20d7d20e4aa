"""An input that equals the target up to scale (a leak) is named, and ``kansym fit --drop`` leaves
columns out (issue 37, point 3): the NOTE line, formula.json's ``leaks`` and ``dropped_inputs``, the
one-line errors, the estimator's warning, and :func:`kansym.io.tabular.proportional_inputs` itself."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from kansym import KANRegressor
from kansym.cli.main import cli
from kansym.io.tabular import LEAK_TOLERANCE, proportional_inputs

LEAK_NOTE = ("NOTE: column 'leak' equals the target 'y' up to scale (y = 0.5 * leak on every row): likely a copy "
             "of the target (a leak); to find the law without it, rerun with --drop leak")


def _law(n=150, seed=0):
    rng = np.random.default_rng(seed)
    x0, x1 = rng.uniform(1, 3, n), rng.uniform(1, 3, n)
    return x0, x1, 3 * x0 * x1


@pytest.fixture()
def leak_csv(tmp_path):
    x0, x1, y = _law()
    path = tmp_path / "leak.csv"
    pd.DataFrame({"x0": x0, "x1": x1, "leak": 2 * y, "note": ["a"] * len(y), "y": y}).to_csv(path, index=False)
    return path


def _fit(csv, out, *options):
    return CliRunner().invoke(cli, ["fit", str(csv), "--target", "y", "-o", str(out), "-q", "--steps", "5", *options])


def test_a_leak_is_named_and_dropping_it_finds_the_law(leak_csv, tmp_path):
    leaked = _fit(leak_csv, tmp_path / "a")
    assert leaked.exit_code == 0, leaked.output
    assert leaked.stdout.splitlines().count(LEAK_NOTE) == 1
    record = json.loads((tmp_path / "a" / "formula.json").read_text())
    (leak,) = record["leaks"]
    assert leak["column"] == "leak" and leak["target"] == "y" and leak["scale"] == pytest.approx(0.5, rel=1e-12)
    assert leak["deviation"] < 1e-12 and leak["remark"] in LEAK_NOTE and "dropped_inputs" not in record

    clean = _fit(leak_csv, tmp_path / "b", "--drop", "leak", "--drop", "note")  # repeatable; a text column too
    assert clean.exit_code == 0, clean.output
    assert "leak" not in clean.stdout and "NOTE" not in clean.stdout
    record = json.loads((tmp_path / "b" / "formula.json").read_text())
    assert record["sympy"] == "3*x0*x1" and record["inputs"] == ["x0", "x1"] and record["status"] == "verified"
    assert record["r2_test"] > 0.999999 and record["dropped_inputs"] == ["leak", "note"] and "leaks" not in record


def _one_line_error(result, needle):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines


@pytest.mark.parametrize("options, needle", [
    (["--drop", "nope"], "dropped column 'nope' is not in"),
    (["--drop", "y"], "column 'y' is the target; it cannot be dropped"),
    (["--drop", "x0,x1", "--drop", "leak"], "dropping x0, x1, leak leaves no numeric input column"),
    (["--drop", "x0", "--inputs", "x0,x1"], "--drop and --inputs both name column 'x0'"),
    (["--drop", "leak", "--keep-inputs", "leak"], "--drop and --keep-inputs both name column 'leak'"),
    (["--drop", " , "], "--drop is an empty list"),
])
def test_impossible_drops_are_one_line_errors_before_any_work(leak_csv, tmp_path, options, needle):
    _one_line_error(_fit(leak_csv, tmp_path / "o", *options), needle)
    assert not (tmp_path / "o").exists()


def test_proportional_inputs_finds_copies_of_the_target_only():
    rng = np.random.default_rng(1)
    x0, x1, law = _law(500)
    y = law + rng.normal(0, 0.05, law.shape)  # noisy target: a copy of it carries the same noise
    columns = {
        "x0": x0, "x1": x1,
        "dup": y.copy(),  # an exact duplicate
        "km": y / 1000,  # the target in other units
        "neg": -2 * y,
        "f32": (4 * y).astype(np.float32).astype(np.float64),  # a float32 copy
        "g6": np.array([float(f"{v:.6g}") for v in y]),  # written to 6 significant digits
        "proxy": y * (1 + rng.normal(0, 0.001, y.shape)),  # a separate measurement of y, 0.1 % noise: no copy
        "shifted": y + 1.0,  # affine, not proportional
    }
    found = {leak.column: leak for leak in proportional_inputs(np.column_stack(list(columns.values())), y[:, None],
                                                               list(columns), ["y"])}
    assert sorted(found) == ["dup", "f32", "g6", "km", "neg"]
    assert found["dup"].scale == pytest.approx(1, rel=1e-14) and "(y = dup on every row)" in found["dup"].text
    assert found["km"].scale == pytest.approx(1000, rel=1e-12) and found["neg"].scale == pytest.approx(-0.5)
    assert "(y = -0.5 * neg on every row)" in found["neg"].text and found["f32"].scale == pytest.approx(0.25, rel=1e-6)
    assert found["dup"].deviation < 1e-13 < found["f32"].deviation < 1e-6 < found["g6"].deviation < LEAK_TOLERANCE


def test_a_lone_proportional_input_is_the_law_not_a_leak():
    x0, _, _ = _law()
    assert proportional_inputs(x0[:, None], 3 * x0[:, None], ["x0"], ["y"]) == ()
    both = np.column_stack([x0, 2 * x0])  # every input proportional: nothing is left to find the law in
    assert proportional_inputs(both, 3 * x0[:, None], ["a", "b"], ["y"]) == ()


def test_the_estimator_warns_of_a_leak_and_records_it():
    x0, x1, y = _law()
    X = pd.DataFrame({"x0": x0, "x1": x1, "leak": 2 * y})
    with pytest.warns(UserWarning, match=r"kansym: column 'leak' equals the target 'y' up to scale "
                                         r"\(y = 0\.5 \* leak on every row\).*fit without that feature"):
        leaked = KANRegressor(steps=5).fit(X, pd.Series(y, name="y"))
    assert [leak.column for leak in leaked.leaks_] == ["leak"]
    assert [e["column"] for e in leaked.to_record()["leaks"]] == ["leak"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean table: no warning
        est = KANRegressor(steps=5).fit(X[["x0", "x1"]], y)
    assert est.leaks_ == () and "leaks" not in est.to_record() and est.score(X[["x0", "x1"]], y) > 0.999999


def test_drop_takes_out_an_example_input_and_travels_in_the_resume_command():
    import click

    from kansym.cli.fit import fit_command
    from kansym.cli.options import parse_drop, resolve_data
    from kansym.cli.run import _option_words

    drop = parse_drop(("x2", "x2"), None, None)
    assert drop == ("x2",)
    assert resolve_data(None, "hello", None, None, drop)[1:] == ("f", ("x1",))
    param = next(p for p in fit_command.params if p.name == "drop")
    assert isinstance(param, click.Option) and _option_words(param, ("a,b", "c")) == ["--drop", "a,b,c"]
    assert "--drop" in CliRunner().invoke(cli, ["fit", "--help"]).output
