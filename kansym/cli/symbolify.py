"""``kansym symbolify``: turn a (pruned) checkpoint into a formula."""

from __future__ import annotations

from pathlib import Path

import click

from kansym.cli.common import (
    check_device, check_output_file, common_options, run_safely, setup_logging, write_output_text,
)
from kansym.cli.options import discover_config, setting_option


@click.command("symbolify")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.option("--latex", "latex_out", default=None, type=click.Path(dir_okay=False), help="Write the LaTeX formula to this file.")
@click.option("--python", "python_out", default=None, type=click.Path(dir_okay=False), help="Write the formula as a numpy function (Python source) to this file.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False), help="Write the formula record (sympy, latex, R², edges) to this JSON file.")
@click.option("--data", default=None, type=click.Path(dir_okay=False), help="Refine and verify on this CSV instead of the checkpoint's calibration rows.")
@setting_option("library")
@setting_option("r2_threshold")
@setting_option("complexity_weight")
@click.option("--force", is_flag=True, help="Overwrite existing output files not written by kansym.")
@common_options
@run_safely
def symbolify_command(checkpoint, latex_out, python_out, json_out, data, lib, r2_threshold, complexity_weight, force, seed, device, quiet):
    """Fit a primitive to every edge of CHECKPOINT and print the composed formula.

    The formula's constants are refit on the data and snapped to simple values;
    its R² on the data and against the model are printed.
    """
    from kansym.cli.report import print_formulas
    from kansym.discover.record import dumps, formula_record, tex_text
    from kansym.discover.stages import symbolify_bundle
    from kansym.io.bundle import ModelBundle

    setup_logging(quiet)
    check_device(device)
    src = Path(checkpoint)
    protect = [src] + ([Path(data)] if data else [])
    outs = [Path(p) for p in (latex_out, python_out, json_out) if p]
    for p in outs:
        check_output_file(p, force=force, protect=protect)
    config = discover_config({"lib": lib, "r2_threshold": r2_threshold, "seed": seed,
                              "complexity_weight": complexity_weight})
    bundle = ModelBundle.load(src)
    x = y = None
    if data:
        from kansym.io.tabular import read_table

        table = read_table(Path(data), list(bundle.output_names), list(bundle.input_names), drop_constant=False)
        x, y = table.x, table.y
    sym, formulas = symbolify_bundle(bundle, config, x, y)
    print_formulas(formulas)
    record = formula_record(formulas[0], bundle, sym, extra={"checkpoint": str(src), "width_pruned": list(bundle.model.width)})
    if latex_out:  # a partial formula's file holds comments only (kansym.discover.record.tex_text)
        write_output_text(Path(latex_out), tex_text(record) if formulas[0].partial else f"{record['latex']}\n")
    if python_out:
        write_output_text(Path(python_out), record["python"])
    if json_out:
        write_output_text(Path(json_out), dumps(record))
