"""The command line through click's CliRunner: help, bad input, the steps of the pipeline."""

import json

import pytest
from click.testing import CliRunner

from kansym.cli.main import cli

COMMANDS = ["fit", "train", "prune", "symbolify", "graph"]


@pytest.fixture()
def runner():
    return CliRunner()


def _one_line_error(result, needle):
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert "Traceback" not in result.output
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert needle in lines[0]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(runner, command):
    result = runner.invoke(cli, [command, "--help"])
    assert result.exit_code == 0
    assert "Usage: " in result.output
    assert "--seed" in result.output and "--quiet" in result.output


def test_missing_column_is_one_line_error(runner, tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,y\n1,2,3\n2,3,4\n3,5,6\n")
    result = runner.invoke(cli, ["fit", str(csv), "--target", "nope", "-o", str(tmp_path / "out")])
    _one_line_error(result, "nope")
    assert not (tmp_path / "out" / "model.pt").exists()


def test_missing_file_is_one_line_error(runner, tmp_path):
    result = runner.invoke(cli, ["fit", str(tmp_path / "absent.csv"), "--target", "y", "-o", str(tmp_path / "o")])
    _one_line_error(result, "absent.csv")


def test_impossible_options_fail_before_work(runner, tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("a,y\n1,2\n2,3\n3,5\n")
    _one_line_error(runner.invoke(cli, ["fit", str(csv), "-t", "y", "--theta", "-1", "-o", str(tmp_path / "o")]), "theta")
    _one_line_error(runner.invoke(cli, ["fit", str(csv), "-t", "y", "--hidden", "0", "-o", str(tmp_path / "o")]), "hidden")
    _one_line_error(runner.invoke(cli, ["fit", str(csv), "-t", "y", "--lib", "sin,bogus", "-o", str(tmp_path / "o")]), "bogus")
    _one_line_error(runner.invoke(cli, ["fit", str(csv), "-t", "y", "--device", "cuda:7", "-o", str(tmp_path / "o")]), "cuda")
    _one_line_error(runner.invoke(cli, ["fit", str(csv), "-t", "y", "--lamb", "-0.1", "-o", str(tmp_path / "o")]), "lamb")


def test_corrupt_checkpoint_is_one_line_error(runner, tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"\x00not a checkpoint at all")
    for command in (["prune", str(bad)], ["symbolify", str(bad)], ["graph", str(bad)]):
        _one_line_error(runner.invoke(cli, command), "bad.pt")
    assert bad.read_bytes() == b"\x00not a checkpoint at all"


def test_refuses_to_overwrite_a_foreign_file(runner, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "formula.json").write_text("my precious notes")
    result = runner.invoke(cli, ["fit", "--example", "hello", "-o", str(out), "--steps", "1"])
    _one_line_error(result, "--force")
    assert (out / "formula.json").read_text() == "my precious notes"


def test_train_prune_symbolify_graph_steps(runner, tmp_path):
    ckpt = tmp_path / "model.pt"
    result = runner.invoke(cli, ["train", "--example", "hello", "-o", str(ckpt), "-q"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["width"] == [2, 5, 1] and info["space"] == "linear"

    result = runner.invoke(cli, ["prune", str(ckpt), "--theta", "1e-2", "-q"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    pruned = tmp_path / "model-pruned.pt"
    assert pruned.exists() and report["width_before"] == [2, 5, 1]
    assert report["width_after"][0] == 2 and report["width_after"][1] < 5

    # pruning again replaces kansym's own output, but never a foreign file
    assert runner.invoke(cli, ["prune", str(ckpt), "-q"]).exit_code == 0
    foreign = tmp_path / "notes.pt"
    foreign.write_bytes(b"my own binary notes")
    _one_line_error(runner.invoke(cli, ["prune", str(ckpt), "-o", str(foreign), "-q"]), "--force")
    assert foreign.read_bytes() == b"my own binary notes"

    tex = tmp_path / "f.tex"
    result = runner.invoke(cli, ["symbolify", str(pruned), "--latex", str(tex), "--json", str(tmp_path / "f.json"), "-q"])
    assert result.exit_code == 0, result.output
    assert "R² (data)" in result.stdout and tex.read_text().strip()
    record = json.loads((tmp_path / "f.json").read_text())
    assert record["inputs"] == ["x1", "x2"] and record["target"] == "f"
    assert record["r2_data"] > 0.99

    result = runner.invoke(cli, ["graph", str(pruned), "--format", "graphml", "-o", str(tmp_path / "g.graphml")])
    assert result.exit_code == 0, result.output
    import networkx as nx

    g = nx.read_graphml(tmp_path / "g.graphml")
    assert g.number_of_nodes() == sum(report["width_after"])


def test_graph_attaches_edge_fits_and_rejects_a_bad_fits_file(runner, tmp_path):
    ckpt = tmp_path / "m.pt"
    assert runner.invoke(cli, ["train", "--example", "hello", "-o", str(ckpt), "-q", "--steps", "3"]).exit_code == 0
    fits = tmp_path / "f.json"
    assert runner.invoke(cli, ["symbolify", str(ckpt), "--json", str(fits), "-q"]).exit_code == 0
    out = tmp_path / "g.json"
    result = runner.invoke(cli, ["graph", str(ckpt), "--fits", str(fits), "-o", str(out)])
    assert result.exit_code == 0, result.output
    graph = json.loads(out.read_text())
    record = json.loads(fits.read_text())
    prims = {tuple(e["id"]): e["primitive"] for e in graph["edges"] if "primitive" in e}
    assert prims == {tuple(e["id"]): e["primitive"] for e in record["edges"]}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _one_line_error(runner.invoke(cli, ["graph", str(ckpt), "--fits", str(bad), "-o", str(tmp_path / "g2.json")]), "bad.json")


def _main(args):
    """Run the console-script entry point (click's own usage errors included) in a subprocess."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "kansym", *args], capture_output=True, text=True, timeout=120)


def test_click_usage_errors_are_one_line(tmp_path):
    for args, needle in [
        (["fit", "--example", "hello", "--theta", "abc"], "--theta"),
        (["fit", "--bogus-option"], "--bogus-option"),
        (["graph", str(tmp_path / "x.pt"), "--format", "xml"], "xml"),
        (["prune"], "CHECKPOINT"),
    ]:
        proc = _main(args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr


def test_out_dir_equal_to_the_input_is_refused(runner, tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("a,y\n" + "".join(f"{i},{2 * i}\n" for i in range(20)))
    before = csv.read_bytes()
    _one_line_error(runner.invoke(cli, ["fit", str(csv), "-t", "y", "-o", str(csv)]), "input file")
    assert csv.read_bytes() == before


def test_too_few_rows_fail_before_training_and_leave_no_output(runner, tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("a,y\n1,2\n2,4\n3,7\n")
    out = tmp_path / "out"
    _one_line_error(runner.invoke(cli, ["fit", str(csv), "-t", "y", "-o", str(out)]), "at least 10 rows")
    assert not out.exists()


def test_device_is_checked_by_every_command(runner, tmp_path):
    bad = tmp_path / "m.pt"
    bad.write_bytes(b"x")
    for command in ("prune", "symbolify", "graph"):
        _one_line_error(runner.invoke(cli, [command, str(bad), "--device", "cuda:3"]), "cuda")


def test_symbolify_exports_python_that_reproduces_the_formula(runner, tmp_path):
    import numpy as np
    import sympy

    ckpt = tmp_path / "m.pt"
    assert runner.invoke(cli, ["train", "--example", "hello", "-o", str(ckpt), "-q", "--steps", "3"]).exit_code == 0
    py, js = tmp_path / "f.py", tmp_path / "f.json"
    result = runner.invoke(cli, ["symbolify", str(ckpt), "--python", str(py), "--json", str(js), "-q"])
    assert result.exit_code == 0, result.output
    namespace = {}
    exec(compile(py.read_text(), str(py), "exec"), namespace)
    record = json.loads(js.read_text())
    x1, x2 = sympy.symbols("x1 x2", real=True)
    expr = sympy.sympify(record["sympy"], locals={"x1": x1, "x2": x2})
    X = np.random.default_rng(0).uniform(-1, 1, (50, 2))
    expected = sympy.lambdify([x1, x2], expr)(X[:, 0], X[:, 1])
    np.testing.assert_allclose(namespace["f"](X), expected, rtol=1e-12)


def test_size_and_screening_options_fail_before_work(runner, tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,c,y\n" + "".join(f"{i},{i % 3},{i % 5},{2 * i}\n" for i in range(30)))
    out = str(tmp_path / "o")
    _one_line_error(runner.invoke(cli, ["fit", str(csv), "-t", "y", "--keep-inputs", "a,nope", "-o", out]), "'nope'")
    _one_line_error(runner.invoke(cli, ["fit", str(csv), "-t", "y", "--max-train-rows", "5", "-o", out]),
                    "--max-train-rows")
    _one_line_error(runner.invoke(cli, ["fit", str(csv), "-t", "y", "--max-train-rows", "many", "-o", out]),
                    "--max-train-rows")
    assert not (tmp_path / "o" / "model.pt").exists()
    help_text = runner.invoke(cli, ["fit", "--help"]).output
    assert "--keep-inputs" in help_text and "--no-screen" in help_text and "--max-train-rows" in help_text


def test_a_screened_checkpoint_resumes_on_the_same_table_only():
    from types import SimpleNamespace

    from kansym.cli.run import check_same_columns
    from kansym.errors import ConfigError

    table = SimpleNamespace(input_names=("a", "b", "c", "d"), target_names=("y",))

    def point(inputs, outputs=("y",)):
        return SimpleNamespace(bundle=SimpleNamespace(input_names=tuple(inputs), output_names=tuple(outputs)))

    check_same_columns(table, point("abcd"), "ck.pt")
    check_same_columns(table, point("bd"), "ck.pt")  # the screening kept b and d
    for bad in (point("db"), point("bx"), point(""), point("bd", ("z",))):
        with pytest.raises(ConfigError, match="give the same columns"):
            check_same_columns(table, bad, "ck.pt")


def test_the_resume_line_calls_the_program_by_the_path_it_was_started_by(tmp_path, monkeypatch):
    from kansym.cli.run import program_name

    script = tmp_path / "venv" / "bin" / "kansym"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert program_name("kansym", str(script)) == str(script)  # not on the PATH: the path as typed
    monkeypatch.setenv("PATH", str(script.parent))
    assert program_name("kansym", str(script)) == "kansym"  # the PATH finds the same script
    assert program_name("python -m kansym", "/x/kansym/__main__.py") == "python -m kansym"
    assert program_name("kansym", "kansym") == "kansym"
