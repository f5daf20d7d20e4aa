"""Every bad input of issue 8 through the CLI: one `error: ...` line, exit 2, no traceback, inputs untouched.

Tables, checkpoints (KAN and KAN-GPT commands), options, and NaN during training. Each case
is run in-process with click's CliRunner; tests/reliability/test_no_traceback.py repeats a
sample as real subprocesses.
"""

import importlib
import math
import os
import pickle
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from kansym.cli.main import cli
from kansym.io.checkpoint import load_checkpoint

fit_module = importlib.import_module("kansym.train.fit")
QUICK = ["--steps", "1", "--hidden", "1", "--grid-size", "3"]


@pytest.fixture()
def runner():
    return CliRunner()


def _rows(n, f=lambda i: f"{i},{(i * 7) % 5},{i * i % 11}"):
    return "".join(f"{f(i)}\n" for i in range(n))


# ------------------------------------------------------------------------------------------ tables

TABLES = {
    "missing file": (None, [], "does not exist"),
    "empty file": (b"", [], "is empty"),
    "blank lines only": (b"  \n\n", [], "is empty"),
    "header only": (b"x1,x2,y\n", [], "no data rows"),
    "single row": (b"x1,x2,y\n1,2,3\n", [], "at least 2 are needed"),
    "duplicate column names": (("x,x,y\n" + _rows(12)).encode(), [], "duplicate column name(s) 'x'"),
    "empty column name": (("x1,,y\n" + _rows(12)).encode(), [], "column 2 of"),
    "target not found": (("x1,x2,y\n" + _rows(12)).encode(), ["--target", "z"], "target column 'z' is not in"),
    "input not found": (("x1,x2,y\n" + _rows(12)).encode(), ["--inputs", "x1,q"], "input column 'q'"),
    "non-numeric chosen column": (("name,x,y\n" + _rows(12, lambda i: f"p{i},{i},{i % 3}")).encode(),
                                  ["--inputs", "name,x"], "column 'name'"),
    "non-numeric target": (("x,y\n" + _rows(12, lambda i: f"{i},{'oops' if i == 4 else i}")).encode(), [], "'oops'"),
    "NaN refused": (("x1,x2,y\n" + _rows(12) + "3,,4\n").encode(), [], "pass --dropna"),
    "inf refused": (("x1,x2,y\n" + _rows(12) + "3,inf,4\n").encode(), [], "non-finite"),
    "more inputs than rows": (("a,b,c,d,e,y\n" + _rows(4, lambda i: f"{i},{i * i},{i % 3},{i * 3 % 4},{7 - i},{i}")).encode(),
                              [], "more rows than inputs"),
    "fewer than 10 rows": (("x1,x2,y\n" + _rows(6)).encode(), [], "at least 10 rows"),
    "row with extra fields": (("x1,x2,y\n" + _rows(12) + "1,2,3,4\n").encode(), [], "fields but the header has 3"),
    "non-UTF-8 bytes": ("temp\xe9rature,y\n".encode("latin-1") + _rows(12, lambda i: f"{i},{i % 4}").encode(), [],
                        "not UTF-8"),
    "random binary": (bytes(range(256)) * 4, [], "not UTF-8"),
    "all inputs constant": (("x,y\n" + _rows(12, lambda i: f"1,{i}")).encode(), [], "constant"),
    "constant target": (("x,y\n" + _rows(12, lambda i: f"{i},5")).encode(), [], "target column 'y' is constant"),
}


@pytest.mark.parametrize("case", list(TABLES))
@pytest.mark.parametrize("command", ["train", "fit"])
def test_bad_table_is_one_line_error_and_file_untouched(runner, tmp_path, case, command, one_line_error):
    content, args, needle = TABLES[case]
    data = tmp_path / "data.csv"
    if content is not None:
        data.write_bytes(content)
    out = tmp_path / ("out" if command == "fit" else "m.pt")
    target = [] if "--target" in args else ["--target", "y"]
    result = runner.invoke(cli, [command, str(data), *target, *args, "-o", str(out), *QUICK])
    one_line_error(result, needle)
    assert not out.exists()  # no output, not even an empty directory
    if content is not None:
        assert data.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if content is None else ["data.csv"])


@pytest.mark.parametrize("sep", ["\t", ";"])
def test_tsv_and_semicolon_files_are_detected(runner, tmp_path, sep):
    data = tmp_path / "d.txt"
    data.write_text(f"x1{sep}x2{sep}y\n" + _rows(15, lambda i: sep.join([str(i), str(i * i % 7), str(2 * i)])))
    result = runner.invoke(cli, ["train", str(data), "-t", "y", "-o", str(tmp_path / "m.pt"), *QUICK])
    assert result.exit_code == 0, result.output
    assert load_checkpoint(tmp_path / "m.pt")["input_names"] == ["x1", "x2"]


def test_dropna_says_how_many_rows_were_dropped(runner, tmp_path, one_line_error):
    data = tmp_path / "d.csv"
    data.write_text("x1,x2,y\n" + _rows(15) + "1,,2\n3,nan,4\n5,6,inf\n,,\n")
    before = data.read_bytes()
    one_line_error(runner.invoke(cli, ["train", str(data), "-t", "y", "-o", str(tmp_path / "m.pt"), *QUICK]),
                   "4 of 19 rows")
    result = runner.invoke(cli, ["train", str(data), "-t", "y", "--dropna", "-o", str(tmp_path / "m.pt"), *QUICK])
    assert result.exit_code == 0, result.output
    assert "dropped 4 row(s) with missing or non-finite values" in result.stderr
    assert data.read_bytes() == before


def test_constant_and_text_columns_are_dropped_with_a_notice(runner, tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("name,c,x,y\n" + _rows(15, lambda i: f"p{i},7,{i},{i * i % 13}"))
    result = runner.invoke(cli, ["train", str(data), "-t", "y", "-o", str(tmp_path / "m.pt"), *QUICK])
    assert result.exit_code == 0, result.output
    assert "ignored non-numeric column 'name'" in result.stderr
    assert "dropped constant input column 'c' (always 7)" in result.stderr
    assert load_checkpoint(tmp_path / "m.pt")["input_names"] == ["x"]


def test_columns_of_1e_minus_9_and_1e9_scale_recover_a_linear_law(runner, tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    x1, x2 = rng.uniform(1, 5, 200) * 1e-9, rng.uniform(-5, 5, 200) * 1e9
    y = 3e9 * x1 - 2e-9 * x2 + 1  # both terms O(1): only standardisation makes them comparable
    data = tmp_path / "d.csv"
    data.write_text("x1,x2,y\n" + "".join(f"{a:.17g},{b:.17g},{c:.17g}\n" for a, b, c in zip(x1, x2, y)))
    ckpt = tmp_path / "m.pt"
    result = runner.invoke(cli, ["train", str(data), "-t", "y", "-o", str(ckpt), "--steps", "10", "--hidden", "2", "-q"])
    assert result.exit_code == 0, result.output
    js = tmp_path / "f.json"
    result = runner.invoke(cli, ["symbolify", str(ckpt), "--lib", "x", "--json", str(js), "-q"])
    assert result.exit_code == 0, result.output
    import json

    import sympy

    record = json.loads(js.read_text())
    assert record["r2_data"] > 0.99
    s1, s2 = sympy.symbols("x1 x2", real=True)
    expr = sympy.sympify(record["sympy"], locals={"x1": s1, "x2": s2})
    assert float(expr.diff(s1)) == pytest.approx(3e9, rel=0.15)  # 10 training steps: the law, not 3 digits
    assert float(expr.diff(s2)) == pytest.approx(-2e-9, rel=0.15)


# ------------------------------------------------------------------------------------- checkpoints


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _bad_checkpoints(tmp_path, kan_checkpoint, gpt_checkpoint):
    """name -> (path, needle) of every kind of checkpoint a command must refuse."""
    good = kan_checkpoint.read_bytes()
    cases = {}
    p = tmp_path / "truncated.pt"
    p.write_bytes(good[: len(good) // 2])
    cases["truncated"] = (p, "truncated or corrupt")
    p = tmp_path / "random.pt"
    p.write_bytes(os.urandom(4096))
    cases["random bytes"] = (p, "truncated or corrupt")
    p = tmp_path / "evil.pt"
    torch.save({"format": "kansym", "version": 1, "kind": "kan", "x": _Evil(tmp_path / "pwned")}, p)
    cases["pickle with code"] = (p, "refused for safety")
    p = tmp_path / "raw.pkl"
    p.write_bytes(pickle.dumps({"format": "kansym", "x": _Evil(tmp_path / "pwned")}, protocol=2))
    cases["raw pickle with code"] = (p, "refused for safety")
    p = tmp_path / "foreign.pt"
    torch.save({"weights": torch.ones(3)}, p)
    cases["foreign torch file"] = (p, "not a kansym checkpoint")
    cases["missing"] = (tmp_path / "absent.pt", "does not exist")
    for kind, src in (("kan", kan_checkpoint), ("gpt", gpt_checkpoint)):
        data = torch.load(src, weights_only=True)
        data["version"] = 2
        p = tmp_path / f"newer-{kind}.pt"
        torch.save(data, p)
        cases[f"newer {kind} version"] = (p, "version 2 but this kansym reads version 1; it was written by a newer kansym")
    return cases


KAN_COMMANDS = {
    "prune": lambda ck, out: ["prune", str(ck), "-o", str(out)],
    "symbolify": lambda ck, out: ["symbolify", str(ck), "--json", str(out)],
    "graph": lambda ck, out: ["graph", str(ck), "-o", str(out)],
    "train --resume": lambda ck, out: ["train", "--example", "hello", "-o", str(out), "--resume", str(ck)],
}
GPT_COMMANDS = {
    "gpt sample": lambda ck, out: ["gpt", "sample", str(ck), "--tokens", "3"],
    "gpt prune": lambda ck, out: ["gpt", "prune", str(ck), "-o", str(out)],
    "gpt edges": lambda ck, out: ["gpt", "edges", str(ck), "--layer", "0", "-o", f"{out}.png"],
}


@pytest.mark.parametrize("command", list(KAN_COMMANDS) + list(GPT_COMMANDS))
def test_bad_checkpoints_are_refused_without_running_code(runner, tmp_path, kan_checkpoint, gpt_checkpoint, command, one_line_error):
    make = {**KAN_COMMANDS, **GPT_COMMANDS}[command]
    for name, (path, needle) in _bad_checkpoints(tmp_path, kan_checkpoint, gpt_checkpoint).items():
        before = path.read_bytes() if path.exists() else None
        out = tmp_path / "out.file"
        line = one_line_error(runner.invoke(cli, make(path, out)), needle)
        assert str(path.name) in line, (name, line)
        assert not out.exists() and not Path(f"{out}.png").exists() and not (tmp_path / "pwned").exists(), name
        assert (path.read_bytes() if path.exists() else None) == before


@pytest.mark.parametrize("command", list(KAN_COMMANDS))
def test_gpt_checkpoint_given_to_a_kan_command_names_kansym_gpt(runner, tmp_path, gpt_checkpoint, command, one_line_error):
    one_line_error(runner.invoke(cli, KAN_COMMANDS[command](gpt_checkpoint, tmp_path / "o")),
                   "is a kan-gpt checkpoint; use `kansym gpt ...` with it")


@pytest.mark.parametrize("command", list(GPT_COMMANDS))
def test_kan_checkpoint_given_to_a_gpt_command_names_the_kan_commands(runner, tmp_path, kan_checkpoint, command, one_line_error):
    one_line_error(runner.invoke(cli, GPT_COMMANDS[command](kan_checkpoint, tmp_path / "o")),
                   "is a kan checkpoint; use it with `kansym prune`, `kansym symbolify` or `kansym graph`")


def test_every_checkpoint_carries_the_format_version(kan_checkpoint, gpt_checkpoint):
    from kansym.io.checkpoint import CHECKPOINT_VERSION

    for path, kind in ((kan_checkpoint, "kan"), (gpt_checkpoint, "kan-gpt")):
        raw = torch.load(path, weights_only=True)
        assert (raw["format"], raw["version"], raw["kind"]) == ("kansym", CHECKPOINT_VERSION, kind)


def test_resuming_a_finished_model_is_refused(runner, tmp_path, kan_checkpoint, one_line_error):
    one_line_error(runner.invoke(cli, ["train", "--example", "hello", "-o", str(tmp_path / "m.pt"),
                                       "--resume", str(kan_checkpoint)]), "finished model, not an interrupted run")


# ------------------------------------------------------------------------------------------ options

KAN_OPTIONS = [
    (["--theta", "-1"], "theta"), (["--theta", "nan"], "theta"), (["--grid-size", "0"], "'--grid-size': 0 is not in the range x>=1"),
    (["--hidden", "5,0"], "--hidden widths must be >= 1"), (["--hidden", ""], "--hidden"),
    (["--hidden", "0"], "--hidden"), (["--device", "foo"], "unknown device 'foo'"), (["--device", "cuda:7"], "cuda"),
    (["--device", "mps"], "mps"), (["--device", "meta"], "unsupported device"), (["--lamb", "-0.1"], "--lamb"),
    (["--lamb", "nan"], "--lamb"), (["--steps", "0"], "'--steps': 0 is not in the range 1<=x<=1000000000"), (["--finetune-steps", "0"], "--finetune-steps"),
    (["--r2-threshold", "2"], "'--r2-threshold': 2.0 is not in the range 0<x<=1"), (["--lib", "sin,bogus"], "bogus"), (["--space", "cubic"], "cubic"),
    (["--grid-size", "x"], "--grid-size"),
    # fresh-user findings: each was a traceback (numpy SeedSequence, torch.manual_seed, tqdm) or an allocation of 160 GB
    (["--seed", "-1"], "'--seed': -1 is not in the range"), (["--seed", "99999999999999999999"], "'--seed'"),
    (["--steps", "100000000000000000000"], "'--steps'"),
    (["--grid-size", "100000"], "choose a smaller --hidden or --grid-size"),
]


@pytest.mark.parametrize("args, needle", KAN_OPTIONS)
def test_impossible_fit_options_fail_before_any_work(runner, tmp_path, args, needle, one_line_error, write_csv):
    data = write_csv(tmp_path / "d.csv")
    out = tmp_path / "out"
    one_line_error(runner.invoke(cli, ["fit", str(data), "-t", "y", "-o", str(out), *args]), needle)
    assert not out.exists()


@pytest.mark.parametrize("args, needle", [a for a in KAN_OPTIONS if a[0][0] not in ("--theta", "--r2-threshold", "--lib", "--finetune-steps")])
def test_impossible_train_options_fail_before_any_work(runner, tmp_path, args, needle, one_line_error, write_csv):
    data = write_csv(tmp_path / "d.csv")
    out = tmp_path / "m.pt"
    one_line_error(runner.invoke(cli, ["train", str(data), "-t", "y", "-o", str(out), *args]), needle)
    assert not out.exists()


@pytest.mark.parametrize("command, args, needle", [
    ("prune", ["--theta", "-1"], "'--theta': -1 is not a finite number >= 0"),
    ("prune", ["--theta", "inf"], "'--theta': inf is not a finite number >= 0"),
    ("prune", ["--device", "tpu"], "tpu"),
    ("symbolify", ["--r2-threshold", "0"], "'--r2-threshold': 0.0 is not in the range 0<x<=1"), ("symbolify", ["--lib", "nope"], "nope"),
    ("symbolify", ["--device", "cuda:1"], "cuda"),
    ("graph", ["--device", "xla"], "xla"),
    ("plot", ["--beta", "nan"], "--beta must be"), ("plot", ["--theta", "-1"], "--theta must be"),
    ("plot", ["--kind", "edge", "--edge", "9,9,9"], "outside the model"),
])
def test_impossible_checkpoint_command_options(runner, tmp_path, kan_checkpoint, command, args, needle, one_line_error):
    if command == "plot":
        args = [*args, "-o", str(tmp_path / "p.png")]
    one_line_error(runner.invoke(cli, [command, str(kan_checkpoint), *args]), needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


GPT_TINY = ["--n-layer", "2", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--max-iters", "1", "-q"]


@pytest.mark.parametrize("args, needle", [
    (["--n-embd", "15"], "divisible"), (["--block-size", "0"], "'--block-size': 0 is not in the range x>=1"), (["--n-layer", "0"], "'--n-layer': 0 is not in the range x>=1"),
    (["--n-head", "0"], "'--n-head': 0 is not in the range x>=1"), (["--lr", "-1"], "learning rates"), (["--dropout", "1"], "dropout"),
    (["--lamb", "-1"], "lamb"), (["--device", "foo"], "unknown device"), (["--device", "cuda:9"], "cuda"),
    (["--max-iters", "0"], "'--max-iters': 0 is not in the range 1<=x<=1000000000"), (["--batch-size", "0"], "'--batch-size': 0 is not in the range x>=1"),
    (["--ffn", "kan", "--grid-size", "0"], "'--grid-size': 0 is not in the range x>=1"), (["--ffn", "rnn"], "unknown FFN"),
    (["--ffn", "kan", "--kan-hidden", "-2"], "hidden width"), (["--basis", "wavelet"], "wavelet"),
])
def test_impossible_gpt_train_options_fail_before_any_work(runner, tmp_path, args, needle, one_line_error):
    text = tmp_path / "t.txt"
    text.write_text("to be or not to be, that is the question. " * 20)
    out = tmp_path / "run"
    one_line_error(runner.invoke(cli, ["gpt", "train", "--text", str(text), "-o", str(out), *GPT_TINY, *args]), needle)
    assert not out.exists()


@pytest.mark.parametrize("command, args, needle", [
    ("sample", ["--tokens", "-1"], "tokens"), ("sample", ["--temperature", "-1"], "temperature"),
    ("sample", ["--top-k", "0"], "top-k"), ("sample", ["--device", "foo"], "foo"),
    ("prune", ["--theta", "-1", "-o", "OUT"], "theta"), ("prune", ["--device", "foo", "-o", "OUT"], "foo"),
    ("edges", ["--layer", "5", "-o", "OUT.png"], "layer"), ("edges", ["--top", "0", "--layer", "0", "-o", "OUT.png"], "top"),
    ("edges", ["--layer", "0", "-o", "OUT"], "end the file name in .png, .pdf or .svg"), ("edges", ["--device", "x", "--layer", "0", "-o", "OUT.png"], "'x'"),
])
def test_impossible_gpt_checkpoint_options(runner, tmp_path, gpt_checkpoint, command, args, needle, one_line_error):
    args = [str(tmp_path / a.replace("OUT", "o.out")) if a.startswith("OUT") else a for a in args]
    one_line_error(runner.invoke(cli, ["gpt", command, str(gpt_checkpoint), *args]), needle)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------ NaN in training


class _InfAfter:
    """``_objective`` whose loss turns inf from its ``at``-th call (a diverging step, injected)."""

    def __init__(self, at):
        self.at, self.calls, self.real = at, 0, fit_module._objective

    def __call__(self, *args, **kwargs):
        self.calls += 1
        mse, reg = self.real(*args, **kwargs)
        return (mse * math.inf if self.calls >= self.at else mse), reg


def test_nan_during_train_keeps_the_existing_checkpoint(runner, tmp_path, monkeypatch, kan_checkpoint, one_line_error, write_csv):
    data = write_csv(tmp_path / "d.csv")
    out = tmp_path / "m.pt"
    out.write_bytes(kan_checkpoint.read_bytes())  # the last good checkpoint of an earlier run
    before = out.read_bytes()
    monkeypatch.setattr(fit_module, "_objective", _InfAfter(at=30))
    line = one_line_error(runner.invoke(cli, ["train", str(data), "-t", "y", "-o", str(out), "--steps", "5", "-q"]),
                          "the loss became inf at step")
    assert "rolled back" in line and f"{out} was left as it was" in line
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv", "m.pt"]  # no temp file left


def test_nan_during_fit_writes_nothing(runner, tmp_path, monkeypatch, one_line_error, write_csv):
    data = write_csv(tmp_path / "d.csv")
    monkeypatch.setattr(fit_module, "_objective", _InfAfter(at=30))
    line = one_line_error(runner.invoke(cli, ["fit", str(data), "-t", "y", "-o", str(tmp_path / "out"), "--steps", "5", "-q"]),
                          "the loss became inf")
    assert "nothing was written" in line and not (tmp_path / "out").exists()


@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_extreme_magnitudes_are_standardised_without_overflow(runner, tmp_path, scale):
    import numpy as np

    from kansym.io.scaler import Scaler

    a = np.linspace(-1, 1, 31)[:, None] * scale
    assert np.abs(Scaler.minmax(a).transform(a)).max() == pytest.approx(1.0, rel=1e-12)
    z = Scaler.standard(a).transform(a)
    assert z.mean() == pytest.approx(0, abs=1e-12) and z.std() == pytest.approx(1, rel=1e-12)
    data = tmp_path / "d.csv"
    data.write_text("x,y\n" + "".join(f"{u / scale:.17g},{u:.17g}\n" for u in a[:, 0] * 3))
    result = runner.invoke(cli, ["train", str(data), "-t", "y", "-o", str(tmp_path / "m.pt"), *QUICK, "-q"])
    assert result.exit_code == 0 and result.stderr == "", result.output


def test_plots_never_replace_a_file_kansym_did_not_write(runner, tmp_path, write_csv):
    """Regression (fresh-user review): fit --plots DIR overwrote DIR/diagram.png without --force."""
    data = write_csv(tmp_path / "d.csv")
    plots = tmp_path / "pl"
    plots.mkdir()
    (plots / "diagram.png").write_text("precious")
    res = runner.invoke(cli, ["fit", str(data), "-t", "y", "-o", str(tmp_path / "out"), "--steps", "2", "--hidden", "2",
                              "--plots", str(plots), "-q"])
    assert res.exit_code == 2 and "diagram.png already exists and was not written by kansym" in res.stderr
    assert (plots / "diagram.png").read_text() == "precious" and not (tmp_path / "out").exists()


def test_library_configs_refuse_bad_seeds_and_steps():
    from kansym.discover.config import DiscoverConfig
    from kansym.errors import ConfigError
    from kansym.nn.config import KANConfig
    from kansym.train.config import TrainConfig

    for make in (lambda s: DiscoverConfig(seed=s), lambda s: TrainConfig(seed=s), lambda s: KANConfig((2, 1), seed=s)):
        for bad in (-1, 2**63, 1.5, True):
            with pytest.raises(ConfigError, match="seed must be an integer from 0 to 2\\*\\*63 - 1"):
                make(bad)
        make(2**63 - 1)
    with pytest.raises(ConfigError, match="steps must lie in 1..1,000,000,000"):
        TrainConfig(steps=10**9 + 1)


def test_the_memory_estimate_refuses_what_would_not_fit():
    from kansym.errors import ConfigError
    from kansym.train.memory import check_training_memory, training_bytes

    small = training_bytes((2, 5, 1), 5, 3, 3000)
    assert 1e5 < small < 1e8  # the default hello KAN: megabytes
    assert training_bytes((2, 10, 1), 5, 3, 3000) > small and training_bytes((2, 5, 1), 50, 3, 3000) > small
    check_training_memory((2, 5, 1), 5, 3, 3000, available=2 * small + 1)
    with pytest.raises(ConfigError, match=r"needs about .* GiB, more than half of this machine's"):
        check_training_memory((2, 5, 1), 5, 3, 3000, available=2 * small - 1)


@pytest.mark.parametrize("command", ["fit", "train"])
def test_a_missing_input_is_reported_before_an_output_clash(runner, tmp_path, command):
    """Regression (review): ``fit missing.csv -o DIR`` with a foreign DIR/formula.json said that
    the output exists, not that the input is missing."""
    out = tmp_path / "out"
    out.mkdir()
    for name in ("formula.json", "model.pt"):
        (out / name).write_text("precious")
    target = out if command == "fit" else out / "model.pt"
    res = runner.invoke(cli, [command, str(tmp_path / "missing.csv"), "-t", "y", "-o", str(target), "-q"])
    assert res.exit_code == 2 and res.stderr.strip() == \
        f"error: data file '{tmp_path / 'missing.csv'}' does not exist; check the path."
    assert (out / "formula.json").read_text() == "precious" == (out / "model.pt").read_text()
