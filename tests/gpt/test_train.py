"""Training: learning works, the schedule, logs and checkpoints, resume continues the same curve."""

import json
import math

import pytest
import torch

from kansym.errors import CheckpointError, ConfigError
from kansym.gpt.checkpoint import load_gpt
from kansym.gpt.config import GPTTrainConfig
from kansym.gpt.train import lr_at, train
from kansym.io.checkpoint import load_checkpoint

from .conftest import tiny_config, tiny_train


@pytest.mark.parametrize("ffn", ["mlp,kan", "swiglu", "grkan"])
def test_resume_continues_the_same_curve(text_file, tmp_path, ffn):
    # dropout and sparsification on, so the RNG states and the penalty are exercised too
    model = tiny_config(ffn=ffn, dropout=0.1)
    config = tiny_train(dtype="float64", lr_decay_iters=20, lamb=1e-3, eval_interval=5)
    straight = train(model, config, text_file, tmp_path / "a")
    train(model, config.replace(max_iters=10), text_file, tmp_path / "b")
    resumed = train(None, config, text_file, tmp_path / "b", resume=True)
    assert resumed.iter == straight.iter == 20
    assert abs(resumed.last_val_loss - straight.last_val_loss) < 1e-6
    assert [r["val_loss"] for r in resumed.history] == pytest.approx([r["val_loss"] for r in straight.history], abs=1e-6)
    a = load_gpt(tmp_path / "a" / "last.pt").model.state_dict()
    b = load_gpt(tmp_path / "b" / "last.pt").model.state_dict()
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-6
    rows = [json.loads(line) for line in (tmp_path / "b" / "log.jsonl").read_text().splitlines()]
    assert [r["iter"] for r in rows] == [5, 10, 15, 20]


@pytest.mark.parametrize("ffn", ["kan", "swiglu", "grkan"])
def test_learns_and_writes_run_files(text_file, tmp_path, ffn):
    result = train(tiny_config(ffn=ffn), tiny_train(max_iters=60, eval_interval=30), text_file, tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["iter"] for r in rows] == [30, 60]
    assert set(rows[0]) >= {"iter", "train_loss", "val_loss", "elapsed_s", "tokens_per_s"}
    vocab = len(load_checkpoint(tmp_path / "run" / "last.pt")["vocab"]["chars"])
    assert rows[-1]["val_loss"] < math.log(vocab) - 0.5  # well below chance on a repetitive text
    assert result.best_val_loss == min(r["val_loss"] for r in rows)
    best = load_checkpoint(tmp_path / "run" / "best.pt", kind="kan-gpt")
    assert "optimizer" not in best["train"] and best["vocab"]["chars"]
    last = load_checkpoint(tmp_path / "run" / "last.pt", kind="kan-gpt")
    assert last["train"]["iter"] == 60 and "optimizer" in last["train"]


def test_lr_schedule():
    config = GPTTrainConfig(max_iters=100, lr=1.0, warmup_iters=10)
    assert lr_at(0, config) == pytest.approx(1 / 11)
    assert lr_at(10, config) == pytest.approx(1.0)
    assert lr_at(55, config) == pytest.approx(0.55)
    assert lr_at(100, config) == pytest.approx(0.1)
    assert lr_at(500, config) == pytest.approx(0.1)


def test_run_protection_and_resume_checks(text_file, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(CheckpointError, match="does not exist"):
        train(None, None, text_file, out, resume=True)
    train(tiny_config(), tiny_train(max_iters=10), text_file, out)
    with pytest.raises(ConfigError, match="already holds a run"):
        train(tiny_config(), tiny_train(max_iters=10), text_file, out)
    with pytest.raises(ConfigError, match="lr"):
        train(None, tiny_train(max_iters=10, lr=1e-2), text_file, out, resume=True)
    with pytest.raises(ConfigError, match="architecture"):
        train(tiny_config(n_embd=32), None, text_file, out, resume=True)
    other = tmp_path / "other.txt"
    other.write_text(text_file.read_text() + "!")
    with pytest.raises(Exception, match="vocabulary|not the text"):
        train(None, None, other, out, resume=True)


def test_caller_rng_untouched(text_file, tmp_path):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    train(tiny_config(dropout=0.1), tiny_train(max_iters=4, eval_interval=4), text_file, tmp_path / "r")
    assert torch.equal(torch.rand(3), expected)
