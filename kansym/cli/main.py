"""The ``kansym`` command group."""

from __future__ import annotations

import sys

import click

from kansym.version import __version__
from kansym.cli.fit import fit_command
from kansym.cli.graph import graph_command
from kansym.cli.plot import plot_command
from kansym.cli.gpt import gpt_group
from kansym.cli.predict import predict_command
from kansym.cli.prune import prune_command
from kansym.cli.symbolify import symbolify_command
from kansym.cli.train import train_command


class KansymGroup(click.Group):
    """A click group whose every error is one ``error: ...`` line on stderr, exit status 2.

    click's own usage errors (a bad option value, an unknown option, a missing
    argument) would print a usage block; users of a scientific tool want one line.
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: D102
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            hint = f" (see: {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
            click.echo(f"error: {exc.format_message()}{hint}", err=True)
            sys.exit(2)
        except click.ClickException as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group("kansym", cls=KansymGroup, context_settings={"help_option_names": ["-h", "--help"]})
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
cli.add_command(predict_command)
cli.add_command(gpt_group)
cli.add_command(plot_command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="kansym")
