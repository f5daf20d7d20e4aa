"""Formatting of discovered formulas and models for the terminal (the files are :mod:`kansym.discover.record`'s)."""

from __future__ import annotations

import click
from sympy.core.function import AppliedUndef

from kansym.discover.choice import identifier_names, report_lines, rows_label
from kansym.symbolic.parse import rename_symbols

__all__ = ["print_formulas", "pareto_table", "print_reduction"]


def print_reduction(result) -> None:
    """The dimensional reduction of a ``--units`` run, if any (stderr; the stages logged the rest)."""
    reduction = getattr(result, "reduction", None)
    if reduction is not None:
        red = reduction.to_dict()
        target = result.formulas[0].target
        groups = ", ".join(f"{k} = {v}" for k, v in red["groups"].items()) or "none"
        click.echo(f"units: {target} = {red['monomial']} * f(groups); groups: {groups}", err=True)


def print_formulas(formulas, *, front: bool = True) -> None:
    """Print each formula (LaTeX and sympy) with its verified R² and the Pareto front (stdout).

    The R² on the held-out rows (the fitting rows if none were held out) is printed
    next to the formula with the model's; a formula whose R² is below the model's by
    more than 0.01, or with numeric edges, is printed with a ``WARNING`` line right
    under it (:attr:`kansym.discover.result.Formula.warning`). A partial formula (numeric
    edges) is not printed as ``target = ...``: its first line says that no closed form was
    verified, the next gives the best closed form found with its R², the third says where the
    partial formula is kept, without printing it (:func:`kansym.discover.choice.report_lines`);
    the front lists its formulas without numeric edges and counts the others.

    The ``sympy:`` line and the front name each column by its identifier, as ``formula.json``
    does (:func:`kansym.symbolic.parse.identifiers`), so the text parses back; when one of them
    differs from its column, the line ends with the ``symbols`` map (``{identifier: column}``).
    """
    for f in formulas:
        for line in report_lines(f):  # the wording KANRegressor.summary() gives too
            click.echo(line)
        if front and f.front:
            click.echo(pareto_table(f.front, rows_label(f), identifier_names(f)))


def pareto_table(entries, where: str = "held-out", names: dict[str, str] | None = None) -> str:
    """The Pareto front as text: complexity, R², the formula; ``*`` marks the chosen one.

    Entries with numeric edges (partial formulas) are not printed, only counted on a line of
    their own with their best R².

    The chosen formula is listed even when another one, no more complex, fits these rows
    at least as well (it was kept by the selection rule, which also weighs verification
    against the model and a margin in favour of the KAN's verified formula); a line under
    the table then says which. ``names`` renames the columns (``{column: identifier}``).
    """
    names = names or {}
    lines = [f"Pareto front (complexity vs R² on {where}; * = chosen):"]
    opaque = [e for e in entries if e.expr.atoms(AppliedUndef)]
    for e in entries:
        if any(e is o for o in opaque):  # a numeric curve is no function: such an entry is counted below, not printed
            continue
        lines.append(f" {'*' if e.chosen else ' '} {e.complexity:4d}  {e.r2:.6f}  {rename_symbols(e.expr, names)}")
    if opaque:
        best = max(e.r2 for e in opaque)
        lines.append(f"   ({len(opaque)} partial formula{'s' if len(opaque) > 1 else ''} with numeric edges, not "
                     f"printed{', the chosen one among them' if any(e.chosen for e in opaque) else ''}; "
                     f"best R² {best:.6f})")
    chosen = next((e for e in entries if e.chosen), None)
    better = None if chosen is None or not chosen.dominated else next(
        (e for e in entries if not e.chosen and not e.expr.atoms(AppliedUndef)
         and e.complexity <= chosen.complexity and e.r2 >= chosen.r2), None)
    if better is not None:
        lines.append(f"   (the chosen formula is not on the front: {rename_symbols(better.expr, names)} is no more "
                     "complex and fits these rows at least as well; the choice also weighs the verification against "
                     "the model and keeps "
                     "the KAN's verified formula unless another wins by a clear margin)")
    return "\n".join(lines)
