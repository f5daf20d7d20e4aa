"""The optimizer of a training run: LBFGS on the model's parameters as one flat vector, or Adam.

LBFGS (Nocedal & Wright 2006, *Numerical Optimization*, 2nd ed., ch. 7) with a
strong-Wolfe line search, the optimizer of the KAN paper (Liu et al. 2024,
arXiv:2404.19756, §2.5); on CPU float64 the numpy implementation of
:mod:`kansym.train.lbfgs`, else torch's. Used by :func:`kansym.train.fit.fit`, which makes
a new one after every grid update (the curvature history refers to the old grid).
"""

from __future__ import annotations

import torch

from kansym.train.config import TrainConfig
from kansym.train.lbfgs import FlatLBFGS

__all__ = ["FlatParams", "as_flat_lbfgs_state", "make_optimizer"]


class FlatParams:
    """A model's parameters as views of one flat tensor, their gradients as views of another.

    torch's LBFGS works on one flat vector anyway (it concatenates the gradients, and
    splits every update, line-search trial and restore over the parameter tensors, a
    few tensor ops per parameter each time); handing it the single flat parameter makes
    each of those one op, with the same arithmetic (the same numbers in the same order).
    The gradients accumulate in place into their views (``AccumulateGrad`` adds into an
    existing ``.grad`` outside ``create_graph``). :meth:`release` gives every parameter
    its own memory again; a reassignment of ``p.data`` (``update_grid``) also ends the
    sharing, so a new one is made with every new optimizer.
    """

    def __init__(self, params: list[torch.nn.Parameter]) -> None:
        self.params = params
        with torch.no_grad():
            self.flat = torch.nn.Parameter(torch.cat([p.detach().reshape(-1) for p in params]))
        self.flat.grad = torch.zeros_like(self.flat)
        start = 0
        for p in params:
            stop = start + p.numel()
            p.data = self.flat.data[start:stop].view_as(p)
            p.grad = self.flat.grad[start:stop].view_as(p)
            start = stop

    def zero_grad(self) -> None:
        self.flat.grad.zero_()

    def release(self) -> None:
        for p in self.params:
            p.data = p.data.clone()
            p.grad = None


def as_flat_lbfgs_state(state: dict) -> dict:
    """An LBFGS ``state_dict`` for the one flat parameter of :class:`FlatParams`.

    LBFGS keeps its whole state (directions, history, step) under its first parameter, as
    flat vectors over all parameters in order, so a state saved over separate parameter
    tensors (resume checkpoints written before the flat parameters) becomes the flat one by renumbering its
    parameter list.
    """
    groups = state.get("param_groups", [])
    if len(groups) == 1 and len(groups[0].get("params", [])) > 1:
        state = {**state, "param_groups": [{**groups[0], "params": [groups[0]["params"][0]]}]}
    return state


def make_optimizer(
    model: torch.nn.Module, config: TrainConfig, flat: FlatParams | None
) -> tuple[torch.optim.Optimizer, FlatParams | None]:
    """A fresh optimizer of ``model``'s parameters as ``config.optimizer`` says.

    Parameters
    ----------
    model : torch.nn.Module
    config : TrainConfig
        ``optimizer`` ("lbfgs" or "adam"), ``lr``, ``lbfgs_max_iter``.
    flat : FlatParams or None
        The previous optimizer's flat parameters (released here: a grid update reassigns
        ``p.data``, which ends the sharing anyway).

    Returns
    -------
    optimizer : torch.optim.Optimizer
    flat : FlatParams or None
        The new flat parameters (LBFGS) whose gradient the closure zeroes; None for Adam.
    """
    if config.optimizer != "lbfgs":
        return torch.optim.Adam(model.parameters(), lr=config.lr), None
    if flat is not None:
        flat.release()
    flat = FlatParams(list(model.parameters()))
    if flat.flat.dtype == torch.float64 and flat.flat.device.type == "cpu":
        # the same method in numpy: torch's per-op overhead was a quarter of the fit (lbfgs.py)
        return FlatLBFGS(flat.flat, lr=config.lr, max_iter=config.lbfgs_max_iter, history_size=10,
                         tolerance_grad=1e-32, tolerance_change=1e-32), flat
    return torch.optim.LBFGS(
        [flat.flat],
        lr=config.lr,
        max_iter=config.lbfgs_max_iter,
        history_size=10,
        line_search_fn="strong_wolfe",
        tolerance_grad=1e-32,
        tolerance_change=1e-32,
    ), flat
