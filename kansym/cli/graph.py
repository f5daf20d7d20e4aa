"""``kansym graph``: export a checkpoint's network as a graph file."""

from __future__ import annotations

from pathlib import Path

import click

from kansym.cli.common import check_device, check_output_file, common_options, remember_output, run_safely, setup_logging


@click.command("graph")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["json", "graphml"]), default="json", show_default=True)
@click.option("--output", "-o", default=None, type=click.Path(dir_okay=False), help="Output file (default: CHECKPOINT with .graph.json / .graphml).")
@click.option("--fits", default=None, type=click.Path(dir_okay=False), help="A formula.json (from kansym fit or symbolify --json) whose edge fits are attached to the edges.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file not written by kansym.")
@common_options
@run_safely
def graph_command(checkpoint, fmt, output, fits, force, seed, device, quiet):
    """Write CHECKPOINT's network as a networkx graph (node-link JSON or GraphML).

    Nodes are (layer, index) with CSV names on inputs and outputs; edges carry
    their L1 score on the calibration rows.
    """
    from kansym.discover.record import read_record
    from kansym.graph.build import to_networkx
    from kansym.graph.io import write_graphml, write_json
    from kansym.io.bundle import ModelBundle
    from kansym.prune.scores import edge_scores

    setup_logging(quiet)
    check_device(device)
    src = Path(checkpoint)
    out = Path(output) if output else src.with_suffix(".graph.json" if fmt == "json" else ".graphml")
    check_output_file(out, force=force, protect=[src])
    bundle = ModelBundle.load(src)
    scores = edge_scores(bundle.model, bundle.model_inputs())
    edge_fits = read_record(fits).edge_fits(bundle.model.width) if fits else None
    graph = to_networkx(
        bundle.model,
        input_names=bundle.input_names,
        output_names=bundle.output_names,
        edge_scores=scores,
        edge_fits=edge_fits,
    )
    (write_json if fmt == "json" else write_graphml)(graph, out)
    remember_output(out)
    click.echo(f"wrote {out} ({graph.number_of_nodes()} nodes, {graph.number_of_edges()} edges)")

