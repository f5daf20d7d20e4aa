"""The C++ operator of the KAN layer (kansym.nn.fast.op): the ctypes path's numbers, its build and its fallbacks."""

import os
import shutil
import subprocess
import sys
import time

import pytest
import torch

from kansym.nn import KANLayer
from kansym.nn.fast import FeatureCache, linear, native
from kansym.nn.fast import op as fast_op

HAS_CXX = shutil.which(os.environ.get("CC", "cc")) is not None and any(
    shutil.which(c) for c in (os.environ.get("CXX", "c++"), "g++", "clang++")
)
needs_cxx = pytest.mark.skipif(not HAS_CXX, reason="no C/C++ compiler: the operator cannot be built here")


@pytest.fixture(scope="module")
def built():
    if not native.available():
        pytest.skip("native kernels unavailable")
    assert fast_op.wait(600), fast_op.status()  # with compilers present a failed build is a defect
    yield
    fast_op.enable(True)


def _step(layer, x, g, use_op, cache=None):
    fast_op.enable(use_op)
    try:
        layer.feature_cache = cache
        for p in layer.parameters():
            p.grad = None
        x.grad = None
        out = layer(x)
        out.backward(g)
        grads = [p.grad for p in layer.parameters()] + ([x.grad] if x.requires_grad else [])
        return [out.detach()] + grads
    finally:
        fast_op.enable(True)
        layer.feature_cache = None


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
    via_op, via_ctypes = _step(layer, x, g, True), _step(layer, x, g, False)
    assert len(via_op) == len(via_ctypes)
    for a, b in zip(via_op, via_ctypes):
        assert (a is None and b is None) if base_fun == "zero" and (a is None or b is None) else torch.equal(a, b)
    # and the operator was used: its backward node is a C++ node, not the Python function's
    fast_op.enable(True)
    assert "CppNode" in layer(x).grad_fn.name()


@needs_cxx
def test_operator_with_a_feature_cache_and_nan_inputs(built):
    gen = torch.Generator().manual_seed(5)
    layer = KANLayer(4, 3, 5, 3, generator=gen)
    x = torch.randn(50, 4, generator=gen)
    x[7, 2] = float("nan")
    g = torch.randn(50, 3, generator=gen)
    cache = FeatureCache()
    first = _step(layer, x, g, True, cache)
    again = _step(layer, x, g, True, cache)  # features from the cache this time
    plain = _step(layer, x, g, False)
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
    kan_op, plan = fast_op.get(), layer.plan()
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
    bound = linear._native_bound(x, layer.plan(), True, layer.coef, layer.scale_base, layer.scale_sp, layer.mask)
    knots, origins, pieces = bound.grid
    pw_args = (layer.coef, layer.scale_base, layer.scale_sp, layer.mask)
    with pytest.raises(RuntimeError, match="origins"):
        kan_op(x, *pw_args, [knots, origins, pieces[:1]], 3, True, 1.0)
    with pytest.raises(RuntimeError, match="K = M - k - 1"):
        kan_op(x, layer.coef[:, :, :5].contiguous(), *pw_args[1:], [knots, origins, pieces], 3, True, 1.0)
    y = kan_op(x, *pw_args, [knots, origins, pieces], 3, True, 1.0)  # the right call still works
    assert y.shape == (7, 2) and torch.isfinite(y).all()


def _probe(env_extra: dict, timeout_s: float = 60) -> subprocess.CompletedProcess:
    code = (
        "import torch; from kansym.nn import KANLayer; from kansym.nn.fast import op;"
        f"y = KANLayer(3, 2, 5, 3)(torch.randn(10, 3)); ok = op.wait({timeout_s});"
        "print(ok, bool(torch.isfinite(y).all())); print(op.status())"
    )
    env = {**os.environ, "KANSYM_NATIVE": "1", "KANSYM_OP": "1", **env_extra}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


@needs_cxx
def test_a_failing_build_is_noted_once_and_the_layer_keeps_the_ctypes_path(tmp_path):
    first = _probe({"XDG_CACHE_HOME": str(tmp_path), "CXX": "false"})
    assert first.returncode == 0, first.stderr
    ok, finite, status = first.stdout.split(maxsplit=2)
    assert (ok, finite) == ("False", "True")
    assert status.startswith("unavailable: the build failed") and "exited with status 1" in status
    (note,) = (tmp_path / "kansym").glob("op_*.failed")
    assert str(note) in status and note.read_text().startswith("false (the operator) exited with status 1")
    assert not list((tmp_path / "kansym").glob("op_*.so")) and not list((tmp_path / "kansym").glob(".op-build-*"))
    assert not list((tmp_path / "kansym").glob("op_*.building"))  # the lock went with the build
    stamp = note.stat().st_mtime_ns
    second = _probe({"XDG_CACHE_HOME": str(tmp_path), "CXX": "false"})  # not retried within a day
    assert second.stdout.split()[0] == "False" and note.stat().st_mtime_ns == stamp


@needs_cxx
def test_another_process_build_lock_is_waited_for_and_a_stale_one_taken_over(tmp_path, monkeypatch):
    folder = tmp_path / "kansym"
    folder.mkdir()
    default_key = fast_op._key()
    monkeypatch.setenv("CXX", "false")  # the probes' compiler: part of the build's key
    key = fast_op._key()
    assert key != default_key
    lock = folder / f"op_{key}.building"
    lock.write_text("")
    waiting = _probe({"XDG_CACHE_HOME": str(tmp_path), "CXX": "false"}, timeout_s=1.5)
    assert waiting.stdout.split()[:3] == ["False", "True", "building"], waiting.stderr
    assert not list(folder.glob(".op-build-*")) and not list(folder.glob("op_*.failed"))  # nothing started
    old = time.time() - 2 * fast_op._STALE_LOCK_S
    os.utime(lock, (old, old))
    took_over = _probe({"XDG_CACHE_HOME": str(tmp_path), "CXX": "false"})
    assert "the build failed" in took_over.stdout  # it ran (and, with CXX=false, failed)
    assert not lock.exists()


@needs_cxx
def test_without_the_native_kernels_wait_returns_at_once_with_the_reason(tmp_path):
    started = time.monotonic()
    done = _probe({"XDG_CACHE_HOME": str(tmp_path), "CC": "false"}, timeout_s=60)  # the C kernels cannot build
    assert time.monotonic() - started < 45  # not the whole 60 s
    ok, finite, status = done.stdout.split(maxsplit=2)
    assert (ok, finite) == ("False", "True") and status.startswith("unavailable: the native C kernels are unavailable")
    off = _probe({"XDG_CACHE_HOME": str(tmp_path), "KANSYM_NATIVE": "0"}, timeout_s=60)
    assert off.stdout.split() == ["False", "True", "disabled"]


@pytest.mark.parametrize("switch", ["KANSYM_OP", "KANSYM_NATIVE"])
def test_kansym_op_0_and_kansym_native_0_keep_the_operator_off(tmp_path, switch):
    done = _probe({"XDG_CACHE_HOME": str(tmp_path), switch: "0"}, timeout_s=1)
    assert done.stdout.split() == ["False", "True", "disabled"], done.stderr
    assert not list(tmp_path.rglob("op_*")) and not list(tmp_path.rglob(".op-build-*"))
