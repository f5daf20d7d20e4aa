"""Exact reordering of attention heads inside the layers of a KAN-GPT.

Heads are interchangeable: permuting the query, key and value rows of heads together
with their ``W_O`` rows leaves the function unchanged. :func:`reorder_heads` stores the
heads of each layer in a new order (so that similar heads sit next to each other in
the weights, the per-head views and the plots) and records in ``config.head_order``
which original head each stored head is; the forward pass gathers the weights back into
the original order before multiplying (see :class:`kansym.gpt.model.CausalSelfAttention`),
so the logits are bit-identical. :func:`restore_head_order` undoes it from the record,
e.g. from a saved checkpoint.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch

from kansym.errors import ConfigError
from kansym.gpt.model import KANGPT

__all__ = ["cluster_order", "reorder_heads", "restore_head_order", "head_orders"]


def head_orders(model: KANGPT) -> list[list[int]]:
    """Per layer, the original index of each stored head (identity for a model never reordered)."""
    return [list(b.attn.head_order) for b in model.blocks]


def _normalise(model: KANGPT, orders) -> list[list[int]]:
    L, H = model.config.n_layer, model.config.n_head
    perms = [list(range(H)) for _ in range(L)]
    items = orders.items() if isinstance(orders, Mapping) else enumerate(orders)
    for layer, perm in items:
        layer = int(layer)
        if not -L <= layer < L:
            raise ConfigError(f"layer {layer} is out of range; the model has {L} layers (0..{L - 1})")
        perm = [int(h) for h in perm]
        if sorted(perm) != list(range(H)):
            raise ConfigError(f"{perm} is not a permutation of the {H} heads of layer {layer}")
        perms[layer % L] = perm
    return perms


@torch.no_grad()
def reorder_heads(model: KANGPT, orders: Mapping[int, Sequence[int]] | Sequence[Sequence[int]]) -> KANGPT:
    """A copy of ``model`` whose heads are stored in a new order; same logits, bit for bit.

    Parameters
    ----------
    model : KANGPT
        Left unchanged.
    orders : mapping layer -> permutation, or one permutation per layer
        New stored head ``s`` of a layer is the current stored head ``orders[layer][s]``
        (layers not given keep their order).

    Returns
    -------
    KANGPT
        ``config.head_order`` composes the permutation with any earlier one, so that
        :func:`restore_head_order` returns to the original order; the copy is in the
        mode (train/eval) of ``model``.

    Raises
    ------
    ConfigError
        A layer out of range or a list that is not a permutation of the heads.
    """
    perms = _normalise(model, orders)
    C, hs = model.config.n_embd, model.config.n_embd // model.config.n_head
    state = model.state()
    sd = dict(state["state_dict"])
    for layer, perm in enumerate(perms):
        cols = torch.tensor([h * hs + d for h in perm for d in range(hs)])  # (C,) new -> old columns
        rows = torch.cat([part * C + cols for part in range(3)])  # (3C,) q, k, v rows
        pre = f"blocks.{layer}.attn."
        sd[pre + "c_attn.weight"] = sd[pre + "c_attn.weight"][rows]
        if pre + "c_attn.bias" in sd:
            sd[pre + "c_attn.bias"] = sd[pre + "c_attn.bias"][rows]
        sd[pre + "c_proj.weight"] = sd[pre + "c_proj.weight"][:, cols]
    old = head_orders(model)
    new_order = [[old[layer][s] for s in perm] for layer, perm in enumerate(perms)]
    identity = all(o == list(range(len(o))) for o in new_order)
    config = model.config.replace(head_order=None if identity else new_order)
    new = KANGPT.from_state({"config": config.to_dict(), "state_dict": sd})
    new.to(next(model.parameters()).device)
    new.train(model.training)
    return new


def restore_head_order(model: KANGPT) -> KANGPT:
    """A copy of a reordered ``model`` with its heads back in the original order (``head_order`` None).

    The weights equal those of the model before :func:`reorder_heads`, exactly.
    """
    perms = []
    for order in head_orders(model):
        inverse = [0] * len(order)
        for s, h in enumerate(order):
            inverse[h] = s
        perms.append(inverse)
    return reorder_heads(model, perms)


def cluster_order(similarity: torch.Tensor, method: str = "average") -> list[int]:
    """An order of heads in which similar heads sit together.

    Hierarchical clustering (scipy ``linkage``) of the distances ``1 - similarity``;
    the order is the dendrogram's leaves with optimal leaf ordering (Bar-Joseph et al.
    2001, Bioinformatics 17 suppl. 1).

    Parameters
    ----------
    similarity : Tensor (H, H)
        Symmetric, larger = more alike (e.g. an overlap matrix).
    method : str
        scipy linkage method.

    Returns
    -------
    list of int
        A permutation of ``0..H-1``.
    """
    from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
    from scipy.spatial.distance import squareform

    S = similarity.detach().double().cpu()
    H = S.shape[0]
    if H <= 2:
        return list(range(H))
    D = (1.0 - 0.5 * (S + S.T)).clamp_min(0).numpy()  # (H, H)
    D[range(H), range(H)] = 0.0
    condensed = squareform(D, checks=False)
    Z = optimal_leaf_ordering(linkage(condensed, method=method), condensed)
    return [int(h) for h in leaves_list(Z)]
