"""Formula discovery with physical units: reduce to dimensionless groups, discover, map back.

:func:`discover_with_units` is :func:`kansym.discover.run.discover` preceded by AI Feynman's
dimensional analysis (Udrescu & Tegmark 2020, Sci. Adv. 6:eaay2631, "Dimensional
analysis"; :func:`kansym.discover.units.analyze`): ``y = prod x^p * f(pi_1, ..., pi_k)`` with
dimensionless groups ``pi_j``, so the KAN learns ``f`` of ``k < d`` inputs, and with no
group at all (or a target that is a pure monomial) ``f`` is a constant, fitted and snapped
without a KAN. The result looks like :func:`~kansym.discover.run.discover`'s: formulas,
Pareto front and R² in the original columns (docs/algorithms.md, "Dimensional analysis").
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Mapping, Sequence

import networkx as nx
import numpy as np
import sympy

from kansym.deadline import Deadline
from kansym.discover.config import DiscoverConfig
from kansym.discover.groups import map_back, predict, weighted_search
from kansym.discover.magnitude import (
    ColumnScales, check_representable, formula_to_table, symbolic_to_table, working_scales,
)
from kansym.discover.reduced import reduction_meta
from kansym.discover.result import Discovery, Formula, split_holdout
from kansym.discover.run import discover
from kansym.discover.structure import interaction_r2
from kansym.discover.units import Reduction, analyze, parse_unit
from kansym.errors import DataError
from kansym.symbolic.compose import lambdify_formula
from kansym.symbolic.pareto import pareto_front
from kansym.symbolic.refine import refine
from kansym.symbolic.verify import fidelity, r2_score

__all__ = ["UnitsDiscovery", "discover_with_units", "CONSTANT_R2", "TRY_CONSTANT_R2"]

log = logging.getLogger("kansym")

CONSTANT_R2 = 1 - 1e-9  # a monomial this close to the data is the law: no KAN is trained
TRY_CONSTANT_R2 = 0.99  # a monomial this close is also tried against the KAN's formula
NULL_R2 = 0.05  # share of the variance of y / x^p a fit on the groups may explain when they play no role
GROUPS_SHARE = 0.5  # of the time limit, for the discovery on the groups; the rest for the columns if it fails
MIN_PLAIN_SECONDS = 5.0  # the discovery on the columns runs after a failed one on the groups only with this left


@dataclass(frozen=True)
class UnitsDiscovery(Discovery):
    """:class:`~kansym.discover.run.Discovery` plus the dimensional reduction used.

    ``formulas`` are in the original columns. ``trained``, ``pruned``, ``prune_result``,
    ``symbolic`` and ``graph`` describe the KAN trained on the groups (its inputs are
    ``reduction.group_names``, its target ``y / prod x^p``); they are None when the law
    was a monomial times a constant and no KAN was needed (``runs == 0``).
    """

    reduction: Reduction | None = None
    units: dict | None = None


def _symbols(names: Sequence[str], x: np.ndarray) -> list[sympy.Symbol]:
    """Original-column symbols; positive where the column is (lets sympy merge powers)."""
    return [sympy.Symbol(n, positive=True) if np.all(x[:, i] > 0) else sympy.Symbol(n, real=True)
            for i, n in enumerate(names)]


def discover_with_units(
    x: np.ndarray,
    y: np.ndarray,
    input_names: Sequence[str],
    target: str,
    units: Mapping[str, str | Mapping],
    config: DiscoverConfig | None = None,
    *,
    progress: bool | None = None,
    deadline: Deadline | None = None,
) -> UnitsDiscovery:
    """Discover ``y(x)`` after a dimensional reduction (Buckingham pi, AI Feynman).

    Parameters
    ----------
    x : ndarray (N, d), CSV units
    y : ndarray (N,) or (N, 1)
    input_names : sequence of str
    target : str
    units : mapping
        Unit of every input and of the target, as strings (:func:`kansym.discover.units.parse_unit`)
        or parsed dicts.
    config : DiscoverConfig, optional
    progress : bool, optional
    deadline : kansym.deadline.Deadline, optional
        As :func:`~kansym.discover.run.discover` (default: ``config.time_limit`` from
        now); the discovery on the groups runs under it.

    Returns
    -------
    UnitsDiscovery
        With ``reduction=None`` when the units are inconsistent (the target's units cannot
        be made from the inputs'; logged as a warning) or when nothing is reduced: then
        the plain :func:`~kansym.discover.run.discover` ran on the original columns.

    Raises
    ------
    DataError
        A missing or unreadable unit (one line, naming the column), or bad data.
    ConfigError, FitError
        As :func:`~kansym.discover.run.discover`.

    A table with columns of extreme magnitude is worked on with every column divided by a
    power of two, as in :func:`~kansym.discover.run.discover`; the formulas come back in
    the table's units and the models trained on the groups in the groups' units.
    """
    config = config or DiscoverConfig()
    deadline = Deadline(config.time_limit) if deadline is None else deadline
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(x.shape[0], -1)
    scales = working_scales(x, y, list(input_names), [target], config.space)
    res = _discover_with_units(scales.x_to_working(x), scales.y_to_working(y), list(input_names), target, units,
                               config, progress, deadline)
    res = replace(res, time_limit=deadline.seconds, cut_short=deadline.cuts)
    return _units_to_table(res, scales, x, y, config)


def _units_to_table(res: "UnitsDiscovery", scales: ColumnScales, x, y, config: DiscoverConfig) -> "UnitsDiscovery":
    """A units discovery of the working units in the table's (:mod:`kansym.discover.magnitude`): the
    formulas by the column scales, the KAN of the groups by the groups' (``U k`` for a group of
    exponents ``U``, ``k_y - p . k`` for ``y / prod x^p``)."""
    if scales.identity:
        return res
    fit_idx, _ = split_holdout(x.shape[0], config.holdout, config.seed)
    formulas = tuple(formula_to_table(f, scales) for f in res.formulas)
    for f in formulas:
        check_representable(f, x[fit_idx], y[fit_idx, 0], scales)
    red, kx = res.reduction, [Fraction(k) for k in scales.x_exp]
    model = scales
    if red is not None and res.trained is not None:
        model = ColumnScales(tuple(sum(int(e) * k for e, k in zip(row, kx)) for row in red.groups),
                             (Fraction(scales.y_exp[0]) - sum(Fraction(p) * k for p, k in zip(red.p, kx)),),
                             scales.y_sign)
    bundle = (lambda b: None if b is None else model.bundle_to_table(b))
    return replace(res, formulas=formulas, trained=bundle(res.trained), pruned=bundle(res.pruned),
                   symbolic=symbolic_to_table(res.symbolic, model))


def _discover_with_units(x, y, names: list[str], target: str, units, config: DiscoverConfig,
                         progress, deadline: Deadline) -> "UnitsDiscovery":
    """:func:`discover_with_units` on (working-unit) rows."""
    if y.shape[1] != 1:
        raise DataError(f"discovery with units takes one target, got {y.shape[1]}")
    missing = [c for c in [*names, target] if c not in units]
    if missing:
        raise DataError(f"no unit given for column(s) {', '.join(missing)}; every input and the target need one")
    parsed = {c: (parse_unit(units[c]) if isinstance(units[c], str) else dict(units[c])) for c in [*names, target]}
    text = {c: (units[c] if isinstance(units[c], str) else str(units[c])) for c in [*names, target]}
    asked = config  # the columns without the reduction are searched as discover() searches them (screened)
    # the units name every variable the law may use: the reduction, not the input screening, shrinks them
    config = config.replace(screen=False)
    fit_idx, test_idx = split_holdout(x.shape[0], config.holdout, config.seed)
    n_test = 0 if test_idx is None else len(test_idx)
    test_idx = fit_idx if test_idx is None else test_idx
    yv = y[:, 0]
    red = analyze(names, [parsed[n] for n in names], parsed[target], x[fit_idx], yv[fit_idx])

    def plain(reason: str | None, how: DiscoverConfig = config, limit: Deadline = deadline) -> UnitsDiscovery:
        if reason:
            log.warning("%s; discovering without a dimensional reduction", reason)
        res = discover(x, y, names, [target], how, progress=progress, deadline=limit)
        return UnitsDiscovery(**{f: getattr(res, f) for f in res.__dataclass_fields__}, reduction=None, units=text)

    if red is None:
        return plain(f"the units of {target} cannot be made from those of {', '.join(names)} (inconsistent units; every unit name is its own base dimension, so write derived units in base ones, e.g. N as kg*m/s^2)")
    if red.trivial:
        return plain(None)
    symbols = _symbols(names, x)
    # the monomial closest to the data: a law that is a constant times a monomial needs no KAN
    best_q, best_r2 = None, -np.inf
    for q in red.monomials():
        r = red.with_p(q)
        _, yq = r.reduce(x[fit_idx], yv[fit_idx])
        if not np.all(np.isfinite(yq)):
            continue
        r2 = r2_score(yv[fit_idx], np.median(yq) * (yv[fit_idx] / yq))
        if r2 > best_r2 + 1e-12:
            best_q, best_r2 = q, r2
    g, yp = red.reduce(x, yv)
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(yp))):
        if best_q is None:
            return plain("the dimensionless groups are not finite on these rows (zero or negative values)")
        g = None
    constant = None
    if best_q is not None and (not red.groups or g is None or best_r2 >= TRY_CONSTANT_R2):
        constant = _constant(red.with_p(best_q), x, yv, fit_idx, test_idx, n_test, symbols, target, text)
        if best_r2 >= CONSTANT_R2 or (g is not None and red.groups and _groups_explain_nothing(red.with_p(best_q), x[fit_idx], yv[fit_idx])):
            return _logged(constant)
        if not red.groups or g is None:
            if best_r2 >= TRY_CONSTANT_R2:
                return _logged(constant)
            return plain(f"{target} is not a constant times {red.monomial(symbols)} (R² {best_r2:.4f}) although "
                         "the units allow nothing else: a unit is wrong or a variable is missing")
    # a limit of its own (its stages' shares are shares of it), its cuts recorded in the run's
    groups_limit = _part(deadline, GROUPS_SHARE * deadline.seconds if deadline.seconds else None)
    reduced = _on_groups(g, yp, red, constant, x, yv, fit_idx, test_idx, symbols, target, text, config, progress,
                         groups_limit)
    deadline.absorb(groups_limit)
    if reduced.formulas[0].warning is None or deadline.remaining() < MIN_PLAIN_SECONDS:
        return reduced
    # the reduction can hide the law from the searches (a law whose groups need a product the
    # KAN does not separate): the columns themselves, in the time left; the first verified wins
    log.info("the formula on the dimensionless groups did not verify; discovering on the columns too")
    columns_limit = _part(deadline, deadline.remaining() if deadline.seconds else None)
    direct = plain(None, asked, columns_limit)
    deadline.absorb(columns_limit)
    if direct.formulas[0].warning is None:
        log.info("the formula found on the columns verified: it is the answer (no dimensional reduction)")
        return direct
    return reduced


def _part(deadline: Deadline, seconds: float | None) -> Deadline:
    """A limit of ``seconds`` from now, ending no later than ``deadline`` (None: no limit)."""
    if seconds is None or deadline.seconds is None:
        return Deadline(None)
    return Deadline(max(min(seconds, deadline.remaining()), 1e-3))



def _on_groups(g, yp, red: Reduction, constant, x, yv, fit_idx, test_idx, symbols, target: str, text,
               config: DiscoverConfig, progress, deadline: Deadline) -> "UnitsDiscovery":
    """Discovery on the dimensionless groups, mapped back to the columns (the monomial with a
    fitted constant, ``constant``, when it leaves no more unexplained)."""
    t0 = time.perf_counter()
    # the KAN (and its checkpoints) predict y / monomial, not the target: name it so, since
    # `kansym symbolify` on those checkpoints prints "<name> = f(groups)"
    res = discover(g, yp[:, None], list(red.group_names), [f"{target}_reduced"], config, progress=progress,
                   deadline=deadline)
    formulas = tuple(map_back(f, res, red, x, yv, fit_idx, test_idx, symbols, target) for f in res.formulas)
    weighted = weighted_search(g, yp, red, res, formulas[0], x, yv, fit_idx, test_idx, symbols, target, config,
                                deadline)
    if weighted is not None:
        formulas = (weighted, *formulas[1:])
    out = UnitsDiscovery(**{f: getattr(res, f) for f in res.__dataclass_fields__}, reduction=red, units=text)
    meta = reduction_meta(red, target)  # the checkpoints predict from the table's columns (kansym predict)
    out = replace(out, formulas=formulas, trained=res.trained.replace_model(res.trained.model, reduction=meta),
                  pruned=res.pruned.replace_model(res.pruned.model, reduction=meta))
    if constant is not None:
        fc, fk = constant.formulas[0], formulas[0]
        # the monomial wins unless the KAN's formula leaves clearly less unexplained (held out)
        if (1 - fc.r2_test) <= 1.1 * (1 - fk.r2_test) + 1e-12 or not np.isfinite(fk.r2_test):
            return replace(_logged(constant), seconds={**out.seconds, "constant": constant.seconds["constant"],
                                              "total": time.perf_counter() - t0})
    return out


def _groups_explain_nothing(red: Reduction, x: np.ndarray, y: np.ndarray) -> bool:
    """Whether ``y / prod x^p`` is a constant plus noise: a smooth fit on the groups (Legendre
    polynomials with pairwise products, :func:`kansym.discover.structure.interaction_r2`) explains at
    most ``NULL_R2`` of its variance (about what such a fit explains of pure noise)."""
    g, yq = red.reduce(x, y)
    return bool(np.std(yq) == 0 or interaction_r2(g, yq) <= NULL_R2)


def _logged(result: UnitsDiscovery) -> UnitsDiscovery:
    f = result.formulas[0]
    if f.warning:
        log.warning("%s: %s", f.target, f.warning)
    return result


def _constant(red: Reduction, x, y, fit_idx, test_idx, n_test, symbols, target, text) -> UnitsDiscovery:
    """``y = C * prod x^p``: C by least squares in CSV units, refit and snapped
    (:func:`kansym.symbolic.refine.refine`, linear loss)."""
    t0 = time.perf_counter()
    mono = red.monomial(symbols)
    _, yq = red.reduce(x[fit_idx], y[fit_idx])
    # least squares C = <y, m> / <m, m> in the data's own units: unbiased under additive
    # noise (a fit of log y is not: it snapped 0.4977 to exp(-2 pi/9) instead of 1/2)
    m = y[fit_idx] / yq
    c = float(np.dot(y[fit_idx], m) / np.dot(m, m)) if np.dot(m, m) > 0 else float(np.median(yq))
    raw = sympy.Float(c if np.isfinite(c) else float(np.median(yq))) * mono
    expr = refine(raw, symbols, x[fit_idx], y[fit_idx], loss_space="linear")
    if not np.all(np.isfinite(predict(expr, symbols, x[fit_idx]))):
        expr = raw
    y_model_fit = predict(raw, symbols, x[fit_idx])
    fid = fidelity(lambdify_formula(expr, symbols), x[fit_idx], y[fit_idx], y_model_fit)
    front = pareto_front([raw], expr, symbols, x[test_idx], y[test_idx])
    formula = Formula(
        expr=expr, raw=raw, symbols=tuple(symbols), fidelity=fid, target=target,
        r2_test=next(e.r2 for e in front if e.chosen),
        r2_model_test=r2_score(y[test_idx], predict(raw, symbols, x[test_idx])),
        n_test=n_test,
        front=front,
        origin="units",
        reason=f"{target} is a constant times the monomial {red.monomial(symbols)} of the dimensional analysis",
    )
    formula = replace(formula, residual=formula.residual_test(x[fit_idx], y[fit_idx], x[test_idx], y[test_idx]))
    const_red = Reduction(red.names, red.dims, red.p, (), ())
    return UnitsDiscovery(trained=None, pruned=None, prune_result=None, symbolic=None, formulas=(formula,),
                          graph=nx.DiGraph(), seconds={"constant": time.perf_counter() - t0}, runs=0,
                          reduction=const_red, units=text)
