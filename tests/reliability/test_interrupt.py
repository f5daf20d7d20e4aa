"""Ctrl-C during `kansym train` / `kansym fit` saves a resumable checkpoint; --resume finishes the same run.

The `train` case sends a real SIGINT to a `python -m kansym` subprocess; `fit` injects the
KeyboardInterrupt in-process (the same exception a SIGINT raises) to keep the suite fast.
A Ctrl-C after the training of `kansym fit` is tested in test_interrupt_symbolic.py.
"""

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from kansym.cli.main import cli
from kansym.io.bundle import ModelBundle

fit_module = importlib.import_module("kansym.train.fit")


def _csv(path, n=300, seed=0, additive: bool | None = False):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 2))
    f = np.sin(np.pi * x[:, 0]) + x[:, 1] ** 2 if additive else np.exp(np.sin(np.pi * x[:, 0]) + x[:, 1] ** 2)
    if additive is None:  # neither additive nor a product: discover runs only its main stage
        f = x[:, 0] * x[:, 1] + x[:, 0]
    path.write_text("x1,x2,f\n" + "".join(f"{a:.17g},{b:.17g},{c:.17g}\n" for a, b, c in zip(x[:, 0], x[:, 1], f)))
    return path


def _same_state(a: ModelBundle, b: ModelBundle):
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert sa.keys() == sb.keys()
    return all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGINT delivery to a child")
def test_sigint_during_train_saves_a_checkpoint_that_resumes_to_the_same_model(tmp_path, sigint_as_at_a_terminal):
    data = _csv(tmp_path / "d.csv")
    before = data.read_bytes()
    out = tmp_path / "m.pt"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with sigint_as_at_a_terminal():
        proc = subprocess.Popen(
            [sys.executable, "-m", "kansym", "train", str(data), "-t", "f", "-o", str(out), "--steps", "1000000",
             "--hidden", "3"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
    try:
        # a million steps: far more than 3 s even on a fast machine, so the signal lands in training
        note = proc.stderr.readline()
        assert note.rstrip() == "Ctrl-C saves a resumable checkpoint", note  # the child handles SIGINT
        line = proc.stderr.readline()  # the training stage's line comes right before its loop
        assert line.startswith("training a [2, 3, 1] KAN") and "for 1000000 steps" in line, line
        time.sleep(3.0)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    ckpt = tmp_path / "m.interrupted.pt"
    match = re.search(r"interrupted after (\d+) of 1000000 steps; saved a resumable checkpoint to (\S+); continue with: (.*)$",
                      stderr.strip())
    assert match and match.group(2) == str(ckpt), stderr
    assert "--resume" in match.group(3) and str(ckpt) in match.group(3)
    assert not out.exists() and data.read_bytes() == before
    done = int(match.group(1))
    partial = ModelBundle.load(ckpt)
    assert partial.meta["resume"]["fit_state"]["step"] == done and len(partial.meta["history"]["step"]) == done
    assert 0 <= done < 1000000  # 0 on a very slow machine (Ctrl-C before the first step ended)

    # resume (to a few steps past the interruption) == an uninterrupted run of as many steps
    steps = str(done + 3)
    runner = CliRunner()
    resumed = runner.invoke(cli, ["train", str(data), "-t", "f", "-o", str(tmp_path / "r.pt"), "--resume", str(ckpt),
                                  "--steps", steps, "-q"])
    assert resumed.exit_code == 0, resumed.output
    straight = runner.invoke(cli, ["train", str(data), "-t", "f", "-o", str(tmp_path / "s.pt"), "--hidden", "3",
                                   "--steps", steps, "-q"])
    assert straight.exit_code == 0, straight.output
    a, b = ModelBundle.load(tmp_path / "r.pt"), ModelBundle.load(tmp_path / "s.pt")
    assert _same_state(a, b)
    assert a.meta["history"] == b.meta["history"]
    assert "resume" not in a.meta  # a finished model, no longer resumable


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGTERM delivery to a child")
def test_sigterm_during_train_saves_a_checkpoint_and_the_finished_resume_removes_it(tmp_path):
    data = _csv(tmp_path / "d.csv")
    out = tmp_path / "m.pt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kansym", "train", str(data), "-t", "f", "-o", str(out), "--steps", "1000000",
         "--hidden", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        proc.stderr.readline()  # what Ctrl-C does
        assert proc.stderr.readline().startswith("training a [2, 3, 1] KAN")  # right before the training loop
        time.sleep(2.0)
        proc.send_signal(signal.SIGTERM)  # kill, or a batch scheduler at its time limit
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr  # 128 + SIGTERM
    ckpt = tmp_path / "m.interrupted.pt"
    match = re.search(r"terminated \(SIGTERM\) after (\d+) of 1000000 steps; saved a resumable checkpoint to (\S+);",
                      stderr)
    assert match and match.group(2) == str(ckpt) and "Traceback" not in stderr, stderr
    assert not out.exists()
    done = int(match.group(1))
    # resuming into the same output finishes the run and removes the checkpoint kansym wrote for it
    resumed = CliRunner().invoke(cli, ["train", str(data), "-t", "f", "-o", str(out), "--resume", str(ckpt),
                                       "--steps", str(done + 2)])
    assert resumed.exit_code == 0, resumed.output
    assert out.exists() and not ckpt.exists()
    assert f"removed {ckpt}: the run it saved has now finished" in resumed.stderr
    assert len(ModelBundle.load(out).meta["history"]["step"]) == done + 2


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signal dispositions")
def test_train_started_with_sigint_ignored_says_ctrl_c_cannot_stop_it(tmp_path):
    # what the `kansym train` child of a backgrounded pytest inherited; it must not promise a checkpoint
    data = _csv(tmp_path / "d.csv", n=40)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        result = CliRunner().invoke(cli, ["train", str(data), "-t", "f", "-o", str(tmp_path / "m.pt"), "--steps", "1",
                                          "--hidden", "2", "--grid-size", "3"])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.exit_code == 0, result.output
    announcement, training = result.stderr.splitlines()[:2]
    assert announcement.startswith("SIGINT is ignored or blocked in this process"), announcement
    assert training.startswith("training a [2, 2, 1] KAN") and training.endswith("on 40 rows for 1 steps"), training
    assert "Ctrl-C saves" not in result.stderr


class _CtrlC:
    def __init__(self, at):
        self.at, self.calls, self.real = at, 0, fit_module._objective

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.real(*args, **kwargs)


@pytest.mark.parametrize("additive, stage", [(None, "main"), (True, "shortcut")])
def test_ctrl_c_during_fit_then_resume_gives_the_same_formula(tmp_path, monkeypatch, additive, stage):
    # an additive law is first tried without a hidden layer (discover's shortcut stage)
    data = _csv(tmp_path / "d.csv", n=80, additive=additive)
    opts = ["-t", "f", "--steps", "6", "--hidden", "2", "--grid-size", "4", "--finetune-steps", "1", "--lib", "x,x^2,sin,exp", "-q"]
    runner = CliRunner()
    straight = runner.invoke(cli, ["fit", str(data), *opts, "-o", str(tmp_path / "s")])
    assert straight.exit_code == 0, straight.output

    monkeypatch.setattr(fit_module, "_objective", _CtrlC(at=60))  # inside a step of the first fit
    stopped = runner.invoke(cli, ["fit", str(data), *opts, "-o", str(tmp_path / "r")])
    monkeypatch.setattr(fit_module, "_objective", fit_module._objective.real)
    assert stopped.exit_code == 130, stopped.output
    ckpt = tmp_path / "r" / "interrupted.pt"
    assert f"saved a resumable checkpoint to {ckpt}" in stopped.stderr
    assert not (tmp_path / "r" / "model.pt").exists()
    saved = ModelBundle.load(ckpt).meta["resume"]
    done = saved["fit_state"]["step"]
    assert saved["stage"] == stage
    assert 1 <= done < 6

    # options that shape training cannot change on resume
    bad = runner.invoke(cli, ["fit", str(data), *opts, "--lamb", "0.5", "-o", str(tmp_path / "r"), "--resume", str(ckpt)])
    assert bad.exit_code == 2 and "cannot resume with --lamb 0.5" in bad.stderr, bad.output
    other = tmp_path / "other.csv"
    _csv(other, n=80, seed=1, additive=additive)
    bad = runner.invoke(cli, ["fit", str(other), *opts, "-o", str(tmp_path / "r"), "--resume", str(ckpt)])
    assert bad.exit_code == 2 and "data differ" in bad.stderr, bad.output

    resumed = runner.invoke(cli, ["fit", str(data), *opts, "-o", str(tmp_path / "r"), "--resume", str(ckpt)])
    assert resumed.exit_code == 0, resumed.output
    for name in ("model.pt", "pruned.pt"):  # what resuming guarantees: the very same models
        assert _same_state(ModelBundle.load(tmp_path / "r" / name), ModelBundle.load(tmp_path / "s" / name)), name
    a = json.loads((tmp_path / "r" / "formula.json").read_text())
    b = json.loads((tmp_path / "s" / "formula.json").read_text())
    assert a["edges"] == b["edges"]  # the same primitive and constants on every edge
    # the same record, exactly: no budget of the symbolic stages reads a clock (issue 17)
    assert a == b
