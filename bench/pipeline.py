"""Formula discovery end to end: kansym's ``fit`` pipeline vs pykan's documented workflow.

Problems: the KAN paper's hello world ``f = exp(sin(pi x1) + x2^2)`` (x in [-1, 1]) and
Feynman equations from ``/work/shared/data/feynman/equations.csv`` (variables uniform
in the listed ranges; the formula is parsed with an explicit ``Symbol`` per variable,
since names like ``I``, ``gamma`` or ``beta`` clash with sympy's). Both tools get the
same ``--rows`` training rows (seeded), in the same process, one after the other.

- kansym: :func:`kansym.discover.discover` with ``DiscoverConfig(seed=0)``, the defaults
  of ``kansym fit`` (train with sparsification, prune, fine-tune, symbolify, refine,
  verify).
- pykan 0.2.8, its getting-started notebook (hellokan) step by step:
  ``KAN(width=[n, 5, 1], grid=3, k=3, seed=1)``; ``fit(LBFGS, 50 steps, lamb=0.001)``;
  ``prune()``; ``fit(50)``; ``refine(10)``; ``fit(50)``;
  ``auto_symbolic(lib=['x','x^2','x^3','x^4','exp','log','sqrt','tanh','sin','abs'])``;
  ``fit(50)``; ``ex_round(symbolic_formula()[0][0], 4)``. Its test split is another
  ``--rows`` rows of the same distribution (pykan needs one; not used for the verdict).

One-time costs are paid before the clocks start (the first torch optimizer imports
``torch._dynamo``, 5-20 s on this machine; pykan's modules load; ``sympy.simplify``
imports ``sympy.physics.units`` on its first call, about 0.5 s; kansym's native kernels
are compiled, or loaded from their cache), and the cyclic garbage collector runs a full
collection before each tool's clock starts (in the clock, one costs 0.3-0.4 s). A formula counts as exact by :func:`kansym.symbolic.verify.is_exact_recovery` (SRBench
rule: floats rounded to 3 significant digits, the difference to the truth a constant or
the ratio a constant). Prints JSON lines and a Markdown table with the time ratio: wall
time, and the CPU time of the process (``cpu_seconds``, all threads; both tools run with
one torch thread), which on a shared machine leaves out the time spent waiting for a core.

    python bench/pipeline.py [--problems hello,I.6.2a,I.12.1,I.14.4] [--rows 1000]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gc
import importlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import sympy
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kansym.discover import DiscoverConfig, discover  # noqa: E402
from kansym.symbolic.verify import is_exact_recovery  # noqa: E402

EQUATIONS = Path("/work/shared/data/feynman/equations.csv")
PYKAN_LIB = ["x", "x^2", "x^3", "x^4", "exp", "log", "sqrt", "tanh", "sin", "abs"]


def problem(name: str, rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[str], str, sympy.Expr]:
    """``(x (2 rows, n), y (2 rows,), input names, output name, truth)``: training rows then test rows."""
    rng = np.random.default_rng(seed)
    if name == "hello":
        x = rng.uniform(-1, 1, (2 * rows, 2))
        y = np.exp(np.sin(np.pi * x[:, 0]) + x[:, 1] ** 2)
        x1, x2 = sympy.symbols("x1 x2", real=True)
        return x, y, ["x1", "x2"], "f", sympy.exp(sympy.sin(sympy.pi * x1) + x2**2)
    with open(EQUATIONS, newline="") as fh:
        rec = next((r for r in csv.DictReader(fh) if r["id"] == name), None)
    if rec is None:
        raise SystemExit(f"error: no equation {name!r} in {EQUATIONS}")
    n = int(rec["n_vars"])
    names = [rec[f"v{i}_name"] for i in range(1, n + 1)]
    symbols = {v: sympy.Symbol(v, real=True) for v in names}
    truth = sympy.sympify(rec["formula"], locals=symbols)
    lows = [float(rec[f"v{i}_low"]) for i in range(1, n + 1)]
    highs = [float(rec[f"v{i}_high"]) for i in range(1, n + 1)]
    x = rng.uniform(lows, highs, (2 * rows, n))
    fn = sympy.lambdify([symbols[v] for v in names], truth, "numpy")
    y = np.asarray(fn(*x.T), dtype=np.float64) * np.ones(2 * rows)
    return x, y, names, rec["output"], truth


def run_kansym(x, y, names, output, truth) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    result = discover(x, y[:, None], names, [output], DiscoverConfig(seed=0), progress=False)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    expr = result.formulas[0].expr
    stages = {k: round(v, 2) for k, v in result.seconds.items()}
    return {"seconds": seconds, "cpu_seconds": cpu, "formula": str(expr), "exact": bool(is_exact_recovery(truth, expr)),
            "stages": stages}


def run_pykan(x, y, x_test, y_test, names, truth) -> dict:
    from kan import KAN
    from kan.utils import ex_round

    dataset = {
        "train_input": torch.as_tensor(x, dtype=torch.float32),
        "train_label": torch.as_tensor(y[:, None], dtype=torch.float32),
        "test_input": torch.as_tensor(x_test, dtype=torch.float32),
        "test_label": torch.as_tensor(y_test[:, None], dtype=torch.float32),
    }
    quiet = io.StringIO()
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        os.chdir(tmp)  # pykan writes checkpoints and figures under the working directory
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            model = KAN(width=[x.shape[1], 5, 1], grid=3, k=3, seed=1)
            model(dataset["train_input"])
            model.fit(dataset, opt="LBFGS", steps=50, lamb=0.001)
            model = model.prune()
            model.fit(dataset, opt="LBFGS", steps=50)
            model = model.refine(10)
            model.fit(dataset, opt="LBFGS", steps=50)
            model.auto_symbolic(lib=PYKAN_LIB)
            model.fit(dataset, opt="LBFGS", steps=50)
            expr = ex_round(model.symbolic_formula(var=names)[0][0], 4)
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        finally:
            os.chdir(cwd)
    expr = expr.subs({s: sympy.Symbol(s.name, real=True) for s in expr.free_symbols})
    return {"seconds": seconds, "cpu_seconds": cpu, "formula": str(expr), "exact": bool(is_exact_recovery(truth, expr))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", default="hello,I.6.2a,I.12.1,I.14.4")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0, help="seed of the data")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tools", default="kansym,pykan")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    # one-time costs outside the timings: the first torch optimizer imports torch._dynamo (5-20 s here),
    # and pykan's and sympy's modules load on first use
    torch.optim.LBFGS([torch.zeros(1, requires_grad=True)])
    # sympy's simplify imports sympy.physics.units on its first call (~0.5 s)
    for module in ("kan", "sympy.physics.units"):
        importlib.import_module(module)
    # kansym's native spline kernels compile once per machine and source (cpp_extension, about 2 s
    # of wall time here, then cached in ~/.cache/kansym), its C++ operator in the background (~20 s);
    # without this, the first run after a change of the kernel source paid them inside kansym's clock
    from kansym.nn import fast

    fast.use_backend("op")
    fast.use_backend("auto")
    tools = [t.strip() for t in args.tools.split(",")]
    rows = []
    for name in [p.strip() for p in args.problems.split(",") if p.strip()]:
        x, y, names, output, truth = problem(name, args.rows, args.seed)
        n = args.rows
        for tool in tools:
            # the garbage of the imports and of the previous tool is collected outside either clock: a
            # full collection of this process's ~450,000 objects takes 0.3-0.4 s, and when the cyclic
            # collector decides to run one depends on every allocation made before
            gc.collect()
            t0 = time.perf_counter()
            try:
                if tool == "kansym":
                    res = run_kansym(x[:n], y[:n], names, output, truth)
                else:
                    res = run_pykan(x[:n], y[:n], x[n:], y[n:], names, truth)
            except Exception as exc:  # a tool that fails on a problem is a result, not a crash of the bench
                res = {"seconds": time.perf_counter() - t0, "formula": None, "exact": False, "error": repr(exc)[:200]}
            row = {"problem": name, "truth": str(truth), "tool": tool, "rows": n, "threads": args.threads, **res}
            row["seconds"] = round(row["seconds"], 2)
            if "cpu_seconds" in row:
                row["cpu_seconds"] = round(row["cpu_seconds"], 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    print("| problem | truth | kansym s | exact | pykan s | exact | pykan / kansym time | pykan / kansym CPU "
          "| kansym formula | pykan formula |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in dict.fromkeys(r["problem"] for r in rows):
        k = next((r for r in rows if r["problem"] == name and r["tool"] == "kansym"), None)
        p = next((r for r in rows if r["problem"] == name and r["tool"] == "pykan"), None)
        both = bool(k and p and not k.get("error") and not p.get("error"))  # no ratio to a failed run
        ratio = f"{p['seconds'] / k['seconds']:.1f}x" if both else "-"
        cpu = f"{p['cpu_seconds'] / k['cpu_seconds']:.1f}x" if both else "-"
        def verdict(r):
            return "failed" if r.get("error") else ("yes" if r["exact"] else "no")

        cells = [
            f"{k['seconds']:.1f} | {verdict(k)}" if k else "- | -",
            f"{p['seconds']:.1f} | {verdict(p)}" if p else "- | -",
        ]
        truth = (k or p)["truth"]
        fk = f"`{k['formula']}`" if k and k["formula"] else (k or {}).get("error", "-")
        fp = f"`{p['formula']}`" if p and p["formula"] else (p or {}).get("error", "-")
        print(f"| {name} | `{truth}` | {cells[0]} | {cells[1]} | {ratio} | {cpu} | {fk} | {fp} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
