"""``kansym predict``: the model's and the formula's predictions for new rows."""

from __future__ import annotations

from pathlib import Path

import click

from kansym.cli.common import check_device, check_output_file, common_options, run_safely, setup_logging


@click.command("predict")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--formula", "formula_path", default=None, type=click.Path(dir_okay=False), help="formula.json whose formula also predicts (default: the formula.json next to CHECKPOINT, when it belongs to it).")
@click.option("--output", "-o", default=None, type=click.Path(dir_okay=False), help="CSV to write (default: standard output).")
@click.option("--force", is_flag=True, help="Overwrite an existing output file not written by kansym.")
@common_options
@run_safely
def predict_command(checkpoint, data, formula_path, output, force, seed, device, quiet):
    """Predict DATA's rows with CHECKPOINT's model and with its formula.

    DATA must have the checkpoint's input columns (by name, any order, other columns
    ignored). The output CSV holds the input columns, TARGET_model and, when a formula
    is found, TARGET_formula; when DATA also holds the target, the R² of each is
    printed on standard error.

    \b
    Examples:
      kansym predict kansym-out/pruned.pt new_rows.csv -o predictions.csv
      kansym predict model.pt new_rows.csv --formula kansym-out/formula.json
    """
    import pandas as pd

    from kansym.discover.record import read_record
    from kansym.errors import DataError
    from kansym.io.atomic import atomic_write_text
    from kansym.io.bundle import ModelBundle
    from kansym.io.tabular import columns_from_frame, read_frame
    from kansym.symbolic.verify import r2_score

    setup_logging(quiet)
    check_device(device)
    src, rows = Path(checkpoint), Path(data)
    out = Path(output) if output else None
    if out is not None:
        check_output_file(out, force=force, protect=[src, rows] + ([Path(formula_path)] if formula_path else []))
    bundle = ModelBundle.load(src)
    frame = read_frame(rows)
    x = columns_from_frame(frame, list(bundle.input_names), source=str(rows))
    record = None
    if formula_path is not None:
        record = read_record(formula_path)
        if not record.belongs_to(bundle):
            raise DataError(f"{formula_path} describes {record.target}({', '.join(record.inputs)}), not this "
                            f"checkpoint's {', '.join(bundle.output_names)}({', '.join(bundle.input_names)}); "
                            "pass the formula.json written with it")
    else:
        record = _sibling_record(src, bundle, quiet)
    result = pd.DataFrame({name: x[:, i] for i, name in enumerate(bundle.input_names)})
    y_model = bundle.predict(x)  # (N, d_out)
    for k, target in enumerate(bundle.output_names):
        result[f"{target}_model"] = y_model[:, k]
    if record is not None:
        result[f"{record.target}_formula"] = record.predict(x, bundle.input_names)
    text = result.to_csv(index=False)  # shortest round-trip repr of every float
    if out is None:
        click.echo(text, nl=False)
    else:
        atomic_write_text(out, text)
    if not quiet:
        known = [t for t in bundle.output_names if t in frame.columns]
        for target in known:
            y = columns_from_frame(frame, [target], source=str(rows), role="target")[:, 0]
            if len(y) >= 2:
                parts = [f"model R² = {r2_score(y, result[f'{target}_model'].to_numpy(), nonfinite='-inf'):.6f}"]
                if record is not None and record.target == target:
                    parts.append(f"formula R² = {r2_score(y, result[f'{target}_formula'].to_numpy(), nonfinite='-inf'):.6f}")
                click.echo(f"{target} on {len(y)} rows of {rows}: {', '.join(parts)}", err=True)
        where = f" to {out}" if out is not None else ""
        what = "the model and the formula" if record is not None else "the model (no formula.json found; --formula)"
        click.echo(f"predicted {len(result)} rows with {what}{where}", err=True)


def _sibling_record(src: Path, bundle, quiet: bool):
    """The formula.json next to ``src`` when it belongs to this checkpoint, else None."""
    from kansym.discover.record import read_record
    from kansym.errors import KansymError

    path = src.with_name("formula.json")
    if not path.is_file():
        return None
    try:
        record = read_record(path)
        if not record.belongs_to(bundle) or record.numeric_edges:
            return None
        record.expr(bundle.input_names)
    except KansymError:
        return None
    if not quiet:
        click.echo(f"using the formula of {path} (give --formula to choose another)", err=True)
    return record
