"""A KAN as a networkx graph: nodes are neurons, edges are the live edge functions.

Node ``(l, i)`` is neuron ``i`` of layer ``l`` (layer 0 = inputs, layer ``L`` =
outputs); edge ``(l, i) -> (l + 1, j)`` is the function ``phi_{l, j, i}`` of
``model.layers[l]``, present iff its mask entry ``mask[j, i]`` is non-zero. Edge ids
follow docs/algorithms.md, "Conventions": ``(layer, i_in, j_out)``.

The graph is a snapshot: it copies numbers out of the model and never refers back
to it, so later training does not change it.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

import networkx as nx
import numpy as np

from kansym.errors import ConfigError

__all__ = ["to_networkx", "node_label", "edge_exists", "check_edge", "EdgeId", "Node"]

logger = logging.getLogger("kansym")

Node = tuple[int, int]
EdgeId = tuple[int, int, int]


def node_label(layer: int, index: int, n_layers: int) -> str:
    """Default label of a node: ``'x0'`` (input), ``'h1_3'`` (hidden), ``'y0'`` (output).

    Parameters
    ----------
    layer, index : int
        Node position; ``0 <= layer <= n_layers``.
    n_layers : int
        Number of KAN layers ``L`` (so outputs live in layer ``L``).
    """
    if layer == 0:
        return f"x{index}"
    if layer == n_layers:
        return f"y{index}"
    return f"h{layer}_{index}"


def to_networkx(
    model: Any,
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    edge_scores: Sequence[Any] | None = None,
    edge_fits: Mapping[EdgeId, Any] | None = None,
) -> nx.DiGraph:
    """Build the directed graph of a KAN's live (unmasked) edges.

    Parameters
    ----------
    model : KAN
        Anything with ``width`` (tuple of ``L + 1`` ints) and ``layers`` (``L``
        layers, each with ``in_features``, ``out_features`` and a ``mask`` of
        shape ``(out_features, in_features)``; 0 marks a removed edge).
    input_names, output_names : sequence of str, optional
        Labels of the input / output nodes (CSV column names); default
        ``'x0', 'x1', ...`` and ``'y0', ...``. Hidden nodes are ``'h{l}_{i}'``.
    edge_scores : sequence of array-like, optional
        One array (or tensor) per layer of shape ``(out_features, in_features)``,
        e.g. the ``|phi|_1`` scores of :mod:`kansym.prune.scores`; stored as the
        float edge attribute ``score``.
    edge_fits : mapping, optional
        ``{(layer, i_in, j_out): fit}`` where ``fit`` has ``primitive`` (str),
        ``a, b, c, d, r2`` (float) and ``p`` (float or None), like
        :class:`kansym.symbolic.fit.EdgeFit`. Sets the edge attributes
        ``primitive``, ``params`` (dict of floats ``a, b, c, d`` and ``p`` when not
        None) and ``r2``. Fits of edges that are masked out are ignored (logged).

    Returns
    -------
    networkx.DiGraph
        Nodes ``(layer, index)`` for every neuron (dead ones included) with
        attributes ``layer``, ``index``, ``label``, ``kind`` (``'input'``,
        ``'hidden'`` or ``'output'``); edges with attributes ``id`` and, when
        given, ``score`` / ``primitive`` / ``params`` / ``r2``. Graph attributes:
        ``width`` (list of int) and ``n_layers``.

    Raises
    ------
    ConfigError
        If the model's layers disagree with ``width``, or the number of names or
        the shapes of ``edge_scores`` do not match the model.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> import torch
    >>> layer = SimpleNamespace(in_features=2, out_features=1, mask=torch.tensor([[1.0, 0.0]]))
    >>> G = to_networkx(SimpleNamespace(width=(2, 1), layers=[layer]), input_names=["a", "b"])
    >>> list(G.edges)
    [((0, 0), (1, 0))]
    >>> G.nodes[(0, 1)]["label"]
    'b'
    """
    width = tuple(int(w) for w in model.width)
    layers = list(model.layers)
    n_layers = len(width) - 1
    if n_layers < 1 or len(layers) != n_layers:
        raise ConfigError(
            f"the model has {len(layers)} layers but width {width} implies {max(n_layers, 0)}."
        )
    masks = [_layer_mask(layer, width[l], width[l + 1], l) for l, layer in enumerate(layers)]
    in_labels = _names(input_names, width[0], "input")
    out_labels = _names(output_names, width[-1], "output")
    scores = _scores(edge_scores, width) if edge_scores is not None else None

    G = nx.DiGraph(width=list(width), n_layers=n_layers)
    _add_nodes(G, width, in_labels, out_labels)
    _add_edges(G, masks, scores)
    _attach_fits(G, edge_fits or {})
    return G


def _add_nodes(G: nx.DiGraph, width: tuple[int, ...], in_labels: list[str], out_labels: list[str]) -> None:
    """One node ``(l, i)`` per neuron, dead ones included, with its layer, index, label and kind."""
    n_layers = len(width) - 1
    for l, n in enumerate(width):
        kind = "input" if l == 0 else "output" if l == n_layers else "hidden"
        for i in range(n):
            if l == 0:
                label = in_labels[i]
            elif l == n_layers:
                label = out_labels[i]
            else:
                label = node_label(l, i, n_layers)
            G.add_node((l, i), layer=l, index=i, label=label, kind=kind)


def _add_edges(G: nx.DiGraph, masks: list[np.ndarray], scores: list[np.ndarray] | None) -> None:
    """One edge ``(l, i) -> (l + 1, j)`` per unmasked entry, with its id and, given scores, its score."""
    for l, mask in enumerate(masks):
        for j, i in zip(*np.nonzero(mask)):  # mask is (out, in)
            i, j = int(i), int(j)
            attrs: dict[str, Any] = {"id": (l, i, j)}
            if scores is not None:
                attrs["score"] = float(scores[l][j, i])
            G.add_edge((l, i), (l + 1, j), **attrs)


def _attach_fits(G: nx.DiGraph, edge_fits: Mapping[EdgeId, Any]) -> None:
    """Set the fit attributes of each fitted edge in the graph; fits of absent edges are logged and skipped."""
    for eid, fit in edge_fits.items():
        l, i, j = (int(v) for v in eid)
        if not G.has_edge((l, i), (l + 1, j)):
            logger.debug("fit for edge %s ignored: the edge is not in the graph", (l, i, j))
            continue
        G.edges[(l, i), (l + 1, j)].update(_fit_attrs(fit))


def _layer_mask(layer: Any, n_in: int, n_out: int, l: int) -> np.ndarray:
    if int(layer.in_features) != n_in or int(layer.out_features) != n_out:
        raise ConfigError(
            f"layer {l} maps {layer.in_features} -> {layer.out_features} "
            f"but width says {n_in} -> {n_out}."
        )
    mask = getattr(layer, "mask", None)
    if mask is None:
        return np.ones((n_out, n_in), dtype=bool)
    m = _numpy(mask)
    if m.shape != (n_out, n_in):
        raise ConfigError(f"layer {l} mask has shape {m.shape}, expected {(n_out, n_in)}.")
    return m != 0


def _names(names: Sequence[str] | None, n: int, role: str) -> list[str]:
    if names is None:
        prefix = "x" if role == "input" else "y"
        return [f"{prefix}{i}" for i in range(n)]
    names = [str(s) for s in names]
    if len(names) != n:
        raise ConfigError(f"got {len(names)} {role} names for a model with {n} {role}s.")
    return names


def _scores(edge_scores: Sequence[Any], width: tuple[int, ...]) -> list[np.ndarray]:
    if len(edge_scores) != len(width) - 1:
        raise ConfigError(
            f"edge_scores has {len(edge_scores)} entries; give one per layer ({len(width) - 1})."
        )
    out = []
    for l, s in enumerate(edge_scores):
        a = _numpy(s).astype(np.float64)
        if a.shape != (width[l + 1], width[l]):
            raise ConfigError(
                f"edge_scores[{l}] has shape {a.shape}, expected (out, in) = {(width[l + 1], width[l])}."
            )
        out.append(a)
    return out


def _fit_attrs(fit: Any) -> dict[str, Any]:
    params = {k: float(getattr(fit, k)) for k in ("a", "b", "c", "d")}
    p = getattr(fit, "p", None)
    if p is not None:
        params["p"] = float(p)
    return {"primitive": str(fit.primitive), "params": params, "r2": float(fit.r2)}


def _numpy(a: Any) -> np.ndarray:
    if hasattr(a, "detach"):  # torch.Tensor
        a = a.detach().cpu().numpy()
    return np.asarray(a)


def edge_exists(edge: Sequence[int], width: Sequence[int]) -> bool:
    """Whether edge ``(layer, i_in, j_out)`` exists in a KAN of ``width``."""
    layer, i, j = edge
    return 0 <= layer < len(width) - 1 and 0 <= i < width[layer] and 0 <= j < width[layer + 1]


def check_edge(edge: Sequence[int], width: Sequence[int]) -> tuple[int, int, int]:
    """Validate an edge id ``(layer, i_in, j_out)`` against a model width.

    Raises
    ------
    ConfigError
        If the id has not three integers or lies outside the model.
    """
    if len(edge) != 3:
        raise ConfigError(f"an edge is given as LAYER,IN,OUT (three integers), got {list(edge)}")
    edge = tuple(int(v) for v in edge)
    if not edge_exists(edge, width):
        layers = len(width) - 1
        raise ConfigError(
            f"edge {edge[0]},{edge[1]},{edge[2]} is outside the model of width {list(width)}: "
            f"layer must be in 0..{layers - 1}, IN in 0..{width[min(max(edge[0], 0), layers - 1)] - 1}, "
            f"OUT in 0..{width[min(max(edge[0], 0), layers - 1) + 1] - 1}"
        )
    return edge  # type: ignore[return-value]
