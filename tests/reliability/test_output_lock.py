"""Two runs into one output at once: one runs, the other refuses at once (issue 17).

``kansym fit -o DIR`` holds an exclusive flock on ``DIR/.kansym-lock`` and ``kansym train -o
FILE`` one on ``.FILE.lock`` beside it, from before their first write to their last
(kansym.cli.lock); the second run says who holds it and exits 2 without writing.
"""

import os
import subprocess
import sys

import numpy as np

from kansym.io.bundle import ModelBundle


def _csv(path, seed):
    """``y = x1 x2 + sin(2 x3)`` on 120 rows drawn with ``seed`` (a few seconds of fit, no direct search)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (120, 3))
    y = x[:, 0] * x[:, 1] + np.sin(2 * x[:, 2])
    path.write_text("x1,x2,x3,y\n" + "".join(",".join(f"{v:.17g}" for v in row) + "\n" for row in np.c_[x, y]))
    return path


def _rows(path):
    return {tuple(r) for r in np.loadtxt(path, delimiter=",", skiprows=1)[:, :3]}


def _race(commands):
    """Start the commands together; (return codes, stderrs, pids)."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    outs = [p.communicate(timeout=300) for p in procs]
    return [p.returncode for p in procs], [e for _, e in outs], [p.pid for p in procs]


def _refusal(codes, errs, pids, what):
    assert sorted(codes) == [0, 2], (codes, errs)
    win, lose = codes.index(0), codes.index(2)
    lines = errs[lose].strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in errs[lose], errs[lose]
    assert lines[0].startswith(f"error: {what} is being written by another kansym run (PID {pids[win]}: kansym "), lines
    assert lines[0].endswith("; wait for it to finish or choose another -o"), lines
    return win


def test_two_fits_into_one_directory_at_once_one_refuses_and_the_files_are_the_winners(tmp_path):
    data = [_csv(tmp_path / "a.csv", 1), _csv(tmp_path / "b.csv", 2)]
    out = tmp_path / "out"
    codes, errs, pids = _race([[sys.executable, "-m", "kansym", "fit", str(d), "-t", "y", "-o", str(out),
                                "--steps", "300", "-q"] for d in data])
    win = _refusal(codes, errs, pids, out)
    assert f"-o {out}" in errs[1 - win] and str(data[win]) in errs[1 - win]  # the holder's command
    from kansym.discover.record import read_record

    assert read_record(out / "formula.json").data["data"] == str(data[win])
    for name in ("model.pt", "pruned.pt"):  # whole, and trained on the winner's rows
        x_cal = {tuple(r) for r in ModelBundle.load(out / name).x_cal}
        assert x_cal <= _rows(data[win]) and not x_cal & _rows(data[1 - win]), name
    assert sorted(os.listdir(out)) == [".kansym-output", "formula.json", "formula.tex", "graph.json", "model.pt",
                                       "pruned.pt"]  # no lock file, no temp file left


def test_two_trainings_into_one_checkpoint_at_once_one_refuses(tmp_path):
    data = [_csv(tmp_path / "a.csv", 1), _csv(tmp_path / "b.csv", 2)]
    out = tmp_path / "m.pt"
    codes, errs, pids = _race([[sys.executable, "-m", "kansym", "train", str(d), "-t", "y", "-o", str(out),
                                "--steps", "400", "-q"] for d in data])
    win = _refusal(codes, errs, pids, out)
    x_cal = {tuple(r) for r in ModelBundle.load(out).x_cal}
    assert x_cal <= _rows(data[win]) and not x_cal & _rows(data[1 - win])
    assert sorted(os.listdir(tmp_path)) == ["a.csv", "b.csv", "m.pt"]


def test_a_lock_left_by_a_killed_run_does_not_block(tmp_path):
    """SIGKILL cannot remove the lock file, but the kernel drops the flock with the process."""
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from kansym.cli.lock import output_lock, dir_lock_path\n"
        f"out = Path({str(out)!r})\n"
        "with output_lock(dir_lock_path(out), out, '-o'):\n"
        "    print('locked', flush=True); time.sleep(600)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        from click.testing import CliRunner

        from kansym.cli.main import cli

        data = tmp_path / "d.csv"
        data.write_text("x,y\n" + "".join(f"{i},{2 * i}\n" for i in range(12)))
        busy = CliRunner().invoke(cli, ["fit", str(data), "-t", "y", "-o", str(out), "-q"])
        assert busy.exit_code == 2 and f"(PID {holder.pid}: " in busy.stderr, busy.output
    finally:
        holder.kill()
        holder.wait()
    assert (out / ".kansym-lock").exists()  # left behind by the killed holder
    done = CliRunner().invoke(cli, ["fit", str(data), "-t", "y", "-o", str(out), "-q"])
    assert done.exit_code == 0, done.output
    assert not (out / ".kansym-lock").exists()
