"""Discovery with PySR instead of a KAN (``kansym fit --backend pysr``): the one PySR backend, verified like the KAN's.

PySR (Cranmer 2023, arXiv:2305.01582) searches whole formulas on the fitting rows; its
answer (:func:`pysr_best`, PySR's ``model_selection="best"``: a reading of PySR's output, not kansym's choice)
is verified on the held-out rows of a discovery run (:meth:`kansym.discover.rows.Rows.split`) and
returned as the same :class:`~kansym.discover.result.Formula` the KAN pipeline returns.
PySR needs Julia; it is imported lazily (:func:`import_pysr`).

Optional whole-formula backend: PySR (Cranmer 2023, "Interpretable Machine Learning for
Science with PySR and SymbolicRegression.jl", arXiv:2305.01582).

``kansym fit --backend pysr`` hands the fitting rows to ``pysr.PySRRegressor`` instead of a
KAN (below), then verifies the answer like the KAN backend does (R²
on the held-out rows, the Pareto front, the same :class:`kansym.discover.result.Formula`).
This module holds the PySR side: its config, the lazy import and the reading of its
equation table. PySR needs Julia, which it
downloads on first import, so it is imported only here, lazily
(:func:`import_pysr`), and never by the package or the default tests.

The translation of PySR's equation table to kansym (:func:`parse_pysr_equation`) parses
the ``equation`` strings with kansym's own symbols (explicit ``Symbol`` per column, so
``I``, ``gamma``, ``beta`` stay variables) and PySR's operator names (``square``,
``inv``, ``neg``...), and picks the answer with PySR's ``model_selection="best"`` rule:
the highest score (``-d log(loss) / d complexity``) among the equations whose loss is at
most 1.5 times the lowest loss (PySR documentation, ``PySRRegressor.model_selection``).
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from tokenize import TokenError
from typing import Any, Sequence

import numpy as np
import sympy
from sympy.parsing.sympy_parser import convert_xor, parse_expr, standard_transformations

from kansym.config import HOLDOUT, SEED
from kansym.discover.config import DiscoverConfig
from kansym.discover.result import Formula
from kansym.discover.rows import Rows
from kansym.errors import ConfigError, FitError
from kansym.symbolic.compose import input_symbols, lambdify_formula
from kansym.symbolic.pareto import pareto_front
from kansym.symbolic.verify import fidelity

__all__ = ['PySRConfig', 'import_pysr', 'parse_pysr_equation', 'pysr_best', 'formulas_from_table', 'discover_pysr']


INSTALL_HINT = "pip install 'kansym[pysr]'"

# PySR operator names (SymbolicRegression.jl) -> sympy
PYSR_OPERATORS: dict[str, Any] = {
    "square": lambda x: x**2, "cube": lambda x: x**3, "inv": lambda x: 1 / x, "neg": lambda x: -x,
    "exp": sympy.exp, "log": sympy.log, "safe_log": sympy.log, "log10": lambda x: sympy.log(x, 10),
    "log2": lambda x: sympy.log(x, 2), "sqrt": sympy.sqrt, "safe_sqrt": sympy.sqrt, "abs": sympy.Abs,
    "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "tanh": sympy.tanh, "sinh": sympy.sinh,
    "cosh": sympy.cosh, "asin": sympy.asin, "acos": sympy.acos, "atan": sympy.atan,
    "safe_pow": lambda x, y: x**y, "pow": lambda x, y: x**y, "mult": lambda x, y: x * y,
    "plus": lambda x, y: x + y, "sub": lambda x, y: x - y, "div": lambda x, y: x / y,
}


@dataclass(frozen=True)
class PySRConfig:
    """Search settings passed to ``pysr.PySRRegressor``.

    Parameters
    ----------
    niterations : int
    maxsize : int
        Largest expression complexity.
    binary_operators, unary_operators : tuple of str
    timeout_in_seconds : float or None
    seed : int
        ``random_state``; with ``deterministic=True`` and serial parallelism the search
        is reproducible.
    """

    niterations: int = 40
    maxsize: int = 25
    binary_operators: tuple[str, ...] = ("+", "-", "*", "/")
    unary_operators: tuple[str, ...] = ("square", "cube", "sqrt", "exp", "log", "sin", "cos", "inv")
    timeout_in_seconds: float | None = None
    seed: int = SEED


def import_pysr() -> Any:
    """Import PySR, or raise one clear error.

    Raises
    ------
    ConfigError
        PySR is not installed (the message says how to install it).
    FitError
        PySR is installed but Julia cannot be started or downloaded (no network, a
        broken Julia depot...); the message names the cause in one line.
    """
    try:
        return importlib.import_module("pysr")
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in ("pysr", "juliacall"):
            raise ConfigError(f"the pysr backend needs PySR, which is not installed: {INSTALL_HINT} (or use --backend kan)") from None
        raise FitError(f"PySR could not start ({_first_line(exc)}); check its install or use --backend kan") from None
    except Exception as exc:  # juliacall raises its own types while installing or starting Julia
        raise FitError(f"PySR could not start Julia ({type(exc).__name__}: {_first_line(exc)}); "
                       "check the Julia install or use --backend kan") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def parse_pysr_equation(text: str, symbols: Sequence[sympy.Symbol]) -> sympy.Expr:
    """One PySR equation string (``"square(x0) * 2.5"``, ``"m * a"``) as sympy in ``symbols``.

    Variables are matched by name (PySR writes the ``variable_names`` it was given, or
    ``x0, x1, ...`` by column); ``^`` means power.

    Raises
    ------
    FitError
        If the text does not parse or uses an unknown name.
    """
    local: dict[str, Any] = dict(PYSR_OPERATORS)
    local.update({s.name: s for s in symbols})
    local.update({f"x{i}": s for i, s in enumerate(symbols) if f"x{i}" not in local})
    try:
        expr = parse_expr(str(text), local_dict=local, global_dict={"Float": sympy.Float, "Integer": sympy.Integer,
                                                                      "Rational": sympy.Rational, "Symbol": sympy.Symbol,
                                                                      "pi": sympy.pi, "E": sympy.E},
                          transformations=standard_transformations + (convert_xor,))
    except (SyntaxError, TypeError, ValueError, NameError, TokenError) as exc:
        raise FitError(f"could not read PySR's equation {text!r} ({_first_line(exc)})") from None
    unknown = {s.name for s in expr.free_symbols} - {s.name for s in symbols}
    if unknown:
        raise FitError(f"PySR's equation {text!r} uses unknown names {sorted(unknown)}")
    return expr


def pysr_best(complexity: Sequence[int], loss: Sequence[float]) -> int:
    """Index of PySR's ``"best"`` equation: highest score among losses <= 1.5 x the lowest.

    The score of equation ``k`` (sorted by complexity) is
    ``-(log loss_k - log loss_{k-1}) / (complexity_k - complexity_{k-1})``, 0 for the first
    (Cranmer 2023, arXiv:2305.01582, §3; PySR documentation, ``PySRRegressor.model_selection``).

    This is a reading of PySR's output, not a choice of kansym's (that is
    :func:`kansym.discover.choice.choose`): ``--backend pysr`` answers with the formula PySR
    itself gives, so that it is PySR that is measured (the benchmarks compare it as a peer), and
    kansym's part is the verification on held-out rows that follows. PySR's hall of fame holds
    only losses on the fitting rows in PySR's own complexity measure, which kansym's score and
    significance test (held-out errors, expression nodes, residuals) do not read.
    """
    comp = np.asarray(complexity, dtype=float)
    lo = np.maximum(np.asarray(loss, dtype=float), 1e-300)
    order = np.argsort(comp, kind="stable")
    score = np.zeros(comp.size)
    for a, b in zip(order[:-1], order[1:]):
        dc = comp[b] - comp[a]
        score[b] = -(math.log(lo[b]) - math.log(lo[a])) / dc if dc > 0 else 0.0
    ok = lo <= 1.5 * lo.min()
    return int(np.flatnonzero(ok)[np.argmax(score[ok])])


def formulas_from_table(table: Any, symbols: Sequence[sympy.Symbol], target: str, x: np.ndarray, y: np.ndarray,
                        x_test: np.ndarray | None = None, y_test: np.ndarray | None = None):
    """A :class:`kansym.discover.result.Formula` from PySR's ``equations_`` table (a DataFrame with
    ``complexity``, ``loss`` and ``equation`` columns).

    Parameters
    ----------
    table : pandas.DataFrame
    symbols : sequence of sympy.Symbol
        One per input column.
    x, y : ndarray (N, d), (N,)
        Fitting rows (for the fidelity).
    x_test, y_test : ndarray, optional
        Held-out rows for :attr:`Formula.r2_test` and the front; default ``x, y``.

    Raises
    ------
    FitError
        Empty table or an equation that does not parse.
    """
    if table is None or len(table) == 0:
        raise FitError("PySR returned no equation; give it more iterations")
    exprs = [parse_pysr_equation(t, symbols) for t in table["equation"]]
    best = exprs[pysr_best(list(table["complexity"]), list(table["loss"]))]
    held_out = x_test is not None and y_test is not None
    xt, yt = (x_test, y_test) if held_out else (x, y)
    fid = fidelity(lambdify_formula(best, symbols), x, y)
    front = pareto_front(exprs, best, symbols, xt, yt)
    r2_test = next(e.r2 for e in front if e.chosen)
    # no model here: the formula is compared with the best equation PySR found
    r2_best = max(e.r2 for e in front)
    return Formula(expr=best, raw=best, symbols=tuple(symbols), fidelity=fid, target=target, r2_test=r2_test,
                   r2_model_test=r2_best, n_test=int(xt.shape[0]) if held_out else 0, front=front, origin="pysr")


def discover_pysr(x: np.ndarray, y: np.ndarray, input_names: Sequence[str], target: str,
                  config: PySRConfig | None = None, *, holdout: float = HOLDOUT, seed: int = SEED):
    """Run PySR on ``x (N, d)``, ``y (N,)`` and verify its answer on held-out rows.

    The rows are split as a discovery run's (:meth:`kansym.discover.rows.Rows.split`,
    ``holdout`` and ``seed``); PySR searches all the fitting rows (no ``max_train_rows``
    cap: that is the KAN's).

    Returns
    -------
    kansym.discover.result.Formula

    Raises
    ------
    ConfigError, FitError
        PySR missing, Julia unavailable, or no usable equation.
    """
    config = config or PySRConfig()
    pysr = import_pysr()
    rows = Rows.split(x, np.reshape(y, (-1, 1)), DiscoverConfig(holdout=holdout, seed=seed, max_train_rows=None))
    model = pysr.PySRRegressor(
        niterations=config.niterations, maxsize=config.maxsize, binary_operators=list(config.binary_operators),
        unary_operators=list(config.unary_operators), timeout_in_seconds=config.timeout_in_seconds,
        random_state=config.seed, deterministic=True, parallelism="serial", progress=False, verbosity=0,
    )
    model.fit(rows.x, rows.y[:, 0], variable_names=list(input_names))
    y_test = None if rows.y_test is None else rows.y_test[:, 0]
    return formulas_from_table(model.equations_, input_symbols(input_names), target, rows.x, rows.y[:, 0],
                               rows.x_test, y_test)
