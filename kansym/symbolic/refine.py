"""Polish a composed formula on data: refit its constants, snap them, simplify.

DESIGN.md §3 "Refinement": every float constant of the formula is refitted by nonlinear least
squares on the data (:func:`scipy.optimize.least_squares`), then each is snapped to a nearby simple
value (integer, ``p/q`` with small ``q``, multiple of ``pi``, of ``sqrt(2)`` or ``sqrt(3)``) when the
data error does not grow, the remaining constants being refitted after every accepted snap; the
result is simplified by rewrites chosen by its size alone (never by the clock) and its remaining
constants get a final refit. This is the constant-optimisation step common to symbolic regression
systems (e.g. Cranmer 2023, "PySR", arXiv:2305.01582, §3).

Internally the float constants become parameters of one lambdified numpy function, so trying a snap
costs one evaluation, not a new ``lambdify``. The fits use ``least_squares(method="trf")``: with
``method="lm"`` (MINPACK, compiled) the same problem gave different last bits from call to call as
the process's heap changed (3 to 9 distinct results in 12 to 16 calls of an Occam trial's refit,
with arrays allocated in between), which along a flat direction of the constants moved them by 1e-5
and could change which formula the Occam step kept; trf (numpy) gave one result.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Literal, Sequence

import numpy as np
import sympy
from scipy.optimize import least_squares

from kansym.deadline import Deadline, time_is_up
from kansym.errors import ConfigError, DataError
from kansym.symbolic.reproducible import stable_lambdify
from kansym.symbolic.simplify import simplify_formula

__all__ = ["refit_constants", "refit_constants_counted", "snap_constant", "snap_constants", "reduce_phases",
           "simplify_formula", "refine", "merge_numeric_factors"]

logger = logging.getLogger("kansym")

LossSpace = Literal["linear", "log"]


class _Problem:
    """A formula with its float constants lifted to parameters, and its data."""

    def __init__(self, expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any,
                 loss_space: LossSpace) -> None:
        self.symbols = _as_symbols(symbols)
        self.X, self.y = _check_data(self.symbols, X, y)
        if loss_space not in ("linear", "log"):
            raise ConfigError(f"loss_space must be 'linear' or 'log', got {loss_space!r}.")
        if loss_space == "log" and np.any(self.y <= 0):
            raise DataError("loss_space='log' needs y > 0 everywhere; use loss_space='linear'.")
        self.log = loss_space == "log"
        expr = sympy.sympify(expr)
        if self.log:
            # Fit log f to log y: a power law C * a**p * b**q becomes the linear
            # log C + p log a + q log b, which least squares solves reliably even
            # when a and b span tens of orders of magnitude.
            expr = sympy.expand_log(sympy.log(expr), force=True)
        floats = sorted(expr.atoms(sympy.Float), key=lambda f: (float(f), str(f)))
        self.params = [sympy.Dummy(f"c{i}") for i in range(len(floats))]
        self.expr = expr.xreplace(dict(zip(floats, self.params)))
        self.values = np.array([float(f) for f in floats])
        self._f = stable_lambdify([*self.symbols, *self.params], self.expr)
        target = np.log(self.y) if self.log else self.y
        self._target = target
        self._scale = max(float(np.std(target)), 1e-12 * max(1.0, float(np.max(np.abs(target)))))
        self.evaluations = 0  # residual evaluations so far: the work a refit did, counted, not timed

    def residual(self, values: np.ndarray) -> np.ndarray:
        self.evaluations += 1
        with np.errstate(all="ignore"):
            pred = np.broadcast_to(np.asarray(self._f(*self.X.T, *values), dtype=np.float64),
                                   self.y.shape)
            r = pred - self._target
        return np.where(np.isfinite(r), r, 1e10 * self._scale)

    def error(self, values: np.ndarray) -> float:
        """Normalised RMSE: RMS residual over the std of the (log-)target."""
        r = self.residual(values)
        return float(np.sqrt(np.mean(r * r))) / self._scale

    def refit(self, values: np.ndarray, free: np.ndarray, max_nfev: int | None = None) -> np.ndarray:
        """Least-squares refit of the parameters where ``free`` is True; never worse."""
        if not free.any():
            return values

        def resid(theta: np.ndarray) -> np.ndarray:
            v = values.copy()
            v[free] = theta
            return self.residual(v)

        if not np.all(np.isfinite(values[free])):
            return values
        # "trf", not MINPACK's "lm": lm's last bits depend on the process's heap (module docstring); a
        # step where the formula overflows makes scipy's arithmetic warn: the result is checked below
        try:
            with np.errstate(all="ignore"):
                sol = least_squares(resid, values[free], method="trf", x_scale="jac",
                                    max_nfev=max_nfev or 200 * (free.sum() + 1))
        except (ValueError, FloatingPointError) as exc:  # e.g. a Jacobian full of NaN
            logger.debug("constant refit failed: %s", exc)
            return values
        out = values.copy()
        out[free] = sol.x
        ok = np.all(np.isfinite(out)) and self.error(out) <= self.error(values)
        return out if ok else values

    def standard_errors(self, values: np.ndarray, free: np.ndarray, *, rel_step: float = 1e-6) -> np.ndarray:
        """Standard errors of the parameters, ``sqrt(diag(s^2 (J^T J)^+))``; 0 where fixed."""
        base = self.residual(values)
        idx = np.flatnonzero(free)
        jac = np.empty((base.size, idx.size))
        for col, i in enumerate(idx):
            step = rel_step * max(abs(values[i]), 1e-3)
            v = values.copy()
            v[i] += step
            jac[:, col] = (self.residual(v) - base) / step
        dof = max(base.size - idx.size, 1)
        with np.errstate(over="ignore", invalid="ignore"):  # checked: LAPACK's SVD may not return on inf
            s2 = float(base @ base) / dof
            jtj = jac.T @ jac
        out = np.zeros(values.size)
        if not (np.all(np.isfinite(jtj)) and math.isfinite(s2)):
            return out
        cov = s2 * np.linalg.pinv(jtj)
        out[idx] = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        return out

    def build(self, values: np.ndarray, fixed: dict[int, sympy.Expr] | None = None) -> sympy.Expr:
        fixed = fixed or {}
        sub = {p: fixed.get(i, sympy.Float(v)) for i, (p, v) in enumerate(zip(self.params, values))}
        out = self.expr.xreplace(sub)
        return sympy.exp(out) if self.log else out


def _as_symbols(symbols: Sequence[Any]) -> list[sympy.Symbol]:
    out = [s if isinstance(s, sympy.Symbol) else sympy.Symbol(str(s)) for s in symbols]
    if len(set(out)) != len(out):
        raise ConfigError("symbols must be distinct; give one symbol per column of X.")
    return out


def _check_data(symbols: list[sympy.Symbol], X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim == 1 and len(symbols) == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[1] != len(symbols):
        raise DataError(f"X must have shape (N, {len(symbols)}) to match the symbols, got {X.shape}.")
    if y.shape != (X.shape[0],):
        raise DataError(f"y must have shape ({X.shape[0]},), got {y.shape}.")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise DataError("X and y contain NaN or inf; drop those rows first.")
    return X, y


def refit_constants(expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any, *,
                    loss_space: LossSpace = "linear", max_nfev: int | None = None) -> sympy.Expr:
    """Refit every float constant (``sympy.Float`` atom) of ``expr`` on data.

    Parameters
    ----------
    expr : sympy.Expr
        Formula in ``symbols``; integers, rationals and ``pi`` stay fixed.
    symbols : sequence of sympy.Symbol or str
        Variables, in the column order of ``X``.
    X : array_like, shape (N, d)
    y : array_like, shape (N,)
    loss_space : {"linear", "log"}
        Residual ``f - y`` or ``log f - log y`` (needs ``y > 0``; for targets spanning decades).
    max_nfev : int, optional
        ``least_squares``' cap on evaluations (default ``200 * (k + 1)`` for ``k`` constants).

    Returns
    -------
    sympy.Expr
        ``expr`` with refitted Floats (unchanged if the fit did not improve it).

    Raises
    ------
    DataError
        If shapes disagree, data are not finite, or ``y <= 0`` in log space.
    ConfigError
        If ``loss_space`` is unknown or symbols repeat.
    """
    return refit_constants_counted(expr, symbols, X, y, loss_space=loss_space, max_nfev=max_nfev)[0]


def refit_constants_counted(expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any, *,
                            loss_space: LossSpace = "linear", max_nfev: int | None = None) -> tuple[sympy.Expr, int]:
    """:func:`refit_constants`, and the number of formula evaluations it took (each on all
    rows of ``X``; the Jacobian's finite differences included): the work budget of
    :func:`kansym.symbolic.occam.simplify_edges` counts these, never seconds."""
    prob = _Problem(expr, symbols, X, y, loss_space)
    if not prob.params:
        return sympy.sympify(expr), 0
    return prob.build(prob.refit(prob.values, np.ones(len(prob.params), bool), max_nfev)), prob.evaluations


def snap_constant(v: float, *, rel_tol: float = 1e-2, max_denominator: int = 12,
                  zero_tol: float = 1e-8) -> list[sympy.Expr]:
    """Simple exact numbers near ``v``, simplest first.

    Candidates: integers, ``p/q`` with ``q <= max_denominator``, ``p*pi/q``,
    ``p/(q*pi)``, ``p*pi**2/q`` (``q <= 4``), ``p*sqrt(2)/q``, ``p*sqrt(3)/q`` and ``p/(q*sqrt(2*pi))`` (``q <= 4``;
    ``1/(2 pi)`` and the Gaussian's ``1/sqrt(2 pi)`` are common in physics), each within
    ``rel_tol * |v|`` of ``v``; ``0`` if ``|v| <= zero_tol``. Sorted by
    simplicity (integers, then multiples of pi, rationals, surds; smaller
    denominators first), ties by distance.

    Returns
    -------
    list of sympy.Expr
        Possibly empty.
    """
    v = float(v)
    if not math.isfinite(v):
        return []
    out: dict[sympy.Expr, tuple[float, float]] = {}  # candidate -> (simplicity, distance)
    if abs(v) <= zero_tol:
        out[sympy.Integer(0)] = (0.0, abs(v))
    tol = rel_tol * abs(v)
    # (factor, its value, largest denominator, base simplicity; rationals get 2.0)
    bases = [(sympy.Integer(1), 1.0, max_denominator, 1.0), (sympy.pi, math.pi, max_denominator, 1.5),
             (1 / sympy.pi, 1 / math.pi, max_denominator, 2.5), (sympy.pi ** 2, math.pi ** 2, 4, 3.0),
             (sympy.sqrt(2), math.sqrt(2), 4, 3.5), (sympy.sqrt(3), math.sqrt(3), 4, 3.5),
             (1 / sympy.sqrt(2 * sympy.pi), 1 / math.sqrt(2 * math.pi), 4, 3.5)]
    for sym, val, qmax, base in bases:
        for q in range(1, qmax + 1):
            p = round(v * q / val)
            if p == 0 or math.gcd(p, q) != 1 or abs(p * val / q - v) > tol:
                continue
            score = (2.0 if base == 1.0 and q > 1 else base) + 0.1 * (q - 1) + 0.02 * math.log10(1 + abs(p))
            out.setdefault(sympy.Rational(p, q) * sym, (score, abs(p * val / q - v)))
    return sorted(out, key=lambda c: out[c])


def reduce_phases(expr: sympy.Expr) -> sympy.Expr:
    """Reduce float phases of ``sin``/``cos`` into ``(-pi/2, pi/2]``.

    Uses ``f(u + 2 pi) = f(u)`` and ``f(u + pi) = -f(u)`` for ``f`` in sin, cos,
    so a phase can be snapped to 0 or ``+-pi/2`` (turning sin into cos).
    """
    def reduce(e: sympy.Expr) -> sympy.Expr:
        const, rest = e.args[0].as_coeff_Add()
        if not isinstance(const, sympy.Float) or rest == 0:
            return e
        b = (float(const) + math.pi) % (2 * math.pi) - math.pi
        sign = 1
        if b > math.pi / 2:
            b, sign = b - math.pi, -1
        elif b <= -math.pi / 2:
            b, sign = b + math.pi, -1
        return sign * e.func(rest + sympy.Float(b))

    return sympy.sympify(expr).replace(lambda e: isinstance(e, (sympy.sin, sympy.cos)), reduce)


def snap_constants(expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any, *,
                   tol: float = 1e-2, abs_tol: float = 1e-6, rel_tol: float = 1e-2,
                   loss_space: LossSpace = "linear", wald_z: float = 3.0,
                   wald_growth: float = 0.25, deadline: Deadline | None = None) -> sympy.Expr:
    """Greedily replace float constants by simple exact values the data allow.

    Phases of sin/cos are first reduced (:func:`reduce_phases`). Constants are
    visited most-snappable first (smallest relative distance to a candidate of
    :func:`snap_constant`). For each, the candidates (simplest first, then 0)
    are tried: a snap is kept if the normalised RMSE (RMSE over std of y)
    stays within ``e0 * (1 + tol) + abs_tol``, ``e0`` being the error before
    any snap, either at once or after refitting the remaining floats.

    Parameters
    ----------
    expr, symbols, X, y, loss_space
        As :func:`refit_constants`.
    tol, abs_tol : float
        Relative and absolute growth of the normalised RMSE a snap may cause.
    rel_tol : float
        Search radius of :func:`snap_constant`.
    wald_z, wald_growth : float
        A snap is also kept when the simple value lies within ``wald_z`` standard
        errors of the fitted constant (a Wald test; standard errors from the
        Jacobian, ``s^2 (J^T J)^+``) and the error grows by at most ``wald_growth``
        relative to the start. This accepts ``3/2`` for an exponent fitted as
        1.4994 ± 0.0003 on real measurements whose other effects (e.g. a moon's
        own mass) make the exact law fit slightly worse than the free one.
    deadline : kansym.deadline.Deadline, optional
        Looked at before each constant: once expired, the rest keep their fitted values.

    Returns
    -------
    sympy.Expr
    """
    prob = _Problem(reduce_phases(expr), symbols, X, y, loss_space)
    values = prob.values.copy()
    free = np.ones(len(values), bool)
    fixed: dict[int, sympy.Expr] = {}
    e0 = prob.error(values)
    limit = e0 * (1 + tol) + abs_tol
    wald_limit = e0 * (1 + wald_growth) + abs_tol
    cands = {i: snap_constant(v, rel_tol=rel_tol) for i, v in enumerate(values)}

    def closeness(i: int) -> float:
        c = cands[i]
        return abs(float(c[0]) - values[i]) / max(abs(values[i]), 1e-300) if c else math.inf

    for n_tried, i in enumerate(sorted(range(len(values)), key=closeness)):
        if time_is_up(deadline):
            deadline.cut(f"refinement: snapping stopped after {n_tried} of {len(values)} constants")
            break
        trials = cands[i] + ([sympy.Integer(0)] if sympy.Integer(0) not in cands[i] else [])
        se = prob.standard_errors(values, free)[i] if wald_z > 0 else 0.0
        for cand in trials:
            trial = values.copy()
            trial[i] = float(cand)
            rest = free.copy()
            rest[i] = False
            if prob.error(trial) > limit and cand in cands[i]:
                trial = prob.refit(trial, rest)
            err = prob.error(trial)
            consistent = abs(float(cand) - values[i]) <= wald_z * se and err <= wald_limit
            if err <= limit or consistent:
                values, free, fixed[i] = prob.refit(trial, rest), rest, cand
                break
    return prob.build(values, fixed)


def refine(expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any, *,
           loss_space: LossSpace = "linear", snap: bool = True, tol: float = 1e-2,
           abs_tol: float = 1e-6, simplify: bool = True, deadline: Deadline | None = None) -> sympy.Expr:
    """Refit -> snap -> simplify -> final refit of the remaining floats.

    Parameters
    ----------
    expr, symbols, X, y, loss_space
        As :func:`refit_constants`.
    snap : bool
        Snap constants (:func:`snap_constants` with ``tol``, ``abs_tol``).
    simplify : bool
        Run :func:`simplify_formula`.
    deadline : kansym.deadline.Deadline, optional
        The run's time limit, handed to :func:`snap_constants` (cut between snaps).

    Returns
    -------
    sympy.Expr

    Raises
    ------
    DataError, ConfigError
        As :func:`refit_constants`.
    """
    out = refit_constants(expr, symbols, X, y, loss_space=loss_space)
    if snap:
        out = snap_constants(out, symbols, X, y, tol=tol, abs_tol=abs_tol, loss_space=loss_space, deadline=deadline)
    if simplify:
        out = simplify_formula(out)
    merged = merge_numeric_factors(out)
    if snap and merged != out:
        # simplification can leave products such as 0.3183*pi (= 1): snap the merged float
        out = snap_constants(merged, symbols, X, y, tol=tol, abs_tol=abs_tol, loss_space=loss_space,
                             deadline=deadline)
        if simplify:
            out = simplify_formula(out)
    if time_is_up(deadline):  # the snaps' own refits stand
        deadline.cut("refinement: the final refit skipped")
    else:
        out = refit_constants(out, symbols, X, y, loss_space=loss_space)
    return clean_floats(out) if snap else out


def clean_floats(expr: sympy.Expr, *, rel_tol: float = 1e-9) -> sympy.Expr:
    """Replace floats within ``rel_tol`` of a simple value (1.00000000000006 -> 1)."""
    subs = {}
    for f in sympy.sympify(expr).atoms(sympy.Float):
        cands = snap_constant(float(f), rel_tol=rel_tol)
        if cands:
            subs[f] = cands[0]
    return sympy.sympify(expr).xreplace(subs) if subs else expr


def merge_numeric_factors(expr: sympy.Expr) -> sympy.Expr:
    """Fold the numeric factors of every product that holds a float into one float.

    ``0.3183098861837907*pi*x**2`` becomes ``1.0*x**2``; products of exact numbers only
    (``pi*x/2``) are left alone.
    """
    def merge(e: sympy.Expr) -> sympy.Expr:
        numeric = [f for f in e.args if not f.free_symbols]
        if len(numeric) < 2 or not any(f.has(sympy.Float) for f in numeric):
            return e
        rest = [f for f in e.args if f.free_symbols]
        return sympy.Mul(sympy.Float(sympy.Mul(*numeric).evalf()), *rest)

    return sympy.sympify(expr).replace(lambda e: e.is_Mul, merge)
