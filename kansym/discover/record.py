"""``formula.json``: the record of a discovered formula, and its only writer and reader.

``kansym fit``, ``kansym symbolify --json`` and :meth:`kansym.KANRegressor.to_record`
write it; ``kansym graph --fits``, ``kansym plot --fits``, ``kansym predict`` and
:meth:`kansym.KANRegressor.from_record` read it back, all through this module.

The record (``"format": "kansym-formula"``, ``"version": 1``) is one JSON object:

==================  ==========================================================================
``target``          the predicted column
``inputs``          the input columns, in order (the formula's variables)
``symbols``         ``{identifier: column}`` for every input, in order: the name each column has
                    in the ``sympy`` strings and the Python export
                    (:func:`kansym.symbolic.names.identifiers`: ``mass kg`` -> ``mass_kg``,
                    ``lambda`` -> ``lambda_``, ``I`` -> ``I_``; ``x1`` stays ``x1``)
``sympy``           ``str`` of the formula on those identifiers:
                    ``sympy.sympify(sympy, locals={i: Symbol(i) for i in symbols})`` parses it
                    (it also parses without ``locals``: no identifier is a name sympy binds);
                    :func:`read_record` parses it back on one ``Symbol`` per input, named by its
                    column (a record without ``symbols``, written before they existed, names
                    each input by its column)
``latex``           the formula in LaTeX (:func:`kansym.symbolic.export.to_latex`)
``python``          numpy source of a function ``f(X)``, ``X[:, i]`` the i-th input (named by its
                    identifier; :func:`kansym.symbolic.export.to_python`), or a comment saying
                    why there is none (numeric edges)
``raw_sympy``       the composition before refinement (identifiers, as every ``sympy`` string)
``r2_data``,        R² on the fitting rows against the data and the model, the largest absolute
``r2_model``,       error and the RMS error there (:class:`kansym.symbolic.verify.Fidelity`)
``max_abs_err``,
``rmse``
``r2_test``,        R² of the formula and of the model on the held-out rows (the fitting rows
``r2_model_test``,  when ``n_test`` is 0)
``n_test``
``warning``         why the formula is not a verified answer, or null
``numeric_edges``   names of edges that fit no primitive (opaque functions in ``sympy``)
``origin``,         what produced the formula (``kan``, ``direct search``, ``units``, ``pysr``)
``reason``          and why it was chosen
``pareto``          the Pareto front: ``sympy``, ``complexity``, ``r2``, ``error``, ``chosen``,
                    ``dominated``
``space``           ``linear`` or ``log`` (the units the KAN learned in), or null
``candidates``      every formula the Occam step tried
``edges``           the per-edge fits: ``id`` ``[layer, i_in, j_out]`` and the
                    :class:`~kansym.symbolic.fit.EdgeFit` fields
==================  ==========================================================================

and, from ``kansym fit``: ``width_trained``, ``width_pruned``, ``data``, ``removed_inputs`` (the
columns the input screening dropped, :mod:`kansym.discover.screen`: ``name``, ``z_smooth``, ``z_kan``,
``z_threshold``, ``reason``; ``inputs`` are those the model and formula use) (no timings: the record
of one command is the same bytes on every run; ``model.pt``'s meta holds the seconds);
with ``--units``: ``units`` and ``reduction``; from ``symbolify``: ``checkpoint``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import sympy

from kansym.discover.result import Formula
from kansym.errors import ConfigError, DataError, KansymError
from kansym.graph.build import edge_exists
from kansym.io.atomic import atomic_write_text
from kansym.symbolic.compose import input_symbols, lambdify_formula
from kansym.symbolic.export import to_latex, to_python
from kansym.symbolic.fit import EdgeFit
from kansym.symbolic.parse import parse_formula
from kansym.symbolic.names import identifier, identifiers, rename_symbols
from kansym.symbolic.pareto import FrontEntry
from kansym.symbolic.verify import Fidelity

__all__ = ["FORMAT", "VERSION", "FormulaRecord", "formula_record", "write_formula_files", "read_record"]

FORMAT = "kansym-formula"
VERSION = 1

EdgeId = tuple[int, int, int]  # (layer, i_in, j_out)


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
        More top-level keys (they override the standard ones of the same name; an
        ``inputs`` entry also names the identifiers of ``symbols``).
    """
    fid = formula.fidelity
    extra = dict(extra or {})
    inputs = [str(n) for n in extra.pop("inputs", [s.name for s in formula.symbols] if bundle is None
                                        else bundle.input_names)]
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
        "n_test": formula.n_test,
        "warning": formula.warning,
        "numeric_edges": list(formula.numeric_edges),
        "origin": formula.origin,
        "reason": formula.reason,
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


def _python(formula: Formula) -> str:
    """Python source of the formula, or a comment saying why there is none (numeric edges)."""
    if formula.numeric_edges:
        return f"# no Python export: edges {', '.join(formula.numeric_edges)} fit no primitive and stay numeric\n"
    return to_python(formula.expr, list(formula.symbols), func_name=identifier(formula.target))


def write_formula_files(out_dir: str | os.PathLike[str], record: Mapping[str, Any]) -> list[Path]:
    """Write ``formula.json`` and ``formula.tex`` of ``record`` into ``out_dir``, atomically."""
    out = Path(out_dir)
    paths = [out / "formula.json", out / "formula.tex"]
    atomic_write_text(paths[0], dumps(record))
    atomic_write_text(paths[1], f"{record['target']} = {record['latex']}\n")
    return paths


def dumps(record: Mapping[str, Any]) -> str:
    """The JSON text of a record (non-finite floats as JSON's ``Infinity``/``NaN``, as Python reads them)."""
    return json.dumps(record, indent=2) + "\n"


@dataclass(frozen=True)
class FormulaRecord:
    """A ``formula.json`` read back (:func:`read_record`).

    Attributes
    ----------
    data : dict
        The whole JSON object.
    source : str
        Where it was read from, for messages.
    """

    data: dict
    source: str = "the formula record"

    @property
    def target(self) -> str:
        return str(self.data.get("target", ""))

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(str(n) for n in self.data.get("inputs", ()))

    @property
    def pareto(self) -> list[dict]:
        """The Pareto front entries (``sympy``, ``complexity``, ``r2``, ``error``, ``chosen``)."""
        return [dict(e) for e in self.data.get("pareto", [])]

    @property
    def numeric_edges(self) -> tuple[str, ...]:
        return tuple(self.data.get("numeric_edges", ()))

    @property
    def identifier_map(self) -> dict[str, str]:
        """``{identifier: column}``: the name of each input in the ``sympy`` strings (record
        ``symbols``; a record without it names each input by its column).

        Raises
        ------
        DataError
            A ``symbols`` entry that is not such a map of the inputs.
        """
        given = self.data.get("symbols")
        if given is None:
            return {n: n for n in self.inputs}
        if not (isinstance(given, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in given.items())
                and sorted(given.values()) == sorted(self.inputs)):
            raise DataError(f"{self.source} has a 'symbols' entry that does not map identifiers to its inputs "
                            f"{list(self.inputs)}; pass the formula.json that kansym wrote")
        return dict(given)

    def symbols(self, names: Sequence[str] | None = None, *, positive: bool | None = None) -> list[sympy.Symbol]:
        """The formula's symbols: one per input (``names``, default :attr:`inputs`), named by
        the column (not the identifier), positive in log space."""
        positive = self.data.get("space") == "log" if positive is None else positive
        return input_symbols(list(self.inputs if names is None else names), positive=positive)

    def _locals(self, symbols: Sequence[sympy.Symbol]) -> dict[str, sympy.Symbol]:
        """The parser's names: each symbol under its column's identifier."""
        ident_of = {column: ident for ident, column in self.identifier_map.items()}
        return {ident_of.get(s.name, s.name): s for s in symbols}

    def expr(self, names: Sequence[str] | None = None, *, positive: bool | None = None) -> sympy.Expr:
        """The formula (``sympy``) parsed on :meth:`symbols`.

        Raises
        ------
        DataError
            The string does not parse, or uses names other than the inputs (``names``).
        """
        return self._parse(self.data["sympy"], self.symbols(names, positive=positive))

    def formula(self, names: Sequence[str] | None = None) -> Formula:
        """The record as a :class:`~kansym.discover.result.Formula` (without the Occam step's candidates).

        Raises
        ------
        DataError
            A formula or Pareto entry that does not parse.
        """
        d = self.data
        symbols = tuple(self.symbols(names))
        expr = self.expr(names)
        raw = self._parse(d.get("raw_sympy", d["sympy"]), symbols)
        front = tuple(FrontEntry(self._parse(e["sympy"], symbols), int(e["complexity"]), float(e["r2"]),
                                 float(e["error"]), bool(e["chosen"]), bool(e.get("dominated", False)))
                      for e in self.pareto)
        nan = float("nan")
        fid = Fidelity(float(d.get("r2_data", nan)), float(d.get("r2_model", nan)), float(d.get("max_abs_err", nan)),
                       float(d.get("rmse", nan)))
        return Formula(expr=expr, raw=raw, symbols=symbols, fidelity=fid, target=self.target,
                       r2_test=float(d.get("r2_test", nan)), r2_model_test=float(d.get("r2_model_test", nan)),
                       n_test=int(d.get("n_test", 0)), front=front, origin=str(d.get("origin", "kan")),
                       reason=str(d.get("reason", "")))

    def _parse(self, text: str, symbols: Sequence[sympy.Symbol]) -> sympy.Expr:
        """A formula string of the record on ``symbols``, parsed without evaluating it
        (:func:`kansym.symbolic.parse.parse_formula`: arithmetic on the inputs only)."""
        try:
            return parse_formula(text, self._locals(symbols))
        except DataError as exc:
            raise DataError(f"cannot read a formula of {self.source}: {exc}; pass the formula.json that kansym wrote "
                            f"for these inputs ({', '.join(s.name for s in symbols)})") from None

    def predict(self, x: np.ndarray, names: Sequence[str] | None = None) -> np.ndarray:
        """The formula on CSV inputs ``x (N, d)`` (columns in the order of ``names``/:attr:`inputs`) -> ``(N,)``.

        Raises
        ------
        DataError
            Numeric edges (no closed form to evaluate), or a formula that does not parse.
        """
        if self.numeric_edges:
            raise DataError(f"the formula of {self.source} keeps edges {', '.join(self.numeric_edges)} numeric; "
                            "only the model can predict with it")
        symbols = self.symbols(names)
        with np.errstate(all="ignore"):
            out = lambdify_formula(self.expr(names), symbols)(np.asarray(x, dtype=np.float64))
        return np.broadcast_to(np.asarray(out, dtype=np.float64), (np.asarray(x).shape[0],)).copy()

    def edge_fits(self, width: Sequence[int] | None = None) -> dict[EdgeId, EdgeFit]:
        """The per-edge fits ``{(layer, i_in, j_out): EdgeFit}``.

        Parameters
        ----------
        width : sequence of int, optional
            Width of the model the fits are meant for; every fitted edge must exist in it.

        Raises
        ------
        DataError
            Unreadable edge entries.
        ConfigError
            The fits belong to a model of another width (another checkpoint).
        """
        try:
            fits = {tuple(int(v) for v in e["id"]): EdgeFit.from_dict(dict(e)) for e in self.data.get("edges", [])}
        except (KeyError, TypeError, ValueError, KansymError) as exc:
            raise DataError(f"{self.source} has unreadable edge fits ({type(exc).__name__}); "
                            "pass the formula.json that kansym wrote") from exc
        if width is not None:
            made_for = self.data.get("width_pruned")
            if made_for is not None and list(made_for) != list(width):
                raise ConfigError(
                    f"{self.source} holds the fits of a model of width {list(made_for)}, not of this one "
                    f"({list(width)}); use them with the checkpoint they came from (usually pruned.pt)"
                )
            for edge in fits:
                if not edge_exists(edge, width):
                    raise ConfigError(
                        f"{self.source} fits edge {edge} that the model (width {list(width)}) lacks; "
                        "use these fits with the checkpoint they came from (usually pruned.pt)"
                    )
        return fits  # type: ignore[return-value]

    def belongs_to(self, bundle: Any) -> bool:
        """Whether the record describes ``bundle``'s columns and, if it says so, its width."""
        width = self.data.get("width_pruned")
        return (self.inputs == tuple(bundle.input_names) and self.target in bundle.output_names
                and (width is None or list(width) == list(bundle.model.width)))


def read_record(path: str | os.PathLike[str]) -> FormulaRecord:
    """Read a ``formula.json`` written by kansym.

    Raises
    ------
    DataError
        Missing, unreadable or foreign file (one line naming it).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"formula file {path} does not exist; pass the formula.json that kansym fit wrote") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path} is not a kansym formula.json ({type(exc).__name__}); "
                        "pass the formula.json that kansym fit wrote") from exc
    if not isinstance(data, dict) or not str(data.get("format", "")).startswith("kansym"):
        raise DataError(f"{path} is not a kansym formula.json (no kansym format tag); "
                        "pass the formula.json that kansym fit wrote")
    if "sympy" not in data or "target" not in data:
        raise DataError(f"{path} is a kansym file but not a formula record (no sympy/target); "
                        "pass the formula.json that kansym fit wrote")
    return FormulaRecord(data, str(path))

