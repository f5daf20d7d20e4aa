"""Formula discovery on the Feynman equations, scored by SRBench's exact-recovery rule.

For each equation of a CSV in the format of ``shared/data/feynman/equations.csv``
(``id, output, formula, n_vars, v1_name, v1_low, v1_high, ...``):

1. sample ``--rows`` rows (10,000) with every variable uniform in its range, and
   ``--test-rows`` more for a held-out test, from a generator seeded by ``--seed``
   and the equation's position in the file; with ``--noise L`` the training target
   gets Gaussian noise of standard deviation ``L * RMS(y)`` (SRBench's noise model,
   La Cava et al. 2021, §4);
2. run the public pipeline exactly as ``kansym fit`` does (:func:`kansym.discover.discover`
   with the defaults of ``DiscoverConfig``, which are ``kansym fit``'s); the CSV's units
   (``v1_units``, ..., ``output_units``) are given as ``kansym fit --units`` gives them, so
   the law is first reduced to dimensionless groups (:func:`kansym.discover.dimensional.discover_with_units`,
   AI Feynman's first step); ``--no-units`` runs without them;
3. check exact recovery with :func:`kansym.symbolic.verify.is_exact_recovery` (SRBench:
   floats rounded to 3 significant digits, difference or ratio to the truth constant),
   each variable's sign taken from its range (:meth:`Equation.truth_on_ranges`)
   and the formula's R² on the held-out rows (noise-free targets).

Each equation runs in its own process with one torch thread, ``--jobs`` at a time; an
equation whose discovery exceeds ``--time-limit`` seconds is stopped and counts as not
recovered. With ``--peer pykan``, pykan's documented workflow (:func:`run_pykan`) runs on
the same rows under the same limit. One JSON line per equation (and method) goes to
stdout (and ``--out``), then a Markdown summary (also to ``--summary``)::

    python bench/feynman.py --equations ../shared/data/feynman/equations.csv \\
        --ids I.12.1,I.14.3 --time-limit 120 --jobs 1 --out feynman.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import platform
import statistics
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path

import numpy as np
import pandas as pd
import sympy

# import kansym from the tree this script lives in (an exported copy of a commit measures that
# commit, not the editable install of the working tree)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_EQUATIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "feynman" / "equations.csv"
VERIFY_GRACE = 30.0  # seconds allowed after the time limit for the recovery check
# names in the equations' text that mean functions, not variables
FUNCTIONS = {"exp": sympy.exp, "sqrt": sympy.sqrt, "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan,
             "arcsin": sympy.asin, "arccos": sympy.acos, "arctan": sympy.atan, "ln": sympy.log,
             "log": sympy.log, "tanh": sympy.tanh, "pi": sympy.pi}


@dataclass(frozen=True)
class Equation:
    """One benchmark equation: its variables, their sampling ranges and the true law."""

    index: int
    id: str
    output: str
    formula: str
    names: tuple[str, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]
    units: tuple[str, ...] = ()  # one per variable (``v1_units``, ...), empty if the CSV has none
    output_units: str | None = None

    def truth(self) -> sympy.Expr:
        """The law as sympy, every variable an explicit real Symbol (``I``, ``gamma``,
        ``beta`` are sympy builtins and must not be parsed as such)."""
        local = dict(FUNCTIONS)
        local.update({n: sympy.Symbol(n, real=True) for n in self.names})
        return sympy.parse_expr(self.formula, local_dict=local, evaluate=True)

    def truth_on_ranges(self) -> sympy.Expr:
        """:meth:`truth` with each variable's sign known from its sampling range (positive
        when ``low > 0``, nonnegative when ``low == 0``): the law as a function on the rows
        it is scored on, so that ``c**3*m/sqrt(c**2 - v**2)`` is recognised as
        ``m*c**2/sqrt(1 - v**2/c**2)`` (equal for ``c > 0``, not for every real ``c``)."""
        def sym(n: str, low: float) -> sympy.Symbol:
            if low > 0:
                return sympy.Symbol(n, positive=True)
            return sympy.Symbol(n, nonnegative=True) if low == 0 else sympy.Symbol(n, real=True)

        local = dict(FUNCTIONS)
        local.update({n: sym(n, low) for n, low in zip(self.names, self.lows)})
        return sympy.parse_expr(self.formula, local_dict=local, evaluate=True)

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` rows uniform in the ranges: ``x (n, d)``, ``y (n,)``."""
        x = rng.uniform(self.lows, self.highs, size=(n, len(self.names)))
        f = sympy.lambdify(sympy.symbols(self.names, real=True), self.truth(), "numpy")
        with np.errstate(all="ignore"):
            y = np.broadcast_to(np.asarray(f(*x.T), dtype=np.float64), (n,)).copy()
        return x, y


def load_equations(path: Path) -> list[Equation]:
    """Read an equations CSV (``id, output, formula, v1_name, v1_low, v1_high, ...``)."""
    df = pd.read_csv(path)
    missing = {"id", "output", "formula", "v1_name", "v1_low", "v1_high"} - set(df.columns)
    if missing:
        raise SystemExit(f"error: {path} lacks the columns {sorted(missing)}")
    out = []
    for k, row in enumerate(df.itertuples(index=False)):
        row = row._asdict()
        names, lows, highs, units = [], [], [], []
        v = 1
        while f"v{v}_name" in row and isinstance(row[f"v{v}_name"], str):
            names.append(row[f"v{v}_name"])
            lows.append(float(row[f"v{v}_low"]))
            highs.append(float(row[f"v{v}_high"]))
            units.append(row.get(f"v{v}_units"))
            v += 1
        out_units = row.get("output_units")
        has_units = isinstance(out_units, str) and all(isinstance(u, str) for u in units)
        out.append(Equation(k, str(row["id"]), str(row["output"]), str(row["formula"]),
                            tuple(names), tuple(lows), tuple(highs),
                            tuple(units) if has_units else (), out_units if has_units else None))
    return out


def run_equation(eq: Equation, args: argparse.Namespace) -> dict:
    """Sample, discover, verify one equation (runs inside a worker process)."""
    import torch

    from kansym.discover.dimensional import discover_with_units
    from kansym.discover import DiscoverConfig, discover
    from kansym.symbolic.verify import is_exact_recovery, r2_score

    torch.set_num_threads(1)
    rng = np.random.default_rng([args.seed, eq.index])
    x, y = eq.sample(args.rows, rng)
    x_test, y_test = eq.sample(args.test_rows, rng)
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(y_test))):
        return {"id": eq.id, "recovered": False, "error": "the law is not finite on its ranges"}
    y_fit = y
    if args.noise > 0:
        sigma = args.noise * float(np.sqrt(np.mean(y**2)))
        y_fit = y + rng.normal(0.0, sigma, size=y.shape)
    t0 = time.perf_counter()
    use_units = args.units and eq.output_units is not None
    if use_units:  # the units of the equations CSV, given to the public API as a user would
        units = {**dict(zip(eq.names, eq.units)), eq.output: eq.output_units}
        result = discover_with_units(x, y_fit, list(eq.names), eq.output, units, DiscoverConfig(seed=args.seed),
                                     progress=False)
    else:
        result = discover(x, y_fit[:, None], list(eq.names), [eq.output], DiscoverConfig(seed=args.seed), progress=False)
    seconds = time.perf_counter() - t0
    formula = result.formulas[0]
    with np.errstate(all="ignore"):
        pred = formula(x_test)
    r2_test = r2_score(y_test, pred) if np.all(np.isfinite(pred)) else None
    recovered = bool(is_exact_recovery(eq.truth_on_ranges(), formula.expr, symbols=list(eq.names)))
    return {
        "id": eq.id,
        "recovered": recovered and seconds <= args.time_limit,
        "formula": str(formula.expr),
        "r2_test": r2_test,
        "r2_model_test": formula.r2_model_test,  # the model's R² on the pipeline's own held-out rows
        "warning": formula.warning,
        "complexity": int(sympy.count_ops(formula.expr)),
        "seconds": round(seconds, 2),
        "seconds_by_stage": {k: round(v, 2) for k, v in result.seconds.items()},
        "width_pruned": None if result.prune_result is None else list(result.prune_result.model.width),
        "runs": result.runs,
        "space": None if result.pruned is None else result.pruned.meta.get("space"),
        "units": use_units,
        "reduction": None if not use_units or result.reduction is None else result.reduction.to_dict(),
        "timed_out": seconds > args.time_limit,
    }


PYKAN_LIB = ["x", "x^2", "x^3", "x^4", "exp", "log", "sqrt", "tanh", "sin", "abs"]


def run_pykan(eq: Equation, args: argparse.Namespace) -> dict:
    """pykan's documented workflow (README / hellokan.ipynb of pykan 0.2.x) on the same rows:
    KAN([d, 5, 1], grid 3, k 3) -> fit(LBFGS, 50 steps, lamb 1e-3) -> prune -> fit -> refine(10)
    -> fit -> auto_symbolic(its library) -> fit -> symbolic_formula, rounded to 4 digits."""
    import os
    import tempfile

    import torch
    from kan import KAN
    from kan.utils import ex_round

    from kansym.symbolic.verify import is_exact_recovery, r2_score

    torch.set_num_threads(1)
    os.chdir(tempfile.mkdtemp(prefix="pykan-"))  # pykan writes checkpoints to ./model
    rng = np.random.default_rng([args.seed, eq.index])
    x, y = eq.sample(args.rows, rng)
    x_test, y_test = eq.sample(args.test_rows, rng)
    if args.noise > 0:
        y = y + rng.normal(0.0, args.noise * float(np.sqrt(np.mean(y**2))), size=y.shape)
    t = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    dataset = {"train_input": t(x), "train_label": t(y[:, None]), "test_input": t(x_test), "test_label": t(y_test[:, None])}
    t0 = time.perf_counter()
    model = KAN(width=[len(eq.names), 5, 1], grid=3, k=3, seed=args.seed, auto_save=False)
    model.fit(dataset, opt="LBFGS", steps=50, lamb=0.001, log=10**9)
    model = model.prune()
    model.fit(dataset, opt="LBFGS", steps=50, log=10**9)
    model = model.refine(10)
    model.fit(dataset, opt="LBFGS", steps=50, log=10**9)
    model.auto_symbolic(lib=PYKAN_LIB, verbose=0)
    model.fit(dataset, opt="LBFGS", steps=50, log=10**9)
    expr = ex_round(model.symbolic_formula(var=list(eq.names))[0][0], 4)
    seconds = time.perf_counter() - t0
    syms = sympy.symbols(eq.names, real=True, seq=True)
    expr = expr.xreplace({s: next(v for v in syms if v.name == s.name) for s in expr.free_symbols})
    with np.errstate(all="ignore"):
        pred = np.broadcast_to(np.asarray(sympy.lambdify(syms, expr, "numpy")(*x_test.T), dtype=float), y_test.shape)
    r2_test = r2_score(y_test, pred) if np.all(np.isfinite(pred)) else None
    recovered = bool(is_exact_recovery(eq.truth_on_ranges(), expr, symbols=list(eq.names)))
    return {"id": eq.id, "method": "pykan", "recovered": recovered and seconds <= args.time_limit,
            "formula": str(expr), "r2_test": r2_test, "complexity": int(sympy.count_ops(expr)),
            "seconds": round(seconds, 2), "timed_out": seconds > args.time_limit}


def _worker(eq: Equation, args: argparse.Namespace, conn, method: str = "kansym") -> None:
    try:
        row = run_pykan(eq, args) if method == "pykan" else {"method": "kansym", **run_equation(eq, args)}
    except Exception as exc:  # a failing equation is a result, not a crash of the benchmark
        row = {"id": eq.id, "method": method, "recovered": False, "error": f"{type(exc).__name__}: {exc}",
               "traceback": traceback.format_exc(limit=4)}
    conn.send(row)
    conn.close()


def run_all(equations: list[Equation], args: argparse.Namespace, emit) -> list[dict]:
    """Run every equation in its own process, ``args.jobs`` at a time, with the time limit."""
    ctx = mp.get_context("fork")
    methods = ["kansym"] + (["pykan"] if args.peer == "pykan" else [])
    tasks = [(eq, m) for eq in equations for m in methods]
    pending = list(tasks)
    running: dict = {}  # conn -> (process, equation, method, start)
    rows: dict[tuple[str, str], dict] = {}
    while pending or running:
        while pending and len(running) < args.jobs:
            eq, method = pending.pop(0)
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker, args=(eq, args, send, method), daemon=True)
            proc.start()
            send.close()
            running[recv] = (proc, eq, method, time.perf_counter())
        for conn in wait(list(running), timeout=0.5):
            proc, eq, method, start = running.pop(conn)
            try:
                row = conn.recv()
            except EOFError:
                row = {"id": eq.id, "method": method, "recovered": False, "error": f"worker died (exit code {proc.exitcode})"}
            proc.join()
            rows[eq.id, method] = {**row, "wall_seconds": round(time.perf_counter() - start, 2)}
            emit(rows[eq.id, method])
        now = time.perf_counter()
        for conn, (proc, eq, method, start) in list(running.items()):
            if now - start > args.time_limit + VERIFY_GRACE:
                proc.kill()
                proc.join()
                running.pop(conn)
                rows[eq.id, method] = {"id": eq.id, "method": method, "recovered": False, "timed_out": True,
                                       "seconds": round(now - start, 2), "error": "time limit"}
                emit(rows[eq.id, method])
    return [rows[t[0].id, t[1]] for t in tasks]


def _groups(row: dict) -> str:
    """The dimensionless groups the law was reduced to (``0`` for a monomial, ``—`` without units)."""
    red = row.get("reduction")
    if not red:
        return "—"
    return str(len(red["groups"])) + (": " + ", ".join(f"`{g}`" for g in red["groups"].values()) if red["groups"] else "")


def summary(rows: list[dict], equations: list[Equation], args: argparse.Namespace) -> str:
    """Markdown: the command, recovery rate, median seconds, and one line per equation."""
    by_id = {e.id: e for e in equations}
    lines = [
        f"command: `python bench/feynman.py {' '.join(sys.argv[1:])}`",
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: {platform.machine()}, "
        f"{mp.cpu_count()} CPUs, {args.jobs} job(s), 1 torch thread each",
        f"units {'given (dimensional analysis first)' if args.units else 'not given (--no-units)'}; "
        f"noise {args.noise}, {args.rows} rows (+{args.test_rows} held out), time limit {args.time_limit:g} s, seed {args.seed}",
        "",
    ]
    for method in dict.fromkeys(r.get("method", "kansym") for r in rows):
        mine = [r for r in rows if r.get("method", "kansym") == method]
        rec = sum(r.get("recovered", False) for r in mine)
        secs = [r["seconds"] for r in mine if "seconds" in r]
        med = statistics.median(secs) if secs else math.nan
        lines.append(f"**{method}: recovered {rec}/{len(mine)} ({100 * rec / max(len(mine), 1):.1f} %), "
                     f"median {med:.1f} s per equation**  ")
    lines += [
        "",
        "| id | method | truth | groups | recovered | R² test | complexity | s | formula |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        r2 = r.get("r2_test")
        r2s = "—" if r2 is None else f"{r2:.6f}"
        form = r.get("formula") or r.get("error", "")
        form = form if len(form) <= 90 else form[:87] + "..."
        lines.append(f"| {r['id']} | {r.get('method', 'kansym')} | `{by_id[r['id']].formula}` | {_groups(r)} | {'yes' if r.get('recovered') else 'no'} | {r2s} | "
                     f"{r.get('complexity', '—')} | {r.get('seconds', '—')} | `{form}` |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--equations", type=Path, default=DEFAULT_EQUATIONS, help="equations CSV")
    p.add_argument("--ids", default=None, help="comma-separated equation ids (default: all)")
    p.add_argument("--noise", type=float, default=0.0, help="target noise level L: sigma = L * RMS(y)")
    p.add_argument("--time-limit", type=float, default=600.0, help="seconds per equation")
    p.add_argument("--jobs", type=int, default=1, help="equations run at once (processes)")
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--test-rows", type=int, default=2_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peer", choices=["none", "pykan"], default="none",
                   help="also run a peer on the same rows with the same time limit (pykan: pip install -e .[bench])")
    p.add_argument("--no-units", dest="units", action="store_false",
                   help="do not give the CSV's units to the pipeline (default: given, as AI Feynman gets them; "
                        "the law is then reduced to dimensionless groups first, kansym.discover.dimensional)")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON lines to this file")
    p.add_argument("--summary", type=Path, default=None, help="also write the Markdown summary to this file")
    args = p.parse_args(argv)
    if args.jobs < 1 or args.time_limit <= 0 or args.rows < 10 or args.test_rows < 1 or args.noise < 0:
        p.error("--jobs >= 1, --time-limit > 0, --rows >= 10, --test-rows >= 1 and --noise >= 0 are required")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.equations.exists():
        print(f"error: equations file {args.equations} not found; pass --equations", file=sys.stderr)
        return 2
    equations = load_equations(args.equations)
    if args.ids:
        wanted = [s.strip() for s in args.ids.split(",") if s.strip()]
        known = {e.id: e for e in equations}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            print(f"error: unknown equation ids {unknown}", file=sys.stderr)
            return 2
        equations = [known[w] for w in wanted]
    # import the pipeline once, before the workers fork: every equation runs the same code
    # even if the source tree changes during a long run, and no worker pays the imports
    import kansym.discover.dimensional  # noqa: F401
    import kansym.discover  # noqa: F401
    import kansym.symbolic.verify  # noqa: F401

    if args.peer == "pykan":
        try:
            import kan  # noqa: F401
        except ImportError:
            print("error: --peer pykan needs pykan: pip install -e .[bench]", file=sys.stderr)
            return 2

    out = args.out.open("w") if args.out else None

    def emit(row: dict) -> None:
        line = json.dumps(row, default=float)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    try:
        rows = run_all(equations, args, emit)
    finally:
        if out:
            out.close()
    text = summary(rows, equations, args)
    print()
    print(text)
    if args.summary:
        args.summary.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
