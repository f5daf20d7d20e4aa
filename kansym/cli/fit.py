"""``kansym fit``: from a CSV to a pruned KAN and a verified formula (the main job)."""

from __future__ import annotations

from pathlib import Path

import click

from kansym.cli.common import CLIError, check_device, common_options, prepare_out_dir, run_safely, setup_logging
from kansym.cli.lock import dir_lock_path, output_lock
from kansym.cli.options import (
    data_options, discover_config, model_options, parse_drop, resolve_data, setting_option, size_options,
    symbolic_options,
)
from kansym.cli.run import (
    check_same_columns, ctrl_c_note, load_resume, prepare_training, remove_finished_checkpoint, resume_command,
    save_interrupted, stop_on_sigterm,
)
from kansym.deadline import Deadline
from kansym.errors import ConfigError, FitError

MODEL_OUTPUTS = ["model.pt", "pruned.pt", "graph.json"]
FORMULA_OUTPUTS = ["formula.json", "formula.tex"]


@click.command("fit")
@data_options
@model_options
@symbolic_options
@size_options
@click.option("--out-dir", "-o", default="kansym-out", show_default=True, type=click.Path(), help="Directory for model.pt, pruned.pt, formula.json, formula.tex, graph.json.")
@click.option("--force", is_flag=True, help="Overwrite existing output files not written by kansym.")
@click.option("--plots", default=None, type=click.Path(file_okay=False), help="Also write diagram.png, report.png and curves.png of the run in this directory.")
@setting_option("finetune_steps")
@click.option("--backend", type=click.Choice(["kan", "pysr"]), default="kan", show_default=True, help="kan: KAN pipeline; pysr: whole-formula search with PySR (pip install 'kansym[pysr]'; needs Julia), writes formula.json/.tex only.")
@setting_option("time_limit", metavar="SECONDS")
@click.option("--units", default=None, help="Units of every input and the target: a CSV (column,unit) or JSON ({\"column\": \"unit\"}) file, or inline \"v=m/s,c=m/s,E=kg*m^2/s^2\"; the law is first reduced to dimensionless groups (AI Feynman's dimensional analysis). Each unit name is a base dimension: write N as kg*m/s^2.")
@common_options
@click.pass_context
@run_safely
def fit_command(ctx, data, target, inputs, example, dropna, hidden, grid_size, steps, lamb, resume, theta, space, lib, r2_threshold, complexity_weight, max_train_rows, no_screen, keep_inputs, drop, out_dir, force, plots, finetune_steps, backend, time_limit, units, seed, device, quiet):
    """Find the law in DATA (a CSV): train a KAN, prune it, symbolify it.

    Prints the formula (LaTeX) and its R², and writes OUT_DIR/model.pt,
    OUT_DIR/pruned.pt, OUT_DIR/formula.json, OUT_DIR/formula.tex and
    OUT_DIR/graph.json (the pruned network with each edge's score and fit).
    With --units, a law that is a constant times a monomial of the units
    needs no KAN: then only OUT_DIR/formula.json and OUT_DIR/formula.tex.
    An input that equals the target up to scale (a likely copy of it) is
    named on a NOTE line; --drop leaves such columns out.

    \b
    Examples:
      kansym fit data.csv --target y
      kansym fit --example kepler
    """
    from kansym.io.tabular import leak_record, proportional_inputs, read_table

    deadline = Deadline(time_limit or None)  # from the start: reading a large CSV counts too
    setup_logging(quiet)
    check_device(device)
    drop = parse_drop(drop, inputs, keep_inputs)
    path, target, input_names = resolve_data(data, example, target, inputs, drop)
    config = discover_config(ctx.params)
    out = Path(out_dir)
    protect = [path]
    prepare_out_dir(out, MODEL_OUTPUTS + FORMULA_OUTPUTS, force=force, protect=protect, create=False)
    if plots is not None:
        from kansym.cli.plot import check_run_plots

        check_run_plots(Path(plots), force=force, protect=protect)
    with output_lock(dir_lock_path(out), out, "-o"):  # one run at a time in OUT_DIR, from here to its last write
        if units is not None and (backend != "kan" or resume is not None):
            raise ConfigError("--units works with the kan backend only" if backend != "kan" else
                              "--units cannot be combined with --resume; run the fit again")
        point, config = load_resume(resume, config, ctx)
        table = read_table(path, target, input_names, dropna=dropna, drop=drop)  # notices go to the log (stderr)
        leaks = proportional_inputs(table.x, table.y, table.input_names, table.target_names)
        extra = {"data": str(path), **({"dropped_inputs": list(drop)} if drop else {}), **leak_record(leaks)}
        notes = _leak_notes(leaks, explicit_inputs=inputs is not None)
        if backend == "pysr":
            return _fit_with_pysr(table, out, force=force, protect=protect, seed=seed, extra=extra, notes=notes)
        check_same_columns(table, point, resume)
        from kansym.discover.screen import check_keep_inputs

        check_keep_inputs(config.keep_inputs, table.input_names)  # a bad name: one line before any work
        try:
            with stop_on_sigterm():
                if units is not None:
                    result = _discover_with_units(table, units, config, quiet, deadline)
                else:
                    _announce(table, config, quiet)
                    from kansym.discover.run import discover

                    result = discover(table.x, table.y, table.input_names, table.target_names, config,
                                      progress=None if not quiet else False, resume=point, deadline=deadline)
        except FitError as exc:
            raise CLIError(f"{exc}; nothing was written to {out}") from exc
        except KeyboardInterrupt as stop:
            ckpt = out / "interrupted.pt"
            if getattr(stop, "bundle", None) is not None:
                prepare_out_dir(out, [], force=force, protect=protect)
            command = resume_command(ctx, data, example, target, inputs, dropna, "-o", out_dir, ckpt)
            raise save_interrupted(stop, ckpt, force=force, protect=protect, command=command) from None
        from kansym.discover.progress import time_limit_entry

        extra.update(time_limit_entry(result))  # nothing when the limit did not bind
        written = write_fit_outputs(out, result, extra, force=force, protect=protect)
        remove_finished_checkpoint(resume, out / "interrupted.pt", quiet)
        _report(result, notes, written, out, plots, quiet)


def _report(result, notes: list[str], written: list[str], out: Path, plots: str | None, quiet: bool) -> None:
    """Print the run's formulas, its notes and what it wrote in ``out``; write its plots in ``plots`` when asked."""
    from kansym.cli.report import print_formulas, print_reduction
    from kansym.discover.progress import cut_short_line

    if not quiet:
        print_reduction(result)
    print_formulas(result.formulas)
    for note in notes:
        click.echo(note)
    cut = cut_short_line(result)
    if cut:
        click.echo(f"NOTE: {cut} (a larger --time-limit, or 0 for none, lets every stage finish)")
    if not quiet:
        click.echo(f"wrote {', '.join(written)} in {out}", err=True)
    if plots is not None:
        if result.trained is None:
            click.echo("no plots: the law is a constant times a monomial, no KAN was trained", err=True)
        else:
            from kansym.cli.plot import write_run_plots

            write_run_plots(result, Path(plots), quiet=quiet)


def _announce(table, config, quiet: bool) -> None:
    """Refuse what the run would refuse later (rows, memory), pay torch's first-optimiser import,
    and say what Ctrl-C does (before training)."""
    from kansym.discover.run import check_run

    check_run(table.n_rows, table.d_in, table.d_out, config)
    prepare_training()
    if not quiet:
        names = table.input_names
        inputs = ", ".join(names) if len(names) <= 12 else f"{len(names)} columns ({', '.join(names[:8])}, ...)"
        click.echo(f"discovering {', '.join(table.target_names)} from {inputs} on {table.n_rows} rows "
                   f"({ctrl_c_note()})", err=True)


def _discover_with_units(table, units, config, quiet: bool, deadline):
    """``kansym fit --units``: dimensional reduction, discovery on the groups, the formula in the columns."""
    from kansym.cli.run import interrupted_status
    from kansym.discover.dimensional import discover_with_units
    from kansym.discover.units import read_units, read_units_table

    if table.d_out != 1:
        raise ConfigError("--units takes one target column")
    columns = [*table.input_names, *table.target_names]
    read_units(units, columns)  # one-line error naming a missing column or an unreadable unit
    table_units = {c: read_units_table(units)[c] for c in columns}
    from kansym.discover.result import MIN_ROWS
    from kansym.errors import DataError

    if table.n_rows < MIN_ROWS:  # what is trained depends on the groups: only the row check here
        raise DataError(f"kansym needs at least {MIN_ROWS} rows to train and validate a KAN, got {table.n_rows}")
    prepare_training()
    if not quiet:
        click.echo(f"reducing {table.target_names[0]}({', '.join(table.input_names)}) to dimensionless groups, "
                   f"then discovering on {table.n_rows} rows (Ctrl-C stops, nothing is written)", err=True)
    try:
        result = discover_with_units(table.x, table.y, table.input_names, table.target_names[0], table_units, config,
                                     progress=None if not quiet else False, deadline=deadline)
    except KeyboardInterrupt:  # the run on the groups is not resumable (--units refuses --resume)
        what, status = interrupted_status()
        click.echo(f"{what}; nothing was written (run the command again)", err=True)
        raise click.exceptions.Exit(status) from None
    return result


def write_fit_outputs(out: Path, result, extra: dict, *, force: bool, protect: list[Path]) -> list[str]:
    """Write the models (when a KAN was trained), the graph and the formula files of a run; their names.

    ``formula.json`` holds only what the data, options and seed determine, so two runs of
    one command write it byte for byte the same; the stages' wall-clock seconds go to
    ``model.pt``'s meta (``"seconds"``), whose bytes differ between runs anyway.
    """
    from kansym.discover.record import discovery_record, write_formula_files

    trained = result.trained is not None
    names = (MODEL_OUTPUTS if trained else []) + FORMULA_OUTPUTS
    prepare_out_dir(out, names, force=force, protect=protect)
    if trained:
        from kansym.graph.io import write_json

        seconds = {k: round(v, 3) for k, v in result.seconds.items()}
        result.trained.replace_model(result.trained.model, seconds=seconds).save(out / "model.pt", protect=protect)
        result.pruned.save(out / "pruned.pt", protect=protect)
        write_json(result.graph, out / "graph.json")
    write_formula_files(out, discovery_record(result, extra))
    return names


def _leak_notes(leaks, *, explicit_inputs: bool) -> list[str]:
    """One ``NOTE`` line per input that equals the target up to scale
    (:func:`kansym.io.tabular.proportional_inputs`), with how to leave it out."""
    return [f"NOTE: {leak.text}; to find the law without it, "
            + ("leave it out of --inputs" if explicit_inputs else f"rerun with --drop {leak.column}") for leak in leaks]


def _fit_with_pysr(table, out: Path, *, force: bool, protect, seed: int, extra: dict, notes: list[str]) -> None:
    """``kansym fit --backend pysr``: search with PySR, verify, print, write formula.json/.tex."""
    from kansym.cli.report import print_formulas
    from kansym.discover.pysr import discover_pysr, PySRConfig
    from kansym.discover.record import formula_record, write_formula_files

    formula = discover_pysr(table.x, table.y[:, 0], table.input_names, table.target_names[0],
                            PySRConfig(seed=seed), seed=seed)
    prepare_out_dir(out, FORMULA_OUTPUTS, force=force, protect=protect)
    write_formula_files(out, formula_record(formula, None, None, extra={"backend": "pysr", **extra}))
    print_formulas([formula])
    for note in notes:
        click.echo(note)
