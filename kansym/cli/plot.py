"""``kansym plot``: pictures of a checkpoint (diagram, one edge, formula report, training curves)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from kansym.cli.common import CLIError, check_device, check_output_file, common_options, run_safely, setup_logging

KINDS = ("diagram", "edge", "report", "curves")


def _parse_edge(value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        return tuple(int(v) for v in value.split(","))
    except ValueError:
        raise CLIError(f"--edge takes LAYER,IN,OUT (three integers, e.g. 0,1,0), got {value!r}") from None


def check_writable(path: Path) -> None:
    """Fail before any work when ``path`` cannot be an image file we can write."""
    from kansym.plot._mpl import output_format

    output_format(path)
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise CLIError(f"cannot write {path}: {parent} is not a writable directory; choose another -o")
    try:  # os.access says yes to root everywhere; a real probe catches /proc, read-only mounts
        tempfile.TemporaryFile(dir=parent).close()
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {parent} does not accept files ({exc.strerror}); choose another -o") from None


def _data(bundle, data: str | None):
    if data is None:
        return None, None
    from kansym.io.tabular import read_table

    table = read_table(Path(data), list(bundle.output_names), list(bundle.input_names), drop_constant=False)
    return table.x, table.y


def draw(bundle, kind: str, *, edge=None, fits_path=None, show_pruned=False, beta=3.0, theta=None, x=None, y=None, front=True):
    """The figure of ``kind`` for a bundle, and a one-line summary of what was drawn.

    ``fits_path`` is a ``formula.json`` of this checkpoint (:mod:`kansym.discover.record`);
    without one the report symbolifies the checkpoint here (seconds).
    """
    from kansym import plot as P
    from kansym.discover.record import read_record

    record = read_record(fits_path) if fits_path else None
    fits = record.edge_fits(bundle.model.width) if record else None
    if kind == "diagram":
        r = P.plot_diagram(bundle, beta=beta, fits=fits, show_pruned=show_pruned, theta=theta, x=x)
        return r.figure, f"{r.n_edges_drawn} of {r.n_edges_live} live edges drawn ({r.n_insets} with their function)"
    if kind == "edge":
        if edge is None:
            raise CLIError("--kind edge needs --edge LAYER,IN,OUT (e.g. --edge 0,0,0)")
        r = P.plot_edge(bundle, edge, fits=fits, x=x)
        fit = f"{r.fit.primitive}, R² = {r.r2:.6f}" if r.fit is not None else "no fit"
        return r.figure, f"edge {','.join(map(str, r.edge))}: {fit}"
    if kind == "report":
        formula, tried = _report_formula(bundle, record, front, x, y)
        r = P.plot_report(bundle, formula, front=tried, x=x, y=y)
        return r.figure, f"formula {r.formula}; {r.n_front} formula{'' if r.n_front == 1 else 's'} on the complexity/error panel"
    r = P.plot_curves(bundle.meta)
    return r.figure, f"{r.n_steps} training steps, {r.n_finetune_steps} fine-tuning steps"


def _report_formula(bundle, record, front: bool, x, y):
    """The report's formula and front: the record's (its answer starred), else symbolified here."""
    from kansym.discover.config import DiscoverConfig
    from kansym.discover.stages import occam_candidates, symbolify_bundle

    if record is not None:
        formula = record.expr(bundle.input_names, positive=bundle.transform.log_space)
        tried = record.formula(bundle.input_names).front or None  # the fit's own front (parsed), its answer marked
    else:
        formula = symbolify_bundle(bundle, DiscoverConfig(), x, y)[1][0].expr
        tried = None
    if tried is None and front and len(bundle.output_names) == 1:
        tried = occam_candidates(bundle)
    return formula, tried


def _sibling_fits(src: Path, bundle, quiet: bool) -> str | None:
    """The ``formula.json`` that ``kansym fit`` wrote next to ``src`` when its formula and edge fits
    are of this very model (its inputs, its width); else None. The report then shows the formula
    and the front that fit printed instead of symbolifying again."""
    from kansym.discover.record import sibling_record

    record = sibling_record(src, bundle)
    if (record is None or record.inputs != tuple(bundle.input_names)
            or record.data.get("width_pruned", list(bundle.model.width)) != list(bundle.model.width)):
        return None
    if not quiet:
        click.echo(f"using {record.source} (give --fits to choose another)", err=True)
    return record.source


@click.command("plot")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.option("--kind", "-k", type=click.Choice(KINDS), default="diagram", show_default=True, help="What to draw.")
@click.option("--output", "-o", default=None, type=click.Path(dir_okay=False), help="Image file: .png, .pdf or .svg (default: CHECKPOINT.KIND.png).")
@click.option("--edge", default=None, help="Edge for --kind edge, as LAYER,IN,OUT (e.g. 0,1,0).")
@click.option("--show-pruned", is_flag=True, help="Diagram: draw removed nodes and edges in grey.")
@click.option("--beta", default=3.0, show_default=True, type=float, help="Diagram: edge opacity is tanh(beta * normalised L1 score).")
@click.option("--theta", default=None, type=float, help="Diagram: treat nodes that pruning at THETA removes as pruned.")
@click.option("--fits", default=None, type=click.Path(dir_okay=False), help="formula.json of this checkpoint: primitives on the diagram, fit on the edge plot, formula of the report.")
@click.option("--front/--no-front", default=True, show_default=True, help="Report: search the formulas of the Occam step and draw complexity vs error (seconds).")
@click.option("--data", default=None, type=click.Path(dir_okay=False), help="CSV with the model's columns to plot on (default: the checkpoint's calibration rows).")
@click.option("--force", is_flag=True, help="Overwrite an existing image not written by kansym.")
@common_options
@run_safely
def plot_command(checkpoint, kind, output, edge, show_pruned, beta, theta, fits, front, data, force, seed, device, quiet):
    """Draw CHECKPOINT: the KAN diagram, one edge, the formula report or the training curves.

    \b
    Examples:
      kansym plot out/pruned.pt --fits out/formula.json -o diagram.png
      kansym plot out/model.pt --show-pruned --theta 0.01 -o full.svg
      kansym plot out/pruned.pt --kind edge --edge 0,0,0 --fits out/formula.json -o edge.pdf
      kansym plot out/pruned.pt --kind report --fits out/formula.json -o report.png
      kansym plot out/pruned.pt --kind curves -o curves.png
    """
    from kansym.io.bundle import ModelBundle

    setup_logging(quiet)
    check_device(device)
    src = Path(checkpoint)
    out = Path(output) if output else src.with_name(f"{src.stem}.{kind}.png")
    parsed_edge = _parse_edge(edge)
    if not (0 <= beta < float("inf")):
        raise CLIError(f"--beta must be a finite number >= 0, got {beta}")
    if theta is not None and not (0 <= theta < float("inf")):
        raise CLIError(f"--theta must be a finite number >= 0, got {theta}")
    check_writable(out)
    protect = [src] + [Path(p) for p in (fits, data) if p]
    check_output_file(out, force=force, protect=protect)  # an image kansym wrote is replaced
    bundle = ModelBundle.load(src)
    if parsed_edge is not None:
        from kansym.graph.build import check_edge

        check_edge(parsed_edge, bundle.model.width)
    x, y = _data(bundle, data)
    if kind == "report" and fits is None:
        fits = _sibling_fits(src, bundle, quiet)
    figure, summary = draw(bundle, kind, edge=parsed_edge, fits_path=fits, show_pruned=show_pruned, beta=beta, theta=theta, x=x, y=y, front=front)
    from kansym.plot._mpl import save_figure

    save_figure(figure, out)
    click.echo(f"wrote {out}: {summary}")


RUN_PLOTS = ("diagram.png", "report.png", "curves.png")


def check_run_plots(out_dir: Path, *, force: bool, protect: list[Path]) -> None:
    """Before a fit: refuse ``--plots DIR`` when a plot would replace a file kansym did not write.

    Raises
    ------
    ConfigError
        ``DIR`` is a file, or holds ``diagram.png``/``report.png``/``curves.png`` that are
        not images kansym wrote (``--force`` overrides).
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise CLIError(f"--plots {out_dir} is not a directory; choose another")
    for name in RUN_PLOTS:
        path = out_dir / name
        check_output_file(path, force=force, protect=protect)


def write_run_plots(result, out_dir: Path, *, quiet: bool = False) -> list[Path]:
    """``kansym fit --plots DIR``: diagram, report and curves of a :class:`~kansym.discover.result.Discovery`
    (after :func:`check_run_plots`)."""
    from kansym import plot as P

    out_dir.mkdir(parents=True, exist_ok=True)
    pruned = result.pruned
    front = result.formulas[0].front or None  # the front kansym fit printed, its answer marked "chosen"
    figures = {
        "diagram.png": P.plot_diagram(pruned, fits=dict(result.symbolic.edges)).figure,
        "report.png": P.plot_report(pruned, result.formulas[0].expr, front=front).figure,
        "curves.png": P.plot_curves(pruned.meta).figure,
    }
    paths = [P.save_figure(fig, out_dir / name) for name, fig in figures.items()]
    if not quiet:
        click.echo(f"wrote {', '.join(figures)} in {out_dir}", err=True)
    return paths
