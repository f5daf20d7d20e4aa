"""Fixtures shared by the test directories."""

import contextlib
import signal

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


@contextlib.contextmanager
def _sigint_at_its_default():
    """Start children with SIGINT at its default disposition, whatever this process inherited.

    A pytest started as a background job of a non-interactive shell (``.ci/run > log &``, some
    CI runners) has SIGINT *ignored* (POSIX, Shell Command Language §2.11). An ignored signal
    stays ignored across fork and exec, so the `kansym train` child ignored the test's SIGINT
    and trained on: the 60 s timeouts of fresh-clone suite runs on 2026-11-29. A *caught*
    signal is reset to its default on exec, so catching SIGINT here while the child starts
    gives it what a program started at a terminal gets (and unblocking covers a blocked one).
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if previous is not None:  # None: a handler installed outside Python, which we cannot restore
            signal.signal(signal.SIGINT, previous)


@pytest.fixture
def sigint_as_at_a_terminal():
    """A context manager: children started inside it get SIGINT at its default disposition
    (as at a terminal), whatever this process inherited (see ``_sigint_at_its_default``)."""
    return _sigint_at_its_default
