"""Fixtures shared by the test directories."""

import pytest


class StepClock:
    """A fake clock at 0 until its ``expire_at``-th read, then far past any limit (a
    :class:`kansym.deadline.Deadline` reads it once at its start)."""

    def __init__(self, expire_at: int):
        self.expire_at, self.reads = expire_at, 0

    def __call__(self):
        self.reads += 1
        return 0.0 if self.reads < self.expire_at else 1e9


@pytest.fixture
def step_clock():
    """:class:`StepClock`, to make deadlines expire after a given number of clock reads."""
    return StepClock
