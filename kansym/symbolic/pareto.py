"""The complexity/error Pareto front of candidate formulas (like PySR's equations table).

Every formula the Occam step tried (:mod:`kansym.symbolic.occam`) and the final refined
formula are scored on the same rows (the held-out rows when there are some) by their
R² and normalised RMS error, and by their complexity, the number of nodes of the sympy
expression tree (PySR's default complexity: every operator, variable and constant counts
1; Cranmer 2023, arXiv:2305.01582, §2). A formula is on the front when no simpler one is
at least as accurate. The chosen formula is the pipeline's answer: the lowest
information criterion of the Occam step (BIC, Schwarz 1978), refined; it is marked
(and listed even if some other candidate dominates it, so a user sees that too).

Every other candidate is listed without the terms of its sums that no data resolve
(:func:`drop_negligible_terms`): ``2.95e-48*exp(...) + 100*tanh(...)`` is listed as
``100*tanh(...)``, at the same R² to :data:`~kansym.config.NEGLIGIBLE_TERM`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import sympy

from kansym.config import NEGLIGIBLE_TERM
from kansym.symbolic.compose import predictions
from kansym.symbolic.verify import nrmse, r2_score

__all__ = ["FrontEntry", "expression_complexity", "pareto_front", "drop_negligible_terms"]


def expression_complexity(expr: sympy.Expr) -> int:
    """Nodes of the expression tree, a fitted real constant counting twice.

    Operators, symbols and exact numbers (integers, rationals, pi) count 1 each; a
    float counts 2, because naming an arbitrary real takes more information than
    naming a small exact number (the description-length view of AI Feynman 2.0,
    Udrescu et al. 2020, arXiv:2006.10782, §2.4). So ``a**(3/2)`` (3) is simpler
    than ``a**1.49937`` (4), and a snapped formula is never listed as dominated by
    its unsnapped twin of the same shape.

    A subtraction counts as the binary operator it is (PySR's count, Cranmer 2023,
    arXiv:2305.01582): sympy writes ``a - b`` as ``a + (-1)*b``, and that ``Mul`` and
    its ``-1`` are not charged, so ``1 - x**2`` (5) costs what ``1 + x**2`` costs;
    a sum whose every term is negated pays one node for the sign.

    An exact constant of several nodes (the numeric factors of a product, ``sqrt(2)/(2 sqrt(pi))``
    in ``exp(-x^2/2)/sqrt(2 pi)``) counts as a float at most: it names no more than a fitted
    real does, and counted node by node the exact law (14) lost to its float twin
    ``0.3989 exp(-0.5 x^2)`` (11) and to approximations with floats.
    """
    return _nodes(sympy.sympify(expr))


def _nodes(expr: sympy.Basic) -> int:
    """:func:`expression_complexity` of one subtree."""
    if isinstance(expr, sympy.Float):
        return 2
    if not expr.args:
        return 1
    if not expr.free_symbols:  # an exact constant names no more than a float: sqrt(2)/(2 sqrt(pi))
        return min(2, 1 + sum(_nodes(a) for a in expr.args))
    if isinstance(expr, sympy.Mul):  # its numeric factors are one constant: 1/2, sqrt(2), 1/sqrt(pi)
        numeric = [a for a in expr.args if not a.free_symbols]
        const = 0 if not numeric else _nodes(numeric[0]) if len(numeric) == 1 else _nodes(sympy.Mul(*numeric, evaluate=False))
        return 1 + const + sum(_nodes(a) for a in expr.args if a.free_symbols)
    if not isinstance(expr, sympy.Add):
        return 1 + sum(_nodes(a) for a in expr.args)
    negated = [isinstance(a, sympy.Mul) and a.args[0] is sympy.S.NegativeOne for a in expr.args]
    total = 1 + int(all(negated))
    for term, neg in zip(expr.args, negated):
        if not neg:
            total += _nodes(term)
        elif len(term.args) == 2:
            total += _nodes(term.args[1])
        else:
            total += 1 + sum(_nodes(a) for a in term.args[1:])
    return total


@dataclass(frozen=True)
class FrontEntry:
    """One formula of the front.

    Attributes
    ----------
    expr : sympy.Expr
    complexity : int
        :func:`expression_complexity`.
    r2 : float
        R² on the scoring rows (:func:`kansym.symbolic.verify.r2_score`; ``-inf`` if the
        formula is not finite there).
    error : float
        RMS residual over the std of the target (:func:`kansym.symbolic.verify.nrmse`;
        ``sqrt(1 - r2)`` in exact arithmetic, but resolved below 1e-8; ``inf`` if the
        formula is not finite there).
    chosen : bool
        The pipeline's answer.
    dominated : bool
        A simpler (or equally complex) formula is at least as accurate.
    """

    expr: sympy.Expr
    complexity: int
    r2: float
    error: float
    chosen: bool
    dominated: bool = False

    def to_dict(self) -> dict:
        return {"sympy": str(self.expr), "complexity": self.complexity, "r2": self.r2,
                "error": self.error, "chosen": self.chosen, "dominated": self.dominated}


def _scores(expr: sympy.Expr, symbols: Sequence[sympy.Symbol], x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(r2, error)`` of ``expr`` on the rows (:func:`~kansym.symbolic.verify.r2_score`,
    :func:`~kansym.symbolic.verify.nrmse`); ``(-inf, inf)`` where it cannot be evaluated."""
    pred = predictions(expr, symbols, x)
    return r2_score(y, pred, nonfinite="-inf"), nrmse(y, pred)


def pareto_front(candidates: Iterable[sympy.Expr], chosen: sympy.Expr, symbols: Sequence[sympy.Symbol],
                 x: np.ndarray, y: np.ndarray) -> tuple[FrontEntry, ...]:
    """Score formulas on ``x (N, d)``, ``y (N,)`` and keep the non-dominated ones.

    Parameters
    ----------
    candidates : iterable of sympy.Expr
        Formulas tried (duplicates are merged).
    chosen : sympy.Expr
        The answer; always listed, marked ``chosen``.
    symbols : sequence of sympy.Symbol
        Columns of ``x``.

    Returns
    -------
    tuple of FrontEntry
        Sorted by complexity; each is non-dominated, except possibly the chosen one. The
        candidates other than ``chosen`` without their negligible terms
        (:func:`drop_negligible_terms` on ``x``).
    """
    exprs = {str(chosen): chosen}
    for e in candidates:
        e = drop_negligible_terms(e, symbols, x)
        exprs.setdefault(str(e), e)
    scored = []
    for key, e in exprs.items():
        r2, err = _scores(e, symbols, x, y)
        scored.append((expression_complexity(e), -r2, key, e, r2, err))
    scored.sort(key=lambda t: (t[0], t[1], t[2]))
    out, best = [], -math.inf
    for comp, _, key, e, r2, err in scored:
        dominated = not r2 > best
        is_chosen = key == str(chosen)
        if not dominated or is_chosen:
            out.append(FrontEntry(e, comp, r2, err, is_chosen, dominated))
        if not dominated:
            best = r2
    return tuple(out)


def drop_negligible_terms(expr: sympy.Expr, symbols: Sequence[sympy.Symbol], x: np.ndarray,
                          rel: float = NEGLIGIBLE_TERM) -> sympy.Expr:
    """``expr`` without the terms of its sums whose median absolute value on the rows ``x (N, d)``
    (columns ordered like ``symbols``) is below ``rel`` times that of the sum's largest term.

    Such a term changes no prediction by more than ``rel`` of the sum (a constant ``2.95e-48``
    in front of an ``exp`` that the fit drove to zero, a coefficient ``6.7e-12`` on a column): it
    is structure the data do not resolve, and a formula that keeps it reads as a law it is not.
    Sums are cleaned from the inside out; a sum with a term that is not finite on every row is
    kept as it is. Returns ``expr`` itself when nothing is dropped.

    Examples
    --------
    >>> import numpy as np, sympy
    >>> a, b = sympy.symbols("a b", positive=True)
    >>> x = np.column_stack([np.linspace(1, 2, 50), np.linspace(3, 4, 50)])
    >>> drop_negligible_terms(2 * a + 1e-9 * b + sympy.exp(1e-12 * a + b), [a, b], x)
    2*a + exp(b)
    """
    expr = sympy.sympify(expr)
    sums = sorted(expr.atoms(sympy.Add), key=sympy.count_ops)  # the inner ones first
    cleaned: dict[sympy.Expr, sympy.Expr] = {}
    for add in sums:
        add_now = add.xreplace(cleaned)
        if not isinstance(add_now, sympy.Add):
            cleaned[add] = add_now
            continue
        with np.errstate(all="ignore"):
            sizes = np.array([np.median(np.abs(predictions(t, symbols, x))) for t in add_now.args])
        if not np.all(np.isfinite(sizes)) or sizes.max() <= 0:
            cleaned[add] = add_now
            continue
        keep = [t for t, s in zip(add_now.args, sizes) if s >= rel * sizes.max()]
        cleaned[add] = sympy.Add(*keep) if len(keep) < len(add_now.args) else add_now
    if all(k is v or k == v for k, v in cleaned.items()):
        return expr
    return expr.xreplace(cleaned)
