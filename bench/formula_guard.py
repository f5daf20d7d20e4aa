"""Guardrails on printed formulas: the kinds of junk a law should never contain.

A formula is flagged for each kind it contains (:data:`GUARDRAILS`):

- ``opaque_function``: an undefined function applied to something (any sympy
  ``AppliedUndef``, e.g. kansym's unfitted edge ``phi_1_0_0(x)``);
- ``exponent_rational``: a rational with a denominator above 12 inside the exponent
  of a power (``x**(37/25)``, ``2**(x/13)``);
- ``exponent_pi``: π inside the exponent of a power (``x**pi``);
- ``long_integer``: an integer of more than 9 digits, alone or as a rational's
  numerator or denominator (``1234567890*x``, ``x/3000000007``);
- ``negligible_term`` (with rows to evaluate on): a term of a sum, a constant included, whose
  median size over the rows is below ``NEGLIGIBLE`` = 1e-6 of the sum's largest term's
  (``(m_0 + 1.86e-17)/sqrt(1 - v^2/c^2)``): a constant inside the noise kept as structure.

"Exponent" means the exponent of a ``Pow`` node, not the argument of ``exp``: laws such
as Planck's have ``exp(h*omega/(2*pi*kb*T))``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

GUARDRAILS = {
    "opaque_function": "opaque function",
    "exponent_rational": "rational exponent with denominator > 12",
    "exponent_pi": "π in an exponent",
    "long_integer": "integer of more than 9 digits",
    "negligible_term": "term below 1e-6 of its sum",
}
MAX_DENOMINATOR = 12
MAX_DIGITS = 9
NEGLIGIBLE = 1e-6


def guardrail_flags(expr: sympy.Expr, symbols: Sequence[sympy.Symbol] | None = None,
                    x: np.ndarray | None = None) -> tuple[str, ...]:
    """The kinds of :data:`GUARDRAILS` found in ``expr``, in the order of that table
    (``negligible_term`` only with ``symbols`` and rows ``x (N, len(symbols))`` to evaluate on)."""
    expr = sympy.sympify(expr)
    exponents = [p.exp for p in expr.atoms(sympy.Pow)]
    found = {
        "opaque_function": bool(expr.atoms(AppliedUndef)),
        "exponent_rational": any(r.q > MAX_DENOMINATOR for e in exponents for r in e.atoms(sympy.Rational)),
        "exponent_pi": any(e.has(sympy.pi) for e in exponents),
        "long_integer": any(max(abs(r.p), r.q) >= 10**MAX_DIGITS for r in expr.atoms(sympy.Rational)),
        "negligible_term": symbols is not None and x is not None and negligible_term(expr, symbols, x),
    }
    return tuple(kind for kind in GUARDRAILS if found[kind])


def negligible_term(expr: sympy.Expr, symbols: Sequence[sympy.Symbol], x: np.ndarray) -> bool:
    """Whether some sum in ``expr`` has a term whose median absolute value on the rows ``x`` is below
    ``NEGLIGIBLE`` times that of its largest term (terms that cannot be evaluated are skipped)."""
    for add in sympy.sympify(expr).atoms(sympy.Add):
        sizes = []
        for term in add.args:
            if term.atoms(AppliedUndef):
                break
            with np.errstate(all="ignore"):
                try:
                    value = np.broadcast_to(np.asarray(sympy.lambdify(list(symbols), term, "numpy")(*np.asarray(x).T),
                                                       dtype=complex), (len(x),))
                except (TypeError, ValueError, ZeroDivisionError, NameError):
                    break
            sizes.append(float(np.median(np.abs(value))))
        else:
            if len(sizes) > 1 and np.all(np.isfinite(sizes)) and min(sizes) < NEGLIGIBLE * max(sizes):
                return True
    return False


def printed_guardrail_flags(exprs: Iterable[sympy.Expr], symbols: Sequence[sympy.Symbol] | None = None,
                            x: np.ndarray | None = None) -> tuple[str, ...]:
    """The kinds of :data:`GUARDRAILS` found in any of ``exprs`` (the expressions one run
    printed), in the order of that table."""
    found = {kind for e in exprs for kind in guardrail_flags(e, symbols, x)}
    return tuple(kind for kind in GUARDRAILS if kind in found)


def count_guardrails(rows: Iterable[dict]) -> tuple[int, Counter]:
    """``(formulas checked, Counter of kind -> formulas flagged)`` over rows with a
    ``guardrails`` list (rows without a formula carry none)."""
    checked, counts = 0, Counter()
    for row in rows:
        if "guardrails" in row:
            checked += 1
            counts.update(row["guardrails"])
    return checked, counts


def guardrail_line(rows: Iterable[dict], method: str = "kansym") -> str:
    """One Markdown line: how many of ``method``'s formulas carry each kind (target 0)."""
    checked, counts = count_guardrails(r for r in rows if r.get("method", "kansym") == method)
    parts = ", ".join(f"{text} {counts.get(kind, 0)}" for kind, text in GUARDRAILS.items())
    return f"**guardrails ({method}, {checked} printed formulas; target 0 each): {parts}**  "
