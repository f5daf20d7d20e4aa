"""Formatting of discovered formulas and models for the terminal (the files are :mod:`kansym.discover.record`'s)."""

from __future__ import annotations

import json

import click

from kansym.symbolic.export import to_latex
from kansym.symbolic.names import identifiers, rename_symbols

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
    under it (:attr:`kansym.discover.result.Formula.warning`).

    The ``sympy:`` line and the front name each column by its identifier, as ``formula.json``
    does (:func:`kansym.symbolic.names.identifiers`), so the text parses back; when one of them
    differs from its column, the line ends with the ``symbols`` map (``{identifier: column}``).
    """
    for f in formulas:
        where = f"held-out, {f.n_test} rows" if f.n_test else "fitting rows"
        columns = [s.name for s in f.symbols]
        on_idents = dict(zip(columns, identifiers(columns)))
        click.echo(f"{f.target} = {to_latex(f.expr)}")
        mapped = "" if all(k == v for k, v in on_idents.items()) else \
            f"   symbols: {json.dumps({v: k for k, v in on_idents.items()}, ensure_ascii=False)}"
        click.echo(f"sympy: {rename_symbols(f.expr, on_idents)}{mapped}")
        click.echo(f"R² ({where}) = {f.r2_test:.6f}   model R² ({where}) = {f.r2_model_test:.6f}   "
                   f"R² (data) = {f.fidelity.r2_data:.6f}   R² (vs model) = {f.fidelity.r2_model:.6f}")
        if f.warning:
            click.echo(f"WARNING: not a verified answer: {f.warning}")
        if front and f.front:
            click.echo(pareto_table(f.front, where, on_idents))


def pareto_table(entries, where: str = "held-out", names: dict[str, str] | None = None) -> str:
    """The Pareto front as text: complexity, R², the formula; ``*`` marks the chosen one.

    The chosen formula is listed even when another one, no more complex, fits these rows
    at least as well (it was kept by the selection rule, which also weighs verification
    against the model and a margin in favour of the KAN's verified formula); a line under
    the table then says which. ``names`` renames the columns (``{column: identifier}``).
    """
    names = names or {}
    lines = [f"Pareto front (complexity vs R² on {where}; * = chosen):"]
    for e in entries:
        lines.append(f" {'*' if e.chosen else ' '} {e.complexity:4d}  {e.r2:.6f}  {rename_symbols(e.expr, names)}")
    chosen = next((e for e in entries if e.chosen), None)
    better = None if chosen is None or not chosen.dominated else next(
        (e for e in entries if not e.chosen and e.complexity <= chosen.complexity and e.r2 >= chosen.r2), None)
    if better is not None:
        lines.append(f"   (the chosen formula is not on the front: {rename_symbols(better.expr, names)} is no more "
                     "complex and fits these rows at least as well; the choice also weighs the verification against "
                     "the model and keeps "
                     "the KAN's verified formula unless another wins by a clear margin)")
    return "\n".join(lines)
