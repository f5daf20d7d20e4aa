"""fit() under a deadline (issue 16): it stops at a step boundary like early stopping."""

import math

import torch

from kansym.deadline import Deadline
from kansym.nn import KAN, KANConfig
from kansym.train.fit import TrainConfig, fit
from kansym.train.state import FitInterrupted


def _sine(n=200, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=gen) * 2 - 1
    return x, torch.sin(math.pi * x)


CFG = TrainConfig(lamb=0.01, steps=8, num_threads=1)
MODEL = KAN(KANConfig(width=(1, 2, 1), seed=1))


def _same(a, b):
    return all(torch.equal(v, b.model.state_dict()[k]) for k, v in a.model.state_dict().items())


def test_a_deadline_that_does_not_expire_changes_nothing():
    x, y = _sine()
    plain = fit(MODEL, x, y, CFG, progress=False)
    timed = fit(MODEL, x, y, CFG, progress=False, deadline=Deadline(3600))
    assert _same(plain, timed) and plain.history == timed.history and not timed.cut_short


def test_the_loop_stops_at_a_step_boundary_with_the_model_so_far(step_clock):
    x, y = _sine()
    # reads: 1 at the deadline's start, then one before each step from the second on
    cut = fit(MODEL, x, y, CFG, progress=False, deadline=Deadline(10, clock=step_clock(expire_at=4)))
    assert cut.cut_short and not cut.stopped_early and len(cut.history.step) == 3 and cut.best_step == 2
    three = fit(MODEL, x, y, CFG.replace(steps=3), progress=False)
    assert _same(cut, three)  # the same three steps as a run of three steps


def test_at_least_one_step_even_when_the_time_is_already_up(step_clock):
    x, y = _sine()
    late = fit(MODEL, x, y, CFG, progress=False, deadline=Deadline(10, clock=step_clock(expire_at=2)))
    assert late.cut_short and len(late.history.step) == 1


def test_with_early_stopping_the_best_state_so_far_is_returned(step_clock):
    x, y = _sine()
    cfg = CFG.replace(patience=50)
    cut = fit(MODEL, x, y, cfg, progress=False, deadline=Deadline(10, clock=step_clock(expire_at=4)))
    assert cut.cut_short and len(cut.history.step) == 3
    best = min(range(3), key=lambda i: cut.history.val_loss[i] + cfg.lamb * cut.history.reg[i])
    assert cut.best_step == best


def test_ctrl_c_under_a_deadline_still_gives_a_resumable_state(monkeypatch):
    """Ctrl-C's roll-back and resume work as without a deadline."""
    x, y = _sine()
    full = fit(MODEL, x, y, CFG, progress=False)
    from kansym.nn.kan import KAN as KANClass

    real, calls = KANClass.update_grid, {"n": 0}

    def interrupt_once(self, *a, **k):  # the grid update before step 5
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(self, *a, **k)

    monkeypatch.setattr(KANClass, "update_grid", interrupt_once)
    try:
        fit(MODEL, x, y, CFG, progress=False, deadline=Deadline(3600))
        raise AssertionError("not interrupted")
    except FitInterrupted as stop:
        state, partial = stop.state, stop.result.model
    monkeypatch.setattr(KANClass, "update_grid", real)
    assert state.step == 5
    resumed = fit(partial, x, y, CFG, progress=False, resume=state, deadline=Deadline(3600))
    assert _same(full, resumed)
