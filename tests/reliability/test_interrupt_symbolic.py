"""Ctrl-C after the training of `kansym fit` (pruning, fine-tuning, per-edge fits, Occam step,
refinement, verification) saves the trained model; --resume goes on from there without a
training step and writes what an uninterrupted run writes (issue 19, acceptance 4).

One test sends a real SIGINT to a `python -m kansym fit` subprocess in its per-edge fits and
runs the command it prints; the others inject the KeyboardInterrupt in-process (the same
exception a SIGINT raises) at each stage, to keep them fast.
"""

import importlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from kansym.cli.main import cli
from kansym.io.bundle import ModelBundle

stages_module = importlib.import_module("kansym.discover.stages")
symbolify_module = importlib.import_module("kansym.discover.stages")
run_module = importlib.import_module("kansym.discover.run")

OPTS = ["-t", "f", "--steps", "6", "--hidden", "2", "--grid-size", "4", "--finetune-steps", "1", "-q"]


def _csv(path, law, n=80, seed=0, names=("x1", "x2", "f")):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 2))
    f = law(x[:, 0], x[:, 1])
    path.write_text(",".join(names) + "\n" + "".join(f"{a:.17g},{b:.17g},{c:.17g}\n" for a, b, c in zip(x[:, 0], x[:, 1], f)))
    return path


def _same_state(a: ModelBundle, b: ModelBundle) -> bool:
    sa, sb = a.model.state_dict(), b.model.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


class _CtrlCAt:
    """Wrap ``module.name`` so that its ``at``-th call raises KeyboardInterrupt."""

    def __init__(self, monkeypatch, module, name, at=1):
        self.real, self.at, self.calls = getattr(module, name), at, 0
        monkeypatch.setattr(module, name, self)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.real(*args, **kwargs)


def _no_training(*args, **kwargs):
    raise AssertionError("a resumed run after the training must not train")


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGINT delivery to a child")
def test_sigint_in_the_per_edge_fits_then_the_printed_command_finishes_without_training(tmp_path,
                                                                                           sigint_as_at_a_terminal):
    # y = x0*x1, found exactly (by the direct search, verified against the KAN); 20 hidden nodes
    # and theta 0 keep 60 edges, seconds of per-edge fits: the signal lands there
    data = _csv(tmp_path / "d.csv", lambda a, b: a * b, n=600, names=("x0", "x1", "y"))
    out = tmp_path / "out"
    args = ["fit", str(data), "-t", "y", "-o", str(out), "--hidden", "20", "--theta", "0"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with sigint_as_at_a_terminal():
        proc = subprocess.Popen([sys.executable, "-m", "kansym", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
    watchdog = threading.Timer(600, proc.kill)  # a hung child fails the test instead of hanging it
    watchdog.start()
    lines = []
    try:
        for line in iter(proc.stderr.readline, ""):  # wait on the log, not on the clock
            lines.append(line)
            if line.startswith("edge "):  # the first per-edge fit: after training and pruning
                proc.send_signal(signal.SIGINT)
                break
        _, rest = proc.communicate(timeout=300)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    stderr = "".join(lines) + rest
    assert lines and lines[-1].startswith("edge "), stderr
    assert any(line.startswith("training a [2, 20, 1] KAN") for line in lines), stderr
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    ckpt = out / "interrupted.pt"
    match = re.search(r"^interrupted during the per-edge fits, after the training; saved a resumable checkpoint to "
                      r"(\S+) \(the trained model: --resume goes on from there, no training step runs again\); "
                      r"continue with: (.*)$", stderr, re.M)
    assert match and match.group(1) == str(ckpt), stderr
    command = shlex.split(match.group(2))
    assert command[:2] == ["kansym", "fit"] and command[-2:] == ["--resume", str(ckpt)]
    assert "--hidden" in command and "--theta" in command  # the options given are repeated
    saved = ModelBundle.load(ckpt)
    record = saved.meta["resume"]
    assert (record["stage"], record["run"], record["symbolic_stage"]) == ("symbolic", "main", "per-edge fits")
    assert saved.model.width == (2, 20, 1) and len(saved.meta["history"]["step"]) == 20  # the trained model
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["interrupted.pt"]

    resumed = subprocess.run([sys.executable, "-m", "kansym", *command[1:]], capture_output=True, text=True, env=env,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert "training a " not in resumed.stderr  # no training step runs again
    assert f"training: finished before the interruption (20 steps); the trained [2, 20, 1] KAN of {ckpt}" \
        in resumed.stderr
    assert f"removed {ckpt}: the run it saved has now finished" in resumed.stderr and not ckpt.exists()
    assert json.loads((out / "formula.json").read_text())["sympy"] == "x0*x1"

    # what an uninterrupted run with the same options writes, byte for byte
    straight = CliRunner().invoke(cli, ["fit", str(data), "-t", "y", "-o", str(tmp_path / "s"), "--hidden", "20",
                                        "--theta", "0", "-q"])
    assert straight.exit_code == 0, straight.output
    assert (out / "formula.json").read_bytes() == (tmp_path / "s" / "formula.json").read_bytes()
    for name in ("model.pt", "pruned.pt"):
        assert _same_state(ModelBundle.load(out / name), ModelBundle.load(tmp_path / "s" / name)), name


@pytest.mark.parametrize("module, name, stage", [
    (run_module, "prune_stage", "pruning"),
    (run_module, "finetune_stage", "fine-tuning"),
    (symbolify_module, "symbolify", "per-edge fits"),
    (symbolify_module, "simplify_edges", "Occam step"),
    (symbolify_module, "refine", "refinement"),
    (symbolify_module, "pareto_front", "verification"),
])
def test_ctrl_c_after_training_then_resume_gives_the_same_files_without_training(tmp_path, monkeypatch, module, name,
                                                                                   stage):
    # neither additive nor a product: the main stage only; --lib: no direct search
    data = _csv(tmp_path / "d.csv", lambda a, b: a * b + a)
    opts = [*OPTS, "--lib", "x,x^2,sin,exp"]
    runner = CliRunner()
    straight = runner.invoke(cli, ["fit", str(data), *opts, "-o", str(tmp_path / "s")])
    assert straight.exit_code == 0, straight.output

    ctrl_c = _CtrlCAt(monkeypatch, module, name)
    stopped = runner.invoke(cli, ["fit", str(data), *opts, "-o", str(tmp_path / "r")])
    monkeypatch.setattr(module, name, ctrl_c.real)
    assert stopped.exit_code == 130, stopped.output
    ckpt = tmp_path / "r" / "interrupted.pt"
    assert f"interrupted during the {stage}, after the training; saved a resumable checkpoint to {ckpt}" \
        in stopped.stderr
    saved = ModelBundle.load(ckpt)
    assert saved.meta["resume"]["stage"] == "symbolic" and saved.meta["resume"]["symbolic_stage"] == stage
    assert _same_state(saved, ModelBundle.load(tmp_path / "s" / "model.pt"))  # the trained model, as it was
    assert not (tmp_path / "r" / "formula.json").exists()

    monkeypatch.setattr(stages_module, "fit", _no_training)
    resumed = runner.invoke(cli, ["fit", str(data), *opts, "-o", str(tmp_path / "r"), "--resume", str(ckpt)])
    assert resumed.exit_code == 0, resumed.output
    assert not ckpt.exists()
    for out in ("formula.json", "formula.tex", "graph.json"):
        assert (tmp_path / "r" / out).read_bytes() == (tmp_path / "s" / out).read_bytes(), out
    for out in ("model.pt", "pruned.pt"):
        a, b = ModelBundle.load(tmp_path / "r" / out), ModelBundle.load(tmp_path / "s" / out)
        assert _same_state(a, b) and "resume" not in a.meta, out


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGTERM")
def test_a_real_sigterm_in_the_occam_step_saves_the_trained_model_and_exits_143(tmp_path, monkeypatch):
    data = _csv(tmp_path / "d.csv", lambda a, b: a * b + a)
    real = symbolify_module.simplify_edges

    def sigterm(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # kansym fit's own handler (stop_on_sigterm) makes it the interrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(symbolify_module, "simplify_edges", sigterm)
    stopped = CliRunner().invoke(cli, ["fit", str(data), *OPTS, "--lib", "x,x^2,sin,exp", "-o", str(tmp_path / "r")])
    assert stopped.exit_code == 143, stopped.output
    assert "terminated (SIGTERM) during the Occam step, after the training; saved a resumable checkpoint to " \
           f"{tmp_path / 'r' / 'interrupted.pt'}" in stopped.stderr
    assert ModelBundle.load(tmp_path / "r" / "interrupted.pt").meta["resume"]["symbolic_stage"] == "Occam step"


def test_ctrl_c_in_the_hidden_layer_kan_after_the_shortcut_keeps_both_trainings(tmp_path, monkeypatch):
    # additive, but --lib lacks sin: the shortcut's formula falls short and the [2, 2, 1] KAN follows
    data = _csv(tmp_path / "d.csv", lambda a, b: np.sin(np.pi * a) + b ** 2)
    opts = [*OPTS, "--lib", "x,x^2,exp"]
    runner = CliRunner()
    straight = runner.invoke(cli, ["fit", str(data), *[o for o in opts if o != "-q"], "-o", str(tmp_path / "s")])
    assert straight.exit_code == 0 and "training the hidden layer too" in straight.stderr, straight.output

    ctrl_c = _CtrlCAt(monkeypatch, symbolify_module, "symbolify", at=2)  # the second KAN's per-edge fits
    stopped = runner.invoke(cli, ["fit", str(data), *opts, "-o", str(tmp_path / "r")])
    monkeypatch.setattr(symbolify_module, "symbolify", ctrl_c.real)
    assert stopped.exit_code == 130, stopped.output
    record = ModelBundle.load(tmp_path / "r" / "interrupted.pt").meta["resume"]
    assert (record["stage"], record["run"]) == ("symbolic", "main") and "shortcut" in record

    monkeypatch.setattr(stages_module, "fit", _no_training)  # neither KAN trains again
    resumed = runner.invoke(cli, ["fit", str(data), *opts, "-o", str(tmp_path / "r"), "--resume",
                                  str(tmp_path / "r" / "interrupted.pt")])
    assert resumed.exit_code == 0, resumed.output
    assert (tmp_path / "r" / "formula.json").read_bytes() == (tmp_path / "s" / "formula.json").read_bytes()


def test_resuming_after_training_refuses_other_data_and_other_training_options(tmp_path, monkeypatch):
    data = _csv(tmp_path / "d.csv", lambda a, b: a * b + a)
    opts = [*OPTS, "--lib", "x,x^2,sin,exp"]
    runner = CliRunner()
    ctrl_c = _CtrlCAt(monkeypatch, symbolify_module, "refine")
    assert runner.invoke(cli, ["fit", str(data), *opts, "-o", str(tmp_path / "r")]).exit_code == 130
    monkeypatch.setattr(symbolify_module, "refine", ctrl_c.real)
    ckpt = str(tmp_path / "r" / "interrupted.pt")
    other = _csv(tmp_path / "other.csv", lambda a, b: a * b + a, seed=1)
    for args, message in [
        ([str(other), *opts], "the data differ"),
        ([str(data), *opts, "--steps", "9"], "cannot resume with --steps 9: the run was started with 6"),
        ([str(data), *opts, "--lamb", "0.5"], "cannot resume with --lamb 0.5"),
        ([str(data), *opts, "--inputs", "x2"], "give the same columns"),
    ]:
        bad = runner.invoke(cli, ["fit", *args, "-o", str(tmp_path / "r"), "--resume", ckpt])
        assert bad.exit_code == 2 and message in bad.stderr, (args, bad.output)
        assert len(bad.stderr.strip().splitlines()) == 1 and bad.stderr.startswith("error: ")
    assert (tmp_path / "r" / "interrupted.pt").exists()  # kept for the right command


def test_ctrl_c_before_the_training_says_nothing_was_written(tmp_path, monkeypatch):
    data = _csv(tmp_path / "d.csv", lambda a, b: a * b + a)
    _CtrlCAt(monkeypatch, run_module, "direct_search")  # the direct search runs before the KAN
    stopped = CliRunner().invoke(cli, ["fit", str(data), "-t", "f", "-o", str(tmp_path / "r")])
    assert stopped.exit_code == 130, stopped.output
    assert stopped.stderr.strip().splitlines()[-1] == ("interrupted during the direct search, before the KAN's "
                                                       "training; nothing was written (run the command again)")
    assert not (tmp_path / "r").exists()


def test_an_interrupted_bundle_without_a_resume_record_is_not_called_resumable(tmp_path, kan_checkpoint, capsys):
    # e.g. the short KAN of the input screening: a model, but no run to continue
    from kansym.cli.run import save_interrupted
    from kansym.discover.result import RunInterrupted

    stop = RunInterrupted("interrupted", bundle=ModelBundle.load(kan_checkpoint), stage="input screening")
    exit_ = save_interrupted(stop, tmp_path / "interrupted.pt", force=False, protect=[], command="kansym fit ...")
    assert exit_.exit_code == 130 and not (tmp_path / "interrupted.pt").exists()
    assert capsys.readouterr().err.strip() == ("interrupted during the input screening, before the KAN's training; "
                                               "nothing was written (run the command again)")
