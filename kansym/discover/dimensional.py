"""Formula discovery with physical units: reduce to dimensionless groups, discover, map back.

:func:`discover_with_units` is :func:`kansym.discover.run.discover` preceded by AI Feynman's
dimensional analysis (Udrescu & Tegmark 2020, Sci. Adv. 6:eaay2631, "Dimensional
analysis"; :func:`kansym.discover.units.analyze`): ``y = prod x^p * f(pi_1, ..., pi_k)`` with
dimensionless groups ``pi_j``, so the KAN learns ``f`` of ``k < d`` inputs, and with no
group at all (or a target that is a pure monomial) ``f`` is a constant, fitted and snapped
without a KAN. The result looks like :func:`~kansym.discover.run.discover`'s: formulas,
Pareto front and R² in the original columns (docs/algorithms.md, "Dimensional analysis").

A model of a ``--units`` run on the table's columns: the dimensional reduction as plain data.

The KAN of :func:`discover_with_units` learns
``y / prod x^p = f(pi_1, ..., pi_k)`` on dimensionless groups ``pi_j = prod x^U_j``, so its
checkpoints' inputs are the groups (``pi1``, ...) and its target ``TARGET_reduced``. The
reduction travels with the checkpoints (``meta["reduction"]``) and with ``formula.json``
(``reduction``) as :func:`reduction_meta`; :func:`model_columns` and :func:`predict_columns`
then take rows of the table's own columns, as ``kansym predict`` does.

The formulas of a discovery on dimensionless groups, in the columns: mapped back, weighted, re-verified.

After :func:`discover_with_units` has reduced a law to ``y = prod x^p
* f(pi_1, ..., pi_k)`` and discovered ``f`` on the groups, :func:`map_back` writes each formula in
the original columns and verifies it there (R², residual tests on the columns, on the groups and on
the groups weighted as in the target), and :func:`weighted_search` searches the groups once more
with each row weighted by its monomial: ``y / prod x^p`` carries the target's noise divided by
the monomial (docs/algorithms.md, "Dimensional analysis").
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace, dataclass
from fractions import Fraction
from typing import Any, Mapping, Sequence

import networkx as nx
import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kansym.deadline import Deadline, time_is_up
from kansym.discover.choice import choose, significantly_better
from kansym.discover.config import DiscoverConfig
from kansym.discover.rows import (ColumnScales, check_representable, formula_to_table, symbolic_to_table,
    working_scales)
from kansym.discover.result import ClosedForm, Discovery, Formula, split_holdout
from kansym.discover.run import discover
from kansym.discover.structure import interaction_error, interaction_r2
from kansym.discover.stages import wants_direct_search
from kansym.discover.units import Reduction, analyze, parse_unit
from kansym.errors import CheckpointError, DataError
from kansym.symbolic.compose import input_symbols, lambdify_formula, predictions
from kansym.symbolic.direct import DirectCandidate, direct_search
from kansym.symbolic.pareto import expression_complexity, pareto_front
from kansym.symbolic.refine import simplify_formula, refine
from kansym.symbolic.verify import ResidualTest, residual_test, fidelity, nrmse, r2_score

__all__ = ['reduction_meta', 'model_columns', 'model_target', 'group_inputs', 'predict_columns',
    'outside_training_range', 'map_back', 'weighted_search', 'weighted_group_residuals', 'monomial_size',
    'UnitsDiscovery', 'discover_with_units', 'CONSTANT_R2', 'TRY_CONSTANT_R2']

log = logging.getLogger("kansym")


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


WEIGHTED_REFINE_TOP = 8  # raw candidates the weighted search refines (noisy rows: the law may rank 5th raw)
MONOMIAL_SPREAD = 1.5  # a monomial whose size varies less over the rows leaves the groups' search as it is


def weighted_search(g, yp, red: Reduction, res: Discovery, found: Formula, x, yv, fit_idx, test_idx, symbols,
                    target: str, config: DiscoverConfig, deadline: Deadline) -> Formula | None:
    """The direct search on the groups with the monomial as a factor of each row
    (:func:`kansym.symbolic.direct.direct_search`'s ``factor``), when it beats ``found``.

    ``y / prod x^p`` carries the target's noise divided by the monomial: an unweighted search
    on the groups is decided by the rows of small monomial, the noisiest (a polynomial in
    ``v/c`` then fits as well as ``1/sqrt(1 - v^2/c^2)``). Weighted by the monomial, each
    row counts as it does in the target. Its choice (:func:`kansym.discover.choice.choose` on
    the fitting rows, residuals weighted by the monomial) replaces ``found`` when it wins
    :func:`~kansym.discover.choice.choose` against it on the held-out rows, in the target's
    units, ``found`` the incumbent and errors raised to a smooth weighted fit's (the noise
    floor); a flagged ``found`` only when no candidate of the search fits significantly better
    than the choice, whatever its constants and nodes
    (:func:`~kansym.discover.choice.significantly_better` with ``any_size``). None when the
    search does not apply (more than two groups, a monomial of nearly constant size) or loses.
    """
    k = len(red.groups)
    if not wants_direct_search(config, k, 1) or k == 0 or time_is_up(deadline):
        return None
    mono = monomial_size(red, symbols, x)
    if not np.all(np.isfinite(mono) & (mono > 0)) or mono[fit_idx].max() < MONOMIAL_SPREAD * mono[fit_idx].min():
        return None
    floor = interaction_error(g[fit_idx], yp[fit_idx], g[test_idx], yp[test_idx], factor=mono[fit_idx],
                              factor_test=mono[test_idx])
    group_symbols = input_symbols(list(red.group_names))
    found_cands = direct_search(g[fit_idx], yp[fit_idx], group_symbols, complexity_weight=config.complexity_weight,
                                noise=floor, factor=mono[fit_idx], refine_top=WEIGHTED_REFINE_TOP, deadline=deadline)
    for c in found_cands:
        log.debug("weighted direct search candidate: %s (error %.6g, complexity %d)", c.expr, c.error, c.complexity)

    def fit_residual(c: DirectCandidate) -> np.ndarray:  # as the search's errors: each row weighted by its monomial
        with np.errstate(all="ignore"):
            return mono[fit_idx] * (predictions(c.expr, group_symbols, g[fit_idx]) - yp[fit_idx])
    best, _ = choose(found_cands, config.complexity_weight, residual=fit_residual)
    if best is None:
        return None
    f0 = res.formulas[0]
    # the groups' formula stays on the front, no longer chosen
    fw = replace(f0, expr=best.expr, raw=best.expr, origin="direct search", candidates=(), structure=None,
                 closed_form=None, front=tuple(replace(e, chosen=False) for e in f0.front))
    fw = replace(fw, residual=fw.residual_test(g[fit_idx], yp[fit_idx], g[test_idx], yp[test_idx]))
    mapped = map_back(fw, res, red, x, yv, fit_idx, test_idx, symbols, target)
    old, new = (_on_held_out(f, symbols, x[test_idx], yv[test_idx]) for f in (found, mapped))
    # the noise: the smooth fit's error, or less when a formula does better (an exact law)
    noise = min(old.error, new.error, floor) if np.isfinite(floor) else min(old.error, new.error)
    # at the noise floor a law and its approximation differ by a few % of error, less than the
    # score's price of a node: a significantly smaller held-out error decides too
    winner, why = choose([new], config.complexity_weight, incumbent=old, floor=noise)
    log.debug("weighted direct search on the groups: %s (error %.6g) vs %s (%.6g): %s", mapped.expr, new.error,
              found.expr, old.error, why)
    if winner is not new:
        return None
    # a flagged formula gives way only to one no candidate of the search fits significantly better
    # (a series chosen over a template of more nodes that fits better is no law either)
    if found.warning is not None and any(significantly_better(c, best, fit_residual, any_size=True) is not None
                                         for c in found_cands):
        return None
    reason = (f"the direct search on the groups weighted by the monomial {red.monomial(symbols)} (each row as in "
              f"{target}): {mapped.expr} chosen over {found.expr} ({why}, on the held-out rows)")
    log.info("%s", reason)
    return replace(mapped, reason=reason, origin="direct search")


def _on_held_out(f: Formula, symbols, x_test: np.ndarray, y_test: np.ndarray) -> DirectCandidate:
    """``f`` as :func:`~kansym.discover.choice.choose` sees it on the held-out rows, in the target's units."""
    pred = predictions(f.expr, symbols, x_test)
    with np.errstate(all="ignore"):
        err = nrmse(y_test, pred)
        return DirectCandidate(f.expr, err if np.isfinite(err) else np.inf, expression_complexity(f.expr), f.origin,
                               residual=pred - y_test)


def monomial_size(red: Reduction, symbols, x: np.ndarray) -> np.ndarray:
    """``|prod x^p|`` on each row ``(N,)``: the factor by which the noise of ``y / prod x^p`` is the target's."""
    return np.abs(predictions(red.monomial(symbols), symbols, x))


def weighted_group_residuals(expr: sympy.Expr, symbols, red: Reduction, x, y, fit_idx, test_idx) -> ResidualTest:
    """:func:`kansym.symbolic.verify.residual_test` of ``y / prod x^p``'s residuals, neighbours in the
    groups, each row weighted by its monomial (as in the target: that residual's noise is the
    target's over the monomial); no verdict for a partial formula or without groups."""
    if not red.groups or expr.atoms(AppliedUndef):
        return ResidualTest()
    if len(test_idx) == len(fit_idx) and np.array_equal(test_idx, fit_idx):  # nothing held out: odd from even
        fit_idx, test_idx = fit_idx[::2], fit_idx[1::2]
    mono = monomial_size(red, symbols, x)
    with np.errstate(all="ignore"):
        res = (y - predictions(expr, symbols, x)) / mono
    g, yp = red.reduce(x, y)
    rows = np.concatenate([fit_idx, test_idx])
    if not (np.all(np.isfinite(g[rows])) and np.all(np.isfinite(res[rows])) and np.all(mono[rows] > 0)):
        return ResidualTest()
    top = float(np.max(np.abs(yp[fit_idx])))
    scale = float(np.std(yp[fit_idx] / top)) * top if top > 0 and np.isfinite(top) else 0.0
    return residual_test(g[fit_idx], res[fit_idx], g[test_idx], res[test_idx], scale=scale,
                       weight_fit=mono[fit_idx], weight_test=mono[test_idx])


def map_back(f: Formula, res: Discovery, red: Reduction, x, y, fit_idx, test_idx, symbols, target: str) -> Formula:
    """A formula in the groups -> the same in the original columns, re-verified there."""
    mono = red.monomial(symbols)
    groups = dict(zip(red.group_names, red.group_exprs(symbols)))

    def back(e: sympy.Expr, simplify: bool = True) -> sympy.Expr:
        e = sympy.sympify(e)
        sub = {s: groups[s.name] for s in e.free_symbols if s.name in groups}
        out = e.xreplace(sub) * mono
        return simplify_formula(sympy.powsimp(out)) if simplify else out

    expr, raw = back(f.expr), back(f.raw, simplify=False)
    if not np.all(np.isfinite(predictions(expr, symbols, x[fit_idx]))):
        expr = back(f.expr, simplify=False)
    g_fit, _ = red.reduce(x[fit_idx])
    g_test, _ = red.reduce(x[test_idx])
    mono_fit = predictions(mono, symbols, x[fit_idx]) if mono != 1 else np.ones(len(fit_idx))
    mono_test = predictions(mono, symbols, x[test_idx]) if mono != 1 else np.ones(len(test_idx))
    y_model_fit = res.pruned.predict(g_fit)[:, 0] * mono_fit
    y_model_test = res.pruned.predict(g_test)[:, 0] * mono_test
    fid = fidelity(lambdify_formula(expr, symbols), x[fit_idx], y[fit_idx], y_model_fit)
    cands = tuple(replace(c, expr=back(c.expr, simplify=False)) for c in f.candidates)
    front = pareto_front([back(e.expr) if expression_complexity(e.expr) <= 60 else back(e.expr, False)
                          for e in f.front if not e.chosen], expr, symbols, x[test_idx], y[test_idx])
    closed = None
    if f.closed_form is not None:  # the best closed form beside a partial formula, re-scored on the columns
        ce = back(f.closed_form.expr)
        pred = predictions(ce, symbols, x[test_idx])
        closed = ClosedForm(ce, r2_score(y[test_idx], pred, nonfinite="-inf"), expression_complexity(ce),
                            f.closed_form.origin)
    mapped = Formula(
        expr=expr, raw=raw, symbols=tuple(symbols), fidelity=fid, target=target, candidates=cands,
        r2_test=next(e.r2 for e in front if e.chosen), r2_model_test=r2_score(y[test_idx], y_model_test),
        n_test=f.n_test, front=front, closed_form=closed, origin=f.origin, structure=f.structure, reason=f.reason,
    )
    # the residual test on the columns and on the groups: in the groups, rows near in the law's own
    # variables are near (a series for a function of one group, invisible among five columns, shows);
    # and on the groups with the rows weighted as in the target (those of y / monomial are the
    # noisiest where the monomial is small: a series refitted with the rows weighted as in the
    # target passed both others)
    tests = [mapped.residual_test(x[fit_idx], y[fit_idx], x[test_idx], y[test_idx]), f.residual,
             weighted_group_residuals(expr, symbols, red, x, y, fit_idx, test_idx)]
    log.debug("residual test: columns %s, groups %s, groups weighted %s", *tests)
    return replace(mapped, residual=ResidualTest.combine(tests))  # one verdict, its p adjusted over all three


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
    """A units discovery of the working units in the table's (:mod:`kansym.discover.rows`): the
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
    if not np.all(np.isfinite(predictions(expr, symbols, x[fit_idx]))):
        expr = raw
    y_model_fit = predictions(raw, symbols, x[fit_idx])
    fid = fidelity(lambdify_formula(expr, symbols), x[fit_idx], y[fit_idx], y_model_fit)
    front = pareto_front([raw], expr, symbols, x[test_idx], y[test_idx])
    formula = Formula(
        expr=expr, raw=raw, symbols=tuple(symbols), fidelity=fid, target=target,
        r2_test=next(e.r2 for e in front if e.chosen),
        r2_model_test=r2_score(y[test_idx], predictions(raw, symbols, x[test_idx])),
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
