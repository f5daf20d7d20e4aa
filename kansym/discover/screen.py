"""Input screening before the KAN: which columns of a wide table the law uses, and the discovery on them (issues 19, 37).

A KAN of ``d`` inputs has ``d * hidden`` first-layer edges, and every later stage (pruning,
per-edge fits, the Occam step, refinement) pays for each of them; noise columns also make
the sparsifying training miss the law (10 inputs, 2 used: a ``[10, 5, 1]`` KAN reached a
held-out R² of 0.89 on ``x3*x7 + x1``). :func:`screen_inputs` decides cheaply, before
the KAN, which columns matter, and :func:`kansym.discover.run.discover` runs
the discovery on those only and brings the others back when the result is clearly worse
than a model of all columns.

The test is permutation importance on held-out rows (Breiman 2001, "Random forests",
Machine Learning 45, §10; Fisher, Rudin & Dominici 2019, JMLR 20(177), "model reliance"):
two models of all columns are fitted on some of the fitting rows,

- a smooth one: least squares on Legendre polynomials of each scaled input (degree 5) and
  their pairwise products (AI Feynman's fitted-model separability test, as in
  :mod:`kansym.discover.structure_tests`), and
- a short sparsified KAN (KAN paper, Liu et al. 2024, arXiv:2404.19756, §2.5: L1 training
  for a few LBFGS steps), which also sees interactions of more than two inputs,

and each column is shuffled on other rows. For a column the model does not use, or uses
only to fit noise of its training rows, the change ``d_s = e'_s^2 - e_s^2`` of the squared
error has mean zero on new rows; for a column the law uses it is positive. A column is
kept when, for either model, the paired z statistic ``mean(d) / (std(d) / sqrt(n))``
exceeds the one-sided Bonferroni critical value for ``alpha = 0.01`` over all the tests
(``2 d`` of them: 3.29 for 10 columns, 3.48 for 20), so a pure-noise table keeps a noise
column with probability about 1 %. A small but real effect (``y = x1 + 0.05 x2``) shows
as a z of tens on thousands of rows. Nothing depends on a column's name or on a law.

A table wider than the smooth model holds (or than :data:`MARGINAL_INPUTS` columns) first
goes through :func:`marginal_screen`, a 1-D test per column; the
permutation tests then see its survivors only.

The marginal pre-screen of a wide table: a 1-D test per column before the input screening.

:func:`screen_inputs` fits a smooth model of all columns and a short
KAN, then shuffles each column; neither holds hundreds of columns (the smooth model of
10,000 rows holds 199, and a 2,000-column table crashed it: issue 37). Sure independence
screening (Fan & Lv 2008) needs one least-squares fit per column instead, made in blocks, so
that a table of thousands of columns is cut to the few that move ``y`` before anything
else runs. The rule is a family of F tests with a stated error rate (Bonferroni), not a
count of columns to keep.

The discovery on the screened columns, and the bring-back (issue 19).

:func:`kansym.discover.run.discover` screens the inputs (:func:`screening_plan`),
runs the discovery on the columns kept and runs it again on every column when its result
is clearly worse (:func:`bring_back_reason`) than the screening's model of all columns. An interrupted run's record
keeps the screening's verdict (:mod:`kansym.discover.resume`): its resumed run continues
on the columns the checkpoint was trained on without screening again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields, replace
from typing import Callable, Sequence, Any

import numpy as np
from scipy.stats import f as f_dist, rankdata, norm

from kansym.discover.choice import kept_run, paired_gain
from kansym.discover.config import DiscoverConfig
from kansym.discover.result import split_holdout
from kansym.discover.resume import reusable
from kansym.discover.structure_tests import choose_space, legendre_features, table_space
from kansym.errors import ConfigError
from kansym.symbolic.direct import ERROR_FLOOR
from kansym.symbolic.verify import r2_score

__all__ = ['marginal_screen', 'MARGINAL_ROUNDS', 'Screening', 'screen_inputs', 'smooth_capacity', 'with_kept',
    'check_keep_inputs', 'screening_to_record', 'screening_from_record', 'MIN_INPUTS', 'MIN_ROWS', 'ALPHA',
    'screening_plan', 'screening_entry', 'bring_back_reason', 'kept_or_all']

log = logging.getLogger("kansym")


ALPHA = 0.01  # family-wise error rate of the screening's tests: the marginal F tests, the permutation tests (2 d)
MARGINAL_ROUNDS = 3  # rounds of the marginal pre-screen (after the first: on what the kept columns leave)
MARGINAL_BLOCK = 256  # columns whose 1-D fits are made at once (memory: rows x 256 x degree floats, twice)


def marginal_screen(x: np.ndarray, y: np.ndarray, residual: Callable[[np.ndarray, np.ndarray], np.ndarray],
                    forced: Sequence[int] = (), cap: int | None = None, *, alpha: float = ALPHA, degree: int = 5,
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


MIN_INPUTS = 3  # with 1-2 inputs the KAN is small and the direct search covers them: nothing to gain
MIN_ROWS = 400  # fewer fitting rows test too few rows to see a small effect: keep every column
FIT_ROWS = 3000  # rows the smooth model is fitted on, at most
KAN_ROWS = 1000  # rows the screening KAN trains on, at most (of the same rows)
EVAL_ROWS = 3000  # other fitting rows on which each column is shuffled, at most
KAN_STEPS = 10  # LBFGS steps of the screening KAN
DEGREE = 5  # Legendre degree of each input in the smooth model
TRUST_R2 = 0.9  # a screening whose best model explains less of y (held out) drops nothing
BRING_BACK_RATIO = 2.0  # "clearly worse": at least twice the screening model's held-out squared error
BRING_BACK_FLOOR = 1e-6  # ... and more than this share of var(y) (below it both fit the law to rounding)
MARGINAL_INPUTS = 40  # more columns go through the pre-screen (all tested: 2.4 s at 40, 28 s at 199 columns)


@dataclass(frozen=True)
class Screening:
    """The verdict of :func:`screen_inputs`.

    Attributes
    ----------
    names : tuple of str
        All input columns, in order.
    kept, removed : tuple of int
        Indices of the columns the run uses and of those it drops.
    z_smooth, z_kan : tuple of float
        Paired z statistic of each column's permutation test with the smooth model and the
        screening KAN (NaN when that model was not fitted).
    z_threshold : float
        The Bonferroni critical value a column must exceed with either model.
    forced : tuple of int
        Columns kept because the caller named them (``keep_inputs``).
    rows_fit, rows_kan, rows_eval : int
        Rows the smooth model and the KAN were fitted on, and rows the columns were shuffled on.
    space : str
        Units of the tests (``linear`` or ``log``).
    r2 : float
        Held-out R² (shuffling rows, test units) of the better screening model. Below
        :data:`TRUST_R2` nothing is dropped: the unexplained part may involve any column.
    reference : ndarray (n_test,) or None
        Prediction of the better screening model (all columns, CSV units) on the run's
        held-out rows, for the bring-back check; None without held-out rows.
    reference_kept : ndarray (n_test,) or None
        The same of the smooth model refitted on the kept columns only (None when none was dropped).
    brought_back : bool
        Whether the run on the kept columns was clearly worse and all columns were used.
    marginal_kept, marginal_p, marginal_threshold : tuple of int, tuple of float, float
        :func:`marginal_screen`'s verdict (the z of the columns it
        dropped: ``-inf``), p-values and level; empty and NaN where it did not run.
    """

    names: tuple[str, ...]
    kept: tuple[int, ...]
    removed: tuple[int, ...]
    z_smooth: tuple[float, ...]
    z_kan: tuple[float, ...]
    z_threshold: float
    forced: tuple[int, ...] = ()
    rows_fit: int = 0
    rows_kan: int = 0
    rows_eval: int = 0
    space: str = "linear"
    r2: float = float("nan")
    reference: Any = None
    reference_kept: Any = None
    brought_back: bool = False
    marginal_kept: tuple[int, ...] = ()
    marginal_p: tuple[float, ...] = ()
    marginal_threshold: float = float("nan")

    def reason(self, i: int) -> str:
        """Why column ``i`` was dropped (or kept), in words with its scores."""
        if self.marginal_kept and i not in self.marginal_kept:
            p, level, n = self.marginal_p[i], self.marginal_threshold, 2 * MARGINAL_ROUNDS * len(self.names)
            return (f"marginal pre-screen (1-D F tests of y's rank and spread on the column's rank): least p {p:.3g} "
                    + (f"< {level:.3g}, but less significant than the {len(self.marginal_kept)} columns kept"
                       if p < level else f">= {level:.3g} (Bonferroni, alpha {ALPHA:g} over {n} tests)"))
        return (f"held-out permutation test: z {_z(self.z_smooth[i])} (smooth model), {_z(self.z_kan[i])} (KAN) "
                f"{'<=' if i in self.removed else '>'} {self.z_threshold:.2f} (Bonferroni, alpha {ALPHA:g} over "
                f"{2 * len(self.marginal_kept or self.names)} tests)")

    def removed_record(self) -> list[dict]:
        """``removed_inputs`` of ``formula.json``: name, scores, threshold and reason of each dropped column
        (empty after a bring-back: the run used every column)."""
        if self.brought_back:
            return []
        return [{"name": self.names[i], "z_smooth": _finite(self.z_smooth[i]), "z_kan": _finite(self.z_kan[i]),
                 "z_threshold": self.z_threshold, "reason": self.reason(i)} for i in self.removed]


def screening_to_record(plan: Screening) -> dict:
    """``plan`` as plain data (lists of exact floats), for a resumable checkpoint's record."""
    out = {f.name: getattr(plan, f.name) for f in fields(plan)}
    for key in ("reference", "reference_kept"):
        out[key] = None if out[key] is None else [float(v) for v in np.asarray(out[key], dtype=np.float64)]
    return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def screening_from_record(data: dict) -> Screening:
    """Inverse of :func:`screening_to_record` (a record written before the marginal pre-screen reads too).

    Raises
    ------
    KeyError, TypeError, ValueError
        A record that is not one.
    """
    data = {"marginal_kept": (), "marginal_p": (), "marginal_threshold": float("nan"), **data}  # older records
    for key in ("reference", "reference_kept"):
        data[key] = None if data[key] is None else np.asarray(data[key], dtype=np.float64)
    for key in ("names", "kept", "removed", "z_smooth", "z_kan", "forced", "marginal_kept", "marginal_p"):
        data[key] = tuple(data[key])
    return Screening(**{f.name: data[f.name] for f in fields(Screening)})


def _z(v: float) -> str:
    return "n/a" if not np.isfinite(v) else f"{v:.2f}"


def _finite(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None  # JSON has no NaN


def check_keep_inputs(keep: Sequence[str], names: Sequence[str]) -> None:
    """Refuse a ``keep_inputs`` name that is not an input column.

    Raises
    ------
    ConfigError
    """
    unknown = [k for k in keep if k not in names]
    if unknown:
        raise ConfigError(f"keep_inputs names {', '.join(map(repr, unknown))}, which is not an input column "
                          f"(inputs: {', '.join(names)})")


def screen_inputs(x: np.ndarray, y: np.ndarray, input_names: Sequence[str],
                  config: DiscoverConfig, stages: Any = None) -> Screening | None:
    """Test which inputs matter (module docstring); None when screening is off or cannot pay.

    Screening is off with ``config.screen`` False, with fewer than :data:`MIN_INPUTS` inputs,
    more than one target, or fewer than :data:`MIN_ROWS` fitting rows. Only fitting rows
    (those :func:`~kansym.discover.result.split_holdout` does not hold out) are used, so the
    held-out verification stays independent. More than :data:`MARGINAL_INPUTS` columns (or
    more than the smooth model holds) first go through
    :func:`marginal_screen`; then ``reference`` is None (no
    bring-back: it would rerun on every column, the very table that was too wide).

    Parameters
    ----------
    x : ndarray (N, d_in), CSV units
    y : ndarray (N, 1), CSV units
    input_names : sequence of str
    config : DiscoverConfig
        ``screen``, ``keep_inputs``, ``space``, ``hidden``, ``train``, ``holdout``, ``seed``,
        ``device`` and ``dtype`` are used.
    stages : kansym.discover.progress.Stages, optional (told when the screening starts)

    Raises
    ------
    ConfigError
        A ``keep_inputs`` name that is not an input.
    """
    names = tuple(input_names)
    check_keep_inputs(config.keep_inputs, names)
    d = x.shape[1]
    fit_idx, test_idx = split_holdout(x.shape[0], config.holdout, config.seed)
    if not config.screen or d < MIN_INPUTS or y.shape[1] != 1 or len(fit_idx) < MIN_ROWS:
        return None
    perm = np.random.default_rng([config.seed, 19]).permutation(fit_idx)
    n_fit = min(FIT_ROWS, len(perm) // 2)
    tr, ev = np.sort(perm[:n_fit]), np.sort(perm[n_fit:n_fit + EVAL_ROWS])
    forced = tuple(i for i, n in enumerate(names) if n in config.keep_inputs)
    wide = d > min(MARGINAL_INPUTS, smooth_capacity(n_fit))
    if stages is not None:
        stages.start("input screening", f"which of the {d} columns the law uses ("
                     f"{'marginal pre-screen, then ' if wide else ''}held-out permutation tests)")
    cols, marginal = tuple(range(d)), {}
    if wide:  # a 1-D test per column first (issue 37: the smooth model held no 500 columns)
        cols, p, level = marginal_screen(x[tr], y[tr], _smooth_residual, forced, cap=smooth_capacity(n_fit),
                                         alpha=ALPHA, degree=DEGREE, min_kept=MIN_INPUTS)
        marginal = dict(marginal_kept=cols, marginal_p=tuple(map(float, p)), marginal_threshold=level)
        passed = [i for i in cols if p[i] < level]
        log.info("input screening: the marginal pre-screen of %d columns kept %d (%s): %s, the permutation tests see "
                 "only those", d, len(cols), ", ".join(names[i] for i in cols),
                 f"p < {level:.3g}" if len(passed) == len(cols) else
                 f"{len(passed)} with p < {level:.3g}, the others kept anyway (--keep-inputs, or the most "
                 "significant of the rest)")
    xs = x if len(cols) == d else x[:, list(cols)]  # (N, len(cols))
    space = choose_space(xs[tr], y[tr], table_space(config.space, x, y))
    g = np.log if space == "log" else (lambda a: a)
    u, v = g(xs), g(y[:, 0])
    rng = np.random.default_rng([config.seed, 23])
    shuffles = [rng.permutation(len(ev)) for _ in cols]
    z_crit = float(norm.ppf(1.0 - ALPHA / (2 * len(cols))))
    smooth = _SmoothModel.fit(u[tr], v[tr])
    z_smooth = _permutation_z(smooth.predict, u[ev], v[ev], shuffles)
    kan = _kan_model(xs[tr[:KAN_ROWS]], y[tr[:KAN_ROWS]], [names[i] for i in cols], config, space)
    z_kan = _permutation_z(lambda a: kan(a), u[ev], v[ev], shuffles)
    r2 = {m: r2_score(v[ev], f(u[ev]), nonfinite="-inf") for m, f in (("smooth", smooth.predict), ("kan", kan))}
    best = max(r2, key=r2.get)
    if r2[best] < TRUST_R2:  # what neither model explains may involve any column (x1*x2*x3 looks like noise to both)
        kept = list(cols)
    else:
        kept = [c for j, c in enumerate(cols) if z_smooth[j] > z_crit or z_kan[j] > z_crit or c in forced]
        kept = kept or [cols[int(np.argmax(np.fmax(z_smooth, z_kan)))]]
    reference = None
    if test_idx is not None and len(cols) == d:
        reference = _back((smooth.predict if best == "smooth" else kan)(u[test_idx]), space)
    zs, zk = np.full((2, d), -np.inf)  # untested columns: -inf
    zs[list(cols)], zk[list(cols)] = z_smooth, z_kan
    plan = Screening(names=names, kept=(), removed=(), z_smooth=tuple(map(float, zs)),
                     z_kan=tuple(map(float, zk)), z_threshold=z_crit, forced=forced, rows_fit=len(tr),
                     rows_kan=min(KAN_ROWS, len(tr)), rows_eval=len(ev), space=space, r2=float(r2[best]),
                     reference=reference, **marginal)
    return with_kept(plan, kept, x, y, config)


def smooth_capacity(n: int) -> int:
    """Most columns the smooth model of ``n`` rows holds (``1 + DEGREE d <= n / 3`` coefficients, no pairs)."""
    return max(0, int((n / 3 - 1) // DEGREE))


def _smooth_residual(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``v (n,)`` less the smooth model of it on ``u (n, k)`` (the marginal pre-screen's later rounds)."""
    return v - _SmoothModel.fit(u, v).predict(u)


def with_kept(plan: Screening, kept: Sequence[int], x: np.ndarray, y: np.ndarray,
              config: DiscoverConfig) -> Screening:
    """``plan`` keeping the columns ``kept`` (its ``removed`` and ``reference_kept`` follow).

    Used by :func:`screen_inputs`, and to replay a verdict (a resumed run's columns, a test).
    """
    kept = tuple(sorted(int(i) for i in kept))
    d = len(plan.names)
    fit_idx, test_idx = split_holdout(x.shape[0], config.holdout, config.seed)
    reference_kept = None
    if plan.reference is not None and test_idx is not None and len(kept) < d:
        perm = np.random.default_rng([config.seed, 19]).permutation(fit_idx)
        tr = np.sort(perm[:min(FIT_ROWS, len(perm) // 2)])
        g = np.log if plan.space == "log" else (lambda a: a)
        u, v = g(x[:, list(kept)]), g(y[:, 0])
        reference_kept = _back(_SmoothModel.fit(u[tr], v[tr]).predict(u[test_idx]), plan.space)
    return replace(plan, kept=kept, removed=tuple(i for i in range(d) if i not in kept),
                   reference_kept=reference_kept)


def _back(pred: np.ndarray, space: str) -> np.ndarray:
    return np.exp(np.clip(pred, -700, 700)) if space == "log" else pred


def _permutation_z(predict: Callable[[np.ndarray], np.ndarray], u: np.ndarray, v: np.ndarray,
                   shuffles: Sequence[np.ndarray]) -> np.ndarray:
    """Paired z of ``(v - f(u with column i shuffled))^2 - (v - f(u))^2`` for each column ``i``."""
    base = (v - predict(u)) ** 2
    z = np.empty(u.shape[1])
    for i, p in enumerate(shuffles):
        w = u.copy()
        w[:, i] = u[p, i]
        diff = (v - predict(w)) ** 2 - base
        sd = float(np.std(diff))
        z[i] = 0.0 if sd == 0 else float(np.mean(diff)) / (sd / np.sqrt(len(diff)))
    return np.nan_to_num(z, nan=0.0, posinf=np.inf, neginf=-np.inf)


@dataclass(frozen=True)
class _SmoothModel:
    """Least squares on Legendre polynomials of each input scaled to [-1, 1] and their pairwise
    products (degree ``pairs`` per factor), as many pairs as ``rows / 3`` coefficients allow."""

    lo: np.ndarray
    hi: np.ndarray
    pairs: int
    coef: np.ndarray

    @classmethod
    def fit(cls, u: np.ndarray, v: np.ndarray) -> "_SmoothModel":
        n, d = u.shape
        lo, hi = u.min(axis=0), u.max(axis=0)
        pairs = next((p for p in (2, 1, 0) if 1 + DEGREE * d + p * p * d * (d - 1) // 2 <= n / 3), 0)
        model = cls(lo, hi, pairs, np.zeros(0))
        coef, *_ = np.linalg.lstsq(model.features(u), v, rcond=None)
        return replace(model, coef=coef)

    def features(self, u: np.ndarray) -> np.ndarray:
        return legendre_features(u, DEGREE, self.pairs, self.lo, self.hi)

    def predict(self, u: np.ndarray) -> np.ndarray:  # in blocks: 200,000 held-out rows x 861 features is 1.4 GB
        return np.concatenate([self.features(u[i:i + 20_000]) @ self.coef for i in range(0, len(u), 20_000)])


def _kan_model(x: np.ndarray, y: np.ndarray, names: Sequence[str], config: DiscoverConfig,
               space: str) -> Callable[[np.ndarray], np.ndarray]:
    """A short sparsified KAN of all columns; returns ``f(u) -> v`` in the test's units."""
    from kansym.discover.stages import train_stage

    train = config.train.replace(steps=min(KAN_STEPS, config.train.steps), seed=config.seed, device=config.device)
    bundle = train_stage(x, y, names, ["y"], hidden=config.hidden or (5,), grid_size=config.grid_size,
                         spline_order=config.spline_order, space=space, train=train, seed=config.seed,
                         dtype=config.dtype, progress=False, label="input screening")
    if space == "log":
        return lambda u: np.log(np.maximum(bundle.predict(np.exp(u))[:, 0], np.finfo(float).tiny))
    return lambda u: bundle.predict(u)[:, 0]


SCREEN_FIELDS = ("screen", "keep_inputs", "holdout")  # options (besides the training ones) that shape the verdict
_NONE = object()  # no verdict carried: screen


def screening_plan(x: np.ndarray, y: np.ndarray, input_names: Sequence[str], config: DiscoverConfig,
                   resume: Any = None, stages: Any = None) -> tuple[Screening | None, tuple[int, ...]]:
    """The screening's verdict and the columns the discovery searches first.

    Parameters
    ----------
    x, y, input_names, config
        The table (CSV units), its column names and the run's DiscoverConfig.
    resume : ResumePoint, optional
        An interrupted run: it continues on the columns its checkpoint was trained on, with
        the screening's verdict of its record when it holds one and the screening's options
        are unchanged (else the screening runs again: it is deterministic).
    stages : kansym.discover.progress.Stages, optional
        Told when the screening starts.

    Returns
    -------
    (Screening or None, tuple of int)
        The verdict (None: screening off) and the columns: the kept ones, every one when
        nothing was dropped, or the resumed checkpoint's.
    """
    names = tuple(input_names)
    everything = tuple(range(len(names)))
    plan = _carried_plan(resume, _settings(config))
    if plan is _NONE:
        plan = screen_inputs(x, y, names, config, stages)
    if resume is not None:
        cols = tuple(names.index(n) for n in resume.bundle.input_names)
        if plan is not None and cols != plan.kept:
            plan = replace(with_kept(plan, cols, x, y, config), brought_back=cols == everything)
        return plan, cols
    if plan is None:
        return None, everything
    if not plan.removed:
        log.info("input screening kept every column (%s)", _kept_note(plan))
        return plan, everything
    log.info("input screening dropped %s: %s; kept %s (to keep a column whatever the test says: "
             "--keep-inputs, or keep_inputs in the API)",
             _names(names, plan.removed), _dropped_note(plan), _kept_note(plan))
    return plan, plan.kept


def screening_entry(plan: Screening | None, config: DiscoverConfig) -> dict:
    """The resume record's ``screening`` entry: the verdict and the options that shaped it."""
    return {"plan": None if plan is None else screening_to_record(plan), "config": _settings(config)}


def _settings(config: DiscoverConfig) -> dict:
    values = config.to_dict()
    return {k: values[k] for k in SCREEN_FIELDS}


def kept_or_all(found: Any, full: Any, plan: Screening) -> Any:
    """After a bring-back: the run on every column ``full`` unless the run on the kept columns
    ``found`` has the more accurate formula on the held-out rows
    (:func:`~kansym.discover.choice.kept_run`, ``full`` the incumbent, ties to float64
    exactness); ``screening`` set."""
    if kept_run([found], incumbent=full, floor=ERROR_FLOOR) is found:
        log.info("kept the run on the screened columns (held-out R² %.6g) over the one on every column (%.6g)",
                 found.formulas[0].r2_test, full.formulas[0].r2_test)
        return replace(found, screening=plan)
    return replace(full, screening=replace(plan, brought_back=True))


def _dropped_note(plan: Screening) -> str:
    tested = [i for i in plan.removed if not plan.marginal_kept or i in plan.marginal_kept]
    parts = []
    if len(tested) < len(plan.removed):
        parts.append(f"{len(plan.removed) - len(tested)} of {len(plan.names)} columns fail the marginal pre-screen "
                     f"(p >= {plan.marginal_threshold:.3g}, or less significant than the {len(plan.marginal_kept)} "
                     "kept)")
    if tested:
        worst = max(tested, key=lambda i: np.nanmax([plan.z_smooth[i], plan.z_kan[i], -np.inf]))
        n_tests = 2 * len(plan.marginal_kept or plan.names)
        parts.append(f"every held-out permutation z is at most {plan.z_threshold:.2f} (Bonferroni, alpha {ALPHA:g} "
                     f"over {n_tests} tests; the largest, {plan.names[worst]}'s, is "
                     f"{_z(np.nanmax([plan.z_smooth[worst], plan.z_kan[worst]]))})")
    return "; ".join(parts)


def _names(names: Sequence[str], which: Sequence[int], shown: int = 8) -> str:
    """``which``'s names, at most ``shown`` of them and a count of the others."""
    listed = ", ".join(names[i] for i in which[:shown])
    more = len(which) - shown
    return listed if more <= 0 else f"{listed} and {more} more (each with its reason in formula.json's removed_inputs)"


def _kept_note(plan: Screening) -> str:
    parts = [f"{plan.names[i]} z {_z(plan.z_smooth[i])}/{_z(plan.z_kan[i])}" for i in plan.kept]
    return (f"{', '.join(parts)} (smooth model/KAN, on {plan.rows_eval} shuffled rows; models of all columns "
            f"fitted on {plan.rows_fit}/{plan.rows_kan} rows, held-out R² {plan.r2:.4g})")


def bring_back_reason(found: Any, plan: Screening, x: np.ndarray, y: np.ndarray,
                      config: DiscoverConfig) -> str | None:
    """Why the dropped columns should come back, or None.

    They come back when, on the run's held-out rows, the better of the run's formula and
    model is clearly worse than the screening model of all columns, and so is the smooth
    model refitted on the kept columns alone (else the shortfall is the KAN's, not the
    screening's, and a run on every column would not mend it). Clearly worse: at least
    :data:`BRING_BACK_RATIO` times the reference's mean squared error, more than
    :data:`BRING_BACK_FLOOR` of ``var(y)``, and the paired one-sided z test of the squared
    errors (:func:`kansym.discover.choice.paired_gain`) rejecting equality at :data:`ALPHA`.
    """
    test_idx = split_holdout(x.shape[0], config.holdout, config.seed)[1]
    if plan.reference is None or test_idx is None:
        return None
    xt, yt = x[test_idx][:, list(plan.kept)], y[test_idx, 0]
    preds = [found.pruned.predict(xt)[:, 0]] if found.pruned is not None else []
    try:
        preds.append(np.asarray(found.formulas[0](xt), dtype=np.float64).reshape(-1))
    except Exception:  # a formula with numeric edges cannot be evaluated alone: the model stands for it
        pass
    residuals = [yt - p for p in preds if p.shape == yt.shape and np.all(np.isfinite(p))]
    if not residuals:
        return None
    r_run, r_ref = min(residuals, key=lambda r: float(np.mean(r ** 2))), yt - plan.reference
    z = _worse_z(r_run, r_ref, float(np.var(yt)))
    if z is None:
        return None
    note = (f"on {len(yt)} held-out rows the run on {len(plan.kept)} columns leaves a mean squared error of "
            f"{np.mean(r_run ** 2):.4g}, the screening model of all columns {np.mean(r_ref ** 2):.4g} (z {z:.1f})")
    if plan.reference_kept is not None:
        r_kept = yt - plan.reference_kept
        if _worse_z(r_kept, r_ref, float(np.var(yt))) is None:
            log.info("not bringing back the dropped columns: %s, but a smooth model of the kept columns alone "
                     "leaves %.4g: what is missing is not in the dropped columns", note, np.mean(r_kept ** 2))
            return None
    return note


def _worse_z(r: np.ndarray, r_ref: np.ndarray, var: float) -> float | None:
    """The z of the paired test (:func:`kansym.discover.choice.paired_gain`, the project's one
    test of two sets of residuals on the same rows) when residuals ``r`` are clearly worse than
    ``r_ref``, else None."""
    e, e_ref = float(np.mean(r ** 2)), float(np.mean(r_ref ** 2))
    z = paired_gain(r_ref, r)
    if e >= BRING_BACK_RATIO * e_ref and e > BRING_BACK_FLOOR * var and z > norm.ppf(1 - ALPHA):
        return z
    return None


def _carried_plan(resume: Any, settings: dict) -> Any:
    """The screening verdict in ``resume``'s record (None: screening was off), or ``_NONE``."""
    entry = reusable(resume, "screening", settings, "input screening")
    if entry is None:
        return _NONE
    try:
        plan = None if entry["plan"] is None else screening_from_record(entry["plan"])
    except (KeyError, TypeError, ValueError):
        log.info("input screening: runs again (the interrupted run's verdict could not be read)")
        return _NONE
    log.info("input screening: the verdict of the interrupted run taken as it is")
    return plan
