"""kansym.symbolic.parse: column names -> identifiers a parser reads back (formula.json, the Python export)."""

import keyword

import numpy as np
import pytest
import sympy

from kansym.symbolic.compose import lambdify_formula
from kansym.symbolic.export import to_latex, to_python
from kansym.symbolic.parse import identifier, identifiers, is_safe_identifier, rename_symbols

NASTY = ["mass kg", "speed-m/s", "E (J)", "a/b", "2theta", "Δt", "µ", "I", "E", "S", "N", "O", "Q", "pi", "beta",
         "gamma", "lambda", "class", "sin", "max", "id", "X", "numpy", "__debug__", "", "()", "a\nb", "x", "x"]


def test_readable_deterministic_identifiers():
    assert identifiers(["mass kg", "speed-m/s", "E (J)", "2theta", "x1"]) == \
        ("mass_kg", "speed_m_s", "E_J", "x_2theta", "x1")
    # names sympy or Python bind get a trailing underscore; safe names stay as they are
    assert identifiers(["I", "E", "S", "N", "pi", "beta", "lambda", "class", "max"]) == \
        ("I_", "E_", "S_", "N_", "pi_", "beta_", "lambda_", "class_", "max_")
    assert identifiers(["alpha", "theta", "semi_major_axis_km", "Δt"]) == ("alpha", "theta", "semi_major_axis_km", "Δt")
    assert identifiers(NASTY) == identifiers(list(NASTY))  # the same table, the same names


def test_two_names_that_map_to_one_are_told_apart_in_column_order():
    assert identifiers(["a b", "a-b", "a_b"]) == ("a_b_2", "a_b_3", "a_b")  # a kept name is never taken
    assert identifiers(["a b", "a-b"]) == ("a_b", "a_b_2")
    assert identifiers(["µ", "μ"]) == ("μ_2", "μ")  # NFKC makes the micro sign a mu


def test_every_identifier_is_safe_and_distinct():
    ids = identifiers(NASTY)
    assert len(set(ids)) == len(ids)
    for i in ids:
        assert i.isidentifier() and not keyword.iskeyword(i) and is_safe_identifier(i)
        assert i not in vars(sympy) and i not in ("X", "numpy")
    assert identifier("E (J)") == "E_J"


def test_a_formula_on_the_identifiers_parses_back_with_or_without_locals():
    names = NASTY[:-2]  # distinct names
    symbols = [sympy.Symbol(n, real=True) for n in names]
    expr = sum((k + 1) * s for k, s in enumerate(symbols)) + symbols[0] * symbols[7] ** 2
    ids = identifiers(names)
    text = str(rename_symbols(expr, dict(zip(names, ids))))
    local = {i: sympy.Symbol(i) for i in ids}
    back = sympy.sympify(text, locals=local)
    assert back.free_symbols == set(local.values())
    assert sympy.sympify(text).free_symbols == set(local.values())  # no name is a sympy constant
    rows = np.random.default_rng(0).uniform(1, 2, (5, len(names)))
    want = lambdify_formula(expr, symbols)(rows)  # the column names themselves (``__debug__`` too)
    got = lambdify_formula(back, [local[i] for i in ids])(rows)
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_the_python_export_compiles_names_its_columns_and_lists_their_order():
    names = ["mass kg", "lambda", "I"]
    m, lam, i = (sympy.Symbol(n) for n in names)
    src = to_python(m * lam ** 2 / 2 + i, [m, lam, i], func_name=identifier("E (J)"))
    assert "#   X[:, 0]  mass_kg: 'mass kg'" in src and "#   X[:, 1]  lambda_: 'lambda'" in src
    assert "#   X[:, 2]  I_: 'I'" in src
    namespace: dict = {}
    exec(compile(src, "formula.py", "exec"), namespace)  # noqa: S102 - our own generated source
    x = np.array([[2.0, 3.0, 1.0], [1.0, 1.0, 0.0]])
    np.testing.assert_allclose(namespace["E_J"](x), [10.0, 0.5])


@pytest.mark.parametrize("name, tex", [
    ("mass kg", r"\mathrm{mass\ kg}"), ("E_k", r"\mathrm{E\_k}"), ("a^b~c", r"\mathrm{a\hat{}b\sim{}c}"),
    ("100%", r"\mathrm{100\%}"), ("x1", "x_{1}"), ("lambda", r"\lambda"),
])
def test_latex_shows_the_real_column_name(name, tex):
    assert to_latex(sympy.Symbol(name)) == tex
