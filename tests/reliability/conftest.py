"""Shared pieces of the reliability tests: one thread, tiny valid checkpoints, a one-line-error check."""

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _write_csv(path, n=40, seed=0):
    """A small table ``x1, x2, y`` with ``y = 2 x1 - x2`` (quick to train on)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 2))
    y = 2 * x[:, 0] - x[:, 1]
    path.write_text("x1,x2,y\n" + "".join(f"{a:.17g},{b:.17g},{c:.17g}\n" for a, b, c in zip(x[:, 0], x[:, 1], y)))
    return path


def _one_line_error(result, needle=""):
    """A CliRunner result that is exit 2 with exactly one ``error: ...`` line on stderr, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(scope="session")
def kan_checkpoint(tmp_path_factory):
    """A tiny trained KAN checkpoint (through `kansym train`)."""
    from click.testing import CliRunner

    from kansym.cli.main import cli

    d = tmp_path_factory.mktemp("kan")
    data = _write_csv(d / "d.csv")
    out = d / "m.pt"
    result = CliRunner().invoke(cli, ["train", str(data), "-t", "y", "-o", str(out), "--steps", "2", "--hidden", "2",
                                      "--grid-size", "3", "-q"])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def gpt_checkpoint(tmp_path_factory):
    """A tiny (untrained) KAN-GPT checkpoint written by kansym's own saver."""
    from kansym.gpt.checkpoint import save_gpt
    from kansym.gpt.config import KANGPTConfig
    from kansym.gpt.data import CharVocab
    from kansym.gpt.model import KANGPT

    vocab = CharVocab.from_text("abcdefghij \n")
    cfg = KANGPTConfig(vocab_size=vocab.size, block_size=8, n_layer=2, n_head=2, n_embd=16, ffn="kan", kan_grid_size=3)
    path = tmp_path_factory.mktemp("gpt") / "g.pt"
    save_gpt(path, KANGPT(cfg), vocab)
    return path


@pytest.fixture(scope="session")
def write_csv():
    """``write_csv(path, n=40, seed=0)``: a small table ``x1, x2, y`` with ``y = 2 x1 - x2``."""
    return _write_csv


@pytest.fixture(scope="session")
def one_line_error():
    """``one_line_error(result, needle)``: assert exit 2 and one ``error: ...`` line holding ``needle``."""
    return _one_line_error
