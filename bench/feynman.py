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
   each variable's sign taken from its range (:meth:`Equation.truth_on_ranges`), and the
   ranges given as the domain (where sympy cannot decide the sign of a root such as
   ``sqrt(c - v)`` alone, roots are combined as for positive bases, and that verdict counts
   only when the formula equals the law up to a constant on 64 points of the ranges)
   and the formula's R² on the held-out rows (noise-free targets).

Each equation runs in its own process with one thread, ``--jobs`` at a time; kansym gets
``--time-limit`` less a margin as its own (:func:`kansym_time_limit`), stops itself and
its answer counts (the row's ``cut_short`` says what was cut); a run over ``--time-limit``
counts as not recovered (one past ``VERIFY_GRACE`` more is killed). ``--peer`` adds symbolic-regression peers, each in its own process on the same
rows, under the same limit, judged by the same check (``bench/sr_peers.py``: RILS-ROLS,
Operon and gplearn with SRBench's settings, pykan's documented workflow); kansym always
runs. PySR is not among them: importing it downloads Julia. The peers come from
``pip install -e .[bench]``, except RILS-ROLS, whose source package imports pybind11
without declaring it::

    pip install pybind11 setuptools wheel && pip install --no-build-isolation rils-rols==1.6.7

The equations fall in two fixed halves by a rule on the id alone (:func:`half_of`: the
first byte of its SHA-256 even -> ``tuning``, odd -> ``validation``); ``--half`` runs one.
Tune on the tuning half; the validation half says whether it generalises. One JSON line per
equation and method goes to stdout (and ``--out``), then a Markdown summary (also to
``--summary``) with both halves apart and the guardrail counts of kansym's printed formulas
(``bench/formula_guard.py``: every expression ``kansym fit`` prints for the equation, i.e.
the formula, or for a partial one the best closed form beside it, and the Pareto front's
entries, :func:`kansym.discover.wording.printed_expressions`; a partial formula's own
expression, with its numeric edges, is kept in the record but not printed). ``--report`` reads the JSON lines of several runs (noise 0 and
0.01, with and without units) and prints one table of them, running nothing::

    python bench/feynman.py --equations ../shared/data/feynman/equations.csv \\
        --ids I.12.1,I.14.3 --time-limit 120 --jobs 1 --peer rils,operon,gplearn --out feynman.jsonl
    python bench/feynman.py --report n0.jsonl n1.jsonl n0-no-units.jsonl n1-no-units.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
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
# commit, not the editable install of the working tree), and this script's sibling modules
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parent))

import sr_peers  # noqa: E402
from feynman_report import read_rows, report, summary  # noqa: E402
from formula_guard import printed_guardrail_flags  # noqa: E402

DEFAULT_EQUATIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "feynman" / "equations.csv"
VERIFY_GRACE = 30.0  # seconds allowed after the time limit for the recovery check
KANSYM_MARGIN = (0.1, 3.0)  # kansym's own limit: --time-limit less 10 % of it, and less 3 s at least
METHODS = ("kansym", *sr_peers.PEERS)
HALVES = ("tuning", "validation", "all")

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
    half: str = ""  # the half it belongs to when its source fixes one (bench/random_laws.py); else half_of(id)

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
        return x, self.law(x)

    def law(self, x: np.ndarray) -> np.ndarray:
        """The noise-free target on rows ``x (n, d)`` -> ``(n,)``."""
        f = sympy.lambdify(sympy.symbols(self.names, real=True), self.truth(), "numpy")
        with np.errstate(all="ignore"):
            return np.broadcast_to(np.asarray(f(*x.T), dtype=np.float64), (x.shape[0],)).copy()


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


def half_of(equation_id: str) -> str:
    """The fixed half of an equation, from its id alone: ``tuning`` when the first byte of
    the SHA-256 of the id (UTF-8) is even, ``validation`` when it is odd."""
    return "tuning" if hashlib.sha256(equation_id.encode("utf-8")).digest()[0] % 2 == 0 else "validation"


def equation_rows(eq: Equation, args: argparse.Namespace) -> sr_peers.Rows | None:
    """The rows every method of ``eq`` gets (``None`` if the law is not finite on them):
    ``--rows`` training rows, then ``--test-rows`` held-out rows, then the training target's
    noise, all from one generator seeded by ``--seed`` and the equation's position."""
    rng = np.random.default_rng([args.seed, eq.index])
    x, y = eq.sample(args.rows, rng)
    x_test, y_test = eq.sample(args.test_rows, rng)
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(y_test))):
        return None
    if args.noise > 0:
        sigma = args.noise * float(np.sqrt(np.mean(y**2)))
        y = y + rng.normal(0.0, sigma, size=y.shape)
    return sr_peers.Rows(x, y, x_test, y_test)


NOT_FINITE = "the law is not finite on its ranges"


def kansym_time_limit(limit: float) -> float:
    """kansym's ``DiscoverConfig.time_limit`` in the bench's ``limit``: less ``KANSYM_MARGIN`` (for
    the verification after the deadline and the step running at it), at least half of it."""
    return max(limit - max(KANSYM_MARGIN[0] * limit, KANSYM_MARGIN[1]), 0.5 * limit)


def run_equation(eq: Equation, args: argparse.Namespace) -> dict:
    """Sample, discover, verify one equation (runs inside a worker process)."""
    import torch

    from kansym.discover.dimensional import discover_with_units
    from kansym.discover import DiscoverConfig, discover
    from kansym.discover.wording import printed_expressions
    from kansym.symbolic.verify import is_exact_recovery, r2_score

    torch.set_num_threads(1)
    data = equation_rows(eq, args)
    if data is None:
        return {"id": eq.id, "recovered": False, "error": NOT_FINITE}
    x, y_fit = data.x, data.y
    t0 = time.perf_counter()
    use_units = args.units and eq.output_units is not None
    config = DiscoverConfig(seed=args.seed, time_limit=kansym_time_limit(args.time_limit))
    if use_units:  # the units of the equations CSV, given to the public API as a user would
        units = {**dict(zip(eq.names, eq.units)), eq.output: eq.output_units}
        result = discover_with_units(x, y_fit, list(eq.names), eq.output, units, config, progress=False)
    else:
        result = discover(x, y_fit[:, None], list(eq.names), [eq.output], config, progress=False)
    seconds = time.perf_counter() - t0
    formula = result.formulas[0]
    used = [list(eq.names).index(s.name) for s in formula.symbols]  # a screened run's formula: the kept columns
    with np.errstate(all="ignore"):
        pred = formula(data.x_test[:, used])
        pred_fit = formula(data.x[:, used])
    r2_test = r2_score(data.y_test, pred) if np.all(np.isfinite(pred)) else None
    recovered = bool(is_exact_recovery(eq.truth_on_ranges(), formula.expr, symbols=list(eq.names),
                                       domain=(eq.lows, eq.highs)))
    return {
        "id": eq.id,
        "recovered": recovered and seconds <= args.time_limit,
        "formula": str(formula.expr),
        "guardrails": list(printed_guardrail_flags(printed_expressions(formula), formula.symbols,  # what fit prints
                                                   data.x_test[:, used])),
        "closed_form": None if formula.closed_form is None else str(formula.closed_form.expr),
        "r2_test": r2_test,
        "r2_model_test": formula.r2_model_test,  # the model's R² on the pipeline's own held-out rows
        "r2_formula_heldout": formula.r2_test, "r2_reference_test": formula.r2_reference_test,  # the same rows
        "r2_residual": formula.r2_residual, "p_residual": formula.p_residual,  # the residual test; NaN: no verdict
        "lambda_truth": sr_peers.truth_noncentrality(eq, pred_fit, data),  # can the rows tell it from the law?
        "warning": formula.warning,
        "origin": formula.origin,  # which search found it: kan, direct search, structure
        "complexity": int(sympy.count_ops(formula.expr)),
        "seconds": round(seconds, 2),
        "seconds_by_stage": {k: round(v, 2) for k, v in result.seconds.items()},
        "width_pruned": None if result.prune_result is None else list(result.prune_result.model.width),
        "runs": result.runs,
        "space": None if result.pruned is None else result.pruned.meta.get("space"),
        "units": use_units,
        "reduction": None if not use_units or result.reduction is None else result.reduction.to_dict(),
        "timed_out": seconds > args.time_limit,
        "cut_short": list(result.cut_short),  # what kansym's own time limit cut (empty: nothing)
        # the Pareto front as printed (complexity, held-out R², formula): what else fitted, for later analysis
        "front": [[e.complexity, e.r2, str(e.expr)] for e in formula.front],
    }


def run_method(method: str, eq: Equation, args: argparse.Namespace) -> dict:
    """One method on one equation: kansym's pipeline (:func:`run_equation`) or a peer
    (:func:`sr_peers.run_peer`) on the same rows."""
    if method == "kansym":
        return {"method": "kansym", **run_equation(eq, args)}
    data = equation_rows(eq, args)
    if data is None:
        return {"id": eq.id, "method": method, "recovered": False, "error": NOT_FINITE}
    return sr_peers.run_peer(method, eq, data, args.time_limit, args.seed)


def _run_info(eq: Equation, method: str, args: argparse.Namespace) -> dict:
    """What every row says about the run it belongs to."""
    return {"id": eq.id, "method": method, "half": eq.half or half_of(eq.id), "noise": args.noise, "units_given": args.units}


def _worker(eq: Equation, args: argparse.Namespace, conn, method: str = "kansym") -> None:
    if method != "kansym":  # peers print to stdout (RILS-ROLS always): keep stdout for the JSON lines
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    try:
        row = run_method(method, eq, args)
    except Exception as exc:  # a failing equation is a result, not a crash of the benchmark
        row = {"id": eq.id, "method": method, "recovered": False, "error": f"{type(exc).__name__}: {exc}",
               "traceback": traceback.format_exc(limit=-8)}  # the innermost frames: where it failed
    conn.send({**_run_info(eq, method, args), **row})
    conn.close()


def run_all(equations: list[Equation], args: argparse.Namespace, emit) -> list[dict]:
    """Run every (equation, method) in its own process, ``args.jobs`` at a time, with the time limit."""
    ctx = mp.get_context("fork")
    tasks = [(eq, m) for eq in equations for m in methods_of(args)]
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
                row = {**_run_info(eq, method, args), "recovered": False,
                       "error": f"worker died (exit code {proc.exitcode})"}
            proc.join()
            rows[eq.id, method] = {**row, "wall_seconds": round(time.perf_counter() - start, 2)}
            emit(rows[eq.id, method])
        now = time.perf_counter()
        for conn, (proc, eq, method, start) in list(running.items()):
            if now - start > args.time_limit + VERIFY_GRACE:
                proc.kill()
                proc.join()
                running.pop(conn)
                rows[eq.id, method] = {**_run_info(eq, method, args), "recovered": False, "timed_out": True,
                                       "seconds": round(now - start, 2), "error": "time limit"}
                emit(rows[eq.id, method])
    return [rows[t[0].id, t[1]] for t in tasks]


def methods_of(args: argparse.Namespace) -> list[str]:
    """kansym (unless ``--peers-only``), then the peers of ``--peer`` in the order given."""
    return list(dict.fromkeys(([] if args.peers_only else ["kansym"]) + list(args.peer)))


def _peer_list(text: str) -> list[str]:
    names = [w.strip() for w in text.split(",") if w.strip() and w.strip() != "none"]
    unknown = [n for n in names if n not in METHODS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--equations", type=Path, default=DEFAULT_EQUATIONS, help="equations CSV")
    p.add_argument("--ids", default=None, help="comma-separated equation ids (default: all)")
    p.add_argument("--half", choices=HALVES, default="all",
                   help="run only the tuning or the validation half of the equations (half_of: SHA-256 of the id)")
    p.add_argument("--noise", type=float, default=0.0, help="target noise level L: sigma = L * RMS(y)")
    p.add_argument("--time-limit", type=float, default=600.0, help="seconds per equation and method")
    p.add_argument("--jobs", type=int, default=1, help="(equation, method) runs at once (processes)")
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--test-rows", type=int, default=2_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peer", type=_peer_list, default=[],
                   help="comma-separated methods run next to kansym on the same rows with the same limit: "
                        f"{', '.join(sr_peers.PEERS)} (kansym always runs; 'none' for no peer)")
    p.add_argument("--peers-only", action="store_true",
                   help="run the peers of --peer alone (kansym's rows of the same rows from another run: "
                        "the rows depend only on --seed, --rows, --test-rows, --noise and the equation)")
    p.add_argument("--no-units", dest="units", action="store_false",
                   help="do not give the CSV's units to the pipeline (default: given, as AI Feynman gets them; "
                        "the law is then reduced to dimensionless groups first, kansym.discover.dimensional)")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON lines to this file")
    p.add_argument("--summary", type=Path, default=None, help="also write the Markdown summary to this file")
    p.add_argument("--report", type=Path, nargs="+", default=None, metavar="JSONL",
                   help="run nothing: print one table (by method, half, noise, units) of these runs' JSON lines "
                        "(--half keeps one half)")
    args = p.parse_args(argv)
    if args.peers_only and not args.peer and not args.report:
        p.error("--peers-only needs --peer")
    if args.jobs < 1 or args.time_limit <= 0 or args.rows < 10 or args.test_rows < 1 or args.noise < 0:
        p.error("--jobs >= 1, --time-limit > 0, --rows >= 10, --test-rows >= 1 and --noise >= 0 are required")
    return args


def select(equations: list[Equation], ids: str | None, half: str) -> list[Equation]:
    """``--ids`` (in the order given), then only those of ``--half``; ``SystemExit`` with one
    line for an unknown id or an empty selection."""
    if ids:
        wanted = [s.strip() for s in ids.split(",") if s.strip()]
        known = {e.id: e for e in equations}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise SystemExit(f"error: unknown equation ids {unknown}")
        equations = [known[w] for w in wanted]
    if half != "all":
        equations = [e for e in equations if half_of(e.id) == half]
        if not equations:
            raise SystemExit(f"error: no equation of the selection is in the {half} half")
    return equations


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        missing = [p for p in args.report if not p.exists()]
        if missing:
            print(f"error: {missing[0]} not found", file=sys.stderr)
            return 2
        rows = [{"half": half_of(r["id"]), **r} for r in read_rows(args.report)]
        rows = [r for r in rows if args.half in ("all", r["half"])]
        print(report(rows, args.report), end="")
        return 0
    if not args.equations.exists():
        print(f"error: equations file {args.equations} not found; pass --equations", file=sys.stderr)
        return 2
    try:
        equations = select(load_equations(args.equations), args.ids, args.half)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    missing = [p for p in args.peer if p != "kansym" and not sr_peers.installed(p)]
    if missing:
        print(f"error: --peer {missing[0]} needs its package: {sr_peers.INSTALL[missing[0]]}", file=sys.stderr)
        return 2
    # import the pipeline once, before the workers fork: every equation runs the same code
    # even if the source tree changes during a long run, and no worker pays the imports
    import kansym.discover.dimensional  # noqa: F401
    import kansym.discover  # noqa: F401
    import kansym.symbolic.verify  # noqa: F401

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
