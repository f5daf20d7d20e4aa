"""The one wording of an answer: the lines that say what a discovered formula is.

``kansym fit`` (and ``kansym symbolify``) print them (:mod:`kansym.cli.report` echoes
:func:`formula_report`), :meth:`kansym.KANRegressor.summary` and the warning of
:meth:`kansym.KANRegressor.fit` give them (:func:`report_lines`, :func:`answer_lines`), and
the guardrails of ``bench/feynman.py`` check exactly what is printed
(:func:`printed_expressions`): so none of them disagree on what the formula is.

Every function here returns text, one string a line; none prints.
"""

from __future__ import annotations

import json

import sympy
from sympy.core.function import AppliedUndef

from kansym.discover.choice import closed
from kansym.discover.result import Formula
from kansym.symbolic.export import to_latex
from kansym.symbolic.fit import edge_labels
from kansym.symbolic.parse import identifiers, rename_symbols

__all__ = ['formula_report', 'report_lines', 'answer_lines', 'pareto_lines', 'reduction_lines', 'rows_label',
           'identifier_names', 'printed_expressions']


def formula_report(formula: Formula, *, front: bool = True) -> list[str]:
    """Every line ``kansym fit`` prints for ``formula`` (stdout): :func:`report_lines`, then,
    when ``front`` and the formula has a Pareto front, :func:`pareto_lines`."""
    lines = report_lines(formula)
    if front and formula.front:
        lines += pareto_lines(formula.front, rows_label(formula), identifier_names(formula))
    return lines


def report_lines(formula: Formula) -> list[str]:
    """:func:`answer_lines`, then the R² line (the formula's and the model's on the rows of
    :func:`rows_label`, the fitting rows' and the agreement with the model) and, when the
    formula is no verified answer, a ``WARNING`` line (:attr:`Formula.warning`)."""
    f, where = formula, rows_label(formula)
    lines = answer_lines(f) + [
        f"R² ({where}) = {f.r2_test:.6f}   model R² ({where}) = {f.r2_model_test:.6f}   "
        f"R² (data) = {f.fidelity.r2_data:.6f}   R² (vs model) = {f.fidelity.r2_model:.6f}"]
    if f.warning:
        lines.append(f"WARNING: not a verified answer: {f.warning}")
    return lines


def answer_lines(formula: Formula) -> list[str]:
    """The answer as ``kansym fit`` prints it, one string a line.

    A closed form: ``target = <latex>`` and ``sympy: <expr>``. A partial formula (numeric
    edges) is never on such a line, which a reader could copy as the law, and its text is
    not printed at all (an opaque function inside a printed formula is worse than "not
    found"): the first line says that no closed form was verified, the second gives the
    best closed form found (:attr:`Formula.closed_form`) with its R², or says there is
    none, the third says where the partial formula is kept (:attr:`Formula.expr`,
    ``formula.json``'s ``sympy``, the comments of ``formula.tex``).

    Examples
    --------
    >>> import sympy
    >>> from kansym.discover.result import Formula
    >>> from kansym.symbolic.verify import Fidelity
    >>> x = sympy.Symbol("x")
    >>> f = Formula(expr=2 * x, raw=2 * x, symbols=(x,), fidelity=Fidelity(1.0, 1.0, 0.0, 0.0), target="y")
    >>> answer_lines(f)
    ['y = 2 x', 'sympy: 2*x']
    """
    f = formula
    on_idents = identifier_names(f)
    mapped = ("" if all(k == v for k, v in on_idents.items()) else
              f"   symbols: {json.dumps({v: k for k, v in on_idents.items()}, ensure_ascii=False)}")

    def text(expr: sympy.Expr) -> str:  # identifiers, as formula.json writes them: the text parses back
        return str(rename_symbols(expr, on_idents))
    if not f.partial:
        return [f"{f.target} = {to_latex(f.expr)}", f"sympy: {text(f.expr)}{mapped}"]
    edges = edge_labels(f.numeric_edges)  # the name in formula.json, and the edge as the log names it
    c = f.closed_form
    best = ("best closed form found: none" if c is None else
            f"best closed form found (not verified: R² ({rows_label(f)}) = {c.r2_test:.6f}, "
            f"model's {f.r2_model_test:.6f}): {text(c.expr)}")
    return [f"{f.target}: no closed form was verified (edges {edges} fit no primitive)", best,
            f"partial formula (R² below are its): not printed, as {', '.join(f.numeric_edges)} are numeric curves "
            "of the model, "
            "not functions; it is kept in formula.json ('sympy') and Formula.expr"]


def pareto_lines(entries, where: str = "held-out", names: dict[str, str] | None = None) -> list[str]:
    """The Pareto front as text, one string a line: complexity, R², the formula; ``*`` marks the chosen one.

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
    return lines


def reduction_lines(result) -> list[str]:
    """The dimensional reduction of a ``--units`` run (``result.reduction``), one line; no line without one."""
    reduction = getattr(result, "reduction", None)
    if reduction is None:
        return []
    red = reduction.to_dict()
    target = result.formulas[0].target
    groups = ", ".join(f"{k} = {v}" for k, v in red["groups"].items()) or "none"
    return [f"units: {target} = {red['monomial']} * f(groups); groups: {groups}"]


def rows_label(formula: Formula) -> str:
    """Which rows :attr:`Formula.r2_test` is on: ``"held-out, N rows"`` or ``"fitting rows"``."""
    return f"held-out, {formula.n_test} rows" if formula.n_test else "fitting rows"


def identifier_names(formula: Formula) -> dict[str, str]:
    """``{column: identifier}`` of the formula's symbols (:func:`kansym.symbolic.parse.identifiers`):
    the printed ``sympy`` text names columns as ``formula.json`` does."""
    columns = [s.name for s in formula.symbols]
    return dict(zip(columns, identifiers(columns)))


def printed_expressions(formula: Formula) -> list[sympy.Expr]:
    """Every expression :func:`formula_report` prints for ``formula``, in printing order: the
    formula (or, for a partial one, its best closed form, if any), then the front's entries
    without numeric edges (those are counted, not printed: :func:`pareto_lines`).
    ``bench/feynman.py`` checks these for junk (its ``formula_guard``)."""
    head = ([formula.closed_form.expr] if formula.partial and formula.closed_form is not None
            else ([] if formula.partial else [formula.expr]))
    return head + [e.expr for e in formula.front if closed(e.expr)]
