"""The KAN paper's hello world through kansym's public pipeline, several seeds.

For each seed: the same steps as ``kansym fit`` (train with sparsification, prune
with theta, polish, symbolify, refine, verify) on ``f = exp(sin(pi x1) + x2^2)``, 1000
rows uniform in [-1, 1]. Prints one JSON line per seed (pruned width, exact recovery by
the SRBench rule, R², seconds) and a Markdown table.

    python bench/hello_world.py --seeds 0 1 2 3 4 [--data-seed 0]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
import sympy
import torch

from kansym.discover import DiscoverConfig, discover
from kansym.symbolic.verify import is_exact_recovery


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--data-seed", type=int, default=0, help="seed of the 1000 rows (0 = kansym/data/hello.csv)")
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()

    rng = np.random.default_rng(args.data_seed)
    x = rng.uniform(-1, 1, (args.rows, 2))
    y = np.exp(np.sin(np.pi * x[:, :1]) + x[:, 1:] ** 2)
    x1, x2 = sympy.symbols("x1 x2", real=True)
    truth = sympy.exp(sympy.sin(sympy.pi * x1) + x2**2)
    rows = []
    for seed in args.seeds:
        t0 = time.perf_counter()
        result = discover(x, y, ["x1", "x2"], ["f"], DiscoverConfig(seed=seed), progress=False)
        seconds = time.perf_counter() - t0
        formula = result.formulas[0]
        row = {
            "seed": seed,
            "data_seed": args.data_seed,
            "width_pruned": list(result.prune_result.model.width),
            "exact": bool(is_exact_recovery(truth, formula.expr)),
            "formula": str(formula.expr),
            "r2_data": formula.fidelity.r2_data,
            "seconds": round(seconds, 2),
            "seconds_by_stage": {k: round(v, 2) for k, v in result.seconds.items()},
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(f"machine: {platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}")
    print("| seed | pruned width | exact | R² (data) | seconds | formula |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['seed']} | {r['width_pruned']} | {'yes' if r['exact'] else 'no'} | {r['r2_data']:.6f} | {r['seconds']} | `{r['formula']}` |")
    n_small = sum(r["width_pruned"] == [2, 1, 1] for r in rows)
    n_exact = sum(r["exact"] for r in rows)
    print(f"\npruned to [2, 1, 1]: {n_small}/{len(rows)}; exact: {n_exact}/{len(rows)}; "
          f"median seconds: {float(np.median([r['seconds'] for r in rows])):.1f}")


if __name__ == "__main__":
    main()
