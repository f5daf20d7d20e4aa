import math

import pytest
import torch

from kansym.errors import ConfigError, FitError
from kansym.nn import KAN, KANConfig
from kansym.train.fit import FitResult, TrainConfig, finetune, fit


def _sine(n=200, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=gen) * 2 - 1
    return x, torch.sin(math.pi * x)


DENSE = TrainConfig(lamb=0.0, steps=15, stop_grid_update_step=10, num_threads=1)


def test_learns_a_1d_function():
    x, y = _sine()
    result = fit(KAN(KANConfig(width=(1, 1), grid_size=10)), x, y, DENSE, progress=False)
    assert isinstance(result, FitResult)
    assert result.history.val_loss[-1] < 1e-4
    assert len(result.history.step) == DENSE.steps
    assert all(math.isnan(r) for r in result.history.reg)  # lamb = 0: no trace
    pred = result.model(x).detach()
    assert float(torch.mean((pred - y) ** 2)) < 1e-4


def test_sparsified_fit_records_reg():
    x, y = _sine()
    cfg = TrainConfig(steps=3, lamb=0.01, num_threads=1)
    result = fit(KAN(KANConfig(width=(1, 2, 1))), x, y, cfg, progress=False)
    assert all(math.isfinite(r) and r > 0 for r in result.history.reg)


def test_input_model_unchanged_and_same_seed_same_state():
    x, y = _sine()
    model = KAN(KANConfig(width=(1, 3, 1), seed=1))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = TrainConfig(steps=4, lamb=0.01, num_threads=1)
    a = fit(model, x, y, cfg, progress=False)
    b = fit(model, x, y, cfg, progress=False)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k]), k
    assert not torch.equal(a.model.layers[0].coef, model.layers[0].coef)


def test_early_stopping_restores_the_best_state():
    # pure noise on a fine grid: the validation loss rises once the model overfits
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(60, 1, generator=gen) * 2 - 1
    y = torch.randn(60, 1, generator=gen)
    cfg = TrainConfig(
        optimizer="adam", lr=0.05, steps=300, lamb=0.0, grid_update_every=0, val_fraction=0.5, patience=5, seed=3
    )
    result = fit(KAN(KANConfig(width=(1, 1), grid_size=30)), x, y, cfg, progress=False)
    hist = result.history
    assert result.stopped_early and len(hist.step) < cfg.steps
    best = min(range(len(hist.val_loss)), key=hist.val_loss.__getitem__)
    assert result.best_step == best < len(hist.step) - 1
    # the returned model is the best one: recompute its validation loss on the same split
    perm = torch.randperm(60, generator=torch.Generator().manual_seed(3))
    val = perm[:30]
    with torch.no_grad():
        val_loss = float(torch.mean((result.model(x[val]) - y[val]) ** 2))
    assert val_loss == pytest.approx(hist.val_loss[best], rel=1e-5)
    assert val_loss < hist.val_loss[-1]


def test_non_finite_loss_raises_fit_error_with_partial_result():
    x, y = _sine(50)
    y = y.clone()
    y[3] = float("inf")
    with pytest.raises(FitError) as info:
        fit(KAN(KANConfig(width=(1, 1))), x, y, TrainConfig(steps=3, lamb=0.0, val_fraction=0.0), progress=False)
    assert isinstance(info.value.result, FitResult)


@pytest.mark.parametrize(
    "changes",
    [
        {"lamb": -0.1},
        {"steps": 0},
        {"optimizer": "sgd"},
        {"val_fraction": 1.0},
        {"patience": 3, "val_fraction": 0.0},
        {"batch_size": 32},  # LBFGS needs the full batch
        {"mu2": -1.0},
        {"lr": 0.0},
        {"device": "no-such-device"},
    ],
)
def test_invalid_config_raises(changes):
    with pytest.raises(ConfigError):
        TrainConfig(**changes)


def test_config_round_trip_and_unknown_keys():
    cfg = TrainConfig(optimizer="adam", lr=1e-2, batch_size=16, patience=4)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError):
        TrainConfig.from_dict({"lambda": 1.0})


def test_shape_mismatch_raises():
    x, y = _sine(20)
    with pytest.raises(ConfigError):
        fit(KAN(KANConfig(width=(2, 1))), x, y, DENSE, progress=False)
    with pytest.raises(ConfigError):
        fit(KAN(KANConfig(width=(1, 1))), x, y[:10], DENSE, progress=False)


def test_adam_minibatch_and_thread_setting_restored():
    x, y = _sine()
    threads = torch.get_num_threads()
    cfg = TrainConfig(optimizer="adam", lr=0.02, steps=20, batch_size=32, lamb=0.0, num_threads=1)
    result = fit(KAN(KANConfig(width=(1, 1))), x, y, cfg, progress=False)
    assert result.history.train_loss[-1] < result.history.train_loss[0]
    assert torch.get_num_threads() == threads


def test_finetune_extends_the_grid():
    x, y = _sine()
    model = KAN(KANConfig(width=(1, 1), grid_size=3))
    result = finetune(model, x, y, grid_size=12, config=DENSE, progress=False)
    assert result.model.layers[0].grid_size == 12
    assert result.model.config.grid_size == 12
    assert model.layers[0].grid_size == 3
    with pytest.raises(ConfigError):
        finetune(model, x, y, grid_size=0, progress=False)


def test_optimizer_snapshot_is_a_detached_copy_equal_to_deepcopy():
    import copy

    from kansym.train.state import snapshot_optimizer

    w = torch.nn.Parameter(torch.tensor([1.5, -0.5], dtype=torch.float64))
    opt = torch.optim.LBFGS([w], max_iter=5, history_size=3, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((w - torch.tensor([0.3, 0.7], dtype=torch.float64)) ** 4).sum()
        loss.backward()
        return loss

    opt.step(closure)
    snap, ref = snapshot_optimizer(opt), copy.deepcopy(opt.state_dict())
    state = snap["state"][0]
    assert len(state["old_dirs"]) >= 2
    for key, value in ref["state"][0].items():
        if isinstance(value, torch.Tensor):
            torch.testing.assert_close(state[key], value, rtol=0, atol=0)
        elif isinstance(value, list):
            assert len(state[key]) == len(value)
            for a, b in zip(state[key], value):
                assert (a is None and b is None) or torch.equal(a, b)
        else:
            assert state[key] == value
    assert snap["param_groups"] == ref["param_groups"]
    before = state["prev_flat_grad"].clone()
    opt.step(closure)  # LBFGS updates prev_flat_grad in place: the snapshot must not follow
    assert torch.equal(state["prev_flat_grad"], before)
    assert not torch.equal(opt.state_dict()["state"][0]["prev_flat_grad"], before)


def test_lbfgs_on_the_flat_parameter_vector_equals_lbfgs_on_the_tensors():
    """The flat parameter view changes LBFGS's bookkeeping, not its arithmetic: same model bit for bit.

    In float32, where ``fit`` runs torch's LBFGS (float64 on the CPU takes
    :class:`kansym.train.lbfgs.FlatLBFGS`, tested in test_lbfgs.py)."""
    import importlib

    from kansym.nn import KAN, KANConfig
    from kansym.train.config import TrainConfig

    fit_module = importlib.import_module("kansym.train.fit")  # the module (kansym.train.fit is also the function)
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(200, 2, generator=gen, dtype=torch.float32) * 2 - 1
    y = torch.exp(torch.sin(torch.pi * x[:, :1]) + x[:, 1:] ** 2)
    model = KAN(KANConfig(width=(2, 3, 1), seed=0)).float()
    config = TrainConfig(steps=6, num_threads=1, grid_update_every=3, stop_grid_update_step=4)
    flat = fit_module.fit(model, x, y, config, progress=False).model

    class Tensors:  # the previous path: LBFGS over the separate parameter tensors
        def __init__(self, params):
            self.params, self.flat = params, self
            self.dtype, self.device = params[0].dtype, params[0].device

        def zero_grad(self):
            for p in self.params:
                p.grad = None

        def release(self):
            pass

    optim_module = importlib.import_module("kansym.train.optim")  # where fit makes its optimizer
    real_lbfgs = torch.optim.LBFGS
    original = optim_module.FlatParams
    try:
        optim_module.FlatParams = Tensors
        torch.optim.LBFGS = lambda params, **kw: real_lbfgs(params[0].params, **kw)
        tensors = fit_module.fit(model, x, y, config, progress=False).model
    finally:
        optim_module.FlatParams, torch.optim.LBFGS = original, real_lbfgs
    for (name, a), b in zip(flat.state_dict().items(), tensors.state_dict().values()):
        assert torch.equal(a, b), name
    storages = {p.untyped_storage().data_ptr() for p in flat.parameters()}
    assert len(storages) == len(list(flat.parameters()))  # released: every parameter has its own memory again


def test_an_lbfgs_state_saved_over_separate_tensors_loads_into_the_flat_optimizer():
    import importlib

    optim_module = importlib.import_module("kansym.train.optim")
    a = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
    b = torch.nn.Parameter(torch.tensor([[0.5]], dtype=torch.float64))

    def closure():
        a.grad = b.grad = None
        loss = (a**2).sum() + 3 * (b**2).sum() + a[0] * b[0, 0]
        loss.backward()
        return loss

    old = torch.optim.LBFGS([a, b], max_iter=3)
    old.step(closure)
    saved = old.state_dict()
    flat = optim_module.FlatParams([a, b])
    new = torch.optim.LBFGS([flat.flat], max_iter=3)
    new.load_state_dict(optim_module.as_flat_lbfgs_state(saved))
    assert torch.equal(new.state[flat.flat]["d"], old.state[a]["d"])  # the same flat direction
    assert new.state[flat.flat]["n_iter"] == old.state[a]["n_iter"] > 0
    flat.release()


def test_fit_passes_the_feature_cache_explicitly_and_it_changes_no_number(monkeypatch):
    """fit hands one FeatureCache to every forward of the run; a cache that never reuses gives the same model bit for bit."""
    import importlib

    from kansym.nn.fast.cache import FeatureCache, features_of

    fit_module = importlib.import_module("kansym.train.fit")
    caches = []

    class Counting(FeatureCache):
        def __init__(self):
            super().__init__()
            caches.append(self)

    class NoReuse(FeatureCache):  # computes the features afresh on every call
        def features(self, x, xc, plan, *, with_base, with_deriv, aux=False):
            return features_of(x, xc, plan, None, with_base, with_deriv, aux)

    x, y = _sine(n=120)
    model = KAN(KANConfig(width=(1, 3, 1), seed=2)).double()
    cfg = TrainConfig(steps=6, lamb=0.01, grid_update_every=3, stop_grid_update_step=5, num_threads=1)
    monkeypatch.setattr(fit_module, "FeatureCache", Counting)
    cached = fit(model, x.double(), y.double(), cfg, progress=False).model
    monkeypatch.setattr(fit_module, "FeatureCache", NoReuse)
    fresh = fit(model, x.double(), y.double(), cfg, progress=False).model
    assert len(caches) == 1 and caches[0].hits > 10  # one cache, reused in the closures and evaluations
    for (name, a), b in zip(cached.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    assert all(not hasattr(layer, "feature_cache") for layer in cached.layers)
