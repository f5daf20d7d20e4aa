"""The KAN paper's hello world: (2, 5, 1) -> (2, 1, 1) for at least 4 of 5 seeds."""

import math

import pytest
import torch

from kansym.nn import KAN, KANConfig
from kansym.prune.prune import prune
from kansym.train.fit import TrainConfig, finetune, fit


def _data(seed=0, n=1000):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, generator=gen) * 2 - 1
    y = torch.exp(torch.sin(math.pi * x[:, :1]) + x[:, 1:] ** 2)
    return x, (y - y.mean()) / y.std()


@pytest.mark.slow
def test_hello_world_prunes_to_one_hidden_node():
    x, y = _data()
    widths, finals = [], []
    for seed in range(5):
        model = KAN(KANConfig(width=(2, 5, 1), grid_size=5, spline_order=3, seed=seed))
        sparse = fit(model, x, y, TrainConfig(num_threads=1), progress=False)
        pruned = prune(sparse.model, x, theta=1e-2)
        widths.append(pruned.report.width_after)
        if pruned.report.width_after == [2, 1, 1]:
            polished = finetune(
                pruned.model, x, y, grid_size=10,
                config=TrainConfig(lamb=0.0, stop_grid_update_step=20, num_threads=1), progress=False,
            )
            finals.append(polished.history.val_loss[-1])
    assert sum(w == [2, 1, 1] for w in widths) >= 4, widths
    assert max(finals) < 1e-4, finals
