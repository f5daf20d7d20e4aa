"""The answer on the terminal: echoes the lines of :mod:`kansym.discover.wording` (the files are :mod:`kansym.discover.record`'s)."""

from __future__ import annotations

import click

from kansym.discover.wording import formula_report, reduction_lines

__all__ = ["print_formulas", "print_reduction"]


def print_reduction(result) -> None:
    """The dimensional reduction of a ``--units`` run, if any (stderr; the stages logged the rest):
    :func:`kansym.discover.wording.reduction_lines`."""
    for line in reduction_lines(result):
        click.echo(line, err=True)


def print_formulas(formulas, *, front: bool = True) -> None:
    """Print each formula (LaTeX and sympy) with its verified R² and the Pareto front (stdout):
    :func:`kansym.discover.wording.formula_report`, the wording ``KANRegressor.summary()`` gives too.

    The R² on the held-out rows (the fitting rows if none were held out) is printed
    next to the formula with the model's; a formula whose R² is below the model's by
    more than 0.01, or with numeric edges, is printed with a ``WARNING`` line right
    under it (:attr:`kansym.discover.result.Formula.warning`). A partial formula (numeric
    edges) is not printed as ``target = ...``: its first line says that no closed form was
    verified, the next gives the best closed form found with its R², the third says where the
    partial formula is kept, without printing it (:func:`kansym.discover.wording.answer_lines`);
    the front lists its formulas without numeric edges and counts the others.

    The ``sympy:`` line and the front name each column by its identifier, as ``formula.json``
    does (:func:`kansym.symbolic.parse.identifiers`), so the text parses back; when one of them
    differs from its column, the line ends with the ``symbols`` map (``{identifier: column}``).
    """
    for f in formulas:
        for line in formula_report(f, front=front):
            click.echo(line)
