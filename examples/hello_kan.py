"""The KAN paper's hello world: f(x1, x2) = exp(sin(pi x1) + x2^2).

Train a (2, 5, 1) KAN with sparsification, prune it with theta = 1e-2, and polish
the pruned model on a finer grid, for model seeds 0..4 (Liu et al. 2024,
"KAN: Kolmogorov-Arnold Networks", arXiv:2404.19756, Fig. 2.4).

    python examples/hello_kan.py [--data-seed 0] [--threads 1]
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from kansym.nn import KAN, KANConfig
from kansym.prune.prune import prune
from kansym.train.fit import TrainConfig, finetune, fit


def make_data(seed: int = 0, n: int = 1000) -> tuple[torch.Tensor, torch.Tensor]:
    """x uniform in [-1, 1]^2 (already min-max scaled), y standardised."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, generator=gen) * 2 - 1  # (n, 2)
    y = torch.exp(torch.sin(math.pi * x[:, :1]) + x[:, 1:] ** 2)  # (n, 1)
    return x, (y - y.mean()) / y.std()


def run(model_seed: int, x: torch.Tensor, y: torch.Tensor, threads: int | None) -> dict:
    start = time.perf_counter()
    model = KAN(KANConfig(width=(2, 5, 1), grid_size=5, spline_order=3, seed=model_seed))
    sparse = fit(model, x, y, TrainConfig(num_threads=threads), progress=False)
    fit_seconds = time.perf_counter() - start
    pruned = prune(sparse.model, x, theta=1e-2)
    polished = finetune(
        pruned.model, x, y, grid_size=10, config=TrainConfig(lamb=0.0, stop_grid_update_step=20, num_threads=threads),
        progress=False,
    )
    return {
        "seed": model_seed,
        "width_after": pruned.report.width_after,
        "sparse_val": sparse.history.val_loss[-1],
        "final_val": polished.history.val_loss[-1],
        "fit_seconds": fit_seconds,
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    x, y = make_data(args.data_seed)
    print("seed  width before -> after   val MSE sparse   val MSE polished   fit s   total s")
    hits = 0
    for seed in range(5):
        r = run(seed, x, y, args.threads)
        hits += r["width_after"] == [2, 1, 1]
        print(
            f"{seed:4d}  [2, 5, 1] -> {str(r['width_after']):10s} {r['sparse_val']:14.2e} "
            f"{r['final_val']:18.2e} {r['fit_seconds']:7.1f} {r['seconds']:9.1f}"
        )
    print(f"pruned to [2, 1, 1]: {hits} of 5 seeds")


if __name__ == "__main__":
    main()
