"""A second validation set nobody tunes on: seeded random physics-like laws, run like bench/feynman.py.

The 80 Feynman equations have been looked at one by one; a gain there need not carry
over. This script draws laws from a fixed grammar instead (:func:`draw_law`), each from its
own seed, so that nobody can tune on the laws themselves:

- 2-6 inputs ``x1..xd``, each positive, uniform on a range spanning 1-2 decades
  (``low = 10**U(-1, 1)``, ``high = low * 10**U(1, 2)``, two significant digits), except an
  angle (the argument of ``sin``/``cos``), whose range lies in ``(0.05, 6)``;
- a law of one of these shapes, with ``m`` a monomial (a product of powers from
  ``-2, -1, -1/2, 1/2, 1, 2, 3``) and ``c`` constants from a short list of the kind physics
  has (``1/2``, ``2``, ``3``, ``pi``, ``1/(4 pi)``, ...):

  ============  ===============================================
  ``monomial``  ``c m``
  ``sum``       ``c1 m1 + c2 m2`` (either sign; terms may share inputs)
  ``unary``     ``c m1 f(c2 m2)``, ``f`` one of ``exp(-u)``, ``sin``, ``cos``, ``sqrt(1 + u)``,
                ``log(1 + u)``, ``1/(1 + u)``, ``tanh``
  ``nested``    ``c m1 f(c2 m2 g(c3 m3))``: a function inside a function's argument
  ============  ===============================================

- with probability 0.3, one or two irrelevant columns the law does not use.

A draw whose law is not finite on its ranges, does not depend on every input it names
(each input alone moves ``y`` by more than 1 % of its spread), or is nearly zero on most
rows is redrawn from the same seed's stream, so each seed gives exactly one law.

Two fixed seed ranges (:data:`RANGES`): **tuning** (seeds 0-99), which may be opened law by
law (``--show``, per-law lines in the summary), and **validation** (seeds 1000-1099), which
is only run and counted: its summary prints the counts (exact, wrong without a warning,
guardrails) and no law, and ``--show`` refuses it. A change that raises the tuning count
but lowers the validation count is not kept.

Everything else is bench/feynman.py's: the rows (``--rows`` uniform rows, ``--test-rows``
held out, noise ``L * RMS(y)`` on the training target), the pipeline exactly as ``kansym fit``
runs it without units, SRBench's exactness check, the time limit, the peers (``--peer rils``:
RILS-ROLS on the same rows) and the JSON lines. Usage::

    python bench/random_laws.py --show --seeds 0,1,2             # look at tuning laws
    python bench/random_laws.py --range tuning --noise 0.01 --time-limit 120 --jobs 1 --out tuning.jsonl
    python bench/random_laws.py --range validation --noise 0.01 --time-limit 120 --peer rils --out validation.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import sympy

sys.path.append(str(Path(__file__).resolve().parent))

import feynman  # noqa: E402  (puts this tree's kansym first on the path)
import sr_peers  # noqa: E402
from feynman_report import halves_table, summary  # noqa: E402
from formula_guard import guardrail_line  # noqa: E402

RANGES = {"tuning": range(0, 100), "validation": range(1000, 1100)}
SHAPES = ("monomial", "sum", "unary", "nested")
POWERS = (-2, -1, sympy.Rational(-1, 2), sympy.Rational(1, 2), 1, 2, 3)
CONSTANTS = (1, 2, 3, sympy.Rational(1, 2), sympy.Rational(1, 3), sympy.Rational(3, 2), sympy.Rational(1, 4), 4,
             sympy.pi, 2 * sympy.pi, 1 / (4 * sympy.pi), 1 / (2 * sympy.pi))
FUNCTIONS = {
    "exp": lambda u: sympy.exp(-u),
    "sin": sympy.sin,
    "cos": sympy.cos,
    "sqrt": lambda u: sympy.sqrt(1 + u),
    "log": lambda u: sympy.log(1 + u),
    "inverse": lambda u: 1 / (1 + u),
    "tanh": sympy.tanh,
}
PERIODIC = ("sin", "cos")
LAW_STREAM = 36_34  # the generator's own stream, apart from the rows' (bench/feynman.py seeds those)
MAX_DRAWS = 200


def _sig(value: float, digits: int = 2) -> float:
    return float(f"{value:.{digits - 1}e}")


def _range(rng: np.random.Generator, angle: bool) -> tuple[float, float]:
    if angle:
        return _sig(rng.uniform(0.05, 0.5)), _sig(rng.uniform(1.5, 6.0))
    low = _sig(10 ** rng.uniform(-1, 1))
    return low, _sig(low * 10 ** rng.uniform(1, 2))


def _monomial(rng: np.random.Generator, xs: list[sympy.Symbol]) -> sympy.Expr:
    return sympy.Mul(*(x ** POWERS[rng.integers(len(POWERS))] for x in xs))


def _constant(rng: np.random.Generator) -> sympy.Expr:
    return sympy.sympify(CONSTANTS[rng.integers(len(CONSTANTS))])


def _split(rng: np.random.Generator, xs: list[sympy.Symbol], parts: int) -> list[list[sympy.Symbol]]:
    """``parts`` non-empty groups covering ``xs`` (shuffled), each input in one group."""
    order = [xs[i] for i in rng.permutation(len(xs))]
    cuts = sorted(rng.choice(np.arange(1, len(xs)), size=parts - 1, replace=False)) if parts > 1 else []
    return [order[a:b] for a, b in zip([0, *cuts], [*cuts, len(xs)])]


def _argument(rng: np.random.Generator, xs: list[sympy.Symbol], fn: str, angles: set) -> sympy.Expr:
    """``c m(xs)`` as a function's argument; a periodic function gets one angle ``c x`` (``xs[0]``)."""
    if fn in PERIODIC:
        angles.add(xs[0])
        return _constant(rng) * xs[0]
    return _constant(rng) * _monomial(rng, xs)


def _law(rng: np.random.Generator, xs: list[sympy.Symbol], shape: str, angles: set) -> sympy.Expr:
    """One draw of the grammar of the module docstring over the inputs ``xs``; ``angles`` collects sin/cos arguments."""
    c = _constant(rng)
    if shape == "monomial" or len(xs) < 2:
        return c * _monomial(rng, xs)
    if shape == "sum":
        a, b = _split(rng, xs, 2)
        shared = [x for x in a if rng.random() < 0.3]  # a term may reuse an input of the other
        sign = 1 if rng.random() < 0.5 else -1
        return c * _monomial(rng, a) + sign * _constant(rng) * _monomial(rng, b + shared)
    names = list(FUNCTIONS)
    if shape == "unary":
        outer, inner = _split(rng, xs, 2) if len(xs) > 1 and rng.random() < 0.7 else ([], xs)
        fn = names[rng.integers(len(names))]
        inner = inner[:1] if fn in PERIODIC else inner
        rest = [x for x in xs if x not in inner]
        return c * _monomial(rng, rest) * FUNCTIONS[fn](_argument(rng, inner, fn, angles))
    parts = _split(rng, xs, 3) if len(xs) >= 3 else [[], xs[:1], xs[1:]]
    outer_fn = [n for n in names if n not in PERIODIC][rng.integers(len(names) - len(PERIODIC))]
    inner_fn = names[rng.integers(len(names))]
    innermost = parts[2][:1] if inner_fn in PERIODIC else parts[2]
    rest = parts[0] + [x for x in parts[2] if x not in innermost]
    inside = _constant(rng) * _monomial(rng, parts[1]) * FUNCTIONS[inner_fn](_argument(rng, innermost, inner_fn, angles))
    return c * _monomial(rng, rest) * FUNCTIONS[outer_fn](inside)


def _acceptable(eq: feynman.Equation, used: int) -> bool:
    """Finite on its ranges, each used input matters alone, and not nearly zero on most rows."""
    rng = np.random.default_rng(0)
    x, y = eq.sample(2000, rng)
    if not np.all(np.isfinite(y)) or np.std(y) <= 1e-9 * max(np.max(np.abs(y)), 1e-300):
        return False
    rms = float(np.sqrt(np.mean(y**2)))
    if np.mean(np.abs(y) < 1e-3 * rms) > 0.5:
        return False
    f = sympy.lambdify(sympy.symbols(eq.names, real=True), eq.truth(), "numpy")
    spread = float(np.std(y))
    for i in range(used):  # move input i alone across its range, the others held at one row
        probe = np.repeat(x[:50], 2, axis=0)
        probe[0::2, i], probe[1::2, i] = eq.lows[i], eq.highs[i]
        with np.errstate(all="ignore"):
            out = np.broadcast_to(np.asarray(f(*probe.T), dtype=float), (100,))
        if not np.all(np.isfinite(out)) or np.max(np.abs(out[0::2] - out[1::2])) < 0.01 * spread:
            return False
    return True


def draw_law(seed: int) -> feynman.Equation:
    """The law of ``seed``: an :class:`feynman.Equation` (id ``R<seed>``, output ``y``) of the module's grammar.

    Raises
    ------
    RuntimeError
        If no acceptable law comes out of :data:`MAX_DRAWS` draws (not seen for seeds 0-2000).
    """
    rng = np.random.default_rng([LAW_STREAM, seed])
    half = next((name for name, seeds in RANGES.items() if seed in seeds), "")
    for _ in range(MAX_DRAWS):
        used = int(rng.integers(2, 7))
        extra = int(rng.integers(1, 3)) if rng.random() < 0.3 else 0
        xs = list(sympy.symbols(f"x1:{used + extra + 1}", real=True))
        angles: set = set()
        law = _law(rng, xs[:used], SHAPES[rng.integers(len(SHAPES))], angles)
        if law.free_symbols != set(xs[:used]):
            continue
        ranges = [_range(rng, x in angles) for x in xs]
        eq = feynman.Equation(seed, f"R{seed}", "y", str(law), tuple(str(x) for x in xs),
                              tuple(r[0] for r in ranges), tuple(r[1] for r in ranges), half=half)
        if _acceptable(eq, used):
            return eq
    raise RuntimeError(f"no acceptable law in {MAX_DRAWS} draws for seed {seed}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--range", dest="half", choices=tuple(RANGES), default="tuning", help="which fixed seed range to run")
    p.add_argument("--seeds", default=None, help="comma-separated seeds of the tuning range (default: the whole range)")
    p.add_argument("--show", action="store_true", help="print the laws of the tuning seeds and stop")
    p.add_argument("--noise", type=float, default=0.0, help="target noise level L: sigma = L * RMS(y)")
    p.add_argument("--time-limit", type=float, default=120.0, help="seconds per law and method")
    p.add_argument("--jobs", type=int, default=1, help="(law, method) runs at once (processes)")
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--test-rows", type=int, default=2_000)
    p.add_argument("--seed", type=int, default=0, help="seed of the rows and of kansym (not of the laws)")
    p.add_argument("--peer", type=feynman._peer_list, default=[], help="peers on the same rows, e.g. rils")
    p.add_argument("--peers-only", action="store_true", help="run only the peers")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON lines to this file")
    p.add_argument("--summary", type=Path, default=None, help="also write the Markdown summary to this file")
    args = p.parse_args(argv)
    args.units = False  # no units: the laws have none
    return args


def select(args: argparse.Namespace) -> list[int]:
    """The seeds to run; ``SystemExit`` with one line when ``--seeds`` or ``--show`` reach into validation."""
    if args.seeds is None:
        return list(RANGES[args.half])
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"error: --seeds must be comma-separated integers, got {args.seeds!r}") from None
    outside = [s for s in seeds if s not in RANGES["tuning"]]
    if outside:
        raise SystemExit(f"error: --seeds picks tuning laws only (seeds {RANGES['tuning'].start}-"
                         f"{RANGES['tuning'].stop - 1}); the validation range runs whole, with --range validation")
    args.half = "tuning"
    return seeds


def validation_summary(rows: list[dict], args: argparse.Namespace) -> str:
    """Counts only: the halves table and the guardrail line of each method, no law and no formula."""
    lines = [f"command: `python bench/random_laws.py {' '.join(sys.argv[1:])}`",
             f"validation range (seeds {RANGES['validation'].start}-{RANGES['validation'].stop - 1}), noise {args.noise}, "
             f"{args.rows} rows, time limit {args.time_limit:g} s: counts only", "", *halves_table(rows), ""]
    lines += [guardrail_line(rows, m) for m in dict.fromkeys(r.get("method", "kansym") for r in rows)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        seeds = select(args)
        if args.show and args.half != "tuning":
            raise SystemExit("error: the validation laws are not shown; run them with --range validation (counts only)")
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    laws = [draw_law(s) for s in seeds]
    if args.show:
        for eq in laws:
            ranges = ", ".join(f"{n} in [{lo:g}, {hi:g}]" for n, lo, hi in zip(eq.names, eq.lows, eq.highs))
            print(f"{eq.id}: y = {eq.formula}   ({ranges})")
        return 0
    missing = [p for p in args.peer if not sr_peers.installed(p)]
    if missing:
        print(f"error: --peer {missing[0]} needs its package: {sr_peers.INSTALL[missing[0]]}", file=sys.stderr)
        return 2
    import kansym.discover  # noqa: F401  (imported once before the workers fork)
    import kansym.symbolic.verify  # noqa: F401

    validation = args.half == "validation"
    out = args.out.open("w") if args.out else None

    def emit(row: dict) -> None:
        line = json.dumps(row, default=float)
        if out:
            out.write(line + "\n")
            out.flush()
        if not validation:  # the validation range prints counts only
            print(line, flush=True)

    try:
        rows = feynman.run_all(laws, args, emit)
    finally:
        if out:
            out.close()
    text = validation_summary(rows, args) if validation else summary(rows, laws, args)
    print(text)
    if args.summary:
        args.summary.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
