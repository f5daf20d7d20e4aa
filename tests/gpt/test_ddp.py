"""Data-parallel training: two CPU processes under torchrun with the gloo backend."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kansym.io.checkpoint import load_checkpoint

TORCHRUN = Path(sys.executable).with_name("torchrun")


@pytest.mark.slow
@pytest.mark.skipif(not TORCHRUN.exists() and shutil.which("torchrun") is None, reason="torchrun not installed")
@pytest.mark.parametrize("ffn", ["mlp,kan", "swiglu,grkan"])
def test_two_process_gloo_run(text_file, tmp_path, ffn):
    out = tmp_path / "run"
    exe = str(TORCHRUN) if TORCHRUN.exists() else shutil.which("torchrun")
    cmd = [exe, "--standalone", "--nproc_per_node", "2", "-m", "kansym", "gpt", "train", "--text", str(text_file),
           "--ffn", ffn, "--n-layer", "2", "--n-head", "2", "--n-embd", "16", "--block-size", "8",
           "--batch-size", "4", "--max-iters", "6", "--eval-interval", "3", "--eval-iters", "2", "-o", str(out), "-q"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = load_checkpoint(out / "last.pt", kind="kan-gpt")["train"]
    assert state["world_size"] == 2
    assert state["tokens"] == 6 * 4 * 8 * 2  # both processes' batches count
    assert len(state["rng"]["data"]) == 2  # each process's data order is saved for resume
    assert len((out / "log.jsonl").read_text().splitlines()) == 2
