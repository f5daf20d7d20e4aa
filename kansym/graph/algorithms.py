"""Questions about a KAN graph, answered with networkx (graph first, no mutation).

The graph is the one built by :func:`kansym.graph.build.to_networkx`: nodes
``(layer, index)`` with a ``kind`` attribute (``'input'``, ``'hidden'``,
``'output'``), edges from layer ``l`` to ``l + 1``.

- the *surviving network* is the set of nodes on some input -> output path
  (``nx.descendants`` of the inputs intersected with ``nx.ancestors`` of the
  outputs), :func:`active_subgraph`;
- its *layers* are its ``nx.topological_generations``, :func:`layers`;
- *dead* neurons are hidden nodes off every such path, :func:`dead_nodes`
  (the structural counterpart of node pruning, KAN paper §2.5.1).
"""

from __future__ import annotations

from typing import Hashable

import networkx as nx

__all__ = [
    "input_nodes",
    "output_nodes",
    "active_nodes",
    "active_subgraph",
    "layers",
    "dead_nodes",
    "edge_ids",
]


def input_nodes(G: nx.DiGraph) -> list[Hashable]:
    """Input nodes (``kind == 'input'``) in node order."""
    return [n for n, k in G.nodes(data="kind") if k == "input"]


def output_nodes(G: nx.DiGraph) -> list[Hashable]:
    """Output nodes (``kind == 'output'``) in node order."""
    return [n for n, k in G.nodes(data="kind") if k == "output"]


def active_nodes(G: nx.DiGraph) -> set[Hashable]:
    """Nodes that lie on at least one input -> output path.

    Parameters
    ----------
    G : networkx.DiGraph
        A KAN graph (nodes carry ``kind``).

    Returns
    -------
    set
        Inputs that reach an output, outputs reached from an input, and the
        hidden nodes between. Empty if no output depends on any input.
    """
    sources = input_nodes(G)
    sinks = output_nodes(G)
    forward: set[Hashable] = set(sources)
    for s in sources:
        forward |= nx.descendants(G, s)
    backward: set[Hashable] = set(sinks)
    for t in sinks:
        backward |= nx.ancestors(G, t)
    return forward & backward


def active_subgraph(G: nx.DiGraph) -> nx.DiGraph:
    """The surviving network: the subgraph induced by :func:`active_nodes`.

    Parameters
    ----------
    G : networkx.DiGraph

    Returns
    -------
    networkx.DiGraph
        An independent copy (node, edge and graph attributes included); ``G``
        is not modified.

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.DiGraph()
    >>> G.add_nodes_from([((0, 0), {"kind": "input"}), ((1, 0), {"kind": "hidden"}),
    ...                   ((1, 1), {"kind": "hidden"}), ((2, 0), {"kind": "output"})])
    >>> G.add_edges_from([((0, 0), (1, 0)), ((1, 0), (2, 0)), ((0, 0), (1, 1))])
    >>> sorted(active_subgraph(G))
    [(0, 0), (1, 0), (2, 0)]
    """
    return G.subgraph(active_nodes(G)).copy()


def layers(G: nx.DiGraph) -> list[list[Hashable]]:
    """Nodes grouped by KAN layer, inputs first, each group in node order.

    Uses the ``layer`` node attribute when every node has one (so dead nodes
    keep their layer); otherwise ``nx.topological_generations``. On the
    :func:`active_subgraph` of a KAN graph both agree, since every surviving
    node is reached from layer 0 by edges that advance one layer.

    Parameters
    ----------
    G : networkx.DiGraph

    Returns
    -------
    list of list
        ``result[l]`` holds the nodes of layer ``l``; layers without nodes are
        omitted only in the ``topological_generations`` fallback.

    Raises
    ------
    networkx.NetworkXUnfeasible
        If ``G`` has a cycle and no ``layer`` attributes.
    """
    tagged = dict(G.nodes(data="layer"))
    if tagged and all(v is not None for v in tagged.values()):
        n = max(int(v) for v in tagged.values()) + 1
        groups: list[list[Hashable]] = [[] for _ in range(n)]
        for node, l in tagged.items():
            groups[int(l)].append(node)
        return groups
    order = {node: k for k, node in enumerate(G.nodes)}
    return [sorted(gen, key=order.__getitem__) for gen in nx.topological_generations(G)]


def dead_nodes(G: nx.DiGraph) -> list[Hashable]:
    """Hidden nodes on no input -> output path (removable without changing outputs).

    A hidden node is dead when no input reaches it or it reaches no output
    (e.g. all its incoming or all its outgoing edges were masked).

    Parameters
    ----------
    G : networkx.DiGraph

    Returns
    -------
    list
        Dead hidden nodes, in node order.
    """
    alive = active_nodes(G)
    return [n for n, k in G.nodes(data="kind") if k == "hidden" and n not in alive]


def edge_ids(G: nx.DiGraph) -> list[tuple[int, int, int]]:
    """Edge ids ``(layer, i_in, j_out)`` of all edges, sorted."""
    return sorted(tuple(eid) for _, _, eid in G.edges(data="id"))
