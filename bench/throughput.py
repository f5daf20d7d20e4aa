"""Training throughput: a [4, 64, 64, 1] KAN with Adam vs an MLP of equal parameter count.

Both train on the same mini-batches (batch 4096 drawn from 65,536 rows of
``y = sin(pi x1) x2 + exp(x3) / (1 + x4^2)``, x uniform in [-1, 1]) with
``Adam(lr=1e-3)`` and MSE; steps alternate between the models (interleaved, so load
from other processes hits both alike). Reported: samples per second of the calling
thread's CPU time (``--clock thread``, with one torch thread) or of wall time, median
over the timed steps, and the ratio KAN / MLP.

- ``kansym``: :class:`kansym.nn.KAN` (G = 5, k = 3, SiLU residual) as users get it (the
  layer's C++ operator on the native kernels of ``kansym/nn/fast/csrc`` where a C++
  compiler exists, see :func:`kansym.nn.fast.backend`);
- ``kansym-torch``: native kernels off, the basis by eager torch ops;
- ``kansym-compiled``: native kernels off, :func:`kansym.nn.fast.compile_kernels` on;
- ``mlp``: ``Linear(4, h) SiLU Linear(h, h) SiLU Linear(h, 1)`` with ``h`` chosen so
  that the parameter counts match (h = 207: 44,299 vs the KAN's 44,160).

    python bench/throughput.py [--steps 30] [--batch 4096]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kansym.nn import KAN, KANConfig, fast  # noqa: E402


def mlp_like(n_params: int, seed: int) -> nn.Module:
    """``4 -> h -> h -> 1`` MLP with ``h^2 + 7h + 1`` parameters closest to ``n_params``."""
    h = min(range(1, 2048), key=lambda w: abs(w * w + 7 * w + 1 - n_params))
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU(), nn.Linear(h, 1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=("thread", "wall"), default="thread")
    parser.add_argument("--models", default="kansym,kansym-torch,kansym-compiled,mlp")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.clock == "thread" and args.threads != 1:
        parser.error("--clock thread measures one thread: use --threads 1 or --clock wall")
    clock = time.thread_time if args.clock == "thread" else time.perf_counter

    gen = torch.Generator().manual_seed(0)
    x = torch.rand(65536, 4, generator=gen) * 2 - 1
    y = torch.sin(torch.pi * x[:, :1]) * x[:, 1:2] + torch.exp(x[:, 2:3]) / (1 + x[:, 3:4] ** 2)
    kan = KAN(KANConfig(width=(4, 64, 64, 1), grid_size=5, spline_order=3, seed=0))
    n_kan = sum(p.numel() for p in kan.parameters())
    models = {}
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        if name == "mlp":
            model = mlp_like(n_kan, 0)
        else:
            model = KAN(KANConfig(width=(4, 64, 64, 1), grid_size=5, spline_order=3, seed=0))
        models[name] = (model, torch.optim.Adam(model.parameters(), lr=1e-3))
    fast.use_backend("op")  # the layer's C++ operator (built in the background on first use): not inside the clocks
    times = {name: [] for name in models}
    losses = {name: None for name in models}
    for step in range(args.warmup + args.steps):
        idx = torch.randint(0, x.shape[0], (args.batch,), generator=gen)
        xb, yb = x[idx], y[idx]
        for name, (model, opt) in models.items():
            fast.compile_kernels(name == "kansym-compiled")
            fast.use_backend("torch" if name in ("kansym-torch", "kansym-compiled") else "auto")
            t0 = clock()
            opt.zero_grad(set_to_none=True)
            loss = torch.mean((model(xb) - yb) ** 2)
            loss.backward()
            opt.step()
            elapsed = clock() - t0
            if step >= args.warmup:
                times[name].append(elapsed)
            losses[name] = loss.item()
    fast.compile_kernels(False)
    fast.use_backend("auto")
    rows = []
    for name, (model, _) in models.items():
        med = statistics.median(times[name])
        row = {
            "model": name,
            "params": sum(p.numel() for p in model.parameters()),
            "batch": args.batch,
            "threads": args.threads,
            "clock": args.clock,
            "step_ms": round(med * 1e3, 3),
            "samples_per_s": round(args.batch / med),
            "final_loss": round(losses[name], 5),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    mlp = next((r for r in rows if r["model"] == "mlp"), None)
    print()
    print(f"| model | parameters | step ms | samples/s ({args.clock} clock) | / MLP |")
    print("|---|---|---|---|---|")
    for r in rows:
        ratio = f"{r['samples_per_s'] / mlp['samples_per_s']:.2f}" if mlp else "-"
        print(f"| {r['model']} | {r['params']} | {r['step_ms']} | {r['samples_per_s']} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
