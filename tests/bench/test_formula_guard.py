"""bench/formula_guard.py: each kind of printed-formula junk is found, and clean laws pass."""

import sys
from pathlib import Path

import numpy as np
import pytest
import sympy
from sympy.utilities.lambdify import implemented_function

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))
import formula_guard as fg  # noqa: E402

x, y, T, h, omega, kb = sympy.symbols("x y T h omega kb", positive=True)


@pytest.mark.parametrize("expr", [
    x**2 + y,
    sympy.exp(-x**2 / 2) / sympy.sqrt(2 * sympy.pi),        # pi in the base of a power, not its exponent
    h * omega**3 / (sympy.exp(h * omega / (2 * sympy.pi * kb * T)) - 1),  # pi in exp's argument (Planck)
    x**sympy.Rational(3, 2) * y**sympy.Rational(-7, 12),  # denominators up to 12
    123456789 * x + sympy.Rational(1, 987654321),          # 9 digits
    281377.930578654 * x**sympy.Rational(3, 2),            # a long float is no integer
])
def test_clean_formulas_have_no_flags(expr):
    assert fg.guardrail_flags(expr) == ()


def test_opaque_functions_are_flagged_plain_or_implemented():
    assert fg.guardrail_flags(sympy.Function("phi_1_0_0")(x) + y) == ("opaque_function",)
    edge = implemented_function(sympy.Function("phi_0_1_0"), lambda v: v)  # kansym's numeric edge
    assert fg.guardrail_flags(2 * edge(x + 1)) == ("opaque_function",)
    assert fg.guardrail_flags(sympy.sin(x)) == ()


def test_rationals_with_large_denominators_in_exponents_are_flagged():
    assert fg.guardrail_flags(x**sympy.Rational(37, 25)) == ("exponent_rational",)
    assert fg.guardrail_flags(2**(x / 13)) == ("exponent_rational",)
    assert fg.guardrail_flags(y * x**(sympy.Rational(1, 2) + y / 17)) == ("exponent_rational",)
    assert fg.guardrail_flags(sympy.Rational(1, 13) * x**2) == ()  # outside an exponent


def test_pi_in_an_exponent_is_flagged():
    assert fg.guardrail_flags(x**sympy.pi) == ("exponent_pi",)
    assert fg.guardrail_flags(y**(x / sympy.pi)) == ("exponent_pi",)
    assert fg.guardrail_flags(sympy.pi * x**2) == ()


def test_integers_of_more_than_nine_digits_are_flagged():
    assert fg.guardrail_flags(1234567890 * x) == ("long_integer",)
    assert fg.guardrail_flags(x / 3000000007) == ("long_integer",)
    assert fg.guardrail_flags(-sympy.Rational(10**12, 7) + x) == ("long_integer",)


def test_several_kinds_are_listed_in_table_order():
    expr = sympy.Function("phi_2_0_0")(x) ** sympy.pi + 12345678901 * x**sympy.Rational(1, 29)
    assert fg.guardrail_flags(expr) == ("opaque_function", "exponent_rational", "exponent_pi", "long_integer")


def test_a_run_is_flagged_for_each_kind_in_any_expression_it_printed():
    printed = [x + 1, 2 ** (x / 13), sympy.Function("phi_0_0_0")(y) + x ** sympy.pi]
    assert fg.printed_guardrail_flags(printed) == ("opaque_function", "exponent_rational", "exponent_pi")
    assert fg.printed_guardrail_flags(printed[:1]) == () == fg.printed_guardrail_flags([])


def test_counts_and_the_summary_line():
    rows = [{"method": "kansym", "guardrails": []}, {"method": "kansym", "guardrails": ["exponent_pi"]},
            {"method": "kansym", "error": "time limit"}, {"method": "rils", "guardrails": ["opaque_function"]}]
    assert fg.count_guardrails(rows[:3]) == (2, {"exponent_pi": 1})
    line = fg.guardrail_line(rows)
    assert line.startswith("**guardrails (kansym, 2 printed formulas; target 0 each): opaque function 0,")
    assert "π in an exponent 1" in line


def test_every_law_of_the_dev_equations_is_clean():
    csv = ROOT.parent / "shared" / "data" / "feynman" / "equations.csv"
    if not csv.exists():
        pytest.skip(f"{csv} not present")
    import feynman  # noqa: F401  (bench/ is on the path)

    flagged = {e.id: fg.guardrail_flags(e.truth()) for e in feynman.load_equations(csv)}
    assert {k: v for k, v in flagged.items() if v} == {}


def test_a_term_below_a_millionth_of_its_sum_is_flagged_on_rows():
    """Issue 34, point 4: ``(m_0 + 1.86e-17)/sqrt(1 - v**2/c**2)`` keeps a constant inside the noise."""
    m, v, c = sympy.symbols("m_0 v c", positive=True)
    rows = np.random.default_rng(0).uniform([1, 1, 3], [5, 2, 10], (200, 3))
    junk = (m + sympy.Float(1.86e-17)) / sympy.sqrt(1 - v**2 / c**2)
    assert fg.guardrail_flags(junk, [m, v, c], rows) == ("negligible_term",)
    assert fg.guardrail_flags(junk) == ()  # without rows: not judged
    assert fg.guardrail_flags(m / sympy.sqrt(1 - v**2 / c**2) + sympy.Float(1e-3) * v, [m, v, c], rows) == ()
    assert fg.guardrail_flags(m + sympy.Float(1e-9) * v * c, [m, v, c], rows) == ("negligible_term",)
    edge = sympy.Function("phi_0_0_0")
    assert fg.guardrail_flags(edge(m) + sympy.Float(1e-30), [m, v, c], rows) == ("opaque_function",)
