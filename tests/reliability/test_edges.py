"""Trustworthy at the edges: column names that are no identifiers, magnitudes near float64's limits.

Every run is a real ``python -m kansym`` process with numpy's RuntimeWarnings made errors
(``PYTHONWARNINGS=error::RuntimeWarning``): a warning that reached the terminal as a raw
``file.py:line: RuntimeWarning`` line would fail the run, and every stderr is checked for
``Warning`` and ``Traceback``. Each law must come back exactly: ``formula.json``'s
``sympy`` string parsed with its ``symbols`` map (``sympy.sympify(..., locals=...)``)
reproduces the data with R² > 0.999; a law float64 cannot write in the table's units is
exit 2 with one ``error:`` line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sympy

from kansym.discover.record import read_record
from kansym.symbolic.verify import r2_score

pytestmark = pytest.mark.slow  # one kansym fit (about 5 s) per law

N = 120


def kansym(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "error::RuntimeWarning", "COLUMNS": "200"}
    res = subprocess.run([sys.executable, "-m", "kansym", *args], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=600)
    assert "Traceback" not in res.stderr and "Warning" not in res.stderr, res.stderr
    return res


def fit(tmp_path: Path, frame: pd.DataFrame, target: str, *extra: str) -> subprocess.CompletedProcess:
    frame.to_csv(tmp_path / "d.csv", index=False)
    return kansym("fit", "d.csv", "-t", target, "-o", "out", *extra, cwd=tmp_path)


def parsed_back(record: dict) -> tuple[sympy.Expr, list[sympy.Symbol]]:
    """The record's formula as the JSON promises: sympify on its identifiers, in input order."""
    local = {ident: sympy.Symbol(ident) for ident in record["symbols"]}
    assert list(record["symbols"].values()) == record["inputs"]
    return sympy.sympify(record["sympy"], locals=local), list(local.values())


def assert_law(out: Path, frame: pd.DataFrame, target: str) -> dict:
    """formula.json parses back, reproduces the data (R² > 0.999) and carries no inf/nan."""
    text = (out / "formula.json").read_text()
    record = json.loads(text)
    assert "Infinity" not in text and "NaN" not in text.replace('"NaN', "")
    expr, symbols = parsed_back(record)
    x = frame[record["inputs"]].to_numpy(dtype=float)
    with np.errstate(all="raise"):
        pred = sympy.lambdify(symbols, expr, "numpy")(*x.T)
    pred = np.broadcast_to(np.asarray(pred, dtype=float), (len(frame),))
    assert r2_score(frame[target].to_numpy(), pred) > 0.999, record["sympy"]
    assert record["warning"] is None and record["r2_data"] > 0.999
    return record


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_column_names_that_are_no_identifiers_round_trip(tmp_path):
    rng = _rng()
    m, v = rng.uniform(1, 5, N), rng.uniform(1, 3, N)
    frame = pd.DataFrame({"mass kg": m, "speed-m/s": v, "E (J)": m * v ** 2 / 2})
    res = fit(tmp_path, frame, "E (J)")
    assert res.returncode == 0, res.stderr
    # the terminal shows the real names in LaTeX (\mathrm{} of them); the sympy line parses back:
    # identifiers, with the symbols map of formula.json
    assert r"E (J) = \frac{\mathrm{mass\ kg} \mathrm{speed-m/s}^{2}}{2}" in res.stdout
    assert 'sympy: mass_kg*speed_m_s**2/2   symbols: {"mass_kg": "mass kg", "speed_m_s": "speed-m/s"}' in res.stdout
    out = tmp_path / "out"
    record = assert_law(out, frame, "E (J)")
    assert record["symbols"] == {"mass_kg": "mass kg", "speed_m_s": "speed-m/s"}
    assert record["sympy"] == "mass_kg*speed_m_s**2/2"
    # the Python export compiles, documents its columns in order and computes the law
    namespace: dict = {}
    exec(compile(record["python"], "formula.py", "exec"), namespace)  # noqa: S102 - kansym's own export
    assert "X[:, 0]  mass_kg: 'mass kg'" in record["python"] and "X[:, 1]  speed_m_s: 'speed-m/s'" in record["python"]
    np.testing.assert_allclose(namespace["E_J"](frame[["mass kg", "speed-m/s"]].to_numpy()), frame["E (J)"], rtol=1e-12)
    # every reader of formula.json: predict, graph --fits, plot --fits, the estimator
    rec = read_record(out / "formula.json")
    assert [s.name for s in rec.symbols()] == ["mass kg", "speed-m/s"]
    pred = kansym("predict", "out/pruned.pt", "d.csv", "-o", "p.csv", cwd=tmp_path)
    assert pred.returncode == 0, pred.stderr
    table = pd.read_csv(tmp_path / "p.csv")
    np.testing.assert_allclose(table["E (J)_formula"], frame["E (J)"], rtol=1e-12)
    graph = kansym("graph", "out/pruned.pt", "--fits", "out/formula.json", "-o", "g.json", cwd=tmp_path)
    assert graph.returncode == 0, graph.stderr
    plot = kansym("plot", "out/pruned.pt", "--kind", "report", "--fits", "out/formula.json", "-o", "r.png",
                  cwd=tmp_path)
    assert plot.returncode == 0 and "formula mass kg*speed-m/s**2/2" in plot.stderr + plot.stdout, plot.stderr
    from kansym import KANRegressor

    est = KANRegressor.from_record(out / "formula.json")
    np.testing.assert_allclose(est.formula_(frame[["mass kg", "speed-m/s"]].to_numpy()), frame["E (J)"], rtol=1e-12)


def test_column_names_that_sympy_binds_stay_variables(tmp_path):
    rng = _rng()
    i, lam = rng.uniform(1, 5, N), rng.uniform(1, 3, N)
    frame = pd.DataFrame({"I": i, "lambda": lam, "E": i * lam ** 2 / 2})
    res = fit(tmp_path, frame, "E")
    assert res.returncode == 0, res.stderr
    assert r"E = \frac{I \lambda^{2}}{2}" in res.stdout
    # printed as formula.json holds it: I would be the imaginary unit and lambda a keyword
    assert 'sympy: I_*lambda_**2/2   symbols: {"I_": "I", "lambda_": "lambda"}' in res.stdout
    record = assert_law(tmp_path / "out", frame, "E")
    assert record["symbols"] == {"I_": "I", "lambda_": "lambda"} and record["sympy"] == "I_*lambda_**2/2"
    # no identifier is a name sympy binds: the string means the same without locals
    assert sympy.sympify(record["sympy"]).free_symbols == {sympy.Symbol("I_"), sympy.Symbol("lambda_")}


def test_a_target_near_1e307_gives_the_law_in_the_tables_units(tmp_path):
    rng = _rng()
    a, b = rng.uniform(1, 3, N), rng.uniform(-1, 1, N)
    frame = pd.DataFrame({"a": a, "b": b, "y": 1e307 * (a + b) / 4})
    res = fit(tmp_path, frame, "y")
    assert res.returncode == 0, res.stderr
    assert "sympy: 2.5e+306*a + 2.5e+306*b" in res.stdout
    assert "searched in exact power-of-two units (" in res.stderr and "y by 2**-1019)" in res.stderr
    assert_law(tmp_path / "out", frame, "y")
    # the checkpoints are in the table's units: predict, symbolify and the report work on them
    pred = kansym("predict", "out/pruned.pt", "d.csv", "-o", "p.csv", cwd=tmp_path)
    assert pred.returncode == 0, pred.stderr
    table = pd.read_csv(tmp_path / "p.csv")
    assert r2_score(frame["y"], table["y_model"]) > 0.99 and r2_score(frame["y"], table["y_formula"]) > 0.999
    sym = kansym("symbolify", "out/pruned.pt", "--json", "s.json", cwd=tmp_path)
    assert sym.returncode == 0 and "sympy: 2.5e+306*a + 2.5e+306*b" in sym.stdout, sym.stderr
    (tmp_path / "alone.pt").write_bytes((tmp_path / "out" / "pruned.pt").read_bytes())  # no formula.json beside it:
    report = kansym("plot", "alone.pt", "--kind", "report", "-o", "r.png", cwd=tmp_path)  # symbolify + Occam front
    assert report.returncode == 0 and "formula 2.5e+306*a + 2.5e+306*b" in report.stderr + report.stdout, report.stderr


def test_inputs_and_target_near_1e_300_give_the_law(tmp_path):
    rng = _rng()
    a, c = rng.uniform(1, 3, N), rng.uniform(0.5, 2, N)
    frame = pd.DataFrame({"a": a * 1e-300, "c": c, "y": 1e-300 * a * c + 1e-300})
    res = fit(tmp_path, frame, "y")
    assert res.returncode == 0, res.stderr
    assert "sympy: a*c + 1.0e-300" in res.stdout  # never y = 0
    assert_law(tmp_path / "out", frame, "y")


def test_a_law_float64_cannot_write_in_the_tables_units_is_one_error_line(tmp_path):
    rng = _rng()
    a, c = rng.uniform(1, 3, N), rng.uniform(0.5, 2, N)
    frame = pd.DataFrame({"a": a * 1e-300, "c": c, "y": 1e307 * a * c / 9})  # y = 1.1e606 a c
    res = fit(tmp_path, frame, "y", "-q")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the law of y was found on the table rescaled"), res.stderr
    assert "overflows to inf or nan in float64" in lines[0] and "express those columns in units nearer 1" in lines[0]
    assert not (tmp_path / "out").exists()


def test_units_with_extreme_magnitudes_give_coulombs_law(tmp_path):
    rng = _rng()
    x = rng.uniform(1, 5, (N, 4))
    q1, q2, eps, r = x[:, 0] * 1e150, x[:, 1] * 1e150, x[:, 2], x[:, 3]
    frame = pd.DataFrame({"q1": q1, "q2": q2, "epsilon": eps, "r": r, "F": q1 * q2 / (4 * np.pi * eps * r ** 2)})
    units = "q1=m^2*s^-2*kg*V^-1,q2=m^2*s^-2*kg*V^-1,epsilon=m*s^-2*kg*V^-2,r=m,F=m*s^-2*kg"
    res = fit(tmp_path, frame, "F", "--units", units)
    assert res.returncode == 0, res.stderr
    assert "sympy: q1*q2/(4*pi*epsilon*r**2)" in res.stdout
    assert_law(tmp_path / "out", frame, "F")


def test_ctrl_c_on_an_extreme_table_then_resume_gives_the_same_models_and_law(tmp_path, monkeypatch):
    # the interrupted checkpoint is saved in the table's units and resumed in the working units
    import importlib

    import torch
    from click.testing import CliRunner

    from kansym.cli.main import cli
    from kansym.io.bundle import ModelBundle

    fit_module = importlib.import_module("kansym.train.fit")
    real = fit_module._objective
    calls = {"n": 0}

    def ctrl_c(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 40:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    rng = _rng()
    a, b = rng.uniform(1, 3, 80), rng.uniform(1, 2, 80)
    pd.DataFrame({"a": a * 1e-300, "b": b, "y": 1e-300 * a * b ** 2}).to_csv(tmp_path / "d.csv", index=False)
    opts = [str(tmp_path / "d.csv"), "-t", "y", "--steps", "6", "--finetune-steps", "1", "-q"]
    runner = CliRunner()
    straight = runner.invoke(cli, ["fit", *opts, "-o", str(tmp_path / "s")])
    assert straight.exit_code == 0, straight.output
    monkeypatch.setattr(fit_module, "_objective", ctrl_c)
    stopped = runner.invoke(cli, ["fit", *opts, "-o", str(tmp_path / "r")])
    monkeypatch.setattr(fit_module, "_objective", real)
    assert stopped.exit_code == 130, stopped.output
    saved = ModelBundle.load(tmp_path / "r" / "interrupted.pt")
    assert np.abs(saved.x_cal[:, 0]).max() < 1e-299  # the table's units
    resumed = runner.invoke(cli, ["fit", *opts, "-o", str(tmp_path / "r"), "--resume", str(tmp_path / "r" / "interrupted.pt")])
    assert resumed.exit_code == 0, resumed.output
    for name in ("model.pt", "pruned.pt"):
        sa, sb = (ModelBundle.load(tmp_path / d / name).model.state_dict() for d in ("r", "s"))
        assert all(torch.equal(sa[k], sb[k]) for k in sa), name
    ra, rb = (json.loads((tmp_path / d / "formula.json").read_text()) for d in ("r", "s"))
    assert ra["sympy"] == rb["sympy"] == "a*b**2"
