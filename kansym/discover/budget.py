"""What a run says when its time limit bound: the printed line and the ``formula.json`` entry.

A run under ``DiscoverConfig.time_limit`` (``kansym fit --time-limit``) that its
:class:`~kansym.deadline.Deadline` never cut says nothing of it: its output is the same,
byte for byte, as without a limit. One that was cut carries
:attr:`~kansym.discover.result.Discovery.cut_short`, and every output names it:
:func:`cut_short_line` for the terminal (``kansym fit``, the estimator's warning) and
:func:`time_limit_entry` for the record (key ``time_limit``,
:mod:`kansym.discover.record`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["cut_short_line", "time_limit_entry", "UNHURRIED"]

UNHURRIED = "the formula may differ from that of an unhurried run"


def cut_short_line(result: Any) -> str | None:
    """One line naming what the time limit cut short, or None when it did not bind.

    ``"the time limit (20 s) cut short: training: 6 of 20 steps; Occam step: skipped; the
    formula may differ from that of an unhurried run"``.
    """
    cuts = tuple(getattr(result, "cut_short", ()) or ())
    if not cuts:
        return None
    return f"the time limit ({result.time_limit:g} s) cut short: {'; '.join(cuts)}; {UNHURRIED}"


def time_limit_entry(result: Any) -> dict:
    """``{"time_limit": {"seconds", "cut_short", "note"}}`` for the record, or ``{}`` when the
    limit did not bind (the record is then the same bytes as without a limit)."""
    cuts = list(getattr(result, "cut_short", ()) or ())
    if not cuts:
        return {}
    return {"time_limit": {"seconds": result.time_limit, "cut_short": cuts, "note": UNHURRIED}}
