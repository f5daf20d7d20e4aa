"""The run's time limit (issue 16): one Deadline, read only with a limit, sticky once expired."""

import math

import pytest

from kansym.deadline import DEFAULT_TIME_LIMIT, Deadline, time_is_up
from kansym.errors import ConfigError


class Clock:
    """A fake monotonic clock: ``now`` seconds, moved by the test; counts its reads."""

    def __init__(self):
        self.now, self.reads = 0.0, 0

    def __call__(self):
        self.reads += 1
        return self.now


def test_no_limit_never_reads_the_clock():
    def clock():
        raise AssertionError("the clock was read")

    d = Deadline(None, clock=clock)
    assert not d.expired() and not time_is_up(d) and d.remaining() == math.inf and not d.bound
    assert not time_is_up(None)


def test_expires_at_the_limit_and_stays_expired():
    clock = Clock()
    d = Deadline(10, clock=clock)
    clock.now = 9.99
    assert not d.expired() and d.remaining() == pytest.approx(0.01)
    clock.now = 10.0
    assert d.expired()
    clock.now = 0.0  # a clock that went back does not undo it: later stages see what earlier ones saw
    assert d.expired() and d.remaining() == 0.0
    reads = clock.reads
    assert time_is_up(d) and clock.reads == reads  # once expired, no more reads


def test_cuts_keep_the_first_note_of_each_stage():
    d = Deadline(5, clock=Clock())
    assert d.cuts == () and not d.bound
    d.cut("Occam step: stopped after 3 trials")
    d.cut("refinement: snapping stopped after 2 of 9 constants")
    d.cut("Occam step: stopped after 3 trials")  # a stage that looks again repeats itself
    d.cut("refinement: the final refit skipped")
    assert d.cuts == ("Occam step: stopped after 3 trials", "refinement: snapping stopped after 2 of 9 constants")
    assert d.bound


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "10"])
def test_impossible_limits_are_refused(bad):
    with pytest.raises(ConfigError, match="time limit"):
        Deadline(bad)


def test_the_default_is_a_few_minutes():
    assert 60 <= DEFAULT_TIME_LIMIT <= 900


def test_a_share_ends_earlier_with_the_same_start_and_record():
    clock = Clock()
    d = Deadline(10, clock=clock)
    half = d.share(0.5)
    clock.now = 5.0
    assert half.expired() and not d.expired() and d.share(0.9).remaining() == pytest.approx(4.0)
    half.cut("training: 6 of 20 steps")
    assert d.cuts == ("training: 6 of 20 steps",)  # one record for the whole run
    assert not half.share(1.0).expired()  # a later share of the same limit is not up yet
    assert Deadline(None).share(0.5).share(0.1).remaining() == math.inf
    with pytest.raises(ConfigError, match="share"):
        d.share(0)


def test_absorb_records_the_cuts_of_a_part_once_per_stage():
    run, part = Deadline(100), Deadline(50)
    run.cut("training: 3 of 20 steps")
    part.cut("training: 1 of 20 steps")
    part.cut("refinement: skipped")
    run.absorb(part)
    assert run.cuts == ("training: 3 of 20 steps", "refinement: skipped") and run.bound
