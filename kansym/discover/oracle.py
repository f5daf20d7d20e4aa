"""The reference model of a run: its KAN trained without sparsification, and the structure
search on it (:mod:`kansym.discover.separate`).

The sparsified KAN of the main stages trades accuracy for a network small enough to read;
the reference keeps all of it. Its held-out R² is the standard a formula is verified
against (:attr:`kansym.discover.result.Formula.r2_reference_test`: a formula far below it
misses structure the data hold), and it is the oracle the separability tests probe.
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from kansym.deadline import Deadline, time_is_up
from kansym.discover.noise import OracleError
from kansym.discover.separate import structure_candidates
from kansym.discover.stages import train_stage
from kansym.discover.structure import choose_space
from kansym.symbolic.compose import input_symbols
from kansym.symbolic.direct import DirectCandidate
from kansym.symbolic.verify import r2_score

__all__ = ["wants_structure", "structure_stage", "MAX_ORACLE_ERROR", "MIN_LIMIT"]

log = logging.getLogger("kansym")

MIN_LIMIT = 30.0  # under this time limit (s) the structure search does not run: the main KAN gets it all
# a second oracle beside the run's KAN: two hidden layers of 5, 100 LBFGS steps. A sum
# inside a function (the distance sqrt((x2-x1)^2 + (y2-y1)^2)) needs the second layer. On
# the tuning half's 27 equations of three inputs or more (3,000 rows, linear units) its
# held-out error was lower on 21 (geometric mean 6.9e-3 against 1.5e-2) and up to 4x higher
# on 6, so both are trained and the better one is kept (geometric mean 6.2e-3)
ORACLE_HIDDEN = (5, 5)
ORACLE_STEPS = 100
MAX_ORACLE_ERROR = 0.05  # oracle RMS error over std(y) above which its tests mean nothing (R² < 0.9975)


def wants_structure(config, d_in: int, d_out: int) -> bool:
    """Whether the structure search runs: ``config.structure``, the whole primitive library
    (its leaves are direct searches), one output and three inputs or more (one or two go to
    the direct search whole)."""
    return bool(config.structure and config.library is None and d_out == 1 and d_in >= 3)


def structure_stage(rows, input_names: Sequence[str], output_names: Sequence[str], config,
                    progress: bool | None = None, *,
                    deadline: Deadline | None = None) -> tuple[list[DirectCandidate], float]:
    """Train the oracle (the run's KAN without sparsification, on the training rows), measure
    its error on the held-out rows and return :func:`structure_candidates` on the fitting rows.

    Parameters
    ----------
    rows : kansym.discover.run.Rows
        Working-unit rows; without held-out rows the oracle's error is unknown and nothing
        is tried.
    config : DiscoverConfig
    deadline : kansym.deadline.Deadline, optional
        This stage's share of the run's time limit: the oracle's training stops with it, and
        once it has expired no search starts.

    Returns
    -------
    (list of DirectCandidate, float)
        The candidates and the oracle's held-out R² (NaN without held-out rows).
    """
    if rows.x_test is None or time_is_up(deadline):
        return [], float("nan")
    if deadline is not None and deadline.seconds is not None and deadline.seconds < MIN_LIMIT:  # the run's limit
        deadline.cut(f"structure search: skipped (a time limit under {MIN_LIMIT:g} s goes to the main KAN)")
        return [], float("nan")
    space = choose_space(rows.x_train, rows.y_train, config.space)
    shapes = [(config.hidden, config.train.steps), (ORACLE_HIDDEN, ORACLE_STEPS)]
    tries = [(space, *shape) for shape in shapes]
    if config.space == "auto":  # the other units, only when neither oracle is good enough in these
        tries += [("linear" if space == "log" else "log", *shape) for shape in shapes]
    oracle, eps, r2, error, pred = None, np.inf, float("nan"), None, None
    trained = []  # the held-out predictions of every oracle trained
    for k, (units, hidden, steps) in enumerate(tries):
        if time_is_up(deadline) or (k >= len(shapes) and eps <= MAX_ORACLE_ERROR * np.std(rows.y_test[:, 0])):
            break
        other = _oracle(rows, input_names, output_names, config, units, hidden, steps, progress, deadline)
        if other[0] is not None:
            trained.append(other[4])
            if oracle is None or other[1] < eps:
                oracle, eps, r2, error, pred = other
    if time_is_up(deadline):
        deadline.cut("structure search: skipped (the oracle's training took its share)")
        return [], r2
    if not eps <= MAX_ORACLE_ERROR * np.std(rows.y_test[:, 0]):
        log.info("structure: not searched (the oracle's held-out R² %.4g is too low for its tests)", r2)
        return [], r2
    error = _without_noise(error, pred, [p for p in trained if p is not pred])
    log.debug("structure: the oracle's error %s", error)
    candidates, _ = structure_candidates(lambda z: oracle.predict(z)[:, 0], error, rows.x, rows.y[:, 0],
                                             input_symbols(input_names), complexity_weight=config.complexity_weight,
                                             seed=config.seed, deadline=deadline)
    if time_is_up(deadline):
        deadline.cut("structure search: stopped at its share of the time limit")
    return candidates, r2


def _oracle(rows, input_names, output_names, config, space: str, hidden, steps: int, progress, deadline=None):
    """The unsparsified KAN of width ``(d, *hidden, 1)`` trained for ``steps`` in ``space``, its RMS
    error, R² and error model (:class:`kansym.discover.noise.OracleError`: fitted to the held-out
    residuals in log units, their one RMS error in linear units)."""
    kind = "linear" if space == "linear" else "log"
    if kind == "log" and not (np.all(rows.x_train > 0) and np.all(rows.y_train > 0)):
        return None, np.inf, -np.inf, None, None
    oracle = train_stage(
        rows.x_train, rows.y_train, input_names, output_names, hidden=hidden, grid_size=config.grid_size,
        spline_order=config.spline_order, space=kind,
        train=config.train.replace(lamb=0.0, steps=steps, seed=config.seed, device=config.device),
        seed=config.seed,
        dtype=config.dtype, progress=progress, label="the oracle of the structure search: no sparsification",
        deadline=deadline,
    )
    with np.errstate(all="ignore"):
        pred = oracle.predict(rows.x_test)[:, 0]
    eps = float(np.sqrt(np.mean((pred - rows.y_test[:, 0]) ** 2)))
    # its error model: a model fitted in log units errs in proportion to its value (plus the
    # data's noise, of one size); one fitted in linear units errs alike everywhere
    error = OracleError.fit(pred, rows.y_test[:, 0]) if kind == "log" else OracleError(eps)
    return (oracle, (eps if np.isfinite(eps) else np.inf), r2_score(rows.y_test[:, 0], pred, nonfinite="-inf"),
            error, pred)


def _without_noise(error: OracleError, pred: np.ndarray, others: Sequence[np.ndarray]) -> OracleError:
    """The oracle's error model, or that of its disagreement with another oracle when that is
    smaller.

    The held-out residuals hold the data's noise besides the oracle's error; the oracle, fitted
    to thousands of rows, averages most of the noise away, and the separability tests probe
    the oracle, not the data. Two oracles of other shapes trained on the same rows disagree by
    about the root sum of squares of their own errors, without the noise: both the residuals
    and the disagreement bound the better oracle's error from above, and the smaller bound is
    kept. At noise 0.01 the residuals were twice the disagreement on
    ``mom sqrt(Bx^2 + By^2 + Bz^2)``, whose inputs then stood as a product within the residuals'
    tolerance. Without noise the residuals are mostly the smaller.
    """
    best = error
    for other in others:
        with np.errstate(all="ignore"):
            ok = np.isfinite(pred) & np.isfinite(other)
            if ok.sum() < 10:
                continue
            gap = OracleError.fit(pred[ok], other[ok]) if error.relative > 0 else \
                OracleError(float(np.sqrt(np.mean((pred[ok] - other[ok]) ** 2))))
            log.debug("structure: the oracles disagree by %s (RMS %.3g; residuals' %.3g)", gap, gap.rms(pred[ok]),
                      best.rms(pred[ok]))
            if gap.rms(pred[ok]) < best.rms(pred[ok]):
                best = gap
    return best
