"""Each symbolic stage honours the run's deadline (issue 16), shown with a fake clock.

A deadline that never expires leaves every stage exactly as without one; one that has
expired makes the stage stop at its next check, return what it has, and record the cut.
"""

import numpy as np
import pytest
import sympy
import torch

from kansym.deadline import Deadline
from kansym.io.transform import DataTransform
from kansym.nn import KAN, KANConfig
from kansym.symbolic.compose import SymbolicKAN, input_symbols, symbolify
from kansym.symbolic.direct import direct_search
from kansym.symbolic.fit import EdgeFit
from kansym.symbolic.occam import simplify_edges
from kansym.symbolic.refine import refine


@pytest.fixture
def expiring(step_clock):
    """A deadline of 10 s whose clock passes it at its ``at``-th read."""
    return lambda at: Deadline(10, clock=step_clock(at))


def never() -> Deadline:
    return Deadline(10, clock=lambda: 0.0)


def _two_edge_model():
    """A (2, 1) KAN whose splines are x1 -> sin(pi x1) and x2 -> x2^2, and its inputs."""
    from kansym.nn.spline import curve_to_coef

    model = KAN(KANConfig(width=(2, 1), grid_size=20, base_fun="zero")).double()
    xs = torch.linspace(-1, 1, 400, dtype=torch.float64)[:, None].expand(400, 2)
    target = torch.stack([torch.sin(torch.pi * xs[:, 0]), xs[:, 1] ** 2], dim=1)[:, None, :]  # (400, 1, 2)
    with torch.no_grad():
        model.layers[0].scale_sp.fill_(1.0)
        model.layers[0].coef.copy_(curve_to_coef(xs, target, model.layers[0].grid, 3))
    transform = DataTransform.affine((0.0, 0.0), (1.0, 1.0), (0.0,), (1.0,))
    x = torch.rand(600, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 2 - 1
    return model, x, transform


def test_per_edge_fits_after_the_deadline_are_quick_and_said_so(expiring):
    model, x, transform = _two_edge_model()
    plain, plain_cands = symbolify(model, x, transform, ["x1", "x2"], ["y"])
    timed, timed_cands = symbolify(model, x, transform, ["x1", "x2"], ["y"], deadline=never())
    assert timed.edges == plain.edges and timed_cands == plain_cands
    lean, lean_cands = symbolify(model, x, transform, ["x1", "x2"], ["y"], exhaustive=False)
    d = expiring(3)  # read 2: before the first edge; read 3: before the second
    cut, cands = symbolify(model, x, transform, ["x1", "x2"], ["y"], deadline=d)
    assert cut.edges[(0, 0, 0)] == plain.edges[(0, 0, 0)] and cands[(0, 0, 0)] == plain_cands[(0, 0, 0)]
    # the second edge: the first good primitive on 500 of its 600 samples, without the alternatives
    late, lean_late = cut.edges[(0, 1, 0)], lean.edges[(0, 1, 0)]
    assert late.primitive == lean_late.primitive == "x^2" and late.r2 > 0.99999
    assert np.allclose([late.a, late.b, late.c, late.d], [lean_late.a, lean_late.b, lean_late.c, lean_late.d],
                       atol=1e-4)
    assert [c.primitive for c in cands[(0, 1, 0)]] == [c.primitive for c in lean_cands[(0, 1, 0)]]
    assert len(cands[(0, 1, 0)]) < len(plain_cands[(0, 1, 0)])
    assert d.cuts == ("per-edge fits: 1 of 2 edges fitted quickly (on at most 500 samples)",)


def test_quick_per_edge_fits_use_evenly_spaced_samples(monkeypatch, expiring):
    import kansym.symbolic.compose as compose

    model, x, transform = _two_edge_model()
    seen = []
    real = compose.select_edge_fit
    monkeypatch.setattr(compose, "select_edge_fit", lambda xv, yv, *a, **k: seen.append(len(xv)) or real(xv, yv, *a, **k))
    monkeypatch.setattr(compose, "QUICK_ROWS", 100)
    symbolify(model, x, transform, ["x1", "x2"], ["y"], deadline=expiring(2))
    assert seen == [100, 100]


def _wiggly_linear_law():
    """y = 2 a + b^2 - c: every edge starts on a wiggly primitive with simpler candidates."""
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (200, 3))
    y = 2 * x[:, 0] + x[:, 1] ** 2 - x[:, 2]
    start = {(0, 0, 0): EdgeFit("sin", 0.4, 0.0, 5.0, 0.0, 0.999),
             (0, 1, 0): EdgeFit("gaussian", 1.0, 0.0, -1.0, 1.0, 0.99),
             (0, 2, 0): EdgeFit("tanh", 0.5, 0.0, -2.0, 0.0, 0.999)}
    simpler = {(0, 0, 0): [EdgeFit("x", 1.0, 0.0, 2.0, 0.0, 0.99)],
               (0, 1, 0): [EdgeFit("x^2", 1.0, 0.0, 1.0, 0.0, 0.999)],
               (0, 2, 0): [EdgeFit("x", 1.0, 0.0, -1.0, 0.0, 0.99)]}
    transform = DataTransform.affine((0.0,) * 3, (1.0,) * 3, (0.0,), (1.0,))
    sym = SymbolicKAN((3, 1), start, transform, ("a", "b", "c"), ("y",))
    return sym, {k: [*simpler[k], start[k]] for k in start}, input_symbols(["a", "b", "c"]), x, y


def _summary(tried):
    return [(str(c.expr), c.error, c.bic, c.accepted) for c in tried]


def test_the_occam_step_starts_no_trial_after_the_deadline(expiring, monkeypatch):
    import kansym.symbolic.occam as occam

    real = occam.refit_constants_counted  # the trials' refits read the clock too: not counted here
    monkeypatch.setattr(occam, "refit_constants_counted", lambda *a, deadline=None, **k: real(*a, **k))
    sym, candidates, symbols, x, y = _wiggly_linear_law()
    plain_sym, plain = simplify_edges(sym, candidates, symbols, x, y, max_trials=3)
    timed_sym, timed = simplify_edges(sym, candidates, symbols, x, y, max_trials=3, deadline=never())
    assert _summary(timed) == _summary(plain) and timed_sym.edges == plain_sym.edges
    assert len(plain) == 4
    d = expiring(3)  # the first edge trial runs (read 2), none after it (read 3)
    cut_sym, cut = simplify_edges(sym, candidates, symbols, x, y, max_trials=3, deadline=d)
    assert _summary(cut) == _summary(plain)[:2]  # the start and the first trial
    last = [c for c in cut if c.accepted][-1]  # the last accepted network is what stands
    assert {k: f.primitive for k, f in cut_sym.edges.items()} == last.primitives
    assert d.cuts == ("Occam step: stopped after 1 trials",)


def test_an_occam_trial_s_refit_is_given_the_deadline(monkeypatch):
    import kansym.symbolic.occam as occam

    seen, real = [], occam.refit_constants_counted

    def spy(*a, deadline=None, **k):
        seen.append(deadline)
        return real(*a, deadline=deadline, **k)

    monkeypatch.setattr(occam, "refit_constants_counted", spy)
    sym, candidates, symbols, x, y = _wiggly_linear_law()
    d = never()
    simplify_edges(sym, candidates, symbols, x, y, max_trials=3, deadline=d)
    assert len(seen) == 4 and all(s is d for s in seen)  # the start and three trials (stop 24: one ran 50 s)


def test_refinement_stops_snapping_at_the_deadline(expiring):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (300, 1))
    y = 2 * x[:, 0] + 0.5 + rng.normal(0, 1e-4, 300)
    s = sympy.Symbol("x", real=True)
    raw = sympy.Float(1.9) * s + sympy.Float(0.45)
    plain = refine(raw, [s], x, y)
    assert plain == 2 * s + sympy.Rational(1, 2)
    assert refine(raw, [s], x, y, deadline=never()) == plain
    d = expiring(2)  # up inside the first refit: its best point so far (the start), nothing snapped
    cut = refine(raw, [s], x, y, deadline=d)
    assert abs(float(cut.coeff(s)) - 1.9) < 1e-12 and abs(float(cut.subs(s, 0)) - 0.45) < 1e-12
    assert d.cuts == ("refinement: snapping stopped after 0 of 2 constants",)


def test_a_refit_stops_at_the_deadline_at_its_best_point(expiring):
    from kansym.symbolic.refit import Problem

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (300, 1))
    s = sympy.Symbol("x", real=True)
    prob = Problem(sympy.Float(1.0) * sympy.exp(sympy.Float(0.3) * s), [s], x, 2 * np.exp(0.5 * x[:, 0]), "linear",
                   deadline=expiring(12))
    start = prob.values.copy()
    out = prob.refit(start, np.ones(2, bool))
    assert prob.evaluations <= 11  # least squares would take dozens: stopped at the deadline's read
    assert prob.error(out) < prob.error(start)  # the best point of the evaluations made, not the start
    unlimited = Problem(sympy.Float(1.0) * sympy.exp(sympy.Float(0.3) * s), [s], x, 2 * np.exp(0.5 * x[:, 0]), "linear")
    assert unlimited.error(unlimited.refit(start, np.ones(2, bool))) < 1e-8


def test_the_direct_search_stops_between_families_and_keeps_what_it_found(expiring):
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 3.0, (800, 1))
    y = x[:, 0] ** 2 + 1.0
    s = [sympy.Symbol("x", real=True)]
    plain = direct_search(x, y, s)
    assert direct_search(x, y, s, deadline=never()) == plain
    d = expiring(2)  # the first family (y itself) is searched, the second is not
    cut = direct_search(x, y, s, deadline=d)
    assert len(cut) == 1 and cut[0].error < 1e-9 and sympy.simplify(cut[0].expr - (s[0] ** 2 + 1)) == 0
    assert d.cuts[0].startswith("direct search: 1 of ") and d.cuts[0].endswith(" target transforms searched")
