"""KAN-GPT FFN arms on a GPU at equal wall time: nanoGPT's shakespeare_char GPU recipe, bf16, torch.compile.

The recipe (Karpathy's nanoGPT ``config/train_shakespeare_char.py``): 6 layers, 6 heads,
n_embd 384, block 256, batch 64, lr 1e-3 (warm-up 100, cosine to 1e-4), beta2 0.99,
dropout 0.2; every FFN arm parameter-matched to the GELU MLP (an arm of bench/gpt.py:
``mlp``, ``swiglu``, ``kan``, ``cheby``, ``grkan``, ``kan-rR``, with an init suffix ``-vp`` or
``-gpt2`` such as ``swiglu-vp``; or a per-layer list of FFN kinds). bf16 autocast and
``torch.compile`` are on (``--no-compile`` / ``--no-amp`` turn them off).

Equal wall time: each arm first runs ``--probe-iters`` steps (compilation and warm-up
included) to measure its steady step time ``s`` (the time between the probe's second
and last evaluation over the steps between them), then trains a fresh model for
``round(budget / s)`` iterations, so every arm gets the same training seconds with
its own complete learning-rate schedule. Reported per arm: parameters, iterations,
step ms, tokens/s (steady state: the last evaluation window, compilation excluded),
val loss at the end (equal wall time), training seconds (compilation included; the
first step holds it), peak CUDA memory.

Usage, on a CUDA machine from the repository root (about 4 x (budget + 2 min))::

    python bench/gpt_gpu.py --out gpt_gpu.json                 # mlp, swiglu, swiglu-vp, kan, cheby, grkan; 120 s each
    python bench/gpt_gpu.py --models mlp,grkan --budget-s 60   # fewer arms, shorter
    python bench/gpt_gpu.py --smoke --device cpu --no-compile  # a tiny config: the script runs (seconds)

Prints one JSON line per arm and a Markdown table; ``--out`` gets all of it as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parent))

from gpt import arm  # noqa: E402  (bench/gpt.py's arm names)

from kansym.gpt.config import GPTTrainConfig, KANGPTConfig  # noqa: E402
from kansym.gpt.model import KANGPT  # noqa: E402
from kansym.gpt.train import train  # noqa: E402

RECIPE = dict(n_layer=6, n_head=6, n_embd=384, block_size=256, dropout=0.2)
SMOKE = dict(n_layer=2, n_head=2, n_embd=32, block_size=32, dropout=0.0)


def arm_fields(name: str) -> dict:
    """KANGPTConfig fields of an arm: a bench/gpt.py arm name (:func:`gpt.arm`), else a per-layer FFN list."""
    try:
        return arm(name)
    except KeyError:
        return {"ffn": name}


def run_arm(ffn: str, args: argparse.Namespace, work: Path) -> dict:
    """Probe the step time of one arm, then train it for the budget; return its measurements."""
    shape = SMOKE if args.smoke else RECIPE
    model_config = KANGPTConfig(**shape, **arm_fields(ffn), seed=args.seed)
    batch = 4 if args.smoke else args.batch_size
    common = dict(batch_size=batch, lr=1e-3, min_lr=1e-4, beta2=0.99, seed=args.seed, device=args.device,
                  amp=not args.no_amp, compile=not args.no_compile)
    probe_iters = max(4, args.probe_iters)
    probe = train(model_config, GPTTrainConfig(max_iters=probe_iters, eval_interval=probe_iters // 4, eval_iters=1,
                                               warmup_iters=min(100, probe_iters // 10), **common),
                  args.text, work / f"{ffn}-probe", overwrite=True)
    first, last = probe.history[1], probe.history[-1]  # skip the window with compilation in it
    step_s = (last["elapsed_s"] - first["elapsed_s"]) / max(1, last["iter"] - first["iter"])
    iters = max(10, round(args.budget_s / step_s))
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    result = train(model_config, GPTTrainConfig(max_iters=iters, eval_interval=max(1, iters // 10),
                                                eval_iters=args.eval_iters, warmup_iters=min(100, iters // 10), **common),
                   args.text, work / ffn, overwrite=True)
    wall = time.perf_counter() - t0
    end = result.history[-1]
    return {
        "ffn": ffn,
        "params": KANGPT(model_config).num_params(),
        "hidden": list(model_config.kan_hidden),
        "probe_step_ms": 1000 * step_s,
        "iters": result.iter,
        "train_s": end["elapsed_s"],
        "wall_s": wall,
        "step_ms": 1000 * end["elapsed_s"] / result.iter,
        "tokens_per_s": end["tokens_per_s"],
        "val_loss": end["val_loss"],
        "best_val_loss": result.best_val_loss,
        "curve": [[r["iter"], r["elapsed_s"], r["val_loss"]] for r in result.history],
        "peak_mem_mb": torch.cuda.max_memory_allocated() / 2**20 if args.device.startswith("cuda") else None,
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device,
        "amp": not args.no_amp and args.device.startswith("cuda"),
        "compile": not args.no_compile,
        "smoke": args.smoke,
    }


def table(rows: list[dict], budget_s: float) -> str:
    base = next((r for r in rows if r["ffn"] == "swiglu"), rows[0])
    lines = [
        f"Equal wall time: {budget_s:.0f} s of training per arm (steady step time from the probe).",
        "",
        f"| FFN | params | iterations | step ms | tokens/s | val loss @ equal time | - {base['ffn']} | train s | peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        peak = "-" if r["peak_mem_mb"] is None else f"{r['peak_mem_mb']:.0f}"
        lines.append(f"| {r['ffn']} | {r['params'] / 1e6:.2f} M | {r['iters']} | {r['step_ms']:.1f} | {r['tokens_per_s']:.0f} "
                     f"| {r['val_loss']:.4f} | {r['val_loss'] - base['val_loss']:+.4f} | {r['train_s']:.0f} | {peak} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "shakespeare.txt"))
    p.add_argument("--models", default="mlp,swiglu,swiglu-vp,kan,cheby,grkan",
                   help="Comma-separated arms (bench/gpt.py's names); or arms separated by ';', each an arm or a per-layer list (mlp,kan,...).")
    p.add_argument("--device", default="cuda")
    p.add_argument("--budget-s", type=float, default=120.0, help="Training seconds per arm (equal wall time).")
    p.add_argument("--probe-iters", type=int, default=60, help="Steps of the step-time probe (compilation included).")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--eval-iters", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-compile", action="store_true", help="No torch.compile.")
    p.add_argument("--no-amp", action="store_true", help="No bf16 autocast.")
    p.add_argument("--smoke", action="store_true", help="Tiny model (2 layers, width 32, block 32), a 3 s budget: checks the script.")
    p.add_argument("--threads", type=int, default=0, help="torch threads on CPU (0: torch's default; 1 with --smoke).")
    p.add_argument("--out", default=None, help="Write the rows and the table here as JSON.")
    args = p.parse_args(argv)
    if args.threads or (args.smoke and not args.device.startswith("cuda")):
        torch.set_num_threads(args.threads or 1)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: no CUDA device here; run on a GPU machine or pass --smoke --device cpu", file=sys.stderr)
        return 2
    if args.smoke:
        args.budget_s, args.probe_iters, args.eval_iters = min(args.budget_s, 3.0), min(args.probe_iters, 20), 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        arms = args.models.split(";") if ";" in args.models else args.models.split(",")
        for ffn in (a.strip() for a in arms if a.strip()):
            row = run_arm(ffn, args, Path(tmp))
            rows.append(row)
            print(json.dumps(row), flush=True)
    md = table(rows, args.budget_s)
    print(md)
    if args.out:
        Path(args.out).write_text(json.dumps({"torch": torch.__version__, "rows": rows, "table": md}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
