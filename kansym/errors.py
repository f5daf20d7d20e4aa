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
    """Training or symbolic fitting failed (diverged to NaN, no primitive fits, ...)."""
