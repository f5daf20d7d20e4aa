"""Shared fixtures of the KAN-GPT tests: one thread, tiny configs, a small text."""

import pytest
import torch

from kansym.gpt.config import GPTTrainConfig, KANGPTConfig

TEXT = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
    "All:\nSpeak, speak.\n\nFirst Citizen:\nYou are all resolved rather to die than to famish?\n"
) * 20


@pytest.fixture(autouse=True)
def one_thread():
    # The CI machines are shared; several threads spin against each other on tiny ops.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture()
def text_file(tmp_path):
    path = tmp_path / "input.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def tiny_config(**changes) -> KANGPTConfig:
    base = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16, ffn="kan", kan_grid_size=3)
    base.update(changes)
    return KANGPTConfig(**base)


def tiny_train(**changes) -> GPTTrainConfig:
    base = dict(max_iters=20, batch_size=4, eval_interval=10, eval_iters=2, warmup_iters=2, lr=3e-3)
    base.update(changes)
    return GPTTrainConfig(**base)
