"""Writing ``formula.json`` and ``formula.tex`` (the schema: :mod:`kansym.discover.record`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import sympy

from kansym.discover.result import Formula
from kansym.io.atomic import atomic_write_text
from kansym.symbolic.export import to_latex, to_python
from kansym.symbolic.parse import identifier, identifiers, rename_symbols

__all__ = ["FORMAT", "VERSION", "formula_record", "discovery_record", "write_formula_files", "tex_text", "dumps"]

FORMAT = "kansym-formula"
VERSION = 1


def formula_record(formula: Formula, bundle: Any = None, symbolic: Any = None, *,
                   extra: Mapping[str, Any] | None = None) -> dict:
    """The record of one formula (see the module docstring).

    Parameters
    ----------
    formula : Formula
    bundle : ModelBundle, optional
        The (pruned) model it came from; None for a formula found without a KAN (the
        PySR backend, a monomial of the dimensional analysis).
    symbolic : SymbolicKAN, optional
        Its per-edge fits (``edges``).
    extra : mapping, optional
        More top-level keys (they override the standard ones of the same name, but for
        ``inputs`` and ``symbols``: the inputs are always the formula's variables, the table's
        columns, also when the model was trained on dimensionless groups).
    """
    fid = formula.fidelity
    extra = {k: v for k, v in (extra or {}).items() if k not in ("inputs", "symbols")}
    inputs = [s.name for s in formula.symbols]
    idents = identifiers(inputs)
    on_idents = dict(zip(inputs, idents))

    def text(expr: Any) -> str:
        return str(rename_symbols(sympy.sympify(expr), on_idents))

    return {
        "format": FORMAT,
        "version": VERSION,
        "target": formula.target,
        "inputs": inputs,
        "symbols": dict(zip(idents, inputs)),
        "sympy": text(formula.expr),
        "latex": to_latex(formula.expr),
        "python": _python(formula),
        "raw_sympy": text(formula.raw),
        "r2_data": fid.r2_data,
        "r2_model": fid.r2_model,
        "max_abs_err": fid.max_abs_err,
        "rmse": fid.rmse,
        "r2_test": formula.r2_test,
        "r2_model_test": formula.r2_model_test,
        "r2_reference_test": formula.r2_reference_test if np.isfinite(formula.r2_reference_test) else None,
        "r2_residual": formula.r2_residual if np.isfinite(formula.r2_residual) else None,
        "p_residual": formula.p_residual if np.isfinite(formula.p_residual) else None,
        "residual_statistics": formula.residual.statistics,
        "n_test": formula.n_test,
        "warning": formula.warning,
        "status": formula.status,
        "numeric_edges": list(formula.numeric_edges),
        "closed_form": None if formula.closed_form is None else {
            **formula.closed_form.to_dict(), "sympy": text(formula.closed_form.expr),
            "latex": to_latex(formula.closed_form.expr)},
        "origin": formula.origin,
        "reason": formula.reason,
        "structure": formula.structure,
        "pareto": [{**e.to_dict(), "sympy": text(e.expr)} for e in formula.front],
        "space": None if bundle is None else ("log" if bundle.transform.log_space else "linear"),
        "candidates": [
            {
                "sympy": text(c.expr), "complexity": c.complexity, "error": c.error, "bic": c.bic,
                "accepted": c.accepted,
                "primitives": {":".join(map(str, k)): v for k, v in sorted(c.primitives.items())},
            }
            for c in formula.candidates
        ],
        "edges": [] if symbolic is None else [{"id": list(k), **v.to_dict()} for k, v in sorted(symbolic.edges.items())],
        **extra,
    }


def discovery_record(result: Any, extra: Mapping[str, Any] | None = None) -> dict:
    """The record of a discovery's chosen formula (:class:`~kansym.discover.result.Discovery`, or a
    :class:`~kansym.discover.dimensional.UnitsDiscovery` with its ``units`` and ``reduction``),
    with the widths of its trained and pruned KAN (absent when none was trained)."""
    from kansym.discover.units import reduction_meta

    keys: dict[str, Any] = {}
    if result.trained is not None:
        keys.update(width_trained=list(result.trained.model.width), width_pruned=list(result.prune_result.model.width))
    if getattr(result, "units", None) is not None:
        red = result.reduction
        keys.update(units=result.units, reduction=None if red is None else reduction_meta(red, result.formulas[0].target))
    if getattr(result, "screening", None) is not None:
        keys["removed_inputs"] = result.screening.removed_record()
    return formula_record(result.formulas[0], result.pruned, result.symbolic, extra={**keys, **(extra or {})})


def _python(formula: Formula) -> str:
    """Python source of the formula, or a comment saying why there is none (numeric edges)."""
    if formula.numeric_edges:
        return f"# no Python export: edges {', '.join(formula.numeric_edges)} fit no primitive and stay numeric\n"
    return to_python(formula.expr, list(formula.symbols), func_name=identifier(formula.target))


def write_formula_files(out_dir: str | os.PathLike[str], record: Mapping[str, Any]) -> list[Path]:
    """Write ``formula.json`` and ``formula.tex`` of ``record`` into ``out_dir``, atomically.

    ``formula.tex`` is ``target = latex``; for a partial formula (``status`` ``partial``) it
    holds only LaTeX comments (that no closed form was verified, the best closed form found
    and its R², the partial formula), so nothing in it typesets as the law.
    """
    out = Path(out_dir)
    paths = [out / "formula.json", out / "formula.tex"]
    atomic_write_text(paths[0], dumps(record))
    atomic_write_text(paths[1], tex_text(record))
    return paths


def tex_text(record: Mapping[str, Any]) -> str:
    """The text of ``formula.tex`` (see :func:`write_formula_files`)."""
    target = record["target"]
    if record.get("status") != "partial":
        return f"{target} = {record['latex']}\n"
    closed = record.get("closed_form")
    lines = [f"% kansym: no closed form was verified for {target}: {record.get('warning') or 'numeric edges'}."]
    if closed:
        lines += [f"% best closed form found (R² {closed['r2_test']:.6f}, not verified):",
                  f"% {target} = {closed['latex']}"]
    else:
        lines.append("% no closed form was found.")
    lines += ["% partial formula (each phi_l_i_j is a numeric curve of the model, not a function):",
              f"% {target} = {record['latex']}"]
    return "\n".join(lines) + "\n"


def dumps(record: Mapping[str, Any]) -> str:
    """The JSON text of a record (non-finite floats as JSON's ``Infinity``/``NaN``, as Python reads them)."""
    return json.dumps(record, indent=2) + "\n"
