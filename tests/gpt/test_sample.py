"""Sampling: reproducible by seed, greedy and top-k behave, vocabulary checked."""

import pytest
import torch

from kansym.errors import ConfigError, DataError
from kansym.gpt.data import CharVocab
from kansym.gpt.model import KANGPT
from kansym.gpt.sample import generate, sample_text

from .conftest import tiny_config

VOCAB = CharVocab(tuple("\nabcdefghij"))


@pytest.fixture(params=["mlp,kan", "swiglu", "grkan"])
def model(request):
    return KANGPT(tiny_config(ffn=request.param))


def test_same_seed_same_text(model):
    a = sample_text(model, VOCAB, "abc", 30, seed=7)
    b = sample_text(model, VOCAB, "abc", 30, seed=7)
    c = sample_text(model, VOCAB, "abc", 30, seed=8)
    assert a == b and a != c
    assert a.startswith("abc") and len(a) == 33


def test_greedy_equals_top_1(model):
    idx = torch.tensor([[1, 2, 3]])
    greedy = generate(model, idx, 12, temperature=0)
    top1 = generate(model, idx, 12, top_k=1, generator=torch.Generator().manual_seed(0))
    assert torch.equal(greedy, top1)
    assert greedy.shape == (1, 15)  # longer than block_size 8: the context is cropped


def test_top_k_restricts_choices(model):
    idx = torch.zeros(200, 1, dtype=torch.long)
    logits, _ = model(idx[:1])
    allowed = set(torch.topk(logits[0, -1], 3).indices.tolist())
    out = generate(model, idx, 1, top_k=3, generator=torch.Generator().manual_seed(0))
    assert set(out[:, -1].tolist()) <= allowed


def test_bad_options(model):
    with pytest.raises(ConfigError):
        sample_text(model, VOCAB, "a", 5, temperature=-1)
    with pytest.raises(ConfigError):
        sample_text(model, VOCAB, "a", 5, top_k=0)
    with pytest.raises(DataError, match="'Z'"):
        sample_text(model, VOCAB, "Z", 5)


def test_prompt_outside_the_vocabulary_names_the_characters_and_the_prompt(model):
    with pytest.raises(DataError, match=r"the prompt has 'Y', 'Z', not in the model's vocabulary"):
        sample_text(model, VOCAB, "aZbY", 5)


def test_cli_default_prompt_works_for_a_text_without_newline(tmp_path):
    from click.testing import CliRunner

    from kansym.cli.main import cli

    text = tmp_path / "t.txt"
    text.write_text("abcab cabba " * 300, encoding="utf-8")  # no newline anywhere
    runner = CliRunner()
    done = runner.invoke(cli, ["gpt", "train", "--text", str(text), "-o", str(tmp_path / "run"), "--max-iters", "2",
                               "--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "8",
                               "--eval-interval", "1", "--eval-iters", "1", "--quiet"])
    assert done.exit_code == 0, done.output
    sampled = runner.invoke(cli, ["gpt", "sample", str(tmp_path / "run" / "best.pt"), "--tokens", "10"])
    assert sampled.exit_code == 0, sampled.output
    assert len(sampled.output.strip()) >= 10 and set(sampled.output.strip()) <= set("abc ")
    bad = runner.invoke(cli, ["gpt", "sample", str(tmp_path / "run" / "best.pt"), "--prompt", "xyz"])
    assert bad.exit_code == 2 and "the prompt has 'x', 'y', 'z'" in bad.output
