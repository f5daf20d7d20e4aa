"""Direct search of small formulas for laws of one or two inputs.

After dimensional analysis (AI Feynman, Udrescu & Tegmark 2020, Sci. Adv. 6, eaay2631,
§2) most laws are a function of one or two dimensionless groups. For those the space of
small formulas can be searched exhaustively, which a KAN's per-edge fits cannot do for
compositions such as ``x / (exp(x) - 1)`` or ``1 / sqrt(1 - x**2)``.

The search is a sparse regression over a dictionary of features, explicit and implicit
(rational), after a transform of the target:

    T(y) * (1 + sum_j v_j psi_j(x)) = c + sum_k w_k phi_k(x)

- ``T`` is one of ``y, 1/y, y**2, 1/y**2, sin(y), exp(y), log(y)`` (where invertible on
  the data): AI Feynman's brute-force step applies such transforms to the target too;
- ``phi_k`` are taken from a dictionary of features of each input (powers, exp, log,
  sin/cos at a few frequencies) and, with two inputs, products of one feature of each;
  at most three terms; ``psi_j`` (at most two, and at most three ``phi`` and ``psi``
  terms together) from the smaller denominator dictionary of powers, products and exp.
  The implicit form is linear in the unknowns ``c, w, v`` (SINDy-PI, Kaheman, Kutz &
  Brunton 2020, Proc. R. Soc. A 476, 20200279), so every subset is one least-squares
  solve, done in batches on the normal equations of unit-norm columns, the best ones
  solved again by QR on the rows (the numeric engine: :mod:`kansym.symbolic._subsets`).

The candidates best in the target's own units (normalised RMS error) are then refined
like every kansym formula (:func:`kansym.symbolic.refine.refine`: constants refitted,
snapped to simple numbers, simplified) and returned with their error and complexity for
the choice of :func:`choose`.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import sympy

from kansym.deadline import Deadline, time_is_up
from kansym.symbolic import _subsets as sub
from kansym.symbolic.compose import lambdify_formula
from kansym.symbolic.pareto import expression_complexity
from kansym.symbolic.refine import refine, simplify_formula
from kansym.symbolic.verify import nrmse

__all__ = ["DirectCandidate", "direct_search", "choose", "selection_score", "ERROR_FLOOR"]

log = logging.getLogger("kansym")

ERROR_FLOOR = 1e-9  # normalised RMS errors below this count as exact (float64 refits)
SEARCH_ROWS = 600  # evenly spaced rows used for the subset solves
REFINE_ROWS = 2000  # at most about this many rows for the refit of a candidate
MAX_VALUE = 1e12  # features beyond this magnitude on the data are dropped
MAX_TARGET = 1e100  # target transforms beyond it too (their squares, times features', must stay finite)
MAX_PHASE = 64.0  # sin/cos(w x) only while |w x| stays below this (about ten periods)


@dataclass(frozen=True)
class DirectCandidate:
    """One refined formula of the direct search.

    Attributes
    ----------
    expr : sympy.Expr
    error : float
        Normalised RMS error (RMSE over the std of ``y``,
        :func:`kansym.symbolic.verify.nrmse`) on the rows it was scored on.
    complexity : int
        :func:`kansym.symbolic.pareto.expression_complexity`.
    origin : str
        The search that found it: ``"direct search"``, or ``"structure"``
        (:mod:`kansym.discover.separate`).
    structure : dict or None
        For ``"structure"``: the decomposition it came from (``Split.to_dict``).
    """

    expr: sympy.Expr
    error: float
    complexity: int
    origin: str = "direct search"
    structure: dict | None = None


def selection_score(error: float, complexity: int, complexity_weight: float) -> float:
    """The quantity the choice minimises: ``log10(max(error, ERROR_FLOOR)) + w * complexity``.

    One more node of the expression tree must buy a ``10**w``-fold smaller error
    (``w = complexity_weight``); errors below ``ERROR_FLOOR`` are equal, so among exact
    formulas the simplest wins. This is the log-error/complexity trade-off of PySR's
    ``score`` (Cranmer 2023, arXiv:2305.01582, §3) made a weighted sum, as in
    description-length selection (AI Feynman 2.0, Udrescu et al. 2020, arXiv:2006.10782).
    """
    if not math.isfinite(error):
        return math.inf
    return math.log10(max(error, ERROR_FLOOR)) + complexity_weight * complexity


def choose(candidates: Sequence[DirectCandidate], complexity_weight: float) -> DirectCandidate | None:
    """The candidate of lowest :func:`selection_score` (ties: simpler, then by text)."""
    if not candidates:
        return None
    return min(candidates, key=lambda c: (selection_score(c.error, c.complexity, complexity_weight),
                                          c.complexity, str(c.expr)))


# --- dictionary --------------------------------------------------------------------------

@dataclass(frozen=True)
class _Feature:
    values: np.ndarray  # (N,)
    expr: sympy.Expr


def _unary(x: np.ndarray, s: sympy.Symbol, many: bool) -> list[tuple[str, np.ndarray, sympy.Expr]]:
    """Features of one input: (kind, values, expression); ``many``: sin/cos at six
    frequencies (1, 2, 1/2, pi, 2 pi, 4 pi), else at frequencies 1 and pi; a frequency
    only while the phase stays within ``MAX_PHASE`` (an input spanning thousands of
    periods, say a length in km, makes a sine a random feature)."""
    out = []
    pos = bool(np.all(x > 0))
    nonzero = bool(np.all(np.abs(x) > 1e-12))
    for k in (1, 2, 3):
        out.append(("poly", x ** k, s ** k))
    if nonzero:
        out.append(("poly", 1 / x, 1 / s))
        out.append(("poly", 1 / x ** 2, s ** -2))
        out.append(("poly", 1 / x ** 3, s ** -3))
    if pos:
        out.append(("root", np.sqrt(x), sympy.sqrt(s)))
        out.append(("log", np.log(x), sympy.log(s)))
    with np.errstate(over="ignore"):
        out.append(("exp", np.exp(x), sympy.exp(s)))
        out.append(("exp", np.exp(-x), sympy.exp(-s)))
    freqs = ((1.0, sympy.Integer(1)), (2.0, sympy.Integer(2)), (0.5, sympy.Rational(1, 2)),
             (math.pi, sympy.pi), (2 * math.pi, 2 * sympy.pi), (4 * math.pi, 4 * sympy.pi))
    for w, ws in freqs if many else freqs[:1] + freqs[3:4]:
        if w * np.max(np.abs(x)) > MAX_PHASE:
            continue
        out.append(("trig", np.sin(w * x), sympy.sin(ws * s)))
        out.append(("trig", np.cos(w * x), sympy.cos(ws * s)))
    return out


def _dictionary(x: np.ndarray, symbols: Sequence[sympy.Symbol]) -> tuple[list[_Feature], list[_Feature]]:
    """Numerator features ``phi`` and denominator features ``psi`` of inputs ``x (N, d)``."""
    per = [_unary(x[:, i], s, len(symbols) == 1) for i, s in enumerate(symbols)]
    num = [(v, e) for feats in per for _, v, e in feats]
    den = [(v, e) for feats in per for kind, v, e in feats if kind in ("poly", "exp")]
    if len(per) == 2:
        small = [[f for f in feats if f[0] == "poly" and f[2] in (s, s ** 2, 1 / s, s ** -2)] +
                 [f for f in feats if f[0] == "trig" and f[2].args[0] == s] for feats, s in zip(per, symbols)]
        for (_, va, ea), (_, vb, eb) in itertools.product(*small):
            num.append((va * vb, ea * eb))
        for (_, va, ea), (_, vb, eb) in itertools.product(*[[f for f in sm if f[0] == "poly"] for sm in small]):
            if ea.is_polynomial() and eb.is_polynomial():
                den.append((va * vb, ea * eb))
    keep = lambda v: bool(np.all(np.isfinite(v)) and np.max(np.abs(v)) < MAX_VALUE and np.ptp(v) > 0)
    return ([_Feature(v, e) for v, e in num if keep(v)], [_Feature(v, e) for v, e in den if keep(v)])


# --- target transforms -------------------------------------------------------------------

def _pow(r: sympy.Expr, p: sympy.Expr) -> sympy.Expr:
    return sympy.Pow(r, p, evaluate=False)


def _transforms(y: np.ndarray) -> list[tuple[str, np.ndarray, Callable[[sympy.Expr], sympy.Expr]]]:
    """``(name, T(y), inverse)`` for the transforms invertible on ``y``'s range whose values stay
    below ``MAX_TARGET`` (the normal equations square them once more)."""
    out = [("id", y, lambda r: r)]
    pos, neg = bool(np.all(y > 0)), bool(np.all(y < 0))
    with np.errstate(over="ignore", divide="ignore", under="ignore"):  # checked below: finite and < MAX_TARGET
        if pos or neg:
            sign = 1 if pos else -1
            # unevaluated: sympy's sign reasoning on a root of a float rational can take minutes
            out.append(("inv", 1 / y, lambda r: _pow(r, -1)))
            out.append(("sq", y ** 2, lambda r: sign * _pow(r, sympy.Rational(1, 2))))
            out.append(("invsq", 1 / y ** 2, lambda r: sign * _pow(r, sympy.Rational(-1, 2))))
        if pos:
            out.append(("log", np.log(y), lambda r: sympy.exp(r, evaluate=False)))
        if np.all(np.abs(y) <= math.pi / 2):
            out.append(("sin", np.sin(y), lambda r: sympy.asin(r, evaluate=False)))
        if np.all(np.abs(y) <= 30) and np.ptp(y) < 30:
            out.append(("exp", np.exp(y), lambda r: sympy.log(r, evaluate=False)))
    return [t for t in out if np.all(np.isfinite(t[1])) and np.max(np.abs(t[1])) < MAX_TARGET and np.ptp(t[1]) > 0]


def _design(t: np.ndarray, num: list[_Feature], den: list[_Feature], rows) -> np.ndarray:
    """Columns ``[1, phi..., -t psi...]`` on ``rows``: ``(n_rows, 1 + n_num + n_den)``."""
    ts = t[rows]
    return np.column_stack([np.ones(len(ts))] + [f.values[rows] for f in num] + [-ts * f.values[rows] for f in den])


_INVERSE_NP = {"id": lambda r: r, "inv": lambda r: 1 / r, "sq": np.sqrt, "invsq": lambda r: 1 / np.sqrt(r),
               "log": np.exp, "sin": np.arcsin, "exp": np.log}


def _expression(num: list[_Feature], den: list[_Feature], cols: np.ndarray, coef: np.ndarray,
                inverse: Callable[[sympy.Expr], sympy.Expr]) -> sympy.Expr:
    """``T^{-1}(P / Q)`` for a column subset and its coefficients."""
    n_num = len(num)
    P, Q = sympy.Integer(0), sympy.Integer(1)
    for c, j in zip(coef, cols):
        if j == 0:
            P += sympy.Float(c)
        elif j <= n_num:
            P += sympy.Float(c) * num[j - 1].expr
        else:
            Q += sympy.Float(c) * den[j - 1 - n_num].expr
    return inverse(P if Q == 1 else sympy.Mul(P, _pow(Q, -1), evaluate=False))


def _error(expr: sympy.Expr, symbols: Sequence[sympy.Symbol], x: np.ndarray, y: np.ndarray) -> float:
    """:func:`~kansym.symbolic.verify.nrmse` of ``expr`` on ``x, y``; ``inf`` if it cannot be evaluated."""
    try:
        with np.errstate(all="ignore"):
            pred = lambdify_formula(expr, symbols)(x)
    except (TypeError, ValueError, NameError, ZeroDivisionError, OverflowError):
        return math.inf
    return nrmse(y, pred)


def _signed(symbols: Sequence[sympy.Symbol], x: np.ndarray) -> dict[sympy.Symbol, sympy.Symbol]:
    """Symbols carrying the sign of their column (so ``sqrt(x**2)`` is ``x`` for x > 0)."""
    out = {}
    for i, s in enumerate(symbols):
        if np.all(x[:, i] > 0):
            out[s] = sympy.Symbol(s.name, positive=True)
        elif np.all(x[:, i] < 0):
            out[s] = sympy.Symbol(s.name, negative=True)
        else:
            out[s] = sympy.Symbol(s.name, real=True)
    return out


def direct_search(x: np.ndarray, y: np.ndarray, symbols: Sequence[sympy.Symbol], *,
                  complexity_weight: float = 0.05, max_terms: int = 3, keep: int = 4,
                  refine_top: int = 4, noise: float | None = None,
                  deadline: Deadline | None = None) -> list[DirectCandidate]:
    """Search small formulas ``y = f(x)`` for one or two inputs.

    Parameters
    ----------
    x : ndarray (N, d), d in {1, 2}
        Inputs (any units; the formula is in these units).
    y : ndarray (N,)
    symbols : sequence of sympy.Symbol
        One per column of ``x``; the formulas are written in them.
    complexity_weight : float
        ``w`` of :func:`selection_score`, which also orders the raw candidates before
        refinement.
    max_terms : int
        Most numerator plus denominator terms (besides the constant).
    keep : int
        Subsets kept per target transform and number of terms.
    refine_top : int
        Most raw candidates refined (:func:`kansym.symbolic.refine.refine`); refinement
        stops early once no further raw candidate can beat the best refined one.
    noise : float, optional
        A noise floor estimated apart from the search (normalised RMS error, e.g. a smooth
        fit's on held-out rows). The candidates' constants are snapped against the smaller of
        it and the best error any raw candidate reached: when the dictionary cannot express
        the law, every candidate misses it and its own best error says nothing about the
        noise (:func:`kansym.symbolic.refine.refine`).
    deadline : kansym.deadline.Deadline, optional
        The run's time limit, looked at before each target transform (a family of
        candidates) but the first, and before each refinement but the first: once it has
        expired the search goes on with what it has (the cut is recorded).

    Returns
    -------
    list of DirectCandidate
        Refined candidates, errors on ``x, y``; empty when ``d > 2``.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.ndim != 2 or x.shape[1] not in (1, 2) or x.shape[0] < 10 or not np.all(np.isfinite(y)) or np.ptp(y) == 0:
        return []
    # the search and the refit work with plain symbols (sympy's sign reasoning on float
    # polynomials under roots is slow); the final simplification knows each column's sign
    signed = _signed(symbols, x)
    back = {v: k for k, v in signed.items()}
    syms = [sympy.Symbol(s.name) for s in symbols]
    to_signed = {p: signed[s] for p, s in zip(syms, symbols)}
    num, den = _dictionary(x, syms)
    index = sub.subset_index(len(num), len(den), max_terms)
    rows = np.unique(np.linspace(0, len(y) - 1, min(SEARCH_ROWS, len(y))).astype(int))
    prelim = []  # (numeric score, transform, cols, coef)
    tried: set = set()
    families = _transforms(y)
    for k, (name, t, inverse) in enumerate(families):
        if k and time_is_up(deadline):
            deadline.cut(f"direct search: {k} of {len(families)} target transforms searched")
            break
        A = _design(t, num, den, rows)
        for cols in sub.ranked(t, A, rows, index, keep):
            coef = sub.coefficients(t[rows], A, cols)
            if coef is None:
                continue
            cols, coef = sub.drop_negligible(cols, coef, A, t[rows])
            if (name, tuple(cols)) in tried:
                continue
            tried.add((name, tuple(cols)))
            with np.errstate(all="ignore"):
                pred = _INVERSE_NP[name](_rational(num, den, cols, coef, rows))
                if name in ("sq", "invsq") and np.all(y < 0):
                    pred = -pred
            err = nrmse(y[rows], pred)
            if math.isfinite(err):
                approx = 3 * (len(cols) - 1) + (0 if name == "id" else 2)
                prelim.append((selection_score(err, approx, complexity_weight), name, inverse, cols, coef, err))
    prelim.sort(key=lambda r: r[0])
    # the noise floor of every candidate's constants: the best fit any candidate reached (a
    # candidate that misses part of the law is held to it, not to its own misfit), or the
    # floor from outside when that is lower
    noise = min([r[5] for r in prelim] + ([noise] if noise is not None and math.isfinite(noise) else []),
                default=None)
    raw = []
    for _, name, inverse, cols, coef, err in prelim[: 4 * refine_top]:
        # err: the numeric error of exactly this expression on the search rows (computed
        # above from the same coefficients; no need to lambdify each candidate again)
        expr = _expression(num, den, cols, coef, inverse)
        if math.isfinite(err):
            raw.append((selection_score(err, expression_complexity(expr), complexity_weight),
                        expression_complexity(expr), str(expr), expr))
    raw.sort(key=lambda r: r[:3])
    step = max(1, len(y) // REFINE_ROWS)
    xr, yr = x[::step], y[::step]
    out: list[DirectCandidate] = []
    seen = set()
    for _, comp, key, expr in raw:
        if len(out) >= refine_top:
            break
        if out and time_is_up(deadline):
            deadline.cut(f"direct search: {len(out)} candidates refined")
            break
        # refinement turns each float into an exact number (1 node instead of 2) and may
        # drop one term more: raw candidates that cannot beat the best refined one are left
        floor_score = selection_score(0.0, comp - len(expr.atoms(sympy.Float)) - 1, complexity_weight)
        if out and floor_score >= min(selection_score(c.error, c.complexity, complexity_weight) for c in out):
            break
        try:
            fine = refine(expr, syms, xr, yr, noise=noise)
            fine = simplify_formula(fine.xreplace(to_signed))
        except Exception as exc:  # a refit that fails leaves this raw candidate out  # noqa: BLE001
            log.debug("direct search: refining %s failed (%s)", key, exc)
            continue
        err = _error(fine, [to_signed[s] for s in syms], x, y)
        if not math.isfinite(err) or str(fine) in seen:
            continue
        seen.add(str(fine))
        out.append(DirectCandidate(fine.xreplace(back), err, expression_complexity(fine)))
    return out


def _rational(num: list[_Feature], den: list[_Feature], cols: np.ndarray, coef: np.ndarray,
              rows: np.ndarray) -> np.ndarray:
    """``P / Q`` of a column subset on ``rows``."""
    P, Q = np.zeros(len(rows)), np.ones(len(rows))
    for c, j in zip(coef, cols):
        if j == 0:
            P += c
        elif j <= len(num):
            P += c * num[j - 1].values[rows]
        else:
            Q += c * den[j - 1 - len(num)].values[rows]
    return P / Q
