"""Exact symbolic recovery of a known law by a formula (SRBench's rule).

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
import signal
import threading
from typing import Any, Callable, Sequence, TypeVar

import numpy as np
import sympy

__all__ = ["SRBENCH_PI", "is_exact_recovery", "round_floats"]

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


def _matched(true_expr: sympy.Expr | str, candidate_expr: sympy.Expr | str, symbols: Sequence[Any] | None,
             pi_as_float: bool) -> tuple[sympy.Expr, sympy.Expr, list[sympy.Symbol]]:
    """The truth and the rounded candidate on one set of symbols (matched by name, the truth's
    assumptions winning), and the variables among them."""
    true = sympy.sympify(true_expr)
    cand = sympy.sympify(candidate_expr)
    by_name = {s.name: s for s in true.free_symbols}
    cand = cand.xreplace({s: by_name.get(s.name, s) for s in cand.free_symbols})
    if pi_as_float:
        true = true.subs(sympy.pi, sympy.Float(SRBENCH_PI))
    cand = round_floats(cand)
    if symbols is None:
        return true, cand, sorted(true.free_symbols | cand.free_symbols, key=lambda s: s.name)
    names = [s.name if isinstance(s, sympy.Symbol) else str(s) for s in symbols]
    return true, cand, [by_name.get(n, sympy.Symbol(n)) for n in names]


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
    true, cand, syms = _matched(true_expr, candidate_expr, symbols, pi_as_float)
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
