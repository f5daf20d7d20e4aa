"""Shared matplotlib plumbing of :mod:`kansym.plot` (imported lazily, never at package import).

Figures are built with :class:`matplotlib.figure.Figure` directly, not through
``pyplot``: no GUI backend is ever started, nothing global is changed, and the
plots work on a machine without a display. :func:`interactive_backend_ok` tells a
caller who wants ``pyplot`` whether a display exists (else it selects Agg).
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from kansym.errors import ConfigError

__all__ = ["FORMATS", "new_figure", "save_figure", "output_format", "ensure_backend", "edge_label"]

FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg"}
SIGNATURE = "kansym plot"  # in the image metadata: kansym may replace its own images


def ensure_backend() -> str:
    """Select the non-interactive Agg backend when there is no display; return the backend name.

    Only needed by callers that use ``pyplot``; kansym's own figures never do.
    """
    import matplotlib

    headless = sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if headless and "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    return str(matplotlib.get_backend())


def new_figure(width: float, height: float) -> Any:
    """A :class:`matplotlib.figure.Figure` of ``width x height`` inches (no pyplot)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=110)


def output_format(path: str | os.PathLike[str]) -> str:
    """The matplotlib format of ``path`` from its suffix.

    Raises
    ------
    ConfigError
        If the suffix is not ``.png``, ``.pdf`` or ``.svg``.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError(f"cannot tell the image format of {str(path)!r}; end the file name in .png, .pdf or .svg")
    return FORMATS[suffix]


def save_figure(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` atomically to ``path`` (format from the suffix).

    Raises
    ------
    ConfigError
        Unknown suffix, or the file cannot be written (missing permission, ...).
    """
    from kansym.io.atomic import atomic_write

    fmt = output_format(path)
    meta = {"Software": SIGNATURE} if fmt == "png" else {"Creator": SIGNATURE}

    def draw(fh):
        with warnings.catch_warnings():  # a column name's control character is drawn as a box, not a raw warning line
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font", category=UserWarning)
            fig.savefig(fh, format=fmt, bbox_inches="tight", metadata=meta)
    return atomic_write(path, draw, error=ConfigError, what="figure")


def written_by_kansym(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an image that :func:`save_figure` wrote (so it may be replaced)."""
    try:
        p = Path(path)
        if p.suffix.lower() not in FORMATS or p.stat().st_size > 50_000_000:
            return False
        return SIGNATURE.encode() in p.read_bytes()
    except OSError:
        return False


def edge_label(edge: Sequence[int]) -> str:
    """``"l:i->j"`` of an edge id ``(layer, i_in, j_out)``."""
    layer, i, j = (int(v) for v in edge)
    return f"{layer}:{i}\u2192{j}"


def dense_inputs(x: np.ndarray, n: int = 64) -> np.ndarray:
    """``(n, d)`` points, column ``k`` evenly spanning the range of ``x[:, k]`` (model units)."""
    lo, hi = x.min(axis=0), x.max(axis=0)
    t = np.linspace(0.0, 1.0, n)[:, None]  # (n, 1)
    return lo + t * (hi - lo)  # (n, d)
