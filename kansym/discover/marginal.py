"""The marginal pre-screen of a wide table: a 1-D test per column before the input screening.

:func:`kansym.discover.screen.screen_inputs` fits a smooth model of all columns and a short
KAN, then shuffles each column; neither holds hundreds of columns (the smooth model of
10,000 rows holds 199, and a 2,000-column table crashed it: issue 37). Sure independence
screening (Fan & Lv 2008) needs one least-squares fit per column instead, made in blocks, so
that a table of thousands of columns is cut to the few that move ``y`` before anything
else runs. The rule is a family of F tests with a stated error rate (Bonferroni), not a
count of columns to keep.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from scipy.stats import f as f_dist, rankdata

__all__ = ["marginal_screen", "MARGINAL_ROUNDS"]

MARGINAL_ROUNDS = 3  # rounds of the marginal pre-screen (after the first: on what the kept columns leave)
MARGINAL_BLOCK = 256  # columns whose 1-D fits are made at once (memory: rows x 256 x degree floats, twice)


def marginal_screen(x: np.ndarray, y: np.ndarray, residual: Callable[[np.ndarray, np.ndarray], np.ndarray],
                    forced: Sequence[int] = (), cap: int | None = None, *, alpha: float = 0.01, degree: int = 5,
                    min_kept: int = 3) -> tuple[tuple[int, ...], np.ndarray, float]:
    """The columns of a wide table that a 1-D test per column finds used, their p-values and the level.

    Sure independence screening (Fan & Lv 2008, JRSS-B 70(5), 849-911) with a smooth 1-D fit per column
    (nonparametric independence screening: Fan, Feng & Song 2011, JASA 106(494), 544-557) on ranks (Li,
    Peng, Zhang & Zhu 2012, Ann. Statist. 40(3), 1846-1877), so that neither units nor outliers matter:
    the rank ``r`` of ``y`` (scaled to [-1, 1]) and its spread ``|r|`` are each regressed on Legendre
    P_1..P_degree of the column's rank and F-tested against the constant (degrees of freedom: the basis'
    numerical rank); the spread test sees a column that moves only the size of ``y``'s deviations
    (``x1 x2``, symmetric inputs). Later rounds (iterated SIS, Fan & Lv 2008, §4.1) test the other columns
    on what a smooth model of the kept ones leaves, for weak effects that strong ones hide. Kept: p below
    ``alpha / (2 d MARGINAL_ROUNDS)`` (Bonferroni over every test), most significant first, at most ``cap``
    columns with the ``forced`` ones. A marginal test misses a column acting only in an interaction that
    moves neither the mean nor the spread of ``y`` given it: hence a generous ``cap`` and ``keep_inputs``.

    Parameters
    ----------
    x : ndarray (n, d), any units
    y : ndarray (n,) or (n, 1)
    residual : callable ``(u (n, k), v (n,)) -> (n,)``
        ``v`` less a smooth model of it on ``u`` (the later rounds' response).
    forced : sequence of int
        Columns kept untested (``keep_inputs``).
    cap : int, optional
        Most columns kept (default ``d``); at least ``min(min_kept, d, cap)``, the most significant.
    alpha : float
        Family-wise error rate: the chance that a table of noise columns keeps one.
    degree : int
        Legendre degree of the 1-D fits.
    min_kept : int
        Columns kept even when fewer stand out (the permutation tests then decide).

    Returns
    -------
    kept : tuple of int, sorted
    p : ndarray (d,)
        Each column's smallest p-value (1 for a forced column: not tested).
    threshold : float
    """
    n, d = x.shape
    cap, level = d if cap is None else cap, alpha / (2 * d * MARGINAL_ROUNDS)
    p, kept = np.ones(d), list(dict.fromkeys(int(i) for i in forced))
    r = r0 = _rank_scores(np.asarray(y, dtype=np.float64).reshape(n, 1))[:, 0]
    for round_no in range(MARGINAL_ROUNDS):
        if round_no:  # what the kept columns leave: the other columns' effects the strong ones hid
            u = _rank_scores(x[:, kept])
            r = _rank_scores(residual(u, r0)[:, None])[:, 0]
        rest = np.setdiff1d(np.arange(d), kept)
        p_rest, f_rest = _one_d_tests(x, rest, r, degree)
        p[rest] = np.minimum(p[rest], p_rest)
        new = [int(rest[k]) for k in np.lexsort((-f_rest, p_rest)) if p_rest[k] < level][:max(cap - len(kept), 0)]
        kept += new
        if not new or len(kept) >= cap:
            break
    short = max(min(min_kept, d, cap) - len(kept), 0)  # too few stand out: the permutation tests decide
    kept += [int(i) for i in np.argsort(p, kind="stable") if i not in kept][:short]
    return tuple(sorted(kept)), p, level


def _rank_scores(a: np.ndarray) -> np.ndarray:  # (n, k): ranks of each column, ties averaged, scaled to (-1, 1)
    return 2.0 * (rankdata(a, axis=0) - 0.5) / a.shape[0] - 1.0


def _one_d_tests(x: np.ndarray, cols: np.ndarray, r: np.ndarray, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """Per column of ``x[:, cols]``: the smaller p of the F tests of ``r`` and ``|r|`` on its ranks, and that F."""
    resp = np.stack([r - r.mean(), np.abs(r) - np.abs(r).mean()], axis=1)  # (n, 2): location, spread
    p, stat = np.ones(len(cols)), np.zeros(len(cols))
    for lo in range(0, len(cols), MARGINAL_BLOCK):
        blk = cols[lo:lo + MARGINAL_BLOCK]
        basis = np.polynomial.legendre.legvander(_rank_scores(x[:, blk]), degree)[..., 1:]  # (n, b, degree)
        basis = (basis - basis.mean(axis=0)).transpose(1, 0, 2)  # (b, n, degree), centred: the constant apart
        q, s, _ = np.linalg.svd(basis, full_matrices=False)  # q (b, n, degree)
        full = s > 1e-8 * np.maximum(s[:, :1], 1e-300)  # (b, degree): the basis' numerical rank
        explained = (np.einsum("bnk,nj->bkj", q, resp) ** 2 * full[:, :, None]).sum(axis=1)  # (b, 2)
        k, dof = full.sum(axis=1)[:, None], x.shape[0] - 1 - full.sum(axis=1)[:, None]  # (b, 1) each
        with np.errstate(divide="ignore", invalid="ignore"):  # k = 0 (a constant column): F = 0, p = 1
            f = np.nan_to_num((explained / k) / (np.maximum((resp ** 2).sum(axis=0) - explained, 0.0) / dof))
        pv = f_dist.sf(f, np.maximum(k, 1), dof)  # (b, 2)
        p[lo:lo + len(blk)], stat[lo:lo + len(blk)] = pv.min(axis=1), f[np.arange(len(blk)), pv.argmin(axis=1)]
    return p, stat
