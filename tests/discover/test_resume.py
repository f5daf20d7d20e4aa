"""kansym.discover.resume / carried: a run interrupted after its training resumes through the
Python API (`discover(..., resume=point)`) to the same formula without training or searching again."""

import importlib

import numpy as np
import pytest
import sympy

from kansym.discover.resume import _decode, _encode, read_resume
from kansym.discover.config import DiscoverConfig
from kansym.discover.result import RunInterrupted
from kansym.discover.run import discover

stages_module = importlib.import_module("kansym.discover.stages")
symbolify_module = importlib.import_module("kansym.discover.stages")
run_module = importlib.import_module("kansym.discover.run")


def _config():
    base = DiscoverConfig()
    return base.replace(hidden=(2,), grid_size=4, train=base.train.replace(steps=6),
                        finetune=base.finetune.replace(steps=1))


def _rows(n=80):
    x = np.random.default_rng(0).uniform(-1, 1, (n, 2))
    return x, x[:, 0] * x[:, 1] + x[:, 0]


def _fail(what):
    def fail(*args, **kwargs):
        raise AssertionError(f"the resumed run must not run the {what} again")
    return fail


def test_discover_interrupted_after_training_resumes_to_the_same_formula(monkeypatch):
    x, y = _rows()
    straight = discover(x, y, ["a", "b"], ["f"], _config(), progress=False)

    real = symbolify_module.symbolify  # the direct search is exact: no Occam step, no refinement
    calls = []

    def ctrl_c(*args, **kwargs):
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(symbolify_module, "symbolify", ctrl_c)
    with pytest.raises(RunInterrupted) as info:
        discover(x, y, ["a", "b"], ["f"], _config(), progress=False)
    monkeypatch.setattr(symbolify_module, "symbolify", real)
    stop = info.value
    assert calls and stop.stage == "per-edge fits"
    record = stop.bundle.meta["resume"]
    assert (record["stage"], record["run"], record["symbolic_stage"]) == ("symbolic", "main", "per-edge fits")
    assert record["direct"]["candidates"]  # the direct search's result travels with it

    point = read_resume(stop.bundle)
    assert point.trained and point.state is None and point.run == "main"
    monkeypatch.setattr(stages_module, "fit", _fail("training"))
    monkeypatch.setattr(run_module, "direct_search", _fail("direct search"))
    resumed = discover(x, y, ["a", "b"], ["f"], point.config, progress=False, resume=point)
    assert str(resumed.formulas[0].expr) == str(straight.formulas[0].expr)
    assert resumed.formulas[0].r2_test == straight.formulas[0].r2_test
    assert "resume" not in resumed.trained.meta

    # other rows are refused, as for a training point
    from kansym.errors import DataError

    with pytest.raises(DataError, match="the data differ"):
        discover(x, y + 1e-9, ["a", "b"], ["f"], point.config, progress=False, resume=point)


def test_a_run_interrupted_in_its_training_keeps_the_cuts_made_before_it(monkeypatch):
    # regression (fresh-user check, 2026-12-07): the record of a Ctrl-C in the training had no
    # cuts, so the resumed run lost the time limit's cut of the search before it (no NOTE, and
    # formula.json's time_limit null); a record of a finished training kept them
    from kansym.deadline import Deadline

    fit_module = importlib.import_module("kansym.train.fit")
    x, y = _rows()
    cut = "structure search: stopped at its share of the time limit"
    deadline = Deadline(10_000)
    deadline.cut(cut)

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fit_module, "_run_steps", ctrl_c)
    with pytest.raises(RunInterrupted) as info:
        discover(x, y, ["a", "b"], ["f"], _config(), progress=False, deadline=deadline)
    monkeypatch.undo()
    stop = info.value
    record = stop.bundle.meta["resume"]
    assert (stop.stage, record["stage"], record["cuts"]) == ("main", "main", [cut])
    assert str(stop) == "interrupted in the main KAN's training after 0 completed steps"

    point = read_resume(stop.bundle)
    assert point.cuts == (cut,)
    resumed = discover(x, y, ["a", "b"], ["f"], point.config, progress=False, resume=point,
                       deadline=Deadline(10_000))
    assert cut in resumed.cut_short


@pytest.mark.parametrize("text", ["0.1*a + 2.5*b**1.5", "exp(b**2 + sin(pi*a))", "a**(3/2)/sqrt(b)",
                                  "asin(0.00753982301909674*a - 0.115234033691004) - 1/3", "a*b"])
def test_a_carried_formula_reads_back_bit_for_bit(text):
    a, b = sympy.Symbol("a", real=True), sympy.Symbol("b", real=True)
    expr = sympy.sympify(text, locals={"a": a, "b": b})
    entry = _encode(expr, ["a", "b"])
    assert entry is not None
    assert sympy.srepr(_decode(entry, ["a", "b"])) == sympy.srepr(expr)


def test_a_formula_that_would_not_read_back_exactly_is_not_carried():
    a = sympy.Symbol("a", real=True)
    assert _encode(sympy.Float("0.1", 30) * a, ["a"]) is None  # 30 digits do not fit a float64
    assert _encode(sympy.Symbol("q", real=True) * a, ["a"]) is None  # a name that is no input


def test_stage_lines_bound_each_stage_by_its_share_and_training_by_its_step_rate(caplog):
    from kansym.deadline import Deadline
    from kansym.discover.progress import Stages

    now = [0.0]
    deadline = Deadline(100, clock=lambda: now[0])
    stages = Stages(deadline, show=True, clock=lambda: now[0])
    with caplog.at_level("INFO", logger="kansym"):
        stages.start("per-edge fits", "a primitive for each of the 9 edges")
        on_step = stages.training()
        now[0] = 2.0
        on_step(1, 21)  # 2 s for the first step, 20 to go
        on_step(2, 21)  # one line per stage: not again
        stages.start("pruning", "nodes below theta")
    assert caplog.messages == [
        "per-edge fits: a primitive for each of the 9 edges (at most 75 s left: its share of the 100 s time limit)",
        "training: about 40 s left at 2 s a step, 20 of 21 steps to go (at most 48 s: its share of the 100 s "
        "time limit)",
        "pruning: nodes below theta (98 s of the 100 s time limit left)",
    ]
    assert stages.current == "pruning"

    caplog.clear()
    quiet = Stages(Deadline(None), show=False)
    with caplog.at_level("INFO", logger="kansym"):
        quiet.start("refinement", "constants")
        quiet.training()(1, 20)
    assert caplog.messages == [] and quiet.current == "training"
    assert Stages(Deadline(None), show=True).bound("refinement") == ""  # no limit, no bound
