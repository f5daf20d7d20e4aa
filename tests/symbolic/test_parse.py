"""The safe formula parser (kansym/symbolic/parse.py): sympy's own result on what kansym writes, nothing else."""

import ast
import json
from pathlib import Path

import pytest
import sympy

from kansym.errors import DataError
from kansym.symbolic.parse import CONSTANTS, MAX_CHARS, parse_formula

CORPUS = json.loads((Path(__file__).parent / "data" / "formula_corpus.json").read_text())  # formulas of bench runs


def _symbols(text: str, positive: bool) -> dict:
    tree = ast.parse(text, mode="eval")
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called - set(CONSTANTS)
    return {n: sympy.Symbol(n, positive=True) if positive else sympy.Symbol(n, real=True) for n in names}


@pytest.mark.parametrize("positive", [False, True])
def test_every_formula_kansym_printed_reads_back_exactly_as_sympy_parses_it(positive):
    # 200 formulas kansym printed on the Feynman benchmarks (floats, rationals, pi, nested exp/sqrt, sums of
    # products): the tree built here is sympy's parse_expr's, node for node, number for number
    for text in CORPUS:
        symbols = _symbols(text, positive)
        expected = sympy.parse_expr(text, local_dict=dict(symbols))  # trusted text: these are our own formulas
        assert sympy.srepr(parse_formula(text, symbols)) == sympy.srepr(expected), text


@pytest.mark.parametrize("text, needle", [
    ("__import__('os').system('true')", "calls \"__import__('os').system\": code, not only arithmetic"),
    ("Symbol('x').__class__", "Attribute code"),
    ("(lambda: 1)()", "calls 'lambda: 1': code, not only arithmetic"),
    ("gamma(1e300*x)", "'gamma', which is not a function of kansym's formulas"),
    ("9**9**9*x", "exact power of about 4.67e+08 digits"),
    ("x**(10**10**10)", "exact power"),
    ("+".join(["x"] * 30_000), "nested too deeply or has too many terms"),
    ("x" + "+x" * 60_000, f"more than the {MAX_CHARS}"),
    ("sin(" * 300 + "x" + ")" * 300, "nested"),
    ("*".join(["x"] * 300), "multiplies 300 factors"),
    ("y + 1", "uses the name 'y', which is neither an input nor a constant"),
    ("x if x else 1", "IfExp code"),
    ("1j*x", "complex"),
    ("True*x", "bool"),
    ("x +", "not valid syntax"),
])
def test_anything_but_a_bounded_formula_is_one_data_error(text, needle):
    with pytest.raises(DataError) as err:
        parse_formula(text, {"x": sympy.Symbol("x")})
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_long_sum_kansym_could_write_is_read_in_linear_time():
    x = sympy.Symbol("x")
    text = " + ".join(f"{k}.5*x**{k}" for k in range(1, 2000))  # 2,000 terms, about 20,000 characters
    expr = parse_formula(text, {"x": x})
    assert isinstance(expr, sympy.Add) and len(expr.args) == 1999
    assert expr.coeff(x, 1999) == sympy.Float("1999.5")
