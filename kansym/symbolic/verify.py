"""Check a formula: fidelity on data, and exact symbolic recovery of a known law.

Exact recovery follows SRBench (La Cava et al. 2021, "Contemporary Symbolic
Regression Methods and their Relative Performance", NeurIPS Datasets and
Benchmarks, §4 "symbolic solution"): the candidate's floats are rounded to 3
significant digits (``|c| < 1e-4`` becomes 0); the candidate is a solution if
``simplify(true - cand)`` is a constant, or ``simplify(cand / true)`` is a
non-zero constant. ``sympy.simplify`` can run for minutes, so a numeric test on
random points answers the clear cases first and the symbolic test is cut off
after ``timeout`` seconds (see :func:`is_exact_recovery`). That cut-off is the one
clock left in the symbolic layer, on purpose: the check is a benchmark's verdict
(bench/*.py, tests, examples) and never decides which formula kansym finds or
prints; the pipeline's budgets count work (:mod:`kansym.symbolic.occam`,
:func:`kansym.symbolic.refine.simplify_formula`).
"""

from __future__ import annotations

import logging
import math
import signal
import threading
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence, TypeVar

import numpy as np
import sympy

from kansym.errors import ConfigError, DataError

__all__ = ["round_floats", "is_exact_recovery", "r2_from_sse", "r2_score", "nrmse", "Fidelity", "fidelity"]

logger = logging.getLogger("kansym")
T = TypeVar("T")

SRBENCH_PI = 3.1415926535


class _Timeout(Exception):
    pass


def _timed(fn: Callable[[], T], seconds: float, *, run_untimed: bool = False) -> T | None:
    """Run ``fn()``; ``None`` if it takes longer than ``seconds``.

    The cut-off uses SIGALRM, available only in the main thread of a POSIX
    process with no other interval timer running; elsewhere ``fn`` runs
    without a limit if ``run_untimed``, else is skipped (``None``).
    """
    usable = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
              and signal.getitimer(signal.ITIMER_REAL)[0] == 0.0)
    if not usable:
        return fn() if run_untimed else None

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    except _Timeout:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)


def round_floats(expr: sympy.Expr, digits: int = 3, zero_tol: float = 1e-4) -> sympy.Expr:
    """Round every Float of ``expr`` to ``digits`` significant digits; ``|c| < zero_tol`` -> 0."""
    expr = sympy.sympify(expr)
    sub = {}
    for f in expr.atoms(sympy.Float):
        v = float(f)
        sub[f] = sympy.Integer(0) if abs(v) < zero_tol else sympy.Float(float(f"{v:.{digits - 1}e}"))
    return expr.xreplace(sub)


def _numeric_verdict(true: sympy.Expr, cand: sympy.Expr, syms: list[sympy.Symbol], seed: int,
                     domain: tuple[Sequence[float], Sequence[float]] | None = None) -> tuple[bool, bool] | None:
    """``(clearly_constant, clearly_not)`` from 64 random points in ``domain`` (lows, highs per
    symbol; default [0.5, 2]^d), or None."""
    rng = np.random.default_rng(seed)
    lo, hi = (0.5, 2.0) if domain is None else (np.asarray(domain[0], float), np.asarray(domain[1], float))
    pts = rng.uniform(lo, hi, size=(64, len(syms)))
    with np.errstate(all="ignore"):
        try:
            t = np.broadcast_to(np.asarray(sympy.lambdify(syms, true, "numpy")(*pts.T), float), (64,))
            c = np.broadcast_to(np.asarray(sympy.lambdify(syms, cand, "numpy")(*pts.T), float), (64,))
        except (TypeError, ValueError, NameError, ZeroDivisionError):
            return None
        ok = np.isfinite(t) & np.isfinite(c) & (t != 0)
        if ok.sum() < 8:
            return None
        t, c = t[ok], c[ok]
        diff, ratio = c - t, c / t
    scale = float(np.median(np.abs(t))) + 1e-300
    rscale = float(np.median(np.abs(ratio))) + 1e-300
    d_spread, r_spread = float(np.ptp(diff)) / scale, float(np.ptp(ratio)) / rscale
    ratio_ok = float(np.median(np.abs(ratio))) > 1e-12
    constant = d_spread <= 1e-9 or (r_spread <= 1e-9 and ratio_ok)
    clearly_not = d_spread > 1e-6 and (r_spread > 1e-6 or not ratio_ok)
    return constant, clearly_not


def is_exact_recovery(true_expr: sympy.Expr | str, candidate_expr: sympy.Expr | str, *,
                      symbols: Sequence[Any] | None = None, timeout: float = 5.0,
                      pi_as_float: bool = False, seed: int = 0,
                      domain: tuple[Sequence[float], Sequence[float]] | None = None) -> bool:
    """SRBench exact symbolic recovery of ``true_expr`` by ``candidate_expr``.

    Parameters
    ----------
    true_expr, candidate_expr : sympy.Expr or str
        Symbols are matched by name (assumptions of ``true_expr`` win).
    symbols : sequence of sympy.Symbol or str, optional
        The variables; default: every free symbol of either expression. Other
        free symbols count as constants.
    timeout : float
        Seconds allowed for the symbolic test (SIGALRM, main thread only). A clock,
        so under heavy load a verdict can fall back to the numeric one; this function
        only judges a formula found already, it is not part of the search.
    pi_as_float : bool
        Replace ``pi`` in ``true_expr`` by ``3.1415926535`` as SRBench's
        string-based check did; by default ``pi`` stays exact, so a candidate
        whose ``pi`` was snapped symbolically is recognised.
    seed : int
        Seed of the random points of the numeric pre-check.
    domain : (sequence of float, sequence of float), optional
        Lows and highs of ``symbols`` (the ranges the law holds on): the numeric test draws
        its points there, and where sympy cannot decide a root's sign alone
        (``sqrt(c + v) sqrt(1/(c - v))`` against ``(1 + v/c)/sqrt(1 - v^2/c^2)``: ``c > v`` on
        the ranges) the symbolic test is run again with roots and powers combined as for
        positive bases (``powsimp(force=True)``), its verdict taken only when the numeric
        one on the domain agrees.

    Returns
    -------
    bool
        The candidate, with floats rounded to 3 significant digits and
        ``|c| < 1e-4`` set to 0, differs from the truth by a constant or is a
        non-zero constant multiple of it. A constant candidate only recovers a
        constant truth.

    Notes
    -----
    A numeric test on 64 random points in ``[0.5, 2]^d`` returns ``False`` at
    once when neither ``cand - true`` nor ``cand / true`` is constant there to
    ``1e-6`` relative. Otherwise the symbolic test decides; if it does not
    finish within ``timeout`` (or cannot be timed), the numeric verdict
    (constant to ``1e-9`` relative) is returned.
    """
    true = sympy.sympify(true_expr)
    cand = sympy.sympify(candidate_expr)
    by_name = {s.name: s for s in true.free_symbols}
    cand = cand.xreplace({s: by_name.get(s.name, s) for s in cand.free_symbols})
    if pi_as_float:
        true = true.subs(sympy.pi, sympy.Float(SRBENCH_PI))
    cand = round_floats(cand)
    if symbols is None:
        syms = sorted(true.free_symbols | cand.free_symbols, key=lambda s: s.name)
    else:
        names = [s.name if isinstance(s, sympy.Symbol) else str(s) for s in symbols]
        syms = [by_name.get(n, sympy.Symbol(n)) for n in names]
    varset = set(syms)
    if not (cand.free_symbols & varset):
        return not (true.free_symbols & varset)
    if domain is not None and (len(domain[0]) != len(syms) or len(domain[1]) != len(syms)):
        raise ValueError(f"domain needs one low and one high per symbol ({len(syms)}).")
    verdict = _numeric_verdict(true, cand, syms, seed, domain) if syms else None
    if verdict is not None and verdict[1]:
        return False

    def symbolic(rewrite=lambda e: e) -> bool:
        diff = sympy.simplify(rewrite(true - cand))
        if diff.is_finite is not False and not (diff.free_symbols & varset):
            return True
        ratio = sympy.simplify(rewrite(cand / true))
        return ratio.is_finite is not False and not (ratio.free_symbols & varset) and ratio != 0

    small = sympy.count_ops(true) + sympy.count_ops(cand) <= 40
    result = _timed(symbolic, timeout, run_untimed=small)
    if result is None:
        logger.debug("symbolic recovery check timed out; using the numeric verdict")
        return bool(verdict is not None and verdict[0])
    if not result and domain is not None and verdict is not None and verdict[0]:
        forced = _timed(lambda: symbolic(lambda e: sympy.powsimp(sympy.powdenest(e, force=True), force=True)),
                        timeout, run_untimed=small)
        result = bool(forced)
    return bool(result)


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
