"""The KAN layer's fast backend (kansym.nn.fast.backend / use_backend): pick, report, environment default, fallback."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

import kansym
from kansym.errors import ConfigError, KansymError
from kansym.nn import KANLayer, fast
from kansym.nn.fast import backends, build

ROOT = Path(kansym.__file__).resolve().parents[1]


@pytest.fixture
def restore():
    before = fast.backend().requested
    yield
    fast.use_backend(before)


def _layer_and_input():
    gen = torch.Generator().manual_seed(11)
    layer = KANLayer(6, 4, 5, 3, generator=gen).double()
    with torch.no_grad():
        layer.coef.copy_(torch.randn(layer.coef.shape, generator=gen, dtype=torch.float64))
    x = (torch.randn(300, 6, generator=gen, dtype=torch.float64) * 1.2).requires_grad_(True)
    return layer, x


def _run(layer, x):
    x.grad = None
    layer.zero_grad()
    out = layer(x)
    out.square().sum().backward()
    return out.grad_fn.name(), [out.detach(), x.grad.clone(), layer.coef.grad.clone(), layer.scale_sp.grad.clone()]


def test_use_backend_picks_the_path_a_layer_call_runs_on_and_backend_reports_it(restore):
    layer, x = _layer_and_input()
    got = fast.use_backend("torch")
    assert (got.requested, got.path, got.source, got.kernels, got.operator) == (
        "torch", "torch", "use_backend", "off", "off")
    assert got.reason == "asked for (use_backend)" and fast.backend() == got
    torch_node, torch_vals = _run(layer, x)
    assert torch_node == "_KANLinearBackward"  # the tensor kernels' autograd function
    if backends.native_kernels() is None and fast.use_backend("native").path != "native":
        pytest.skip("native kernels unavailable")
    got = fast.use_backend("native")
    assert (got.requested, got.path, got.kernels, got.operator) == ("native", "native", "loaded", "off")
    native_node, native_vals = _run(layer, x)
    assert native_node == "KANLinearNativeBackward"  # the ctypes path
    for a, b in zip(native_vals, torch_vals):  # the same values to rounding (float64)
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    got = fast.use_backend("op", timeout=600)
    assert got.path == "op" and got.operator == "loaded", got
    assert got.reason == "the C++ operator is built and loaded"
    op_node, op_vals = _run(layer, x)
    assert "CppNode" in op_node
    assert all(torch.equal(a, b) for a, b in zip(op_vals, native_vals))  # bit for bit
    got = fast.use_backend("auto")
    assert (got.requested, got.path) == ("auto", "op")  # once built, auto takes the operator


def test_an_unknown_backend_is_a_config_error_naming_the_choices(restore):
    with pytest.raises(ConfigError, match=r"unknown backend 'cuda': choose one of 'auto', 'op', 'native', 'torch'"):
        fast.use_backend("cuda")
    assert isinstance(ConfigError("x"), KansymError)
    assert fast.backend().requested in backends.REQUESTS  # unchanged


def _report(env_extra: dict, code: str = "b = fast.backend()") -> subprocess.CompletedProcess:
    script = f"from kansym.nn import fast; {code}; print(b.requested, b.source, b.path, sep='|'); print(b.reason)"
    env = {k: v for k, v in os.environ.items() if k not in ("KANSYM_NATIVE", "KANSYM_OP")}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env={**env, **env_extra},
                          timeout=300)


@pytest.mark.parametrize("env, requested, source", [
    ({}, "auto", "default"),
    ({"KANSYM_OP": "0"}, "native", "KANSYM_OP=0"),
    ({"KANSYM_NATIVE": "0"}, "torch", "KANSYM_NATIVE=0"),
    ({"KANSYM_NATIVE": "0", "KANSYM_OP": "0"}, "torch", "KANSYM_NATIVE=0"),
])
def test_the_environment_sets_the_default_once(env, requested, source):
    done = _report(env)
    assert done.returncode == 0, done.stderr
    first, reason = done.stdout.strip().split("\n")
    assert first.split("|")[:2] == [requested, source]
    if requested == "torch":
        assert first.split("|")[2] == "torch" and reason == f"asked for ({source})"
    # read once: changing the variable later in the process changes nothing
    later = _report(env, "import os; os.environ['KANSYM_NATIVE'] = '0'; b = fast.backend()")
    assert later.stdout.split("\n")[0].split("|")[:2] == [requested, source]


def test_without_a_compiler_every_request_falls_back_to_torch_with_the_reason(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path), "CXX": "false"}
    done = _report(env, "import warnings; warnings.simplefilter('always'); b = fast.use_backend('native')")
    assert done.returncode == 0, done.stderr
    first, reason = done.stdout.strip().split("\n")
    assert first == "native|use_backend|torch"
    assert reason.startswith("the native C kernels are unavailable (false could not build kansym_kernels_")
    assert "backend 'native' is unavailable" in done.stderr and "using 'torch'" in done.stderr
    op = _report(env, "b = fast.use_backend('op', timeout=60)")
    assert op.stdout.split("\n")[0] == "op|use_backend|torch"


def test_no_cxx_source_remains_inside_python_and_the_sources_ship_as_package_data():
    c_like = re.compile(r'#include\s*[<"]|extern "C"|TORCH_LIBRARY|\bint64_t\s+\w+\s*[,;=)]|__restrict__')
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "kansym").rglob("*.py") if c_like.search(p.read_text())]
    assert offenders == []
    sources = sorted(p.name for p in build.CSRC.iterdir() if p.suffix in (".cpp", ".h"))
    assert sources == ["kan_kernels.cpp", "kan_kernels.h", "kan_op.cpp"]
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["kansym"]
    shipped = {p.name for pattern in patterns for p in (ROOT / "kansym").glob(pattern)}
    assert set(sources) <= shipped
