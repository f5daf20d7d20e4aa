"""Shared files run no code (issue 37): every string of formula.json, graph.json and a checkpoint.

formula.json files, graph.json files and checkpoints are passed between people like data. A
hostile or broken value in any field they hold, read by any command that reads them, must
never run (a canary file is never created) and is either harmless (exit 0: a name is only a
name) or refused in one ``error:`` line with exit status 2, never a traceback. One real
``kansym fit`` (y = 2 x1 - x2 + 1/2) gives the files; its formula.json is filled out with
every optional field kansym writes (a closed form, candidates, a structure, ...), so that each
field is there to be spoiled; hypothesis picks the field, the payload and the command.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kansym.cli.main import cli
from kansym.discover.record import read_record
from kansym.errors import KansymError

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

CANARY = "CANARY"  # stands for the canary file's path in a payload
PAYLOADS = (
    f"__import__('os').system('touch {CANARY}')",
    f"x1 + 0*__import__('os').system('touch {CANARY}')",
    f"(lambda: open('{CANARY}', 'w'))()",
    f"exec(\"open('{CANARY}', 'w')\")",
    "Symbol('x').__class__.__mro__[-1].__subclasses__()",
    "x1.__class__.__init__.__globals__",
    "9**9**9", "x1**(10**10**10)", "Float(1, 10**9)/3", "gamma(1e300*x1)", "exp(exp(1000))*x1", "sin(10**400*x1)",
    "+".join(["x1"] * 30000), "*".join(["x1"] * 300), "sin(" * 300 + "x1" + ")" * 300, "phi_0_0_0(x1) + x2",
    "x1 if x1 else x2", "[x1][0]", "x1 @ x2", "\x00", "'", "", " ", "x1\n__import__('os')", "1j*x1", "True",
    CANARY, "../../etc/passwd", "\x1b[31mred", "ü" * 5,
)
PAYLOAD = st.one_of(st.sampled_from(PAYLOADS), st.text(max_size=12))


def _canary_run(args_or_call, tmp: Path):
    """Run a command (a CliRunner argument list) or a callable with the canary path filled in;
    returns ``(exit code, stderr, canary created)``."""
    canary = tmp / "canary"
    if callable(args_or_call):
        try:
            args_or_call()
            code, err = 0, ""
        except KansymError as exc:  # the library's refusal: one sentence
            code, err = 2, f"error: {exc}"
    else:
        result = CliRunner().invoke(cli, args_or_call)
        assert result.exception is None or isinstance(result.exception, SystemExit), \
            (args_or_call, result.output, result.exception)
        code, err = result.exit_code, result.stderr
    return code, err, canary.exists()


def _check(code: int, err: str, created: bool, what) -> None:
    assert not created, f"a payload ran: {what}"
    assert code in (0, 2), (what, code, err)
    assert "Traceback" not in err, (what, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (what, err)


def _fill(value, canary: Path):
    return value.replace(CANARY, str(canary)) if isinstance(value, str) else value


def _leaves(obj, path=()):
    """Paths to every leaf (string, number, bool, null) and every dict key of a JSON value."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path + (("key", k),)
            yield from _leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, path + (i,))
    else:
        yield path


def _spoiled(doc, path, payload):
    """A deep copy of ``doc`` with the leaf (or dict key) at ``path`` replaced by ``payload``."""
    doc = copy.deepcopy(doc)
    *parents, last = path
    node = doc
    for p in parents:
        node = node[p]
    if isinstance(last, tuple):  # a dict key
        node[str(payload)] = node.pop(last[1])
    else:
        node[last] = payload
    return doc


# ------------------------------------------------------------------------------------ the files


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """``(pruned.pt, formula.json record filled out, rows.csv, graph.json)`` of one small fit."""
    d = tmp_path_factory.mktemp("shared")
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (300, 2))
    y = 2 * x[:, 0] - x[:, 1] + 0.5
    data = d / "d.csv"
    data.write_text("x1,x2,y\n" + "".join(f"{float(a)!r},{float(b)!r},{float(c)!r}\n" for a, b, c in zip(*x.T, y)))
    out = d / "out"
    res = CliRunner().invoke(cli, ["fit", str(data), "-t", "y", "-o", str(out), "--steps", "5", "--hidden", "2",
                                   "--grid-size", "3", "--finetune-steps", "3", "-q"])
    assert res.exit_code == 0, res.output
    record = json.loads((out / "formula.json").read_text())
    record["pareto"].append({"sympy": "2*x1 - x2", "complexity": 5, "r2": 0.9, "error": 0.3, "chosen": False,
                             "dominated": False})
    record["candidates"] = [{"sympy": "2.0*x1 - 1.0*x2 + 0.5", "complexity": 4, "error": 1e-6, "bic": -10.0,
                             "accepted": True, "primitives": {"0:0:0": "x", "0:1:0": "x"}}]
    record["closed_form"] = {"sympy": "2*x1 - x2 + 1/2", "latex": "2 x_{1} - x_{2} + \\frac{1}{2}", "r2_test": 1.0,
                             "complexity": 6, "origin": "direct search"}
    record["warning"] = "not a verified answer: a test"
    record["structure"] = {"kind": "sum", "variables": ["x1", "x2"], "relation": "x1 - x2", "children": []}
    record["removed_inputs"] = [{"name": "x3", "z_smooth": 0.1, "z_kan": None, "z_threshold": 3.2, "reason": "z"}]
    record["time_limit"] = {"seconds": 60, "cut_short": ["the Occam step"], "note": "a note"}
    rows = d / "rows.csv"
    rows.write_text("x1,x2,y\n0.5,0.25,1.25\n-0.5,0.1,-0.1\n")
    return out / "pruned.pt", record, rows, out / "graph.json"


def _record_commands(ckpt: Path, record: Path, rows: Path, tmp: Path) -> dict:
    from kansym import KANRegressor

    png = str(tmp / "a.png")
    return {
        "predict --formula": ["predict", str(ckpt), str(rows), "--formula", str(record), "-o", str(tmp / "p.csv")],
        "predict formula.json": ["predict", str(record), str(rows)],
        "plot diagram": ["plot", str(ckpt), "--fits", str(record), "-o", png],
        "plot edge": ["plot", str(ckpt), "--kind", "edge", "--edge", "0,0,0", "--fits", str(record), "-o", png],
        "plot report": ["plot", str(ckpt), "--kind", "report", "--fits", str(record), "--no-front", "-o", png],
        "graph --fits": ["graph", str(ckpt), "--fits", str(record), "-o", str(tmp / "g.json")],
        "from_record": lambda: KANRegressor.from_record(record).predict(np.array([[0.5, 0.25]])),
    }


def test_the_filled_out_record_is_read_by_every_command(files, tmp_path):
    ckpt, record, rows, _ = files
    path = tmp_path / "formula.json"
    path.write_text(json.dumps(record))
    for name, command in _record_commands(ckpt, path, rows, tmp_path).items():
        code, err, _ = _canary_run(command, tmp_path)
        assert code == 0, (name, err)


def test_no_string_of_a_record_runs_when_it_is_read(files, tmp_path):
    """Every field (and key) of formula.json with a code payload, through the reader every command uses."""
    _, record, _, _ = files
    canary = tmp_path / "canary"
    path = tmp_path / "formula.json"
    for field in _leaves(record):
        for payload in PAYLOADS[:6]:
            path.write_text(json.dumps(_spoiled(record, field, _fill(payload, canary))))
            try:
                read_record(path)
            except KansymError as exc:
                assert "\n" not in str(exc), (field, str(exc))
            assert not canary.exists(), (field, payload)


def test_a_pareto_entry_of_python_does_not_run_when_the_report_is_drawn(files, tmp_path, one_line_error):
    """Regression (issue 37): the report's front parsed each entry's text with sympify, so a formula.json
    whose Pareto entry was Python ran it on `kansym plot --kind report --fits`."""
    ckpt, record, rows, _ = files
    canary = tmp_path / "canary"
    for payload in (f"__import__('os').system('touch {canary}')", "Symbol('x').__class__.__mro__[-1].__subclasses__()"):
        evil = copy.deepcopy(record)
        evil["pareto"][1]["sympy"] = payload
        path = tmp_path / "formula.json"
        path.write_text(json.dumps(evil))
        result = CliRunner().invoke(cli, ["plot", str(ckpt), "--kind", "report", "--fits", str(path),
                                          "-o", str(tmp_path / "r.png")])
        one_line_error(result, "not only arithmetic")
        assert not canary.exists() and not (tmp_path / "r.png").exists()


@SETTINGS
@given(data=st.data())
def test_fuzz_formula_json_through_every_reader(files, data):
    ckpt, record, rows, _ = files
    field = data.draw(st.sampled_from(list(_leaves(record))), label="field")
    payload = data.draw(PAYLOAD, label="payload")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = tmp / "formula.json"
        path.write_text(json.dumps(_spoiled(record, field, _fill(payload, tmp / "canary"))))
        commands = _record_commands(ckpt, path, rows, tmp)
        name = data.draw(st.sampled_from(sorted(commands)), label="command")
        _check(*_canary_run(commands[name], tmp), (name, field, payload))


# ------------------------------------------------------------------------------------ checkpoints

REDUCTION = {"columns": ["x1", "x2"], "target": "y", "monomial": "1", "p": {"x1": "0"},
             "groups": {"x1": "x1", "x2": "x2"}, "exponents": {"x1": [1, 0], "x2": [0, 1]}}


def _string_paths(obj, path=()):
    """Paths to every string leaf of a checkpoint dict (tensors and numbers left alone)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _string_paths(v, path + (k,))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _string_paths(v, path + (i,))
    elif isinstance(obj, str):
        yield path


def _set(obj, path, value):
    *parents, last = path
    node = obj
    for p in parents:
        if isinstance(node[p], tuple):
            node[p] = list(node[p])
        node = node[p]
    node[last] = value


@pytest.fixture(scope="module")
def checkpoint_dict(files):
    ckpt = torch.load(files[0], weights_only=True)
    with_reduction = copy.deepcopy(ckpt)
    with_reduction["meta"]["reduction"] = copy.deepcopy(REDUCTION)  # the groups are the columns: same predictions
    return with_reduction


@SETTINGS
@given(data=st.data())
def test_fuzz_checkpoint_strings_through_every_reader(files, checkpoint_dict, data):
    _, _, rows, _ = files
    field = data.draw(st.sampled_from(list(_string_paths(checkpoint_dict))), label="field")
    payload = data.draw(PAYLOAD, label="payload")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        spoiled = copy.deepcopy(checkpoint_dict)
        _set(spoiled, field, _fill(payload, tmp / "canary"))
        ckpt = tmp / "m.pt"
        torch.save(spoiled, ckpt)
        png = str(tmp / "a.png")
        commands = {
            "predict": ["predict", str(ckpt), str(rows), "-o", str(tmp / "p.csv")],
            "plot diagram": ["plot", str(ckpt), "-o", png],
            "plot edge": ["plot", str(ckpt), "--kind", "edge", "--edge", "0,0,0", "-o", png],
            "plot report": ["plot", str(ckpt), "--kind", "report", "--no-front", "-o", png],
            "plot curves": ["plot", str(ckpt), "--kind", "curves", "-o", png],
            "graph": ["graph", str(ckpt), "-o", str(tmp / "g.json")],
            "symbolify": ["symbolify", str(ckpt), "--json", str(tmp / "f.json"), "--python", str(tmp / "f.py"), "-q"],
            "prune": ["prune", str(ckpt), "-o", str(tmp / "p.pt")],
        }
        name = data.draw(st.sampled_from(sorted(commands)), label="command")
        _check(*_canary_run(commands[name], tmp), (name, field, payload))
        if name == "symbolify" and (tmp / "f.py").exists():  # the exported source is code: its names stay names
            compile((tmp / "f.py").read_text(), "f.py", "exec")


# ------------------------------------------------------------------------------------ graph.json


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_fuzz_graph_json_reads_as_data_or_one_error(files, data):
    from kansym.graph import read_json

    doc = json.loads(files[3].read_text())
    field = data.draw(st.sampled_from(list(_leaves(doc))), label="field")
    payload = data.draw(st.one_of(PAYLOAD, st.integers(), st.none(), st.lists(st.integers(), max_size=3)))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = tmp / "graph.json"
        path.write_text(json.dumps(_spoiled(doc, field, _fill(payload, tmp / "canary"))))
        _check(*_canary_run(lambda: read_json(path), tmp), (field, payload))


# ------------------------------------------------------------------------------------ regressions (issue 37)


@pytest.mark.parametrize("change, needle", [
    ({"sympy": "+".join(["x1"] * 30000)}, "nested too deeply or has too many terms"),
    ({"sympy": "x1" + " + x1" * 30000}, "characters long, more than the 100000"),
    ({"sympy": "phi_0_0_0(x1) + x2"}, "uses phi_0_0_0, a numeric edge whose curve the record does not hold"),
    ({"inputs": None}, "has no 'inputs' list of distinct column names"),
    ({"sympy": "gamma(1e300*x1)"}, "'gamma', which is not a function of kansym's formulas"),
    ({"sympy": "sin(10**400*x1)"}, "cannot be evaluated with numpy (OverflowError"),
    ({"sympy": "9**9**9*x1"}, "exact power of about 4.67e+08 digits"),
])
def test_predict_refuses_a_broken_formula_json_in_one_line(files, tmp_path, change, needle, one_line_error):
    """Regression (issue 37): each of these made `kansym predict formula.json` print a 38-75 line traceback."""
    _, record, rows, _ = files
    doc = {**copy.deepcopy(record), **change}
    if doc["inputs"] is None:
        del doc["inputs"]
    path = tmp_path / "formula.json"
    path.write_text(json.dumps(doc))
    one_line_error(CliRunner().invoke(cli, ["predict", str(path), str(rows), "-o", str(tmp_path / "p.csv")]), needle)
    assert not (tmp_path / "p.csv").exists()


def test_a_formula_that_overflows_predicts_inf_with_a_note(files, tmp_path):
    _, record, rows, _ = files
    path = tmp_path / "formula.json"
    path.write_text(json.dumps({**record, "sympy": "exp(exp(1000))*x1"}))
    result = CliRunner().invoke(cli, ["predict", str(path), str(rows), "-o", str(tmp_path / "p.csv")])
    assert result.exit_code == 0, result.output
    assert "note: the formula gives no finite value on 2 of 2 rows" in result.stderr
    assert (tmp_path / "p.csv").read_text().splitlines()[1].endswith(",inf")


def test_a_checkpoint_whose_reduction_does_not_match_its_inputs_is_one_line(files, checkpoint_dict, tmp_path,
                                                                             one_line_error):
    """Regression (issue 37): a renamed input of a --units checkpoint raised KeyError in `kansym predict`."""
    _, _, rows, _ = files
    spoiled = copy.deepcopy(checkpoint_dict)
    spoiled["input_names"][0] = "pi9"
    torch.save(spoiled, tmp_path / "m.pt")
    one_line_error(CliRunner().invoke(cli, ["predict", str(tmp_path / "m.pt"), str(rows), "-o", str(tmp_path / "p.csv")]),
                   "dimensional reduction (meta 'reduction') does not match its inputs")
