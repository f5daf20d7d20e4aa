"""Reading ``formula.json`` back (the schema: :mod:`kansym.discover.record`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kansym.discover.result import ClosedForm, Formula
from kansym.errors import ConfigError, DataError, KansymError
from kansym.graph.build import edge_exists
from kansym.symbolic.compose import formula_values, input_symbols
from kansym.symbolic.fit import EdgeFit, NumericEdge
from kansym.symbolic.parse import parse_formula
from kansym.symbolic.pareto import FrontEntry
from kansym.symbolic.verify import ResidualTest, Fidelity

__all__ = ["FormulaRecord", "read_record", "sibling_record"]

EdgeId = tuple[int, int, int]  # (layer, i_in, j_out)


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
        """The predicted column.

        Raises
        ------
        DataError
            A ``target`` that is not a column name (a non-empty string).
        """
        given = self.data.get("target")
        if not (isinstance(given, str) and given):
            raise DataError(f"{self.source} has no 'target' column name; pass the formula.json that kansym wrote")
        return given

    @property
    def inputs(self) -> tuple[str, ...]:
        """The input columns (the formula's variables), in order.

        Raises
        ------
        DataError
            No ``inputs`` list of distinct column names (strings).
        """
        given = self.data.get("inputs")
        if not (isinstance(given, list) and given and all(isinstance(n, str) for n in given)
                and len(set(given)) == len(given)):
            raise DataError(f"{self.source} has no 'inputs' list of distinct column names (the formula's variables); "
                            "pass the formula.json that kansym wrote")
        return tuple(given)

    @property
    def pareto(self) -> list[dict]:
        """The Pareto front entries as stored (``sympy`` text, ``complexity``, ``r2``, ``error``,
        ``chosen``); :meth:`formula`'s ``front`` holds them parsed."""
        return self._entries("pareto")

    @property
    def numeric_edges(self) -> tuple[str, ...]:
        """Names of the edges the formula keeps numeric (``phi_l_i_j``)."""
        given = self.data.get("numeric_edges") or []
        if not (isinstance(given, list) and all(isinstance(n, str) for n in given)):
            raise DataError(f"{self.source} has a 'numeric_edges' entry that is not a list of edge names; "
                            "pass the formula.json that kansym wrote")
        return tuple(given)

    def curves(self) -> dict[str, NumericEdge]:
        """The numeric curve of each ``phi_l_i_j`` the record holds (its ``edges`` of primitive ``numeric``).

        Raises
        ------
        DataError
            Unreadable edge entries.
        """
        return {fit.name: fit for fit in self.edge_fits().values() if isinstance(fit, NumericEdge)}

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
            A formula or Pareto entry that does not parse, or a field of the wrong type.
        """
        try:
            return self._formula(names)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            if isinstance(exc, DataError):
                raise
            raise DataError(f"{self.source} has an unreadable field ({type(exc).__name__}: {str(exc)[:80]}); "
                            "pass the formula.json that kansym wrote") from None

    def _formula(self, names: Sequence[str] | None) -> Formula:
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
        cf = d.get("closed_form")
        closed = None if not cf else ClosedForm(self._parse(cf.get("sympy", ""), symbols),
                                                float(cf.get("r2_test", nan)), int(cf.get("complexity", 0)),
                                                str(cf.get("origin", "kan")))
        structure = d.get("structure")
        if structure is not None and not isinstance(structure, dict):
            raise TypeError("'structure' is neither an object nor null")
        return Formula(expr=expr, raw=raw, symbols=symbols, fidelity=fid, target=self.target,
                       r2_test=float(d.get("r2_test", nan)), r2_model_test=float(d.get("r2_model_test", nan)),
                       n_test=int(d.get("n_test", 0)), front=front, origin=str(d.get("origin", "kan")),
                       reason=str(d.get("reason", "")), closed_form=closed, structure=structure,
                       r2_reference_test=float(nan if d.get("r2_reference_test") is None else d["r2_reference_test"]),
                       residual=self._residual())

    def _residual(self) -> ResidualTest:
        """The residual test's verdict. A record written before ``p_residual`` held the R² only
        where it was significant (at p < 0.05), 0 elsewhere: a positive one reads as p = 0."""
        d, nan = self.data, float("nan")
        r2 = float(nan if d.get("r2_residual") is None else d["r2_residual"])
        if "p_residual" not in d:
            return ResidualTest(r2, 0.0 if r2 > 0 else nan, 1)
        return ResidualTest(r2, float(nan if d["p_residual"] is None else d["p_residual"]),
                            int(d.get("residual_statistics", 1)))

    def check(self) -> "FormulaRecord":
        """Read every field of the record that becomes a value, once (:func:`read_record` calls it).

        The names (``target``, ``inputs``, ``symbols``), every formula string (``sympy``,
        ``raw_sympy``, ``closed_form``, each ``pareto`` and ``candidates`` entry: the safe parser,
        :func:`kansym.symbolic.parse.parse_formula`), the numbers beside them and the edge fits,
        so that a broken or hostile record is refused when it is read, by every command alike.
        ``latex``, ``python``, ``reason`` and ``warning`` are text to show; nothing parses them.

        Raises
        ------
        DataError
            The first field that is not what kansym writes (one sentence naming it); a formula
            that uses an opaque ``phi_l_i_j`` whose numeric curve the record does not hold.
        """
        self.edge_fits()
        formula = self.formula()
        for entry in self._entries("candidates"):
            self._parse(entry.get("sympy"), formula.symbols)
        opaque = formula.expr.atoms(AppliedUndef) | formula.raw.atoms(AppliedUndef)
        missing = sorted({f.func.__name__ for f in opaque if not hasattr(f.func, "_imp_")})
        if missing:
            raise DataError(f"the formula of {self.source} uses {', '.join(missing)}, a numeric edge whose curve the "
                            "record does not hold (no 'edges' entry of that name); pass the formula.json that kansym "
                            "wrote")
        return self

    def _entries(self, key: str) -> list[dict]:
        """The list of objects under ``key`` (``pareto``, ``candidates``); empty when absent.

        Raises
        ------
        DataError
            ``key`` holds something else.
        """
        given = self.data.get(key) or []
        if not (isinstance(given, list) and all(isinstance(e, dict) for e in given)):
            raise DataError(f"{self.source} has a '{key}' entry that is not a list of objects; "
                            "pass the formula.json that kansym wrote")
        return [dict(e) for e in given]

    def _parse(self, text: str, symbols: Sequence[sympy.Symbol]) -> sympy.Expr:
        """A formula string of the record on ``symbols``, parsed without evaluating it
        (:func:`kansym.symbolic.parse.parse_formula`: arithmetic on the inputs only)."""
        try:
            expr = parse_formula(text, self._locals(symbols))
        except DataError as exc:
            raise DataError(f"cannot read a formula of {self.source}: {exc}; pass the formula.json that kansym wrote "
                            f"for these inputs ({', '.join(s.name for s in symbols)})") from None
        opaque = expr.atoms(AppliedUndef)
        if not opaque:
            return expr
        curves = self.curves()  # each phi_l_i_j evaluates as its numeric curve, as in the run that wrote it
        return expr.xreplace({f: curves[f.func.__name__].sympy(f.args[0]) for f in opaque
                              if f.func.__name__ in curves and len(f.args) == 1})

    def predict(self, x: np.ndarray, names: Sequence[str] | None = None) -> np.ndarray:
        """The formula on CSV inputs ``x (N, d)`` (columns in the order of ``names``/:attr:`inputs`) -> ``(N,)``.

        Raises
        ------
        DataError
            Numeric edges (no closed form to evaluate), or a formula that does not parse.
        """
        expr = self.expr(names)
        numeric = sorted({f.func.__name__ for f in expr.atoms(AppliedUndef)})
        if numeric:
            raise DataError(f"the formula of {self.source} keeps edges {', '.join(numeric)} numeric; "
                            "only the model can predict with it")
        return formula_values(expr, self.symbols(names), x, f"the formula of {self.source}")

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
        """Whether the record is a formula of ``bundle``'s table: the same input columns and target
        (the columns of its groups for a model of a ``--units`` run; any width: ``model.pt`` and
        ``pruned.pt`` of one fit share their ``formula.json``)."""
        from kansym.discover.units import model_columns, model_target

        return self.inputs == model_columns(bundle) and self.target in model_target(bundle)


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
    return FormulaRecord(data, str(path)).check()



def sibling_record(checkpoint: str | os.PathLike[str], bundle: Any) -> FormulaRecord | None:
    """The ``formula.json`` next to ``checkpoint`` (as ``kansym fit`` writes them) when it is a
    formula of ``bundle``'s columns (:meth:`FormulaRecord.belongs_to`) that parses; else None
    (another run's file, a foreign or broken one: the caller goes on without it)."""
    path = Path(checkpoint).with_name("formula.json")
    if not path.is_file():
        return None
    try:
        record = read_record(path)
        if not record.belongs_to(bundle):
            return None
        record.expr()
    except KansymError:
        return None
    return record
