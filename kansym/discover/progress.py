"""A run's course: how its time limit is shared among the stages, what it says as each starts, and when the limit bound.

On a terminal (and not with ``--quiet``) :class:`Stages` logs one line as each stage
starts: what it does and how long it has left at most, that is until the end of its
share of the time limit (:data:`SHARES`; a stage looks at the clock
between its units of work, so it can overrun its share by the one in progress); a short
stage the limit does not cut (screening, pruning, verification) says what is left of it. The
sparsifying training has its own line after its first step: the time left at the
measured step rate, ``(time so far / steps so far) * steps to go``, beside that bound.
Off a terminal (logs, pipes, the user guide's outputs) these lines are not written: the
log says what each stage did, and holds no clock readings.

:attr:`Stages.current` is the stage running, for the record of an interrupted run
(:func:`kansym.discover.resume.trained_record`) and its message.

A run's time limit: how it is shared among the stages, and what the run says when it bound.

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

import logging
import math
import sys
import time
from typing import Any, Callable

from kansym.deadline import Deadline

__all__ = ['SHARES', 'stage_deadline', 'cut_short_line', 'time_limit_entry', 'UNHURRIED', 'Stages']

log = logging.getLogger("kansym")


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


class Stages:
    """The stage a run is in, and its one line per stage on a terminal.

    Parameters
    ----------
    deadline : kansym.deadline.Deadline, optional
        The run's time limit; the lines bound each stage by its share of it.
    show : bool, optional
        Write the lines (default: only when stderr is a terminal); False with ``--quiet``.
    clock : callable () -> float, optional
        Seconds of a monotonic clock (the training's step rate); tests pass a fake.

    Examples
    --------
    >>> s = Stages(Deadline(None), show=False)
    >>> s.start("pruning", "nodes below theta"); s.current
    'pruning'
    """

    def __init__(self, deadline: Deadline | None = None, show: bool | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.deadline = deadline
        self.show = sys.stderr.isatty() if show is None else bool(show)
        self.current = "set-up"
        self._clock = clock

    def start(self, stage: str, what: str) -> None:
        """Enter ``stage`` and, when shown, log ``"stage: what (at most N s left ...)"``."""
        self.current = stage
        if self.show:
            log.info("%s: %s%s", stage, what, self.bound(stage))

    def bound(self, stage: str, left: str = " left") -> str:
        """``" (at most 42 s left: its share of the 300 s time limit)"``, or ``""`` without a limit.

        A stage without a share (the screening, the pruning, the verification: short, and
        not cut by the limit) says only what is left of the limit,
        ``" (250 s of the 300 s time limit left)"``.
        """
        if self.deadline is None or self.deadline.seconds is None:
            return ""
        limit = f"the {self.deadline.seconds:g} s time limit"
        if stage not in SHARES:
            return f" ({_seconds(self.deadline.remaining())} of {limit} left)"
        return f" (at most {_seconds(stage_deadline(self.deadline, stage).remaining())}{left}: its share of {limit})"

    def training(self, label: str = "") -> Callable[[int, int], None]:
        """Enter the training stage; the ``on_step`` of :func:`kansym.train.fit.fit` that logs,
        after the first step it sees, the time left at the measured step rate (when shown)."""
        self.current = f"training{f' ({label})' if label else ''}"
        start, first = self._clock(), []

        def on_step(done: int, steps: int) -> None:
            if first or not self.show:
                return
            first.append(done)  # steps done before this call (a resumed training) are not timed
            left = steps - done
            if left > 0:
                rate = self._clock() - start
                log.info("%s: about %s left at %.2g s a step, %d of %d steps to go%s", self.current,
                         _seconds(rate * left), rate, left, steps, self.bound("training", ""))

        return on_step


def _seconds(s: float) -> str:
    if not math.isfinite(s):
        return "? s"
    return f"{s:.0f} s" if s >= 10 else f"{s:.1g} s" if s < 1 else f"{s:.1f} s"
