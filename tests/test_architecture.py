"""The shape of the house (docs/algorithms.md, "Architecture"): imports point one way, no circles,
modules under 800 lines, functions under 80 (docstring included), no C or C++ source inside Python strings. No idea is split across files to meet a count.

Every ``import`` of a kansym module counts, also those inside functions (lazy imports are
still dependencies) and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1] / "kansym"

# Lowest first. A module may import from its own layer or a lower one, never a higher one.
LAYERS = [
    {"kansym.errors", "kansym.config", "kansym.version", "kansym.deadline"},
    {"kansym.nn"},
    {"kansym.io", "kansym.train"},
    {"kansym.prune", "kansym.graph", "kansym.symbolic"},
    {"kansym.discover", "kansym.gpt", "kansym.plot"},
    {"kansym.estimator"},
    {"kansym.cli"},
    {"kansym", "kansym.__main__"},  # the package's face (lazy exports) and ``python -m kansym``
]
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80  # a function's lines, its docstring included


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The kansym modules ``path`` imports (``from kansym import plot`` is ``kansym.plot``)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in modules:  # ``kansym.nn.fast.op.get`` -> ``kansym.nn.fast.op``
                t = t.rpartition(".")[0]
            if t.startswith("kansym") and t != name:
                out.add(t)
    return out


def _layer(module: str) -> int:
    best = None
    for i, group in enumerate(LAYERS):
        for unit in group:
            if module == unit or module.startswith(unit + "."):
                if best is None or len(unit) > len(best[1]):
                    best = (i, unit)
    assert best is not None, f"{module} belongs to no layer of LAYERS: place it"
    return best[0]


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    modules = _modules()
    g = nx.DiGraph()
    for name, path in modules.items():
        g.add_node(name)
        for target in _imports(path, modules):
            g.add_edge(name, target)
    return g


def test_every_module_has_a_layer(graph):
    for module in graph:
        _layer(module)


def test_no_import_points_up(graph):
    up = [f"{a} (layer {_layer(a)}) imports {b} (layer {_layer(b)})" for a, b in graph.edges if _layer(b) > _layer(a)]
    assert not up, "\n".join(up)


def test_no_circle_of_imports(graph):
    g = graph.copy()
    g.remove_edges_from(_reexports(graph))
    cycles = list(nx.simple_cycles(g))
    assert not cycles, "circles: " + "; ".join(" -> ".join(c + [c[0]]) for c in cycles[:5])


def _reexports(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """The edges of a package's ``__init__`` to its own submodules (re-exports): only these are no
    circle with the submodules; a submodule that imports its package's ``__init__`` back is one."""
    return [(a, b) for a, b in graph.edges
            if b.startswith(a + ".") and (ROOT.parent / Path(*a.split(".")) / "__init__.py").exists()]


def test_packages_do_not_import_each_other_in_a_circle(graph):
    def package(m: str) -> str:
        return ".".join(m.split(".")[:2])

    g = nx.DiGraph()
    g.add_edges_from((package(a), package(b)) for a, b in graph.edges if package(a) != package(b))
    assert nx.is_directed_acyclic_graph(g), list(nx.simple_cycles(g))[:5]


def test_modules_stay_under_800_lines():
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def _function_lengths() -> dict[str, int]:
    """``{module.function: lines}`` of every function and method (a method as ``module.Class.method``;
    nested ones by their own name)."""
    out = {}
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owner = {m: c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for m in c.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{name}.{owner[node] + '.' if node in owner else ''}{node.name}"
                out[key] = max(out.get(key, 0), node.end_lineno - node.lineno + 1)
    return out


def test_no_function_is_over_80_lines():
    long = {k: n for k, n in _function_lengths().items() if n > MAX_FUNCTION_LINES}
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them into named steps): {long}"


_C_SOURCE = re.compile(r"#include\s*[<\"]|#define\s+\w|\bextern\s+\"C\"|\bvoid\s+\w+\s*\([^)]*\)\s*\{|\bstatic\s+inline\b"
                       r"|\btorch::\w|\bTORCH_LIBRARY(?:_IMPL)?\s*\(")


def test_no_c_or_cpp_source_inside_python_strings():
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _C_SOURCE.search(node.value):
                found.append(f"{name}:{node.lineno}")
    assert not found, f"C/C++ source in Python strings (keep it in .c/.cpp files): {found}"


def test_the_checker_sees_what_it_must():
    # the checks above can fail: a planted upward import, circle and C string are found
    assert _layer("kansym.cli.fit") > _layer("kansym.discover.run") > _layer("kansym.symbolic.fit")
    g = nx.DiGraph([("kansym.io.bundle", "kansym.discover.run"), ("kansym.discover.run", "kansym.io.bundle")])
    assert list(nx.simple_cycles(g)) and _layer("kansym.discover.run") > _layer("kansym.io.bundle")
    assert _C_SOURCE.search('#include <torch/extension.h>\nstatic inline float f(float x) { return x; }')
    for planted in ("torch::Tensor f(torch::Tensor x);", 'TORCH_LIBRARY(kansym, m) { m.def("f"); }', "#define N 8"):
        assert _C_SOURCE.search(planted), planted
    assert not _C_SOURCE.search("use torch.utils.cpp_extension; # define the layer")  # prose is no C
    # only a package's __init__ -> its own submodule is a re-export; the way back stays a circle
    g = nx.DiGraph([("kansym.io", "kansym.io.bundle"), ("kansym.io.bundle", "kansym.io")])
    assert _reexports(g) == [("kansym.io", "kansym.io.bundle")]
    assert _imports(ROOT / "cli" / "plot.py", _modules()) >= {"kansym.plot", "kansym.discover.record"}
