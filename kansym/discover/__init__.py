"""Discovery: from a table to a pruned KAN and a verified formula (the main job).

::

    from kansym.discover import discover
    result = discover(x, y, input_names, output_names)     # DiscoverConfig() defaults
    result.formulas[0].expr, result.formulas[0].r2_test

Modules, in the order the data flow through them (docs/algorithms.md, "Architecture"):
:mod:`~kansym.discover.config` (:class:`DiscoverConfig`), :mod:`~kansym.discover.screen` (which
columns of a wide table the run uses), :mod:`~kansym.discover.rows` (the rows of a run and their
working units), :mod:`~kansym.discover.structure_tests` (smooth fits of the data: additivity, a noise
floor, log or linear units; and the tests on an oracle), :mod:`~kansym.discover.structure_search`
(the reference model and the structure search on it), :mod:`~kansym.discover.stages` (train, prune,
fine-tune; symbolify, Occam step, refine, verify), :mod:`~kansym.discover.choice` (the answer
among the KAN's formula and the searches' candidates), :mod:`~kansym.discover.wording` (the
answer's one wording), :mod:`~kansym.discover.run`
(:func:`discover`, :func:`train`), :mod:`~kansym.discover.progress` (the time limit's shares,
the stage running, its line on a terminal), :mod:`~kansym.discover.result` (:class:`Formula`,
:class:`Discovery`), :mod:`~kansym.discover.resume` (interrupted runs, in or after their
training), :mod:`~kansym.discover.record` (``formula.json``), :mod:`~kansym.discover.units`
and :mod:`~kansym.discover.dimensional` (physical units), :mod:`~kansym.discover.pysr` (the
PySR backend).

The names below import their module on first use (PEP 562), so that :mod:`~kansym.discover.config`
is read without torch, e.g. by ``kansym --help``.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "DiscoverConfig", "Discovery", "Formula", "RunInterrupted", "UnitsDiscovery", "FormulaRecord", "ResumePoint",
    "discover", "train", "discover_with_units", "formula_record", "discovery_record", "read_record", "load_resume", "read_resume",
    "split_holdout",
]

_WHERE = {
    "DiscoverConfig": "config", "UnitsDiscovery": "dimensional", "discover_with_units": "dimensional",
    "FormulaRecord": "record", "discovery_record": "record", "formula_record": "record", "read_record": "record",
    "Discovery": "result", "Formula": "result", "RunInterrupted": "result", "split_holdout": "result",
    "ResumePoint": "resume", "load_resume": "resume", "read_resume": "resume", "discover": "run", "train": "run",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"kansym.discover.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'kansym.discover' has no attribute {name!r}")
