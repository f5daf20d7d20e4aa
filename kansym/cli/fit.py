"""``kansym fit`` and ``kansym train``: from a CSV to a model (and a formula)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kansym.cli.common import CLIError, check_device, common_options, prepare_out_dir, run_safely, setup_logging
from kansym.errors import ConfigError

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


def _config(hidden, grid_size, steps, lamb, theta, space, lib, r2_threshold, seed, device):
    from kansym.pipeline import DiscoverConfig
    from kansym.train.fit import TrainConfig

    if lamb is not None and lamb < 0:
        raise ConfigError(f"--lamb must be >= 0, got {lamb}")
    train = TrainConfig()
    changes = {}
    if steps is not None:
        changes["steps"] = steps
    if lamb is not None:
        changes["lamb"] = lamb
    if changes:
        train = train.replace(**changes)
    return DiscoverConfig(
        hidden=_hidden(hidden),
        grid_size=grid_size,
        train=train,
        theta=theta,
        space=space,
        library=_split(lib),
        r2_threshold=r2_threshold,
        seed=seed,
        device=device,
    )


def _hidden(value: str) -> tuple[int, ...]:
    try:
        widths = tuple(int(v) for v in value.split(","))
    except ValueError as exc:
        raise ConfigError(f"--hidden takes comma-separated integers like 5 or 5,3, got {value!r}") from exc
    if any(w < 1 for w in widths):
        raise ConfigError(f"--hidden widths must be >= 1, got {value!r}")
    return widths


def data_options(fn):
    fn = click.option("--dropna", is_flag=True, help="Drop rows with NaN/inf in the used columns (and say how many).")(fn)
    fn = click.option("--example", default=None, help="Use a dataset shipped with kansym instead of a file: kepler, hello.")(fn)
    fn = click.option("--inputs", default=None, help="Comma-separated input columns (default: every other numeric column).")(fn)
    fn = click.option("--target", "-t", default=None, help="Column to predict.")(fn)
    fn = click.argument("data", required=False, type=click.Path(dir_okay=False))(fn)
    return fn


def symbolic_options(fn):
    fn = click.option("--r2-threshold", default=0.999, show_default=True, type=float, help="R² an edge's primitive must reach.")(fn)
    fn = click.option("--lib", default=None, help="Comma-separated primitive names for edges (default: all), e.g. sin,exp,x^2.")(fn)
    fn = click.option("--theta", default=1e-2, show_default=True, type=float, help="Node pruning threshold.")(fn)
    return fn


def model_options(fn):
    fn = click.option("--space", type=click.Choice(["auto", "linear", "log"]), default="auto", show_default=True, help="Learn in log space (positive multiplicative laws) or linear space.")(fn)
    fn = click.option("--lamb", default=None, type=float, help="Sparsification strength lamb of the L1 + entropy penalty.  [default: 0.2]")(fn)
    fn = click.option("--steps", default=None, type=int, help="LBFGS steps of the sparsifying training.  [default: 20]")(fn)
    fn = click.option("--grid-size", default=5, show_default=True, type=int, help="B-spline grid intervals G.")(fn)
    fn = click.option("--hidden", default="5", show_default=True, help="Hidden layer widths, e.g. 5 or 5,3.")(fn)
    return fn


@click.command("fit")
@data_options
@model_options
@symbolic_options
@click.option("--out-dir", "-o", default="kansym-out", show_default=True, type=click.Path(), help="Directory for model.pt, pruned.pt, formula.json, formula.tex, graph.json.")
@click.option("--force", is_flag=True, help="Overwrite existing output files not written by kansym.")
@click.option("--plots", default=None, type=click.Path(file_okay=False), help="Also write diagram.png, report.png and curves.png of the run in this directory.")
@common_options
@run_safely
def fit_command(data, target, inputs, example, dropna, hidden, grid_size, steps, lamb, theta, space, lib, r2_threshold, out_dir, force, plots, seed, device, quiet):
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
    config = _config(hidden, grid_size, steps, lamb, theta, space, lib, r2_threshold, seed, device)
    out = Path(out_dir)
    outputs = ["model.pt", "pruned.pt", "formula.json", "formula.tex", "graph.json"]
    prepare_out_dir(out, outputs, force=force, protect=[path], create=False)
    table = read_table(path, target, input_names, dropna=dropna)  # notices go to the log (stderr)
    result = discover(table.x, table.y, table.input_names, table.target_names, config, progress=None if not quiet else False)
    prepare_out_dir(out, outputs, force=force, protect=[path])
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
    if not quiet:
        click.echo(f"model: {list(result.trained.model.width)} -> pruned {list(result.prune_result.model.width)} (theta={theta})", err=True)
    print_formulas(result.formulas)
    if not quiet:
        click.echo(f"wrote model.pt, pruned.pt, formula.json, formula.tex, graph.json in {out}", err=True)
    if plots is not None:
        from kansym.cli.plot import write_run_plots

        write_run_plots(result, Path(plots), quiet=quiet)


@click.command("train")
@data_options
@model_options
@click.option("--output", "-o", default="model.pt", show_default=True, type=click.Path(dir_okay=False), help="Checkpoint to write.")
@click.option("--force", is_flag=True, help="Overwrite an existing checkpoint.")
@common_options
@run_safely
def train_command(data, target, inputs, example, dropna, hidden, grid_size, steps, lamb, space, output, force, seed, device, quiet):
    """Train a sparsified KAN on DATA and save it (no pruning, no formula).

    The checkpoint carries the column names, the unit transform and calibration rows,
    so `kansym prune` and `kansym symbolify` need no data file.
    """
    from kansym.cli.common import check_output_file
    from kansym.io.tabular import read_table
    from kansym.pipeline import train_bundle

    setup_logging(quiet)
    check_device(device)
    path, target, input_names = _resolve_data(data, example, target, inputs)
    config = _config(hidden, grid_size, steps, lamb, 1e-2, space, None, 0.999, seed, device)
    out = Path(output)
    check_output_file(out, force=force, protect=[path])
    table = read_table(path, target, input_names, dropna=dropna)  # notices go to the log (stderr)
    bundle = train_bundle(table.x, table.y, table.input_names, table.target_names, config, progress=None if not quiet else False)
    bundle.save(out, protect=[path])
    hist = bundle.meta["history"]
    click.echo(json.dumps({"checkpoint": str(out), "width": list(bundle.model.width), "space": bundle.meta["space"],
                           "train_loss": hist["train_loss"][-1] if hist.get("train_loss") else None}))
