"""formula.json: written and read only by kansym.discover.record, and every user of it round-trips.

One ``kansym fit`` run (y = 2 x1 - x2 + 0.5, 300 rows) is read back by: the record reader
itself, ``kansym graph --fits``, ``kansym plot --fits``, ``kansym predict``,
``kansym symbolify --json`` and ``KANRegressor.from_record``.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import sympy
from click.testing import CliRunner

from kansym.cli.main import cli
from kansym.discover.record import FORMAT, read_record
from kansym.errors import ConfigError, DataError

ROOT = Path(__file__).resolve().parents[2] / "kansym"


def _write(path: Path, n: int = 300, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 2))
    y = 2 * x[:, 0] - x[:, 1] + 0.5
    path.write_text("x1,x2,y\n" + "".join(f"{float(a)!r},{float(b)!r},{float(c)!r}\n" for a, b, c in zip(x[:, 0], x[:, 1], y)))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("record")
    data = _write(d / "d.csv")
    out = d / "out"
    res = CliRunner().invoke(cli, ["fit", str(data), "-t", "y", "-o", str(out), "--steps", "5", "--hidden", "2",
                                   "--grid-size", "3", "--finetune-steps", "3", "-q"])
    assert res.exit_code == 0, res.output
    return data, out


def _rows(data: Path) -> np.ndarray:
    return np.loadtxt(data, delimiter=",", skiprows=1)


def test_the_fit_record_reads_back_to_the_printed_formula(run):
    data, out = run
    raw = json.loads((out / "formula.json").read_text())
    rec = read_record(out / "formula.json")
    assert raw["format"] == FORMAT and rec.target == "y" and rec.inputs == ("x1", "x2")
    rows = _rows(data)
    pred = rec.predict(rows[:, :2])
    assert np.allclose(pred, rows[:, 2], atol=1e-6)  # the law, recovered
    f = rec.formula()
    assert str(f.expr) == raw["sympy"] and f.r2_test == raw["r2_test"] and f.n_test == raw["n_test"]
    assert [e.to_dict() for e in f.front] == raw["pareto"]
    assert f.warning is None and f.origin in ("kan", "direct search")
    x1, x2 = rec.symbols()
    assert sympy.simplify(f.expr - (2 * x1 - x2 + sympy.Rational(1, 2))) == 0


def test_graph_and_plot_read_the_fits_of_the_record(run, tmp_path):
    _, out = run
    runner = CliRunner()
    g = runner.invoke(cli, ["graph", str(out / "pruned.pt"), "--fits", str(out / "formula.json"),
                            "-o", str(tmp_path / "g.json")])
    assert g.exit_code == 0, g.output
    fits = read_record(out / "formula.json").edge_fits()
    edges = json.loads((tmp_path / "g.json").read_text())["edges"]
    prims = {e.get("primitive") for e in edges if "primitive" in e}
    assert prims == {f.primitive for f in fits.values()} and prims
    p = runner.invoke(cli, ["plot", str(out / "pruned.pt"), "--kind", "report", "--fits", str(out / "formula.json"),
                            "-o", str(tmp_path / "r.png")])
    assert p.exit_code == 0, p.output
    assert f"formula {read_record(out / 'formula.json').expr()}" in p.output


def test_predict_uses_the_record_next_to_the_checkpoint(run, tmp_path):
    data, out = run
    res = CliRunner().invoke(cli, ["predict", str(out / "pruned.pt"), str(data), "-o", str(tmp_path / "p.csv")])
    assert res.exit_code == 0, res.output
    import pandas as pd

    table = pd.read_csv(tmp_path / "p.csv")
    assert list(table.columns) == ["x1", "x2", "y_model", "y_formula"]
    rows = _rows(data)
    assert np.allclose(table["y_formula"], rows[:, 2], atol=1e-6)
    assert np.allclose(table["y_model"], rows[:, 2], atol=0.05)
    assert "formula R² = 1.000000" in res.stderr


def test_predict_refuses_a_record_of_another_model_and_missing_columns(run, tmp_path):
    data, out = run
    foreign = tmp_path / "f.json"
    foreign.write_text(json.dumps({"format": FORMAT, "target": "z", "inputs": ["a"], "sympy": "a"}))
    runner = CliRunner()
    res = runner.invoke(cli, ["predict", str(out / "pruned.pt"), str(data), "--formula", str(foreign)])
    assert res.exit_code == 2 and res.stderr.startswith("error: ") and "not this checkpoint's" in res.stderr
    partial = tmp_path / "p.csv"
    partial.write_text("x1\n0.5\n")
    res = runner.invoke(cli, ["predict", str(out / "pruned.pt"), str(partial)])
    assert res.exit_code == 2 and "input column 'x2' is not in" in res.stderr


def test_symbolify_json_is_the_same_kind_of_record(run, tmp_path):
    data, out = run
    res = CliRunner().invoke(cli, ["symbolify", str(out / "pruned.pt"), "--json", str(tmp_path / "s.json"), "-q"])
    assert res.exit_code == 0, res.output
    rec = read_record(tmp_path / "s.json")
    assert rec.data["width_pruned"] == json.loads((out / "formula.json").read_text())["width_pruned"]
    assert np.allclose(rec.predict(_rows(data)[:, :2]), _rows(data)[:, 2], atol=1e-4)


def test_the_estimator_round_trips_through_a_record(run, tmp_path):
    from kansym import KANRegressor

    data, out = run
    est = KANRegressor.from_record(out / "formula.json")
    rows = _rows(data)
    assert est.score(rows[:, :2], rows[:, 2]) > 0.999999
    assert list(est.feature_names_in_) == ["x1", "x2"] and len(est.equations_) >= 1
    path = est.write_record(tmp_path / "again.json")
    again = KANRegressor.from_record(path)
    assert np.array_equal(again.predict(rows[:, :2]), est.predict(rows[:, :2]))
    assert again.sympy() == est.sympy()


def test_bad_records_are_one_sentence_errors(tmp_path, run):
    _, out = run
    for text, needle in [("{", "not a kansym formula.json"), ('{"format": "other"}', "no kansym format tag"),
                         (json.dumps({"format": FORMAT}), "not a formula record")]:
        p = tmp_path / "bad.json"
        p.write_text(text)
        with pytest.raises(DataError, match=needle):
            read_record(p)
    with pytest.raises(DataError, match="does not exist"):
        read_record(tmp_path / "missing.json")
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"format": FORMAT, "target": "y", "inputs": ["x1"], "sympy": "x1 + q"}))
    with pytest.raises(DataError, match=r"uses the name 'q', which is neither an input nor a constant"):
        read_record(odd).expr()
    wrong = json.loads((out / "formula.json").read_text())
    with pytest.raises(ConfigError, match="width"):
        read_record(out / "formula.json").edge_fits(width=[2, 7, 1]) if wrong["width_pruned"] != [2, 7, 1] else None


def test_formula_json_is_parsed_in_exactly_one_module():
    """Issue 18: only kansym/discover/record/read.py reads formula.json (json.loads / json.load)."""
    readers = []
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("loads", "load") \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "json":
                readers.append(str(path.relative_to(ROOT)))
    text_users = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if '"formula.json"' in p.read_text(encoding="utf-8")]
    formula_readers = {r for r in readers if r in text_users or "record" in r}
    assert formula_readers == {"discover/record/read.py"}, (readers, text_users)


def test_records_with_and_without_a_symbols_map_read_on_the_column_names(tmp_path):
    """formula.json's ``sympy`` names each input by its identifier (``symbols``); one written
    before ``symbols`` existed names it by the column itself and still reads."""
    from kansym.discover.record import FormulaRecord

    rows = np.array([[1.0, 2.0], [3.0, 5.0]])
    new = FormulaRecord({"format": FORMAT, "target": "E (J)", "inputs": ["mass kg", "lambda"],
                         "symbols": {"mass_kg": "mass kg", "lambda_": "lambda"}, "sympy": "mass_kg*lambda_**2/2"})
    assert [s.name for s in new.symbols()] == ["mass kg", "lambda"]
    assert str(new.expr()) == "lambda**2*mass kg/2"  # printed on the column names
    np.testing.assert_allclose(new.predict(rows), [2.0, 37.5])
    old = FormulaRecord({"format": FORMAT, "target": "y", "inputs": ["x1", "I"], "sympy": "2*x1 - I"})
    assert old.identifier_map == {"x1": "x1", "I": "I"}
    np.testing.assert_allclose(old.predict(rows), [0.0, 1.0])  # I is the column, not the imaginary unit
    bad = FormulaRecord({"format": FORMAT, "target": "y", "inputs": ["a"], "symbols": {"b_": "b"}, "sympy": "b_"},
                        "bad.json")
    with pytest.raises(DataError, match="'symbols' entry that does not map identifiers to its inputs"):
        bad.expr()


def test_a_record_cannot_run_code(run, tmp_path):
    """Regression (fresh-user review): parse_expr evaluates its text, so a formula.json saying
    ``x1 + 0*__import__('os').system(...)`` ran the command on predict/plot/from_record."""
    _, out = run
    marker = tmp_path / "PWNED"
    evil = json.loads((out / "formula.json").read_text())
    evil["sympy"] = f"x1 + 0*__import__('os').system('touch {marker}')"
    bad = tmp_path / "formula.json"
    bad.write_text(json.dumps(evil))
    with pytest.raises(DataError, match="not only arithmetic"):
        read_record(bad).expr()
    for text in ["x1.__class__", "(lambda: 1)()", "[x1][0]", "x1 if x1 else x2", "'a'", "exec('1')", "x1 @ x2"]:
        evil["sympy"] = text
        bad.write_text(json.dumps(evil))
        with pytest.raises(DataError):
            read_record(bad).expr()
    shutil.copy(out / "pruned.pt", tmp_path / "pruned.pt")
    data = tmp_path / "rows.csv"
    data.write_text("x1,x2\n0.5,0.25\n")
    evil["sympy"] = f"x1 + 0*__import__('os').system('touch {marker}')"
    bad.write_text(json.dumps(evil))
    res = CliRunner().invoke(cli, ["predict", str(tmp_path / "pruned.pt"), str(data), "--formula", str(bad)])
    assert res.exit_code == 2 and "not only arithmetic" in res.stderr, res.output
    assert not marker.exists()
    # what kansym writes still reads: opaque edges, pi, E, nested functions
    from kansym.symbolic.parse import parse_formula

    x = sympy.Symbol("x")
    for expr in [sympy.Function("phi_1_0_0")(2 * x) + sympy.pi, sympy.exp(-x**2 / 2) / sympy.sqrt(2 * sympy.pi),
                 sympy.Abs(sympy.asin(x / 3)) ** sympy.Rational(3, 2), sympy.E * x - 1.5e-300]:
        assert parse_formula(str(expr), {"x": x}) == expr


def test_predict_finds_the_record_next_to_a_checkpoint_of_another_width_by_its_columns(run, tmp_path):
    # model.pt and pruned.pt of one fit share formula.json, whose width_pruned is the pruned one's
    from kansym.discover.record import sibling_record
    from kansym.io.bundle import ModelBundle

    data, out = run
    rec = json.loads((out / "formula.json").read_text())
    wider = tmp_path / "wider"
    wider.mkdir()
    shutil.copy(out / "pruned.pt", wider / "model.pt")
    (wider / "formula.json").write_text(json.dumps({**rec, "width_pruned": [2, 3, 1]}))
    model = ModelBundle.load(wider / "model.pt")
    assert sibling_record(wider / "model.pt", model).source == str(wider / "formula.json")
    res = CliRunner().invoke(cli, ["predict", str(wider / "model.pt"), str(data), "-o", str(tmp_path / "p.csv")])
    assert res.exit_code == 0, res.output
    assert "using the formula of" in res.stderr and "formula R² = 1.000000" in res.stderr
    (wider / "formula.json").write_text(json.dumps({**rec, "inputs": ["x2", "x1"], "symbols": {"x2": "x2", "x1": "x1"}}))
    assert sibling_record(wider / "model.pt", model) is None  # a formula of other columns: not used
    res = CliRunner().invoke(cli, ["predict", str(wider / "model.pt"), str(data)])
    assert res.exit_code == 0 and "with the model (no formula.json found" in res.stderr
