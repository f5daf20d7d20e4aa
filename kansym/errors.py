"""Typed errors of kansym.

Every error a user can cause (a bad file, a wrong option, a corrupt checkpoint)
is a :class:`KansymError` carrying one actionable sentence. The CLI prints it as
``error: <message>`` and exits with status 2; library callers catch the subclass
they care about.
"""

from __future__ import annotations

__all__ = ["KansymError", "DataError", "CheckpointError", "ConfigError", "FitError"]


class KansymError(Exception):
    """Base class of every error kansym raises on purpose."""

    exit_code = 2


class DataError(KansymError, ValueError):
    """A table or array given by the user cannot be used (missing column, NaN, ...)."""


class CheckpointError(KansymError):
    """A checkpoint file is missing, corrupt, of an unknown version or of the wrong kind."""


class ConfigError(KansymError, ValueError):
    """An option or configuration value is impossible (negative theta, empty width, ...)."""


class FitError(KansymError, RuntimeError):
    """Training or symbolic fitting failed (diverged to NaN, no primitive fits, ...).

    Attributes
    ----------
    result : object or None
        What the failed stage had when it stopped (for training: a
        :class:`~kansym.train.fit.FitResult` rolled back to its last good step).
    state : object or None
        The resumable state at that point (a :class:`~kansym.train.state.FitState`).
    """

    def __init__(self, message: str, *, result: object = None, state: object = None) -> None:
        super().__init__(message)
        self.result = result
        self.state = state
