"""``kansym train``: train a sparsified KAN on a CSV and save it (no pruning, no formula)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kansym.cli.common import CLIError, check_device, check_output_file, common_options, run_safely, setup_logging
from kansym.cli.lock import file_lock_path, output_lock
from kansym.cli.options import data_options, discover_config, model_options, resolve_data
from kansym.cli.run import (
    check_same_columns, ctrl_c_note, load_resume, prepare_training, remove_finished_checkpoint, resume_command,
    save_interrupted, stop_on_sigterm,
)
from kansym.errors import FitError


@click.command("train")
@data_options
@model_options
@click.option("--output", "-o", default="model.pt", show_default=True, type=click.Path(dir_okay=False), help="Checkpoint to write.")
@click.option("--force", is_flag=True, help="Overwrite an existing checkpoint.")
@common_options
@click.pass_context
@run_safely
def train_command(ctx, data, target, inputs, example, dropna, hidden, grid_size, steps, lamb, resume, space, output, force, seed, device, quiet):
    """Train a sparsified KAN on DATA and save it (no pruning, no formula).

    The checkpoint carries the column names, the unit transform and calibration rows,
    so `kansym prune` and `kansym symbolify` need no data file. Ctrl-C saves the run
    so far to OUTPUT's name with .interrupted.pt; --resume continues it to the same model.
    If the loss turns NaN/inf, the run stops and nothing is written.
    """
    from kansym.discover.run import check_run, train
    from kansym.io.tabular import read_table

    setup_logging(quiet)
    check_device(device)
    path, target, input_names = resolve_data(data, example, target, inputs)
    config = discover_config(ctx.params).replace(time_limit=None)  # no --time-limit: no limit
    out = Path(output)
    protect = [path]
    check_output_file(out, force=force, protect=protect)
    with output_lock(file_lock_path(out), out, "-o"):  # one run at a time writing OUTPUT
        point, config = load_resume(resume, config, ctx)
        table = read_table(path, target, input_names, dropna=dropna)  # notices go to the log (stderr)
        check_same_columns(table, point, resume)
        check_run(table.n_rows, table.d_in, table.d_out, config, holdout=False)
        prepare_training()
        if not quiet:
            click.echo(ctrl_c_note(), err=True)
        try:
            with stop_on_sigterm():
                bundle = train(table.x, table.y, table.input_names, table.target_names, config,
                               progress=None if not quiet else False, resume=point)
        except FitError as exc:
            kept = f"{out} was left as it was" if out.exists() else f"{out} was not written"
            raise CLIError(f"{exc}; {kept}") from exc
        except KeyboardInterrupt as stop:
            ckpt = out.with_name(f"{out.stem}.interrupted.pt")
            command = resume_command(ctx, data, example, target, inputs, dropna, "-o", output, ckpt)
            raise save_interrupted(stop, ckpt, force=force, protect=protect, command=command) from None
        bundle.save(out, protect=protect)
        remove_finished_checkpoint(resume, out.with_name(f"{out.stem}.interrupted.pt"), quiet)
        hist = bundle.meta["history"]
        click.echo(json.dumps({"checkpoint": str(out), "width": list(bundle.model.width), "space": bundle.meta["space"],
                               "train_loss": hist["train_loss"][-1] if hist.get("train_loss") else None}))
