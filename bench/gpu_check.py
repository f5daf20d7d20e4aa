"""One prepared check of kansym on a CUDA machine (issue 4): correctness first, then speed.

Run on a machine with a GPU, from the repository root, in a venv with kansym installed::

    python bench/gpu_check.py --out cuda_report.json            # about 2-4 minutes on one GPU

Each check prints one line ``PASS``/``FAIL`` with its numbers and the script exits 1 if
any failed. ``--device cpu`` runs the same checks on the CPU (a dry run of the script
itself; the speed section then compares CPU numbers).

Checks:

1. ``KANLayer`` on the device equals the float64 CPU layer (values and the gradients of
   ``x``, ``coef``, ``scale_base``, ``scale_sp``), on a uniform grid and after
   ``update_grid``; every saved tensor and every output lives on the device.
2. bf16 autocast: the layer's matmul runs in bf16, the basis in float32, the output
   within 2 % of float32.
3. ``compile_kernels()``: the compiled cubic kernels on the device equal the eager ones.
4. ``kansym fit --device cuda`` on the embedded Kepler example: exit 0 and the law
   ``a^(3/2) / sqrt(M)``.
5. ``kansym gpt train --device cuda`` for 30 iterations of a small KAN-GPT (with bf16
   autocast), then ``kansym gpt sample``: exit 0 and a finite validation loss.
6. Speed: forward+backward of the layer vs the dense-equivalent matmul at batch 1024 and
   65536, 64 -> 64 (``torch.cuda.Event`` timing, medians), printed as ratios.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kansym.nn import KANLayer  # noqa: E402
from kansym.nn import fast  # noqa: E402

RESULTS: list[dict] = []


def report(name: str, ok: bool, **numbers) -> None:
    RESULTS.append({"check": name, "pass": bool(ok), **numbers})
    print(f"{'PASS' if ok else 'FAIL'} {name} " + " ".join(f"{k}={v}" for k, v in numbers.items()), flush=True)


def layer_pair(device: str, update: bool):
    gen = torch.Generator().manual_seed(0)
    ref = KANLayer(16, 8, 5, 3, generator=gen).double()
    if update:
        ref.update_grid((torch.rand(2000, 16, generator=gen, dtype=torch.float64) * 2 - 1) ** 3)
    dev = KANLayer(16, 8, 5, 3).to(device)
    dev.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
    return ref, dev


def check_layer(device: str) -> None:
    for update in (False, True):
        ref, dev = layer_pair(device, update)
        x = torch.rand(512, 16, dtype=torch.float64) * 2.4 - 1.2
        xr = x.clone().requires_grad_(True)
        xd = x.float().to(device).requires_grad_(True)
        w = torch.randn(512, 8, dtype=torch.float64)
        out_r, out_d = ref(xr), dev(xd)
        node = out_d.grad_fn
        while node is not None and not hasattr(node, "saved_tensors"):
            node = node.next_functions[0][0] if node.next_functions else None
        placed = node is None or all(t.device.type == torch.device(device).type for t in node.saved_tensors if t is not None)
        (out_r * w).sum().backward()
        (out_d * w.float().to(device)).sum().backward()
        errs = {
            "out": (out_d.double().cpu() - out_r).abs().max().item(),
            "x": (xd.grad.double().cpu() - xr.grad).abs().max().item(),
            "coef": (dev.coef.grad.double().cpu() - ref.coef.grad).abs().max().item(),
        }
        ok = placed and out_d.device.type == torch.device(device).type and max(errs.values()) < 1e-3
        report(f"layer {'after update_grid' if update else 'uniform grid'}", ok, on_device=placed,
               **{k: f"{v:.2e}" for k, v in errs.items()})


def check_autocast(device: str) -> None:
    _, dev = layer_pair(device, False)
    x = torch.rand(256, 16, device=device) * 2 - 1
    full = dev(x)
    with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        low = dev(x)
    rel = ((low.float() - full).norm() / full.norm()).item()
    report("bf16 autocast", low.dtype == torch.bfloat16 and rel < 0.02, dtype=str(low.dtype), rel_err=f"{rel:.2e}")


def check_compiled(device: str) -> None:
    _, dev = layer_pair(device, False)
    x = (torch.rand(256, 16, device=device) * 2 - 1).requires_grad_(True)
    eager = dev(x)
    g_eager = torch.autograd.grad(eager.sum(), x)[0]
    fast.compile_kernels(True)
    try:
        comp = dev(x)
        g_comp = torch.autograd.grad(comp.sum(), x)[0]
    finally:
        fast.compile_kernels(False)
    err = max((comp - eager).abs().max().item(), (g_comp - g_eager).abs().max().item())
    report("compile_kernels", err < 1e-4, max_err=f"{err:.2e}")


def run_cli(args: list[str], cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kansym", *args], cwd=cwd, capture_output=True, text=True, timeout=900)


def check_fit(device: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        done = run_cli(["fit", "--example", "kepler", "--device", device, "--out-dir", f"{tmp}/run"], tmp)
    law = re.search(r"semi_major_axis_km\*\*\(3/2\)/sqrt\(primary_mass_kg\)", done.stdout) is not None
    report("kansym fit --example kepler", done.returncode == 0 and law, rc=done.returncode,
           formula=next((line.strip() for line in done.stdout.splitlines() if "semi_major" in line), "-")[:90])


def check_gpt(device: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "text.txt"
        text.write_text("To be, or not to be, that is the question.\n" * 400, encoding="utf-8")
        train = run_cli(["gpt", "train", "--text", str(text), "--out-dir", f"{tmp}/gpt", "--max-iters", "30",
                         "--n-layer", "2", "--n-embd", "64", "--n-head", "2", "--block-size", "32",
                         "--ffn", "kan", "--eval-interval", "10", "--eval-iters", "2", "--device", device], tmp)
        log = Path(tmp, "gpt", "log.jsonl")
        records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.exists() else []
        losses = [r["val_loss"] for r in records if isinstance(r.get("val_loss"), (int, float))]
        ckpt = Path(tmp, "gpt", "best.pt")
        sample = run_cli(["gpt", "sample", str(ckpt), "--tokens", "40", "--device", device], tmp) if ckpt.exists() else None
    ok = train.returncode == 0 and sample is not None and sample.returncode == 0 and bool(losses)
    ok = ok and all(v == v and v < 10 for v in losses)  # finite
    report("kansym gpt train + sample", ok, rc=train.returncode, last_val=losses[-1] if losses else None,
           sample_rc=None if sample is None else sample.returncode)


def timed_ms(fn, device: str, reps: int) -> float:
    times = []
    for _ in range(reps):
        if device.startswith("cuda"):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(stop))
        else:
            import time

            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def check_speed(device: str) -> None:
    for batch in (1024, 65536):
        layer = KANLayer(64, 64, 5, 3).to(device)
        dense = torch.nn.Linear(64 * 9, 64, bias=False).to(device)
        x = (torch.rand(batch, 64, device=device) * 2 - 1).requires_grad_(True)
        xd = torch.rand(batch, 64 * 9, device=device).requires_grad_(True)
        g = torch.randn(batch, 64, device=device)

        def step(module, inp):
            def run():
                module.zero_grad(set_to_none=True)
                inp.grad = None
                module(inp).backward(g)
            return run

        for _ in range(5):
            step(layer, x)()
            step(dense, xd)()
        t_layer, t_dense = timed_ms(step(layer, x), device, 30), timed_ms(step(dense, xd), device, 30)
        report(f"speed fwd+bwd batch {batch} 64->64", True, kansym_ms=round(t_layer, 3), dense_ms=round(t_dense, 3),
               ratio=round(t_layer / t_dense, 2))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--skip", default="", help="comma-separated checks to skip: layer,autocast,compile,fit,gpt,speed")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: no CUDA device here; run on a GPU machine or pass --device cpu for a dry run", file=sys.stderr)
        return 2
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    checks = {"layer": check_layer, "autocast": check_autocast, "compile": check_compiled, "fit": check_fit,
              "gpt": check_gpt, "speed": check_speed}
    for name, fn in checks.items():
        if name in skip:
            continue
        try:
            fn(args.device)
        except Exception as exc:  # noqa: BLE001 - a crashing check is a failed check, the others still run
            report(name, False, error=f"{type(exc).__name__}: {exc}"[:300])
    if args.out:
        Path(args.out).write_text(json.dumps({"device": args.device, "torch": torch.__version__,
                                              "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
                                              "results": RESULTS}, indent=1))
    failed = [r["check"] for r in RESULTS if not r["pass"]]
    print(f"{len(RESULTS) - len(failed)}/{len(RESULTS)} checks passed" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
