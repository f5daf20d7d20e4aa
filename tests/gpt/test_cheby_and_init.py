"""The Chebyshev KAN FFN (``--ffn cheby``) and the input-projection inits (``fc_init``) of issue 36."""

import json
import math

import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from kansym.cli.main import cli
from kansym.errors import ConfigError
from kansym.gpt.config import KANGPTConfig
from kansym.gpt.ffn import KANFFN
from kansym.gpt.model import KANGPT
from kansym.nn.bases import ChebyshevKANLayer

from .test_cli import TINY, one_line_error


def test_cheby_is_a_kan_ffn_on_chebyshev_polynomials_matched_to_the_mlp():
    config = KANGPTConfig(ffn="cheby", kan_basis="bspline", kan_degree=3)  # cheby ignores kan_basis
    ffn = KANGPT(config).blocks[0].ffn
    assert isinstance(ffn, KANFFN) and ffn.kind == "cheby"
    assert isinstance(ffn.fc, ChebyshevKANLayer) and isinstance(ffn.proj, ChebyshevKANLayer)
    # K = d + 1 = 4 polynomials: 2 C h (K + 2) = 2 * 128 * 512  ->  h = 512 / 6 = 85.3 -> 85
    assert config.kan_hidden == (85, 85, 85, 85)
    mlp = KANGPT(KANGPTConfig(ffn="mlp")).num_params()
    assert abs(KANGPT(config).num_params() - mlp) / mlp < 0.005
    # T_2(tanh x) = 2 tanh(x)^2 - 1 is the third basis function
    x = torch.linspace(-2, 2, 7)[:, None].repeat(1, 128)
    assert torch.allclose(ffn.fc.basis(x)[:, 0, 2], 2 * torch.tanh(x[:, 0]) ** 2 - 1, atol=1e-6)


def test_cheby_mixes_with_other_kinds_per_layer():
    config = KANGPTConfig(ffn="cheby,kan,swiglu,mlp")
    assert config.kan_hidden == (85, 51, 341, 0)
    kinds = [b.ffn.kind for b in KANGPT(config).blocks]
    assert kinds == ["cheby", "kan", "swiglu", "mlp"]


@pytest.mark.parametrize("ffn, fc_init, std", [
    ("mlp", "default", 0.02), ("mlp", "variance", 1 / math.sqrt(128)),
    ("swiglu", "default", 0.02), ("swiglu", "variance", 1 / math.sqrt(128)),
    ("grkan", "default", 1 / math.sqrt(128)), ("grkan", "gpt2", 0.02),  # GR-KAN's rational starts as the identity
    ("kan", "gpt2", 0.02), ("cheby", "variance", 1 / math.sqrt(128 * 0.355775)),  # E[silu(x)^2] = 0.355775
])
def test_the_input_projection_gets_the_std_fc_init_asks_for(ffn, fc_init, std):
    ffn_module = KANGPT(KANGPTConfig(ffn=ffn, fc_init=fc_init)).blocks[1].ffn
    weights = [ffn_module.fc.scale_base] if isinstance(ffn_module, KANFFN) else [ffn_module.c_fc.weight]
    if ffn == "swiglu":
        weights.append(ffn_module.c_gate.weight)
    for w in weights:  # 128 x h >= 6,500 draws: the sample std is within 3 % of the target
        assert w.std().item() == pytest.approx(std, rel=0.03)
        assert abs(w.mean().item()) < 0.1 * std  # normal around 0, not the KAN layer's U(-1, 1) / sqrt(C)


def test_variance_init_gives_unit_variance_hidden_preactivations():
    x = torch.randn(4096, 128, generator=torch.Generator().manual_seed(0))  # LayerNorm'd block input
    for ffn in ("swiglu", "grkan", "kan"):
        block = KANGPT(KANGPTConfig(ffn=ffn, fc_init="variance")).blocks[0].ffn
        with torch.no_grad():
            if ffn == "kan":
                pre = F.linear(F.silu(x), block.fc.scale_base)  # the SiLU branch of the first KAN layer
            else:
                pre = block.c_fc(block.act_in(x) if ffn == "grkan" else x)
        assert pre.var().item() == pytest.approx(1.0, abs=0.08), ffn


def test_default_init_keeps_the_kan_layers_own_uniform_draw_and_outputs_keep_gpt2s():
    model = KANGPT(KANGPTConfig(ffn="kan,grkan,swiglu,mlp"))
    w = model.blocks[0].ffn.fc.scale_base
    assert w.abs().max().item() <= 1 / math.sqrt(128) + 1e-7  # U(-1, 1) / sqrt(C)
    assert w.std().item() == pytest.approx(1 / math.sqrt(3 * 128), rel=0.05)
    for layer in (1, 2, 3):
        assert model.blocks[layer].ffn.c_proj.weight.std().item() == pytest.approx(0.02 / math.sqrt(8), rel=0.05)


def test_an_unknown_fc_init_is_refused():
    with pytest.raises(ConfigError, match="unknown fc_init 'he'; use one of default, gpt2, variance"):
        KANGPTConfig(fc_init="he")


def test_cheby_train_sample_prune_end_to_end(text_file, tmp_path):
    runner = CliRunner()
    out = tmp_path / "run"
    args = ["gpt", "train", "--text", str(text_file), "--ffn", "cheby", "--fc-init", "variance", "-o", str(out), *TINY]
    result = runner.invoke(cli, [*args, "--max-iters", "20", "--lamb", "1e-3"])
    assert result.exit_code == 0, result.output
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert log[-1]["val_loss"] < log[0]["val_loss"]  # it learns
    from kansym.gpt.checkpoint import load_gpt

    saved = load_gpt(out / "last.pt").model
    assert saved.config.ffn == ("cheby", "cheby") and saved.config.fc_init == "variance"
    sample = runner.invoke(cli, ["gpt", "sample", str(out / "last.pt"), "--prompt", "First", "--tokens", "20", "--seed", "1"])
    assert sample.exit_code == 0 and sample.stdout.startswith("First") and len(sample.stdout.strip()) >= 25
    pruned = tmp_path / "p.pt"
    result = runner.invoke(cli, ["gpt", "prune", str(out / "last.pt"), "--theta", "0.5", "--score", "output", "--relative",
                                 "--text", str(text_file), "-o", str(pruned)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert 1 <= report["hidden_after"] < report["hidden_before"]
    small = load_gpt(pruned).model
    assert isinstance(small.blocks[0].ffn.fc, ChebyshevKANLayer) and small.num_params() < saved.num_params()
    assert runner.invoke(cli, ["gpt", "sample", str(pruned), "--tokens", "5"]).exit_code == 0
    one_line_error(runner.invoke(cli, [*args[:-len(TINY)], "--fc-init", "he", "--force", *TINY]), "--fc-init")
