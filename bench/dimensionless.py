"""Scoreboard: exact recovery of low-dimensional dimensionless laws.

After dimensional analysis (AI Feynman, Udrescu & Tegmark 2020) most Feynman laws become
a function of one or two dimensionless groups. This script samples each such reduced law
(10,000 rows, inputs uniform on the stated range, seeded), runs
:func:`kansym.discover.discover` with the defaults of ``kansym fit`` and checks exact
recovery by the SRBench rule (:func:`kansym.symbolic.verify.is_exact_recovery`). It prints
one JSON line per problem (name, recovered, seconds, formula) and a Markdown summary::

    python bench/dimensionless.py                # every problem
    python bench/dimensionless.py --only sin,log # names containing these strings
    python bench/dimensionless.py --dims 1       # the 1-D problems only

Each problem runs in this process with one torch thread, one after the other; the
seconds are wall-clock and depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
import sympy

# name, law (sympy text in x or a, b, t, s), {variable: (low, high)}
PROBLEMS: list[tuple[str, str, dict]] = [
    ("sin", "sin(x)", {"x": (1, 5)}),
    ("cos", "cos(x)", {"x": (0, 5)}),
    ("1-cos", "1 - cos(x)", {"x": (1, 25)}),
    ("sin^2", "sin(x)**2", {"x": (0.25, 4)}),
    ("sin(2pi x)^2", "sin(2*pi*x)**2", {"x": (0.25, 4)}),
    ("arcsin", "asin(x)", {"x": (0.04, 1)}),
    ("1/(x-1)", "1/(x - 1)", {"x": (2, 5)}),
    ("1/(1+x)", "1/(1 + x)", {"x": (1, 5)}),
    ("1/(1-x)", "1/(1 - x)", {"x": (0.1, 0.67)}),
    ("1/sqrt(1-x^2)", "1/sqrt(1 - x**2)", {"x": (0.1, 0.67)}),
    ("x/sqrt(1-x^2)", "x/sqrt(1 - x**2)", {"x": (0.1, 0.67)}),
    ("(1+x)/sqrt(1-x^2)", "(1 + x)/sqrt(1 - x**2)", {"x": (0.1, 0.67)}),
    ("x/sqrt(x^2-1)", "x/sqrt(x**2 - 1)", {"x": (1.5, 10)}),
    ("1/(exp(x)-1)", "1/(exp(x) - 1)", {"x": (0.04, 25)}),
    ("x/(exp(x)-1)", "x/(exp(x) - 1)", {"x": (0.04, 25)}),
    ("x^3/(exp(x)-1)", "x**3/(exp(x) - 1)", {"x": (0.04, 25)}),
    ("1/(exp(x)+exp(-x))", "1/(exp(x) + exp(-x))", {"x": (0.1, 9)}),
    ("log", "log(x)", {"x": (0.2, 5)}),
    ("sqrt(x^2-pi^2)", "sqrt(x**2 - pi**2)", {"x": (4, 12)}),
    ("1/(x^2-1)", "1/(x**2 - 1)", {"x": (0.3, 3)}),
    ("(1+x^2)/4", "(1 + x**2)/4", {"x": (0.3, 3)}),
    ("x-1", "x - 1", {"x": (0.2, 5)}),
    ("1+a*cos(t)", "1 + a*cos(t)", {"a": (0.2, 5), "t": (1, 5)}),
    ("1+a*sin(t)", "1 + a*sin(t)", {"a": (0.2, 5), "t": (1, 5)}),
    ("(a+b)/(1+ab)", "(a + b)/(1 + a*b)", {"a": (0.2, 1), "b": (0.2, 1)}),
    ("1/(1+ab)", "1/(1 + a*b)", {"a": (0.2, 5), "b": (0.2, 5)}),
    ("(1+a^2+b^2)/2", "(1 + a**2 + b**2)/2", {"a": (0.2, 5), "b": (0.2, 5)}),
    ("ab/(1-ab/3)", "a*b/(1 - a*b/3)", {"a": (0, 1), "b": (0, 1)}),
    ("1+ab/(1-ab/3)", "1 + a*b/(1 - a*b/3)", {"a": (0, 1), "b": (0, 1)}),
    ("arcsin(a sin t)", "asin(a*sin(t))", {"a": (0, 1), "t": (1, 5)}),
    ("gauss", "exp(-(t/s)**2/2)/s", {"t": (1, 3), "s": (1, 3)}),
    ("sin(at/2)^2/sin(t/2)^2", "sin(a*t/2)**2/sin(t/2)**2", {"a": (1, 5), "t": (1, 5)}),
]


def run_problem(name: str, law: str, ranges: dict, seed: int, rows: int) -> dict:
    """Sample one law, discover, check exact recovery; one result row."""
    import torch

    from kansym.discover import DiscoverConfig, discover
    from kansym.symbolic.verify import is_exact_recovery

    torch.set_num_threads(1)
    names = list(ranges)
    syms = sympy.symbols(names, real=True)
    truth = sympy.sympify(law, locals=dict(zip(names, syms)))
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.uniform(lo, hi, rows) for lo, hi in ranges.values()])
    y = sympy.lambdify(syms, truth, "numpy")(*x.T) * np.ones(rows)
    t0 = time.perf_counter()
    try:
        result = discover(x, y[:, None], names, ["y"], DiscoverConfig(seed=seed), progress=False)
    except Exception as exc:  # the scoreboard records a failure and goes on
        return {"name": name, "recovered": False, "seconds": round(time.perf_counter() - t0, 2),
                "formula": None, "error": f"{type(exc).__name__}: {exc}"}
    seconds = time.perf_counter() - t0
    formula = result.formulas[0]
    recovered = bool(is_exact_recovery(truth, formula.expr, symbols=names))
    return {"name": name, "recovered": recovered, "seconds": round(seconds, 2), "formula": str(formula.expr),
            "r2_test": formula.r2_test, "truth": law,
            "stages": {k: round(v, 2) for k, v in result.seconds.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="", help="comma-separated substrings of problem names")
    p.add_argument("--dims", type=int, default=0, help="only problems with this many inputs (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rows", type=int, default=10_000)
    args = p.parse_args(argv)
    wanted = [s for s in args.only.split(",") if s]
    rows = []
    for name, law, ranges in PROBLEMS:
        if wanted and not any(w == name for w in wanted) and not any(w in name for w in wanted):
            continue
        if args.dims and len(ranges) != args.dims:
            continue
        row = run_problem(name, law, ranges, args.seed, args.rows)
        print(json.dumps(row), flush=True)
        rows.append(row)
    if not rows:
        print("error: no problem matches --only/--dims", file=sys.stderr)
        return 2
    hits = sum(r["recovered"] for r in rows)
    print("\n| problem | recovered | seconds | formula |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {'yes' if r['recovered'] else 'no'} | {r['seconds']:.1f} | `{r['formula']}` |")
    print(f"\n{hits}/{len(rows)} recovered, median {statistics.median(r['seconds'] for r in rows):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
