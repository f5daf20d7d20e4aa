"""``kansym fit`` and ``kansym train``: from a CSV to a model (and a formula)."""

from __future__ import annotations

import contextlib
import json
import math
import shlex
import signal
import threading
from pathlib import Path

import click

from kansym.cli.common import CLIError, check_device, common_options, prepare_out_dir, run_safely, setup_logging
from kansym.errors import ConfigError, FitError, KansymError

# exit status of a run stopped by Ctrl-C (128 + SIGINT) or by SIGTERM (128 + 15), as shells report them
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

_terminated = threading.Event()  # set by the SIGTERM handler of _stop_on_sigterm


@contextlib.contextmanager
def _stop_on_sigterm():
    """Within the block, SIGTERM (``kill``, a batch scheduler's time limit) stops training like Ctrl-C.

    The handler raises ``KeyboardInterrupt``, so the training loop rolls back to its
    last completed step and the command saves the same resumable checkpoint as for
    Ctrl-C (exit status 143 instead of 130). A SIGTERM the caller chose to ignore stays
    ignored, and off the main thread (where Python cannot install handlers) nothing
    changes; the previous handler is restored on leaving.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        yield
        return

    def on_sigterm(signum, frame):
        _terminated.set()
        raise KeyboardInterrupt("SIGTERM")

    _terminated.clear()
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _remove_finished_checkpoint(resume: str | None, ckpt: Path, quiet: bool) -> None:
    """After a resumed run has finished, delete the interrupted run's checkpoint it continued, if kansym wrote it there.

    Only the file this command itself saves on an interruption (``OUT/interrupted.pt``
    or ``OUTPUT.interrupted.pt``) is removed; a checkpoint resumed from anywhere else
    is the user's and stays.
    """
    if resume is None or Path(resume).resolve() != ckpt.resolve() or not ckpt.is_file():
        return
    ckpt.unlink()
    if not quiet:
        click.echo(f"removed {ckpt}: the run it saved has now finished", err=True)

EXAMPLES = {
    # name: (target, inputs) of the datasets shipped in kansym/data
    "kepler": ("period_days", ("semi_major_axis_km", "primary_mass_kg")),
    "hello": ("f", ("x1", "x2")),
}


def _split(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    if not names:
        raise ConfigError("an empty list was given; name at least one column")
    return names


def _resolve_data(data: str | None, example: str | None, target: str | None, inputs: str | None):
    from kansym.io.tabular import embedded_dataset

    if data is None and example is None:
        raise CLIError("give a CSV file, or --example NAME for a dataset shipped with kansym (kepler, hello)")
    if data is not None and example is not None:
        raise CLIError("give either a CSV file or --example, not both")
    if example is not None:
        if example not in EXAMPLES:
            raise CLIError(f"unknown example {example!r}; choose from {', '.join(EXAMPLES)}")
        default_target, default_inputs = EXAMPLES[example]
        return embedded_dataset(example), target or default_target, _split(inputs) or default_inputs
    if target is None:
        raise CLIError("--target is required: name the column to predict")
    return Path(data), target, _split(inputs)


def _config(hidden, grid_size, steps, lamb, theta, space, lib, r2_threshold, seed, device, finetune_steps=None):
    from kansym.pipeline import DiscoverConfig

    if lamb is not None and not (lamb >= 0 and math.isfinite(lamb)):
        raise ConfigError(f"--lamb must be a finite number >= 0, got {lamb}")
    if not (theta >= 0 and math.isfinite(theta)):
        raise ConfigError(f"--theta must be a finite number >= 0, got {theta}")
    if finetune_steps is not None and finetune_steps < 1:
        raise ConfigError(f"--finetune-steps must be at least 1, got {finetune_steps}")
    defaults = DiscoverConfig()
    train = defaults.train
    changes = {}
    if steps is not None:
        changes["steps"] = steps
    if lamb is not None:
        changes["lamb"] = lamb
    if changes:
        train = train.replace(**changes)
    finetune = defaults.finetune if finetune_steps is None else defaults.finetune.replace(steps=finetune_steps)
    return DiscoverConfig(
        hidden=_hidden(hidden),
        grid_size=grid_size,
        train=train,
        finetune=finetune,
        theta=theta,
        space=space,
        library=_split(lib),
        r2_threshold=r2_threshold,
        seed=seed,
        device=device,
    )


def check_complexity_weight(value: float) -> float:
    """``--complexity-weight``, a finite number >= 0 (ConfigError otherwise)."""
    if not (value >= 0 and math.isfinite(value)):
        raise ConfigError(f"--complexity-weight must be a finite number >= 0, got {value}")
    return value


def _hidden(value: str) -> tuple[int, ...]:
    try:
        widths = tuple(int(v) for v in value.split(","))
    except ValueError as exc:
        raise ConfigError(f"--hidden takes comma-separated integers like 5 or 5,3, got {value!r}") from exc
    if any(w < 1 for w in widths):
        raise ConfigError(f"--hidden widths must be >= 1, got {value!r}")
    return widths


def _given(ctx: click.Context) -> set[str]:
    """Names of the options given on the command line (not defaults)."""
    return {n for n in ctx.params if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE}


def _load_resume(resume: str | None, config, ctx: click.Context):
    """The checkpoint to resume and the config of the resumed run (saved training options)."""
    if resume is None:
        return None, config
    from kansym.io.bundle import ModelBundle
    from kansym.io.resume import merge_resume_config, read_resume

    bundle = ModelBundle.load(resume)
    point = read_resume(bundle, resume)
    given = _given(ctx)
    config = merge_resume_config(point.config, config, given, "steps" in given)
    if config.train.steps < point.state.step:
        raise ConfigError(f"'{resume}' already completed {point.state.step} steps; give --steps {point.state.step} or more")
    return bundle, config


def _check_same_columns(table, bundle, resume: str) -> None:
    if bundle is not None and (table.input_names != bundle.input_names or table.target_names != bundle.output_names):
        raise ConfigError(
            f"'{resume}' was trained on inputs {', '.join(bundle.input_names)} -> {', '.join(bundle.output_names)}, "
            f"not {', '.join(table.input_names)} -> {', '.join(table.target_names)}; give the same columns"
        )


def _ctrl_c_note() -> str:
    """What Ctrl-C will do to this process, for the announcement of the training loop.

    A process started as a background job by a shell without job control (``cmd &``
    in a script, some CI runners) inherits SIGINT *ignored* (POSIX, Shell Command
    Language §2.11), and Python then installs no ``KeyboardInterrupt`` handler: a
    SIGINT is dropped by the kernel and training goes on. kansym keeps that choice
    of the caller (as every Python program does) but says so instead of promising a
    checkpoint on Ctrl-C.
    """
    import signal

    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if not ignored and hasattr(signal, "pthread_sigmask"):
        ignored = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    if ignored:
        return ("SIGINT is ignored or blocked in this process (a background job of a non-interactive shell?), "
                "so Ctrl-C cannot stop it; SIGTERM (kill PID) still saves a resumable checkpoint")
    return "Ctrl-C saves a resumable checkpoint"


def _announce(table, config, quiet: bool, resumed) -> None:
    """Say what is about to be trained (after the last check that could refuse the data)."""
    from kansym.errors import DataError
    from kansym.pipeline import MIN_ROWS

    if table.n_rows < MIN_ROWS:
        raise DataError(f"kansym needs at least {MIN_ROWS} rows to train and validate a KAN, got {table.n_rows}")
    # The first torch optimizer imports torch._dynamo (seconds on a busy machine); a Ctrl-C
    # inside that import sometimes ended the process by the signal (rc -2) instead of the
    # clean save, so pay it before announcing the (interruptible) training loop.
    import torch

    torch.optim.Adam([torch.zeros(1, requires_grad=True)])
    if quiet:
        return
    width = [table.d_in, *config.hidden, table.d_out]
    start = f" from step {resumed.meta['resume']['fit_state']['step']}" if resumed is not None else ""
    click.echo(f"training a {width} KAN on {table.n_rows} rows for {config.train.steps} steps{start} "
               f"({_ctrl_c_note()})", err=True)


def _resume_command(ctx: click.Context, data, example, target, inputs, dropna, out_flag: str, out: str, ckpt: Path) -> str:
    words = [ctx.find_root().info_name or "kansym", ctx.info_name]
    words += [str(data)] if data is not None else ["--example", example]
    if target:
        words += ["--target", target]
    if inputs:
        words += ["--inputs", inputs]
    if dropna:
        words.append("--dropna")
    words += [out_flag, str(out), "--resume", str(ckpt)]
    return " ".join(shlex.quote(w) for w in words)


def _interrupted(stop: KeyboardInterrupt, path: Path, *, force: bool, protect: list[Path], command: str) -> click.exceptions.Exit:
    """Save the resumable checkpoint of a Ctrl-C'ed run; the caller raises the returned exit (status 130)."""
    from kansym.cli.common import check_output_file

    bundle = getattr(stop, "bundle", None)
    if bundle is None:  # Ctrl-C outside the training loop (fine-tuning, symbolification, set-up)
        what, status = ("terminated (SIGTERM)", EXIT_TERMINATED) if _terminated.is_set() else ("interrupted", EXIT_INTERRUPTED)
        click.echo(f"{what} outside the training loop; nothing was written (run the command again)", err=True)
        return click.exceptions.Exit(status)
    done, total = stop.state.step, bundle.meta["train_config"]["steps"]
    what, status = ("terminated (SIGTERM)", EXIT_TERMINATED) if _terminated.is_set() else ("interrupted", EXIT_INTERRUPTED)
    try:
        check_output_file(path, force=force, protect=protect)
        bundle.save(path, protect=protect)
    except KansymError as exc:
        click.echo(f"{what} after {done} of {total} steps; could not save a resumable checkpoint: {exc}", err=True)
        return click.exceptions.Exit(status)
    click.echo(f"{what} after {done} of {total} steps; saved a resumable checkpoint to {path}; "
               f"continue with: {command}", err=True)
    return click.exceptions.Exit(status)


def data_options(fn):
    fn = click.option("--dropna", is_flag=True, help="Drop rows with NaN/inf in the used columns (and say how many).")(fn)
    fn = click.option("--example", default=None, help="Use a dataset shipped with kansym instead of a file: kepler, hello.")(fn)
    fn = click.option("--inputs", default=None, help="Comma-separated input columns (default: every other numeric column).")(fn)
    fn = click.option("--target", "-t", default=None, help="Column to predict.")(fn)
    fn = click.argument("data", required=False, type=click.Path(dir_okay=False))(fn)
    return fn


def symbolic_options(fn):
    fn = click.option("--r2-threshold", default=0.999, show_default=True, type=click.FloatRange(0, 1, min_open=True), help="R² an edge's primitive must reach.")(fn)
    fn = click.option("--complexity-weight", default=0.05, show_default=True, type=float, help="Weight w of the choice of formula: minimise log10(error) + w * complexity (1, 2 inputs: direct search vs the KAN's formula).")(fn)
    fn = click.option("--lib", default=None, help="Comma-separated primitive names for edges (default: all), e.g. sin,exp,x^2.")(fn)
    fn = click.option("--theta", default=1e-2, show_default=True, type=float, help="Node pruning threshold.")(fn)
    return fn


def model_options(fn):
    fn = click.option("--resume", default=None, type=click.Path(dir_okay=False), help="Continue the run interrupted (Ctrl-C or SIGTERM) into this checkpoint; give the same data.")(fn)
    fn = click.option("--space", type=click.Choice(["auto", "linear", "log"]), default="auto", show_default=True, help="Learn in log space (positive multiplicative laws) or linear space.")(fn)
    fn = click.option("--lamb", default=None, type=float, help="Sparsification strength lamb of the L1 + entropy penalty.  [default: 0.2]")(fn)
    fn = click.option("--steps", default=None, type=click.IntRange(min=1), help="LBFGS steps of the sparsifying training.  [default: 20]")(fn)
    fn = click.option("--grid-size", default=5, show_default=True, type=click.IntRange(min=1), help="B-spline grid intervals G.")(fn)
    fn = click.option("--hidden", default="5", show_default=True, help="Hidden layer widths, e.g. 5 or 5,3.")(fn)
    return fn


@click.command("fit")
@data_options
@model_options
@symbolic_options
@click.option("--out-dir", "-o", default="kansym-out", show_default=True, type=click.Path(), help="Directory for model.pt, pruned.pt, formula.json, formula.tex, graph.json.")
@click.option("--force", is_flag=True, help="Overwrite existing output files not written by kansym.")
@click.option("--plots", default=None, type=click.Path(file_okay=False), help="Also write diagram.png, report.png and curves.png of the run in this directory.")
@click.option("--finetune-steps", default=None, type=click.IntRange(min=1), help="LBFGS steps of the fine-tuning after pruning.  [default: 20]")
@click.option("--backend", type=click.Choice(["kan", "pysr"]), default="kan", show_default=True, help="kan: KAN pipeline; pysr: whole-formula search with PySR (pip install 'kansym[pysr]'; needs Julia), writes formula.json/.tex only.")
@click.option("--units", default=None, help="Units of every input and the target: a CSV (column,unit) or JSON ({\"column\": \"unit\"}) file, or inline \"v=m/s,c=m/s,E=kg*m^2/s^2\"; the law is first reduced to dimensionless groups (AI Feynman's dimensional analysis). Each unit name is a base dimension: write N as kg*m/s^2.")
@common_options
@click.pass_context
@run_safely
def fit_command(ctx, data, target, inputs, example, dropna, hidden, grid_size, steps, lamb, resume, theta, space, lib, r2_threshold, complexity_weight, out_dir, force, plots, finetune_steps, backend, units, seed, device, quiet):
    """Find the law in DATA (a CSV): train a KAN, prune it, symbolify it.

    Prints the formula (LaTeX) and its R², and writes OUT_DIR/model.pt,
    OUT_DIR/pruned.pt, OUT_DIR/formula.json, OUT_DIR/formula.tex and
    OUT_DIR/graph.json (the pruned network with each edge's score and fit).

    \b
    Examples:
      kansym fit data.csv --target y
      kansym fit --example kepler
    """
    from kansym.cli.report import formula_record, print_formulas, write_formula_files
    from kansym.io.tabular import read_table
    from kansym.pipeline import discover

    setup_logging(quiet)
    check_device(device)
    path, target, input_names = _resolve_data(data, example, target, inputs)
    config = _config(hidden, grid_size, steps, lamb, theta, space, lib, r2_threshold, seed, device, finetune_steps)
    config = config.replace(complexity_weight=check_complexity_weight(complexity_weight))
    out = Path(out_dir)
    outputs = ["model.pt", "pruned.pt", "formula.json", "formula.tex", "graph.json"]
    protect = [path]
    prepare_out_dir(out, outputs, force=force, protect=protect, create=False)
    resumed, config = _load_resume(resume, config, ctx)
    table = read_table(path, target, input_names, dropna=dropna)  # notices go to the log (stderr)
    if units is not None:
        return _fit_with_units(table, units, config, out, outputs, force=force, protect=protect, plots=plots,
                               quiet=quiet, theta=theta, data=str(path), backend=backend, resume=resume)
    if backend == "pysr":
        from kansym.cli.report import fit_with_pysr

        return fit_with_pysr(table, out, force=force, protect=protect, seed=seed, data=str(path))
    _check_same_columns(table, resumed, resume)
    _announce(table, config, quiet, resumed)
    try:
        with _stop_on_sigterm():
            result = discover(table.x, table.y, table.input_names, table.target_names, config,
                              progress=None if not quiet else False, resume=resumed)
    except FitError as exc:
        raise CLIError(f"{exc}; nothing was written to {out}") from exc
    except KeyboardInterrupt as stop:
        ckpt = out / "interrupted.pt"
        if getattr(stop, "bundle", None) is not None:
            prepare_out_dir(out, [], force=force, protect=protect)
        command = _resume_command(ctx, data, example, target, inputs, dropna, "-o", out_dir, ckpt)
        raise _interrupted(stop, ckpt, force=force, protect=protect, command=command) from None
    prepare_out_dir(out, outputs, force=force, protect=protect)
    result.trained.save(out / "model.pt", protect=[path])
    result.pruned.save(out / "pruned.pt", protect=[path])
    record = formula_record(result.formulas[0], result.pruned, result.symbolic, extra={
        "width_trained": list(result.trained.model.width),
        "width_pruned": list(result.prune_result.model.width),
        "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
        "data": str(path),
    })
    write_formula_files(out, record)
    from kansym.graph.io import write_json

    write_json(result.graph, out / "graph.json")
    _remove_finished_checkpoint(resume, out / "interrupted.pt", quiet)
    if not quiet:
        click.echo(f"model: {list(result.trained.model.width)} -> pruned {list(result.prune_result.model.width)} (theta={theta})", err=True)
    print_formulas(result.formulas)
    if not quiet:
        click.echo(f"wrote model.pt, pruned.pt, formula.json, formula.tex, graph.json in {out}", err=True)
    if plots is not None:
        from kansym.cli.plot import write_run_plots

        write_run_plots(result, Path(plots), quiet=quiet)


def _fit_with_units(table, units, config, out: Path, outputs, *, force, protect, plots, quiet, theta, data, backend, resume):
    """``kansym fit --units``: dimensional reduction, discovery on the groups, formula in the columns."""
    from kansym.cli.report import formula_record, print_formulas, write_formula_files
    from kansym.dimensional import discover_with_units
    from kansym.units import read_units, read_units_table

    if backend != "kan":
        raise ConfigError("--units works with the kan backend only")
    if resume is not None:
        raise ConfigError("--units cannot be combined with --resume; run the fit again")
    if table.d_out != 1:
        raise ConfigError("--units takes one target column")
    columns = [*table.input_names, *table.target_names]
    read_units(units, columns)  # one-line error naming a missing column or an unreadable unit
    table_units = {c: read_units_table(units)[c] for c in columns}
    _announce(table, config, True, None)  # only the row check: what is trained depends on the groups
    if not quiet:
        click.echo(f"reducing {table.target_names[0]}({', '.join(table.input_names)}) to dimensionless groups, "
                   f"then discovering on {table.n_rows} rows (Ctrl-C stops, nothing is written)", err=True)
    try:
        result = discover_with_units(table.x, table.y, table.input_names, table.target_names[0], table_units, config,
                                     progress=None if not quiet else False)
    except FitError as exc:
        raise CLIError(f"{exc}; nothing was written to {out}") from exc
    except KeyboardInterrupt:
        click.echo("interrupted; nothing was written (run the command again)", err=True)
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    written = ["formula.json", "formula.tex"] + (outputs[:2] + ["graph.json"] if result.trained is not None else [])
    prepare_out_dir(out, written, force=force, protect=protect)
    extra = {"inputs": list(table.input_names), "units": result.units,
             "reduction": None if result.reduction is None else result.reduction.to_dict(),
             "seconds": {k: round(v, 3) for k, v in result.seconds.items()}, "data": data}
    if result.trained is not None:
        result.trained.save(out / "model.pt", protect=protect)
        result.pruned.save(out / "pruned.pt", protect=protect)
        from kansym.graph.io import write_json

        write_json(result.graph, out / "graph.json")
        extra.update(width_trained=list(result.trained.model.width), width_pruned=list(result.prune_result.model.width))
    write_formula_files(out, formula_record(result.formulas[0], result.pruned, result.symbolic, extra=extra))
    if not quiet and result.reduction is not None:
        red = result.reduction.to_dict()
        groups = ", ".join(f"{k} = {v}" for k, v in red["groups"].items()) or "none"
        click.echo(f"units: {table.target_names[0]} = {red['monomial']} * f(groups); groups: {groups}", err=True)
        if result.trained is not None:
            click.echo(f"model (on the groups): {list(result.trained.model.width)} -> pruned "
                       f"{list(result.prune_result.model.width)} (theta={theta})", err=True)
    print_formulas(result.formulas)
    if not quiet:
        click.echo(f"wrote {', '.join(written)} in {out}", err=True)
    if plots is not None:
        if result.trained is None:
            click.echo("no plots: the law is a constant times a monomial, no KAN was trained", err=True)
        else:
            from kansym.cli.plot import write_run_plots

            write_run_plots(result, Path(plots), quiet=quiet)


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
    from kansym.cli.common import check_output_file
    from kansym.io.tabular import read_table
    from kansym.pipeline import train_bundle

    setup_logging(quiet)
    check_device(device)
    path, target, input_names = _resolve_data(data, example, target, inputs)
    config = _config(hidden, grid_size, steps, lamb, 1e-2, space, None, 0.999, seed, device)
    out = Path(output)
    protect = [path]
    check_output_file(out, force=force, protect=protect)
    resumed, config = _load_resume(resume, config, ctx)
    table = read_table(path, target, input_names, dropna=dropna)  # notices go to the log (stderr)
    _check_same_columns(table, resumed, resume)
    _announce(table, config, quiet, resumed)
    try:
        with _stop_on_sigterm():
            bundle = train_bundle(table.x, table.y, table.input_names, table.target_names, config,
                                  progress=None if not quiet else False, resume=resumed)
    except FitError as exc:
        kept = f"{out} was left as it was" if out.exists() else f"{out} was not written"
        raise CLIError(f"{exc}; {kept}") from exc
    except KeyboardInterrupt as stop:
        ckpt = out.with_name(f"{out.stem}.interrupted.pt")
        command = _resume_command(ctx, data, example, target, inputs, dropna, "-o", output, ckpt)
        raise _interrupted(stop, ckpt, force=force, protect=protect, command=command) from None
    bundle.save(out, protect=protect)
    _remove_finished_checkpoint(resume, out.with_name(f"{out.stem}.interrupted.pt"), quiet)
    hist = bundle.meta["history"]
    click.echo(json.dumps({"checkpoint": str(out), "width": list(bundle.model.width), "space": bundle.meta["space"],
                           "train_loss": hist["train_loss"][-1] if hist.get("train_loss") else None}))
