"""What the commands print and write about a table with awkward column names, and rerunning a
command onto the files it wrote before (replaced) or onto a user's file (refused)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import sympy
from click.testing import CliRunner

from kansym.cli.main import cli


def _one_line_error(result, needle):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.output and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("names")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"mass kg": rng.uniform(1, 2, 300), "pi": rng.uniform(1, 2, 300), "e": rng.uniform(1, 2, 300)})
    frame["y"] = 2 * frame["mass kg"] + frame["pi"] - 3 * frame["e"]
    frame.to_csv(d / "d.csv", index=False)
    res = CliRunner().invoke(cli, ["fit", str(d / "d.csv"), "-t", "y", "-o", str(d / "out"), "--steps", "5",
                                   "--hidden", "2", "--grid-size", "3", "--finetune-steps", "3", "-q"])
    assert res.exit_code == 0, res.output
    return d, frame, res.stdout


def test_the_sympy_line_parses_back_with_its_symbols_map(run):
    _, frame, stdout = run
    line = next(l for l in stdout.splitlines() if l.startswith("sympy: "))
    text, _, mapping = line[len("sympy: "):].partition("   symbols: ")
    symbols = json.loads(mapping)
    assert symbols == {"mass_kg": "mass kg", "pi_": "pi", "e": "e"}  # as formula.json's "symbols"
    assert symbols == json.loads((run[0] / "out" / "formula.json").read_text())["symbols"]
    expr = sympy.sympify(text, locals={i: sympy.Symbol(i) for i in symbols})
    f = sympy.lambdify([sympy.Symbol(i) for i in symbols], expr)
    assert np.allclose(f(*(frame[c].to_numpy() for c in symbols.values())), frame["y"], atol=1e-6)
    front = [l for l in stdout.splitlines() if re.match(r" [* ] +\d+  ", l)]
    assert front and all("mass kg" not in l for l in front) and any("pi_" in l for l in front)


def test_columns_named_like_constants_do_not_print_as_the_constants(run):
    from kansym.symbolic.export import to_latex

    _, _, stdout = run
    latex = stdout.splitlines()[0]
    assert r"\mathrm{pi}" in latex and r"\mathrm{e}" in latex and r"\mathrm{mass\ kg}" in latex
    e, pi = sympy.Symbol("e"), sympy.Symbol("pi")
    assert to_latex(e * sympy.exp(pi) + sympy.pi) == r"\mathrm{e} e^{\mathrm{pi}} + \pi"
    assert to_latex(sympy.Symbol("i") * sympy.I) == r"i \mathrm{i}"


def test_rerunning_a_command_replaces_the_files_it_wrote(run, tmp_path):
    d, _, _ = run
    pruned, data = str(d / "out" / "pruned.pt"), str(d / "d.csv")
    commands = [["predict", pruned, data, "-o", str(tmp_path / "p.csv")],
                ["graph", pruned, "--format", "graphml", "-o", str(tmp_path / "g.graphml")],
                ["graph", pruned, "-o", str(tmp_path / "g.json")],
                ["symbolify", pruned, "--latex", str(tmp_path / "f.tex"), "--python", str(tmp_path / "f.py")]]
    runner = CliRunner()
    for command in commands + commands:  # the second round writes onto the first round's files
        res = runner.invoke(cli, [*command, "-q"])
        assert res.exit_code == 0, (command, res.output)
    ledger = json.loads((tmp_path / ".kansym-written").read_text())
    assert set(ledger["files"]) == {"p.csv", "g.graphml", "g.json", "f.tex", "f.py"}


def test_a_users_file_is_never_replaced(run, tmp_path):
    d, _, _ = run
    pruned = str(d / "out" / "pruned.pt")
    runner = CliRunner()
    mine = tmp_path / "f.tex"
    mine.write_text("my notes\n")
    _one_line_error(runner.invoke(cli, ["symbolify", pruned, "--latex", str(mine), "-q"]), "not written by kansym")
    assert mine.read_text() == "my notes\n"
    # a file kansym wrote and the user then edited is the user's
    assert runner.invoke(cli, ["symbolify", pruned, "--python", str(tmp_path / "f.py"), "-q"]).exit_code == 0
    (tmp_path / "f.py").write_text((tmp_path / "f.py").read_text() + "# my change\n")
    _one_line_error(runner.invoke(cli, ["symbolify", pruned, "--python", str(tmp_path / "f.py"), "-q"]), "--force")
    assert (tmp_path / "f.py").read_text().endswith("# my change\n")
    (tmp_path / "p.csv").write_text("a,b\n1,2\n")
    _one_line_error(runner.invoke(cli, ["predict", pruned, str(d / "d.csv"), "-o", str(tmp_path / "p.csv")]), "--force")
    assert (tmp_path / "p.csv").read_text() == "a,b\n1,2\n"
    res = runner.invoke(cli, ["predict", pruned, str(d / "d.csv"), "-o", str(tmp_path / "p.csv"), "--force", "-q"])
    assert res.exit_code == 0 and pd.read_csv(tmp_path / "p.csv").shape == (300, 5)


def test_empty_and_repeated_lists_say_what_is_wrong(run, tmp_path):
    d, _, _ = run
    runner = CliRunner()
    out = ["-o", str(tmp_path / "o")]
    _one_line_error(runner.invoke(cli, ["fit", str(d / "d.csv"), "-t", "y", "--lib", "", *out]), "primitive library")
    _one_line_error(runner.invoke(cli, ["symbolify", str(d / "out" / "pruned.pt"), "--lib", ","]), "primitive library")
    _one_line_error(runner.invoke(cli, ["fit", str(d / "d.csv"), "-t", "y", "--inputs", "pi,pi", *out]),
                    "repeats the column(s) 'pi'")


def test_predict_from_a_formula_json_alone(tmp_path):
    """A --units fit whose law is a monomial trains no KAN and writes only formula.json:
    `kansym predict formula.json DATA` predicts with the formula (fresh-user finding)."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"m": rng.uniform(1, 5, 300), "v": rng.uniform(1, 5, 300)})
    frame["E"] = 0.5 * frame["m"] * frame["v"] ** 2
    data = tmp_path / "data.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["fit", str(data), "--target", "E", "--units", "m=kg,v=m/s,E=kg*m^2/s^2",
                                   "-o", str(out), "-q"])
    assert res.exit_code == 0, res.output
    assert not (out / "pruned.pt").exists()  # no KAN: the law is the monomial
    res = CliRunner().invoke(cli, ["predict", str(out / "formula.json"), str(data), "-o", str(tmp_path / "p.csv")])
    assert res.exit_code == 0, res.output
    p = pd.read_csv(tmp_path / "p.csv")
    assert list(p.columns) == ["m", "v", "E_formula"]
    np.testing.assert_allclose(p["E_formula"], frame["E"], rtol=1e-12)
    assert "formula R² = 1.000000" in res.stderr
    res = CliRunner().invoke(cli, ["predict", str(out / "formula.json"), str(data), "--formula", str(out / "formula.json")])
    _one_line_error(res, "is a formula record already")
