"""kansym: find the laws hidden in data with Kolmogorov-Arnold Networks.

The public pipeline (docs/algorithms.md, "Architecture")::

    from kansym.io.tabular import read_table
    from kansym.discover import discover

    table = read_table("data.csv", target="y")
    result = discover(table.x, table.y, table.input_names, table.target_names)
    result.formulas[0].expr        # train -> prune -> symbolify -> refine -> verify

or, scikit-learn style, ``kansym.KANRegressor().fit(X, y).sympy()``.

Heavy optional parts (pysr, matplotlib) are imported lazily.
"""

from __future__ import annotations

import logging

from kansym.errors import CheckpointError, ConfigError, DataError, FitError, KansymError
from kansym.version import __version__


logging.getLogger("kansym").addHandler(logging.NullHandler())

__all__ = [
    "__version__",
    "KansymError",
    "DataError",
    "CheckpointError",
    "ConfigError",
    "FitError",
    "KANRegressor",
]


def __getattr__(name: str):
    """Lazy exports: ``kansym.KANRegressor`` imports torch and the pipeline on first use."""
    if name == "KANRegressor":
        from kansym.estimator import KANRegressor

        return KANRegressor
    raise AttributeError(f"module 'kansym' has no attribute {name!r}")
