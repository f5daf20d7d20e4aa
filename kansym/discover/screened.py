"""The discovery on the screened columns, and the bring-back (issue 19).

:func:`screened_discover` screens the inputs (:func:`kansym.discover.screen.screen_inputs`),
runs the discovery on the columns kept and runs it again on every column when its result
is clearly worse than the screening's model of all columns. An interrupted run's record
keeps the screening's verdict (:mod:`kansym.discover.carried`): its resumed run continues
on the columns the checkpoint was trained on without screening again.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np
from scipy.stats import norm

from kansym.discover.carried import reusable, with_entries
from kansym.discover.config import DiscoverConfig
from kansym.discover.result import RunInterrupted, split_holdout
from kansym.discover.screen import (
    ALPHA, BRING_BACK_FLOOR, BRING_BACK_RATIO, Screening, _z, screen_inputs, screening_from_record, screening_to_record,
    with_kept,
)

__all__ = ["screened_discover"]

log = logging.getLogger("kansym")

SCREEN_FIELDS = ("screen", "keep_inputs", "holdout")  # options (besides the training ones) that shape the verdict
_NONE = object()  # no verdict carried: screen


def screened_discover(discovery: Callable[[Sequence[int], Any], Any], x: np.ndarray, y: np.ndarray,
                      input_names: Sequence[str], config: DiscoverConfig, resume: Any = None,
                      stages: Any = None) -> Any:
    """Screen the inputs, run the discovery on the kept ones, bring the others back if needed.

    Parameters
    ----------
    discovery : callable ``(columns, resume) -> Discovery``
        The discovery on ``x[:, columns]`` (CSV units), resuming ``resume`` unless None.
    x, y, input_names, config
        The table (CSV units), its column names and the run's DiscoverConfig.
    resume : ResumePoint, optional
        An interrupted run: it continues on the columns its checkpoint was trained on, with
        the screening's verdict of its record when it holds one and the screening's options
        are unchanged (else the screening runs again: it is deterministic).
    stages : kansym.discover.progress.Stages, optional
        Told when the screening starts.

    Returns
    -------
    Discovery
        With ``screening`` set (None when screening was off). After a bring-back, the run
        on all columns is kept when its formula's held-out R² is at least that of the run
        on the kept columns.
    """
    names = tuple(input_names)
    settings = {k: config.to_dict()[k] for k in SCREEN_FIELDS}
    plan = _carried_plan(resume, settings)
    if plan is _NONE:
        plan = screen_inputs(x, y, names, config, stages)
    everything = tuple(range(len(names)))
    entry = {"screening": {"plan": None if plan is None else screening_to_record(plan), "config": settings}}

    def run(cols: Sequence[int], point: Any) -> Any:  # an interrupt's record keeps the verdict
        try:
            return discovery(cols, point)
        except RunInterrupted as stop:
            raise with_entries(stop, entry) from None

    if resume is not None:
        cols = tuple(names.index(n) for n in resume.bundle.input_names)
        if plan is not None and cols != plan.kept:
            plan = replace(with_kept(plan, cols, x, y, config), brought_back=cols == everything)
        return replace(run(cols, resume), screening=plan)
    if plan is None:
        return replace(run(everything, None), screening=None)
    if not plan.removed:
        log.info("input screening kept every column (%s)", _kept_note(plan))
        return replace(run(everything, None), screening=plan)
    log.info("input screening dropped %s: %s; kept %s (to keep a column whatever the test says: "
             "--keep-inputs, or keep_inputs in the API)",
             _names(names, plan.removed), _dropped_note(plan), _kept_note(plan))
    found = run(plan.kept, None)
    worse = _clearly_worse(found, plan, x, y, config)
    if worse is None:
        return replace(found, screening=plan)
    log.info("bringing back the dropped columns: %s; running again on every column", worse)
    full = run(everything, None)
    f_kept, f_all = found.formulas[0], full.formulas[0]
    if not (np.nan_to_num(f_all.r2_test, nan=-np.inf) >= np.nan_to_num(f_kept.r2_test, nan=-np.inf)):
        log.info("kept the run on the screened columns (held-out R² %.6g) over the one on every column (%.6g)",
                 f_kept.r2_test, f_all.r2_test)
        return replace(found, screening=plan)
    return replace(full, screening=replace(plan, brought_back=True))


def _dropped_note(plan: Screening) -> str:
    tested = [i for i in plan.removed if not plan.marginal_kept or i in plan.marginal_kept]
    parts = []
    if len(tested) < len(plan.removed):
        parts.append(f"{len(plan.removed) - len(tested)} of {len(plan.names)} columns fail the marginal pre-screen "
                     f"(p >= {plan.marginal_threshold:.3g}, or less significant than the {len(plan.marginal_kept)} "
                     "kept)")
    if tested:
        worst = max(tested, key=lambda i: np.nanmax([plan.z_smooth[i], plan.z_kan[i], -np.inf]))
        n_tests = 2 * len(plan.marginal_kept or plan.names)
        parts.append(f"every held-out permutation z is at most {plan.z_threshold:.2f} (Bonferroni, alpha {ALPHA:g} "
                     f"over {n_tests} tests; the largest, {plan.names[worst]}'s, is "
                     f"{_z(np.nanmax([plan.z_smooth[worst], plan.z_kan[worst]]))})")
    return "; ".join(parts)


def _names(names: Sequence[str], which: Sequence[int], shown: int = 8) -> str:
    """``which``'s names, at most ``shown`` of them and a count of the others."""
    listed = ", ".join(names[i] for i in which[:shown])
    more = len(which) - shown
    return listed if more <= 0 else f"{listed} and {more} more (each with its reason in formula.json's removed_inputs)"


def _kept_note(plan: Screening) -> str:
    parts = [f"{plan.names[i]} z {_z(plan.z_smooth[i])}/{_z(plan.z_kan[i])}" for i in plan.kept]
    return (f"{', '.join(parts)} (smooth model/KAN, on {plan.rows_eval} shuffled rows; models of all columns "
            f"fitted on {plan.rows_fit}/{plan.rows_kan} rows, held-out R² {plan.r2:.4g})")


def _clearly_worse(found: Any, plan: Screening, x: np.ndarray, y: np.ndarray, config: DiscoverConfig) -> str | None:
    """Why the dropped columns should come back, or None.

    They come back when, on the run's held-out rows, the better of the run's formula and
    model is clearly worse than the screening model of all columns, and so is the smooth
    model refitted on the kept columns alone (else the shortfall is the KAN's, not the
    screening's, and a run on every column would not mend it). Clearly worse: at least
    :data:`BRING_BACK_RATIO` times the reference's mean squared error, more than
    :data:`BRING_BACK_FLOOR` of ``var(y)``, and a paired one-sided z test of the squared
    errors rejecting equality at ``alpha`` 0.01.
    """
    test_idx = split_holdout(x.shape[0], config.holdout, config.seed)[1]
    if plan.reference is None or test_idx is None:
        return None
    xt, yt = x[test_idx][:, list(plan.kept)], y[test_idx, 0]
    preds = [found.pruned.predict(xt)[:, 0]] if found.pruned is not None else []
    try:
        preds.append(np.asarray(found.formulas[0](xt), dtype=np.float64).reshape(-1))
    except Exception:  # a formula with numeric edges cannot be evaluated alone: the model stands for it
        pass
    errs = [(yt - p) ** 2 for p in preds if p.shape == yt.shape and np.all(np.isfinite(p))]
    if not errs:
        return None
    e_run, e_ref = min(errs, key=np.mean), (yt - plan.reference) ** 2
    z = _worse_z(e_run, e_ref, float(np.var(yt)))
    if z is None:
        return None
    note = (f"on {len(yt)} held-out rows the run on {len(plan.kept)} columns leaves a mean squared error of "
            f"{np.mean(e_run):.4g}, the screening model of all columns {np.mean(e_ref):.4g} (z {z:.1f})")
    if plan.reference_kept is not None:
        e_kept = (yt - plan.reference_kept) ** 2
        if _worse_z(e_kept, e_ref, float(np.var(yt))) is None:
            log.info("not bringing back the dropped columns: %s, but a smooth model of the kept columns alone "
                     "leaves %.4g: what is missing is not in the dropped columns", note, np.mean(e_kept))
            return None
    return note


def _worse_z(e: np.ndarray, e_ref: np.ndarray, var: float) -> float | None:
    """The z of the paired test when squared errors ``e`` are clearly worse than ``e_ref``, else None."""
    diff = e - e_ref
    sd = float(np.std(diff))
    z = np.inf if sd == 0 else float(np.mean(diff)) / (sd / np.sqrt(len(diff)))
    if np.mean(e) >= BRING_BACK_RATIO * np.mean(e_ref) and np.mean(e) > BRING_BACK_FLOOR * var \
            and z > norm.ppf(1 - ALPHA):
        return z
    return None


def _carried_plan(resume: Any, settings: dict) -> Any:
    """The screening verdict in ``resume``'s record (None: screening was off), or ``_NONE``."""
    entry = reusable(resume, "screening", settings, "input screening")
    if entry is None:
        return _NONE
    try:
        plan = None if entry["plan"] is None else screening_from_record(entry["plan"])
    except (KeyError, TypeError, ValueError):
        log.info("input screening: runs again (the interrupted run's verdict could not be read)")
        return _NONE
    log.info("input screening: the verdict of the interrupted run taken as it is")
    return plan
