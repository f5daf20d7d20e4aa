"""Node pruning of KAN FFN hidden units: smaller, equal to the masked model, still samples."""

import pytest
import torch

from kansym.errors import ConfigError
from kansym.gpt.checkpoint import load_gpt, save_gpt
from kansym.gpt.data import CharVocab
from kansym.gpt.model import KANGPT
from kansym.gpt.prune import node_scores, prune_gpt
from kansym.gpt.sample import sample_text
from kansym.nn.bases import BASES

from .conftest import tiny_config


def weaken(model, layer, units):
    """Make hidden units negligible, as sparsification would."""
    ffn = model.blocks[layer].ffn
    with torch.no_grad():
        for part, sl in ((ffn.fc, (units, slice(None))), (ffn.proj, (slice(None), units))):
            part.scale_base[sl] *= 1e-4
            part.scale_sp[sl] *= 1e-4


@pytest.mark.parametrize("basis", BASES)
def test_prune_shrinks_and_equals_masked_model(basis):
    model = KANGPT(tiny_config(ffn="mlp,kan-residual", kan_basis=basis, kan_hidden=6)).double().eval()
    weaken(model, 1, [0, 2, 5])
    incoming, outgoing = node_scores(model.blocks[1].ffn)
    assert incoming.shape == outgoing.shape == (6,)
    result = prune_gpt(model, theta=1e-3)
    assert result.kept == {1: [1, 3, 4]}
    assert result.model.config.kan_hidden == (0, 3)
    assert result.report["removed_fraction"] == pytest.approx(0.5)
    assert result.report["params_after"] < result.report["params_before"]
    assert result.model.blocks[1].ffn.fc.coef.shape[0] == 3
    masked = KANGPT.from_state(model.state()).eval()
    with torch.no_grad():
        masked.blocks[1].ffn.fc.mask[[0, 2, 5], :] = 0
        masked.blocks[1].ffn.proj.mask[:, [0, 2, 5]] = 0
    idx = torch.randint(11, (2, 8))
    torch.testing.assert_close(result.model(idx)[0], masked(idx)[0])
    assert model.config.kan_hidden == (0, 6)  # the input is untouched


def test_pruned_checkpoint_loads_and_samples(tmp_path):
    model = KANGPT(tiny_config(kan_hidden=5))
    weaken(model, 0, [1, 2])
    vocab = CharVocab(tuple("\nabcdefghij"))
    result = prune_gpt(model, theta=1e-3)
    save_gpt(tmp_path / "p.pt", result.model, vocab, prune=result.report)
    loaded = load_gpt(tmp_path / "p.pt")
    assert loaded.model.config.kan_hidden == (3, 5)
    text = sample_text(loaded.model, loaded.vocab, "ab", 20, seed=0)
    assert len(text) == 22 and set(text) <= set(vocab.chars)


def test_keeps_at_least_one_unit_and_checks_input():
    model = KANGPT(tiny_config(kan_hidden=4))
    assert prune_gpt(model, theta=1e6).model.config.kan_hidden == (1, 1)
    with pytest.raises(ConfigError, match="theta"):
        prune_gpt(model, theta=0)
    with pytest.raises(ConfigError, match="no KAN"):
        prune_gpt(KANGPT(tiny_config(ffn="mlp")), theta=0.1)
