"""discover under a time limit (issue 16), with a fake clock: the deadline reaches every stage,
a limit that does not bind changes nothing, and one that binds says so."""

import json

import numpy as np
import pytest
import sympy

from kansym.deadline import Deadline
from kansym.discover import DiscoverConfig, discover, formula_record, run as run_module
from kansym.discover.progress import cut_short_line, time_limit_entry
from kansym.discover.dimensional import discover_with_units
from kansym.discover.record import dumps
from kansym.symbolic.verify import is_exact_recovery


def _additive_law(n=500):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.5, 1.5, (n, 2))
    return x, np.sin(x[:, 0]) + x[:, 1] ** 2, ["x1", "x2"]


def _product_law(n=400):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (n, 3))
    return x, x[:, 0] * x[:, 1] + x[:, 2], ["a", "b", "c"]


def _record_text(result):
    return dumps(formula_record(result.formulas[0], result.pruned, result.symbolic,
                                extra=time_limit_entry(result)))


def test_a_limit_that_does_not_bind_gives_the_same_record_bytes():
    x, y, names = _additive_law()
    free = discover(x, y, names, ["y"], DiscoverConfig(time_limit=None), progress=False)
    default = discover(x, y, names, ["y"], DiscoverConfig(), progress=False)  # 300 s: does not bind here
    never = discover(x, y, names, ["y"], progress=False, deadline=Deadline(10, clock=lambda: 0.0))
    assert free.cut_short == default.cut_short == never.cut_short == ()
    assert _record_text(free) == _record_text(default) == _record_text(never)
    assert "time_limit" not in json.loads(_record_text(default)) and cut_short_line(default) is None
    assert free.time_limit is None and default.time_limit == 300.0


def test_up_from_the_start_the_answer_is_the_best_verified_formula_so_far(step_clock):
    x, y, names = _additive_law()
    result = discover(x, y, names, ["y"], progress=False, deadline=Deadline(10, clock=step_clock(2)))
    f = result.formulas[0]
    assert f.expr != 0 and f.warning is None and f.r2_test > 0.9999
    assert sympy.simplify(f.expr - (sympy.sin(f.symbols[0]) + f.symbols[1] ** 2)) == 0  # the direct search's
    # the KAN's least (an exact direct formula makes its Occam step and refinement moot anyway)
    stages = [c.split(":")[0] for c in result.cut_short]
    assert stages == ["direct search", "training (additive shortcut)", "fine-tuning", "per-edge fits"]
    record = json.loads(_record_text(result))
    assert record["time_limit"] == {"seconds": 10.0, "cut_short": list(result.cut_short),
                                    "note": "the formula may differ from that of an unhurried run"}
    line = cut_short_line(result)
    assert line.startswith("the time limit (10 s) cut short: direct search: 1 of ")
    assert line.endswith("; the formula may differ from that of an unhurried run")


def test_a_hidden_layer_run_cut_at_once_still_answers_with_a_closed_form(step_clock):
    x, y, names = _product_law()
    result = discover(x, y, names, ["y"], DiscoverConfig(shortcut=False), progress=False,
                      deadline=Deadline(10, clock=step_clock(2)))
    f = result.formulas[0]
    n = len(result.symbolic.edges)
    assert result.cut_short == ("training: 1 of 20 steps", "fine-tuning: skipped",
                                f"per-edge fits: {n} of {n} edges fitted quickly (on at most 500 samples)",
                                "Occam step: skipped", "refinement: skipped")
    assert f.expr != 0 and f.r2_test > 0.5  # a formula of the model so far: verified or flagged, never faked
    assert len(result.trained.meta["history"]["step"]) == 1


def test_the_hidden_layer_run_after_the_additive_shortcut_is_skipped_once_the_time_is_up(monkeypatch, step_clock):
    x, y, names = _additive_law()
    clock = step_clock(10**9)
    real = run_module._run_once

    def shortcut_then_late(*args, **kwargs):
        found = real(*args, **kwargs)
        if args[-1] == "shortcut":  # the shortcut's formula is made to miss the bar, and the time runs out
            clock.expire_at = 0
            f = found.formulas[0]
            found = run_module.replace(found, formulas=(run_module.replace(f, r2_test=f.r2_model_test - 0.5),))
        return found

    monkeypatch.setattr(run_module, "_run_once", shortcut_then_late)
    result = discover(x, y, names, ["y"], DiscoverConfig(direct_search=False), progress=False,
                      deadline=Deadline(10, clock=clock))
    assert result.runs == 1 and list(result.trained.model.width) == [2, 1]
    assert result.cut_short == ("the hidden-layer KAN after the additive shortcut: skipped",)


def test_units_discovery_runs_under_the_same_deadline(step_clock):
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(1, 5, 500), rng.uniform(1, 2, 500), rng.uniform(3, 10, 500)])
    y = x[:, 0] * x[:, 2] ** 2 / np.sqrt(1 - (x[:, 1] / x[:, 2]) ** 2)
    units = {"m": "kg", "v": "m/s", "c": "m/s", "E": "kg*m^2/s^2"}
    result = discover_with_units(x, y, ["m", "v", "c"], "E", units, progress=False,
                                 deadline=Deadline(10, clock=step_clock(2)))
    assert result.time_limit == 10.0 and result.cut_short and result.cut_short[0].startswith("direct search")
    f = result.formulas[0]
    assert f.expr != 0 and f.r2_test > 0.99
    # what the cut-short run prints is the law, or it says it is not (here an approximation of
    # 1/sqrt(1 - u^2) at R² > 0.99, which only the residual test told from the law: stop 24)
    m, v, c = sympy.symbols("m v c", positive=True)
    exact = is_exact_recovery(m * c**2 / sympy.sqrt(1 - v**2 / c**2), f.expr)
    assert (f.warning is None) == exact


@pytest.mark.parametrize("bad", [0, -5, float("nan"), float("inf")])
def test_impossible_time_limits_are_refused_by_the_config(bad):
    from kansym.errors import ConfigError

    with pytest.raises(ConfigError, match="time_limit"):
        DiscoverConfig(time_limit=bad)


class TickClock:
    """A fake clock that advances one second at every read."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1.0
        return self.now


def test_a_long_training_leaves_time_to_the_stages_after_it():
    """Each stage stops by its share of the limit: training by half of it, so the per-edge fits
    (three quarters) still search the library for some edges."""
    x, y, names = _product_law()
    result = discover(x, y, names, ["y"], DiscoverConfig(shortcut=False, structure=False), progress=False,
                      deadline=Deadline(24, clock=TickClock()))
    stages = {c.split(":")[0]: c for c in result.cut_short}
    steps = int(stages["training"].split(": ")[1].split(" of ")[0])
    assert 5 <= steps < 20  # about half of 24 one-second steps
    hurried, total = (int(v) for v in stages["per-edge fits"].split(": ")[1].split(" edges")[0].split(" of "))
    assert hurried < total  # some edges had the full search
    assert result.formulas[0].expr != 0
