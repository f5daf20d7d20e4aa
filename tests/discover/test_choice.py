"""The one choice between formulas (kansym.discover.choice): its score step with an incumbent,
its significance test, and the choices that call it."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import sympy

from kansym.discover.choice import choose, kept_run, paired_gain, significantly_better
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
