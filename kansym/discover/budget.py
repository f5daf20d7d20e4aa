"""A run's time limit: how it is shared among the stages, and what the run says when it bound.

Every stage gets the run's one :class:`~kansym.deadline.Deadline`, as the share of it by
which the stage must have stopped (:data:`SHARES`, :func:`stage_deadline`): a slow early
stage (a long training, a slow direct search) then still leaves time to the stages that
turn the model into a formula and verify it, and the last tenth of the limit is left to
the verification and the files. A share that is not used is not lost: a stage that
finishes early leaves the time to the next ones, whose shares end later.

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

from kansym.deadline import Deadline

__all__ = ["SHARES", "stage_deadline", "cut_short_line", "time_limit_entry", "UNHURRIED"]

UNHURRIED = "the formula may differ from that of an unhurried run"

# share of the time limit by which each stage has stopped ("training" also decides whether
# the hidden-layer KAN after the additive shortcut starts at all)
SHARES = {"direct search": 0.3, "training": 0.5, "fine-tuning": 0.6, "per-edge fits": 0.75, "Occam step": 0.85,
          "refinement": 0.9}


def stage_deadline(deadline: Deadline | None, stage: str) -> Deadline | None:
    """The part of the run's ``deadline`` that ``stage`` (a key of :data:`SHARES`) may use."""
    return None if deadline is None else deadline.share(SHARES[stage])


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
