"""The one choice between formulas (kansym.discover.choice): its score step with an incumbent,
its significance test, and the choices that call it."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import sympy

from kansym.discover.choice import choose, kept_run, paired_gain, significantly_better, verified_or
from kansym.discover.dimensional import GROUPS_LEAD, GROUPS_TIE
from kansym.symbolic.direct import DirectCandidate


def _paired(gain: float, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Residuals of a law (noise of RMS 0.0231) and of an approximation of it on the same ``n``
    rows: the same noise plus a smooth misfit that raises its RMS error by ``gain`` (relative)."""
    rng = np.random.default_rng(seed)
    noise = 0.0231 * rng.standard_normal(n)
    misfit = np.sin(np.linspace(0, 20, n))
    misfit *= 0.0231 * math.sqrt((1 + gain) ** 2 - 1) / np.sqrt(np.mean(misfit ** 2))
    return noise, noise + misfit


@pytest.mark.parametrize("gain, floats, complexity, n, expected", [
    (0.08, 0, 9, 8000, True),  # 0.0231 against 0.0250 on 8000 rows, one node more, one float less
    (0.08, 0, 9, 100, False),  # ... on 100 rows it may be chance
    (0.08, 2, 9, 8000, False),  # more fitted constants
    (0.08, 0, 11, 8000, False),  # three nodes more
    (0.01, 0, 9, 8000, True),  # 1 % less RMS error: the paired test sees it (a ratio of two sums needed 6 %)
    (0.0, 0, 9, 8000, False),  # the same error
])
def test_significantly_better_needs_a_real_gain_and_no_more_constants(gain, floats, complexity, n, expected):
    law, approx = _paired(gain, n)
    x = sympy.Symbol("x")
    than = DirectCandidate(sympy.Float(1.1) * x ** 3 + 1, 0.0250, 8, residual=approx)
    floated = sum(sympy.Float(1.5 + k) * x ** k for k in range(floats))  # ``floats`` fitted constants
    candidate = DirectCandidate((floated or 1) / sympy.sqrt(1 - x ** 2), 0.0231, complexity, residual=law)
    assert candidate.floats == floats
    z = significantly_better(candidate, than)
    assert (z is not None) is expected, paired_gain(law, approx)
    # whatever the constants and nodes, a doubt about ``than`` (any_size) rests on the errors alone
    assert (significantly_better(candidate, than, any_size=True) is not None) is (expected or (gain > 0.05 and n > 1000))


def test_the_choice_keeps_an_incumbent_within_its_margin_and_says_why():
    """The score's choice with an incumbent (a verified KAN formula): a challenger that is not
    simpler needs a score lower by the margin; a simpler one only a lower score."""
    x = sympy.Symbol("x")
    kan = DirectCandidate(sympy.sin(x) + x, 1e-3, 5)
    close = DirectCandidate(sympy.sin(x) * x ** 2, 10 ** -3.3, 6)  # 0.3 - 0.05 better: within a margin of 0.5
    best, why = choose([close], 0.05, incumbent=kan, margin=0.5)
    assert best is kan and "margin" in why
    assert choose([close], 0.05, incumbent=kan)[0] is close
    simpler = DirectCandidate(sympy.sin(x), 10 ** -3.01, 2)
    best, why = choose([close, simpler], 0.05, incumbent=kan, margin=0.5)
    assert best is simpler and why.startswith("selection score"), why
    assert choose([], 0.05) == (None, "no candidate")


def test_the_kept_run_is_the_more_accurate_and_at_equal_r2_to_6_digits_the_simpler():
    """Between the additive shortcut's formula and the hidden-layer KAN's (run.py): by held-out
    R² alone, R² equal to 6 digits a tie that the smaller expression wins; an undefined R² loses."""
    x, y = sympy.symbols("x y")

    def run(expr, r2):
        return SimpleNamespace(formulas=(SimpleNamespace(expr=expr, r2_test=r2, origin="kan"),))
    short, hidden = run(x + y, 0.99), run(sympy.sin(x) * sympy.exp(y) + x * y, 0.999)
    assert kept_run([short, hidden]) is hidden  # more accurate, whatever its size
    short, hidden = run(x + y, 0.9999996), run(sympy.sin(x) * sympy.exp(y) + x * y, 0.99999999)
    assert kept_run([short, hidden]) is short  # both 1.000000 to 6 digits: the simpler
    assert kept_run([hidden, short]) is short
    nan_run, other = run(x, math.nan), run(x + y, 0.5)
    assert kept_run([nan_run, other]) is other
    assert kept_run([run(x + y, -math.inf), nan_run]) is nan_run  # neither defined: the simpler


def _run(expr, r2, warning=None):
    return SimpleNamespace(formulas=(SimpleNamespace(expr=expr, r2_test=r2, origin="kan", warning=warning),))


@pytest.mark.parametrize("unexplained_ratio, groups_win", [
    (1.2, True),  # the monomial leaves 1.2x the groups' formula's unexplained variance: clearly more
    (1.05, False),  # within the 1.1x lead: the monomial with a constant stays
    (1.0, False),
])
def test_the_groups_formula_beats_the_monomial_only_by_leaving_1_1_times_less_unexplained(unexplained_ratio,
                                                                                           groups_win):
    """UnitsRun.on_groups: the monomial with a fitted constant is the incumbent; the formula of
    the dimensionless groups (more nodes) takes its place only when ``1 - R²`` of the monomial
    exceeds 1.1 times its own (held out)."""
    a, b = sympy.symbols("a b")
    groups = _run(a * b * sympy.exp(-a / b), 1 - 1e-4)
    monomial = _run(sympy.Float(1.3) * a * b, 1 - unexplained_ratio * 1e-4)
    kept = kept_run([groups], incumbent=monomial, margin=GROUPS_LEAD, floor=GROUPS_TIE)
    assert (kept is groups) is groups_win
    # both exact to float64 (1 - R² below 1e-12): a tie, which the incumbent wins
    exact = _run(a * b * sympy.exp(-a / b), 1.0)
    assert kept_run([exact], incumbent=_run(a * b, 1 - 1e-13), margin=GROUPS_LEAD, floor=GROUPS_TIE) is not exact
    # an undefined R² of the groups' formula never displaces the monomial
    assert kept_run([_run(a, math.nan)], incumbent=monomial, margin=GROUPS_LEAD, floor=GROUPS_TIE) is monomial


def test_after_a_bring_back_every_column_wins_unless_the_screened_run_is_strictly_more_accurate():
    """screen.kept_or_all: the run on every column is the incumbent, ties included."""
    a, b, c = sympy.symbols("a b c")
    screened, every = _run(a + b, 0.98), _run(a + b + c, 0.98)
    assert kept_run([screened], incumbent=every, floor=1e-9) is every
    assert kept_run([_run(a + b, 0.99)], incumbent=every, floor=1e-9).formulas[0].r2_test == 0.99


def test_a_verified_formula_is_kept_over_an_unverified_one_whatever_its_r2():
    a = sympy.Symbol("a")
    columns, groups = _run(a, 0.95), _run(a ** 2, 0.999, warning="not verified")
    assert verified_or(columns, groups) is columns
    flagged = _run(a, 0.95, warning="R² below the model's")
    assert verified_or(flagged, groups) is groups
