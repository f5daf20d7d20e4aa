"""``kansym predict``: the model's and the formula's predictions for new rows."""

from __future__ import annotations

from pathlib import Path

import click

from kansym.cli.common import (
    check_device, check_output_file, common_options, run_safely, setup_logging, write_output_text,
)


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
    ignored); for a model of a `fit --units` run, trained on dimensionless groups, the
    table's columns, mapped to the groups by the reduction the checkpoint carries. The
    output CSV holds the input columns, TARGET_model and, when a formula is found,
    TARGET_formula; when DATA also holds the target, the R² of each is printed on
    standard error. A note there says when rows lie outside the range the model was
    trained on (extrapolation) or the formula has no finite value on some rows.

    CHECKPOINT may also be a formula.json alone (a `fit --units` run whose law is a
    monomial trains no KAN and writes only that): the output then holds the input
    columns and TARGET_formula.

    \b
    Examples:
      kansym predict kansym-out/pruned.pt new_rows.csv -o predictions.csv
      kansym predict model.pt new_rows.csv --formula kansym-out/formula.json
      kansym predict kansym-out/formula.json new_rows.csv
    """
    import pandas as pd

    from kansym.discover.record import read_record
    from kansym.discover.units import model_columns, model_target, outside_training_range, predict_columns
    from kansym.errors import DataError
    from kansym.io.bundle import ModelBundle
    from kansym.io.tabular import columns_from_frame, read_frame

    setup_logging(quiet)
    check_device(device)
    src, rows = Path(checkpoint), Path(data)
    out = Path(output) if output else None
    if out is not None:
        check_output_file(out, force=force, protect=[src, rows] + ([Path(formula_path)] if formula_path else []))
    if src.suffix.lower() == ".json":  # a formula.json alone (e.g. a --units monomial: no KAN was trained)
        if formula_path is not None:
            raise DataError(f"{src} is a formula record already; --formula goes with a checkpoint (.pt)")
        _predict_formula(read_record(src), rows, out, quiet)
        return
    bundle = ModelBundle.load(src)
    columns, targets = model_columns(bundle), model_target(bundle)  # a --units model: the groups' columns
    frame = read_frame(rows)
    x = columns_from_frame(frame, list(columns), source=str(rows))
    record = _formula_record(formula_path, src, bundle, quiet)
    result = pd.DataFrame({name: x[:, i] for i, name in enumerate(columns)})
    y_model = predict_columns(bundle, x)  # (N, d_out)
    for k, target in enumerate(targets):
        result[f"{target}_model"] = y_model[:, k]
    if record is not None:
        result[f"{record.target}_formula"] = record.predict(x, columns)
    _emit(result, out)
    if quiet:
        return
    outside = outside_training_range(bundle, x)
    if outside:
        click.echo(f"note: {outside} of {len(result)} rows lie outside the range the model was trained on "
                   "(extrapolation: the model and the formula may disagree there)", err=True)
    if record is not None:
        _note_nonfinite(result[f"{record.target}_formula"].to_numpy())
    _echo_r2(frame, targets, result, record, rows)
    where = f" to {out}" if out is not None else ""
    what = "the model and the formula" if record is not None else "the model (no formula.json found; --formula)"
    click.echo(f"predicted {len(result)} rows with {what}{where}", err=True)


def _formula_record(formula_path, src: Path, bundle, quiet: bool):
    """The formula to predict with: ``--formula``'s record (which must be of ``bundle``'s columns and
    target), else the checkpoint's sibling ``formula.json`` when it is one of a closed form; or None.

    Raises
    ------
    DataError
        ``--formula`` is a record of other columns or another target.
    """
    from kansym.discover.record import read_record, sibling_record
    from kansym.discover.units import model_columns, model_target
    from kansym.errors import DataError

    if formula_path is not None:
        record = read_record(formula_path)
        if not record.belongs_to(bundle):
            columns, targets = model_columns(bundle), model_target(bundle)
            raise DataError(f"{formula_path} describes {record.target}({', '.join(record.inputs)}), not this "
                            f"checkpoint's {', '.join(targets)}({', '.join(columns)}); pass the formula.json written with it")
        return record
    record = sibling_record(src, bundle)
    if record is not None and record.numeric_edges:
        return None
    if record is not None and not quiet:
        click.echo(f"using the formula of {record.source} (give --formula to choose another)", err=True)
    return record


def _echo_r2(frame, targets, result, record, rows: Path) -> None:
    """The model's and the formula's R² on each target the table holds (standard error)."""
    from kansym.io.tabular import columns_from_frame
    from kansym.symbolic.verify import r2_score

    for target in [t for t in targets if t in frame.columns]:
        y = columns_from_frame(frame, [target], source=str(rows), role="target")[:, 0]
        if len(y) >= 2:
            parts = [f"model R² = {r2_score(y, result[f'{target}_model'].to_numpy(), nonfinite='-inf'):.6f}"]
            if record is not None and record.target == target:
                parts.append(f"formula R² = {r2_score(y, result[f'{target}_formula'].to_numpy(), nonfinite='-inf'):.6f}")
            click.echo(f"{target} on {len(y)} rows of {rows}: {', '.join(parts)}", err=True)


def _predict_formula(record, rows: Path, out: Path | None, quiet: bool) -> None:
    """``kansym predict formula.json DATA``: the formula's predictions, and its R² when DATA has the target."""
    import pandas as pd

    from kansym.io.tabular import columns_from_frame, read_frame
    from kansym.symbolic.verify import r2_score

    frame = read_frame(rows)
    columns = list(record.inputs)
    x = columns_from_frame(frame, columns, source=str(rows))
    result = pd.DataFrame({name: x[:, i] for i, name in enumerate(columns)})
    result[f"{record.target}_formula"] = record.predict(x, columns)
    _emit(result, out)
    if quiet:
        return
    pred = result[f"{record.target}_formula"].to_numpy()
    _note_nonfinite(pred)
    if record.target in frame.columns and len(result) >= 2:
        y = columns_from_frame(frame, [record.target], source=str(rows), role="target")[:, 0]
        click.echo(f"{record.target} on {len(y)} rows of {rows}: formula R² = "
                   f"{r2_score(y, pred, nonfinite='-inf'):.6f}", err=True)
    where = f" to {out}" if out is not None else ""
    click.echo(f"predicted {len(result)} rows with the formula of {record.source}{where}", err=True)


def _emit(result, out: Path | None) -> None:
    """The predictions as CSV (shortest round-trip repr of every float) to ``out`` or stdout."""
    text = result.to_csv(index=False)
    if out is None:
        click.echo(text, nl=False)
    else:
        write_output_text(out, text)


def _note_nonfinite(values) -> None:
    """A note on stderr when the formula has no finite value on some rows."""
    import numpy as np

    bad = int(np.sum(~np.isfinite(values)))
    if bad:
        click.echo(f"note: the formula gives no finite value on {bad} of {len(values)} rows "
                   "(outside its domain: a log or root of a negative value, a division by zero, an overflow)", err=True)
