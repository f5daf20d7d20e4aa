"""The Occam step prefers simpler edges when the data allow it (by BIC)."""

import numpy as np

from kansym.symbolic.compose import SymbolicKAN, input_symbols
from kansym.symbolic.fit import EdgeFit
from kansym.symbolic.occam import information_criterion, simplify_edges
from kansym.io.transform import DataTransform


def test_information_criterion_prefers_fewer_constants_at_equal_fit():
    import sympy

    x = sympy.Symbol("x")
    two = sympy.Float(2.0) * x + sympy.Float(1.0)
    four = sympy.Float(2.0) * sympy.sin(sympy.Float(0.001) * x) * sympy.Float(1000.0) + sympy.Float(1.0)
    assert information_criterion(two, 1e-9, 100) < information_criterion(four, 1e-9, 100)
    # a clearly better fit beats fewer constants
    assert information_criterion(four, 1e-4, 100) < information_criterion(two, 1e-1, 100)


def test_wiggly_edges_on_a_linear_law_become_linear():
    # y = 3 a - 2 b + 1 exactly; the network explains it with a Gaussian and a sine edge
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (60, 2))
    y = 3 * x[:, 0] - 2 * x[:, 1] + 1
    wiggly = {
        (0, 0, 0): EdgeFit("sin", 0.3, 0.0, 10.0, 0.4, 0.999),
        (0, 1, 0): EdgeFit("gaussian", 0.2, 1.0, -5.0, 0.3, 0.998),
    }
    linear = {
        (0, 0, 0): EdgeFit("x", 1.0, 0.0, 3.0, 0.5, 0.99),
        (0, 1, 0): EdgeFit("x", 1.0, 0.0, -2.0, 0.2, 0.99),
    }
    candidates = {k: [linear[k], wiggly[k]] for k in wiggly}
    transform = DataTransform.affine((0.0, 0.0), (1.0, 1.0), (0.0,), (1.0,))
    sym = SymbolicKAN((2, 1), wiggly, transform, ("a", "b"), ("y",))
    out, tried = simplify_edges(sym, candidates, input_symbols(["a", "b"]), x, y)
    assert {f.primitive for f in out.edges.values()} == {"x"}
    assert tried[0].accepted and tried[1].accepted  # start, then the all-linear network
    assert tried[1].error < 1e-8


def test_needed_primitive_is_kept():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (400, 1))
    y = np.sin(np.pi * x[:, 0])
    good = EdgeFit("sin", np.pi, 0.0, 1.0, 0.0, 1.0)
    poor = EdgeFit("x", 1.0, 0.0, 0.9, 0.0, 0.8)
    transform = DataTransform.affine((0.0,), (1.0,), (0.0,), (1.0,))
    sym = SymbolicKAN((1, 1), {(0, 0, 0): good}, transform, ("x",), ("y",))
    out, tried = simplify_edges(sym, {(0, 0, 0): [poor, good]}, input_symbols(["x"]), x, y)
    assert out.edges[(0, 0, 0)].primitive == "sin"
    assert not tried[-1].accepted


def _three_edge_problem():
    """y = 2 a + b^2 - c on 200 rows; each edge starts on a wiggly primitive with simpler candidates."""
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (200, 3))
    y = 2 * x[:, 0] + x[:, 1] ** 2 - x[:, 2]
    start = {(0, 0, 0): EdgeFit("sin", 0.4, 0.0, 5.0, 0.0, 0.999),
             (0, 1, 0): EdgeFit("gaussian", 1.0, 0.0, -1.0, 1.0, 0.99),
             (0, 2, 0): EdgeFit("tanh", 0.5, 0.0, -2.0, 0.0, 0.999)}
    simpler = {(0, 0, 0): [EdgeFit("x", 1.0, 0.0, 2.0, 0.0, 0.99)],
               (0, 1, 0): [EdgeFit("x", 1.0, 0.0, 0.1, 0.3, 0.6), EdgeFit("x^2", 1.0, 0.0, 1.0, 0.0, 0.999)],
               (0, 2, 0): [EdgeFit("x", 1.0, 0.0, -1.0, 0.0, 0.99)]}
    candidates = {k: [*simpler[k], start[k]] for k in start}
    transform = DataTransform.affine((0.0,) * 3, (1.0,) * 3, (0.0,), (1.0,))
    sym = SymbolicKAN((3, 1), start, transform, ("a", "b", "c"), ("y",))
    return sym, candidates, input_symbols(["a", "b", "c"]), x, y


def _summary(tried):
    return [(str(c.expr), c.error, c.bic, c.accepted, sorted(c.primitives.items())) for c in tried]


def test_occam_step_and_refinement_do_not_depend_on_the_clock(monkeypatch):
    """Issue 17: the same input gives the same formula however busy the machine.

    Every clock Python offers jumps by an hour at each call and interval timers are
    forbidden: the Occam step (its budgets count trials and formula evaluations) and the
    refinement (its simplification depends on the formula's size) must not notice.
    """
    import signal
    import time

    from kansym.symbolic.refine import refine

    sym, candidates, symbols, x, y = _three_edge_problem()
    calm_sym, calm = simplify_edges(sym, candidates, symbols, x, y)
    calm_formula = refine(calm_sym.expressions(symbols)[0], symbols, x, y)
    assert len(calm) >= 4 and sum(c.accepted for c in calm) >= 3  # the search did real work

    for name in ("time", "perf_counter", "monotonic", "process_time", "thread_time"):
        real = getattr(time, name)
        jumps = iter(range(1, 10**9))
        monkeypatch.setattr(time, name, lambda real=real, jumps=jumps: real() + 3600.0 * next(jumps))
    for name in ("time_ns", "perf_counter_ns", "monotonic_ns"):
        real_ns = getattr(time, name)
        jumps_ns = iter(range(1, 10**9))
        monkeypatch.setattr(time, name, lambda real=real_ns, jumps=jumps_ns: real() + 3600 * 10**9 * next(jumps))

    def no_timer(*args, **kwargs):
        raise AssertionError("an interval timer was set")

    monkeypatch.setattr(signal, "setitimer", no_timer)
    monkeypatch.setattr(signal, "alarm", no_timer)
    busy_sym, busy = simplify_edges(sym, candidates, symbols, x, y)
    assert _summary(busy) == _summary(calm)
    assert str(refine(busy_sym.expressions(symbols)[0], symbols, x, y)) == str(calm_formula)


def test_occam_budget_counts_formula_evaluations():
    """The work budget stops the search after the same trials on every run; a bigger one goes further."""
    sym, candidates, symbols, x, y = _three_edge_problem()
    _, full = simplify_edges(sym, candidates, symbols, x, y)
    _, short = simplify_edges(sym, candidates, symbols, x, y, max_evaluations=1)
    assert len(short) == 2  # the start and the all-linear network; no edge trial starts
    assert _summary(short) == _summary(full)[:2]
    _, few = simplify_edges(sym, candidates, symbols, x, y, max_trials=2)
    assert len(few) == 3 and _summary(few) == _summary(full)[:3]
