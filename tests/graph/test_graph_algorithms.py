"""Tests of kansym.graph.algorithms on fake pruned models."""

from __future__ import annotations

import networkx as nx

from graph_fakes import fake_kan
from kansym.graph.algorithms import (
    active_nodes,
    active_subgraph,
    dead_nodes,
    edge_ids,
    input_nodes,
    layers,
    output_nodes,
)
from kansym.graph.build import to_networkx


def test_active_subgraph_of_pruned(pruned_kan):
    G = to_networkx(pruned_kan, input_names=["a", "b", "c"])
    A = active_subgraph(G)
    assert set(A) == {(0, 0), (0, 1), (1, 0), (1, 2), (2, 0), (2, 1)}
    assert set(A.edges) == {
        ((0, 0), (1, 0)), ((0, 0), (1, 2)), ((0, 1), (1, 2)), ((1, 0), (2, 0)), ((1, 2), (2, 1)),
    }
    assert A.nodes[(0, 1)]["label"] == "b"  # attributes carried over
    assert A.graph["width"] == [3, 4, 2]
    A.nodes[(0, 0)]["label"] = "changed"
    assert G.nodes[(0, 0)]["label"] == "a", "active_subgraph returns an independent copy"
    assert G.number_of_nodes() == 9, "input graph not modified"


def test_dead_nodes(pruned_kan):
    G = to_networkx(pruned_kan)
    # h1 has inputs but no outgoing edge; h3 feeds y0 but nothing feeds it.
    assert dead_nodes(G) == [(1, 1), (1, 3)]
    assert dead_nodes(to_networkx(fake_kan((2, 3, 1)))) == []


def test_unused_input_not_active(pruned_kan):
    G = to_networkx(pruned_kan)
    assert (0, 2) not in active_nodes(G)
    assert input_nodes(G) == [(0, 0), (0, 1), (0, 2)]
    assert output_nodes(G) == [(2, 0), (2, 1)]


def test_output_without_path_is_inactive():
    G = to_networkx(fake_kan((2, 2, 2), [[[1, 1], [0, 0]], [[1, 0], [0, 1]]]))
    # h1 has no input, so y1 depends on nothing
    assert (2, 1) not in active_nodes(G)
    assert dead_nodes(G) == [(1, 1)]


def test_layers_keep_dead_nodes_in_place(pruned_kan):
    G = to_networkx(pruned_kan)
    assert layers(G) == [[(0, 0), (0, 1), (0, 2)], [(1, 0), (1, 1), (1, 2), (1, 3)], [(2, 0), (2, 1)]]


def test_layers_match_topological_generations_on_active_subgraph(pruned_kan):
    A = active_subgraph(to_networkx(pruned_kan))
    gens = [sorted(g) for g in nx.topological_generations(A)]
    assert [sorted(g) for g in layers(A)] == gens == [[(0, 0), (0, 1)], [(1, 0), (1, 2)], [(2, 0), (2, 1)]]


def test_layers_fallback_without_layer_attribute():
    G = nx.DiGraph([("a", "b"), ("b", "c"), ("a", "c")])
    assert layers(G) == [["a"], ["b"], ["c"]]


def test_edge_ids(pruned_kan):
    ids = edge_ids(to_networkx(pruned_kan))
    assert len(ids) == 8
    assert ids[0] == (0, 0, 0) and (1, 3, 0) in ids and (0, 2, 0) not in ids
