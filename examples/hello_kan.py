"""The KAN paper's hello world, stage by stage through kansym's public API.

f(x1, x2) = exp(sin(pi x1) + x2^2) (Liu et al. 2024, "KAN: Kolmogorov-Arnold
Networks", arXiv:2404.19756, Fig. 2.4): train a sparse (2, 5, 1) KAN, prune it,
polish it, fit a primitive to every edge, compose, refine and verify the formula.
`kansym fit` does the same in one call (`kansym.discover.discover`); here each stage
is visible. For several seeds at once see bench/hello_world.py.

    python examples/hello_kan.py [--seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np
import sympy
import torch

from kansym.nn import KAN, KANConfig
from kansym.prune.prune import prune
from kansym.symbolic.compose import input_symbols, symbolify
from kansym.symbolic.export import to_latex
from kansym.symbolic.occam import simplify_edges
from kansym.symbolic.refine import refine
from kansym.symbolic.verify import is_exact_recovery, r2_score
from kansym.train.fit import TrainConfig, finetune, fit
from kansym.io.transform import DataTransform


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    # data in CSV units, then model units (inputs in [-1, 1], target standardised)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1000, 2))
    y = np.exp(np.sin(np.pi * x[:, :1]) + x[:, 1:] ** 2)  # (1000, 1)
    transform = DataTransform.fit(x, y)
    u = torch.as_tensor(transform.inputs(x))  # float64
    v = torch.as_tensor(transform.targets(y))

    model = KAN(KANConfig(width=(2, 5, 1), grid_size=5, spline_order=3, seed=args.seed)).double()
    sparse = fit(model, u, v, TrainConfig(num_threads=1), progress=False)  # MSE + lamb * L1 (paper eq. 2.20)
    print(f"trained: val MSE {sparse.history.val_loss[-1]:.2e} (standardised units)")

    pruned = prune(sparse.model, u, theta=1e-2)
    print(pruned.report.summary())

    polished = finetune(pruned.model, u, v, grid_size=10, config=TrainConfig(lamb=0.0, stop_grid_update_step=20, num_threads=1), progress=False)
    print(f"polished on G=10: val MSE {polished.history.val_loss[-1]:.2e}")

    sym, candidates = symbolify(polished.model, u, transform, ["x1", "x2"], ["f"])
    for edge, edge_fit in sorted(sym.edges.items()):
        print(f"edge {edge}: {edge_fit.primitive} (R² {edge_fit.r2:.6f})")
    symbols = input_symbols(["x1", "x2"])
    sym, _ = simplify_edges(sym, candidates, symbols, x, y[:, 0])
    formula = refine(sym.expressions(symbols)[0], symbols, x, y[:, 0])

    f = sympy.lambdify(symbols, formula)
    x1, x2 = symbols
    truth = sympy.exp(sympy.sin(sympy.pi * x1) + x2**2)
    print(f"f = {to_latex(formula)}")
    print(f"R² on the data: {r2_score(y[:, 0], f(x[:, 0], x[:, 1])):.6f}")
    print(f"exact symbolic recovery (SRBench rule): {is_exact_recovery(truth, formula)}")


if __name__ == "__main__":
    main()
