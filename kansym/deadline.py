"""The user's time limit of one run (``kansym fit --time-limit``): the only clock the stages read.

kansym's own budgets count work (LBFGS steps, Occam trials, formula evaluations), never
seconds, so one command gives the same bytes on a busy machine as on a quiet one. The
user's time limit is the exception, and it is kept to one object: a :class:`Deadline`,
made once per run and passed explicitly to every stage that can stop early (training and
fine-tuning at a step boundary, the per-edge fits between edges, the Occam step between
trials, refinement between snaps, the direct search between candidate families, the
additive shortcut's second run). A stage that finds the time up returns what it has and
says so with :meth:`Deadline.cut`; the run's output then names those stages
(:attr:`Deadline.cuts`). A deadline that never expires changes nothing: the stages make
the same choices as without one, and no cut is recorded.

Source of the idea: anytime algorithms (Dean & Boddy 1988, "An analysis of
time-dependent planning", AAAI), which can be stopped at any time and then return the
best answer found so far.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from typing import Callable

from kansym.errors import ConfigError

__all__ = ["Deadline", "time_is_up", "DEFAULT_TIME_LIMIT"]

log = logging.getLogger("kansym")

# Seconds a discovery run may take by default (``kansym fit --time-limit``,
# ``DiscoverConfig.time_limit``): many times the median equation's time
# (docs/algorithms.md §7d has the measurements).
DEFAULT_TIME_LIMIT = 300.0


class Deadline:
    """A wall-clock limit of ``seconds`` from now, and the record of what it cut short.

    Parameters
    ----------
    seconds : float or None
        The limit; None never expires (and never reads the clock).
    clock : callable () -> float, optional
        Seconds of a monotonic clock (default :func:`time.monotonic`); tests pass a fake.

    Raises
    ------
    ConfigError
        ``seconds`` not a finite number > 0.

    Examples
    --------
    >>> d = Deadline(None)
    >>> d.expired(), d.cuts
    (False, ())
    >>> ticks = iter([0.0, 5.0, 11.0])
    >>> d = Deadline(10, clock=lambda: next(ticks))
    >>> d.expired(), d.expired()
    (False, True)
    >>> d.cut("Occam step: stopped after 3 trials"); d.cuts
    ('Occam step: stopped after 3 trials',)
    """

    def __init__(self, seconds: float | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        if seconds is not None and not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
            raise ConfigError(f"the time limit must be a finite number of seconds > 0, got {seconds!r}")
        self.seconds = None if seconds is None else float(seconds)
        self._clock = clock
        self._start = None if seconds is None else clock()
        self._end = None if seconds is None else self._start + float(seconds)
        self._passed = False
        self._cuts: list[str] = []

    def share(self, fraction: float) -> "Deadline":
        """The part of this deadline that ends after ``fraction`` of its seconds (``0 < fraction <= 1``).

        Same start, clock and record of cuts: a stage given a share stops in time to
        leave the rest of the limit to the stages after it. Without a limit, itself.

        Raises
        ------
        ConfigError
            ``fraction`` outside ``(0, 1]``.
        """
        if not 0 < fraction <= 1:
            raise ConfigError(f"a share of the time limit lies in (0, 1], got {fraction!r}")
        if self._end is None:
            return self
        view = copy.copy(self)  # shallow: the list of cuts is the same object
        view._end = self._start + fraction * self.seconds
        view._passed = self._passed and view._end <= self._end  # a share that ends later may not be up yet
        return view

    def expired(self) -> bool:
        """Whether the time is up. Once it is, it stays up (later stages see what earlier ones saw)."""
        if self._end is None:
            return False
        if not self._passed:
            self._passed = self._clock() >= self._end
        return self._passed

    def remaining(self) -> float:
        """Seconds left (``inf`` without a limit, 0 once expired)."""
        if self._end is None:
            return math.inf
        return 0.0 if self.expired() else max(self._end - self._clock(), 0.0)

    def cut(self, what: str) -> None:
        """Record that a stage stopped early or was skipped because the time was up.

        ``what`` is ``"stage: how far it got"`` (``"training: 6 of 20 steps"``); it is
        logged and kept in :attr:`cuts`, the first one of each stage only (a stage looks
        at the deadline again after its cut and would repeat it).
        """
        stage = what.split(":", 1)[0]
        if all(c.split(":", 1)[0] != stage for c in self._cuts):
            self._cuts.append(what)
            log.info("time limit (%g s): %s", self.seconds, what)

    def absorb(self, part: "Deadline") -> None:
        """Record the cuts of ``part``, a limit of its own given to a part of this run (already
        logged there), as this run's: the run's record says what was cut short in that part."""
        for what in part.cuts:
            stage = what.split(":", 1)[0]
            if all(c.split(":", 1)[0] != stage for c in self._cuts):
                self._cuts.append(what)

    @property
    def cuts(self) -> tuple[str, ...]:
        """What the limit cut short or skipped, in the order it happened."""
        return tuple(self._cuts)

    @property
    def bound(self) -> bool:
        """Whether the limit changed the run (some stage was cut)."""
        return bool(self._cuts)

    def __repr__(self) -> str:
        return f"Deadline({self.seconds!r}, cuts={len(self._cuts)})"


def time_is_up(deadline: Deadline | None) -> bool:
    """``deadline.expired()``, False for None (no limit): the one check every stage makes."""
    return deadline is not None and deadline.expired()
