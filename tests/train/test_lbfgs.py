"""kansym.train.lbfgs.FlatLBFGS: torch's LBFGS method in numpy, same path to rounding."""

import importlib

import pytest
import torch

from kansym.train.lbfgs import FlatLBFGS

TORCH_OPTIONS = dict(lr=1.0, max_iter=20, history_size=10, tolerance_grad=1e-32, tolerance_change=1e-32)


def _problem(seed: int = 0):
    """A smooth non-quadratic objective on 30 parameters and a closure factory."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(30, 30, generator=gen, dtype=torch.float64)
    a = a @ a.T / 30 + 0.1 * torch.eye(30, dtype=torch.float64)
    b = torch.randn(30, generator=gen, dtype=torch.float64)

    def make(start=None):
        p = torch.nn.Parameter(torch.zeros(30, dtype=torch.float64) if start is None else start.clone())
        p.grad = torch.zeros_like(p)

        def closure():
            p.grad.zero_()
            loss = 0.5 * p @ a @ p - b @ p + 0.1 * (p**4).sum() + 0.05 * torch.sin(3 * p).sum()
            loss.backward()
            return loss

        return p, closure

    return make


def test_one_step_follows_torch_lbfgs_to_rounding():
    make = _problem()
    p1, c1 = make()
    p2, c2 = make()
    ref = torch.optim.LBFGS([p1], line_search_fn="strong_wolfe", **TORCH_OPTIONS)
    ours = FlatLBFGS(p2, **TORCH_OPTIONS)
    l1, l2 = ref.step(c1), ours.step(c2)
    assert float(l1.detach()) == float(l2.detach()) == 0.0  # the loss at the start
    assert float(c1().detach()) < -8.6  # moved far from the start (minimum near -8.675)
    assert torch.allclose(p1, p2, rtol=0, atol=1e-10)
    assert ours.state["func_evals"] == ref.state[p1]["func_evals"] == 24
    assert ours.state["n_iter"] == ref.state[p1]["n_iter"] == 20


def test_state_dicts_resume_in_either_optimizer():
    make = _problem(1)
    options = dict(TORCH_OPTIONS, max_iter=4)
    p1, c1 = make()
    ref = torch.optim.LBFGS([p1], line_search_fn="strong_wolfe", **options)
    ref.step(c1)
    # torch -> ours: the next step from torch's memory equals torch's own next step
    p2, c2 = make(p1.detach())
    ours = FlatLBFGS(p2, **options)
    ours.load_state_dict(ref.state_dict())
    ref.step(c1)
    ours.step(c2)
    assert torch.allclose(p1, p2, rtol=0, atol=1e-10)
    # ours -> torch
    p3, c3 = make(p2.detach())
    back = torch.optim.LBFGS([p3], line_search_fn="strong_wolfe", **options)
    back.load_state_dict(ours.state_dict())
    assert back.state[p3]["n_iter"] == ours.state["n_iter"] > 4
    ours.step(c2)
    back.step(c3)
    assert torch.allclose(p2, p3, rtol=0, atol=1e-10)


def test_a_fresh_state_dict_is_empty_and_a_wrong_size_is_refused():
    p = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    p.grad = torch.zeros_like(p)
    opt = FlatLBFGS(p)
    assert opt.state_dict()["state"] == {}
    q = torch.nn.Parameter(torch.zeros(5, dtype=torch.float64))
    q.grad = torch.zeros_like(q)
    other = FlatLBFGS(q)

    def closure():
        q.grad.zero_()
        loss = ((q - 1) ** 2).sum()
        loss.backward()
        return loss

    other.step(closure)
    assert torch.allclose(q, torch.ones(5, dtype=torch.float64))
    with pytest.raises(ValueError, match="5 entries"):
        opt.load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="float64"):
        FlatLBFGS(torch.nn.Parameter(torch.zeros(3)))


def test_fit_with_it_ends_where_fit_with_torch_lbfgs_ends():
    """A KAN fit (grid updates, sparsity) takes it for float64 and reaches torch's model."""
    from kansym.nn import KAN, KANConfig
    from kansym.train.config import TrainConfig

    fit_module = importlib.import_module("kansym.train.fit")
    optim_module = importlib.import_module("kansym.train.optim")  # where fit makes its optimizer
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(300, 2, generator=gen, dtype=torch.float64) * 2 - 1
    y = torch.exp(torch.sin(torch.pi * x[:, :1]) + x[:, 1:] ** 2)
    model = KAN(KANConfig(width=(2, 3, 1), seed=0)).double()
    config = TrainConfig(steps=4, lamb=0.0, num_threads=1, grid_update_every=2, stop_grid_update_step=3)
    used = []
    real = optim_module.FlatLBFGS

    def spy(param, **kw):
        used.append(type(param))
        return real(param, **kw)

    try:
        optim_module.FlatLBFGS = spy
        ours = fit_module.fit(model, x, y, config, progress=False)
        optim_module.FlatLBFGS = lambda param, **kw: torch.optim.LBFGS([param], line_search_fn="strong_wolfe", **kw)
        ref = fit_module.fit(model, x, y, config, progress=False)
    finally:
        optim_module.FlatLBFGS = real
    assert used  # the numpy optimizer ran
    assert ours.history.train_loss[-1] < 1e-3
    assert ours.history.train_loss[-1] == pytest.approx(ref.history.train_loss[-1], rel=1e-6)
    for (name, a), b in zip(ours.model.state_dict().items(), ref.model.state_dict().values()):
        assert torch.allclose(a, b, rtol=0, atol=1e-6), name
