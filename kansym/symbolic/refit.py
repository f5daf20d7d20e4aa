"""Refit the float constants of a formula on data (the first step of refinement, §8), bit for bit reproducibly.

Every float constant (``sympy.Float`` atom) of a formula becomes a parameter of one
lambdified numpy function (:class:`Problem`), so trying a value costs one evaluation, not
a new ``lambdify``, and is refitted by nonlinear least squares
(:func:`scipy.optimize.least_squares`), the constant optimisation common to symbolic
regression systems (e.g. Cranmer 2023, "PySR", arXiv:2305.01582, §3). The fits use
``method="trf"``: with ``method="lm"`` (MINPACK, compiled) the same problem gave different
last bits from call to call as the process's heap changed (3 to 9 distinct results in 12
to 16 calls of an Occam trial's refit, with arrays allocated in between), which along a
flat direction of the constants moved them by 1e-5 and could change which formula the
Occam step kept; trf (numpy) gave one result.

Bit-for-bit reproducible numerics: the same formula and data give the same bits in any process.

Two things made a refit's result depend on what the process had done before (a second
fit in one process, another command first, a background thread allocating), and a
least-squares refit along a flat direction of a formula's constants turns last-bit
differences into different constants, errors and, through the Occam step's choices,
formulas:

- ``sympy.lambdify`` replaces every argument by a fresh ``Dummy`` as soon as one
  argument is a ``Dummy`` or not a Python identifier (a CSV column named ``period days``
  or ``lambda``). Those Dummies are named from a process-wide counter (``Dummy_98``,
  ``Dummy_100``), and the code printer orders a sum's terms by name, so the same
  formula added its terms in another order. :func:`stable_lambdify` names such
  arguments by position instead.
- scipy's MINPACK (``least_squares(method="lm")``) gives results whose last bits
  depend on the process's heap; :mod:`kansym.symbolic.refine` fits with ``"trf"``.
"""

from __future__ import annotations

import keyword
import logging
import math
from typing import Callable, Sequence, Any, Literal

import numpy as np
import sympy
from scipy.optimize import least_squares

from kansym.deadline import Deadline, time_is_up
from kansym.errors import ConfigError, DataError
from kansym.symbolic.constants import constant_contexts

__all__ = ['stable_lambdify', 'Problem', 'LossSpace', 'refit_constants', 'refit_constants_counted']

logger = logging.getLogger("kansym")


def _plain(arg: sympy.Symbol) -> bool:
    """Whether lambdify takes ``arg`` as it is (a Symbol, not a Dummy, named like a Python variable)."""
    return (type(arg) is sympy.Symbol and arg.name.isidentifier() and not keyword.iskeyword(arg.name)
            and arg.name != "__debug__")  # an identifier Python cannot assign


def stable_lambdify(args: Sequence[sympy.Symbol], expr: sympy.Expr) -> Callable:
    """``sympy.lambdify(args, expr, modules="numpy")`` with code that depends on ``expr`` alone.

    When lambdify would replace the arguments by counter-named Dummies (one of them is a
    Dummy or not an identifier), they are renamed ``_a00000, _a00001, ...`` first (same
    assumptions), numbered in the order lambdify itself numbers its Dummies (the reverse
    of ``sympy.ordered(zip(args, range(n)))``), zero-padded: the printer then orders the
    terms exactly as it did with lambdify's own Dummies whenever their counter kept its
    number of digits, so formulas found before stay the same to the last digit. Plain
    arguments are used as they are.

    Complex infinity (``zoo``, e.g. from a refit constant ``1/0``) becomes ``nan``: numpy has
    no such number (sympy's printer raised ``KeyError: 'ComplexInfinity'``), and a formula
    holding it is not finite anywhere.
    """
    args = list(args)
    expr = sympy.sympify(expr)
    if expr.has(sympy.zoo):
        expr = expr.xreplace({sympy.zoo: sympy.nan})
    if all(_plain(a) for a in args):
        return sympy.lambdify(args, expr, modules="numpy")
    numbered = [i for _, i in reversed(list(sympy.ordered(zip(args, range(len(args))))))]
    rank = {i: r for r, i in enumerate(numbered)}
    plain = [sympy.Symbol(f"_a{rank[i]:05d}", **a.assumptions0) for i, a in enumerate(args)]
    return sympy.lambdify(plain, expr.xreplace(dict(zip(args, plain))), modules="numpy")


LossSpace = Literal["linear", "log"]


class _TimeUp(Exception):
    """Raised inside a least-squares residual once the deadline has expired."""


class Problem:
    """A formula with its float constants lifted to parameters, and its data.

    Attributes
    ----------
    expr : sympy.Expr
        The formula (``expand_log(log f)`` in log space) with parameters for its floats.
    params, values : list of sympy.Dummy, ndarray
        The parameters and the floats they replace, in increasing order of value.
    contexts : list of str
        Where each float sits (:func:`kansym.symbolic.constants.constant_contexts`).
    evaluations : int
        Residual evaluations so far: the work a refit did, counted, not timed.
    """

    def __init__(self, expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any,
                 loss_space: LossSpace, *, expand: bool = True, deadline: Deadline | None = None) -> None:
        self.deadline = deadline  # a refit running when it expires stops at its best point so far
        self.symbols = _as_symbols(symbols)
        self.X, self.y = _check_data(self.symbols, X, y)
        if loss_space not in ("linear", "log"):
            raise ConfigError(f"loss_space must be 'linear' or 'log', got {loss_space!r}.")
        if loss_space == "log" and np.any(self.y <= 0):
            raise DataError("loss_space='log' needs y > 0 everywhere; use loss_space='linear'.")
        self.log = loss_space == "log"
        expr = sympy.sympify(expr)
        # in log space the residual is log f - log y; ``expand`` fits it on expand_log(log f),
        # else on f itself (the floats of f as they print, e.g. to round them)
        self._expanded = self.log and expand
        self._log_of_f = self.log and not expand
        if self._expanded:
            # Fit log f to log y: a power law C * a**p * b**q becomes the linear
            # log C + p log a + q log b, which least squares solves reliably even
            # when a and b span tens of orders of magnitude.
            expr = sympy.expand_log(sympy.log(expr), force=True)
        floats = sorted(expr.atoms(sympy.Float), key=lambda f: (float(f), str(f)))
        self.params = [sympy.Dummy(f"c{i}") for i in range(len(floats))]
        self.expr = expr.xreplace(dict(zip(floats, self.params)))
        self.values = np.array([float(f) for f in floats])
        where = constant_contexts(expr, log_space=self._expanded)
        self.contexts = [where.get(f, "factor") for f in floats]
        self._f = stable_lambdify([*self.symbols, *self.params], self.expr)
        target = np.log(self.y) if self.log else self.y
        self._target = target
        # relative to the target's own magnitude (an absolute floor made every error of a
        # target of order 1e-21 look like 0, and snapped its constant to 0)
        self._scale = max(float(np.std(target)), 1e-12 * float(np.max(np.abs(target))), 1e-300)
        self.evaluations = 0  # residual evaluations so far: the work a refit did, counted, not timed

    def residual(self, values: np.ndarray) -> np.ndarray:
        self.evaluations += 1
        with np.errstate(all="ignore"):
            pred = np.broadcast_to(np.asarray(self._f(*self.X.T, *values), dtype=np.float64),
                                   self.y.shape)
            if self._log_of_f:
                pred = np.log(pred)
            r = pred - self._target
        return np.where(np.isfinite(r), r, 1e10 * self._scale)

    def error(self, values: np.ndarray) -> float:
        """Normalised RMSE: RMS residual over the std of the (log-)target."""
        r = self.residual(values)
        return float(np.sqrt(np.mean(r * r))) / self._scale

    def refit(self, values: np.ndarray, free: np.ndarray, max_nfev: int | None = None) -> np.ndarray:
        """Least-squares refit of the parameters where ``free`` is True; never worse, never non-finite."""
        if not free.any():
            return values

        best = [np.inf, values[free].copy()]  # the lowest sum of squares seen, and where

        def resid(theta: np.ndarray) -> np.ndarray:
            if time_is_up(self.deadline):
                raise _TimeUp
            v = values.copy()
            v[free] = theta
            r = self.residual(v)
            cost = float(np.dot(r, r))
            if cost < best[0]:
                best[0], best[1] = cost, theta.copy()
            return r

        if not np.all(np.isfinite(values[free])) or time_is_up(self.deadline):
            return values
        # "trf", not MINPACK's "lm": lm's last bits depend on the process's heap (module docstring); a
        # step where the formula overflows makes scipy's arithmetic warn: the result is checked below
        try:
            with np.errstate(all="ignore"):
                theta = least_squares(resid, values[free], method="trf", x_scale="jac",
                                      max_nfev=max_nfev or 200 * (free.sum() + 1)).x
        except (ValueError, FloatingPointError) as exc:  # e.g. a Jacobian full of NaN
            logger.debug("constant refit failed: %s", exc)
            return values
        except _TimeUp:  # the time limit, inside the fit: its best point so far
            theta = best[1]
        out = values.copy()
        out[free] = theta
        ok = np.all(np.isfinite(out)) and self.error(out) <= self.error(values)
        return out if ok else values

    @property
    def n_rows(self) -> int:
        return int(self.y.shape[0])

    def standard_errors(self, values: np.ndarray, free: np.ndarray, *, rel_step: float = 1e-6,
                        noise: float | None = None) -> np.ndarray:
        """Standard errors of the parameters, ``sqrt(diag(s^2 (J^T J)^+))``; 0 where fixed.

        ``s^2`` is the residual variance ``SSE / (N - k)``, or with ``noise`` (a normalised
        RMS error, as :meth:`error`) the variance that noise stands for, ``(noise * std)^2``.
        The free parameters' errors are those with the others free too (marginal).
        """
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
            s2 = float(base @ base) / dof if noise is None else (float(noise) * self._scale) ** 2
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
        return sympy.exp(out) if self._expanded else out


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
                    loss_space: LossSpace = "linear", max_nfev: int | None = None,
                    deadline: Deadline | None = None) -> sympy.Expr:
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
        Residual ``f - y`` or ``log f - log y`` (the latter needs ``y > 0``;
        for targets spanning decades, like Kepler periods).
    max_nfev : int, optional
        ``least_squares``' cap on evaluations (default ``200 * (k + 1)`` for ``k``
        constants; the Jacobian's finite differences come on top).
    deadline : kansym.deadline.Deadline, optional
        Once it expires the fit stops at the best constants it has evaluated.

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
    return refit_constants_counted(expr, symbols, X, y, loss_space=loss_space, max_nfev=max_nfev,
                                   deadline=deadline)[0]


def refit_constants_counted(expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any, *,
                            loss_space: LossSpace = "linear", max_nfev: int | None = None,
                            deadline: Deadline | None = None) -> tuple[sympy.Expr, int]:
    """:func:`refit_constants`, and the number of formula evaluations it took (each on all
    rows of ``X``; the Jacobian's finite differences included): the work budget of
    :func:`kansym.symbolic.occam.simplify_edges` counts these, never seconds."""
    prob = Problem(expr, symbols, X, y, loss_space, deadline=deadline)
    if not prob.params:
        return sympy.sympify(expr), 0
    return prob.build(prob.refit(prob.values, np.ones(len(prob.params), bool), max_nfev)), prob.evaluations
