"""Node pruning of the KAN FFN hidden units of a KAN-GPT.

Hidden unit ``i`` of a KAN FFN (``C -> h -> C``) has an incoming score
``I_i = max_j e(fc)_{i j}`` (the strongest edge entering it) and an outgoing score
``O_i = max_j e(proj)_{j i}`` (the strongest edge leaving it); its strength is
``min(I_i, O_i)`` and it survives iff the strength exceeds ``theta`` (Liu et al. 2024,
"KAN: Kolmogorov–Arnold Networks", arXiv:2404.19756, §2.5.1).

Two edge magnitudes ``e`` are offered:

* ``score="weight"`` (default without text): the weight-based magnitudes of
  :func:`kansym.gpt.ffn.edge_scores` (``|w_b| + |w_s| mean_k |c_k|``), the quantity
  the sparsification penalises. Cheap, but blind to the inputs: a spline whose
  coefficients are large where no input ever falls scores high.
* ``score="sample"``: the paper's own definition (eq. 2.17), the mean over real
  tokens of ``|phi_ij(x_s)|``, with ``x_s`` the FFN's actual inputs (the ``ln_2``
  outputs, then the hidden activations) on a batch of text. Exact for what the model
  does on that text; costs one forward pass plus a ``(tokens, h, C)`` edge tensor per
  layer, evaluated in chunks.
* ``score="output"``: not the paper's ``min(I, O)`` but what removing unit ``i``
  takes away from the residual stream, ``c_i(s) = (phi_ji(h_i(s)))_j`` in ``R^C``;
  the strength is ``sqrt(mean_s ||c_i(s)||^2)`` on the same tokens. KAN layers have
  no bias, and a sparsified KAN-GPT keeps units whose incoming edges are dead (a
  constant ``h_i``) as biases: ``min(I, O)`` scores them as negligible, removing them
  shifts every token's residual stream. The output score keeps them.

With ``relative=True`` the strengths of each KAN FFN are divided by the largest one
of that FFN, so ``theta`` is a fraction of the layer's strongest unit (in ``(0, 1]``)
rather than an absolute magnitude; layers whose activations differ in scale are then
pruned by the same rule.

Removed units are sliced out of the tensors, so the pruned model is physically
smaller and computes exactly what the model with those units masked (incoming and
outgoing edges) computes.

GR-KAN FFNs (:class:`kansym.gpt.grkan.GRKANFFN`) are pruned by the same rules: their
edge ``(j, i)`` is ``w_ji F_g(i)(x_i)``, so its weight-based magnitude is
``|w_ji| rms(F_g(i))`` (:meth:`~kansym.gpt.grkan.GRKANFFN.edge_scores`), its sampled one
``|w_ji| mean_s |F_g(i)(x_si)|``, and a hidden unit's output contribution is
``||W_2[:, i]|| rms_s F_2(h_i(s))``. A removed unit takes its row of ``c_fc``, its
column of ``c_proj`` and its entry of the hidden rational's group map with it; the
group coefficients stay. MLP and SwiGLU FFNs are not pruned (no edge functions).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kansym.config import THETA
from kansym.errors import ConfigError
from kansym.gpt.ffn import KANFFN, edge_scores
from kansym.gpt.grkan import GRKANFFN
from kansym.gpt.model import KANGPT

__all__ = ["GPTPruneResult", "SCORES", "ffn_inputs", "node_scores", "output_scores", "prune_gpt", "unit_strengths"]


# Per-edge tensors of a KAN layer, laid out (out, in, ...).
_EDGE_TENSORS = ("coef", "scale_base", "scale_sp", "mask")


@dataclass(frozen=True)
class GPTPruneResult:
    """A pruned KAN-GPT and what was removed.

    Attributes
    ----------
    model : KANGPT
        The smaller model (new config with reduced ``kan_hidden``).
    kept : dict of int -> list of int
        Per KAN layer, the indices of the surviving hidden units in the original model.
    report : dict
        Plain summary: ``theta``, per-layer ``before``/``after`` widths, totals and
        parameter counts before and after.
    """

    model: KANGPT
    kept: dict[int, list[int]]
    report: dict


@torch.no_grad()
def ffn_inputs(model: KANGPT, idx: torch.Tensor) -> dict[int, torch.Tensor]:
    """The inputs of every KAN FFN of ``model`` on the token batch ``idx``.

    Parameters
    ----------
    model : KANGPT
    idx : LongTensor (B, T)

    Returns
    -------
    dict of int -> Tensor (B T, C)
        Per KAN layer, the ``ln_2`` outputs the FFN receives, one row per token.
    """
    captured: dict[int, torch.Tensor] = {}
    handles = []
    for layer, ffn in _ffns(model):
        def hook(module, args, layer=layer):
            captured[layer] = args[0].reshape(-1, args[0].shape[-1]).detach()
        handles.append(ffn.register_forward_pre_hook(hook))
    was_training = model.training
    model.eval()
    try:
        model(idx.to(next(model.parameters()).device))
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return captured


def _ffns(model: KANGPT) -> list:
    """``(layer, ffn)`` of every prunable FFN: KAN and GR-KAN."""
    return [(i, b.ffn) for i, b in enumerate(model.blocks) if isinstance(b.ffn, (KANFFN, GRKANFFN))]


def _grkan_node_scores(ffn: GRKANFFN, x: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(e_fc (h, C), e_proj (C, h))`` of a GR-KAN FFN, weight-based or sampled on ``x (N, C)``."""
    if x is None:
        return ffn.edge_scores()
    hidden = ffn.c_fc(ffn.act_in(x))  # (N, h)
    e_fc = ffn.c_fc.weight.abs() * ffn.act_in(x).abs().mean(dim=0)  # (h, C)
    e_proj = ffn.c_proj.weight.abs() * ffn.act_hidden(hidden).abs().mean(dim=0)  # (C, h)
    return e_fc, e_proj


def _mean_abs_edges(layer, x: torch.Tensor, chunk: int) -> torch.Tensor:
    """``mean_s |phi_ji(x_si)|`` of every edge of a KAN layer: ``(N, in) -> (out, in)``."""
    total = x.new_zeros(layer.out_features, layer.in_features)
    for start in range(0, x.shape[0], chunk):
        total += layer.edge_outputs(x[start:start + chunk]).abs().sum(dim=0)  # (out, in)
    return total / x.shape[0]


@torch.no_grad()
def node_scores(ffn: KANFFN, x: torch.Tensor | None = None, *, chunk: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """Incoming and outgoing scores of the hidden units of a KAN FFN.

    Parameters
    ----------
    ffn : KANFFN
    x : Tensor (N, C), optional
        The FFN's inputs on real tokens (:func:`ffn_inputs`). Without it the scores are
        weight-based (:func:`kansym.gpt.ffn.edge_scores`); with it they are the
        sampled edge magnitudes ``mean_s |phi(x_s)|`` of the KAN paper's eq. 2.17.
    chunk : int
        Tokens per edge-tensor evaluation (memory ``chunk * h * C`` floats).

    Returns
    -------
    incoming, outgoing : Tensor (h,)
    """
    if isinstance(ffn, GRKANFFN):
        e_fc, e_proj = _grkan_node_scores(ffn, x)
    elif x is None:
        e_fc, e_proj = edge_scores(ffn.fc), edge_scores(ffn.proj)
    else:
        e_fc = _mean_abs_edges(ffn.fc, x, chunk)  # (h, C)
        e_proj = _mean_abs_edges(ffn.proj, ffn.fc(x), chunk)  # (C, h)
    incoming = e_fc.amax(dim=1)  # (h, C) -> (h,)
    outgoing = e_proj.amax(dim=0)  # (C, h) -> (h,)
    return incoming, outgoing


@torch.no_grad()
def output_scores(ffn: KANFFN, x: torch.Tensor, *, chunk: int = 256) -> torch.Tensor:
    """RMS norm of each hidden unit's contribution to the FFN output on real tokens.

    Parameters
    ----------
    ffn : KANFFN
    x : Tensor (N, C)
        The FFN's inputs (:func:`ffn_inputs`).

    Returns
    -------
    Tensor (h,)
        ``sqrt(mean_s sum_j phi_ji(h_i(s))^2)``, ``phi_ji`` the edges of ``ffn.proj``.
    """
    if isinstance(ffn, GRKANFFN):
        f2 = ffn.act_hidden(ffn.c_fc(ffn.act_in(x)))  # (N, h)
        return ffn.c_proj.weight.norm(dim=0) * f2.pow(2).mean(dim=0).sqrt()
    hidden = ffn.fc(x)  # (N, h)
    total = x.new_zeros(ffn.hidden)
    for start in range(0, x.shape[0], chunk):
        total += ffn.proj.edge_outputs(hidden[start:start + chunk]).pow(2).sum(dim=(0, 1))  # (n, C, h) -> (h,)
    return (total / x.shape[0]).sqrt()


SCORES = ("weight", "sample", "output")


def _check_score(score: str | None, idx: torch.Tensor | None) -> str:
    score = score or ("weight" if idx is None else "sample")
    if score not in SCORES:
        raise ConfigError(f"unknown pruning score {score!r}; choose from {', '.join(SCORES)}")
    if score != "weight" and idx is None:
        raise ConfigError(f"the {score!r} score needs tokens of real text (idx)")
    return score


@torch.no_grad()
def unit_strengths(
    model: KANGPT, idx: torch.Tensor | None = None, *, score: str | None = None, relative: bool = False
) -> dict[int, torch.Tensor]:
    """The strength of every hidden unit of every KAN FFN (module docstring).

    Parameters
    ----------
    model : KANGPT
    idx : LongTensor (B, T), optional
        Tokens of real text, needed by the ``sample`` and ``output`` scores.
    score : {"weight", "sample", "output"}, optional
        Default: ``sample`` when ``idx`` is given, else ``weight``. ``weight`` and
        ``sample`` give ``min(incoming, outgoing)`` (:func:`node_scores`), ``output``
        the unit's contribution (:func:`output_scores`).
    relative : bool
        Divide each FFN's strengths by its largest one.

    Returns
    -------
    dict of int -> Tensor (h,)
    """
    score = _check_score(score, idx)
    inputs = ffn_inputs(model, idx) if score != "weight" else {}
    out = {}
    for layer, ffn in _ffns(model):
        if score == "output":
            strength = output_scores(ffn, inputs[layer])
        else:
            incoming, outgoing = node_scores(ffn, inputs.get(layer))
            strength = torch.minimum(incoming, outgoing)  # (h,)
        if relative:
            strength = strength / strength.max().clamp_min(1e-30)
        out[layer] = strength
    return out


def _slice_layer(sd: dict, prefix: str, index: torch.Tensor, dim: int) -> None:
    """Keep the outputs (``dim=0``) or inputs (``dim=1``) ``index`` of the KAN layer at ``prefix``."""
    if f"{prefix}.coef_in" in sd:  # LowRankKANLayer: U (out, r) holds the outputs, V (r, in, K) the inputs
        names = ("scale_base", "coef_out") if dim == 0 else ("scale_base", "coef_in")
        grid = f"{prefix}.basis_fn.grid"
    else:
        names = _EDGE_TENSORS
        grid = f"{prefix}.grid"
    for name in names:
        key = f"{prefix}.{name}"
        sd[key] = sd[key].index_select(dim, index).clone()
    if dim == 1 and grid in sd:  # a B-spline grid is per input feature: (in, G + 2k + 1)
        sd[grid] = sd[grid].index_select(0, index).clone()


def _slice_grkan(sd: dict, prefix: str, index: torch.Tensor) -> None:
    """Keep the hidden units ``index`` of the GR-KAN FFN at ``prefix``."""
    for key, dim in ((f"{prefix}.c_fc.weight", 0), (f"{prefix}.c_fc.bias", 0), (f"{prefix}.act_hidden.group", 0),
                     (f"{prefix}.c_proj.weight", 1)):
        if key in sd:
            sd[key] = sd[key].index_select(dim, index).clone()


@torch.no_grad()
def _surviving_units(strength: torch.Tensor, theta: float, floor: int) -> torch.Tensor:
    """Indices (sorted) of the units of ``strength (h,)`` above ``theta``, or its ``floor`` strongest
    when fewer survive."""
    keep = torch.nonzero(strength > theta).flatten()
    if keep.numel() < floor:
        keep = torch.sort(torch.topk(strength, min(floor, strength.numel())).indices).values
    return keep


def prune_gpt(
    model: KANGPT,
    theta: float = THETA,
    *,
    idx: torch.Tensor | None = None,
    score: str | None = None,
    relative: bool = False,
) -> GPTPruneResult:
    """Remove the KAN FFN hidden units whose incoming or outgoing score is below ``theta``.

    Every KAN FFN keeps at least its strongest unit (``min(I, O)`` largest), a
    factorised one (``config.kan_rank = r``) its ``r`` strongest units, so that its rank
    stays within its full rank. MLP layers, attention and embeddings are unchanged;
    the input model is not modified.

    Parameters
    ----------
    model : KANGPT
    theta : float
        Score threshold (docs/algorithms.md §11), > 0; a fraction of each layer's strongest
        unit when ``relative``.
    idx : LongTensor (B, T), optional
        Tokens of real text for the ``sample`` and ``output`` scores.
    score : {"weight", "sample", "output"}, optional
        See :func:`unit_strengths`; default ``sample`` with ``idx``, else ``weight``.
    relative : bool
        Threshold each FFN's strengths relative to its strongest unit.

    Returns
    -------
    GPTPruneResult

    Raises
    ------
    ConfigError
        If ``theta`` is not positive or the model has no KAN FFN.
    """
    if not theta > 0:
        raise ConfigError(f"theta must be positive, got {theta}")
    ffns = _ffns(model)
    if not ffns:
        raise ConfigError("the model has no KAN or GR-KAN feed-forward layer to prune; train it with --ffn kan, grkan "
                          "or a hybrid list")
    score = _check_score(score, idx)
    strengths = unit_strengths(model, idx, score=score, relative=relative)
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    hidden = list(model.config.kan_hidden)
    kept: dict[int, list[int]] = {}
    layers = []
    for layer, ffn in ffns:
        floor = (model.config.kan_rank or 1) if isinstance(ffn, KANFFN) else 1  # a factorised FFN keeps rank <= width
        keep = _surviving_units(strengths[layer], theta, floor)
        if isinstance(ffn, GRKANFFN):
            _slice_grkan(sd, f"blocks.{layer}.ffn", keep)
        else:
            _slice_layer(sd, f"blocks.{layer}.ffn.fc", keep, 0)
            _slice_layer(sd, f"blocks.{layer}.ffn.proj", keep, 1)
        kept[layer] = keep.tolist()
        layers.append({"layer": layer, "before": ffn.hidden, "after": int(keep.numel())})
        hidden[layer] = int(keep.numel())
    new = KANGPT(model.config.replace(kan_hidden=tuple(hidden)))
    new.to(dtype=next(model.parameters()).dtype, device=next(model.parameters()).device)
    new.load_state_dict(sd)
    new.train(model.training)
    before = sum(r["before"] for r in layers)
    after = sum(r["after"] for r in layers)
    report = {
        "theta": float(theta),
        "score": score,
        "relative": bool(relative),
        "layers": layers,
        "hidden_before": before,
        "hidden_after": after,
        "removed_fraction": 1.0 - after / before,
        "params_before": model.num_params(),
        "params_after": new.num_params(),
    }
    return GPTPruneResult(model=new, kept=kept, report=report)
