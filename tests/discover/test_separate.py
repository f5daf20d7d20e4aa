"""Structure discovery (kansym.discover.structure_search): separability tests on an oracle, the
decomposition into sub-laws, and the run that lets its formula compete (issue 16)."""


import numpy as np
import pytest
import sympy

from kansym.discover import DiscoverConfig, discover
from kansym.discover.record import formula_record
from kansym.discover.result import Formula
from kansym.discover.structure_search import decompose, interaction_graph, structure_candidates
from kansym.symbolic.compose import input_symbols
from kansym.symbolic.verify import Fidelity, is_exact_recovery

EPS = 1e-6  # the error an analytic oracle is credited with (a trained KAN: about 1e-3)


def _rows(d: int, n: int = 1500, lo: float = 1.0, hi: float = 5.0, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, (n, d))


def test_the_graph_joins_exactly_the_inputs_that_interact():
    z = _rows(4)
    g, cost = interaction_graph(lambda x: x[:, 0] + x[:, 1] * np.sin(x[:, 2]) + np.exp(x[:, 3]), z, EPS)
    assert sorted(g.edges) == [(1, 2)]
    assert cost > 0
    g, cost = interaction_graph(lambda x: x.sum(axis=1), z, EPS)
    assert list(g.edges) == [] and cost == 0.0


def test_a_product_separates_whatever_its_sign_and_an_offset_is_needed_when_there_is_one():
    z = _rows(3, hi=3.0)
    f = lambda x: x[:, 0] * x[:, 1] ** 2 / x[:, 2]  # noqa: E731
    assert len(interaction_graph(f, z, EPS)[0].edges) == 3  # not additive
    assert list(interaction_graph(f, z, EPS, offset=0.0)[0].edges) == []
    z5 = _rows(3)
    assert list(interaction_graph(lambda x: x[:, 0] * np.sin(x[:, 1]), z5, EPS, offset=0.0)[0].edges) == []  # sign change
    g = lambda x: x[:, 0] * x[:, 1] - 4.0  # noqa: E731
    assert list(interaction_graph(g, z, EPS, offset=0.0)[0].edges) == [(0, 1)]  # x2 plays no part
    assert list(interaction_graph(g, z, EPS, offset=-4.0)[0].edges) == []


def test_the_oracle_error_sets_the_tolerance():
    """A weak interaction (0.01 x1 x2) is seen by an accurate oracle and below the tolerance
    of one whose error is 100 times larger."""
    z = _rows(3)
    f = lambda x: x[:, 0] + x[:, 1] + 0.01 * x[:, 1] * x[:, 2]  # noqa: E731
    assert sorted(interaction_graph(f, z, 1e-6)[0].edges) == [(1, 2)]
    assert list(interaction_graph(f, z, 1e-1)[0].edges) == []


@pytest.mark.parametrize("law, kinds", [
    ("a + b*sin(c)", "sum"),
    ("a*b**2/c", "product"),
    ("1 + a*b*c", "symmetry"),  # a*b is one variable before the offset product (tried last)
    ("a*(b + exp(-c))", "product"),
    ("a*b*sin(c)", "product"),
])
def test_decompose_recovers_the_law_from_an_analytic_oracle(law, kinds):
    symbols = input_symbols(["a", "b", "c"])
    true = sympy.sympify(law, locals={s.name: s for s in symbols})
    f = sympy.lambdify(symbols, true, "numpy")
    z = _rows(3)
    y = f(*z.T)
    cands, split = structure_candidates(lambda x: f(*x.T), EPS, z, y, symbols)
    assert split is not None and split.kind == kinds
    assert cands and cands[0].origin == "structure"
    assert is_exact_recovery(true, cands[0].expr, symbols=symbols), cands[0].expr
    assert cands[0].error < 1e-8


def test_an_offset_product_is_found_with_its_offset():
    symbols = input_symbols(["a", "b", "c"])
    z = _rows(3)
    # no two-input symmetry (1 + a*b*c has a*b: test_decompose_recovers_the_law_from_an_analytic_oracle)
    _, split = decompose(lambda x: 1.0 + np.sin(x[:, 0]) * np.cos(x[:, 1]) * np.exp(x[:, 2]), z, symbols, EPS)
    assert split.kind == "product" and len(split.children) == 3
    assert split.offset == pytest.approx(1.0, rel=0.2)
    assert "variables" in split.to_dict() and split.to_dict()["kind"] == "product"


def test_a_law_that_does_not_separate_gives_nothing():
    symbols = input_symbols(["a", "b", "c"])
    z = _rows(3)
    # no sum, no product, no two-input symmetry (sqrt((a - b)**2 + c**2) has one: test_symmetry.py)
    f = lambda x: x[:, 0] * x[:, 1] + np.sin(x[:, 2] * x[:, 0])  # noqa: E731
    assert decompose(f, z, symbols, EPS) is None
    assert structure_candidates(f, EPS, z, f(z), symbols) == ([], None)


def _formula(r2_test: float, r2_model: float, r2_reference: float) -> Formula:
    a = sympy.Symbol("a")
    return Formula(expr=a, raw=a, symbols=(a,), fidelity=Fidelity(r2_test, r2_test, 0.0, 0.0), target="y",
                   r2_test=r2_test, r2_model_test=r2_model, r2_reference_test=r2_reference)


def test_a_formula_far_below_the_unsparsified_kan_is_flagged():
    """The lack-of-fit rule: R² 0.97 beside a pruned model at 0.975 passes the model gap,
    but an unsparsified KAN at 0.99999 shows the data hold more."""
    w = _formula(0.97, 0.975, 0.99999).warning
    assert w is not None and "without sparsification" in w
    assert _formula(0.97, 0.975, float("nan")).warning is None  # no reference: the old rule alone
    assert _formula(0.9899, 0.99, 0.9905).warning is None  # noise: both at its floor
    assert _formula(0.99995, 0.99996, 0.9999999).warning is None  # below the floor 1e-4


def test_discover_finds_a_sum_with_a_product_inside_and_records_the_structure():
    """y = a + b sin(c): the sparsified KAN prunes to one hidden node and misses it (R² 0.98
    before this search); the structure search finds it exactly."""
    x = _rows(3, n=1500, hi=3.0, seed=1)
    y = x[:, 0] + x[:, 1] * np.sin(x[:, 2])
    found = discover(x, y, ["a", "b", "c"], ["y"], DiscoverConfig(seed=0))
    f = found.formulas[0]
    assert f.origin == "structure", f.reason
    assert is_exact_recovery("a + b*sin(c)", f.expr)
    assert f.warning is None
    assert f.r2_reference_test > 0.999
    record = formula_record(f, found.pruned, found.symbolic)
    assert record["origin"] == "structure"
    assert record["structure"]["kind"] == "sum"
    assert sorted(c["kind"] for c in record["structure"]["children"])[0] in ("leaf", "product")
    assert record["r2_reference_test"] == pytest.approx(f.r2_reference_test)


def test_structure_off_keeps_the_kan_path():
    x = _rows(3, n=600, hi=3.0, seed=2)
    y = x[:, 0] + x[:, 1] * np.sin(x[:, 2])
    f = discover(x, y, ["a", "b", "c"], ["y"], DiscoverConfig(seed=0, structure=False)).formulas[0]
    assert f.origin != "structure" and f.structure is None


def test_a_recombination_s_shared_constants_cancel_without_changing_its_values():
    from kansym.discover.structure_search import tidy

    v, p, g, q, m, w, w0 = sympy.symbols("V p g q m w w0", positive=True)
    c, k = sympy.Float(0.0950111044046), sympy.Float(0.785116669955)
    assert tidy(c * v * p / (c * g - c)) == v * p / (g - 1)
    assert tidy(k * q / (m * (k * w0**2 - k * w**2))) == q / (m * (w0**2 - w**2))
    odd = sympy.Float(0.30586325678986) * q * w**sympy.Float(1.37)  # nothing shared, nothing exact: unchanged
    assert tidy(odd) == odd
