"""The ``kansym`` command group."""

from __future__ import annotations

import click

from kansym import __version__
from kansym.cli.fit import fit_command, train_command
from kansym.cli.graph import graph_command
from kansym.cli.gpt import gpt_group
from kansym.cli.prune import prune_command
from kansym.cli.symbolify import symbolify_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kansym")
def cli() -> None:
    """kansym: find the laws hidden in data with Kolmogorov-Arnold Networks.

    \b
    The main job:   kansym fit data.csv --target y
    Step by step:   kansym train -> kansym prune -> kansym symbolify / kansym graph
    """


cli.add_command(fit_command)
cli.add_command(train_command)
cli.add_command(prune_command)
cli.add_command(symbolify_command)
cli.add_command(graph_command)
cli.add_command(gpt_group)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="kansym")
