"""Factorised (rank-r) KAN FFN: the math, parameter counts, validation, round trip, pruning, CLI."""

import json

import pytest
import torch
from click.testing import CliRunner

from kansym.cli.main import cli
from kansym.errors import ConfigError
from kansym.gpt.checkpoint import load_gpt, save_gpt
from kansym.gpt.config import KANGPTConfig, match_kan_hidden
from kansym.gpt.data import CharVocab
from kansym.gpt.ffn import KANFFN, LowRankKANLayer, edge_scores, sparsity_penalty
from kansym.gpt.model import KANGPT
from kansym.gpt.prune import prune_gpt
from kansym.nn.bases import BASES, make_kan_layer, n_basis

from .conftest import tiny_config
from .test_cli import TINY, one_line_error


@pytest.mark.parametrize("basis", BASES)
def test_low_rank_layer_equals_full_layer_with_product_coefficients(basis):
    gen = torch.Generator().manual_seed(0)
    low = LowRankKANLayer(basis, 5, 7, 3, grid_size=4, degree=3, grid_range=(-2.0, 2.0), generator=gen).double()
    with torch.no_grad():
        low.coef_in.normal_(generator=gen)  # away from the near-zero initial values
    full = make_kan_layer(basis, 5, 7, 4, 3, grid_range=(-2.0, 2.0)).double()
    with torch.no_grad():
        full.coef.copy_(torch.einsum("or,rik->oik", low.coef_out, low.coef_in))
        full.scale_sp.fill_(1.0)
        full.scale_base.copy_(low.scale_base)
    x = torch.randn(3, 4, 5, dtype=torch.float64, generator=gen) * 1.5  # (B, T, in)
    assert low(x).shape == (3, 4, 7)
    torch.testing.assert_close(low(x), full(x), rtol=1e-10, atol=1e-10)
    flat = x.reshape(-1, 5)
    torch.testing.assert_close(low.edge_outputs(flat), full.edge_outputs(flat), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(low.edge_outputs(flat).sum(-1), low(flat), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("basis", BASES)
@pytest.mark.parametrize("residual", [False, True])
def test_factorised_ffn_forward_backward_on_btc(basis, residual):
    ffn = KANFFN(16, 12, basis=basis, grid_size=3, rank=4, residual=residual, generator=torch.Generator().manual_seed(1))
    x = torch.randn(2, 8, 16, requires_grad=True)  # (B, T, C)
    y = ffn(x)
    assert y.shape == (2, 8, 16) and torch.isfinite(y).all()
    (y.square().mean() + 1e-2 * sparsity_penalty(ffn)).backward()
    assert x.grad.abs().sum() > 0
    for name, p in ffn.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("basis", BASES)
def test_param_count_formula(basis):
    n_embd, hidden, rank, grid, degree = 16, 12, 5, 3, 2
    k = n_basis(basis, grid, degree)
    ffn = KANFFN(n_embd, hidden, basis=basis, grid_size=grid, degree=degree, rank=rank)
    n = sum(p.numel() for p in ffn.parameters())
    assert n == 2 * n_embd * hidden + rank * (n_embd + hidden) * (k + 1)
    assert ffn.fc.coef_out.shape == (hidden, rank) and ffn.fc.coef_in.shape == (rank, n_embd, k)
    assert ffn.proj.coef_out.shape == (n_embd, rank) and ffn.proj.coef_in.shape == (rank, hidden, k)


@pytest.mark.parametrize("basis", BASES)
@pytest.mark.parametrize("rank", [1, 8, 32])
@pytest.mark.parametrize("ffn", ["kan", "kan-residual"])
def test_param_matching_within_five_percent(basis, rank, ffn):
    mlp = KANGPT(KANGPTConfig(ffn="mlp", n_layer=2)).num_params()
    config = KANGPTConfig(ffn=ffn, n_layer=2, kan_basis=basis, kan_rank=rank)
    kan = KANGPT(config).num_params()
    assert abs(kan - mlp) / mlp < 0.05, (config.kan_hidden, kan, mlp)
    assert config.kan_hidden[0] == match_kan_hidden(128, 512, basis=basis, rank=rank, residual=ffn == "kan-residual")


def test_lower_rank_gets_a_wider_matched_hidden_layer():
    widths = [KANGPTConfig(ffn="kan", kan_rank=r).kan_hidden[0] for r in (4, 16, 64)]
    assert widths[0] > widths[1] > widths[2] > KANGPTConfig(ffn="kan").kan_hidden[0]


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"kan_rank": 0}, "positive integer"),
        ({"kan_rank": -2}, "positive integer"),
        ({"kan_rank": 2.5}, "positive integer"),
        ({"kan_rank": True}, "positive integer"),
        ({"kan_rank": 17}, "exceeds n_embd 16"),
        ({"kan_rank": 7, "kan_hidden": 6}, "full rank 6"),
    ],
)
def test_bad_rank(changes, needle):
    with pytest.raises(ConfigError, match=needle):
        tiny_config(**changes)


def test_rank_is_ignored_by_mlp_layers_and_direct_layer_checks():
    config = tiny_config(ffn="mlp,kan", kan_rank=4, kan_hidden=6)
    model = KANGPT(config)
    assert type(model.blocks[0].ffn).__name__ == "MLPFFN"
    assert isinstance(model.blocks[1].ffn.fc, LowRankKANLayer) and model.blocks[1].ffn.fc.rank == 4
    with pytest.raises(ConfigError, match=r"must lie in 1\.\.6"):
        LowRankKANLayer("bspline", 16, 6, 7)


def test_checkpoint_round_trip(tmp_path):
    config = tiny_config(ffn="kan,kan-residual", kan_rank=3, kan_basis="chebyshev")
    model = KANGPT(config).eval()
    vocab = CharVocab.from_text("abcdefghijk")
    path = save_gpt(tmp_path / "m.pt", model, vocab)
    loaded = load_gpt(path)
    assert loaded.model.config == config and loaded.model.config.kan_rank == 3
    idx = torch.randint(11, (2, 8), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(loaded.model(idx)[0], model(idx)[0], rtol=0, atol=0)
    # a checkpoint written before the field existed loads as a full KAN
    state = KANGPT(tiny_config()).state()
    del state["config"]["kan_rank"]
    assert KANGPT.from_state(state).config.kan_rank is None


def test_edge_scores_of_a_factorised_layer():
    layer = LowRankKANLayer("rbf", 4, 3, 2, grid_size=3)
    expected = layer.scale_base.abs() + torch.einsum("or,rik->oik", layer.coef_out, layer.coef_in).abs().mean(-1)
    torch.testing.assert_close(edge_scores(layer), expected)


@pytest.mark.parametrize("basis", ["bspline", "fourier"])
def test_prune_factorised_ffn_equals_model_without_those_units(basis):
    model = KANGPT(tiny_config(ffn="mlp,kan", kan_basis=basis, kan_hidden=8, kan_rank=2)).double().eval()
    ffn = model.blocks[1].ffn
    with torch.no_grad():  # units 1, 4, 6 contribute almost nothing downstream
        ffn.proj.coef_in[:, [1, 4, 6]] *= 1e-6
        ffn.proj.scale_base[:, [1, 4, 6]] *= 1e-6
    idx = torch.randint(11, (4, 8), generator=torch.Generator().manual_seed(0))
    result = prune_gpt(model, 1e-3, idx=idx, score="output", relative=True)
    assert result.kept == {1: [0, 2, 3, 5, 7]} and result.model.config.kan_hidden == (0, 5)
    assert result.model.blocks[1].ffn.fc.coef_out.shape == (5, 2)
    assert result.model.blocks[1].ffn.proj.coef_in.shape[1] == 5
    reference = KANGPT.from_state(model.state()).eval()
    with torch.no_grad():
        reference.blocks[1].ffn.proj.coef_in[:, [1, 4, 6]] = 0
        reference.blocks[1].ffn.proj.scale_base[:, [1, 4, 6]] = 0
    torch.testing.assert_close(result.model(idx)[0], reference(idx)[0], rtol=1e-12, atol=1e-12)
    # a factorised FFN keeps at least rank units, so the pruned config stays valid
    floor = prune_gpt(model, 10.0, idx=idx, score="output", relative=True)
    assert floor.model.config.kan_hidden == (0, 2) and len(floor.kept[1]) == 2


def test_cli_rank_trains_prunes_and_rejects_bad_ranks(text_file, tmp_path):
    runner = CliRunner()
    out = tmp_path / "run"
    base = ["gpt", "train", "--text", str(text_file), "--ffn", "kan", *TINY]
    result = runner.invoke(cli, [*base, "--rank", "2", "--max-iters", "4", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert load_gpt(out / "last.pt").model.config.kan_rank == 2
    pruned = tmp_path / "p.pt"
    result = runner.invoke(cli, ["gpt", "prune", str(out / "last.pt"), "--theta", "0.5", "--score", "output", "--relative",
                                 "--text", str(text_file), "-o", str(pruned)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["hidden_after"] >= 2 * 2
    assert runner.invoke(cli, ["gpt", "sample", str(pruned), "--tokens", "5"]).exit_code == 0
    for rank, needle in (("0", "--rank must be a positive integer"), ("-1", "--rank must be a positive integer"),
                         ("17", "--rank 17 exceeds n_embd 16")):
        one_line_error(runner.invoke(cli, [*base, "--rank", rank, "-o", str(tmp_path / f"bad{rank}")]), needle)
        assert not (tmp_path / f"bad{rank}").exists()
    # regression (fresh-user check): --rank with MLP FFNs was silently ignored
    mlp = ["gpt", "train", "--text", str(text_file), "--ffn", "mlp", *TINY, "--rank", "2", "-o", str(tmp_path / "mlp")]
    one_line_error(runner.invoke(cli, mlp), "--rank factorises KAN FFNs, but --ffn gives every layer an MLP")
    assert not (tmp_path / "mlp").exists()


def test_factorised_model_is_causal():
    model = KANGPT(tiny_config(ffn="kan-residual", kan_rank=3, kan_basis="rbf")).double().eval()
    idx = torch.randint(11, (2, 8), generator=torch.Generator().manual_seed(0))
    logits, _ = model(idx)
    changed = idx.clone()
    changed[:, 5] = (changed[:, 5] + 1) % 11
    other, _ = model(changed)
    assert torch.equal(other[:, :5], logits[:, :5]) and not torch.allclose(other[:, 5:], logits[:, 5:])


def test_factorised_resume_continues_the_same_curve(text_file, tmp_path):
    from kansym.gpt.train import train

    from .conftest import tiny_train

    model = tiny_config(ffn="kan", kan_rank=2)
    config = tiny_train(max_iters=8, dtype="float64", lr_decay_iters=8, lamb=1e-3, eval_interval=4)
    straight = train(model, config, text_file, tmp_path / "a")
    train(model, config.replace(max_iters=4), text_file, tmp_path / "b")
    resumed = train(None, config, text_file, tmp_path / "b", resume=True)
    assert resumed.iter == 8 and abs(resumed.last_val_loss - straight.last_val_loss) < 1e-6
    assert load_gpt(tmp_path / "b" / "last.pt").model.config.kan_rank == 2
