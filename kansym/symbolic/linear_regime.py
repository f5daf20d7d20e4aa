"""Functions a formula uses only in their linear regime are written as lines (§8, refinement).

A refit can reach a nearly linear dependence through a nonlinear function whose argument
barely moves over the data: ``-115079 log(1 - 1.7e-5 p)`` is ``1.96 p`` to one part in 1e5
for ``p`` in [1, 3], ``asin(0.061 s + 2e-5)`` is ``0.061 s`` to about 1e-3. The function then
holds nothing the data support, and its constants (``115079``, ``1.7e-5``) are invented: the
law's own constant is their product, which no snap of either alone can find. Occam's rule of
the snaps applies to the function itself: a node ``f(u)`` (a unary function, or a power of
a sum with a non-integer exponent) is replaced by its least-squares line ``a + b u`` over the rows when

(a) the line follows ``f(u)`` to :data:`LINEAR_RESIDUAL` of ``f(u)``'s spread (a cheap
    screen), and
(b) the whole formula's error stays within the noise: ``N (e_v**2 - e**2) <= z**2 eta**2``,
    ``e`` the formula's error before any line, ``eta`` the noise of
    :func:`kansym.symbolic.snap.noise_level` (the likelihood-ratio test of the snaps).

The two new floats are then refitted and snapped like any other (``a`` to 0 above). Nodes are
tried outermost first (a function of a function becomes one line); every accepted line is
tested against the error before the first, so lines cannot add up past the noise.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import sympy

from kansym.deadline import Deadline, time_is_up
from kansym.symbolic.compose import lambdify_formula
from kansym.symbolic.refit import LossSpace, Problem
from kansym.symbolic.snap import Z, noise_level

__all__ = ["linearize", "LINEAR_RESIDUAL"]

LINEAR_RESIDUAL = 0.02  # RMS distance of f(u) from its line over f(u)'s std: below it, a line is tried
MAX_ROWS = 2000  # rows of the screen (a)


def linearize(expr: sympy.Expr, symbols: Sequence[Any], X: Any, y: Any, *, loss_space: LossSpace = "linear",
              noise: float | None = None, z: float = Z, deadline: Deadline | None = None) -> sympy.Expr:
    """``expr`` with every function used only in its linear regime replaced by a line.

    Parameters
    ----------
    expr, symbols, X, y, loss_space
        As :func:`kansym.symbolic.refit.refit_constants` (``X`` of shape ``(N, d)``); the
        floats should be fitted.
    noise : float, optional
        The noise floor as a normalised RMS error in the loss space; None: the formula's own.
    z : float
        Standard errors of the "within the noise" test (b) of the module docstring.
    deadline : kansym.deadline.Deadline, optional
        Looked at before each node: once expired, the formula is returned as it stands.

    Returns
    -------
    sympy.Expr
        ``expr`` itself when no node passes both tests.
    """
    expr = sympy.sympify(expr)
    symbols = list(symbols)
    nodes = _nonlinear_nodes(expr)
    if not nodes:
        return expr
    prob = Problem(expr, symbols, X, y, loss_space)
    start = prob.error(prob.values)
    eta = noise_level(start, noise)
    if not np.isfinite(eta):
        return expr
    n = prob.n_rows
    rows = np.linspace(0, n - 1, min(n, MAX_ROWS)).astype(int)
    x = np.asarray(prob.X, dtype=np.float64)[rows]
    for node in nodes:
        if time_is_up(deadline):
            break
        if not expr.has(node):  # inside a node already made a line
            continue
        line = _line(node, symbols, x)
        if line is None:
            continue
        trial = expr.xreplace({node: line})
        try:
            candidate = Problem(trial, symbols, X, y, loss_space)
            err = candidate.error(candidate.values)
        except (ValueError, ArithmeticError):
            continue
        if np.isfinite(err) and n * (err ** 2 - start ** 2) <= z ** 2 * eta ** 2:
            expr = trial
    return expr


def _nonlinear_nodes(expr: sympy.Expr) -> list[sympy.Expr]:
    """Unary functions and non-integer powers of a sum, of a non-constant argument, outermost first.

    A power of one input (``V**1.00069``) is left to the exponent's snap: its line would add an
    offset where the snap to ``V`` removes a constant."""
    found = [e for e in sympy.preorder_traversal(expr)
             if ((isinstance(e, sympy.Function) and len(e.args) == 1)
                 or (e.is_Pow and e.exp.is_number and not e.exp.is_integer and e.base.is_Add))
             and e.args[0].free_symbols]
    seen: list[sympy.Expr] = []
    for e in found:  # preorder: an enclosing node comes before what it holds
        if e not in seen:
            seen.append(e)
    return seen


def _line(node: sympy.Expr, symbols: list, x: np.ndarray) -> sympy.Expr | None:
    """``a + b u`` for ``node = f(u)``, the least-squares line over the rows ``x``, when it
    passes the screen (a); None otherwise."""
    u = node.args[0]
    with np.errstate(all="ignore"):  # a root or asin off its domain is nan: no line
        uv = np.broadcast_to(np.asarray(lambdify_formula(u, symbols)(x), dtype=np.float64), x[:, 0].shape)
        fv = np.broadcast_to(np.asarray(lambdify_formula(node, symbols)(x), dtype=np.float64), x[:, 0].shape)
    if not (np.all(np.isfinite(uv)) and np.all(np.isfinite(fv))):
        return None
    spread = float(np.std(fv))
    if np.ptp(uv) <= 0 or spread <= 0:
        return None
    design = np.column_stack([np.ones_like(uv), uv])
    (a, b), *_ = np.linalg.lstsq(design, fv, rcond=None)
    if float(np.sqrt(np.mean((fv - design @ np.array([a, b])) ** 2))) > LINEAR_RESIDUAL * spread:
        return None
    return sympy.Float(float(a)) + sympy.Float(float(b)) * u
