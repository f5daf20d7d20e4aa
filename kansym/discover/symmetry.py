"""Symmetries of an oracle that remove one input: f depends on two inputs only through one combination.

AI Feynman (Udrescu & Tegmark 2020, Sci. Adv. 6, eaay2631, §2, "translational symmetry
and generalizations") tests whether a law ``f`` depends on inputs ``x_i, x_j`` only
through ``x_i - x_j``, ``x_i + x_j``, ``x_i / x_j`` or ``x_i x_j``; if it does, the two
inputs become one new variable ``w`` and the problem has one input fewer.

The test moves ``x_i`` of a data row ``a`` to its value in another row ``b`` and
compensates in ``x_j`` so that the combination keeps its value (``x_j + (b_i - a_i)`` for
the difference, ``x_j b_i / a_i`` for the ratio, ...). Only moved rows whose new ``x_j``
stays inside the data's range are used: the oracle is trusted only there. The law has the
symmetry when the change of ``f`` under the compensated move, each row's in units of the
oracle's error at both ends (:mod:`kansym.discover.noise`), has an RMS within
``NOISE_FACTOR``, while the same move without compensation changes ``f`` by more than
``EFFECT_FACTOR`` times that: the input must matter for its invariance to mean anything.

The reduced oracle ``g(rest, w)`` realises ``w`` by a pair ``(x_i, x_j)`` inside the
data's box (``x_j`` at the middle of the interval that keeps both inputs in range), so
the recursion's probes stay where the oracle was trained.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import sympy

from kansym.discover.noise import as_error

__all__ = ["KINDS", "Symmetry", "find_symmetry", "reduced_problem"]

log = logging.getLogger("kansym")

KINDS = ("difference", "sum", "ratio", "product")
NOISE_FACTOR = 5.0  # a compensated move within this many oracle errors leaves f unchanged
EFFECT_FACTOR = 2.0  # the uncompensated move must change f by this many times the tolerance
PAIRS = 256  # data-row pairs per test
MIN_ROWS = 32  # moved rows inside the box needed for a test

Oracle = Callable[[np.ndarray], np.ndarray]  # (N, d) -> (N,)


@dataclass(frozen=True)
class Symmetry:
    """``f`` depends on inputs ``i`` and ``j`` only through ``combine(x_i, x_j)``.

    Attributes
    ----------
    i, j : int
        Column indices, ``i != j``.
    kind : {"difference", "sum", "ratio", "product"}
        ``x_i - x_j``, ``x_i + x_j``, ``x_i / x_j`` or ``x_i * x_j``.
    ratio : float
        RMS compensated change over its tolerance (< 1 for a symmetry).
    """

    i: int
    j: int
    kind: str
    ratio: float

    def combine(self, xi, xj):
        """The combination, on arrays or sympy expressions."""
        return {"difference": lambda: xi - xj, "sum": lambda: xi + xj,
                "ratio": lambda: xi / xj, "product": lambda: xi * xj}[self.kind]()


def _positive(col: np.ndarray) -> bool:
    return bool(np.all(col > 0))


def _compensate(kind: str, a_i, a_j, b_i):
    """``x_j`` that keeps the combination of row ``a`` when ``x_i`` moves from ``a_i`` to ``b_i``."""
    with np.errstate(all="ignore"):
        if kind == "difference":
            return a_j + (b_i - a_i)
        if kind == "sum":
            return a_j - (b_i - a_i)
        if kind == "ratio":
            return a_j * b_i / a_i
        return a_j * a_i / b_i


def find_symmetry(f: Oracle, z: np.ndarray, eps: float, *, seed: int = 0) -> Symmetry | None:
    """The clearest two-input symmetry of ``f``, or None.

    Parameters
    ----------
    f : callable, ``(N, d) -> (N,)``
        The oracle.
    z : ndarray (N, d), ``d >= 2``
        Data rows (the box the oracle is trusted in).
    eps : float or kansym.discover.noise.OracleError
        The oracle's RMS error (units of ``f``), or its error model (the tolerance of a move
        is then the RMS of the error at both ends).

    Returns
    -------
    Symmetry or None
        The pair and kind with the smallest compensated change among those that pass;
        ratio and product only for inputs of one strict sign (here: positive).
    """
    n, d = z.shape
    rng = np.random.default_rng([seed, 47])
    a, b = z[rng.integers(0, n, PAIRS)], z[rng.integers(0, n, PAIRS)]
    lo, hi = z.min(axis=0), z.max(axis=0)
    f_a = np.asarray(f(a), dtype=np.float64)
    err = as_error(eps)
    e_a, floor = err.at(f_a), 1e-12 * float(np.std(f_a)) + 1e-300
    best = None
    for i in range(d):
        moved = a.copy()
        moved[:, i] = b[:, i]
        for j in range(d):
            if j == i:
                continue
            for kind in KINDS:
                if kind in ("ratio", "product") and not (_positive(z[:, i]) and _positive(z[:, j])):
                    continue
                if kind in ("sum", "product") and j < i:  # symmetric in i, j: test each pair once
                    continue
                new_j = _compensate(kind, a[:, i], a[:, j], b[:, i])
                keep = np.isfinite(new_j) & (new_j >= lo[j]) & (new_j <= hi[j])
                if keep.sum() < MIN_ROWS:
                    continue
                comp = moved[keep].copy()
                comp[:, j] = new_j[keep]
                with np.errstate(all="ignore"):
                    f_comp = np.asarray(f(comp), dtype=np.float64)
                    # each row's change in units of its noise (the error at both ends), then RMS
                    noise = NOISE_FACTOR * np.maximum(np.sqrt((err.at(f_comp) ** 2 + e_a[keep] ** 2) / 2), floor)
                    change = np.sqrt(np.mean(((f_comp - f_a[keep]) / noise) ** 2))
                    effect = np.sqrt(np.mean(((np.asarray(f(moved[keep])) - f_a[keep]) / noise) ** 2))
                if not (np.isfinite(change) and np.isfinite(effect)) or effect < EFFECT_FACTOR:
                    continue
                ratio = float(change)
                if ratio < 1.0 and (best is None or ratio < best.ratio):
                    best = Symmetry(i, j, kind, ratio)
    return best


def _realise(sym: Symmetry, w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A pair ``(x_i, x_j)`` in the box with ``combine(x_i, x_j) = w``: ``x_j`` mid-interval."""
    li, hi_i, lj, hj = lo[sym.i], hi[sym.i], lo[sym.j], hi[sym.j]
    with np.errstate(all="ignore"):
        if sym.kind == "difference":  # x_i = w + x_j
            low, high = np.maximum(lj, li - w), np.minimum(hj, hi_i - w)
        elif sym.kind == "sum":  # x_i = w - x_j
            low, high = np.maximum(lj, w - hi_i), np.minimum(hj, w - li)
        elif sym.kind == "ratio":  # x_i = w x_j
            low, high = np.maximum(lj, li / w), np.minimum(hj, hi_i / w)
        else:  # x_i = w / x_j
            low, high = np.maximum(lj, w / hi_i), np.minimum(hj, w / li)
        high = np.maximum(high, low)  # an empty interval (w outside the data's): its nearer end
        x_j = np.sqrt(low * high) if sym.kind in ("ratio", "product") else 0.5 * (low + high)
        x_i = {"difference": lambda: w + x_j, "sum": lambda: w - x_j,
               "ratio": lambda: w * x_j, "product": lambda: w / x_j}[sym.kind]()
    return x_i, x_j


def reduced_problem(f: Oracle, z: np.ndarray, symbols: Sequence[sympy.Symbol],
                    sym: Symmetry) -> tuple[Oracle, np.ndarray, list[sympy.Symbol], sympy.Symbol, sympy.Expr]:
    """The problem with ``x_i, x_j`` replaced by ``w = combine(x_i, x_j)`` (the last column).

    Returns
    -------
    (oracle, z, symbols, w, w_expr)
        ``g(rest, w)``, the data rows ``(N, d - 1)``, their symbols, the new symbol ``w``
        and its expression in the original symbols (to substitute back).
    """
    lo, hi = z.min(axis=0), z.max(axis=0)
    rest = [k for k in range(z.shape[1]) if k not in (sym.i, sym.j)]
    w_data = sym.combine(z[:, sym.i], z[:, sym.j])
    taken = {s.name for s in symbols}
    name = f"w_{symbols[sym.i].name}_{symbols[sym.j].name}"  # distinct names: the searches check them
    while name in taken:
        name += "_"
    w = sympy.Dummy(name, positive=True) if np.all(w_data > 0) else sympy.Dummy(name, real=True)
    d = z.shape[1]

    def g(zr: np.ndarray) -> np.ndarray:
        full = np.empty((zr.shape[0], d))
        full[:, rest] = zr[:, :-1]
        full[:, sym.i], full[:, sym.j] = _realise(sym, zr[:, -1], lo, hi)
        return f(full)

    w_expr = sym.combine(symbols[sym.i], symbols[sym.j])
    return g, np.column_stack([z[:, rest], w_data]), [symbols[k] for k in rest] + [w], w, w_expr
