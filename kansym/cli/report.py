"""Formatting of formulas for the terminal and the output files."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kansym.io.atomic import atomic_write_text
from kansym.symbolic.export import to_latex, to_python


def formula_record(formula, bundle, symbolic, *, extra: dict | None = None) -> dict:
    """The JSON record of one formula (``formula.json``)."""
    fid = formula.fidelity
    return {
        "format": "kansym-formula",
        "version": 1,
        "target": formula.target,
        "inputs": list(bundle.input_names),
        "sympy": str(formula.expr),
        "latex": to_latex(formula.expr),
        "python": to_python(formula.expr, list(formula.symbols), func_name=_identifier(formula.target)),
        "raw_sympy": str(formula.raw),
        "r2_data": fid.r2_data,
        "r2_model": fid.r2_model,
        "max_abs_err": fid.max_abs_err,
        "rmse": fid.rmse,
        "space": "log" if bundle.transform.log_space else "linear",
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
        "edges": [
            {"id": list(k), **v.to_dict()} for k, v in sorted(symbolic.edges.items())
        ],
        **(extra or {}),
    }


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


def print_formulas(formulas) -> None:
    """Print each formula as LaTeX with its R² (stdout)."""
    for f in formulas:
        click.echo(f"{f.target} = {to_latex(f.expr)}")
        click.echo(f"sympy: {f.expr}")
        click.echo(f"R² (data) = {f.fidelity.r2_data:.6f}   R² (vs model) = {f.fidelity.r2_model:.6f}")
