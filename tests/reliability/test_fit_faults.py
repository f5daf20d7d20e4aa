"""Faults inside the KAN training loop: NaN/inf roll back, Ctrl-C rolls back and resumes bit-identically."""

import importlib
import math

import numpy as np
import pytest
import torch

from kansym.errors import ConfigError, FitError
from kansym.nn.config import KANConfig
from kansym.nn.kan import KAN
from kansym.train.fit import FitResult, TrainConfig, fit
from kansym.train.state import FitInterrupted, FitState

fit_module = importlib.import_module("kansym.train.fit")  # `kansym.train.fit` the attribute is the function


@pytest.fixture(autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _data(n=120):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 2, generator=g, dtype=torch.float64) * 2 - 1
    y = torch.exp(torch.sin(math.pi * x[:, :1]) + x[:, 1:] ** 2)
    return x, (y - y.mean()) / y.std()


def _model():
    return KAN(KANConfig(width=(2, 3, 1), grid_size=5, seed=1)).double()


def _assert_same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


class _Fault:
    """Wraps ``_objective``: from its ``at``-th call on, returns inf or raises KeyboardInterrupt."""

    def __init__(self, at, kind):
        self.at, self.kind, self.calls = at, kind, 0
        self.real = fit_module._objective

    def __call__(self, *args, **kwargs):
        self.calls += 1
        mse, reg = self.real(*args, **kwargs)
        if self.calls >= self.at:
            if self.kind == "interrupt":
                raise KeyboardInterrupt
            return mse * math.inf, reg
        return mse, reg


def test_nan_rolls_back_to_the_last_completed_step(monkeypatch):
    x, y = _data()
    cfg = TrainConfig(steps=6, lamb=0.01, lbfgs_max_iter=5)
    reference = fit(_model(), x, y, cfg.replace(steps=3), progress=False)  # what 3 clean steps give
    fault = _Fault(at=10**9, kind="inf")
    monkeypatch.setattr(fit_module, "_objective", fault)
    fit(_model(), x, y, cfg.replace(steps=3), progress=False)
    per_3_steps = fault.calls  # objective calls of 3 full steps (closures + per-step evaluations)
    fault.calls, fault.at = 0, per_3_steps + 2  # the loss turns inf inside step 3
    with pytest.raises(FitError, match=r"became inf at step 3.*rolled back.*after 3 completed step") as info:
        fit(_model(), x, y, cfg, progress=False)
    err = info.value
    assert isinstance(err.result, FitResult) and err.result.history.step == [0, 1, 2]
    _assert_same_state(err.result.model, reference.model)
    assert all(torch.isfinite(v).all() for v in err.result.model.state_dict().values())
    assert isinstance(err.state, FitState) and err.state.step == 3


def test_diverging_learning_rate_is_stopped_with_finite_parameters():
    # A real divergence, no injection: Adam with a huge step in float32 overflows.
    x, y = _data()
    model = KAN(KANConfig(width=(2, 3, 1), grid_size=5, seed=1))
    cfg = TrainConfig(optimizer="adam", lr=1e30, steps=20, lamb=0.0, grid_update_every=0)
    with pytest.raises(FitError, match="rolled back") as info:
        fit(model, x.float(), y.float(), cfg, progress=False)
    state = info.value.result.model.state_dict()
    assert all(torch.isfinite(v).all() for v in state.values())


@pytest.mark.parametrize(
    "cfg, at",
    [
        # LBFGS: interrupted mid line search of step 7 (after the grid updates at 0 and 5)
        (TrainConfig(steps=9, lamb=0.05, lbfgs_max_iter=4), 7),
        # Adam on mini-batches: the batch generator must continue where it stopped
        (TrainConfig(optimizer="adam", lr=1e-2, steps=12, lamb=0.05, batch_size=16), 8),
        # early stopping: the best state so far travels with the run
        (TrainConfig(optimizer="adam", lr=1e-2, steps=12, lamb=0.0, patience=3, grid_update_every=0), 5),
    ],
)
def test_ctrl_c_then_resume_equals_an_uninterrupted_run(monkeypatch, cfg, at):
    x, y = _data()
    straight = fit(_model(), x, y, cfg, progress=False)

    fault = _Fault(at=10**9, kind="interrupt")
    monkeypatch.setattr(fit_module, "_objective", fault)
    fit(_model(), x, y, cfg.replace(steps=at), progress=False)
    fault.calls, fault.at = 0, fault.calls + 2  # Ctrl-C inside step `at`
    with pytest.raises(FitInterrupted) as info:
        fit(_model(), x, y, cfg, progress=False)
    monkeypatch.setattr(fit_module, "_objective", fault.real)
    stopped = info.value
    assert isinstance(stopped, KeyboardInterrupt)
    assert stopped.state.step == at and stopped.result.history.step == list(range(at))

    # the state survives a plain-data round trip (as in a checkpoint)
    state = FitState.from_dict(stopped.state.to_dict())
    resumed = fit(stopped.result.model, x, y, cfg, progress=False, resume=state)
    _assert_same_state(resumed.model, straight.model)
    for key, values in straight.history.to_dict().items():  # NaN == NaN here (reg without lamb)
        np.testing.assert_array_equal(getattr(resumed.history, key), values, err_msg=key)
    assert resumed.best_step == straight.best_step


def test_resume_refuses_other_options():
    x, y = _data(40)
    cfg = TrainConfig(steps=2, lamb=0.0, lbfgs_max_iter=2)
    result = fit(_model(), x, y, cfg, progress=False)
    state = FitState(step=2, optimizer={}, generator=torch.Generator().get_state(),
                     history=result.history.to_dict(), config=cfg.to_dict())
    with pytest.raises(ConfigError, match=r"cannot resume with lamb=0.5.*started with lamb=0.0"):
        fit(result.model, x, y, cfg.replace(lamb=0.5), progress=False, resume=state)
    with pytest.raises(ConfigError, match="already completed 2 steps"):
        fit(result.model, x, y, cfg.replace(steps=1), progress=False, resume=state)
