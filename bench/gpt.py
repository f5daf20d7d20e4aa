"""MLP-GPT vs parameter-matched KAN-GPT vs a hybrid, in nanoGPT's char-level CPU recipe.

Every model trains with the same seed, hence the same data order and eval batches
(block 64, batch 12, 4 layers, 4 heads, n_embd 128, 2000 iterations, lr 1e-3, dropout
0, eval on 20 batches). Each run is a separate process so that peak memory is its
own. Reported per model: parameters, val loss at equal iterations (the end), val loss
at equal wall time (the shortest run's training time; linear interpolation between
evaluations), mean step time and its ratio to the MLP's, tokens/s, peak memory.
Training time excludes evaluations. The machines are shared: compare ratios from one
run, not absolute seconds.

Usage::

    python bench/gpt.py --text ../shared/data/shakespeare.txt --out bench/results/gpt
    python bench/gpt.py --max-iters 20 --eval-interval 10 --eval-iters 2   # smoke run
    python bench/gpt.py --time-steps 100 --threads 1   # step times only, interleaved
    python bench/gpt.py --models mlp,kan --seeds 0,1,2 --threads 1   # paired seeds

With ``--seeds``, every model trains once per seed (the same seed gives every model the
same data order and eval batches), and a paired summary follows the tables: per seed
the val loss of each model, and the mean difference of each model minus the MLP with a
95 % Student-t interval over seeds (pairing removes the seed-to-seed variation that
both arms share).

Prints one JSON line per model, then a Markdown table (also written to ``--out``).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

MODELS = {
    "mlp": "mlp",
    "swiglu": "swiglu",
    "kan": "kan",
    "grkan": "grkan",
    "hybrid": "mlp,kan,kan,mlp",
    "hybrid-grkan": "swiglu,grkan,grkan,swiglu",
}


def arm(name: str) -> dict:
    """KANGPTConfig fields of a model name: one of MODELS, or ``kan-rR`` (the KAN FFN factorised through rank R)."""
    if name.startswith("kan-r") and name[5:].isdigit():
        return {"ffn": "kan", "kan_rank": int(name[5:])}
    return {"ffn": MODELS[name]}


NANOGPT_REFERENCE = "nanoGPT on this machine (same recipe, 90/10 split, 20 eval batches): val 1.825 at 2000 iters, 0.80 M params, 138 s"


def run_one(args: argparse.Namespace) -> dict:
    """Train one model in this process and return its measurements."""
    import torch

    from kansym.gpt.config import GPTTrainConfig, KANGPTConfig
    from kansym.gpt.checkpoint import load_gpt
    from kansym.gpt.train import train

    if args.threads:
        torch.set_num_threads(args.threads)
    name = args.one
    model_config = KANGPTConfig(
        block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0, **arm(name),
        kan_basis=args.basis, seed=args.seed,
    )
    config = GPTTrainConfig(
        max_iters=args.max_iters, batch_size=12, lr=1e-3, min_lr=1e-4, warmup_iters=min(100, args.max_iters // 10),
        eval_interval=args.eval_interval, eval_iters=args.eval_iters, seed=args.seed, device=args.device,
    )
    out_dir = Path(args.out) / (name if args.seeds is None else f"{name}_seed{args.seed}")
    result = train(model_config, config, args.text, out_dir, overwrite=True)
    params = load_gpt(out_dir / "last.pt").model.num_params()
    if args.device.startswith("cuda"):
        peak_mb = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    last = result.history[-1]
    return {
        "model": name,
        "ffn": arm(name)["ffn"] + (f" rank {arm(name)['kan_rank']}" if "kan_rank" in arm(name) else ""),
        "kan_hidden": list(model_config.kan_hidden),
        "params": params,
        "iters": result.iter,
        "val_loss": last["val_loss"],
        "train_loss": last["train_loss"],
        "best_val_loss": result.best_val_loss,
        "train_s": last["elapsed_s"],
        "step_ms": 1000 * last["elapsed_s"] / result.iter,
        "tokens_per_s": result.iter * 12 * 64 / last["elapsed_s"],
        "peak_mem_mb": peak_mb,
        "curve": [[r["iter"], r["elapsed_s"], r["val_loss"]] for r in result.history],
        "threads": torch.get_num_threads(),
        "device": args.device,
        "seed": args.seed,
    }


def time_steps(args: argparse.Namespace) -> dict:
    """Median training-step time (ms) of each model, interleaved in rounds of 10 steps.

    Interleaving spreads any load from other processes of a shared machine over all
    models alike, so the ratios are fairer than those of the sequential full runs.
    """
    import statistics
    import time

    import torch

    from kansym.gpt.config import KANGPTConfig
    from kansym.gpt.model import KANGPT

    if args.threads:
        torch.set_num_threads(args.threads)
    names = args.models.split(",")
    gen = torch.Generator().manual_seed(args.seed)
    runs = {}
    for name in names:
        model = KANGPT(KANGPTConfig(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128, **arm(name), kan_basis=args.basis, seed=args.seed))
        runs[name] = (model, torch.optim.AdamW(model.parameters(), lr=1e-3), [])
    x = torch.randint(65, (12, 64), generator=gen)  # (B, T)
    for rnd in range(1 + args.time_steps // 10):
        for name, (model, opt, times) in runs.items():
            for _ in range(10):
                t0 = time.perf_counter()
                _, loss = model(x, x)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if rnd:  # round 0 warms up
                    times.append(time.perf_counter() - t0)
    ms = {name: 1000 * statistics.median(t) for name, (_, _, t) in runs.items()}
    base = ms.get("mlp", next(iter(ms.values())))
    return {name: {"step_ms": v, "ratio": v / base} for name, v in ms.items()} | {"threads": torch.get_num_threads()}


def loss_at_time(curve: list, t: float) -> float:
    """Val loss at training time ``t`` by linear interpolation of ``(iter, elapsed_s, val_loss)`` rows."""
    prev = None
    for _, s, v in curve:
        if s >= t:
            if prev is None:
                return v
            s0, v0 = prev
            return v0 + (v - v0) * (t - s0) / max(s - s0, 1e-12)
        prev = (s, v)
    return curve[-1][2]


def loss_at_iter(curve: list, it: float) -> float:
    """Val loss at iteration ``it`` by linear interpolation of ``(iter, elapsed_s, val_loss)`` rows."""
    return loss_at_time([[i, i, v] for i, _, v in curve], it)


def table(rows: list[dict]) -> str:
    t_equal = min(r["train_s"] for r in rows)
    base = next((r for r in rows if r["model"] == "mlp"), rows[0])
    lines = [
        f"Equal wall time: {t_equal:.1f} s of training (the shortest run).",
        "",
        "| model | FFN | KAN hidden | params | val loss @ iters | val loss @ equal time | step ms | step / MLP | tokens/s | peak MB |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        hidden = ",".join(str(h) for h in r["kan_hidden"] if h) or "-"
        lines.append(
            f"| {r['model']} | {r['ffn']} | {hidden} | {r['params'] / 1e6:.3f} M | {r['val_loss']:.4f} @ {r['iters']} "
            f"| {loss_at_time(r['curve'], t_equal):.4f} | {r['step_ms']:.1f} | {r['step_ms'] / base['step_ms']:.2f}x "
            f"| {r['tokens_per_s']:.0f} | {r['peak_mem_mb']:.0f} |"
        )
    lines += ["", f"Reference: {NANOGPT_REFERENCE}."]
    return "\n".join(lines)


def paired_summary(rows: list[dict], key: str = "val_loss") -> str:
    """Per-seed ``key`` of every model and the paired difference (model - MLP), mean and 95 % t interval.

    Parameters
    ----------
    rows : list of dict
        Rows of :func:`run_one` with ``model`` and ``seed``; the MLP must be among them.
    key : str
        The measurement compared (``val_loss``, or ``equal_time_val_loss`` when present).

    Returns
    -------
    str
        A Markdown table and one line per non-MLP model.
    """
    import statistics

    from scipy import stats

    seeds = sorted({r["seed"] for r in rows})
    models = list(dict.fromkeys(r["model"] for r in rows))
    val = {(r["model"], r["seed"]): r[key] for r in rows}
    lines = [
        f"| seed | {' | '.join(models)} | " + " | ".join(f"{m} - mlp" for m in models if m != "mlp") + " |",
        "|---:|" + "---:|" * (2 * len(models) - 1),
    ]
    for s in seeds:
        cells = [f"{val[(m, s)]:.4f}" for m in models]
        diffs = [f"{val[(m, s)] - val[('mlp', s)]:+.4f}" for m in models if m != "mlp"]
        lines.append(f"| {s} | " + " | ".join(cells + diffs) + " |")
    lines.append("")
    for m in models:
        if m == "mlp":
            continue
        d = [val[(m, s)] - val[("mlp", s)] for s in seeds]
        mean = statistics.fmean(d)
        if len(d) > 1:
            half = stats.t.ppf(0.975, len(d) - 1) * statistics.stdev(d) / len(d) ** 0.5
            ci = f"95 % CI [{mean - half:+.4f}, {mean + half:+.4f}] (t, {len(d) - 1} dof)"
        else:
            ci = "no interval from one seed"
        lines.append(f"{key}: {m} - mlp over {len(d)} seeds: mean {mean:+.4f}, {ci}")
    return "\n".join(lines)


def summarize(rows: list[dict], step_ratio: str | None = None) -> str:
    """Per-seed tables and the paired summaries of ``rows`` (see :func:`paired_summary`).

    ``step_ratio`` (``"kan=1.5,hybrid=1.2"``) adds ``ratio_time_val_loss``: each model's val
    loss at iteration ``iters / ratio`` of its own curve, the MLP's at ``iters`` (equal wall
    time when the step times have that ratio).
    """
    seeds = sorted({r["seed"] for r in rows})
    md = "\n\n".join(table([r for r in rows if r["seed"] == s]) for s in seeds)
    for r in rows:  # equal wall time per seed: that seed's shortest run
        t_equal = min(q["train_s"] for q in rows if q["seed"] == r["seed"])
        r["equal_time_val_loss"] = loss_at_time(r["curve"], t_equal)
    md += "\n\n" + paired_summary(rows) + "\n\n" + paired_summary(rows, "equal_time_val_loss")
    if step_ratio:
        ratios = {"mlp": 1.0} | {k: float(v) for k, v in (kv.split("=") for kv in step_ratio.split(","))}
        rows = [r for r in rows if r["model"] in ratios]
        for r in rows:
            r["ratio_time_val_loss"] = loss_at_iter(r["curve"], r["iters"] / ratios[r["model"]])
        md += "\n\n" + paired_summary(rows, "ratio_time_val_loss")
    return md


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "shakespeare.txt"))
    p.add_argument("--out", default="bench/results/gpt", help="Run directories, results.jsonl and table.md.")
    p.add_argument("--models", default="mlp,kan,hybrid", help=f"Comma-separated subset of {', '.join(MODELS)}, or kan-rR (KAN FFN factorised through rank R).")
    p.add_argument("--basis", default="bspline")
    p.add_argument("--max-iters", type=int, default=2000)
    p.add_argument("--eval-interval", type=int, default=100)
    p.add_argument("--eval-iters", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", default=None, help="Comma-separated seeds (e.g. 0,1,2): every model once per seed, then a paired summary.")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="torch threads per run (0: torch's default).")
    p.add_argument("--time-steps", type=int, default=0, help="Only time N training steps per model, interleaved (no training run).")
    p.add_argument("--summarize", default=None, metavar="RESULTS_JSONL",
                   help="Print the tables and paired summary of an earlier run's results.jsonl (no training).")
    p.add_argument("--step-ratio", default=None, metavar="MODEL=R,...",
                   help="With --summarize: also compare at equal wall time from these step-time ratios to the MLP "
                        "(e.g. from --time-steps): model M is read on its own curve at max_iters / R.")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    names = args.models.split(",")
    for name in names:
        try:
            arm(name)
        except KeyError:
            p.error(f"unknown model {name!r}; choose from {', '.join(MODELS)} or kan-rR (rank R)")
    if args.time_steps:
        print(json.dumps(time_steps(args)))
        return
    if args.summarize:
        rows = [json.loads(line) for line in Path(args.summarize).read_text().splitlines() if line.strip()]
        print(summarize(rows, args.step_ratio))
        return

    if args.one:
        print(json.dumps(run_one(args)))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        seeds = [args.seed] if args.seeds is None else [int(v) for v in args.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds must be comma-separated integers, got {args.seeds!r}")
    if args.seeds is not None and "mlp" not in names:
        p.error("--seeds compares every model with the MLP; include mlp in --models")
    rows = []
    passthrough = [a for a in (argv if argv is not None else sys.argv[1:])]
    for seed in seeds:
        for name in names:
            cmd = [sys.executable, __file__, *passthrough, "--one", name, "--seed", str(seed)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode:
                sys.exit(f"{name} (seed {seed}) failed:\n{proc.stderr[-2000:]}")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), flush=True)
            with open(out / "results.jsonl", "a" if len(rows) > 1 else "w") as f:
                f.write(json.dumps(row) + "\n")
    md = summarize(rows) if args.seeds is not None else table(rows)
    (out / "table.md").write_text(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
