"""bench/feynman.py: equation parsing, sampling, the per-equation time limit, JSON + Markdown."""

import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import sympy

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("feynman_bench", ROOT / "bench" / "feynman.py")
fb = importlib.util.module_from_spec(spec)
sys.modules["feynman_bench"] = fb  # dataclasses look their module up there
spec.loader.exec_module(fb)

CSV = """id,set,output,output_units,formula,n_vars,notes,v1_name,v1_low,v1_high,v1_units,v2_name,v2_low,v2_high,v2_units,v3_name,v3_low,v3_high,v3_units
T.1,feynman,E_n,J,1/(gamma-1)*I*beta,3,,gamma,2,5,,I,1,5,,beta,1,5,
T.2,feynman,F,N,mu*Nn,2,,mu,1,5,,Nn,1,5,,,,,
T.3,feynman,t,s,arcsin(n*sin(theta2))+ln(n),2,,n,0,1,,theta2,1,5,,,,,
"""


@pytest.fixture()
def equations(tmp_path):
    path = tmp_path / "eq.csv"
    path.write_text(CSV)
    return path, fb.load_equations(path)


def test_names_that_are_sympy_builtins_stay_variables(equations):
    _, eqs = equations
    assert [e.id for e in eqs] == ["T.1", "T.2", "T.3"]
    e = eqs[0]
    assert e.names == ("gamma", "I", "beta") and e.lows == (2.0, 1.0, 1.0) and e.highs == (5.0, 5.0, 5.0)
    g, i, b = sympy.symbols("gamma I beta", real=True)
    assert sympy.simplify(e.truth() - i * b / (g - 1)) == 0
    assert eqs[2].truth().has(sympy.asin) and eqs[2].truth().has(sympy.log)


def test_sampling_is_uniform_in_the_ranges_and_seeded(equations):
    _, eqs = equations
    x, y = eqs[0].sample(2000, np.random.default_rng(0))
    assert x.shape == (2000, 3) and np.all(x[:, 0] >= 2) and np.all(x[:, 0] <= 5) and x[:, 0].min() < 2.05
    assert np.allclose(y, x[:, 1] * x[:, 2] / (x[:, 0] - 1))
    x2, _ = eqs[0].sample(2000, np.random.default_rng(0))
    assert np.array_equal(x, x2)


def test_time_limit_stops_an_equation_and_counts_it_as_not_recovered(equations, monkeypatch):
    _, eqs = equations

    def slow(eq, args):
        time.sleep(30)
        return {"id": eq.id, "recovered": True}

    monkeypatch.setattr(fb, "run_equation", slow)  # the forked worker sees the patched module
    monkeypatch.setattr(fb, "VERIFY_GRACE", 0.0)
    args = fb.parse_args(["--time-limit", "1", "--jobs", "2"])
    t0 = time.perf_counter()
    rows = fb.run_all(eqs[:2], args, emit=lambda row: None)
    assert time.perf_counter() - t0 < 10
    assert [(r["id"], r["recovered"], r["timed_out"]) for r in rows] == [("T.1", False, True), ("T.2", False, True)]
    text = fb.summary(rows, eqs, args)
    assert "**kansym: recovered 0/2 (0.0 %)" in text and "| T.1 | kansym |" in text


def test_errors_are_rows_not_crashes(equations, monkeypatch):
    _, eqs = equations

    def broken(eq, args):
        raise ValueError("boom")

    monkeypatch.setattr(fb, "run_equation", broken)
    rows = fb.run_all(eqs[1:2], fb.parse_args([]), emit=lambda row: None)
    assert rows[0]["recovered"] is False and rows[0]["error"] == "ValueError: boom"


def test_unknown_id_and_missing_file_are_one_line_errors(equations, tmp_path, capsys):
    path, _ = equations
    assert fb.main(["--equations", str(path), "--ids", "T.9"]) == 2
    assert fb.main(["--equations", str(tmp_path / "none.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "error: unknown equation ids ['T.9']" and err[1].startswith("error: equations file")


@pytest.mark.slow
def test_one_equation_end_to_end(equations, tmp_path, capsys):
    path, _ = equations
    out, md = tmp_path / "r.jsonl", tmp_path / "r.md"
    assert fb.main(["--equations", str(path), "--ids", "T.2", "--rows", "500", "--test-rows", "200",
                    "--time-limit", "300", "--out", str(out), "--summary", str(md)]) == 0
    row = json.loads(out.read_text().splitlines()[0])
    assert row["id"] == "T.2" and row["recovered"] is True and row["r2_test"] > 0.99999
    assert {"formula", "complexity", "seconds", "r2_model_test", "warning"} <= set(row)
    assert "**kansym: recovered 1/1 (100.0 %)" in md.read_text()


def test_kansym_gets_the_limit_less_a_margin_so_that_it_stops_itself(equations, monkeypatch):
    """Issue 16: the bench passes its limit down, so a run that would be killed answers instead."""
    assert fb.kansym_time_limit(120) == 108 and fb.kansym_time_limit(20) == 17 and fb.kansym_time_limit(4) == 2
    _, eqs = equations
    seen = {}

    def fake_discover(x, y, names, targets, config, progress):
        seen["limit"] = config.time_limit
        raise RuntimeError("stop here")

    import kansym.discover

    monkeypatch.setattr(kansym.discover, "discover", fake_discover)
    args = fb.parse_args(["--time-limit", "60", "--no-units", "--rows", "50", "--test-rows", "10"])
    with pytest.raises(RuntimeError, match="stop here"):
        fb.run_equation(eqs[1], args)
    assert seen["limit"] == 54
