"""What an interrupted ``kansym fit`` carries into its resumed run besides the model it saved.

A run interrupted in (or after) its main training has often finished costly work before
it: the direct search, or the structure search with its oracle KAN
(:mod:`kansym.discover.oracle`), and an additive shortcut KAN that was trained and
symbolified before the hidden-layer KAN. The resume record
(:mod:`kansym.discover.resume`) keeps them as plain data:

- ``direct``: the search's candidates (each formula as text with its float constants
  kept apart as exact floats, so that they read back bit for bit through the safe
  :func:`kansym.symbolic.parse.parse_formula`), the reference model's held-out R², and
  the options that shaped them. The resumed run reuses them only when those options are
  unchanged, and only when they read back exactly (else it searches again: the search is
  deterministic, only slower);
- ``shortcut``: the finished shortcut's trained bundle (:meth:`ModelBundle.to_dict`), in the
  run's working units; the resumed run symbolifies it again instead of training it again;
- ``screening``: the input screening's verdict (:func:`kansym.discover.screen.screening_to_record`,
  CSV units) and its options; the resumed run continues on the checkpoint's columns
  without screening again (:mod:`kansym.discover.screened`).

Each entry is used only when the options that shaped it are unchanged (:func:`reusable`);
else that stage runs again, which gives the same result, only later. ``direct`` and
``shortcut`` are in the working units of the run's columns (:mod:`kansym.discover.magnitude`).
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Sequence

import sympy

from kansym.discover.result import RunInterrupted
from kansym.errors import DataError
from kansym.io.bundle import ModelBundle
from kansym.symbolic.compose import input_symbols
from kansym.symbolic.direct import DirectCandidate
from kansym.symbolic.parse import parse_formula

__all__ = ["read_carried", "reusable", "carried_direct", "with_entries", "with_carried", "direct_entry", "DIRECT_FIELDS"]

log = logging.getLogger("kansym")

# DiscoverConfig fields (besides the training ones, which a resumed run keeps) that shape the search
DIRECT_FIELDS = ("library", "direct_search", "structure", "complexity_weight")
MARK = "_kansym_c"  # name of the placeholder of the k-th float constant in a saved formula


def _encode(expr: sympy.Expr, names: Sequence[str]) -> dict | None:
    """``{"text", "floats"}`` of ``expr``, or None when it would not read back exactly."""
    floats = sorted(expr.atoms(sympy.Float), key=sympy.default_sort_key)
    if any(f._prec != 53 for f in floats):  # a float64 holds it exactly only at 53 bits
        return None
    marks = {f: sympy.Symbol(f"{MARK}{k}", real=True) for k, f in enumerate(floats)}
    entry = {"text": str(expr.xreplace(marks)), "floats": [float(f) for f in floats]}
    try:
        same = sympy.srepr(_decode(entry, names)) == sympy.srepr(expr)
    except DataError:
        same = False
    return entry if same else None


def _decode(entry: dict, names: Sequence[str]) -> sympy.Expr:
    floats = [float(v) for v in entry["floats"]]
    marks = {f"{MARK}{k}": sympy.Symbol(f"{MARK}{k}", real=True) for k in range(len(floats))}
    symbols = {s.name: s for s in input_symbols(names)}
    expr = parse_formula(str(entry["text"]), {**symbols, **marks})
    return expr.xreplace({marks[f"{MARK}{k}"]: sympy.Float(v) for k, v in enumerate(floats)})


def direct_entry(direct: Sequence[DirectCandidate] | None, reference: float, config: Any,
                 input_names: Sequence[str]) -> dict | None:
    """The record's ``direct`` entry of a finished direct or structure search.

    Parameters
    ----------
    direct : sequence of DirectCandidate or None
        The search's candidates (None: no search ran), working units.
    reference : float
        The reference (oracle) model's held-out R² (NaN: none).
    config : DiscoverConfig
        The run's config (its :data:`DIRECT_FIELDS` are kept with the entry).
    input_names : sequence of str
        The run's columns: the candidates' symbols.

    Returns
    -------
    dict or None
        None when some candidate would not read back exactly (the resumed run then
        searches again).
    """
    settings = config.to_dict()
    candidates = None
    if direct is not None:
        candidates = []
        for c in direct:
            text = _encode(c.expr, input_names)
            if text is None:
                return None
            candidates.append({**text, "error": float(c.error), "complexity": int(c.complexity), "origin": c.origin,
                               "structure": copy.deepcopy(c.structure)})  # candidates share it: a checkpoint is a tree
    return {"candidates": candidates, "reference": float(reference),
            "config": {f: settings[f] for f in DIRECT_FIELDS}}


def read_carried(record: dict, source: str) -> dict:
    """What a resume record carries: ``{"direct": entry, "screening": entry, "shortcut": ModelBundle}``,
    the keys it holds (the entries are read when used: :func:`carried_direct`, :func:`reusable`).

    Raises
    ------
    CheckpointError
        A saved shortcut bundle that cannot be read.
    """
    out: dict = {k: record[k] for k in ("direct", "screening") if isinstance(record.get(k), dict)}
    if isinstance(record.get("shortcut"), dict):
        out["shortcut"] = ModelBundle.from_dict(record["shortcut"], f"the shortcut KAN saved in '{source}'")
    return out


def reusable(point: Any, key: str, settings: dict, what: str) -> dict | None:
    """The ``key`` entry carried by an interrupted run, if its options still hold.

    Parameters
    ----------
    point : ResumePoint or None
        The resumed run (:class:`~kansym.discover.resume.ResumePoint`).
    key : str
        ``"direct"`` or ``"screening"``.
    settings : dict
        The resumed run's values of the options that shape that entry.
    what : str
        The stage, for the line saying why it runs again.

    Returns
    -------
    dict or None
        The entry; None when there is none or an option changed (logged).
    """
    entry = None if point is None else point.carried.get(key)
    if entry is None:
        return None
    changed = [f for f in settings if entry.get("config", {}).get(f) != settings[f]]
    if changed:
        log.info("%s: runs again (%s changed since the interrupted run)", what, ", ".join(changed))
        return None
    return entry


def carried_direct(point: Any, config: Any, input_names: Sequence[str]) -> tuple[list | None, float] | None:
    """The search result the interrupted run carries, read back.

    Parameters
    ----------
    point : ResumePoint or None
    config : DiscoverConfig
        The resumed run's config (its :data:`DIRECT_FIELDS` must equal the saved ones).
    input_names : sequence of str
        The run's columns.

    Returns
    -------
    (list of DirectCandidate or None, float) or None
        The candidates (None: no search had run) and the reference model's R², exactly
        as the interrupted run had them; None: search again.
    """
    settings = config.to_dict()
    entry = reusable(point, "direct", {f: settings[f] for f in DIRECT_FIELDS}, "search before the KAN")
    if entry is None:
        return None
    try:
        candidates = None if entry["candidates"] is None else [
            DirectCandidate(expr=_decode(c, input_names), error=float(c["error"]), complexity=int(c["complexity"]),
                            origin=str(c["origin"]), structure=c.get("structure"))
            for c in entry["candidates"]]
        reference = float(entry["reference"])
    except (DataError, KeyError, TypeError, ValueError):
        log.info("search before the KAN: runs again (the interrupted run's candidates could not be read)")
        return None
    if candidates is not None:
        log.info("search before the KAN: the %d candidate%s of the interrupted run taken as %s", len(candidates),
                 "" if len(candidates) == 1 else "s", "it is" if len(candidates) == 1 else "they are")
    return candidates, reference


def with_entries(stop: RunInterrupted, entries: dict) -> RunInterrupted:
    """``stop`` with ``entries`` added to its resume record (itself when it has none: nothing is
    resumable). An entry the record already holds is kept (the innermost stage wrote it)."""
    bundle = stop.bundle
    record = None if bundle is None else bundle.meta.get("resume")
    if not isinstance(record, dict):
        return stop
    record = {**entries, **record}
    return RunInterrupted(str(stop), bundle=bundle.replace_model(bundle.model, resume=record), state=stop.state,
                          stage=stop.stage)


def with_carried(stop: RunInterrupted, *, direct: Sequence[DirectCandidate] | None, reference: float, config: Any,
                 input_names: Sequence[str], shortcut: ModelBundle | None = None) -> RunInterrupted:
    """``stop`` with the finished search and a finished shortcut (for an interrupt of the main
    run) added to its resume record."""
    entries = {}
    entry = direct_entry(direct, reference, config, input_names)
    if entry is not None:
        entries["direct"] = entry
    record = getattr(stop.bundle, "meta", {}).get("resume")
    if shortcut is not None and isinstance(record, dict) and record.get("run") == "main":
        entries["shortcut"] = shortcut.to_dict()
    return with_entries(stop, entries)
