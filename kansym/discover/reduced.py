"""A model of a ``--units`` run on the table's columns: the dimensional reduction as plain data.

The KAN of :func:`kansym.discover.dimensional.discover_with_units` learns
``y / prod x^p = f(pi_1, ..., pi_k)`` on dimensionless groups ``pi_j = prod x^U_j``, so its
checkpoints' inputs are the groups (``pi1``, ...) and its target ``TARGET_reduced``. The
reduction travels with the checkpoints (``meta["reduction"]``) and with ``formula.json``
(``reduction``) as :func:`reduction_meta`; :func:`model_columns` and :func:`predict_columns`
then take rows of the table's own columns, as ``kansym predict`` does.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

import numpy as np

from kansym.errors import CheckpointError

__all__ = ["reduction_meta", "model_columns", "model_target", "group_inputs", "predict_columns",
           "outside_training_range"]


def reduction_meta(reduction: Any, target: str) -> dict:
    """The plain form of a :class:`kansym.discover.units.Reduction` (JSON and checkpoint safe).

    Parameters
    ----------
    reduction : Reduction
    target : str
        The table's target column (the KAN predicts ``target`` divided by the monomial).

    Returns
    -------
    dict
        ``columns`` (the table's inputs, in order), ``target``, ``monomial`` and ``groups``
        (readable strings), ``p`` (``{column: "3/2"}``, the monomial's non-zero exponents)
        and ``exponents`` (``{group: [integer exponent of each column]}``).

    Examples
    --------
    >>> from fractions import Fraction
    >>> from kansym.discover.units import Reduction
    >>> red = Reduction(("m", "v", "c"), ("kg", "m", "s"), (Fraction(1), Fraction(0), Fraction(2)), ((0, 1, -1),), ("pi1",))
    >>> reduction_meta(red, "E")["exponents"]
    {'pi1': [0, 1, -1]}
    """
    text = reduction.to_dict()
    return {"columns": list(reduction.names), "target": str(target), "monomial": text["monomial"],
            "p": text["p"], "groups": text["groups"],
            "exponents": {g: [int(e) for e in row] for g, row in zip(reduction.group_names, reduction.groups)}}


def _reduction(bundle: Any) -> Mapping | None:
    """The checkpoint's reduction, checked against its inputs; None for a model of the columns.

    Raises
    ------
    CheckpointError
        A reduction that is not what :func:`reduction_meta` writes: no list of column names, no
        target name, a model input without its integer exponents (one per column), or a monomial
        exponent that is not a fraction of a listed column.
    """
    red = bundle.meta.get("reduction")
    if not (isinstance(red, Mapping) and "exponents" in red):
        return None
    columns, exponents, p = red.get("columns"), red.get("exponents"), red.get("p", {})
    ok = (isinstance(columns, list) and columns and all(isinstance(c, str) and c for c in columns)
          and isinstance(red.get("target"), str) and isinstance(exponents, Mapping) and isinstance(p, Mapping)
          and all(isinstance(exponents.get(g), list) and len(exponents[g]) == len(columns)
                  and all(isinstance(e, int) and not isinstance(e, bool) for e in exponents[g])
                  for g in bundle.input_names)
          and all(c in columns and isinstance(v, str) and _is_fraction(v) for c, v in p.items()))
    if not ok:
        raise CheckpointError("the checkpoint's dimensional reduction (meta 'reduction') does not match its inputs; "
                              "use the checkpoint kansym fit --units wrote")
    return red


def _is_fraction(text: str) -> bool:
    try:
        Fraction(text)
    except (ValueError, ZeroDivisionError):
        return False
    return len(text) <= 40


def model_columns(bundle: Any) -> tuple[str, ...]:
    """The table columns a checkpoint predicts from: its inputs, or the columns of its groups."""
    red = _reduction(bundle)
    return tuple(bundle.input_names) if red is None else tuple(red["columns"])


def model_target(bundle: Any) -> tuple[str, ...]:
    """The table targets a checkpoint predicts (``E``, not ``E_reduced``, for a reduced one)."""
    red = _reduction(bundle)
    return tuple(bundle.output_names) if red is None else (str(red["target"]),)


def group_inputs(bundle: Any, x: np.ndarray) -> np.ndarray:
    """The model's inputs of rows ``x (N, len(model_columns))``: ``x`` itself, or the groups ``(N, k)``."""
    red = _reduction(bundle)
    x = np.asarray(x, dtype=np.float64)
    if red is None:
        return x
    with np.errstate(all="ignore"):
        return np.stack([np.prod(x ** np.asarray(red["exponents"][g], dtype=float), axis=1)
                         for g in bundle.input_names], axis=1)


def predict_columns(bundle: Any, x: np.ndarray) -> np.ndarray:
    """The model's predictions of the table's targets from rows of :func:`model_columns` -> ``(N, d_out)``.

    A reduced model's output is multiplied back by the monomial ``prod x^p``.
    """
    red = _reduction(bundle)
    y = bundle.predict(group_inputs(bundle, x))
    if red is None:
        return y
    columns = list(red["columns"])
    p = np.asarray([float(Fraction(red["p"].get(c, "0"))) for c in columns])
    with np.errstate(all="ignore"):
        return y * np.prod(np.asarray(x, dtype=np.float64) ** p, axis=1)[:, None]


def outside_training_range(bundle: Any, x: np.ndarray) -> int:
    """How many rows of ``x`` (table columns) lie outside the range the model was trained on
    (an input, or group, beyond the min-max of its training rows, or not finite there)."""
    with np.errstate(all="ignore"):
        u = bundle.transform.inputs(group_inputs(bundle, x))  # training rows span [-1, 1]
    return int(np.sum(~np.all(np.isfinite(u) & (np.abs(u) <= 1 + 1e-9), axis=1)))
