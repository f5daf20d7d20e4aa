"""Tests of kansym.graph.io: JSON round trip, GraphML readable by networkx, atomic writes."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
import torch

from graph_fakes import FakeFit, fake_kan
from kansym.errors import DataError
from kansym.graph import io as gio
from kansym.graph.build import to_networkx
from kansym.graph.io import node_key, parse_node_key, read_json, write_graphml, write_json


@pytest.fixture
def rich_graph(pruned_kan):
    scores = [torch.rand(4, 3, generator=torch.Generator().manual_seed(0)), np.full((2, 4), 0.25)]
    fits = {
        (0, 0, 0): FakeFit("sin", 2.0, 0.5, 1.5, -1.0, 0.999),
        (1, 2, 1): FakeFit("x^p", 1.0, 0.0, 3.0, 0.0, 0.98, p=2.0),
    }
    return to_networkx(
        pruned_kan, input_names=["mass", "r", "t"], output_names=["F", "E"],
        edge_scores=scores, edge_fits=fits,
    )


def test_node_keys():
    assert node_key((0, 1)) == "0:1"
    assert parse_node_key("0:1") == (0, 1)
    assert parse_node_key("a:b") == "a:b"
    assert parse_node_key("x") == "x"


def test_json_round_trip(tmp_path, rich_graph):
    p = write_json(rich_graph, tmp_path / "g.json")
    doc = json.loads(p.read_text())
    assert doc["nodes"][0]["id"] == "0:0"
    assert {"source", "target", "id"} <= set(doc["edges"][0])
    H = read_json(p)
    assert list(H.nodes) == list(rich_graph.nodes)
    assert set(H.edges) == set(rich_graph.edges)
    assert dict(H.nodes(data=True)) == dict(rich_graph.nodes(data=True))
    for u, v, d in rich_graph.edges(data=True):
        assert H.edges[u, v] == d
    assert H.edges[(0, 0), (1, 0)]["id"] == (0, 0, 0)
    assert H.edges[(1, 2), (2, 1)]["params"] == {"a": 1.0, "b": 0.0, "c": 3.0, "d": 0.0, "p": 2.0}
    assert H.graph == rich_graph.graph
    assert nx.utils.graphs_equal(H, rich_graph)


def test_json_numpy_attributes_become_plain(tmp_path):
    G = nx.DiGraph()
    G.add_edge((0, 0), (1, 0), score=np.float32(0.5), v=torch.tensor([1.0, 2.0]))
    H = read_json(write_json(G, tmp_path / "g.json"))
    assert H.edges[(0, 0), (1, 0)] == {"score": 0.5, "v": [1.0, 2.0]}


def test_read_json_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        read_json(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match="not a node-link JSON graph"):
        read_json(bad)
    bad.write_text('{"nodes": []}')
    with pytest.raises(DataError, match="not a node-link JSON graph"):
        read_json(bad)


def test_graphml_readable_by_networkx(tmp_path, rich_graph):
    p = write_graphml(rich_graph, tmp_path / "g.graphml")
    H = nx.read_graphml(p)
    assert H.is_directed()
    assert H.number_of_nodes() == 9
    assert H.number_of_edges() == 8
    assert H.nodes["0:0"]["label"] == "mass" and H.nodes["2:1"]["label"] == "E"
    assert H.nodes["1:3"]["kind"] == "hidden" and H.nodes["1:3"]["layer"] == 1
    e = H.edges["0:0", "1:0"]
    assert e["primitive"] == "sin" and e["r2"] == pytest.approx(0.999)
    assert json.loads(e["params"]) == {"a": 2.0, "b": 0.5, "c": 1.5, "d": -1.0}
    assert H.edges["1:2", "2:1"]["score"] == pytest.approx(0.25)
    assert H.graph["width"] == "3,4,2"
    # the edge id attribute survives as a string
    assert H.edges["1:3", "2:0"]["id"] == "1:3:0"


def test_failed_write_keeps_previous_file(tmp_path, rich_graph, monkeypatch):
    fake_graph = to_networkx(fake_kan((1, 1)))
    p = write_json(fake_graph, tmp_path / "g.json")
    before = p.read_text()

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gio.os, "replace", boom)
    with pytest.raises(DataError, match="No space left"):
        write_json(rich_graph, p)
    monkeypatch.undo()
    assert p.read_text() == before
    assert read_json(p).number_of_nodes() == fake_graph.number_of_nodes()
    assert [f.name for f in tmp_path.iterdir()] == ["g.json"]
