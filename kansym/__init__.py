"""kansym: find the laws hidden in data with Kolmogorov-Arnold Networks.

The public pipeline (DESIGN.md §2)::

    table = kansym.io.read_table("data.csv", target="y")
    result = kansym.discover(table)          # train -> prune -> symbolify -> verify
    print(result.formula.latex)

Heavy optional parts (pysr, matplotlib) are imported lazily.
"""

from __future__ import annotations

import logging

from kansym.errors import CheckpointError, ConfigError, DataError, FitError, KansymError

__version__ = "0.1.0"

logging.getLogger("kansym").addHandler(logging.NullHandler())

__all__ = [
    "__version__",
    "KansymError",
    "DataError",
    "CheckpointError",
    "ConfigError",
    "FitError",
]
