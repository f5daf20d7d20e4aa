"""A SIGKILL in the middle of a checkpoint write never leaves a torn or missing file."""

import os
import random
import signal
import sys
import time

import pytest
import torch

from kansym.io.checkpoint import load_checkpoint, save_checkpoint


@pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "fork"), reason="needs fork and SIGKILL")
def test_sigkill_during_save_keeps_a_complete_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    big = {"kind": "kan", "weights": torch.arange(2_000_000, dtype=torch.float64), "gen": 0}
    save_checkpoint(big, path)
    rng = random.Random(0)
    for trial in range(20):
        pid = os.fork()
        if pid == 0:  # child: rewrite the checkpoint forever, each generation tagged
            try:
                gen = 1
                while True:
                    save_checkpoint({**big, "gen": gen}, path)
                    gen += 1
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        data = load_checkpoint(path, kind="kan")  # complete and loadable, an old or new generation
        assert torch.equal(data["weights"], big["weights"]), trial
        assert isinstance(data["gen"], int)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "ckpt.pt"]
    assert all(name.endswith(".tmp") for name in leftovers)  # only abandoned temp files, never a torn target
