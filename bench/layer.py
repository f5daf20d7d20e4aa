"""KAN layer speed and memory: kansym vs pykan vs inkan vs the dense-equivalent matmul.

For each (batch, width) the script builds, in one process:

- ``kansym``: :class:`kansym.nn.KANLayer` (width -> width, grid G, order k) as users get
  it (``fast.use_backend("auto")``): on CPU the layer as one C++ operator on the native
  kernels (``kansym/nn/fast/csrc``, built with ``torch.utils.cpp_extension`` on first use;
  the script waits for the operator's build before timing) when a compiler exists;
- ``kansym-ctypes``: the same layer on the same native kernels through the Python
  autograd function and :mod:`ctypes` (``use_backend("native")``, as ``KANSYM_OP=0``);
- ``kansym-torch``: the same layer with the native kernels off (``use_backend("torch")``,
  as ``KANSYM_NATIVE=0``): the basis by eager torch ops;
- ``kansym-compiled``: native kernels off, :func:`kansym.nn.fast.compile_kernels` on
  (the basis fused by ``torch.compile``; the first call compiles, in the warm-up);
- ``kansym-updated``: the eager layer after ``update_grid`` on skewed samples (cubes of
  uniform ones): a non-uniform grid, evaluated from its per-interval polynomials (what a
  trained model runs after grid updates);
- ``pykan``: pykan 0.2.8's ``kan.KANLayer`` (its forward returns four tensors; the
  first is the output), skipped where its ``(batch, out, in)`` tensors would exceed
  ``--pykan-max`` elements (it keeps several of them; minutes and gigabytes);
- ``inkan``: inkan 0.5.2's ``KANLayer`` (cubic only), eager by default
  (``--inkan-compile`` uses its default ``torch.compile`` basis);
- ``dense``: the dense-equivalent, ``nn.Linear(in * (G + k + 1), out)`` on a
  precomputed input of that width: the matmul every B-spline KAN layer has to do
  (``G + k`` basis values and one residual value per input feature), with nothing else;
- ``linear``: a plain ``nn.Linear(in, out)`` on the raw input.

Time: CPU time of the calling thread (``--clock thread``, the default, with one torch
thread: time the process spends waiting for the CPU on a shared machine is not
counted) or wall time (``--clock wall``), of forward (in grad mode) and forward+backward (``out.backward(g)`` with a fixed
random ``g``), medians (and the minimum of fwd+bwd) over interleaved repeats (every implementation once per
round, so load from other processes hits all alike); ``bwd = fwd+bwd - fwd``. In each round every
implementation first runs one untimed forward+backward, so each is timed in its own steady state, as
in a training loop, and not in the state the previous implementation left: pykan's ~100 MB of
temporaries evict the caches and return heap pages to the system, which cost whichever
implementation came next 0.3-1 ms at 1024 x 64 (``--no-warm`` restores the old order).
Parameter gradients are reset to ``None`` before each step.

Peak memory: the input tensor of the step (``(batch, in)``, or the precomputed
``(batch, in (G + k + 1))`` of ``dense``) plus the peak of live bytes that torch
allocates during one forward+backward, read from ``torch.profiler``'s memory events
(every CPU allocation and free by torch's allocator, summed in time order), plus, for
kansym's layer, the ``dL/dF`` scratch it keeps between steps (up to 16 MB). It does
not depend on the allocator's caching or on RSS; parameters are excluded (they exist
before the step), their gradients are included.

The input either requires grad (a hidden layer: the backward also computes
``d loss / d x``) or not (a first layer); ``--input-grad both`` measures both, and
``dense``/``linear`` get the same treatment as the KANs.

Output: one JSON line per (case, implementation), then Markdown tables of ratios to
``dense`` measured in the same process.

Usage::

    python bench/layer.py                      # default sizes, 1 thread
    python bench/layer.py --sizes 1024x64 --reps 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kansym.nn import KANLayer  # noqa: E402
from kansym.nn import fast  # noqa: E402

DEFAULT_SIZES = (
    "256x64,1024x64,4096x64,16384x64,65536x64,"
    "1024x16,65536x16,1024x128,1024x256,1024x512,4096x256"
)
IMPLS = ("kansym", "kansym-ctypes", "kansym-torch", "kansym-compiled", "kansym-updated", "pykan", "inkan", "dense", "linear")


def build(name: str, batch: int, width: int, grid: int, order: int, args) -> tuple[nn.Module, torch.Tensor] | None:
    """The module and the input tensor of one implementation, or None when skipped."""
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(batch, width, generator=gen) * 2 - 1
    if name in ("kansym", "kansym-ctypes", "kansym-torch", "kansym-compiled"):
        return KANLayer(width, width, grid, order, generator=gen), x
    if name == "kansym-updated":
        layer = KANLayer(width, width, grid, order, generator=gen)
        layer.update_grid((torch.rand(4096, width, generator=gen) * 2 - 1) ** 3)
        assert layer.plan().piecewise
        return layer, x
    if name == "pykan":
        if batch * width * width > args.pykan_max:
            return None
        from kan.KANLayer import KANLayer as PykanLayer

        torch.manual_seed(0)
        layer = PykanLayer(in_dim=width, out_dim=width, num=grid, k=order)

        class First(nn.Module):  # pykan returns (y, preacts, postacts, postspline)
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, t):
                return self.inner(t)[0]

        return First(layer), x
    if name == "inkan":
        if order != 3:
            return None
        from inkan import KANLayer as InkanLayer

        torch.manual_seed(0)
        return InkanLayer(width, width, grid, order, compile_basis=args.inkan_compile), x
    if name == "dense":
        feats = width * (grid + order + 1)
        return nn.Linear(feats, width, bias=False), torch.rand(batch, feats, generator=gen)
    if name == "linear":
        return nn.Linear(width, width), x
    raise ValueError(name)


def _select_kernels(module: nn.Module) -> None:
    """The implementation's kernels (outside the clocks: switching costs microseconds)."""
    fast.compile_kernels(getattr(module, "_bench_compiled", False))
    backend = getattr(module, "_bench_backend", "auto")
    if backend != _selected[0]:
        fast.use_backend(backend)
        _selected[0] = backend


_selected = ["auto"]


def step(module: nn.Module, x: torch.Tensor, grad: torch.Tensor, backward: bool) -> None:
    _select_kernels(module)
    _run(module, x, grad, backward)


def _run(module: nn.Module, x: torch.Tensor, grad: torch.Tensor, backward: bool) -> None:
    for p in module.parameters():
        p.grad = None
    if x.grad is not None:
        x.grad = None
    out = module(x)
    if backward:
        out.backward(grad)


CLOCK = time.perf_counter


def timed(module, x, grad, backward) -> float:
    _select_kernels(module)
    t0 = CLOCK()
    _run(module, x, grad, backward)
    return CLOCK() - t0


def peak_bytes(module: nn.Module, x: torch.Tensor, grad: torch.Tensor) -> int:
    """Input bytes + peak live bytes allocated by torch during one forward+backward."""
    from torch.profiler import ProfilerActivity, profile

    _select_kernels(module)
    for p in module.parameters():
        p.grad = None
    x.grad = None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = module(x)
        out.backward(grad)
        del out
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        live += e.nbytes()
        peak = max(peak, live)
    held = 0
    uses_python = fast.backend().path != "op"  # the C++ operator keeps no scratch
    if isinstance(module, KANLayer) and x.requires_grad and uses_python:  # the dL/dF scratch kept between steps
        need = x.shape[0] * (module.grid_size + module.spline_order + 1) * x.shape[1] * x.element_size()
        held = need if need <= fast.autograd.WORKSPACE_MAX_BYTES else 0
    return peak + x.numel() * x.element_size() + held


def run_case(batch: int, width: int, input_grad: bool, args) -> list[dict]:
    built = {}
    for name in args.impls:
        try:
            made = build(name, batch, width, args.grid, args.order, args)
        except ImportError as exc:
            print(f"# {name} not installed ({exc}); pip install -e .[bench]", file=sys.stderr)
            made = None
        if made is not None:
            module, x = made
            x = x.detach().requires_grad_(input_grad)
            module._bench_compiled = name == "kansym-compiled"
            module._bench_backend = {"kansym-ctypes": "native", "kansym-torch": "torch",
                                     "kansym-compiled": "torch"}.get(name, "auto")
            grad = torch.randn(batch, width, generator=torch.Generator().manual_seed(1))
            built[name] = (module, x, grad)
    # warm up and choose the number of rounds from the slowest implementation
    slowest = 0.0
    for module, x, grad in built.values():
        step(module, x, grad, True)
        slowest = max(slowest, timed(module, x, grad, True))
    reps = max(3, min(args.reps, int(args.budget / max(slowest, 1e-9))))
    fwd = {n: [] for n in built}
    full = {n: [] for n in built}
    for _ in range(reps):
        for name, (module, x, grad) in built.items():
            if not args.no_warm:
                step(module, x, grad, True)
            fwd[name].append(timed(module, x, grad, False))
            full[name].append(timed(module, x, grad, True))
    rows = []
    for name, (module, x, grad) in built.items():
        f, fb = statistics.median(fwd[name]), statistics.median(full[name])
        row = {
            "impl": name,
            "batch": batch,
            "width": width,
            "grid": args.grid,
            "order": args.order,
            "input_grad": input_grad,
            "threads": torch.get_num_threads(),
            "reps": reps,
            "fwd_ms": round(f * 1e3, 4),
            "bwd_ms": round((fb - f) * 1e3, 4),
            "fwd_bwd_ms": round(fb * 1e3, 4),
            "fwd_bwd_min_ms": round(min(full[name]) * 1e3, 4),
        }
        if not args.no_memory:
            row["peak_mb"] = round(peak_bytes(module, x, grad) / 2**20, 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def table(rows: list[dict], key: str, title: str, impls) -> str:
    cases = sorted({(r["input_grad"], r["batch"], r["width"]) for r in rows}, key=lambda c: (not c[0], c[2], c[1]))
    by = {(r["input_grad"], r["batch"], r["width"], r["impl"]): r for r in rows}
    shown = [i for i in impls if i != "dense"]
    lines = [f"**{title}** (ratio to dense; dense itself in ms or MB)", ""]
    lines.append("| x.requires_grad | batch | in=out | dense | " + " | ".join(shown) + " | pykan / kansym |")
    lines.append("|" + "---|" * (len(shown) + 5))
    for case in cases:
        dense = by.get((*case, "dense"))
        if dense is None or key not in dense:
            continue
        cells = []
        for impl in shown:
            r = by.get((*case, impl))
            cells.append("skip" if r is None else f"{r[key] / dense[key]:.2f}x")
        ks, pk = by.get((*case, "kansym")), by.get((*case, "pykan"))
        speedup = f"{pk[key] / ks[key]:.1f}" if ks is not None and pk is not None else "-"
        lines.append(f"| {case[0]} | {case[1]} | {case[2]} | {dense[key]:.3g} | " + " | ".join(cells) + f" | {speedup} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated BATCHxWIDTH (in = out = WIDTH)")
    parser.add_argument("--grid", type=int, default=5)
    parser.add_argument("--order", type=int, default=3)
    parser.add_argument("--impls", default=",".join(IMPLS))
    parser.add_argument("--input-grad", choices=("yes", "no", "both"), default="both")
    parser.add_argument("--reps", type=int, default=15, help="most interleaved rounds per case")
    parser.add_argument("--budget", type=float, default=4.0, help="seconds of the slowest implementation per case")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pykan-max", type=int, default=2**24, help="largest batch*in*out run through pykan")
    parser.add_argument("--inkan-compile", action="store_true", help="inkan with its torch.compile basis")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--no-warm", action="store_true",
                        help="no untimed step before each implementation's timed steps in a round")
    parser.add_argument(
        "--clock",
        choices=("thread", "wall"),
        default="thread",
        help="thread: CPU time of the calling thread (robust on a shared machine; needs --threads 1)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    global CLOCK
    if args.clock == "thread" and args.threads != 1:
        parser.error("--clock thread measures one thread: use --threads 1 or --clock wall")
    CLOCK = time.thread_time if args.clock == "thread" else time.perf_counter
    args.impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    chosen = fast.use_backend("op")  # build the C++ operator now, not inside the clocks
    if chosen.path != "op":
        print(f"# kansym's C++ operator: {chosen.operator} (the layer uses the {chosen.path} path)", file=sys.stderr)
    fast.use_backend("auto")
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in args.sizes.split(",") if s.strip()]
    grads = {"yes": [True], "no": [False], "both": [True, False]}[args.input_grad]
    rows = []
    for input_grad in grads:
        for batch, width in sizes:
            rows += run_case(batch, width, input_grad, args)
    print()
    print(table(rows, "fwd_bwd_ms", "forward+backward time", args.impls))
    print()
    print(table(rows, "fwd_ms", "forward time", args.impls))
    if not args.no_memory:
        print()
        print(table(rows, "peak_mb", "peak memory of forward+backward", args.impls))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
