"""Check a formula: fidelity on data (R², normalised error), and exact symbolic recovery of a
known law (:mod:`kansym.symbolic.recovery`, re-exported here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np

from kansym.errors import ConfigError, DataError
from kansym.symbolic.recovery import is_exact_recovery, round_floats

__all__ = ["round_floats", "is_exact_recovery", "r2_from_sse", "r2_score", "nrmse", "paired_gain", "Fidelity",
           "fidelity"]


def r2_from_sse(sse: float, sst: float, sst_floor: float = 0.0) -> float:
    """Coefficient of determination from sums of squares: ``1 - sse / max(sst, sst_floor)``.

    The one definition of R² in kansym (the textbook one; its constant-target
    convention is scikit-learn's ``sklearn.metrics.r2_score``): :func:`r2_score` and
    the per-edge fits' inner loop (:mod:`kansym.symbolic._search`, which has the sums
    already) both end here.

    Parameters
    ----------
    sse : float
        Sum of squared residuals ``sum (y - pred)**2``; ``inf`` gives ``-inf``.
    sst : float
        Total sum of squares ``sum (y - mean(y))**2``.
    sst_floor : float
        Smallest ``sst`` divided by. The per-edge fits pass ``N (1e-10 max(1, max|y|))**2``:
        an edge whose output varies by less than float64 noise (a dead edge) is then
        not "explained" by a primitive fitting that noise; every fit scores about the
        same and the simplest wins. Default 0: no floor.

    Returns
    -------
    float
        At most 1. If ``max(sst, sst_floor) == 0`` (a constant target, no floor):
        1.0 when ``sse == 0``, else 0.0 (scikit-learn's ``r2_score`` convention: the
        ratio is undefined, and a finite value keeps reports and sorting simple).
    """
    denom = max(sst, sst_floor)
    if denom == 0.0:
        return 1.0 if sse == 0.0 else 0.0
    return 1.0 - sse / denom


def _pair(y_true: Any, y_pred: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both arrays as flat float64 of one non-empty size, else DataError."""
    t = np.asarray(y_true, dtype=np.float64).ravel()
    p = np.asarray(y_pred, dtype=np.float64).ravel()
    if t.shape != p.shape or t.size == 0:
        raise DataError(f"y_true and y_pred must be non-empty and of equal size, got {t.size} and {p.size}.")
    return t, p


def _unit_exponent(t: np.ndarray, p: np.ndarray) -> int:
    """The binary exponent ``e`` of ``max |t|`` (of ``max |p|`` if ``t`` is all 0; finite values only)."""
    for a in (t, p):
        a = np.abs(a[np.isfinite(a)])
        if a.size and a.max() > 0:
            return int(np.frexp(a.max())[1])
    return 0


def _scaled(t: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """``t, p`` times ``2**-e`` (:func:`_unit_exponent`), and ``e``.

    Multiplying by a power of two is exact, so sums of squares of the scaled arrays are those
    of the originals times ``4**-e`` exactly: R² and the normalised error do not change, but
    targets near 1e307 no longer overflow when squared, nor ones near 1e-300 underflow to 0
    (a formula ``y = 0`` then scored R² 1 on a target that is never 0). A prediction
    ``2**1024`` times larger than the target overflows to inf: an infinite error.
    """
    e = _unit_exponent(t, p)
    if e == 0:
        return t, p, 0
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(t, -e), np.ldexp(p, -e), e


def r2_score(y_true: Any, y_pred: Any, *, nonfinite: Literal["raise", "-inf"] = "raise") -> float:
    """Coefficient of determination ``1 - SSE / SST`` of predictions (:func:`r2_from_sse`).

    Parameters
    ----------
    y_true, y_pred : array_like, shape (N,)
        Any shapes of ``N`` elements (flattened).
    nonfinite : {"raise", "-inf"}
        What a NaN or inf in ``y_true`` or ``y_pred`` gives: a :class:`DataError`
        (reports: the formula is undefined on some rows), or ``-inf``, the worst score
        (ranking candidate formulas, where an undefined one just loses).

    Returns
    -------
    float
        At most 1. A constant ``y_true`` gives 1.0 for a prediction equal to it and
        0.0 otherwise (scikit-learn's convention; exact equality, no tolerance).

    Raises
    ------
    DataError
        If sizes differ or are 0, or (``nonfinite="raise"``) a value is NaN or inf.
    ConfigError
        If ``nonfinite`` is neither ``"raise"`` nor ``"-inf"``.
    """
    if nonfinite not in ("raise", "-inf"):
        raise ConfigError(f"nonfinite must be 'raise' or '-inf', got {nonfinite!r}.")
    t, p = _pair(y_true, y_pred)
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p))):
        if nonfinite == "-inf":
            return -math.inf
        raise DataError("r2_score got NaN or inf; the formula may be undefined on some rows.")
    t, p, _ = _scaled(t, p)  # exact: R² at any magnitude (no overflow near 1e308, no underflow near 1e-300)
    with np.errstate(over="ignore", invalid="ignore"):
        sse = float(np.sum((t - p) ** 2))
        sst = float(np.sum((t - t.mean()) ** 2))
    if not math.isfinite(sse):  # a prediction beyond 2**1024 times the target's magnitude
        return -math.inf
    return r2_from_sse(sse, sst)


def nrmse(y_true: Any, y_pred: Any) -> float:
    """Normalised RMS error ``rms(y_pred - y_true) / std(y_true)``, the error formulas are ranked by.

    In exact arithmetic ``nrmse = sqrt(SSE / SST) = sqrt(1 - R²)``; it is computed
    from the residuals, not from :func:`r2_score`, because ``1 - R²`` cancels to 0
    below about 1e-16, so ``sqrt(1 - R²)`` cannot tell errors below about 1e-8
    apart, and exact-formula thresholds such as
    :data:`kansym.symbolic.direct.ERROR_FLOOR` (1e-9) lie below that.

    Parameters
    ----------
    y_true, y_pred : array_like, shape (N,)
        Any shapes of ``N`` elements (flattened); ``std`` is the population one.

    Returns
    -------
    float
        ``>= 0``; ``inf`` if a value of either array is NaN or inf (a formula undefined
        on some rows, or the log of a non-positive target) or the ratio overflows. A
        constant ``y_true`` gives 0.0 for a prediction equal to it and ``inf``
        otherwise (any error is infinitely many standard deviations; unlike
        :func:`r2_score`, which reports 0.0 there, a ranking needs no finite value).

    Raises
    ------
    DataError
        If sizes differ or are 0.
    """
    t, p = _pair(y_true, y_pred)
    with np.errstate(all="ignore"):
        if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p))):
            return math.inf
        t, p, _ = _scaled(t, p)  # exact: the ratio at any magnitude
        sd = float(np.std(t))
        rms = float(np.sqrt(np.mean((p - t) ** 2)))
        if sd == 0.0:
            return 0.0 if rms == 0.0 else math.inf
        e = rms / sd
    return e if math.isfinite(e) else math.inf


@dataclass(frozen=True)
class Fidelity:
    """How well a formula reproduces the data and the model it was read from.

    Attributes
    ----------
    r2_data : float
        R² of the formula against the data targets.
    r2_model : float
        R² of the formula against the model's predictions (NaN if not given).
    max_abs_err, rmse : float
        Largest absolute and root-mean-square error against the data targets,
        in the units of ``y`` (inf only when the error itself exceeds float64).
    """

    r2_data: float
    r2_model: float
    max_abs_err: float
    rmse: float

    def to_dict(self) -> dict[str, float]:
        """Plain dict for reports and JSON."""
        return {"r2_data": self.r2_data, "r2_model": self.r2_model,
                "max_abs_err": self.max_abs_err, "rmse": self.rmse}


def paired_gain(residual: Any, than: Any) -> float:
    """How many standard errors the squared residuals of one formula lie below another's on
    the same rows: the Diebold-Mariano statistic of the loss differential ``than² - residual²``
    (Diebold & Mariano 1995, J. Bus. Econ. Stat. 13, 253, "Comparing predictive accuracy").

    Both formulas see the same noise on the same rows, so the difference of their squared
    errors is far more precise than either: on 2000 held-out rows with 1 % noise a law whose
    RMS error is 1 % below an approximation's is tens of standard errors better, while a
    ratio of two sums of squares taken as independent cannot tell them apart.

    Parameters
    ----------
    residual, than : array_like (N,)
        Residuals (prediction minus target, any units) of the two formulas on the same rows.

    Returns
    -------
    float
        ``mean(d) / (std(d) / sqrt(N))`` with ``d = than² - residual²`` over the rows where both
        are finite; ``inf`` when ``d`` is a positive constant, 0 with fewer than 2 such rows,
        ``-inf`` when ``residual`` is not finite on some row where ``than`` is.
    """
    a, b = (np.asarray(r, dtype=np.float64).ravel() for r in (residual, than))
    if np.any(~np.isfinite(a) & np.isfinite(b)):
        return -math.inf
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 2:
        return 0.0
    d = b[ok] ** 2 - a[ok] ** 2
    mean, se = float(np.mean(d)), float(np.std(d, ddof=1)) / math.sqrt(d.size)
    if not se > 0:
        return math.inf if mean > 0 else 0.0
    return mean / se


def fidelity(f: Callable[[np.ndarray], Any], X: Any, y: Any, y_model: Any = None) -> Fidelity:
    """Measure a formula ``f`` on data (docs/algorithms.md §9).

    Parameters
    ----------
    f : callable
        Maps ``X`` (N, d) to predictions (N,), e.g. from
        :func:`kansym.symbolic.export.to_python` or ``sympy.lambdify``.
    X : array_like, shape (N, d)
    y : array_like, shape (N,)
        Data targets.
    y_model : array_like, shape (N,), optional
        The model's predictions on ``X``.

    Returns
    -------
    Fidelity

    Raises
    ------
    DataError
        If shapes disagree or the formula gives NaN/inf on some rows.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).ravel()
    with np.errstate(all="ignore"):
        pred = np.asarray(f(X), dtype=np.float64).ravel()
    if pred.size == 1:
        pred = np.full(y.shape, pred[0])
    if pred.shape != y.shape:
        raise DataError(f"the formula returned {pred.size} values for {y.size} rows; it must map (N, d) to (N,).")
    r2_data = r2_score(y, pred)
    r2_model = math.nan if y_model is None else r2_score(np.asarray(y_model).ravel(), pred)
    t, p, e = _scaled(y, pred)
    with np.errstate(over="ignore"):  # errors computed at unit magnitude, then scaled back exactly
        err = p - t
        return Fidelity(r2_data, r2_model, float(np.ldexp(np.max(np.abs(err)), e)),
                        float(np.ldexp(np.sqrt(np.mean(err**2)), e)))
