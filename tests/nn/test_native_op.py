"""The C++ operator of the KAN layer (csrc/kan_op.cpp): the ctypes path's numbers, its build and its fallbacks."""

import os
import shutil
import subprocess
import sys
import time

import pytest
import torch

from kansym.nn import KANLayer, fast
from kansym.nn.fast import FeatureCache, backends, build, native_linear

HAS_CXX = shutil.which(os.environ.get("CXX", "c++")) is not None
needs_cxx = pytest.mark.skipif(not HAS_CXX, reason="no C++ compiler: the operator cannot be built here")


@pytest.fixture(scope="module")
def built():
    if backends.native_kernels() is None:
        pytest.skip("native kernels unavailable")
    chosen = fast.use_backend("op", timeout=600)
    assert chosen.path == "op", chosen  # with a compiler present a failed build is a defect
    yield
    fast.use_backend("auto")


def _step(layer, x, g, path, cache=None):
    fast.use_backend(path)
    try:
        for p in layer.parameters():
            p.grad = None
        x.grad = None
        out = layer(x, cache=cache)
        out.backward(g)
        grads = [p.grad for p in layer.parameters()] + ([x.grad] if x.requires_grad else [])
        return [out.detach()] + grads
    finally:
        fast.use_backend("op")


@needs_cxx
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("grid", ["uniform", "updated", "updated-order2"])
@pytest.mark.parametrize("base_fun", ["silu", "zero"])
@pytest.mark.parametrize("x_grad", [True, False], ids=["x-grad", "no-x-grad"])
@pytest.mark.parametrize("shape", [(5, 3, 13), (20, 7, 700)], ids=["narrow", "wide"])
def test_operator_gives_the_ctypes_paths_numbers_bit_for_bit(built, dtype, grid, base_fun, x_grad, shape):
    n_in, n_out, n = shape
    gen = torch.Generator().manual_seed(3)
    order = 2 if grid == "updated-order2" else 3
    layer = KANLayer(n_in, n_out, 5, order, base_fun=base_fun, generator=gen).to(dtype)
    with torch.no_grad():
        layer.mask[1, 2] = 0.0  # a pruned edge
    if grid != "uniform":
        layer.update_grid(torch.randn(400, n_in, generator=gen, dtype=dtype) ** 3)
        assert layer.plan().piecewise
    x = (torch.randn(n, n_in, generator=gen, dtype=dtype) * 1.5).requires_grad_(x_grad)
    g = torch.randn(n, n_out, generator=gen, dtype=dtype)
    via_op, via_ctypes = _step(layer, x, g, "op"), _step(layer, x, g, "native")
    assert len(via_op) == len(via_ctypes)
    for a, b in zip(via_op, via_ctypes):
        assert (a is None and b is None) if base_fun == "zero" and (a is None or b is None) else torch.equal(a, b)
    # and the operator was used: its backward node is a C++ node, not the Python function's
    assert "CppNode" in layer(x).grad_fn.name()


@needs_cxx
def test_operator_with_a_feature_cache_and_nan_inputs(built):
    gen = torch.Generator().manual_seed(5)
    layer = KANLayer(4, 3, 5, 3, generator=gen)
    x = torch.randn(50, 4, generator=gen)
    x[7, 2] = float("nan")
    g = torch.randn(50, 3, generator=gen)
    cache = FeatureCache()
    first = _step(layer, x, g, "op", cache)
    again = _step(layer, x, g, "op", cache)  # features from the cache this time
    plain = _step(layer, x, g, "native")
    assert cache.hits >= 1
    for a, b, c in zip(first, again, plain):
        for other in (b, c):
            assert torch.equal(a.isnan(), other.isnan()) and torch.equal(a.nan_to_num(), other.nan_to_num())
    assert first[0][7].isnan().all() and first[0][[0, 8]].isfinite().all()


@needs_cxx
def test_operator_refuses_second_derivatives_and_checks_its_arguments(built):
    layer = KANLayer(3, 2, 5, 3).double()
    x = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="first derivatives only"):
        torch.autograd.grad(layer(x).sum(), x, create_graph=True)
    kan_op, plan = backends.operator(), layer.plan()
    args = (layer.coef, layer.scale_base, layer.scale_sp, layer.mask, [plan.t0, plan.inv_h], 3, True, plan.scale)
    with pytest.raises(RuntimeError, match="contiguous CPU tensor of x's dtype"):
        kan_op(x.float(), *args)  # float32 input, float64 parameters
    with pytest.raises(RuntimeError, match=r"x \(N, in\)"):
        kan_op(torch.randn(7, 4, dtype=torch.float64), *args)  # 4 inputs, 3 features
    one = torch.ones(1, dtype=torch.float64)  # a wrong shape must raise, not read past the tensor (a fresh user's crash)
    for bad in ((layer.coef, one, layer.scale_sp, layer.mask), (layer.coef, layer.scale_base, one, layer.mask),
                (layer.coef, layer.scale_base, layer.scale_sp, layer.mask.T.contiguous())):
        with pytest.raises(RuntimeError, match=r"scale_base, scale_sp and mask \(out, in\)"):
            kan_op(x, *bad, *args[4:])
    with pytest.raises(RuntimeError, match=r"t0 and inv_h \(in,\)"):
        kan_op(x, *args[:4], [plan.t0, plan.inv_h[:1]], *args[5:])
    layer.update_grid(torch.randn(50, 3, dtype=torch.float64) ** 3)
    bound = native_linear.native_bound(x, layer.plan(), True, layer.coef, layer.scale_base, layer.scale_sp, layer.mask)
    knots, origins, pieces = bound.grid
    pw_args = (layer.coef, layer.scale_base, layer.scale_sp, layer.mask)
    with pytest.raises(RuntimeError, match="origins"):
        kan_op(x, *pw_args, [knots, origins, pieces[:1]], 3, True, 1.0)
    with pytest.raises(RuntimeError, match="K = M - k - 1"):
        kan_op(x, layer.coef[:, :, :5].contiguous(), *pw_args[1:], [knots, origins, pieces], 3, True, 1.0)
    y = kan_op(x, *pw_args, [knots, origins, pieces], 3, True, 1.0)  # the right call still works
    assert y.shape == (7, 2) and torch.isfinite(y).all()


def _probe(env_extra: dict, wait_s: float | None = 60) -> subprocess.CompletedProcess:
    """A fresh process: one layer call, then ``use_backend("op")`` waiting ``wait_s`` (None: just ``backend()``)."""
    pick = "fast.backend()" if wait_s is None else f"fast.use_backend('op', timeout={wait_s})"
    code = (
        "import torch; from kansym.nn import KANLayer, fast;"
        f"y = KANLayer(3, 2, 5, 3)(torch.randn(10, 3)); b = {pick};"
        "print(b.path, bool(torch.isfinite(y).all())); print(b.operator)"
    )
    env = {**os.environ, "KANSYM_NATIVE": "1", "KANSYM_OP": "1", **env_extra}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def _failing_cxx(folder) -> str:
    """A C++ compiler that builds the C kernels but fails on the operator's source (as one too old for torch's headers)."""
    cxx = folder / "cxx-without-torch"
    real = shutil.which(os.environ.get("CXX", "c++"))
    cxx.write_text(f'#!/bin/sh\ncase "$*" in *kan_op.cpp*) echo "error: simulated failure" >&2; exit 1;; esac\n'
                   f'exec {real} "$@"\n')
    cxx.chmod(0o755)
    return str(cxx)


@needs_cxx
def test_a_failing_build_is_noted_once_and_the_layer_keeps_the_ctypes_path(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "CXX": _failing_cxx(tmp_path)}
    first = _probe(env)
    assert first.returncode == 0, first.stderr
    head, status = first.stdout.strip().split("\n")
    assert head == "native True"  # the C kernels serve
    assert status.startswith("unavailable: the build failed") and "simulated failure" in status
    (note,) = (tmp_path / "cache" / "kansym").glob("kansym_op_*/failed")
    assert str(note) in status and note.read_text().startswith(f"{env['CXX']} could not build kansym_op_")
    assert "backend 'op' is unavailable" in first.stderr  # use_backend("op") said so
    here = note.parent
    assert not list(here.glob("*.so")) and not (here / "lock").exists()  # no library, cpp_extension's baton released
    assert not build._held(here)
    stamp = note.stat().st_mtime_ns
    second = _probe(env)  # not retried within a day
    assert second.stdout.split()[:2] == ["native", "True"] and note.stat().st_mtime_ns == stamp


@needs_cxx
def test_another_process_build_is_waited_for_and_a_killed_ones_leftovers_cleaned(tmp_path, monkeypatch):
    fcntl = pytest.importorskip("fcntl")  # the build lock is POSIX flock
    cache = tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache), "CXX": _failing_cxx(tmp_path)}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    kernels = build.kernels_extension()
    op = build.op_extension(kernels.library(cache / "kansym"))  # the operator the probes will want
    here = cache / "kansym" / op.name
    here.mkdir(parents=True)
    fd = os.open(here / "build.lock", os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # "another process" is building it
    try:
        waiting = _probe(env, wait_s=1.5)
    finally:
        os.close(fd)  # ... and dies: the kernel releases its lock
    assert waiting.stdout.split() == ["native", "True", "building"], waiting.stderr
    assert not (here / "failed").exists()  # nothing started while it was held
    (here / "lock").write_text("")  # what the killed build left: cpp_extension's baton and half a library
    op.library(cache / "kansym").write_bytes(b"half a library")
    took_over = _probe(env)
    assert "the build failed" in took_over.stdout  # it ran (and, with this compiler, failed)
    assert not (here / "lock").exists() and not op.library(cache / "kansym").exists()


@needs_cxx
def test_without_the_native_kernels_the_operator_is_unavailable_at_once(tmp_path):
    started = time.monotonic()
    done = _probe({"XDG_CACHE_HOME": str(tmp_path), "CXX": "false"}, wait_s=60)  # the C kernels cannot build
    assert time.monotonic() - started < 45  # not the whole 60 s
    head, status = done.stdout.strip().split("\n")
    assert head == "torch True" and status.startswith("unavailable: the native C kernels are unavailable")
    off = _probe({"XDG_CACHE_HOME": str(tmp_path), "KANSYM_NATIVE": "0"}, wait_s=None)
    assert off.stdout.split() == ["torch", "True", "off"]


@pytest.mark.parametrize("switch", ["KANSYM_OP", "KANSYM_NATIVE"])
def test_kansym_op_0_and_kansym_native_0_keep_the_operator_off(tmp_path, switch):
    done = _probe({"XDG_CACHE_HOME": str(tmp_path), switch: "0"}, wait_s=None)
    path = "native" if switch == "KANSYM_OP" else "torch"
    if path == "native" and "unavailable" in done.stdout:
        pytest.skip("native kernels unavailable")
    assert done.stdout.split() == [path, "True", "off"], done.stderr
    assert not list(tmp_path.rglob("kansym_op_*"))
