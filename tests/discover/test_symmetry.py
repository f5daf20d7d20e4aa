"""Two-input symmetries of an oracle (AI Feynman's translational symmetry and its generalisations)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

from kansym.discover.structure_search import decompose
from kansym.discover.structure_tests import find_symmetry, monomial_exponents, reduced_problem
from kansym.symbolic.verify import is_exact_recovery


def _problem(fn, d, lo=1.0, hi=5.0, seed=0):
    z = np.random.default_rng(seed).uniform(lo, hi, (3000, d))
    return (lambda zz: fn(*zz.T)), z, [sympy.Symbol(f"x{i + 1}", real=True) for i in range(d)]


@pytest.mark.parametrize(("fn", "kind", "pair"), [
    (lambda a, b, c: np.sqrt((a - b) ** 2 + c ** 2), "difference", {0, 1}),
    (lambda a, b, c: np.exp(-a / b) * c / (1 + c), "ratio", {0, 1}),
    (lambda a, b, c: np.sin(a * c) + b, "product", {0, 2}),
    (lambda a, b, c: np.cos(a + b) * c ** 2, "sum", {0, 1}),
])
def test_the_symmetry_of_the_law_is_found(fn, kind, pair):
    f, z, _ = _problem(fn, 3)
    sym = find_symmetry(f, z, 1e-6)
    assert sym is not None and sym.kind == kind and {sym.i, sym.j} == pair
    assert sym.ratio < 1e-3


def test_no_symmetry_in_a_law_without_one_nor_beyond_the_oracle_error():
    f, z, _ = _problem(lambda a, b, c: a * b + np.sin(c * a), 3)
    assert find_symmetry(f, z, 1e-6) is None
    # x1 - x2 up to a perturbation of 1e-2: a symmetry within an oracle error of 1e-2, not of 1e-6
    f, z, _ = _problem(lambda a, b, c: np.sqrt((a - b) ** 2 + c ** 2) + 1e-2 * np.sin(3 * a), 3)
    assert find_symmetry(f, z, 1e-6) is None
    assert find_symmetry(f, z, 1e-2).kind == "difference"


def test_an_input_without_effect_is_not_a_symmetry():
    f, z, _ = _problem(lambda a, b, c: b ** 2 + c, 3)  # x1 unused: every move of it "is compensated"
    sym = find_symmetry(f, z, 1e-6)
    assert sym is None or sym.i != 0


def test_the_reduced_oracle_equals_the_law_on_the_data_and_stays_in_the_box():
    fn = lambda a, b, c: np.sqrt((a - b) ** 2 + c ** 2)
    f, z, syms = _problem(fn, 3)
    seen = []

    def logged(zz):
        seen.append(zz.copy())
        return f(zz)

    sym = find_symmetry(f, z, 1e-6)
    g, z_red, s_red, w, w_expr = reduced_problem(logged, z, syms, sym)
    assert z_red.shape == (3000, 2) and s_red[-1] == w and w_expr == syms[0] - syms[1]
    np.testing.assert_allclose(g(z_red), fn(*z.T), rtol=1e-12)
    probes = np.concatenate(seen)
    assert probes.min() >= 1.0 - 1e-12 and probes.max() <= 5.0 + 1e-12


@pytest.mark.parametrize(("fn", "law"), [
    (lambda a, b, c: np.sqrt((a - b) ** 2 + c ** 2), "sqrt((x1 - x2)**2 + x3**2)"),
    (lambda a, b, c, e: np.sqrt((b - a) ** 2 + (e - c) ** 2), "sqrt((x2 - x1)**2 + (x4 - x3)**2)"),
])
def test_decompose_solves_the_reduced_problem_and_substitutes_back(fn, law):
    f, z, syms = _problem(fn, 4 if "x4" in law else 3)
    solved = decompose(f, z, syms, 1e-6)
    assert solved is not None
    exprs, split = solved
    assert split.kind == "symmetry" and "w_" in split.relation
    truth = sympy.sympify(law, locals={s.name: s for s in syms})
    assert is_exact_recovery(truth, exprs[0], symbols=syms)
    assert split.to_dict()["relation"] == split.relation


def test_an_expired_deadline_stops_the_decomposition():
    from kansym.deadline import Deadline

    f, z, syms = _problem(lambda a, b, c: np.sqrt((a - b) ** 2 + c ** 2), 3)
    ticks = iter([0.0] + [10.0] * 100)
    deadline = Deadline(1.0, clock=lambda: next(ticks))
    assert decompose(f, z, syms, 1e-6, deadline=deadline) is None


def test_the_exponents_of_a_monomial_argument_are_read_off_the_log_slopes():
    # tanh(x1**3 x2**2 / (4 pi x3**2)): x1 and x2 through x1**3 x2**2, x1 and x3 through x1**3 / x3**2;
    # x2 and x3 through x2 / x3, the ratio kind, so not nominated
    f, z, _ = _problem(lambda a, b, c: np.tanh(a ** 3 * b ** 2 / (4 * np.pi * c ** 2)), 3, lo=0.5, hi=3.0)
    assert monomial_exponents(f, z[:256], [0, 1, 2]) == {(0, 1): (3, 2), (0, 2): (3, -2)}
    # a law of no monomial of x1, x2: sin(x1) + x2 has a slope ratio that varies, snapped to nothing or refuted below
    f2, z2, _ = _problem(lambda a, b, c: np.sin(a) + b * c, 3)
    sym = find_symmetry(f2, z2, 1e-6)
    assert sym is None or sym.kind != "power"


def test_a_function_of_one_monomial_reduces_to_one_variable():
    fn = lambda a, b: 3 * np.tanh(a ** 3 * b ** 2 / (4 * np.pi))
    f, z, syms = _problem(fn, 2, lo=0.5, hi=2.0)
    sym = find_symmetry(f, z, 1e-6)
    assert (sym.kind, sym.i, sym.j, sym.a, sym.b) == ("power", 0, 1, 3, 2) and sym.ratio < 1e-3
    g, z_red, s_red, w, w_expr = reduced_problem(f, z, syms, sym)
    assert w_expr == syms[0] ** 3 * syms[1] ** 2 and z_red.shape == (3000, 1)
    np.testing.assert_allclose(g(z_red), fn(*z.T), rtol=1e-10)  # realised inside the box, the same values


def test_a_function_of_one_monomial_of_three_inputs_is_solved_whole():
    # x2 / x3 (the ratio kind), then x1**3 and (x2/x3)**2 (a power): one variable, a leaf of one input
    f, z, syms = _problem(lambda a, b, c: 3 * np.tanh(a ** 3 * b ** 2 / (4 * np.pi * c ** 2)), 3, lo=0.5, hi=2.0)
    solved = decompose(f, z, syms, 1e-6)
    assert solved is not None
    truth = sympy.sympify("3*tanh(x1**3*x2**2/(4*pi*x3**2))", locals={s.name: s for s in syms})
    assert is_exact_recovery(truth, solved[0][0], symbols=syms), solved[0][0]
