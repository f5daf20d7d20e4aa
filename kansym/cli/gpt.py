"""``kansym gpt``: train, sample, prune and inspect KAN-GPTs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kansym.cli.common import CLIError, check_output_file, common_options, prepare_out_dir, run_safely, setup_logging
from kansym.config import MAX_STEPS
# the names of kansym.nn.bases.BASES, spelled out so `kansym --help` does not import torch
BASES = ("bspline", "chebyshev", "fourier", "rbf", "poly")

# CLI option -> GPTTrainConfig field, for the options a resumed run takes from the command line.
_TRAIN_FIELDS = {
    "max_iters": "max_iters", "batch_size": "batch_size", "lr": "lr", "min_lr": "min_lr",
    "warmup_iters": "warmup_iters", "lr_decay_iters": "lr_decay_iters", "weight_decay": "weight_decay",
    "grad_clip": "grad_clip", "eval_interval": "eval_interval", "eval_iters": "eval_iters", "seed": "seed",
    "device": "device", "dtype": "dtype", "compile": "compile", "lamb": "lamb", "mu1": "mu1", "mu2": "mu2",
    "ortho_lambda": "ortho_lambda", "ortho_kind": "ortho_kind", "wo_decay": "wo_decay",
}
_MODEL_OPTIONS = ("ffn", "fc_init", "basis", "grid_size", "degree", "kan_hidden", "kan_rank", "n_layer", "n_head", "n_embd", "block_size", "dropout")


@click.group("gpt")
def gpt_group() -> None:
    """KAN-GPT: a character-level GPT whose MLP blocks are KANs.

    \b
    kansym gpt train --text input.txt --ffn kan -o run
    kansym gpt sample run/best.pt --prompt "ROMEO:" --tokens 300
    kansym gpt prune run/best.pt --theta 0.01 -o run/pruned.pt
    kansym gpt edges run/best.pt --layer 0 -o edges.png
    kansym gpt heads run/best.pt --text input.txt --plots heads/ --reorder -o run/reordered.pt
    """


@gpt_group.command("train")
@click.option("--text", required=True, type=click.Path(path_type=Path), help="UTF-8 text file; its characters are the vocabulary.")
@click.option("--ffn", default="mlp", show_default=True, help="mlp, kan, kan-residual, cheby (KAN on the Chebyshev basis), swiglu, grkan, or one per layer: mlp,kan,kan,mlp.")
@click.option("--fc-init", default="default", show_default=True, type=click.Choice(["default", "gpt2", "variance"]),
              help="Init of each FFN's input projection: gpt2 N(0, 0.02^2); variance: unit-variance hidden pre-activations "
                   "(KAT); default: variance for grkan, gpt2 for mlp/swiglu, the KAN layer's own for KAN FFNs.")
@click.option("--basis", default="bspline", show_default=True, type=click.Choice(BASES), help="Basis of the KAN edge functions.")
@click.option("--grid-size", default=5, show_default=True, type=click.IntRange(min=1), help="Grid intervals (bspline, rbf) or frequencies (fourier).")
@click.option("--degree", default=3, show_default=True, help="Spline order (bspline) or polynomial degree (chebyshev, poly).")
@click.option("--kan-hidden", default=None, type=int, help="KAN FFN hidden width [default: match the MLP's parameters].")
@click.option("--rank", "kan_rank", default=None, type=int, help="Factorise the KAN FFN coefficients through this rank (1..min(hidden, n_embd)) [default: full].")
@click.option("--n-layer", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--n-head", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--n-embd", default=128, show_default=True, type=click.IntRange(min=1))
@click.option("--block-size", default=64, show_default=True, type=click.IntRange(min=1), help="Context length in characters.")
@click.option("--dropout", default=0.0, show_default=True)
@click.option("--batch-size", default=12, show_default=True, type=click.IntRange(min=1))
@click.option("--max-iters", default=2000, show_default=True, type=click.IntRange(1, MAX_STEPS))
@click.option("--lr", default=1e-3, show_default=True, help="Peak learning rate (AdamW).")
@click.option("--min-lr", default=None, type=float, help="Final learning rate [default: lr/10].")
@click.option("--warmup-iters", default=100, show_default=True)
@click.option("--lr-decay-iters", default=None, type=int, help="End of the cosine decay [default: max-iters].")
@click.option("--weight-decay", default=0.1, show_default=True)
@click.option("--grad-clip", default=1.0, show_default=True, help="Global gradient-norm clip (0: off).")
@click.option("--eval-interval", default=250, show_default=True, type=click.IntRange(min=1))
@click.option("--eval-iters", default=20, show_default=True, type=click.IntRange(min=1), help="Batches per split at each evaluation.")
@click.option("--lamb", default=0.0, show_default=True, help="Weight of the L1 + entropy sparsification of KAN edges.")
@click.option("--mu1", default=1.0, show_default=True, help="L1 weight inside the sparsification.")
@click.option("--mu2", default=1.0, show_default=True, help="Entropy weight inside the sparsification.")
@click.option("--ortho-lambda", default=0.0, show_default=True, help="Weight of the attention-head orthogonality penalty on W_O (mean over layers and head pairs).")
@click.option("--ortho-kind", default="principal", show_default=True, type=click.Choice(["frobenius", "principal"]), help="Overlap penalised: the seed's Frobenius score (basis dependent) or principal angles (mean cos^2, basis invariant).")
@click.option("--wo-decay", default=0.0, show_default=True, help="Weight of a plain L2 penalty mean_l ||W_O||_F^2 on the attention output projections (control arm).")
@click.option("--dtype", default="float32", show_default=True, type=click.Choice(["float32", "float64"]))
@click.option("--compile", "compile_", is_flag=True, help="torch.compile the model for training.")
@click.option("--no-amp", is_flag=True, help="No bf16 autocast on CUDA.")
@click.option("--out-dir", "-o", required=True, type=click.Path(file_okay=False, path_type=Path), help="Writes best.pt, last.pt, log.jsonl.")
@click.option("--resume", is_flag=True, help="Continue the run in OUT_DIR (same data order and RNG).")
@click.option("--force", is_flag=True, help="Replace a run already in OUT_DIR.")
@common_options
@click.pass_context
@run_safely
def train_command(ctx, text, out_dir, resume, force, quiet, no_amp, compile_, **opts):
    """Train a KAN-GPT on a text file (nanoGPT's char recipe by default).

    Runs data-parallel under `torchrun --nproc_per_node N -m kansym gpt train ...`.
    """
    from kansym.cli.common import check_device
    from kansym.errors import ConfigError
    from kansym.gpt.config import GPTTrainConfig, KANGPTConfig
    from kansym.gpt.data import load_char_data
    from kansym.gpt.train import train
    from kansym.io.checkpoint import load_checkpoint

    setup_logging(quiet)
    check_device(opts["device"])
    opts["compile"] = compile_
    given = {n for n in opts if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE}
    if compile_:
        given.add("compile")
    try:
        model_config = KANGPTConfig(
            ffn=opts["ffn"], fc_init=opts["fc_init"], kan_basis=opts["basis"], kan_grid_size=opts["grid_size"], kan_degree=opts["degree"],
            kan_hidden=opts["kan_hidden"], kan_rank=opts["kan_rank"], n_layer=opts["n_layer"], n_head=opts["n_head"], n_embd=opts["n_embd"],
            block_size=opts["block_size"], dropout=opts["dropout"], seed=opts["seed"],
        )
    except ConfigError as exc:  # name the flag the user typed, not the config field
        raise ConfigError(str(exc).replace("kan_rank", "--rank")) from None
    if model_config.kan_rank is not None and all(kind == "mlp" for kind in model_config.ffn):
        raise ConfigError("--rank factorises KAN FFNs, but --ffn gives every layer an MLP; drop --rank or use a KAN FFN")
    fields = {f: opts[o] for o, f in _TRAIN_FIELDS.items()}
    config = GPTTrainConfig(amp=not no_amp, **fields)
    if resume:
        saved = load_checkpoint(out_dir / "last.pt", kind="kan-gpt").get("train", {}).get("config")
        if saved is not None:
            changes = {_TRAIN_FIELDS[n]: opts[n] for n in given if n in _TRAIN_FIELDS}
            if no_amp:
                changes["amp"] = False
            config = GPTTrainConfig.from_dict(saved).replace(**changes)
        if not given & set(_MODEL_OPTIONS):
            model_config = None
    if not resume:  # a text it cannot train on is refused before the output folder is made
        load_char_data(text, val_fraction=config.val_fraction)
    prepare_out_dir(out_dir, ["best.pt", "last.pt", "log.jsonl"], force=force or resume, protect=[text])
    progress = not quiet and sys.stderr.isatty()
    result = train(model_config, config, text, out_dir, resume=resume, overwrite=force, progress=progress)
    if config.warmup_iters >= config.max_iters and not quiet:  # a short run never reached --lr
        click.echo(f"note: --warmup-iters {config.warmup_iters} >= --max-iters {config.max_iters}: the learning rate "
                   f"stayed below --lr for the whole run (lower --warmup-iters for short runs)", err=True)
    click.echo(json.dumps({
        "iter": result.iter, "best_val_loss": result.best_val_loss, "last_val_loss": result.last_val_loss,
        "best": str(out_dir / "best.pt"), "last": str(out_dir / "last.pt"), "log": str(out_dir / "log.jsonl"),
    }))


@gpt_group.command("sample")
@click.argument("checkpoint", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--prompt", default="", show_default=False, help="Text to continue [default: a newline, or the vocabulary's first character when the training text had no newline].")
@click.option("--tokens", default=200, show_default=True, help="Characters to generate.")
@click.option("--temperature", default=1.0, show_default=True, help="Softmax temperature (0: greedy).")
@click.option("--top-k", default=None, type=int, help="Sample among the K most likely characters only.")
@common_options
@run_safely
def sample_command(checkpoint, prompt, tokens, temperature, top_k, seed, device, quiet):
    """Generate text from a KAN-GPT CHECKPOINT (same seed, same text)."""
    from kansym.cli.common import check_device
    from kansym.gpt.checkpoint import load_gpt
    from kansym.gpt.sample import sample_text

    setup_logging(quiet)
    loaded = load_gpt(checkpoint)
    model = loaded.model.to(check_device(device))
    text = sample_text(model, loaded.vocab, prompt, tokens, temperature=temperature, top_k=top_k, seed=seed)
    click.echo(text)


@gpt_group.command("prune")
@click.argument("checkpoint", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--theta", default=1e-2, show_default=True, type=float, help="A KAN hidden unit survives iff its strength (see --score) exceeds theta (a fraction in (0, 1] with --relative).")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Pruned checkpoint.")
@click.option("--text", default=None, type=click.Path(path_type=Path), help="Also report val loss before and after on this text; needed by --score sample and output.")
@click.option("--score", default="weight", show_default=True, type=click.Choice(["weight", "sample", "output"]), help="Unit strength: min of strongest in/out edge, weight-based (|w_b| + |w_s| mean|c|) or sampled mean |phi(x)| (KAN paper eq. 2.17); or 'output', the RMS norm of the unit's contribution to the FFN output. sample/output use --score-batches training batches of --text.")
@click.option("--score-batches", default=8, show_default=True, type=click.IntRange(min=1), help="Training batches (batch size x block size tokens each) for --score sample and output.")
@click.option("--relative", is_flag=True, help="theta is a fraction of each layer's strongest unit instead of an absolute score.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@common_options
@run_safely
def prune_command(checkpoint, theta, output, text, score, score_batches, relative, force, seed, device, quiet):
    """Remove weak KAN FFN hidden units (KAN paper §2.5.1) into a smaller checkpoint; prints a JSON report."""
    import torch

    from kansym.gpt.checkpoint import load_gpt, save_gpt
    from kansym.gpt.config import GPTTrainConfig
    from kansym.gpt.data import get_batch, load_char_data
    from kansym.gpt.prune import prune_gpt
    from kansym.gpt.train import estimate_loss

    from kansym.cli.common import check_device

    setup_logging(quiet)
    check_device(device)
    if score != "weight" and text is None:
        raise CLIError(f"--score {score} needs --text (the tokens the edges are sampled on)")
    if relative and not 0 < theta <= 1:
        raise CLIError(f"with --relative, --theta is a fraction of each layer's strongest unit in (0, 1], got {theta:g}")
    check_output_file(output, force=force, protect=[checkpoint] + ([text] if text else []))
    loaded = load_gpt(checkpoint)
    data = config = idx = None
    if text is not None:
        saved = loaded.checkpoint.get("train", {}).get("config")
        config = GPTTrainConfig.from_dict(saved) if saved else GPTTrainConfig(seed=seed)
        data = load_char_data(text, val_fraction=config.val_fraction, vocab=loaded.vocab)
    if score != "weight":
        gen = torch.Generator().manual_seed(seed)
        batches = [get_batch(data.train, config.batch_size, loaded.model.config.block_size, gen)[0] for _ in range(score_batches)]
        idx = torch.cat(batches)  # (score_batches * B, T)
    result = prune_gpt(loaded.model, theta, idx=idx, score=score, relative=relative)
    report = dict(result.report)
    if text is not None:
        report["val_loss_before"] = estimate_loss(loaded.model, data, config)["val"]
        report["val_loss_after"] = estimate_loss(result.model, data, config)["val"]
    kept = {str(k): v for k, v in result.kept.items()}
    save_gpt(output, result.model, loaded.vocab, prune={"source": str(checkpoint), "kept": kept, **report})
    click.echo(json.dumps({"checkpoint": str(output), **report}))


@gpt_group.command("edges")
@click.argument("checkpoint", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--layer", required=True, type=int, help="Block whose KAN FFN to draw.")
@click.option("--part", default="fc", show_default=True, type=click.Choice(["fc", "proj"]), help="First (C->h) or second (h->C) KAN layer.")
@click.option("--top", default=16, show_default=True, help="Number of edges to draw.")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Image file (PNG).")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@common_options
@run_safely
def edges_command(checkpoint, layer, part, top, output, force, seed, device, quiet):
    """Plot the strongest edge functions of one KAN FFN of CHECKPOINT."""
    from kansym.gpt.checkpoint import load_gpt
    from kansym.gpt.edges import plot_edges

    from kansym.cli.common import check_device
    from kansym.plot._mpl import output_format

    setup_logging(quiet)
    check_device(device)
    output_format(output)  # an unknown image suffix is a one-line error before any work
    if top < 1:
        raise CLIError(f"--top must be at least 1, got {top}")
    check_output_file(output, force=force, protect=[checkpoint])
    loaded = load_gpt(checkpoint)
    click.echo(str(plot_edges(loaded.model, layer, output, part=part, top=top)))


@gpt_group.command("heads")
@click.argument("checkpoint", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--text", default=None, type=click.Path(path_type=Path), help="Held-out text (its validation split) for attention similarity and ablation importance.")
@click.option("--layer", "layers", multiple=True, type=int, help="Layer to measure (repeatable) [default: all].")
@click.option("--batches", default=4, show_default=True, help="Validation batches (batch size x block size characters each) of --text.")
@click.option("--metric", default="principal", show_default=True, type=click.Choice(["principal", "frobenius", "principal_max", "js"]), help="Matrix whose hierarchical clustering orders the heads (js needs --text).")
@click.option("--reorder", is_flag=True, help="Write a copy with the heads of each measured layer reordered by --metric (same logits, bit for bit) to -o.")
@click.option("--output", "-o", default=None, type=click.Path(dir_okay=False, path_type=Path), help="Reordered checkpoint (with --reorder).")
@click.option("--plots", default=None, type=click.Path(file_okay=False, path_type=Path), help="Directory for heads_before.png, heads_after.png and importance.png.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per layer instead of tables.")
@click.option("--force", is_flag=True, help="Overwrite existing output files.")
@common_options
@run_safely
def heads_command(checkpoint, text, layers, batches, metric, reorder, output, plots, as_json, force, seed, device, quiet):
    """Measure the attention heads of a KAN-GPT CHECKPOINT: overlap of W_O (seed Frobenius score and
    principal angles), attention similarity, ablation importance; reorder similar heads together."""
    import torch

    from kansym.gpt.checkpoint import load_gpt, save_gpt
    from kansym.gpt.config import GPTTrainConfig
    from kansym.gpt.data import get_batch, load_char_data
    from kansym.gpt.head_order import head_orders, reorder_heads
    from kansym.gpt.head_report import analyse_heads, format_layer, reorder_by

    setup_logging(quiet)
    if reorder != (output is not None):
        raise CLIError("--reorder and -o go together: --reorder -o OUT.pt writes the reordered checkpoint")
    if metric == "js" and text is None:
        raise CLIError("--metric js needs --text (attention is measured on real text)")
    if batches < 1:
        raise CLIError(f"--batches must be at least 1, got {batches}")
    protect = [checkpoint] + ([text] if text else [])
    if output is not None:
        check_output_file(output, force=force, protect=protect)
    if plots is not None:
        names = ["heads_before.png", "heads_after.png"] + (["importance.png"] if text else [])
        prepare_out_dir(plots, names, force=force, protect=protect, create=False)
    from kansym.cli.common import check_device

    dev = check_device(device)
    loaded = load_gpt(checkpoint)
    model = loaded.model.to(dev)
    pairs = None
    if text is not None:
        saved = loaded.checkpoint.get("train", {}).get("config")
        config = GPTTrainConfig.from_dict(saved) if saved else GPTTrainConfig(seed=seed)
        data = load_char_data(text, val_fraction=config.val_fraction, vocab=loaded.vocab)
        gen = torch.Generator().manual_seed(seed)
        pairs = [get_batch(data.val, config.batch_size, model.config.block_size, gen, dev) for _ in range(batches)]
    report = analyse_heads(model, pairs, list(layers) or None)
    orders = reorder_by(report, metric)
    if as_json:
        for r in report:
            click.echo(json.dumps({**r.summary(), "cluster_order": orders[r.layer], "metric": metric}))
    else:
        for r in report:
            click.echo(format_layer(r))
            click.echo(f"clustered order by {metric} (stored heads): {' '.join(map(str, orders[r.layer]))}\n")
    if plots is not None:
        from kansym.plot._mpl import save_figure
        from kansym.plot.heads import plot_head_importance, plot_head_matrices

        prepare_out_dir(plots, names, force=force, protect=protect)
        save_figure(plot_head_matrices(report, title=f"{checkpoint.name}: stored order").figure, plots / "heads_before.png")
        save_figure(plot_head_matrices(report, orders, title=f"{checkpoint.name}: reordered by {metric}").figure, plots / "heads_after.png")
        if text is not None:
            save_figure(plot_head_importance(report).figure, plots / "importance.png")
        if not quiet:
            click.echo(f"plots: {', '.join(str(plots / n) for n in names)}", err=True)
    if reorder:
        new = reorder_heads(model, orders)
        train_meta = {k: v for k, v in loaded.checkpoint.get("train", {}).items() if k not in ("optimizer", "rng")}
        record = {"source": str(checkpoint), "metric": metric, "permutation": {str(k): v for k, v in orders.items()},
                  "head_order": head_orders(new)}
        save_gpt(output, new, loaded.vocab, train=train_meta, heads=record)
        if not quiet:
            click.echo(f"reordered checkpoint: {output}", err=True)
