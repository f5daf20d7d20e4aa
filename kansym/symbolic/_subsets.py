"""Numeric engine of :mod:`kansym.symbolic.direct`: least squares on every small subset of columns.

Private module. Given a design matrix ``A (n_rows, n_cols)`` (column 0 the constant) and
a target ``t``, the SSE of the least-squares fit on every column subset of up to four
columns comes from the normal equations of the unit-norm columns in one vectorised
Cholesky pass (:func:`batched_sse`); the best subsets per size are kept
(:func:`ranked`) and solved again on the rows (:func:`coefficients`). The dictionary,
the target transforms and the formulas built from the coefficients are in
:mod:`kansym.symbolic.direct`; the algorithm is described there and in
docs/algorithms.md §7c.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def combinations(items: range, k: int) -> np.ndarray:
    """All ``k``-subsets of ``items`` in lexicographic order: ``(C(n, k), k)``."""
    n = math.comb(len(items), k)
    flat = np.fromiter(itertools.chain.from_iterable(itertools.combinations(items, k)), dtype=np.int64, count=n * k)
    return flat.reshape(n, k)


def subset_index(n_num: int, n_den: int, max_terms: int) -> dict[int, np.ndarray]:
    """Column subsets of ``[1, phi_1..phi_n_num, psi_1..psi_n_den]`` by number of terms:
    the constant, 1..max_terms further columns, at most 2 of them ``psi``."""
    out: dict[int, list] = {}
    for k_den in range(0, 3):
        for k_num in range(0 if k_den else 1, max_terms - k_den + 1):
            nums = combinations(range(1, 1 + n_num), k_num)
            dens = combinations(range(1 + n_num, 1 + n_num + n_den), k_den)
            if not len(nums) or not len(dens):
                continue
            both = np.concatenate([np.repeat(nums, len(dens), axis=0), np.tile(dens, (len(nums), 1))], axis=1)
            both = np.concatenate([np.zeros((len(both), 1), np.int64), both], axis=1)
            out.setdefault(k_num + k_den, []).append(both)
    return {k: np.concatenate(v) for k, v in out.items()}


SSE_BLOCK = 4096  # subsets per block of batched_sse: its temporaries (32 kB each) stay in cache


def batched_sse(G: np.ndarray, b: np.ndarray, tt: float, cols: np.ndarray) -> np.ndarray:
    """SSE of least squares on column subsets ``cols (n, k)`` from the Gram matrix ``G``,
    ``b = A^T t`` and ``tt = t^T t``.

    ``sse = tt - b_S^T G_S^{-1} b_S = tt - |z|^2`` with ``L z = b_S``, ``L`` the Cholesky
    factor of ``G_S + 1e-13 I``: the factorisation and the forward substitution run
    column by column over all subsets at once (``k`` is at most 4 here), without the
    per-matrix LAPACK calls of a batched solve (5-8x faster on 75,000 subsets of 4
    columns). The ridge keeps collinear subsets positive definite (their SSE is that of
    the subset without the repeated column); one whose pivot still comes out <= 0 in
    floating point gets ``inf`` (its fit is reached by a subset without that column).
    The subsets go through in blocks of ``SSE_BLOCK``: the same arithmetic per subset,
    but temporaries that stay in cache and below malloc's mmap threshold (over all
    75,000 at once, every temporary was fresh pages: 20,000 page faults per search and
    about 1.8x the time).
    """
    if len(cols) > SSE_BLOCK:
        return np.concatenate([batched_sse(G, b, tt, cols[i : i + SSE_BLOCK]) for i in range(0, len(cols), SSE_BLOCK)])
    k = cols.shape[1]
    n_cols = G.shape[0]
    Gf = G.ravel()
    c = [np.ascontiguousarray(cols[:, j]) for j in range(k)]
    L = [[None] * k for _ in range(k)]
    z = []
    ok = np.ones(len(cols), dtype=bool)
    with np.errstate(all="ignore"):
        for j in range(k):
            cj = c[j]
            d = np.take(Gf, cj * (n_cols + 1)) + 1e-13
            for m in range(j):
                d = d - L[j][m] ** 2
            ok &= d > 0
            ljj = np.sqrt(np.where(d > 0, d, 1.0))
            L[j][j] = ljj
            for i in range(j + 1, k):
                v = np.take(Gf, c[i] * n_cols + cj)
                for m in range(j):
                    v = v - L[i][m] * L[j][m]
                L[i][j] = v / ljj
            r = np.take(b, cj)
            for m in range(j):
                r = r - L[j][m] * z[m]
            z.append(r / ljj)
        sse = tt - sum(zj * zj for zj in z)
    return np.where(ok & np.isfinite(sse), sse, np.inf)


def ranked(t: np.ndarray, A: np.ndarray, rows: np.ndarray, index: dict[int, np.ndarray], keep: int) -> list[np.ndarray]:
    """The ``keep`` column subsets of lowest SSE per number of terms for target ``t``."""
    ts = t[rows]
    norms = np.linalg.norm(A, axis=0)
    A = A / np.where(norms > 0, norms, 1.0)
    G, b, tt = A.T @ A, A.T @ ts, float(ts @ ts)
    out = []
    for cols in index.values():
        sse = batched_sse(G, b, tt, cols)
        best = np.argpartition(sse, keep - 1)[:keep] if len(sse) > keep else np.arange(len(sse))
        out.extend(cols[i] for i in best[np.argsort(sse[best], kind="stable")] if np.isfinite(sse[i]))
    return out


def coefficients(t: np.ndarray, A: np.ndarray, cols: np.ndarray) -> np.ndarray | None:
    """Least-squares coefficients of the columns ``cols`` of ``A`` for ``t`` (None if degenerate)."""
    sub = A[:, cols]
    norms = np.linalg.norm(sub, axis=0)
    if not np.all(norms > 0):
        return None
    try:
        coef, *_ = np.linalg.lstsq(sub / norms, t, rcond=None)
    except np.linalg.LinAlgError:  # SVD did not converge: leave this subset out
        return None
    coef = coef / norms
    return coef if np.all(np.isfinite(coef)) else None


def drop_negligible(cols: np.ndarray, coef: np.ndarray, A: np.ndarray, t: np.ndarray,
                    rel: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """Drop the terms whose share of ``t`` (numerator) or of ``Q`` is below ``rel`` (the
    same formula found with a spurious extra term), keeping the constant column."""
    scale = np.sqrt(np.mean(A[:, cols] ** 2, axis=0)) * np.abs(coef)
    scale = scale / max(float(np.sqrt(np.mean(t ** 2))), 1e-300)
    keep = (cols == 0) | (scale >= rel)
    return cols[keep], coef[keep]
