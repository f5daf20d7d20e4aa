"""Head ablation: one head and pairs of heads removed by hooks, zero and mean ablation."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from kansym.errors import ConfigError
from kansym.gpt.ablation import (
    head_importance,
    head_means,
    marginal_cost,
    pair_importance,
    redundancy,
)
from kansym.gpt.model import KANGPT

from .conftest import tiny_config


def _model_and_batches(**changes):
    torch.manual_seed(0)
    model = KANGPT(tiny_config(n_head=4, n_embd=16, ffn="mlp", **changes)).eval()
    gen = torch.Generator().manual_seed(3)
    batches = [(torch.randint(11, (3, 8), generator=gen), torch.randint(11, (3, 8), generator=gen)) for _ in range(2)]
    return model, batches


def _loss(model, batches) -> float:
    with torch.no_grad():
        return sum(model(x, y)[1].item() for x, y in batches) / len(batches)


def test_pair_removal_equals_zeroing_both_heads_output_weights():
    model, batches = _model_and_batches()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    base, single, pair = pair_importance(model, batches)
    assert base == pytest.approx(_loss(model, batches), abs=1e-7)
    for layer, i, j in [(0, 0, 1), (0, 2, 3), (1, 1, 3)]:
        edited = copy.deepcopy(model)
        with torch.no_grad():
            W = edited.blocks[layer].attn.head_output_weights()  # (H, hs, C) view of c_proj
            W[i] = 0.0
            W[j] = 0.0
        assert pair[layer, i, j].item() == pytest.approx(_loss(edited, batches) - base, abs=1e-6)
        assert pair[layer, j, i].item() == pair[layer, i, j].item()
    torch.testing.assert_close(torch.diagonal(pair, dim1=1, dim2=2), single)
    _, imp = head_importance(model, batches)
    torch.testing.assert_close(imp, single)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # hooks only


def test_mean_ablation_of_a_constant_head_costs_nothing():
    model, batches = _model_and_batches(bias=True)
    attn = model.blocks[1].attn
    with torch.no_grad():
        attn.head_qkv_weights()[2, 1] = 0.0  # head 1's values: its bias only, the same for every token
        attn.c_attn.bias.view(3, 4, 4)[2, 1] = torch.tensor([0.5, -1.0, 2.0, 0.3])
    means = head_means(model, batches)  # (L, H, T, hs)
    assert means.shape == (2, 4, 8, 4)
    torch.testing.assert_close(means[1, 1], torch.tensor([0.5, -1.0, 2.0, 0.3]).expand(8, 4))
    _, mean_imp = head_importance(model, batches, mode="mean")
    _, zero_imp = head_importance(model, batches, mode="zero")
    assert abs(mean_imp[1, 1].item()) < 1e-6  # the head adds a constant: mean ablation keeps it
    assert abs(zero_imp[1, 1].item()) > 1e-3  # zeroing removes that constant
    assert not torch.isnan(mean_imp).any()


def test_redundancy_is_pair_minus_both_singles():
    single = torch.tensor([[0.1, 0.2, 0.0]])  # (L=1, H=3)
    pair = torch.tensor([[[0.1, 0.5, 0.1], [0.5, 0.2, 0.1], [0.1, 0.1, 0.0]]])
    r = redundancy(single, pair)
    assert r[0, 0, 1].item() == pytest.approx(0.2)
    assert r[0, 1, 2].item() == pytest.approx(-0.1)
    assert all(math.isnan(r[0, h, h].item()) for h in range(3))
    # head 0: 0.1 alone, 0.5 - 0.2 = 0.3 once head 1 is gone; head 2: 0.1 - 0.1 = 0.0 at most
    torch.testing.assert_close(marginal_cost(single, pair), torch.tensor([[0.3, 0.4, 0.0]]))


def test_layers_asked_for_and_bad_arguments():
    model, batches = _model_and_batches()
    _, single, pair = pair_importance(model, batches, layers=[-1])
    assert torch.isnan(single[0]).all() and not torch.isnan(single[1]).any()
    assert torch.isnan(pair[0]).all()
    with pytest.raises(ConfigError, match="ablation mode 'half' is not one of zero, mean"):
        head_importance(model, batches, mode="half")
    with pytest.raises(ConfigError, match="layer 2 is out of range"):
        pair_importance(model, batches, layers=[2])
    with pytest.raises(ConfigError, match="at least one held-out batch"):
        head_importance(model, [])
    with pytest.raises(ConfigError, match="one sequence length"):
        head_means(model, [batches[0], (batches[0][0][:, :5], batches[0][1][:, :5])])
