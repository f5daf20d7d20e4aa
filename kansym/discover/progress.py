"""What a discovery run says as each stage starts, and which stage it is in (issue 19).

On a terminal (and not with ``--quiet``) :class:`Stages` logs one line as each stage
starts: what it does and how long it has left at most, that is until the end of its
share of the time limit (:data:`kansym.discover.budget.SHARES`; a stage looks at the clock
between its units of work, so it can overrun its share by the one in progress); a short
stage the limit does not cut (screening, pruning, verification) says what is left of it. The
sparsifying training has its own line after its first step: the time left at the
measured step rate, ``(time so far / steps so far) * steps to go``, beside that bound.
Off a terminal (logs, pipes, the user guide's outputs) these lines are not written: the
log says what each stage did, and holds no clock readings.

:attr:`Stages.current` is the stage running, for the record of an interrupted run
(:func:`kansym.discover.resume.trained_record`) and its message.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from typing import Callable

from kansym.deadline import Deadline
from kansym.discover.budget import SHARES, stage_deadline

__all__ = ["Stages"]

log = logging.getLogger("kansym")


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
