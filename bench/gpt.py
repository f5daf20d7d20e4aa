"""KAN-GPT FFN arms, parameter-matched, in nanoGPT's char-level CPU recipe.

Arms (``--models``): ``mlp`` (GPT-2's GELU MLP), ``swiglu`` (Shazeer 2020, the modern
baseline), ``kan`` (B-spline KAN FFN), ``cheby`` (the KAN FFN on Chebyshev polynomials of
``tanh x``), ``grkan`` (KAT's group-rational KAN), the hybrids ``hybrid``
(``mlp,kan,kan,mlp``) and ``hybrid-grkan`` (``swiglu,grkan,grkan,swiglu``), and ``kan-rR``
(the KAN FFN factorised through rank R). A suffix ``-gpt2`` or ``-vp`` sets the FFN's
input-projection init (``KANGPTConfig.fc_init``: GPT-2's ``N(0, 0.02^2)``, or variance
preserving) instead of the kind's default (``grkan-gpt2``, ``swiglu-vp``, ``kan-vp``).
Every model trains with the same seed, hence the same data order and eval batches
(block 64, batch 12, by default 4 layers, 4 heads, n_embd 128 (``--n-layer``,
``--n-head``, ``--n-embd``), 2000 iterations, lr 1e-3, dropout 0, eval on 20 batches).
Each run is a separate process so that peak memory (max RSS) is its own; ``--jobs``
runs that many at once. Reported per model:
parameters, val loss at equal iterations (the end), val loss at equal wall time (the
shortest run's training time; linear interpolation between evaluations), mean step
time and its ratio to the baseline's, tokens/s, peak memory. Training time excludes
evaluations. The machines are shared: compare ratios from one run, not absolute
seconds; ``--time-steps`` measures the step-time ratios interleaved, and
``--summarize ... --step-ratio`` reads the curves at those ratios.

Usage::

    python bench/gpt.py --text ../shared/data/shakespeare.txt --out bench/results/gpt
    python bench/gpt.py --max-iters 20 --eval-interval 10 --eval-iters 2   # smoke run
    python bench/gpt.py --time-steps 100 --threads 1   # step times only, interleaved
    python bench/gpt.py --models mlp,kan --seeds 0,1,2 --threads 1   # paired seeds
    python bench/gpt.py --models swiglu,swiglu-vp,grkan,grkan-gpt2 --seeds 0,1 --threads 1 --jobs 2   # init ablation

With ``--seeds``, every model trains once per seed (the same seed gives every model the
same data order and eval batches), and a paired summary follows the tables: per seed
the val loss of each model, and the mean difference of each model minus the baseline
(``--baseline``, default swiglu when it runs, else mlp) with a 95 % Student-t interval
over seeds (pairing removes the seed-to-seed variation that both arms share), at equal
iterations and at equal wall time. ``--plot`` draws the curves.

Prints one JSON line per model, then a Markdown table (also written to ``--out``).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MODELS = {
    "mlp": "mlp",
    "swiglu": "swiglu",
    "kan": "kan",
    "cheby": "cheby",
    "grkan": "grkan",
    "hybrid": "mlp,kan,kan,mlp",
    "hybrid-grkan": "swiglu,grkan,grkan,swiglu",
}


INIT_SUFFIXES = {"-gpt2": "gpt2", "-vp": "variance"}  # arm-name suffix -> KANGPTConfig.fc_init


def arm(name: str) -> dict:
    """KANGPTConfig fields of a model name: one of MODELS or ``kan-rR`` (the KAN FFN factorised through
    rank R), optionally followed by an init suffix of :data:`INIT_SUFFIXES`.

    Raises
    ------
    KeyError
        For an unknown name.
    """
    for suffix, init in INIT_SUFFIXES.items():
        if name.endswith(suffix):
            return arm(name[: -len(suffix)]) | {"fc_init": init}
    if name.startswith("kan-r") and name[5:].isdigit():
        return {"ffn": "kan", "kan_rank": int(name[5:])}
    return {"ffn": MODELS[name]}


def model_fields(args: argparse.Namespace, name: str) -> dict:
    """KANGPTConfig keyword arguments of arm ``name`` at the run's size (block 64, ``--n-layer/--n-head/--n-embd``)."""
    return dict(block_size=64, n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd, dropout=0.0, **arm(name),
                kan_basis=args.basis, seed=args.seed)


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
    model_config = KANGPTConfig(**model_fields(args, name))
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
        "fc_init": model_config.fc_init,
        "size": [model_config.n_layer, model_config.n_head, model_config.n_embd],
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
    ``--clock thread`` (one thread) times the CPU time of the calling thread instead of
    wall time, as bench/throughput.py does: time spent waiting for a loaded CPU is not
    counted.
    """
    import statistics
    import time

    import torch

    from kansym.gpt.config import KANGPTConfig
    from kansym.gpt.model import KANGPT

    if args.threads:
        torch.set_num_threads(args.threads)
    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    names = args.models.split(",")
    gen = torch.Generator().manual_seed(args.seed)
    runs = {}
    for name in names:
        model = KANGPT(KANGPTConfig(vocab_size=65, **model_fields(args, name)))
        runs[name] = (model, torch.optim.AdamW(model.parameters(), lr=1e-3), [])
    x = torch.randint(65, (12, 64), generator=gen)  # (B, T)
    for rnd in range(1 + args.time_steps // 10):
        for name, (model, opt, times) in runs.items():
            for _ in range(10):
                t0 = clock()
                _, loss = model(x, x)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if rnd:  # round 0 warms up
                    times.append(clock() - t0)
    ms = {name: 1000 * statistics.median(t) for name, (_, _, t) in runs.items()}
    base = ms.get(args.baseline or "swiglu", ms.get("mlp", next(iter(ms.values()))))
    return {name: {"step_ms": v, "ratio": v / base} for name, v in ms.items()} | {"threads": torch.get_num_threads(), "clock": args.clock}


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


def baseline_of(rows: list[dict], wanted: str | None = None) -> str:
    """The arm differences are taken against: ``wanted``, else swiglu, else mlp, else the first."""
    models = list(dict.fromkeys(r["model"] for r in rows))
    for name in (wanted, "swiglu", "mlp"):
        if name in models:
            return name
    return models[0]


def table(rows: list[dict], baseline: str | None = None) -> str:
    t_equal = min(r["train_s"] for r in rows)
    base_name = baseline_of(rows, baseline)
    base = next(r for r in rows if r["model"] == base_name)
    lines = [
        f"Equal wall time: {t_equal:.1f} s of training (the shortest run).",
        "",
        f"| model | FFN | hidden | params | val loss @ iters | val loss @ equal time | step ms | step / {base_name} | tokens/s | peak MB |",
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


def paired_interval(diffs: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean of paired differences and its Student-t interval: bench/heads.py's helper, reused."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from heads import paired_interval as interval

    return interval(diffs, level)


def paired_summary(rows: list[dict], key: str = "val_loss", baseline: str | None = None) -> str:
    """Per-seed ``key`` of every model and the paired difference (model - baseline), mean and 95 % t interval.

    Parameters
    ----------
    rows : list of dict
        Rows of :func:`run_one` with ``model`` and ``seed``; the baseline must be among them.
    key : str
        The measurement compared (``val_loss``, or ``equal_time_val_loss`` when present).
    baseline : str, optional
        Default :func:`baseline_of` (swiglu if run, else mlp).

    Returns
    -------
    str
        A Markdown table and one line per other model.
    """
    base = baseline_of(rows, baseline)
    seeds = sorted({r["seed"] for r in rows if r["model"] == base})
    models = list(dict.fromkeys(r["model"] for r in rows))
    val = {(r["model"], r["seed"]): r[key] for r in rows}
    others = [m for m in models if m != base]
    lines = [
        f"| seed | {' | '.join(models)} | " + " | ".join(f"{m} - {base}" for m in others) + " |",
        "|---:|" + "---:|" * (len(models) + len(others)),
    ]
    for s in seeds:
        cells = [f"{val[(m, s)]:.4f}" if (m, s) in val else "-" for m in models]
        diffs = [f"{val[(m, s)] - val[(base, s)]:+.4f}" if (m, s) in val else "-" for m in others]
        lines.append(f"| {s} | " + " | ".join(cells + diffs) + " |")
    lines.append("")
    for m in others:
        d = [val[(m, s)] - val[(base, s)] for s in seeds if (m, s) in val]
        mean, lo, hi = paired_interval(d)
        ci = f"95 % CI [{lo:+.4f}, {hi:+.4f}] (t, {len(d) - 1} dof)" if len(d) > 1 else "no interval from one seed"
        lines.append(f"{key}: {m} - {base} over {len(d)} seeds: mean {mean:+.4f}, {ci}")
    return "\n".join(lines)


def contrasts(rows: list[dict], spec: str, key: str = "val_loss") -> str:
    """Paired differences between any arms, and differences of differences, with 95 % t intervals over seeds.

    Parameters
    ----------
    rows : list of dict
        Rows of :func:`run_one` (``model``, ``seed``, ``key``).
    spec : str
        Comma-separated contrasts: ``A:B`` is ``A - B`` per seed (e.g. ``grkan:grkan-gpt2``, the init's
        effect within GR-KAN); ``A:B:C:D`` is ``(A - B) - (C - D)`` per seed (an interaction, e.g.
        ``grkan:grkan-gpt2:swiglu-vp:swiglu``, whether the init helps GR-KAN more than SwiGLU). Only
        seeds with every arm named count.
    key : str
        The measurement compared.

    Returns
    -------
    str
        One line per contrast.

    Raises
    ------
    ValueError
        For a malformed contrast.
    """
    val = {(r["model"], r["seed"]): r[key] for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    lines = []
    for item in (c.strip() for c in spec.split(",") if c.strip()):
        arms = item.split(":")
        if len(arms) not in (2, 4) or not all(arms):
            raise ValueError(f"a contrast is A:B or A:B:C:D, got {item!r}")
        pairs = [arms[:2], arms[2:]] if len(arms) == 4 else [arms]
        ok = [s for s in seeds if all((a, s) in val for a in arms)]
        d = [sum(sign * (val[(a, s)] - val[(b, s)]) for sign, (a, b) in zip((1, -1), pairs)) for s in ok]
        name = " - ".join(f"({a} - {b})" if len(pairs) > 1 else f"{a} - {b}" for a, b in pairs)
        if not d:
            lines.append(f"{key}: {name}: no seed has every arm")
            continue
        mean, lo, hi = paired_interval(d)
        ci = f"95 % CI [{lo:+.4f}, {hi:+.4f}] (t, {len(d) - 1} dof)" if len(d) > 1 else "no interval from one seed"
        lines.append(f"{key}: {name} over {len(d)} seeds: mean {mean:+.4f}, {ci}")
    return "\n".join(lines)


def overview(rows: list[dict], baseline: str | None = None) -> str:
    """One row per model, means over seeds, with the paired differences against the baseline.

    Columns: parameters, val loss at equal iterations and at equal wall time (per seed
    the shortest run's training time), each as mean and ``model - baseline`` with its 95 %
    t interval over seeds, step time, tokens/s and peak memory (means).
    """
    import statistics

    base = baseline_of(rows, baseline)
    models = list(dict.fromkeys(r["model"] for r in rows))
    by = {(r["model"], r["seed"]): r for r in rows}
    lines = [
        f"| model | seeds | params | val @ equal iters | {base} diff [95 % CI] | val @ equal time | {base} diff [95 % CI] "
        "| step ms | tokens/s | peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in models:
        rs = [r for r in rows if r["model"] == m]
        cells = []
        for key in ("val_loss", "equal_time_val_loss"):
            d = [r[key] - by[(base, r["seed"])][key] for r in rs if (base, r["seed"]) in by]
            mean, lo, hi = paired_interval(d) if d and m != base else (float("nan"),) * 3
            diff = "—" if m == base else (f"{mean:+.4f} [{lo:+.4f}, {hi:+.4f}]" if len(d) > 1 else f"{mean:+.4f}")
            cells += [f"{statistics.fmean(r[key] for r in rs):.4f}", diff]
        lines.append(
            f"| {m} | {len(rs)} | {rs[0]['params'] / 1e6:.3f} M | " + " | ".join(cells)
            + f" | {statistics.fmean(r['step_ms'] for r in rs):.1f} | {statistics.fmean(r['tokens_per_s'] for r in rs):.0f} "
            f"| {statistics.fmean(r['peak_mem_mb'] for r in rs):.0f} |"
        )
    return "\n".join(lines)


def plot_curves(rows: list[dict], path: str | Path) -> Path:
    """Val loss against iterations and against training seconds, every run (thin) and the mean over seeds (thick)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, (ax_it, ax_t) = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for i, m in enumerate(models):
        color = f"C{i}"
        rs = [r for r in rows if r["model"] == m]
        for r in rs:
            it, t, v = (np.array(c) for c in zip(*r["curve"]))
            ax_it.plot(it, v, color=color, lw=0.5, alpha=0.35)
            ax_t.plot(t, v, color=color, lw=0.5, alpha=0.35)
        it = np.array([c[0] for c in rs[0]["curve"]])
        mean_v = np.mean([[c[2] for c in r["curve"]] for r in rs], axis=0)
        mean_t = np.mean([[c[1] for c in r["curve"]] for r in rs], axis=0)
        ax_it.plot(it, mean_v, color=color, lw=1.8, label=f"{m} ({len(rs)} seeds)")
        ax_t.plot(mean_t, mean_v, color=color, lw=1.8, label=m)
    ax_it.set_xlabel("iteration")
    ax_t.set_xlabel("training seconds (evaluations excluded)")
    ax_it.set_ylabel("val loss (nats / char)")
    ax_it.set_ylim(top=min(2.6, max(ax_it.get_ylim())))
    ax_it.legend(fontsize=8)
    for ax in (ax_it, ax_t):
        ax.grid(alpha=0.3)
    fig.suptitle("KAN-GPT FFN arms, char-level Shakespeare (CPU recipe)", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def summarize(rows: list[dict], step_ratio: str | None = None, baseline: str | None = None,
              contrast: str | None = None) -> str:
    """Overview, per-seed tables and the paired summaries of ``rows`` (see :func:`paired_summary`).

    ``step_ratio`` (``"kan=1.5,grkan=1.2"``, step time relative to the baseline) adds
    ``ratio_time_val_loss``: each model's val loss at iteration ``iters / ratio`` of its own
    curve, the baseline's at ``iters`` (equal wall time when the step times have that ratio).
    ``contrast`` adds :func:`contrasts` at equal iterations (and, with ``step_ratio``, at equal wall time).
    """
    base = baseline_of(rows, baseline)
    seeds = sorted({r["seed"] for r in rows})
    for r in rows:  # equal wall time per seed: that seed's shortest run
        t_equal = min(q["train_s"] for q in rows if q["seed"] == r["seed"])
        r["equal_time_val_loss"] = loss_at_time(r["curve"], t_equal)
    md = overview(rows, base) + "\n\n"
    md += "\n\n".join(table([r for r in rows if r["seed"] == s], base) for s in seeds)
    md += "\n\n" + paired_summary(rows, baseline=base) + "\n\n" + paired_summary(rows, "equal_time_val_loss", base)
    if step_ratio:
        ratios = {base: 1.0} | {k: float(v) for k, v in (kv.split("=") for kv in step_ratio.split(","))}
        rows = [r for r in rows if r["model"] in ratios]
        for r in rows:
            r["ratio_time_val_loss"] = loss_at_iter(r["curve"], r["iters"] / ratios[r["model"]])
        md += "\n\n" + paired_summary(rows, "ratio_time_val_loss", base)
    if contrast:
        md += "\n\n" + contrasts(rows, contrast)
        if step_ratio:
            md += "\n" + contrasts(rows, contrast, "ratio_time_val_loss")
    return md


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "shakespeare.txt"))
    p.add_argument("--out", default="bench/results/gpt", help="Run directories, results.jsonl and table.md.")
    p.add_argument("--models", default="mlp,kan,hybrid", help=f"Comma-separated subset of {', '.join(MODELS)}, or kan-rR (KAN FFN factorised through rank R).")
    p.add_argument("--basis", default="bspline")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--jobs", type=int, default=1, help="Training runs at once (each its own process; use with --threads 1).")
    p.add_argument("--max-iters", type=int, default=2000)
    p.add_argument("--eval-interval", type=int, default=100)
    p.add_argument("--eval-iters", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", default=None, help="Comma-separated seeds (e.g. 0,1,2): every model once per seed, then a paired summary.")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="torch threads per run (0: torch's default).")
    p.add_argument("--time-steps", type=int, default=0, help="Only time N training steps per model, interleaved (no training run).")
    p.add_argument("--clock", choices=("wall", "thread"), default="wall",
                   help="With --time-steps: wall time, or the calling thread's CPU time (needs --threads 1).")
    p.add_argument("--summarize", default=None, metavar="RESULTS_JSONL",
                   help="Print the tables and paired summary of an earlier run's results.jsonl (no training).")
    p.add_argument("--step-ratio", default=None, metavar="MODEL=R,...",
                   help="With --summarize: also compare at equal wall time from these step-time ratios to the baseline "
                        "(e.g. from --time-steps): model M is read on its own curve at max_iters / R.")
    p.add_argument("--contrast", default=None, metavar="A:B[:C:D],...",
                   help="With --summarize: paired differences A - B, or differences of them (A - B) - (C - D), over seeds.")
    p.add_argument("--baseline", default=None, help="Arm the paired differences are taken against [default: swiglu if run, else mlp].")
    p.add_argument("--plot", default=None, metavar="PNG", help="Also write the val-loss curves (against iterations and seconds) here.")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    names = args.models.split(",")
    for name in names:
        try:
            arm(name)
        except KeyError:
            p.error(f"unknown model {name!r}; choose from {', '.join(MODELS)} or kan-rR (rank R), each optionally "
                    f"with {' or '.join(INIT_SUFFIXES)}")
    if args.time_steps:
        if args.clock == "thread" and args.threads != 1:
            p.error("--clock thread measures one thread: add --threads 1")
        print(json.dumps(time_steps(args)))
        return
    if args.summarize:
        rows = [json.loads(line) for line in Path(args.summarize).read_text().splitlines() if line.strip()]
        print(summarize(rows, args.step_ratio, args.baseline, args.contrast))
        if args.plot:
            print(f"curves: {plot_curves(rows, args.plot)}")
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
    if args.seeds is not None and baseline_of([{"model": n} for n in names], args.baseline) not in names:
        p.error(f"--seeds compares every model with the baseline {args.baseline}; include it in --models")
    passthrough = [a for a in (argv if argv is not None else sys.argv[1:])]
    rows = []

    def train_arm(name: str, seed: int) -> dict:
        cmd = [sys.executable, __file__, *passthrough, "--one", name, "--seed", str(seed)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"{name} (seed {seed}) failed:\n{proc.stderr[-2000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(train_arm, name, seed) for seed in seeds for name in names]
        for future in futures:  # in submission order, so results.jsonl lists seed by seed
            try:
                row = future.result()
            except RuntimeError as exc:
                for f in futures:
                    f.cancel()
                sys.exit(str(exc))
            rows.append(row)
            print(json.dumps(row), flush=True)
            with open(out / "results.jsonl", "a" if len(rows) > 1 else "w") as f:
                f.write(json.dumps(row) + "\n")
    md = summarize(rows, baseline=args.baseline) if args.seeds is not None else table(rows, args.baseline)
    (out / "table.md").write_text(md + "\n")
    print(md)
    if args.plot:
        print(f"curves: {plot_curves(rows, args.plot)}")


if __name__ == "__main__":
    main()
