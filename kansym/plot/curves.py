"""Training curves from a checkpoint's history: losses and the regularisation term over steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from kansym.errors import CheckpointError

__all__ = ["CurvesResult", "plot_curves"]


@dataclass(frozen=True)
class CurvesResult:
    """What :func:`plot_curves` drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure
    n_steps : int
        Steps of the sparsifying training.
    n_finetune_steps : int
        Steps of the fine-tuning after pruning (0 when the checkpoint has none).
    """

    figure: Any
    n_steps: int
    n_finetune_steps: int


def _series(hist: Mapping, key: str) -> np.ndarray:
    return np.asarray([np.nan if v is None else float(v) for v in hist.get(key, [])], dtype=float)


def _positive(ax: Any, x: np.ndarray, y: np.ndarray, **kw: Any) -> bool:
    """Plot where ``y`` is finite and positive (log axis); True if anything was drawn."""
    ok = np.isfinite(y) & (y > 0)
    if ok.any():
        ax.plot(x[ok], y[ok], **kw)
    return bool(ok.any())


def plot_curves(meta: Mapping[str, Any]) -> CurvesResult:
    """Train and validation loss, and the penalty, over the steps of a run.

    The sparsifying training (``meta["history"]``) comes first; the fine-tuning of the
    pruned model (``meta["finetune_history"]``, present in ``pruned.pt``) follows it,
    after a dotted line marking the pruning.

    Parameters
    ----------
    meta : mapping
        A bundle's ``meta`` (``ModelBundle.meta``) with ``history`` lists ``step``,
        ``train_loss``, ``val_loss``, ``reg`` (see :class:`kansym.train.fit.History`).

    Returns
    -------
    CurvesResult

    Raises
    ------
    CheckpointError
        If the checkpoint holds no training history.
    """
    from kansym.plot._mpl import new_figure

    hist = meta.get("history") or {}
    if not hist.get("train_loss"):
        raise CheckpointError("this checkpoint holds no training history; plot the model.pt or pruned.pt that kansym fit/train wrote")
    ft = meta.get("finetune_history") or {}
    n = len(hist["train_loss"])
    m = len(ft.get("train_loss", []))
    steps = np.arange(n, dtype=float)
    ft_steps = n + np.arange(m, dtype=float)

    fig = new_figure(7.0, 5.2)
    loss_ax, reg_ax = fig.subplots(2, 1, sharex=True, gridspec_kw={"hspace": 0.12})
    _positive(loss_ax, steps, _series(hist, "train_loss"), color="tab:blue", label="train")
    _positive(loss_ax, steps, _series(hist, "val_loss"), color="tab:orange", label="validation")
    if m:
        _positive(loss_ax, ft_steps, _series(ft, "train_loss"), color="tab:blue", ls="--", label="train (fine-tune)")
        _positive(loss_ax, ft_steps, _series(ft, "val_loss"), color="tab:orange", ls="--", label="validation (fine-tune)")
        for ax in (loss_ax, reg_ax):
            ax.axvline(n - 0.5, color="0.5", ls=":", lw=1)
        loss_ax.text(n - 0.5, 1.0, " pruned", transform=loss_ax.get_xaxis_transform(), va="top", fontsize=8, color="0.4")
    loss_ax.set_yscale("log")
    loss_ax.set_ylabel("MSE (model units)")
    loss_ax.legend(fontsize=8)
    lamb = (meta.get("train_config") or {}).get("lamb")
    title = "training" + (f" (lamb = {lamb:g})" if isinstance(lamb, (int, float)) else "")
    loss_ax.set_title(title, fontsize=10)
    drew = _positive(reg_ax, steps, _series(hist, "reg"), color="tab:green", label="L1 + entropy penalty (without lamb)")
    if drew:
        reg_ax.set_yscale("log")
        reg_ax.legend(fontsize=8)
    else:
        reg_ax.text(0.5, 0.5, "no regularisation recorded (lamb = 0)", ha="center", va="center", transform=reg_ax.transAxes, color="0.4")
    reg_ax.set_ylabel("penalty")
    reg_ax.set_xlabel("step")
    return CurvesResult(fig, n, m)
