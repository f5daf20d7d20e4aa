"""``kansym prune``: remove weak hidden nodes from a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kansym.cli.common import check_device, check_output_file, common_options, run_safely, setup_logging
from kansym.cli.options import setting_option

PRUNE_R2_DROP = 0.01  # a loss of the model's R² by pruning above this is warned of


@click.command("prune")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@setting_option("theta")
@click.option("--output", "-o", default=None, type=click.Path(dir_okay=False), help="Pruned checkpoint (default: CHECKPOINT with -pruned before .pt).")
@click.option("--data", default=None, type=click.Path(dir_okay=False), help="Score nodes on this CSV instead of the checkpoint's calibration rows.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@common_options
@run_safely
def prune_command(checkpoint, theta, output, data, force, seed, device, quiet):
    """Prune CHECKPOINT's hidden nodes (KAN paper §2.5.1) into a smaller model.

    Node scores are computed on the calibration rows stored in the checkpoint
    (or on --data). Prints the report as JSON.
    """
    from kansym.io.bundle import ModelBundle
    from kansym.discover.stages import prune_stage

    setup_logging(quiet)
    check_device(device)
    src = Path(checkpoint)
    out = Path(output) if output else src.with_name(f"{src.stem}-pruned.pt")
    check_output_file(out, force=force, protect=[src] + ([Path(data)] if data else []))
    bundle = ModelBundle.load(src)
    if data:
        from kansym.io.tabular import read_table

        table = read_table(Path(data), list(bundle.output_names), list(bundle.input_names), drop_constant=False)
        bundle = ModelBundle.create(bundle.model, bundle.transform, bundle.input_names, bundle.output_names, table.x, table.y, meta=bundle.meta, seed=seed)
    pruned, result = prune_stage(bundle, theta=theta)
    pruned.save(out, protect=[src])
    report = pruned.meta["prune_report"]
    if not quiet:
        click.echo(result.report.summary(), err=True)
        click.echo(f"model R² on the calibration rows: {report['r2_before']:.6f} before, {report['r2_after']:.6f} after", err=True)
    if report["r2_after"] < report["r2_before"] - PRUNE_R2_DROP:
        click.echo(
            f"warning: pruning lowered the model's R² by more than {PRUNE_R2_DROP:g}; the removed nodes carried "
            "an offset or signal: lower --theta, or use `kansym fit`, which fine-tunes after pruning",
            err=True,
        )
    click.echo(json.dumps({"checkpoint": str(out), **report}))
