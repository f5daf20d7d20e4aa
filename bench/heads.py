"""Attention-head orthogonality penalties in KAN-GPT, measured with paired seeds (issue 6).

Arms (the same seeds, hence the same initialisation, data order and eval batches, in
every arm):

- ``baseline``  — no head penalty;
- ``frobenius`` — the seed's penalty, ``lambda * mean_l mean_{i<j} ||W_i W_j^T||_F^2 / (||W_i||^2 ||W_j||^2)``;
- ``principal`` — the basis-invariant penalty, mean cos² of the principal angles between
  the heads' row spaces;
- ``wo-decay``  — a control: a plain L2 penalty ``mu * mean_l ||W_O||_F^2`` (any
  regularisation of W_O, not orthogonality); ``mu = 0.01``, which cost about as much
  loss as the principal penalty in the 400-iteration run (``mu = 0.3``, the principal
  penalty's initial size, cost 9x more).

The model is the KAN-GPT benchmark's CPU recipe (block 64, batch 12, 4 layers, 4 heads,
n_embd 128, 2000 iterations, lr 1e-3 with cosine decay to 1e-4, dropout 0, 20 eval
batches, eval every 250) with the hybrid FFN ``mlp,kan,kan,mlp`` (``--max-iters``,
``--ffn`` change this). A hybrid step takes about 85 ms on one idle thread.

Reported per run: final val loss, both overlap measures per layer (mean over head
pairs) at the first and last evaluation, the largest principal cosine, the
attention-pattern similarity (1 - Jensen–Shannon / ln 2), and the held-out loss with
every head and every pair of heads of a layer removed, by zero and by mean ablation
(:mod:`kansym.gpt.ablation`): the heads in use by one-head ablation (``d_i > tau``) and
by pairwise ablation (``max(d_i, d_ij - d_j) > tau``, which sees heads that back each
other up), and the redundant pairs (``d_ij - d_i - d_j > tau``). Per arm: val loss mean
and std, and the paired differences to the baseline (same seed) with 95 % Student-t
intervals (scipy.stats), for the loss and for the heads in use (the seed's "effective
capacity").

Usage::

    python bench/heads.py --jobs 2                  # the run in docs/benchmarks.md
    python bench/heads.py --max-iters 20 --eval-interval 10 --eval-iters 2 --seeds 0,1 --out /tmp/h  # smoke
    python bench/heads.py --time-steps 30          # step time of each arm only

Results go to ``--out``: one JSON line per run in ``results.jsonl`` as runs finish (a
rerun skips runs already there with the same settings), then ``table.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ARMS = ("baseline", "frobenius", "principal", "wo-decay")
SETTINGS = ("ffn", "max_iters", "eval_interval", "eval_iters", "frob_lambda", "principal_lambda", "wo_decay", "basis", "device")


def arm_fields(arm: str, args: argparse.Namespace) -> dict:
    """GPTTrainConfig fields of one arm."""
    if arm == "baseline":
        return {}
    if arm == "frobenius":
        return {"ortho_lambda": args.frob_lambda, "ortho_kind": "frobenius"}
    if arm == "principal":
        return {"ortho_lambda": args.principal_lambda, "ortho_kind": "principal"}
    if arm == "wo-decay":
        return {"wo_decay": args.wo_decay}
    raise SystemExit(f"unknown arm {arm!r}; choose from {', '.join(ARMS)}")


def configs(arm: str, seed: int, args: argparse.Namespace):
    from kansym.gpt.config import GPTTrainConfig, KANGPTConfig

    model = KANGPTConfig(block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0, ffn=args.ffn, kan_basis=args.basis, seed=seed)
    train = GPTTrainConfig(
        max_iters=args.max_iters, batch_size=12, lr=1e-3, min_lr=1e-4, warmup_iters=min(100, args.max_iters // 10),
        eval_interval=args.eval_interval, eval_iters=args.eval_iters, seed=seed, device=args.device, **arm_fields(arm, args),
    )
    return model, train


def run_one(arm: str, seed: int, args: argparse.Namespace) -> dict:
    """Train one arm with one seed in this process; measure its heads."""
    import torch

    from kansym.gpt.ablation import marginal_cost, pair_importance, redundancy
    from kansym.gpt.checkpoint import load_gpt
    from kansym.gpt.data import get_batch, load_char_data
    from kansym.gpt.heads import attention_similarity, overlap_summary, pair_mean
    from kansym.gpt.train import train

    torch.set_num_threads(args.threads)
    model_config, config = configs(arm, seed, args)
    out_dir = Path(args.out) / f"{arm}-s{seed}"
    t0 = time.perf_counter()
    result = train(model_config, config, args.text, out_dir, overwrite=True)
    wall = time.perf_counter() - t0
    loaded = load_gpt(out_dir / "last.pt")
    model = loaded.model
    data = load_char_data(args.text, val_fraction=config.val_fraction, vocab=loaded.vocab)
    gen = torch.Generator().manual_seed(12345)  # the same held-out batches for every run
    batches = [get_batch(data.val, 12, 64, gen) for _ in range(args.importance_batches)]
    ablation = {}
    for mode in ("zero", "mean"):
        base_loss, single, pair = pair_importance(model, batches, mode=mode)
        ablation[mode] = {"single": single.tolist(), "pair": pair.tolist(),
                          "redundancy": redundancy(single, pair).nan_to_num(0.0).tolist(),
                          "marginal": marginal_cost(single, pair).tolist()}
    idx = torch.cat([x for x, _ in batches])  # (n * B, T)
    js = [pair_mean(attention_similarity(model, idx, layer)).item() for layer in range(model.config.n_layer)]
    first, last = result.history[0], result.history[-1]
    return {
        "arm": arm, "seed": seed, **{k: getattr(args, k) for k in SETTINGS}, **arm_fields(arm, args),
        "iters": result.iter, "val_loss": last["val_loss"], "train_loss": last["train_loss"],
        "best_val_loss": result.best_val_loss, "train_s": last["elapsed_s"], "wall_s": wall,
        "step_ms": 1000 * last["elapsed_s"] / result.iter,
        "overlap_first": {"iter": first["iter"], **first["overlap"]},
        "overlap": overlap_summary(model),
        "ortho_penalty": last["ortho_penalty"], "wo_sq_norm": last["wo_sq_norm"],
        "curve": [[r["iter"], r["val_loss"], r["overlap"]["frobenius"], r["overlap"]["principal"]] for r in result.history],
        "js_similarity": js, "heldout_loss": base_loss, "importance": ablation["zero"]["single"], "ablation": ablation,
    }


def time_steps(args: argparse.Namespace) -> dict:
    """Median step time (ms) of each arm's loss + penalty, interleaved in rounds of 5 steps."""
    import torch

    from kansym.gpt.ffn import sparsity_penalty  # noqa: F401 - same imports as training
    from kansym.gpt.heads import ortho_penalty, wo_sq_norm
    from kansym.gpt.model import KANGPT

    torch.set_num_threads(args.threads)
    runs = {}
    for arm in args.arms.split(","):
        model_config, config = configs(arm, 0, args)
        model = KANGPT(model_config.replace(vocab_size=65))
        runs[arm] = (model, config, torch.optim.AdamW(model.parameters(), lr=1e-3), [])
    x = torch.randint(65, (12, 64), generator=torch.Generator().manual_seed(0))  # (B, T)
    for rnd in range(1 + args.time_steps // 5):
        for model, config, opt, times in runs.values():
            for _ in range(5):
                t0 = time.perf_counter()
                loss = model(x, x)[1]
                if config.ortho_lambda:
                    loss = loss + config.ortho_lambda * ortho_penalty(model, config.ortho_kind)
                if config.wo_decay:
                    loss = loss + config.wo_decay * wo_sq_norm(model)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if rnd:
                    times.append(time.perf_counter() - t0)
    return {arm: 1000 * statistics.median(t) for arm, (_, _, _, t) in runs.items()} | {"threads": args.threads}


def paired_interval(diffs: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean of paired differences and its Student-t interval (NaN bounds for fewer than 2 pairs)."""
    from scipy import stats

    n = len(diffs)
    mean = statistics.fmean(diffs)
    if n < 2:
        return mean, float("nan"), float("nan")
    half = stats.t.ppf(0.5 + level / 2, n - 1) * statistics.stdev(diffs) / n**0.5
    return mean, mean - half, mean + half


def verdict(lo: float, hi: float) -> str:
    if math.isnan(lo):
        return "too few seeds"
    if hi < 0:
        return "lower (helps)"
    if lo > 0:
        return "higher (hurts)"
    return "nothing measurable"


def _paired(rows: list[dict], arm: str, value) -> tuple[str, float, float]:
    """``mean [95 % CI]`` of ``value(run) - value(baseline run of the same seed)``, with the bounds."""
    nan = float("nan")
    by = {(r["arm"], r["seed"]): r for r in rows}
    diffs = [value(r) - value(by[("baseline", r["seed"])]) for r in rows if r["arm"] == arm and ("baseline", r["seed"]) in by]
    if arm == "baseline":
        return "—", nan, nan
    if not diffs:
        return "no paired baseline", nan, nan
    m, lo, hi = paired_interval(diffs)
    return (f"{m:+.4f} (1 seed)" if math.isnan(lo) else f"{m:+.4f} [{lo:+.4f}, {hi:+.4f}]"), lo, hi


def _count(run: dict, mode: str, key: str, tau: float) -> int:
    """Heads (``single``, ``marginal``: of n_layer * H) or head pairs ``i < j`` (``redundancy``) above ``tau``."""
    layers = run["ablation"][mode][key]
    if key == "redundancy":
        return sum(row[j] > tau for layer in layers for i, row in enumerate(layer) for j in range(i + 1, len(row)))
    return sum(v > tau for layer in layers for v in layer)


def table(rows: list[dict], tau: float = 0.01) -> str:
    """Two markdown tables: loss and overlap per arm; heads in use by one-head and pairwise ablation."""
    arms = [a for a in ARMS if any(r["arm"] == a for r in rows)]
    mean = lambda xs: statistics.fmean(xs)
    lines = [
        "| arm | seeds | val loss (mean ± std) | Δ vs baseline [95 % CI] | verdict | Frobenius first → last | principal mean cos² first → last | max cos | JS similarity |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for arm in arms:
        rs = [r for r in rows if r["arm"] == arm]
        vals = [r["val_loss"] for r in rs]
        std = statistics.stdev(vals) if len(vals) > 1 else float("nan")
        delta, lo, hi = _paired(rows, arm, lambda r: r["val_loss"])
        verd = "—" if arm == "baseline" else verdict(lo, hi)
        lines.append(
            f"| {arm} | {len(rs)} | {mean(vals):.4f} ± {std:.4f} | {delta} | {verd} "
            f"| {mean([mean(r['overlap_first']['frobenius']) for r in rs]):.4f} → {mean([mean(r['overlap']['frobenius']) for r in rs]):.4f} "
            f"| {mean([mean(r['overlap_first']['principal']) for r in rs]):.3f} → {mean([mean(r['overlap']['principal']) for r in rs]):.3f} "
            f"| {mean([mean(r['overlap']['principal_max']) for r in rs]):.3f} "
            f"| {mean([mean(r['js_similarity']) for r in rs]):.3f} |"
        )
    if not all("ablation" in r for r in rows):
        return "\n".join(lines)
    n_heads = sum(len(layer) for layer in rows[0]["ablation"]["zero"]["single"])
    lines += [
        "",
        f"Heads in use (of {n_heads}): removal costs more than {tau} nats/char, alone (one-head ablation) or once one "
        "other head of its layer is gone (pairwise: max(d_i, d_ij - d_j)); redundant pairs: d_ij - d_i - d_j > "
        f"{tau}. Zero / mean ablation. Δ: paired difference to the baseline (same seed), 95 % CI.",
        "",
        "| arm | one-head, zero / mean | pairwise, zero / mean | redundant pairs, zero / mean | Δ heads in use (pairwise, mean) vs baseline [95 % CI] |",
        "|---|---:|---:|---:|---:|",
    ]
    for arm in arms:
        rs = [r for r in rows if r["arm"] == arm]
        def cell(key: str, rs=rs) -> str:
            return " / ".join(f"{mean([_count(r, m, key, tau) for r in rs]):.1f}" for m in ("zero", "mean"))

        delta, _, _ = _paired(rows, arm, lambda r: _count(r, "mean", "marginal", tau))
        lines.append(f"| {arm} | {cell('single')} | {cell('marginal')} | {cell('redundancy')} | {delta} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "shakespeare.txt"))
    p.add_argument("--out", default="bench/results/heads", help="Run directories, results.jsonl and table.md.")
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--ffn", default="mlp,kan,kan,mlp", help="FFN per layer (the KAN-GPT benchmark's hybrid).")
    p.add_argument("--basis", default="bspline")
    p.add_argument("--max-iters", type=int, default=2000)
    p.add_argument("--eval-interval", type=int, default=250)
    p.add_argument("--eval-iters", type=int, default=20)
    p.add_argument("--frob-lambda", type=float, default=10.0, help="Weight of the seed's (Frobenius) penalty.")
    p.add_argument("--principal-lambda", type=float, default=1.0, help="Weight of the principal-angle penalty.")
    p.add_argument("--wo-decay", type=float, default=0.01, help="Weight of the L2 control on W_O (0.01: as costly as the principal penalty at 400 iterations).")
    p.add_argument("--importance-batches", type=int, default=8, help="Held-out batches (12 x 64 chars) for ablation and JS.")
    p.add_argument("--used-threshold", type=float, default=0.01, help="Loss increase (nats/char) above which a head is in use.")
    p.add_argument("--device", default="cpu", help="Torch device of the runs (bf16 autocast on CUDA).")
    p.add_argument("--jobs", type=int, default=2, help="Runs in parallel processes.")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run.")
    p.add_argument("--time-steps", type=int, default=0, help="Only time N training steps per arm, interleaved.")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.time_steps:
        print(json.dumps(time_steps(args)))
        return
    if args.one:
        arm, seed = args.one.rsplit(":", 1)
        print(json.dumps(run_one(arm, int(seed), args)))
        return

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    arms = args.arms.split(",")
    for arm in arms:
        arm_fields(arm, args)
    seeds = [int(s) for s in args.seeds.split(",")]
    settings = {k: getattr(args, k) for k in SETTINGS}
    done = []
    if results.exists():
        done = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
        done = [r for r in done if all(r.get(k) == v for k, v in settings.items())]
    have = {(r["arm"], r["seed"]) for r in done}
    todo = [(arm, seed) for seed in seeds for arm in arms if (arm, seed) not in have]
    passthrough = list(argv if argv is not None else sys.argv[1:])
    t0 = time.perf_counter()

    def launch(job):
        arm, seed = job
        proc = subprocess.run([sys.executable, __file__, *passthrough, "--one", f"{arm}:{seed}"], capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"{arm} seed {seed} failed:\n{proc.stderr[-2000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    rows = list(done)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for fut in as_completed([pool.submit(launch, job) for job in todo]):
            row = fut.result()
            rows.append(row)
            with open(results, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps({k: row[k] for k in ("arm", "seed", "val_loss", "train_s", "step_ms")}), f"{time.perf_counter() - t0:.0f} s", flush=True)
    rows = [r for r in rows if r["arm"] in arms and r["seed"] in seeds]
    md = table(rows, args.used_threshold) + f"\n\nSettings: {json.dumps(settings)}; jobs {args.jobs}, threads {args.threads}; wall {time.perf_counter() - t0:.0f} s.\n"
    (out / "table.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
