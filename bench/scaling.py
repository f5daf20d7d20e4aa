"""How ``kansym fit`` scales: wall time and exactness vs rows and vs input columns (issue 19).

Two sweeps of seeded synthetic tables, each table one CSV run through ``kansym fit`` in a
fresh process (as a user runs it: imports and the input screening in the clock) under
``--time-limit`` seconds:

- rows: ``--rows`` (default 1e3 .. 1e6) rows of 3 inputs, ``y = a * b / c`` with
  ``a, b, c ~ U(1, 3)``;
- inputs: ``--inputs`` (default 1 .. 20) columns at ``--inputs-rows`` rows (5,000), two of
  them used, ``y = x0 * exp(-x1)`` (one input: ``y = 2 exp(-x0)``), the rest ``U(1, 3)``
  noise columns the law does not use.

A formula counts as exact by :func:`kansym.symbolic.verify.is_exact_recovery` (SRBench's
rule). Peak memory is the process's maximum resident set (``wait4``'s ``ru_maxrss``). The
peers RILS-ROLS and Operon of ``bench/sr_peers.py`` get the same tables (held-out rows
alike, one thread, the same limit) when installed; otherwise one line says they were
skipped. At the end the growth exponents are printed: the slope of ``log time`` against
``log rows`` (rows >= 1e4, where the issue asks for at most 1) and against ``log inputs``
(at most 2), least squares. Prints a Markdown table and, with ``--out``, JSON lines.

    python bench/scaling.py [--rows 1e3,1e4,1e5,1e6] [--inputs 1,2,5,10,20] [--time-limit 600]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import sympy

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sr_peers  # noqa: E402  (bench/ is not a package)

PEERS = ("rils", "operon")


def table(kind: str, n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[str], sympy.Expr]:
    """Rows, target, column names and the true law of one table of a sweep."""
    rng = np.random.default_rng([seed, n, d])
    x = rng.uniform(1.0, 3.0, (n, d))
    names = [f"x{i}" for i in range(d)]
    s = sympy.symbols(names, positive=True)
    if kind == "rows":
        law = s[0] * s[1] / s[2]
    elif d == 1:
        law = 2 * sympy.exp(-s[0])
    else:
        law = s[0] * sympy.exp(-s[1])
    y = sympy.lambdify(s, law, "numpy")(*x.T) * np.ones(n)
    return x, y, names, law


def run_kansym(x: np.ndarray, y: np.ndarray, names: list[str], law: sympy.Expr, limit: float, work: Path) -> dict:
    """``kansym fit`` on the table in a child process: seconds, peak memory, formula, exactness."""
    from kansym.symbolic.verify import is_exact_recovery

    csv = work / "data.csv"
    np.savetxt(csv, np.column_stack([x, y]), delimiter=",", header=",".join([*names, "y"]), comments="", fmt="%.17g")
    out = Path(tempfile.mkdtemp(prefix="out-", dir=work))  # fresh: no record of an earlier table is read
    cmd = [sys.executable, "-m", "kansym", "fit", str(csv), "--target", "y", "-o", str(out), "--force", "--quiet"]
    t0 = time.perf_counter()
    with (work / "stderr.txt").open("wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        timed_out = False
        while True:  # wait4: this child's own peak resident set
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if not timed_out and time.perf_counter() - t0 > limit:
                proc.kill()
                timed_out = True
            time.sleep(0.05)
    seconds = time.perf_counter() - t0
    returncode = os.waitstatus_to_exitcode(status)
    row = {"seconds": round(seconds, 2), "timed_out": timed_out, "peak_mib": round(usage.ru_maxrss / 1024, 1)}
    record = out / "formula.json"
    if timed_out or returncode != 0 or not record.is_file():
        return {**row, "exact": False, "formula": None, "returncode": returncode}
    rec = json.loads(record.read_text())
    syms = sympy.symbols(names, positive=True)
    expr = sympy.sympify(rec["sympy"], locals={n: s for n, s in zip(names, syms)})
    exact = bool(is_exact_recovery(law, expr, symbols=list(syms)))
    return {**row, "exact": exact, "formula": rec["sympy"], "inputs_used": rec["inputs"], "r2_test": rec["r2_test"]}


class _Equation:
    """What ``sr_peers.run_peer`` needs of an equation: an id, the names and the law on its ranges."""

    def __init__(self, ident: str, names: list[str], law: sympy.Expr) -> None:
        self.id, self.names, self._law = ident, tuple(names), law

    def truth_on_ranges(self) -> sympy.Expr:
        return self._law


def run_peers(x, y, names, law, limit: float, seed: int, ident: str) -> list[dict]:
    """The installed peers on the same table (80 % to fit, 20 % held out, as kansym's split)."""
    rows_idx = np.random.default_rng([seed, 7]).permutation(len(y))
    cut = int(round(0.2 * len(y)))
    rows = sr_peers.Rows(x[rows_idx[cut:]], y[rows_idx[cut:]], x[rows_idx[:cut]], y[rows_idx[:cut]])
    out = []
    for peer in PEERS:
        if not sr_peers.installed(peer):
            continue
        try:
            res = sr_peers.run_peer(peer, _Equation(ident, names, law), rows, limit, seed)
            out.append({"method": peer, "seconds": res["seconds"], "exact": res["recovered"],
                        "formula": res["formula"], "timed_out": res["timed_out"]})
        except Exception as exc:  # a peer's own failure is a result, not the end of the sweep
            out.append({"method": peer, "seconds": None, "exact": False, "formula": f"failed: {exc}"})
    return out


def growth(xs: list[float], ts: list[float]) -> float | None:
    """Least-squares slope of ``log t`` against ``log x`` (None with fewer than two points)."""
    if len(xs) < 2:
        return None
    return float(np.polyfit(np.log(xs), np.log(ts), 1)[0])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default="1e3,1e4,1e5,1e6", help="row counts of the rows sweep ('' skips it)")
    p.add_argument("--inputs", default="1,2,5,10,20", help="column counts of the inputs sweep ('' skips it)")
    p.add_argument("--inputs-rows", type=int, default=5000, help="rows of each table of the inputs sweep")
    p.add_argument("--time-limit", type=float, default=600.0, help="seconds each method gets per table")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-peers", action="store_true", help="kansym only")
    p.add_argument("--out", type=Path, default=None, help="also write JSON lines here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = [int(float(v)) for v in args.rows.split(",") if v.strip()]
    inputs = [int(v) for v in args.inputs.split(",") if v.strip()]
    if not args.no_peers:
        for peer in PEERS:
            if not sr_peers.installed(peer):
                print(f"skipping {peer}: not installed ({sr_peers.INSTALL[peer]})", file=sys.stderr)
    plan = [("rows", n, 3) for n in rows] + [("inputs", args.inputs_rows, d) for d in inputs]
    results = []
    sink = args.out.open("w") if args.out else None
    with tempfile.TemporaryDirectory(prefix="kansym-scaling-") as tmp:
        for kind, n, d in plan:
            x, y, names, law = table(kind, n, d, args.seed)
            res = [{"method": "kansym", **run_kansym(x, y, names, law, args.time_limit, Path(tmp))}]
            if not args.no_peers:
                res += run_peers(x, y, names, law, args.time_limit, args.seed, f"{kind}-{n}-{d}")
            for r in res:
                row = {"sweep": kind, "rows": n, "inputs": d, "law": str(law), **r}
                results.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                if sink:
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()
    if sink:
        sink.close()
    print("| sweep | rows | inputs | method | seconds | exact | peak MiB | formula |")
    print("|---|---:|---:|---|---:|---|---:|---|")
    for r in results:
        print(f"| {r['sweep']} | {r['rows']} | {r['inputs']} | {r['method']} | {r['seconds']} | "
              f"{'yes' if r['exact'] else 'no'} | {r.get('peak_mib', '')} | `{r['formula']}` |")
    for method in sorted({r["method"] for r in results}):
        mine = [r for r in results if r["method"] == method and r["seconds"]]
        a = growth(*zip(*[(r["rows"], r["seconds"]) for r in mine if r["sweep"] == "rows" and r["rows"] >= 10_000])
                   ) if any(r["sweep"] == "rows" and r["rows"] >= 10_000 for r in mine) else None
        pts = [(r["inputs"], r["seconds"]) for r in mine if r["sweep"] == "inputs"]
        b = growth(*zip(*pts)) if pts else None
        show = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
        print(f"{method}: time ~ rows^{show(a)} (rows >= 1e4), time ~ inputs^{show(b)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
