"""Symbolic-regression peers of ``bench/feynman.py``: RILS-ROLS, Operon, gplearn and pykan.

Each peer gets the rows kansym gets (:class:`Rows`: the same training rows and noisy
target, the same held-out rows), stops itself within the same time limit, runs on one
thread, and its model becomes a sympy expression on the equation's variables (explicit
real ``Symbol``s: ``I``, ``E``, ``gamma``, ``beta`` are variables here, never sympy's
builtins), so that the same exact-recovery check (SRBench's rule,
:func:`kansym.symbolic.verify.is_exact_recovery`) and the same test R² judge it.

Settings: SRBench's for the ground-truth (Feynman) problems, La Cava et al. 2021,
github.com/cavalab/srbench. That run had no tuning on those problems: it used each
method's setting tuned on the black-box problems (``experiment/methods/tuned/*.py`` and
``params/*.py``) with the evaluation budget doubled, under an 8-hour limit. Here the
time limit is ``--time-limit`` instead, whichever comes first:

- **RILS-ROLS** (``algorithms/rils-rols/regressor.py``): ``max_fit_calls=1e6``,
  ``max_complexity=50``, ``sample_size=0`` (automatic; all rows up to 10,000), no scaling;
  its ``max_time`` is the limit less 3 s (it overruns its clock by ~1 s, then spends up to 2 s in sympy).
- **Operon** (``experiment/methods/tuned/OperonRegressor.py`` + ``params/_operonregressor.py``):
  symbols ``add,mul,aq,exp,log,sin,tanh,constant,variable``, population and pool 500,
  length 50, depth 10, tournament 5, 5 Levenberg-Marquardt iterations per individual
  (pyoperon 0.6 calls ``local_iterations`` ``optimizer_iterations``), objective R²,
  ``max_evaluations=1e6``; ``max_time`` is the limit less 2 s (it overran its own clock by ~0.9 s in a 30 s run).
- **gplearn** (``experiment/methods/tuned/gplearn.py`` + ``params/_gplearn.py``):
  population ``int(1000 * 2**0.5) = 1414``, up to ``int(500 * 2**0.5) = 707`` generations,
  functions ``add,sub,mul,div,log,sqrt,sin,cos``, tournament 20, mean absolute error,
  parsimony 0.001, crossover 0.9, the three mutations 0.01 each, point replace 0.05.
  gplearn has no time limit: it evolves one generation per ``fit`` (``warm_start``, the
  same run as one long ``fit``) and stops before a generation would pass the limit.
  ``low_memory=True`` (only the last generation is kept; the search is the same).
- **pykan**: its documented workflow (:func:`fit_pykan`), which has no time limit (the
  harness stops it).

Install: ``pip install -e .[bench]`` brings pykan, pyoperon and gplearn. RILS-ROLS's
source package imports pybind11 without declaring it, so it is installed apart::

    pip install pybind11 setuptools wheel && pip install --no-build-isolation rils-rols==1.6.7

PySR is not a peer here: importing it downloads Julia, which these machines cannot.
"""

from __future__ import annotations

import importlib.util
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import sympy
from sympy.parsing.sympy_parser import parse_expr

from formula_guard import guardrail_flags

PEERS = ("pykan", "rils", "operon", "gplearn")
MODULES = {"pykan": "kan", "rils": "rils_rols", "operon": "pyoperon", "gplearn": "gplearn"}
INSTALL = {"pykan": "pip install -e .[bench]", "operon": "pip install -e .[bench]",
           "gplearn": "pip install -e .[bench]",
           "rils": "pip install pybind11 setuptools wheel && pip install --no-build-isolation rils-rols==1.6.7"}
GPLEARN_POPULATION = int(1000 * 2**0.5)  # SRBench's tuned 1000, "double the evals"
GPLEARN_GENERATIONS = int(500 * 2**0.5)
OPERON_SYMBOLS = "add,mul,aq,exp,log,sin,tanh,constant,variable"
INDISTINGUISHABLE = 6.635  # the 0.99 quantile of chi-square with 1 degree of freedom (truth_noncentrality)
PYKAN_LIB = ["x", "x^2", "x^3", "x^4", "exp", "log", "sqrt", "tanh", "sin", "abs"]
# the names parse_expr may meet besides the placeholders and functions handed to it
_NUMBERS = {"Integer": sympy.Integer, "Float": sympy.Float, "Rational": sympy.Rational, "Symbol": sympy.Symbol}


@dataclass(frozen=True)
class Rows:
    """What every method of one equation gets: ``x (n, d)``, the training target ``y (n,)``
    (with the run's noise), and the held-out ``x_test (m, d)``, ``y_test (m,)`` (noise-free)."""

    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def installed(peer: str) -> bool:
    """Whether ``peer``'s package can be imported (without importing it)."""
    return importlib.util.find_spec(MODULES[peer]) is not None


def variables(names: Sequence[str]) -> list[sympy.Symbol]:
    """One real ``Symbol`` per variable name, in order."""
    return [sympy.Symbol(n, real=True) for n in names]


def parse_infix(text: str, names: Sequence[str], placeholder: str, functions: dict[str, Callable]) -> sympy.Expr:
    """A peer's infix model as sympy: ``{placeholder}{i}`` is variable ``names[i]``.

    Only the placeholders, ``functions`` and numbers are known to the parser, so no name
    can turn into a sympy builtin; anything else is an error (``ValueError``).
    """
    syms = variables(names)
    local = {f"{placeholder}{i}": s for i, s in enumerate(syms)}
    local.update(functions)
    try:
        expr = parse_expr(text.replace("^", "**"), local_dict=local, global_dict=dict(_NUMBERS))
    except (NameError, SyntaxError, TypeError) as exc:
        raise ValueError(f"cannot read the model {text!r}: {exc}") from exc
    unknown = sympy.sympify(expr).free_symbols - set(syms)
    if unknown:
        raise ValueError(f"the model {text!r} has names that are not variables: {sorted(map(str, unknown))}")
    return sympy.sympify(expr)


_OPERON_FUNCTIONS = {"exp": sympy.exp, "log": sympy.log, "sin": sympy.sin, "cos": sympy.cos, "tanh": sympy.tanh,
                     "sqrt": sympy.sqrt, "abs": sympy.Abs, "nan": sympy.nan, "inf": sympy.oo}
_RILS_FUNCTIONS = {"exp": sympy.exp, "log": sympy.log, "ln": sympy.log, "sin": sympy.sin, "cos": sympy.cos,
                   "sqrt": sympy.sqrt, "pow": sympy.Pow, "abs": sympy.Abs}


def operon_to_sympy(text: str, names: Sequence[str]) -> sympy.Expr:
    """Operon's infix string (``get_model_string`` with the names ``X0, X1, ...``; ``^`` is a
    power, ``aq`` already written out as ``a / sqrt(1 + b ^ 2)``) on the variables ``names``."""
    return parse_infix(text, names, "X", _OPERON_FUNCTIONS)


def rils_to_sympy(text: str, names: Sequence[str]) -> sympy.Expr:
    """RILS-ROLS's model string (variables ``x0, x1, ...``) on the variables ``names``."""
    return parse_infix(text, names, "x", _RILS_FUNCTIONS)


_GPLEARN = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "sqrt": lambda a: sympy.sqrt(sympy.Abs(a)),
    "log": lambda a: sympy.log(sympy.Abs(a)), "neg": lambda a: -a, "inv": lambda a: 1 / a,
    "abs": sympy.Abs, "max": sympy.Max, "min": sympy.Min, "sin": sympy.sin, "cos": sympy.cos,
    "tan": sympy.tan,
}


def gplearn_to_sympy(program: Sequence, names: Sequence[str]) -> sympy.Expr:
    """gplearn's program (``est._program.program``: prefix order; a function node has
    ``name`` and ``arity``, an ``int`` is a variable's column, a float a constant) on the
    variables ``names``, every constant at full precision (gplearn prints 3 decimals).

    gplearn's protected operators become their plain forms where they are defined:
    ``sqrt(|a|)``, ``log(|a|)``, ``a / b`` and ``1 / a`` (gplearn returns 1 and 0 when
    ``|b|``, ``|a|`` <= 0.001, a case the formula does not carry).
    """
    syms = variables(names)

    def build(i: int) -> tuple[sympy.Expr, int]:
        node = program[i]
        if isinstance(node, (int, np.integer)):
            return syms[int(node)], i + 1
        if isinstance(node, (float, np.floating)):
            return sympy.Float(float(node)), i + 1
        if node.name not in _GPLEARN:
            raise ValueError(f"gplearn function {node.name!r} has no sympy form here")
        args, j = [], i + 1
        for _ in range(node.arity):
            arg, j = build(j)
            args.append(arg)
        return _GPLEARN[node.name](*args), j

    expr, end = build(0)
    if end != len(program):
        raise ValueError(f"gplearn program has {len(program) - end} nodes after its end")
    return sympy.sympify(expr)


def fit_rils(rows: Rows, names: Sequence[str], time_limit: float, seed: int) -> tuple[sympy.Expr, dict]:
    """RILS-ROLS with SRBench's ground-truth setting, ``max_time`` = the limit less 3 s."""
    from rils_rols.rils_rols import RILSROLSRegressor

    est = RILSROLSRegressor(max_fit_calls=1_000_000, max_time=max(1, int(time_limit - 3)), max_complexity=50,
                            sample_size=0, verbose=False, random_state=seed)
    est.fit(rows.x, rows.y)
    return rils_to_sympy(str(est.model), names), {"fit_calls": int(est.fit_calls)}


def fit_operon(rows: Rows, names: Sequence[str], time_limit: float, seed: int) -> tuple[sympy.Expr, dict]:
    """Operon with SRBench's tuned ground-truth setting, ``max_time`` = the limit less 2 s."""
    from pyoperon.sklearn import SymbolicRegressor

    est = SymbolicRegressor(
        allowed_symbols=OPERON_SYMBOLS, population_size=500, pool_size=500, max_length=50, max_depth=10,
        tournament_size=5, brood_size=10, offspring_generator="basic", reinserter="keep-best",
        initialization_method="btc", female_selector="tournament", male_selector="tournament",
        crossover_probability=1.0, crossover_internal_probability=0.9, mutation_probability=0.25,
        mutation={"onepoint": 1.0, "changevar": 1.0, "changefunc": 1.0, "insertsubtree": 1.0,
                  "replacesubtree": 1.0, "removesubtree": 1.0},
        max_selection_pressure=100, comparison_factor=0, objectives=["r2"], optimizer_iterations=5,
        generations=100_000, max_evaluations=1_000_000, n_threads=1, max_time=max(1, int(time_limit - 2)),
        random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "uncertainty left at its default": only MDL uses it
        est.fit(rows.x, rows.y)
    text = est.get_model_string(est.model_, 12, [f"X{i}" for i in range(len(names))])
    return operon_to_sympy(text, names), {"generations": int(est.stats_["generations"]),
                                          "evaluations": int(est.stats_["evaluation_count"])}


def fit_gplearn(rows: Rows, names: Sequence[str], time_limit: float, seed: int) -> tuple[sympy.Expr, dict]:
    """gplearn with SRBench's tuned setting, one generation per warm-started ``fit`` until
    707 generations, a perfect fit, or the next generation would end past the limit less 1 s."""
    from gplearn.genetic import SymbolicRegressor

    deadline = time.perf_counter() + time_limit - 1.0
    est = SymbolicRegressor(
        population_size=GPLEARN_POPULATION, generations=0, tournament_size=20, stopping_criteria=0.0,
        init_depth=(2, 6), init_method="half and half", function_set=("add", "sub", "mul", "div", "log", "sqrt",
                                                                        "sin", "cos"),
        metric="mean absolute error", parsimony_coefficient=0.001, p_crossover=0.9, p_subtree_mutation=0.01,
        p_hoist_mutation=0.01, p_point_mutation=0.01, p_point_replace=0.05, max_samples=1.0, n_jobs=1,
        warm_start=True, low_memory=True, random_state=seed)
    last = 0.0
    for generation in range(1, GPLEARN_GENERATIONS + 1):
        if generation > 1 and time.perf_counter() + 1.2 * last > deadline:
            break
        start = time.perf_counter()
        est.set_params(generations=generation)
        est.fit(rows.x, rows.y)
        last = time.perf_counter() - start
        if est.run_details_["best_fitness"][-1] <= est.stopping_criteria:
            break
    return gplearn_to_sympy(est._program.program, names), {"generations": len(est.run_details_["generation"])}


def fit_pykan(rows: Rows, names: Sequence[str], time_limit: float, seed: int) -> tuple[sympy.Expr, dict]:
    """pykan's documented workflow (README / hellokan.ipynb of pykan 0.2.x):
    KAN([d, 5, 1], grid 3, k 3) -> fit(LBFGS, 50 steps, lamb 1e-3) -> prune -> fit -> refine(10)
    -> fit -> auto_symbolic(its library) -> fit -> symbolic_formula, rounded to 4 digits."""
    import tempfile

    import torch
    from kan import KAN
    from kan.utils import ex_round

    os.chdir(tempfile.mkdtemp(prefix="pykan-"))  # pykan writes checkpoints to ./model
    t = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    dataset = {"train_input": t(rows.x), "train_label": t(rows.y[:, None]),
               "test_input": t(rows.x_test), "test_label": t(rows.y_test[:, None])}
    model = KAN(width=[len(names), 5, 1], grid=3, k=3, seed=seed, auto_save=False)
    model.fit(dataset, opt="LBFGS", steps=50, lamb=0.001, log=10**9)
    model = model.prune()
    model.fit(dataset, opt="LBFGS", steps=50, log=10**9)
    model = model.refine(10)
    model.fit(dataset, opt="LBFGS", steps=50, log=10**9)
    model.auto_symbolic(lib=PYKAN_LIB, verbose=0)
    model.fit(dataset, opt="LBFGS", steps=50, log=10**9)
    expr = ex_round(model.symbolic_formula(var=list(names))[0][0], 4)
    by_name = {s.name: s for s in variables(names)}
    return expr.xreplace({s: by_name.get(s.name, s) for s in expr.free_symbols}), {}


FITTERS = {"rils": fit_rils, "operon": fit_operon, "gplearn": fit_gplearn, "pykan": fit_pykan}


def truth_noncentrality(eq, pred_fit: np.ndarray, rows: Rows) -> float | None:
    """Whether the fitting rows can tell a formula from the law: ``lambda = sum (f - law)^2 / sigma^2``
    over the fitting rows, ``f`` the formula's values there (``pred_fit``), ``law`` the noise-free
    target, ``sigma^2`` the mean square of the noise the rows carry. ``lambda`` is the expected
    likelihood-ratio statistic of the law against the formula had both been offered (Gaussian
    noise; Wilks 1938): below :data:`INDISTINGUISHABLE`, the chi-square(1) 0.99 quantile, a
    test at the 1 % level on these rows would not even on average reject the formula. None
    without noise (every difference shows) or where either is not finite."""
    clean = eq.law(rows.x)
    pred_fit = np.broadcast_to(np.asarray(pred_fit, dtype=np.float64), clean.shape)
    var = float(np.mean((rows.y - clean) ** 2))
    if not (var > 0 and np.all(np.isfinite(pred_fit)) and np.all(np.isfinite(clean))):
        return None
    return float(np.sum((pred_fit - clean) ** 2) / var)


def score(eq, expr: sympy.Expr, rows: Rows) -> dict:
    """The judgement every method gets: R² on the held-out rows (``None`` if not finite),
    SRBench exact recovery against the law on its ranges, complexity, guardrail flags."""
    from kansym.symbolic.verify import is_exact_recovery, r2_score

    syms = variables(eq.names)
    with np.errstate(all="ignore"):
        try:
            pred = np.broadcast_to(np.asarray(sympy.lambdify(syms, expr, "numpy")(*rows.x_test.T), dtype=float),
                                   rows.y_test.shape)
        except (TypeError, ValueError, ZeroDivisionError):  # complex or symbolic leftovers
            pred = np.full(rows.y_test.shape, np.nan)
        try:
            pred_fit = sympy.lambdify(syms, expr, "numpy")(*rows.x.T)
        except (TypeError, ValueError, ZeroDivisionError):
            pred_fit = np.nan
    r2 = r2_score(rows.y_test, pred) if np.all(np.isfinite(pred)) else None
    return {"recovered": bool(is_exact_recovery(eq.truth_on_ranges(), expr, symbols=list(eq.names),
                                                domain=(eq.lows, eq.highs))),
            "formula": str(expr), "r2_test": r2, "complexity": int(sympy.count_ops(expr)),
            "lambda_truth": truth_noncentrality(eq, pred_fit, rows),
            "guardrails": list(guardrail_flags(expr, syms, rows.x_test))}


def run_peer(peer: str, eq, rows: Rows, time_limit: float, seed: int) -> dict:
    """Fit ``peer`` on ``rows`` (one thread), time it, and judge its formula (:func:`score`)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        if peer == "pykan":
            import torch

            torch.set_num_threads(1)
        t0 = time.perf_counter()
        expr, info = FITTERS[peer](rows, eq.names, time_limit, seed)
        seconds = time.perf_counter() - t0
        row = score(eq, expr, rows)
    row["recovered"] = row["recovered"] and seconds <= time_limit
    return {"id": eq.id, "method": peer, **row, "seconds": round(seconds, 2),
            "timed_out": seconds > time_limit, "peer": info}
