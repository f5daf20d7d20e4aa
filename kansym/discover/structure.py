"""Structure of a law read off its data before any KAN is trained.

Cheap least-squares fits that tell the pipeline how to set up the KAN:

- :func:`additive_r2` and :func:`interaction_r2`: AI Feynman's separability test
  (Udrescu & Tegmark 2020, "AI Feynman: a physics-inspired method for symbolic
  regression", Sci. Adv. 6:eaay2631, §2), done with fitted polynomial models instead of
  a neural network: an additive law scores 1 on the first; the second is the accuracy a
  smooth non-additive fit reaches (about the noise floor); :func:`interaction_error` is
  the same fit's error on held-out rows, a noise floor for the constants of a formula.
- :func:`choose_space`: whether the KAN learns in log units (a product of powers is
  additive there) or in linear units.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kansym.errors import DataError
from kansym.symbolic.verify import nrmse, r2_score

__all__ = ["table_space", "choose_space", "additive_r2", "interaction_r2", "interaction_error", "additivity",
           "legendre_features"]


def legendre_features(x: np.ndarray, degree: int, pairs: int, lo: np.ndarray | None = None,
                      hi: np.ndarray | None = None) -> np.ndarray:
    """Columns: 1, Legendre P_1..P_degree of each input scaled to [-1, 1], and (``pairs > 0``)
    the products P_a(x_i) P_b(x_j), i < j, 1 <= a, b <= pairs. ``lo, hi``: the range mapped to
    [-1, 1] (default: that of ``x``; other rows are clipped to [-1.5, 1.5])."""
    lo = x.min(axis=0) if lo is None else lo
    hi = x.max(axis=0) if hi is None else hi
    u = np.clip(2 * (x - lo) / np.where(hi > lo, hi - lo, 1.0) - 1, -1.5, 1.5)  # (n, d) in [-1, 1]
    per = [np.polynomial.legendre.legvander(u[:, i], degree)[:, 1:] for i in range(x.shape[1])]  # d x (n, degree)
    cols = [np.ones((x.shape[0], 1))] + per
    for i in range(x.shape[1]):
        for j in range(i + 1, x.shape[1]):
            a, b = per[i][:, :pairs], per[j][:, :pairs]
            cols.append((a[:, :, None] * b[:, None, :]).reshape(x.shape[0], -1))
    return np.concatenate(cols, axis=1)


def _lstsq_r2(A: np.ndarray, y: np.ndarray) -> float:
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    return r2_score(y, A @ coef, nonfinite="-inf")


def _rows(x: np.ndarray, y: np.ndarray, max_rows: int) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y, dtype=np.float64).reshape(x.shape[0], -1)[:, 0]
    step = max(1, x.shape[0] // max_rows)
    return np.asarray(x, dtype=np.float64)[::step], y[::step]


def additive_r2(x: np.ndarray, y: np.ndarray, *, degree: int = 5, max_rows: int = 2000) -> float:
    """R² of the best additive model ``y ~ sum_i g_i(x_i)`` (each ``g_i`` a polynomial).

    Least squares on Legendre polynomials of degree ``degree`` of each input scaled to
    [-1, 1], on at most ``max_rows`` evenly spaced rows. An additive law scores 1; a law
    whose variables interact (``a * b`` in linear units) scores less. This is the
    separability test of AI Feynman (Udrescu & Tegmark 2020, Sci. Adv. 6, eaay2631, §2)
    done with a fitted additive model instead of a neural network.

    Parameters
    ----------
    x : ndarray (N, d)
    y : ndarray (N,) or (N, 1)
    """
    x, y = _rows(x, y, max_rows)
    return _lstsq_r2(legendre_features(x, degree, 0), y)


def interaction_r2(x: np.ndarray, y: np.ndarray, *, degree: int = 5, pairs: int = 2, max_rows: int = 2000) -> float:
    """R² of the additive model of :func:`additive_r2` plus pairwise interactions
    ``P_a(x_i) P_b(x_j)`` (``a, b <= pairs``): the accuracy a smooth non-additive fit
    reaches, i.e. about the noise floor of ``y``, to which the additive residual is compared."""
    x, y = _rows(x, y, max_rows)
    return _lstsq_r2(legendre_features(x, degree, pairs), y)


def interaction_error(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, *,
                      degree: int = 5, pairs: int = 2, max_rows: int = 2000, factor: np.ndarray | None = None,
                      factor_test: np.ndarray | None = None) -> float:
    """Normalised RMS error (:func:`kansym.symbolic.verify.nrmse`) on held-out rows of the
    model of :func:`interaction_r2` fitted on ``x, y``: a noise floor estimated from the data
    without the KAN (fitted and judged on different rows, so a table of few rows, where the
    polynomial would follow every point, gets no false floor). ``inf`` when it cannot be fitted.

    With ``factor`` and ``factor_test`` (a known positive factor of each row, shapes (N,) and
    (N_test,)) the model is fitted and judged on ``factor * y`` (weighted least squares, the
    errors of :func:`kansym.symbolic.direct.direct_search`'s ``factor``)."""
    x, y, w = *_rows(x, y, max_rows), None if factor is None else _rows(x, factor, max_rows)[1]  # the same rows
    w = np.ones(len(y)) if w is None else w
    xt = np.asarray(x_test, dtype=np.float64)
    yt = np.asarray(y_test, dtype=np.float64).reshape(xt.shape[0], -1)[:, 0]
    A = legendre_features(x, degree, pairs)
    if A.shape[1] >= x.shape[0] or not (np.all(np.isfinite(A)) and np.all(np.isfinite(y))):
        return float("inf")
    wt = np.ones(len(yt)) if factor_test is None else np.asarray(factor_test, dtype=np.float64)
    coef, *_ = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)
    return nrmse(wt * yt, wt * (legendre_features(xt, degree, pairs, x.min(axis=0), x.max(axis=0)) @ coef))


def table_space(space: str, *tables: np.ndarray) -> str:
    """``space`` for a run on these rows: ``"auto"`` becomes ``"linear"`` when some value of
    some table is not positive (log units are impossible there), else stays as it is.

    The stages choose their units (:func:`choose_space`) on the rows they train on, a
    subsample: a noisy target near 0 with one negative value among 10,000 rows let the KAN
    train in log units on 3,000 positive rows, and the refinement on all rows then failed.
    """
    if space != "auto":
        return space
    return space if all(bool(np.all(np.asarray(t) > 0)) for t in tables if t is not None) else "linear"


def choose_space(x: np.ndarray, y: np.ndarray, space: str = "auto", *, decades: float = 2.0) -> str:
    """Pick ``"linear"`` or ``"log"`` for a table.

    ``auto`` chooses log space when every input and target value is positive and
    either at least one column spans ``decades`` orders of magnitude or more, or
    (two inputs or more) the law is markedly more additive in log units than in
    linear units: the residual ``1 - R²`` of the additive model of :func:`additive_r2`
    in linear units exceeds 1e-3 and the one in log units is at most a quarter of it. A product of powers
    (``m a``, ``q1 q2 / r^2``) is additive in log units, so a KAN of linear edges
    represents it exactly there; a sum (``a + b``) is additive in linear units.

    Parameters
    ----------
    x : ndarray (N, d_in)
    y : ndarray (N, d_out)
    space : {"auto", "linear", "log"}

    Raises
    ------
    DataError
        ``space="log"`` with a non-positive value.
    """
    positive = bool(np.all(x > 0) and np.all(y > 0))
    if space == "log":
        if not positive:
            raise DataError("log space needs every input and target value to be positive; use --space linear")
        return "log"
    if space == "linear":
        return "linear"
    if not positive:
        return "linear"
    both = np.concatenate([x, y], axis=1)
    span = np.log10(both.max(axis=0) / both.min(axis=0))
    if float(span.max()) >= decades:
        return "log"
    if x.shape[1] < 2 or y.shape[1] != 1:
        return "linear"
    res_lin = 1.0 - additive_r2(x, y)
    res_log = 1.0 - additive_r2(np.log(x), np.log(y))
    return "log" if res_lin > 1e-3 and res_log <= 0.25 * res_lin else "linear"


ADDITIVE_RESIDUAL = 1e-4  # 1 - R² of the additive model below which the law counts as additive
SHORTCUT_R2 = 0.9999  # held-out R² at which the additive (hidden-layer-free) run is kept alone


def additivity(x: np.ndarray, y: np.ndarray, config: Any) -> tuple[bool, float]:
    """Whether the law is additive in the units the KAN will learn in, and the held-out
    R² a formula of the additive KAN must reach to be kept alone.

    One input is always additive. Otherwise the residual ``1 - R²`` of the additive
    model must be at most ``ADDITIVE_RESIDUAL``, or at most twice that of the model with
    pairwise interactions when the latter is below 1 % (noise makes both equal; a law
    neither model follows is not called additive). The R² to reach is
    ``1 - max(1 - SHORTCUT_R2, 3 * r)``, ``r`` the residual of the model with interactions
    in CSV units (about the noise floor), and at least 0.999. ``config`` is the run's
    :class:`~kansym.discover.config.DiscoverConfig` (its ``space``).
    """
    if y.shape[1] != 1:
        return False, SHORTCUT_R2
    space = choose_space(x, y, config.space)
    g = np.log if space == "log" else (lambda a: a)
    fit_r2 = interaction_r2 if x.shape[1] > 1 else additive_r2  # one input: the polynomial is the full model
    res_full = max(1.0 - fit_r2(g(x), g(y)), 0.0)
    # the formula's R² is measured in CSV units: so is the noise floor it is held to
    noise = max(1.0 - fit_r2(x, y), 0.0)
    floor = 1.0 - min(max(1.0 - SHORTCUT_R2, 3.0 * noise), 1e-3)
    if x.shape[1] == 1:
        return True, floor
    res_add = 1.0 - additive_r2(g(x), g(y))
    return res_add <= ADDITIVE_RESIDUAL or (res_add <= 2.0 * res_full and res_full <= 0.01), floor
