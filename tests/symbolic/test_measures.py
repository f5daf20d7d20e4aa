"""The one R² and normalised-error definition (kansym.symbolic.verify) and its corner cases.

Every formula score in kansym (reports, the Pareto front, the Occam step, the direct
search, the per-edge fits, the plots) goes through ``r2_from_sse``, ``r2_score`` or
``nrmse``; the last tests check that the callers agree with them.
"""

import math

import numpy as np
import pytest
import sympy

from kansym.errors import ConfigError, DataError
from kansym.symbolic.verify import nrmse, r2_from_sse, r2_score

RNG = np.random.default_rng(0)
Y = RNG.normal(size=50)


# --- r2_from_sse -------------------------------------------------------------------------

def test_r2_from_sse_is_one_minus_the_ratio():
    assert r2_from_sse(1.0, 4.0) == 0.75
    assert r2_from_sse(0.0, 4.0) == 1.0
    assert r2_from_sse(8.0, 4.0) == -1.0  # worse than the mean: negative, unbounded below
    assert r2_from_sse(math.inf, 4.0) == -math.inf


def test_r2_from_sse_floor_replaces_a_tiny_sst():
    assert r2_from_sse(1e-20, 1e-20, sst_floor=1e-18) == pytest.approx(0.99)  # noise-level SST
    assert r2_from_sse(1.0, 4.0, sst_floor=1e-18) == 0.75  # a real SST is untouched


def test_r2_from_sse_constant_target_convention():
    assert r2_from_sse(0.0, 0.0) == 1.0
    assert r2_from_sse(1e-30, 0.0) == 0.0


# --- r2_score ----------------------------------------------------------------------------

def test_r2_score_matches_the_textbook_formula():
    pred = Y + 0.3 * RNG.normal(size=Y.size)
    want = 1 - np.sum((Y - pred) ** 2) / np.sum((Y - Y.mean()) ** 2)
    assert r2_score(Y, pred) == want
    assert r2_score(Y[:, None], pred) == want  # any shapes of N elements


def test_r2_score_constant_target_is_exact_equality():
    c = np.full(5, 2.5)
    assert r2_score(c, c) == 1.0
    assert r2_score(c, c + 1e-15) == 0.0  # no tolerance: scikit-learn's convention


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_r2_score_nonfinite_prediction_raises_or_scores_minus_inf(bad):
    pred = Y.copy()
    pred[3] = bad
    with pytest.raises(DataError, match="NaN or inf"):
        r2_score(Y, pred)
    assert r2_score(Y, pred, nonfinite="-inf") == -math.inf
    assert r2_score(pred, Y, nonfinite="-inf") == -math.inf  # a non-finite target too


def test_r2_score_rejects_mismatched_or_empty_input_and_unknown_modes():
    with pytest.raises(DataError, match="equal size"):
        r2_score(Y, Y[:-1], nonfinite="-inf")  # a size mismatch is a mistake, never a score
    with pytest.raises(DataError):
        r2_score([], [])
    with pytest.raises(ConfigError, match="nonfinite"):
        r2_score(Y, Y, nonfinite="nan")


# --- nrmse -------------------------------------------------------------------------------

def test_nrmse_is_rms_over_std_and_sqrt_of_one_minus_r2():
    pred = Y + 0.3 * RNG.normal(size=Y.size)
    assert nrmse(Y, pred) == float(np.sqrt(np.mean((pred - Y) ** 2)) / np.std(Y))
    assert nrmse(Y, pred) == pytest.approx(math.sqrt(1 - r2_score(Y, pred)), rel=1e-12)
    assert nrmse(3 * Y + 7, 3 * pred + 7) == pytest.approx(nrmse(Y, pred), rel=1e-12)  # unit-free


def test_nrmse_resolves_errors_that_sqrt_of_one_minus_r2_loses():
    pred = Y + 1e-12 * np.std(Y) * np.sign(RNG.normal(size=Y.size))
    assert r2_score(Y, pred) == 1.0  # 1 - R² = 1e-24 cancels
    assert nrmse(Y, pred) == pytest.approx(1e-12, rel=1e-3)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nrmse_nonfinite_or_overflowing_is_inf(bad):
    pred = Y.copy()
    pred[0] = bad
    assert nrmse(Y, pred) == math.inf
    assert nrmse(pred, Y) == math.inf
    assert nrmse(Y, Y * 1e200) == math.inf  # finite, but its squared error overflows


def test_nrmse_constant_target_is_zero_or_inf():
    c = np.full(5, 2.5)
    assert nrmse(c, c) == 0.0
    assert nrmse(c, c + 1e-15) == math.inf
    with pytest.raises(DataError, match="equal size"):
        nrmse(Y, Y[:-1])
