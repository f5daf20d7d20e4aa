"""The native kernels (kansym.nn.fast.native, csrc/kan_kernels.cpp) against the reference spline math; their build and fallbacks."""

import os
import shutil
import subprocess
import sys
import time

import pytest
import torch
import torch.nn.functional as F

from kansym.nn import KANLayer, fast
from kansym.nn.fast import autograd, backends, native_linear
from kansym.nn.spline import bspline_basis, make_grid

HAS_CXX = shutil.which(os.environ.get("CXX", "c++")) is not None
needs_cxx = pytest.mark.skipif(not HAS_CXX, reason="no C++ compiler: the native kernels cannot be built here")


@pytest.fixture(params=["native", "torch"])
def kernels(request):
    """Run a test on the native kernels (through ctypes), then on the torch kernels; restores the backend."""
    before = fast.backend().requested
    if fast.use_backend(request.param).path != request.param:
        fast.use_backend(before)
        pytest.skip("native kernels unavailable")
    yield request.param
    fast.use_backend(before)


def _native():
    """The loaded native kernels (skips the test where they cannot be built)."""
    kernels = backends.native_kernels()
    if kernels is None:
        pytest.skip("native kernels unavailable")
    return kernels


def _layer(in_f, out_f, grid_size, gen, dtype):
    layer = KANLayer(in_f, out_f, grid_size, 3, generator=gen).to(dtype)
    low = torch.rand(in_f, generator=gen, dtype=dtype) * 4 - 3
    layer.grid = make_grid(low, low + 0.5 + torch.rand(in_f, generator=gen, dtype=dtype) * 3, grid_size, 3, dtype=dtype)
    with torch.no_grad():
        for p in (layer.coef, layer.scale_base, layer.scale_sp):
            p.copy_(torch.randn(p.shape, generator=gen, dtype=dtype))
    return layer


def _reference(layer, x):
    basis = bspline_basis(x, layer.grid, 3)  # (N, in, K)
    out = torch.einsum("nik,oik->no", basis, layer.coef * (layer.scale_sp * layer.mask).unsqueeze(-1))
    return out + F.silu(x) @ (layer.scale_base * layer.mask).T


def _value_and_grads(fn, layer, x, weight):
    x = x.clone().requires_grad_(True)
    out = fn(layer, x)
    return out.detach(), torch.autograd.grad((out * weight).sum(), [x, layer.coef, layer.scale_base, layer.scale_sp])


@needs_cxx
def test_native_kernels_build_here():
    assert backends.native_kernels() is not None, fast.backend().kernels


@pytest.mark.parametrize("width", [5, 12], ids=["narrow", "wide"])  # the two layouts of the native kernels
@pytest.mark.parametrize("grid_size", [1, 3, 5, 12])
def test_cubic_layer_equals_reference_with_and_without_native_kernels(kernels, grid_size, width):
    gen = torch.Generator().manual_seed(grid_size)
    for trial in range(3):
        layer = _layer(width, 3, grid_size, gen, torch.float64)
        lo, hi = layer.grid[:, 0], layer.grid[:, -1]
        u = torch.rand(200, width, generator=gen, dtype=torch.float64) * 1.6 - 0.3  # 30 % beyond each side
        x = lo + u * (hi - lo)
        knots = layer.grid.T  # (G + 7, in)
        x[: knots.shape[0]] = knots  # exactly on every knot
        weight = torch.randn(200, 3, generator=gen, dtype=torch.float64)
        out, grads = _value_and_grads(lambda m, t: m(t), layer, x, weight)
        ref, ref_grads = _value_and_grads(_reference, layer, x, weight)
        torch.testing.assert_close(out, ref, atol=1e-11, rtol=1e-11)
        for name, g, r in zip(["x", "coef", "scale_base", "scale_sp"], grads, ref_grads):
            torch.testing.assert_close(g, r, atol=1e-10, rtol=1e-10, msg=f"grad of {name}, trial {trial}")


@pytest.mark.parametrize("order", [0, 1, 2, 3, 4])
def test_non_uniform_layer_equals_reference_with_and_without_native_kernels(kernels, order):
    gen = torch.Generator().manual_seed(40 + order)
    layer = KANLayer(4, 3, 6, order, generator=gen).double()
    with torch.no_grad():
        for p in (layer.coef, layer.scale_base, layer.scale_sp):
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
    layer.update_grid(torch.randn(400, 4, generator=gen, dtype=torch.float64) ** 3)  # skewed: far from uniform
    assert layer.plan().piecewise
    lo, hi = layer.grid[:, 0], layer.grid[:, -1]
    x = lo + (torch.rand(150, 4, generator=gen, dtype=torch.float64) * 1.6 - 0.3) * (hi - lo)
    knots = layer.grid.T
    x[: knots.shape[0]] = knots  # on every knot
    weight = torch.randn(150, 3, generator=gen, dtype=torch.float64)
    out, grads = _value_and_grads(lambda m, t: m(t), layer, x, weight)
    basis = bspline_basis(x, layer.grid, order)
    ref = torch.einsum("nik,oik->no", basis, layer.coef * (layer.scale_sp * layer.mask).unsqueeze(-1))
    ref = ref + F.silu(x) @ (layer.scale_base * layer.mask).T
    torch.testing.assert_close(out, ref, atol=1e-11, rtol=1e-11)
    torch.testing.assert_close(layer.basis(x), basis, atol=1e-12, rtol=0)
    xs = x.clone().requires_grad_(True)
    ref_grads = torch.autograd.grad((_reference_order(layer, xs, order) * weight).sum(), [xs])
    torch.testing.assert_close(grads[0], ref_grads[0], atol=1e-9, rtol=1e-9)


def _reference_order(layer, x, order):
    basis = bspline_basis(x, layer.grid, order)
    out = torch.einsum("nik,oik->no", basis, layer.coef * (layer.scale_sp * layer.mask).unsqueeze(-1))
    return out + F.silu(x) @ (layer.scale_base * layer.mask).T


def test_float32_layer_matches_float64_reference(kernels):
    gen = torch.Generator().manual_seed(5)
    layer64 = _layer(16, 8, 5, gen, torch.float64)
    layer32 = _layer(16, 8, 5, torch.Generator(), torch.float32)
    layer32.load_state_dict({k: v.float() for k, v in layer64.state_dict().items()})
    x = torch.rand(300, 16, generator=gen, dtype=torch.float64) * 8 - 4
    weight = torch.randn(300, 8, generator=gen, dtype=torch.float64)
    out, grads = _value_and_grads(lambda m, t: m(t), layer32, x.float(), weight.float())
    ref, ref_grads = _value_and_grads(_reference, layer64, x, weight)
    torch.testing.assert_close(out.double(), ref, atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(grads[0].double(), ref_grads[0], atol=2e-3, rtol=1e-3)


@pytest.mark.parametrize("width", [3, 12], ids=["narrow", "wide"])  # the native kernels' two layouts
@pytest.mark.parametrize("updated", [False, True], ids=["uniform", "updated-grid"])
def test_nan_input_gives_nan_features_like_the_torch_kernels(kernels, updated, width):
    gen = torch.Generator().manual_seed(2)
    layer = _layer(width, 2, 5, gen, torch.float64)
    if updated:
        layer.update_grid(torch.randn(300, width, generator=gen, dtype=torch.float64) ** 3)
        assert layer.plan().piecewise
    x = torch.zeros(4, width, dtype=torch.float64)
    x[1, 2] = float("nan")
    x[2, 0] = float("inf")
    x[2, 1] = -float("inf")
    basis = layer.basis(x)
    assert torch.isnan(basis[1, 2]).all() and not torch.isnan(basis[[0, 2, 3]]).any()
    assert torch.equal(basis[2, :2].abs(), torch.zeros_like(basis[2, :2]))  # +-inf is outside the grid: 0 (the limit)
    x.requires_grad_(True)
    out = layer(x)
    assert torch.isnan(out[1]).all() and torch.isfinite(out[[0, 3]]).all()
    out[[0, 1, 3]].sum().backward()
    assert torch.isnan(x.grad[1, 2]) and torch.isfinite(x.grad[[0, 3]]).all()
    assert torch.isfinite(x.grad[1, torch.arange(width) != 2]).all()


@needs_cxx
def test_native_forward_saves_the_input_not_the_derivative():
    _native()
    layer = KANLayer(8, 4, 5, 3)
    x = torch.randn(64, 8, requires_grad=True)
    before = fast.backend().requested
    for path in ("native", "op"):  # the Python autograd function and the C++ operator
        shapes = []
        try:  # every tensor autograd saves, C++ nodes included, goes through the pack hook
            if fast.use_backend(path).path != path:
                continue
            with torch.autograd.graph.saved_tensors_hooks(lambda t: shapes.append(tuple(t.shape)) or t, lambda t: t):
                layer(x)
        finally:
            fast.use_backend(before)
        assert shapes.count((64, 8)) == 2  # the input and sigmoid(input), for the recomputed dF/dx
        assert (64, 9, 8) not in shapes and shapes.count((64, 9 * 8)) == 1  # F once, no dF/dx


def _run(code: str, env_extra: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, "KANSYM_OP": "0", **env_extra}  # the C kernels' build only (the C++ operator: test_native_op)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


PROBE = (
    "import torch; from kansym.nn import KANLayer, fast;"
    "layer = KANLayer(3, 2, 5, 3); y = layer(torch.randn(10, 3));"
    "print(fast.backend().kernels == 'loaded', bool(torch.isfinite(y).all()))"
)


def test_kansym_native_0_turns_the_kernels_off(tmp_path):
    done = _run(PROBE, {"KANSYM_NATIVE": "0", "XDG_CACHE_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
    assert not (tmp_path / "kansym").exists()  # nothing built


def test_a_failing_compiler_falls_back_to_the_torch_kernels_with_one_warning(tmp_path):
    done = _run(PROBE, {"CXX": "false", "XDG_CACHE_HOME": str(tmp_path), "KANSYM_NATIVE": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
    assert done.stderr.count("native spline kernels unavailable") == 1 and "Traceback" not in done.stderr
    assert "false could not build kansym_kernels_" in done.stderr  # the reason, in the one warning
    assert not list((tmp_path / "kansym").rglob("*.so"))  # no half-written library left
    (note,) = (tmp_path / "kansym").glob("kansym_kernels_*/failed")
    assert note.read_text().startswith("false could not build kansym_kernels_")


@needs_cxx
def test_the_built_library_is_cached_and_reused(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path), "KANSYM_NATIVE": "1"}
    first = _run(PROBE, env)
    assert first.returncode == 0 and first.stdout.split() == ["True", "True"], first.stderr
    (lib,) = (tmp_path / "kansym").glob("kansym_kernels_*/*.so")
    stamp = lib.stat().st_mtime_ns
    second = _run(PROBE, {**env, "PATH": str(tmp_path / "nothing")})  # no compiler, no ninja: a rebuild would fail
    assert second.stdout.split() == ["True", "True"], second.stderr
    assert lib.stat().st_mtime_ns == stamp


@needs_cxx
def test_two_processes_starting_at_once_build_the_kernels_once(tmp_path):
    env = {**os.environ, "KANSYM_OP": "0", "XDG_CACHE_HOME": str(tmp_path), "KANSYM_NATIVE": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", PROBE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [o.split() for o, _ in outs] == [["True", "True"]] * 2, [e for _, e in outs]
    (log,) = (tmp_path / "kansym").glob("kansym_kernels_*/.ninja_log")
    compiles = [line for line in log.read_text().splitlines()[1:] if line.split("\t")[3] == "kan_kernels.o"]
    assert len(compiles) == 1  # the second process waited for the first one's build and loaded it


@needs_cxx
def test_row_blocks_on_several_threads_equal_one_thread():
    kernels = _native()
    gen = torch.Generator().manual_seed(4)
    layer = _layer(32, 4, 5, gen, torch.float32)
    plan = layer.plan()
    x = torch.randn(3001, 32, generator=gen) * 2  # rows not divisible by the thread count
    g = torch.randn(3001, 9, 32, generator=gen)
    before = torch.get_num_threads()
    try:
        results, sig = [], torch.sigmoid(x)
        for threads in (1, 3):
            torch.set_num_threads(threads)
            feats = kernels.cubic_features(x, plan.t0, plan.inv_h, 8, True)[0]
            results.append((feats, kernels.cubic_input_grad(g, x, sig, plan.t0, plan.inv_h)))
    finally:
        torch.set_num_threads(before)
    (f1, g1), (f3, g3) = results
    assert torch.equal(f1[:, 1:], f3[:, 1:]) and torch.equal(g1, g3)  # the C kernels: bit for bit
    torch.testing.assert_close(f1[:, 0], f3[:, 0], rtol=1e-6, atol=0)  # silu: torch's sigmoid, ulps by thread count


def test_reused_backward_scratch_gives_the_same_gradients_and_stays_bounded():
    gen = torch.Generator().manual_seed(9)
    a, b = KANLayer(6, 5, 5, 3, generator=gen), KANLayer(5, 2, 5, 3, generator=gen)
    x = torch.randn(300, 6, generator=gen, requires_grad=True)
    grads = []
    for _ in range(2):  # the second backward reuses the first one's dL/dF memory in both layers
        x.grad = None
        b(a(x)).square().sum().backward()
        grads.append((x.grad.clone(), a.coef.grad.clone()))
        a.zero_grad(), b.zero_grad()
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])
    assert 0 < autograd.workspace_bytes() <= autograd.WORKSPACE_MAX_BYTES
    big = KANLayer(64, 64, 5, 3)
    xb = torch.randn(8192, 64, requires_grad=True)  # dL/dF: 8192 x 576 floats = 18.9 MB > 16 MB: not kept
    big(xb).sum().backward()
    assert autograd.workspace_bytes() <= autograd.WORKSPACE_MAX_BYTES


@needs_cxx
@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_cache_folder_falls_back_to_the_temporary_folder(tmp_path):
    cache = tmp_path / "ro"
    cache.mkdir()
    cache.chmod(0o500)
    try:
        done = _run(PROBE, {"XDG_CACHE_HOME": str(cache), "KANSYM_NATIVE": "1"})
    finally:
        cache.chmod(0o700)
    assert done.stdout.split() == ["True", "True"], done.stderr
    assert not list(cache.rglob("*.so"))


@pytest.mark.parametrize("updated", [False, True], ids=["uniform", "updated-grid"])
@pytest.mark.parametrize("shape", [(3, 4, 90), (9, 11, 37)], ids=["3x4", "9x11"])  # rows not a multiple of 8
def test_forward_l1_equals_edge_outputs_with_and_without_native_kernels(kernels, updated, shape):
    n_in, n_out, n = shape
    gen = torch.Generator().manual_seed(12)
    layer = _layer(n_in, n_out, 5, gen, torch.float64)
    with torch.no_grad():
        layer.mask[1, 2] = 0.0  # a pruned edge: zero value, zero L1, zero gradient
    if updated:
        layer.update_grid(torch.randn(300, n_in, generator=gen, dtype=torch.float64) ** 3)
    x = (torch.randn(n, n_in, generator=gen, dtype=torch.float64) * 2).requires_grad_(True)
    w_out = torch.randn(n, n_out, generator=gen, dtype=torch.float64)
    w_l1 = torch.randn(n_out, n_in, generator=gen, dtype=torch.float64)
    params = [x, layer.coef, layer.scale_base, layer.scale_sp]
    out, l1 = layer.forward_l1(x)
    edges = layer.edge_outputs(x)  # (N, out, in), autograd through the reference-style path
    torch.testing.assert_close(out, edges.sum(-1), atol=1e-11, rtol=0)
    torch.testing.assert_close(l1, edges.abs().mean(0), atol=1e-12, rtol=0)
    assert l1[1, 2] == 0
    got = torch.autograd.grad((out * w_out).sum() + (l1 * w_l1).sum(), params)
    ref = torch.autograd.grad((edges.sum(-1) * w_out).sum() + (edges.abs().mean(0) * w_l1).sum(), params)
    for name, g, r in zip(["x", "coef", "scale_base", "scale_sp"], got, ref):
        torch.testing.assert_close(g, r, atol=1e-10, rtol=1e-10, msg=f"grad of {name}")


def test_second_derivatives_are_refused_not_silently_zero(kernels):
    layer = KANLayer(3, 2, 5, 3).double()
    x = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="first derivatives only"):
        torch.autograd.grad(layer(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="first derivatives only"):
        torch.autograd.grad(layer.forward_l1(x)[1].sum(), x, create_graph=True)
    (g,) = torch.autograd.grad(layer(x).sum(), x)  # first derivatives as usual
    assert g.shape == x.shape


@needs_cxx
def test_an_unusable_cache_folder_falls_back_and_only_old_builds_are_removed(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    tmpdir = tmp_path / "tmp"
    private = tmpdir / f"kansym-{os.getuid()}"
    private.mkdir(parents=True, mode=0o700)
    stale = [private / f"kansym_kernels_000000000000000{i}" for i in range(3)]
    other_kind = private / "kansym_op_0000000000000000"  # another extension's build: not counted, not removed
    for age, path in zip((300, 200, 100, 400), [*stale, other_kind]):  # stale[2] is the newest other build
        path.mkdir()
        (path / f"{path.name}.so").write_bytes(b"old build")
        os.utime(path, (time.time() - age, time.time() - age))
    done = _run(PROBE, {"XDG_CACHE_HOME": str(not_a_folder), "TMPDIR": str(tmpdir), "KANSYM_NATIVE": "1"})
    assert done.stdout.split() == ["True", "True"], done.stderr
    built = {p.parent for p in private.glob("kansym_kernels_*/*.so")}
    # the new build and the two newest others stay (another checkout's build is not evicted at once)
    assert len(built) == 3 and stale[1] in built and stale[2] in built and not stale[0].exists()
    assert other_kind.exists()


@needs_cxx
@pytest.mark.parametrize("updated", [False, True], ids=["uniform", "updated-grid"])
@pytest.mark.parametrize("base_fun", ["silu", "zero"])
def test_blocked_path_equals_the_one_block_path(updated, base_fun):
    from kansym.nn.fast import linear

    _native()
    gen = torch.Generator().manual_seed(21)
    layer = KANLayer(24, 7, 5, 3, base_fun=base_fun, generator=gen).double()
    with torch.no_grad():
        layer.mask[2, 3] = 0.0
    if updated:
        layer.update_grid(torch.randn(500, 24, generator=gen, dtype=torch.float64) ** 3)
    x = torch.randn(6000, 24, generator=gen, dtype=torch.float64) * 1.5  # F: 6000 x 9 x 24 doubles = 10 MB: 3 blocks
    plan = layer.plan()
    assert native_linear.blocked_applies(x, plan, None, layer.coef, layer.scale_base, layer.scale_sp, layer.mask)
    weight = torch.randn(6000, 7, generator=gen, dtype=torch.float64)
    params = [layer.coef, layer.scale_base, layer.scale_sp]
    results = []
    for blocked in (True, False):
        xs = x.clone().requires_grad_(True)
        apply = native_linear.KANLinearBlocked.apply if blocked else (lambda *a: linear._KANLinear.apply(*a, None))
        out = apply(xs, *params, layer.mask, plan, base_fun == "silu")
        results.append((out.detach(), torch.autograd.grad((out * weight).sum(), [xs, *params], allow_unused=True)))
    (out_b, g_b), (out_1, g_1) = results
    torch.testing.assert_close(out_b, out_1, atol=1e-12, rtol=1e-12)
    for name, a, b in zip(["x", "coef", "scale_base", "scale_sp"], g_b, g_1):
        if a is None or b is None:
            assert a is None and b is None or base_fun == "zero", name
            continue
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10, msg=name)
    assert layer(x).shape == (6000, 7)  # the layer takes the blocked path at this size


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_native_sigmoid_is_within_two_ulp_and_keeps_torchs_special_values(dtype):
    """The forward kernels write sigmoid(x) with their own vectorised exp (silu's row and silu')."""
    kernels = _native()
    special = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 88.7, 89.0, -103.0, -110.0, 709.7, 710.0, -745.0]
    x = torch.cat([torch.linspace(-120, 120, 40001, dtype=dtype), torch.linspace(-800, 800, 4001, dtype=dtype),
                   torch.tensor(special, dtype=dtype)])
    x = x.reshape(-1, 1).repeat(1, 9).contiguous()  # 9 inputs: the wide kernel
    feats, sig = kernels.cubic_features(x, torch.full((9,), -1.0, dtype=dtype), torch.full((9,), 2.0, dtype=dtype), 8, True)
    exact = torch.sigmoid(x.double())
    normal = exact > torch.finfo(dtype).tiny * 2**24  # away from subnormals, where relative error means nothing
    rel = ((sig.double() - exact).abs() / exact)[normal]
    assert rel.max() <= 2 * torch.finfo(dtype).eps
    torch.testing.assert_close(sig[-len(special):], torch.sigmoid(x[-len(special):]), rtol=0, atol=0, equal_nan=True)
    silu = feats[:, 0]
    assert torch.equal(silu.isnan(), (x * torch.sigmoid(x)).isnan())  # NaN and -inf give NaN, as torch's silu
    assert silu[-len(special) + 1, 0] == float("inf")


@needs_cxx
def test_a_cache_folder_others_can_write_is_not_trusted(tmp_path):
    shared = tmp_path / "shared"
    (shared / "kansym").mkdir(parents=True)
    (shared / "kansym").chmod(0o777)  # anyone could have planted a library here
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    done = _run(PROBE, {"XDG_CACHE_HOME": str(shared), "TMPDIR": str(tmpdir), "KANSYM_NATIVE": "1"})
    assert done.stdout.split() == ["True", "True"], done.stderr
    assert not list((shared / "kansym").iterdir())  # nothing built or loaded there
    private = tmpdir / f"kansym-{os.getuid()}"
    assert len(list(private.glob("kansym_kernels_*/kansym_kernels_*.so"))) == 1 and private.stat().st_mode & 0o777 == 0o700
    assert all(p.stat().st_mode & 0o777 == 0o700 for p in private.iterdir())  # each build's folder private too
