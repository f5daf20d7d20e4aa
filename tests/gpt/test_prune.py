"""Node pruning of KAN FFN hidden units: smaller, equal to the masked model, still samples."""

import pytest
import torch

from kansym.errors import ConfigError
from kansym.gpt.checkpoint import load_gpt, save_gpt
from kansym.gpt.data import CharVocab
from kansym.gpt.model import KANGPT
from kansym.gpt.prune import ffn_inputs, node_scores, output_scores, prune_gpt, unit_strengths
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


def test_ffn_inputs_are_the_ln2_outputs():
    model = KANGPT(tiny_config(ffn="kan,mlp")).double().eval()
    idx = torch.randint(11, (3, 8))
    inputs = ffn_inputs(model, idx)
    assert set(inputs) == {0}
    got = {}
    handle = model.blocks[0].ln_2.register_forward_hook(lambda m, a, out: got.setdefault("x", out))
    with torch.no_grad():
        model(idx)
    handle.remove()
    torch.testing.assert_close(inputs[0], got["x"].reshape(-1, 16))


@pytest.mark.parametrize("basis", BASES)
def test_sample_scores_are_mean_abs_edge_outputs(basis):
    model = KANGPT(tiny_config(kan_basis=basis, kan_hidden=5)).double().eval()
    idx = torch.randint(11, (3, 8))
    ffn = model.blocks[1].ffn
    x = ffn_inputs(model, idx)[1]  # (24, 16)
    incoming, outgoing = node_scores(ffn, x, chunk=7)  # chunks that do not divide 24
    with torch.no_grad():
        e_fc = ffn.fc.edge_outputs(x).abs().mean(0)  # (5, 16)
        e_proj = ffn.proj.edge_outputs(ffn.fc(x)).abs().mean(0)  # (16, 5)
    torch.testing.assert_close(incoming, e_fc.amax(1))
    torch.testing.assert_close(outgoing, e_proj.amax(0))
    # an edge's sampled output is its forward contribution: the edges of a unit sum to it
    with torch.no_grad():
        torch.testing.assert_close(ffn.fc.edge_outputs(x).sum(-1), ffn.fc(x))


def test_sample_and_relative_pruning():
    model = KANGPT(tiny_config(kan_hidden=6)).double().eval()
    weaken(model, 0, [1, 4])
    idx = torch.randint(11, (4, 8))
    strengths = unit_strengths(model, idx, relative=True)
    for s in strengths.values():
        assert s.max() == pytest.approx(1.0) and (s > 0).all()
    assert (strengths[0][[1, 4]] < 1e-3).all()
    result = prune_gpt(model, theta=1e-2, idx=idx, relative=True)
    assert result.kept[0] == [0, 2, 3, 5]
    assert result.report["score"] == "sample" and result.report["relative"]
    masked = KANGPT.from_state(model.state()).eval()
    with torch.no_grad():
        masked.blocks[0].ffn.fc.mask[[1, 4], :] = 0
        masked.blocks[0].ffn.proj.mask[:, [1, 4]] = 0
    keep1 = result.kept[1]
    drop1 = [i for i in range(6) if i not in keep1]
    with torch.no_grad():  # layer 1 may lose weak units of its own
        masked.blocks[1].ffn.fc.mask[drop1, :] = 0
        masked.blocks[1].ffn.proj.mask[:, drop1] = 0
    torch.testing.assert_close(result.model(idx)[0], masked(idx)[0])
    # relative theta above 1 keeps only each layer's strongest unit
    assert prune_gpt(model, theta=1.5, idx=idx, relative=True).model.config.kan_hidden == (1, 1)


def test_output_score_is_the_units_contribution_and_keeps_bias_units():
    model = KANGPT(tiny_config(kan_hidden=5)).double().eval()
    ffn = model.blocks[0].ffn
    with torch.no_grad():  # unit 2: dead incoming edges, so a constant h_2 -- a bias of the FFN
        ffn.fc.scale_base[2] = 0
        ffn.fc.scale_sp[2] = 0
        ffn.proj.scale_base[:, 2] = 0.5  # ... and a large constant output
        ffn.proj.coef[:, 2] = 1.0
    idx = torch.randint(11, (3, 8))
    x = ffn_inputs(model, idx)[0]
    with torch.no_grad():
        contrib = ffn.proj.edge_outputs(ffn.fc(x))  # (24, 16, 5)
    torch.testing.assert_close(output_scores(ffn, x, chunk=5), contrib.pow(2).sum(1).mean(0).sqrt())
    assert unit_strengths(model, idx, score="sample")[0][2] < 1e-12  # min(I, O) calls it dead
    out = unit_strengths(model, idx, score="output", relative=True)[0]
    assert out[2] > 0.5  # the output score sees what removing it takes away
    result = prune_gpt(model, theta=1e-6, idx=idx, score="output")
    assert 2 in result.kept[0] and result.report["score"] == "output"
    with pytest.raises(ConfigError, match="needs tokens"):
        prune_gpt(model, theta=0.1, score="output")
    with pytest.raises(ConfigError, match="unknown pruning score"):
        prune_gpt(model, theta=0.1, idx=idx, score="gradient")
