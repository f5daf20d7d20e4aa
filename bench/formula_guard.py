"""Guardrails on printed formulas: the kinds of junk a law should never contain.

A formula is flagged for each kind it contains (:data:`GUARDRAILS`):

- ``opaque_function``: an undefined function applied to something (any sympy
  ``AppliedUndef``, e.g. kansym's unfitted edge ``phi_1_0_0(x)``);
- ``exponent_rational``: a rational with a denominator above 12 inside the exponent
  of a power (``x**(37/25)``, ``2**(x/13)``);
- ``exponent_pi``: π inside the exponent of a power (``x**pi``);
- ``long_integer``: an integer of more than 9 digits, alone or as a rational's
  numerator or denominator (``1234567890*x``, ``x/3000000007``).

"Exponent" means the exponent of a ``Pow`` node, not the argument of ``exp``: laws such
as Planck's have ``exp(h*omega/(2*pi*kb*T))``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import sympy
from sympy.core.function import AppliedUndef

GUARDRAILS = {
    "opaque_function": "opaque function",
    "exponent_rational": "rational exponent with denominator > 12",
    "exponent_pi": "π in an exponent",
    "long_integer": "integer of more than 9 digits",
}
MAX_DENOMINATOR = 12
MAX_DIGITS = 9


def guardrail_flags(expr: sympy.Expr) -> tuple[str, ...]:
    """The kinds of :data:`GUARDRAILS` found in ``expr``, in the order of that table."""
    expr = sympy.sympify(expr)
    exponents = [p.exp for p in expr.atoms(sympy.Pow)]
    found = {
        "opaque_function": bool(expr.atoms(AppliedUndef)),
        "exponent_rational": any(r.q > MAX_DENOMINATOR for e in exponents for r in e.atoms(sympy.Rational)),
        "exponent_pi": any(e.has(sympy.pi) for e in exponents),
        "long_integer": any(max(abs(r.p), r.q) >= 10**MAX_DIGITS for r in expr.atoms(sympy.Rational)),
    }
    return tuple(kind for kind in GUARDRAILS if found[kind])


def printed_guardrail_flags(exprs: Iterable[sympy.Expr]) -> tuple[str, ...]:
    """The kinds of :data:`GUARDRAILS` found in any of ``exprs`` (the expressions one run
    printed), in the order of that table."""
    found = {kind for e in exprs for kind in guardrail_flags(e)}
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
