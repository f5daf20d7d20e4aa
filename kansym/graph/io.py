"""Write and read KAN graphs: node-link JSON (lossless) and GraphML (for viewers).

Node ids ``(layer, index)`` become strings ``"layer:index"`` in files (``"0:1"``);
edge ids ``(layer, i_in, j_out)`` become lists in JSON and ``"layer:i_in:j_out"``
strings in GraphML. JSON keeps everything (``params`` stays a dict) and
:func:`read_json` restores tuples; GraphML allows only scalar attributes, so
``params`` is written as a JSON string and ``width`` as ``"2,5,1"``.

Files are written atomically (temporary file in the same directory, then
``os.replace``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Hashable

import networkx as nx
import numpy as np

from kansym.io.atomic import atomic_write
from kansym.errors import DataError

__all__ = ["write_json", "read_json", "write_graphml", "node_key", "parse_node_key"]

_FORMAT = "kansym-graph"


def node_key(node: Hashable) -> str:
    """File form of a node id: ``(0, 1) -> "0:1"``; other ids via ``str``."""
    if isinstance(node, tuple):
        return ":".join(str(int(v)) for v in node)
    return str(node)


def parse_node_key(key: str) -> Hashable:
    """Inverse of :func:`node_key`: ``"0:1" -> (0, 1)``; other strings unchanged."""
    parts = key.split(":")
    if len(parts) > 1 and all(p.lstrip("-").isdigit() for p in parts):
        return tuple(int(p) for p in parts)
    return key


def write_json(G: nx.DiGraph, path: str | os.PathLike[str]) -> Path:
    """Write ``G`` as node-link JSON (``{"nodes": [...], "edges": [...]}``).

    Parameters
    ----------
    G : networkx.DiGraph
        Attribute values may be numbers (numpy/torch scalars included), str,
        bool, None, tuples/lists and dicts of those.
    path : str or PathLike

    Returns
    -------
    pathlib.Path
        The written path.

    Raises
    ------
    TypeError
        If an attribute value cannot be represented in JSON.
    DataError
        If the file cannot be written.
    """
    doc = {
        "format": _FORMAT,
        "directed": G.is_directed(),
        "multigraph": G.is_multigraph(),
        "graph": _plain(dict(G.graph)),
        "nodes": [{"id": node_key(n), **_plain(d)} for n, d in G.nodes(data=True)],
        "edges": [
            {"source": node_key(u), "target": node_key(v), **_plain(d)}
            for u, v, d in G.edges(data=True)
        ],
    }
    text = json.dumps(doc, indent=1)
    return _atomic_write(Path(path), lambda f: f.write(text.encode("utf-8")))


def read_json(path: str | os.PathLike[str]) -> nx.DiGraph:
    """Read a graph written by :func:`write_json`.

    Node ids ``"l:i"`` become ``(l, i)`` and the edge attribute ``id`` a tuple
    ``(layer, i_in, j_out)`` again.

    Parameters
    ----------
    path : str or PathLike

    Returns
    -------
    networkx.DiGraph

    Raises
    ------
    DataError
        If the file is missing or not a node-link JSON graph.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return _graph(doc)
    except FileNotFoundError as exc:
        raise DataError(f"graph file '{path}' does not exist; check the path.") from exc
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DataError(
            f"'{path}' is not a node-link JSON graph; write it with kansym.graph.io.write_json."
        ) from exc


def _graph(doc: Any) -> nx.DiGraph:
    """The graph of a node-link document: its attributes are data (strings stay strings; nothing is
    parsed or evaluated). Raises KeyError, TypeError or ValueError on anything else."""
    attrs, nodes, edges = doc.get("graph", {}), doc["nodes"], doc["edges"]
    if not (isinstance(attrs, dict) and isinstance(nodes, list) and isinstance(edges, list)):
        raise TypeError("graph, nodes and edges must be an object and two lists")
    G = nx.DiGraph(**{str(k): value for k, value in attrs.items()})
    for rec in nodes:
        rec = dict(rec)
        G.add_node(parse_node_key(str(rec.pop("id"))), **{str(k): value for k, value in rec.items()})
    for rec in edges:
        rec = dict(rec)
        u, v = parse_node_key(str(rec.pop("source"))), parse_node_key(str(rec.pop("target")))
        if isinstance(rec.get("id"), list):
            rec["id"] = tuple(rec["id"])
        G.add_edge(u, v, **{str(k): value for k, value in rec.items()})
    return G


def write_graphml(G: nx.DiGraph, path: str | os.PathLike[str]) -> Path:
    """Write ``G`` as GraphML for graph viewers (Gephi, yEd, Cytoscape).

    Node ids become ``"l:i"``; tuple/list attributes become ``":"``-joined
    (edge ``id``) or ``","``-joined (``width``) strings, dicts (``params``) JSON
    strings; ``None`` values are left out.

    Parameters
    ----------
    G : networkx.DiGraph
    path : str or PathLike

    Returns
    -------
    pathlib.Path
        The written path; ``nx.read_graphml(path)`` reads it back with string
        node ids.

    Raises
    ------
    DataError
        If the file cannot be written.
    """
    H = nx.DiGraph(**_flat(dict(G.graph), joiner=","))
    for n, d in G.nodes(data=True):
        H.add_node(node_key(n), **_flat(d))
    for u, v, d in G.edges(data=True):
        H.add_edge(node_key(u), node_key(v), **_flat(d))
    return _atomic_write(Path(path), lambda f: nx.write_graphml(H, f))


def _scalar(v: Any) -> Any:
    if isinstance(v, (np.generic,)) or (hasattr(v, "item") and getattr(v, "ndim", None) == 0):
        return v.item()
    return v


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    return {str(k): _plain_value(v) for k, v in d.items()}


def _plain_value(v: Any) -> Any:
    v = _scalar(v)
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    if isinstance(v, dict):
        return _plain(v)
    if isinstance(v, (tuple, list)):
        return [_plain_value(x) for x in v]
    if hasattr(v, "tolist"):  # arrays / tensors
        return v.tolist()
    raise TypeError(f"graph attribute value of type {type(v).__name__} cannot be written as JSON.")


def _flat(d: dict[str, Any], joiner: str = ":") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        v = _scalar(v)
        if v is None:
            continue
        if isinstance(v, (str, bool, int, float)):
            out[str(k)] = v
        elif isinstance(v, dict):
            out[str(k)] = json.dumps(_plain(v), sort_keys=True)
        elif isinstance(v, (tuple, list)):
            out[str(k)] = joiner.join(str(_scalar(x)) for x in v)
        else:
            out[str(k)] = str(v)
    return out


def _atomic_write(path: Path, write: Callable[[Any], Any]) -> Path:
    return atomic_write(path, write, error=DataError, what="graph")
