"""kansym.graph: a KAN as a networkx graph, questions about it, and files of it."""

from kansym.graph.algorithms import active_nodes, active_subgraph, dead_nodes, edge_ids, layers
from kansym.graph.build import to_networkx
from kansym.graph.io import read_json, write_graphml, write_json

__all__ = [
    "to_networkx",
    "active_nodes",
    "active_subgraph",
    "layers",
    "dead_nodes",
    "edge_ids",
    "write_json",
    "read_json",
    "write_graphml",
]
