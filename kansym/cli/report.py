"""Formatting of formulas for the terminal and the output files."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kansym.io.atomic import atomic_write_text
from kansym.symbolic.export import to_latex, to_python


def formula_record(formula, bundle, symbolic, *, extra: dict | None = None) -> dict:
    """The JSON record of one formula (``formula.json``); ``bundle``/``symbolic`` may be None
    (a formula found without a KAN, e.g. by the PySR backend)."""
    fid = formula.fidelity
    return {
        "format": "kansym-formula",
        "version": 1,
        "target": formula.target,
        "inputs": [s.name for s in formula.symbols] if bundle is None else list(bundle.input_names),
        "sympy": str(formula.expr),
        "latex": to_latex(formula.expr),
        "python": _python(formula),
        "raw_sympy": str(formula.raw),
        "r2_data": fid.r2_data,
        "r2_model": fid.r2_model,
        "max_abs_err": fid.max_abs_err,
        "rmse": fid.rmse,
        "r2_test": formula.r2_test,
        "r2_model_test": formula.r2_model_test,
        "n_test": formula.n_test,
        "warning": formula.warning,
        "numeric_edges": list(formula.numeric_edges),
        "pareto": [e.to_dict() for e in formula.front],
        "space": None if bundle is None else ("log" if bundle.transform.log_space else "linear"),
        "candidates": [
            {
                "sympy": str(c.expr),
                "complexity": c.complexity,
                "error": c.error,
                "bic": c.bic,
                "accepted": c.accepted,
                "primitives": {":".join(map(str, k)): v for k, v in sorted(c.primitives.items())},
            }
            for c in formula.candidates
        ],
        "edges": [] if symbolic is None else [
            {"id": list(k), **v.to_dict()} for k, v in sorted(symbolic.edges.items())
        ],
        **(extra or {}),
    }


def fit_with_pysr(table, out: Path, *, force: bool, protect, seed: int, data: str) -> None:
    """``kansym fit --backend pysr``: search with PySR, verify, print, write formula.json/.tex."""
    from kansym.cli.common import prepare_out_dir
    from kansym.symbolic.pysr_backend import PySRConfig, discover_pysr

    formula = discover_pysr(table.x, table.y[:, 0], table.input_names, table.target_names[0],
                            PySRConfig(seed=seed), seed=seed)
    prepare_out_dir(out, ["formula.json", "formula.tex"], force=force, protect=protect)
    write_formula_files(out, formula_record(formula, None, None, extra={"backend": "pysr", "data": data}))
    print_formulas([formula])


def _python(formula) -> str:
    """Python source of the formula, or a comment saying why there is none (numeric edges)."""
    if formula.numeric_edges:
        return f"# no Python export: edges {', '.join(formula.numeric_edges)} fit no primitive and stay numeric\n"
    return to_python(formula.expr, list(formula.symbols), func_name=_identifier(formula.target))


def _identifier(name: str) -> str:
    """A Python function name made from a column name."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else f"f_{out}"


def _atomic_write_text(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def write_formula_files(out_dir: Path, record: dict) -> None:
    """Write ``formula.json`` and ``formula.tex`` atomically."""
    _atomic_write_text(out_dir / "formula.json", json.dumps(record, indent=2) + "\n")
    _atomic_write_text(out_dir / "formula.tex", f"{record['target']} = {record['latex']}\n")


def write_text(path: Path, text: str) -> None:
    """Atomic text write for single-file outputs."""
    _atomic_write_text(path, text)


def print_formulas(formulas, *, front: bool = True) -> None:
    """Print each formula (LaTeX and sympy) with its verified R² and the Pareto front (stdout).

    The R² on the held-out rows (the fitting rows if none were held out) is printed
    next to the formula with the model's; a formula whose R² is below the model's by
    more than 0.01, or with numeric edges, is printed with a ``WARNING`` line right
    under it (:attr:`kansym.pipeline.Formula.warning`).
    """
    for f in formulas:
        where = f"held-out, {f.n_test} rows" if f.n_test else "fitting rows"
        click.echo(f"{f.target} = {to_latex(f.expr)}")
        click.echo(f"sympy: {f.expr}")
        click.echo(f"R² ({where}) = {f.r2_test:.6f}   model R² ({where}) = {f.r2_model_test:.6f}   "
                   f"R² (data) = {f.fidelity.r2_data:.6f}   R² (vs model) = {f.fidelity.r2_model:.6f}")
        if f.warning:
            click.echo(f"WARNING: not a verified answer: {f.warning}")
        if front and f.front:
            click.echo(pareto_table(f.front, where))


def pareto_table(entries, where: str = "held-out") -> str:
    """The Pareto front as text: complexity, R², the formula; ``*`` marks the chosen one."""
    lines = [f"Pareto front (complexity vs R² on {where}; * = chosen):"]
    for e in entries:
        mark = "*" if e.chosen else " "
        note = "  (dominated)" if e.chosen and e.dominated else ""
        lines.append(f" {mark} {e.complexity:4d}  {e.r2:.6f}  {e.expr}{note}")
    return "\n".join(lines)
