"""Exact values for fitted constants: where a constant sits, what it may become, and in how many bits.

The decision to snap a constant is taken on data (:func:`kansym.symbolic.snap.snap_constants`);
this module holds its vocabulary, without data (docs/algorithms.md §8):

- **Position** (:func:`constant_contexts`). A constant in the exponent of a power, the
  phase of a sine, a multiplicative factor and an additive offset can become different
  exact numbers: ``x**(3/2)`` is a law, ``x**(14/(3*pi))`` is not. Each float of a
  formula gets the strictest context of the places it occupies.
- **Candidates** (:func:`exact_candidates`): per context, the exact numbers near a value,
  with bounded denominators (``q <= 12``; ``q <= 6`` in an exponent), numerators of at
  most 9 digits; ``pi`` and the other named constants (``1/pi``, ``pi**2``, ``1/pi**2``,
  ``pi**3``, ``1/pi**3``, ``sqrt(2)``, ``sqrt(3)``, ``1/sqrt(2 pi)``) as factors, with
  numerators below 100 (``8 pi/3``, not ``34844827/(4 pi**3)``), ``pi`` in a phase, ``p pi/q`` and
  ``p pi**2/q`` (``q <= 2``) in an offset (``sqrt(x**2 - pi**2)``), and never anything but
  a plain rational in an exponent.
- **Description length** in bits. AI Feynman 2.0 (Udrescu et al. 2020, "AI Feynman 2.0:
  Pareto-optimal symbolic regression exploiting graph modularity", arXiv:2006.10782, §2,
  and its code ``S_get_number_DL.py``) codes an integer ``n`` in ``log2(1 + |n|)`` bits, a
  rational ``p/q`` in ``log2((1 + |p|) q)`` and a real ``r`` to precision ``eps`` in
  ``log2(1 + (r / eps)**2) / 2``. Here the precision of a fitted float is its standard
  error ``s`` (the precision the data support: Rissanen 1978, "Modeling by shortest data
  description", Automatica 14, and the parameter code of exhaustive symbolic regression,
  Bartlett, Desmond & Ferreira 2023, arXiv:2211.11461, §3), plus one bit that says "a
  float" (a float counts two nodes in
  :func:`kansym.symbolic.pareto.expression_complexity`, an exact number one); a named
  constant (``pi``, ...) costs ``log2(7)`` bits for the choice among
  :data:`NAMED` and "none" on top of its rational coefficient.
- **Rounding** (:func:`precision_step`): a float that stays a float is printed to the
  precision of its standard error, two significant digits of the error when they start
  with 10-35 and one otherwise (the Particle Data Group's rule, Review of Particle
  Physics, Introduction, "Rounding").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy

__all__ = ["CONTEXTS", "NAMED", "MAX_DIGITS", "MAX_NAMED_NUMERATOR", "Exact", "constant_contexts", "exact_candidates",
           "integer_bits", "rational_bits", "float_bits", "precision_step", "round_to_step", "too_long",
           "near_miss_exponents", "fitted_exponents"]

# strictest first: a float found in two places takes the stricter one's candidates
CONTEXTS = ("exponent", "log_factor", "phase", "offset", "factor")
MAX_DIGITS = 9  # no integer or rational of more than 9 digits in a formula
MAX_DENOMINATOR = {"exponent": 6, "phase": 6, "offset": 12, "factor": 12, "log_factor": 12}
# named constants a factor may hold, with the largest denominator of their coefficient
# (powers of pi up to the third: hbar = h/(2 pi) puts pi**-3 in Planck's law of radiation)
# and hbar**2 = h**2/(4 pi**2) puts 1/(8 pi**2) in the energy levels of a particle in a box
NAMED = ((sympy.pi, 12), (1 / sympy.pi, 12), (sympy.pi ** 2, 8), (sympy.pi ** -2, 8), (sympy.pi ** 3, 4),
         (sympy.pi ** -3, 4), (sympy.sqrt(2), 4), (sympy.sqrt(3), 4), (1 / sympy.sqrt(2 * sympy.pi), 4))
NAME_BITS = math.log2(len(NAMED) + 1)  # which named constant, or none
# a named constant's coefficient has a numerator below 100: 8 pi/3 and 1/(8 pi**2) are laws,
# 34844827/(4 pi**3) is a fitted 281380.0 dressed up as one (its bits are the float's)
MAX_NAMED_NUMERATOR = 99
OFFSET_NAMED_DENOMINATOR = 2  # an additive offset may be p*pi/q or p*pi**2/q with q <= 2
FLOAT_BIT = 1.0  # "this constant is a float": two nodes of the complexity, not one
NEAR_MISS = 0.02  # a float exponent this near (relative) a simple rational it is not: no verified power
NEAR_MISS_DENOMINATOR = 4  # simple: k, k/2, k/3, k/4


@dataclass(frozen=True)
class Exact:
    """An exact candidate for a constant: its sympy value, float value and description length."""

    expr: sympy.Expr
    value: float
    bits: float


def integer_bits(n: int) -> float:
    """``log2(1 + |n|)`` (AI Feynman 2.0)."""
    return math.log2(1 + abs(int(n)))


def rational_bits(p: int, q: int) -> float:
    """``log2((1 + |p|) q)`` for ``p/q`` in lowest terms (AI Feynman 2.0; ``q = 1``: an integer)."""
    return math.log2((1 + abs(int(p))) * int(q))


def float_bits(c: float, se: float) -> float:
    """Bits of a float ``c`` stated to its standard error ``se``: ``1 + log2(1 + (c/se)**2) / 2``."""
    se = abs(float(se))
    if not math.isfinite(se) or se <= 0:
        se = max(abs(float(c)), 1.0) * 2.0 ** -52  # exact to float64: as many bits as a double holds
    return FLOAT_BIT + 0.5 * math.log2(1.0 + (float(c) / se) ** 2)


def too_long(r: sympy.Rational) -> bool:
    """Whether a rational has a numerator or denominator of more than :data:`MAX_DIGITS` digits."""
    return max(abs(int(r.p)), int(r.q)) >= 10 ** MAX_DIGITS


def _stricter(a: str | None, b: str) -> str:
    return b if a is None else min(a, b, key=CONTEXTS.index)


def constant_contexts(expr: sympy.Expr, *, log_space: bool = False) -> dict[sympy.Float, str]:
    """The context of every float of ``expr``, one of :data:`CONTEXTS`.

    - ``exponent``: anywhere inside the exponent of a power (``x**c``, ``x**(c*y)``); in log
      space (``expr`` is ``log f`` expanded) also the coefficient of a log at the top level
      (``c*log(x)`` is ``x**c`` of ``f``);
    - ``log_factor``: in log space, an additive constant at the top level (``log C`` of a
      factor ``C`` of ``f``);
    - ``phase``: an additive constant in the argument of ``sin``/``cos``;
    - ``offset``: any other additive constant;
    - ``factor``: a coefficient, a base, a function's argument, or the whole formula.
    """
    out: dict[sympy.Float, str] = {}

    def note(f: sympy.Basic, where: str) -> None:
        if isinstance(f, sympy.Float):
            out[f] = _stricter(out.get(f), where)

    def visit(e: sympy.Basic, exponent: bool, top: bool) -> None:
        if isinstance(e, sympy.Float):
            note(e, "exponent" if exponent else ("log_factor" if top and log_space else "factor"))
            return
        if e.is_Pow:
            visit(e.base, exponent, False)
            visit(e.exp, True, False)
            return
        if e.is_Add:
            for a in e.args:
                if isinstance(a, sympy.Float):
                    note(a, "exponent" if exponent else ("log_factor" if top and log_space else "offset"))
                else:
                    visit(a, exponent, top and a.is_Mul)
            return
        if e.is_Mul:
            logs = log_space and top and any(isinstance(a, sympy.log) for a in e.args)
            for a in e.args:
                if isinstance(a, sympy.Float):
                    note(a, "exponent" if exponent or logs else "factor")
                else:
                    visit(a, exponent, False)
            return
        for a in e.args:
            if isinstance(e, (sympy.sin, sympy.cos)) and a.is_Add:
                for t in a.args:
                    if isinstance(t, sympy.Float):
                        note(t, "exponent" if exponent else "phase")
                    else:
                        visit(t, exponent, False)
            else:
                visit(a, exponent, False)

    expr = sympy.sympify(expr)
    if expr.is_Add:
        visit(expr, False, True)
    else:
        visit(expr, False, log_space and expr.is_Mul)
    return out


def _bases(context: str) -> list[tuple[sympy.Expr, float, int, float]]:
    """(factor, its value, largest denominator, extra bits) of the candidates of a context."""
    q = MAX_DENOMINATOR[context]
    plain = [(sympy.Integer(1), 1.0, q, 0.0)]
    if context == "exponent":
        return plain
    if context == "phase":
        return plain + [(sympy.pi, math.pi, q, NAME_BITS)]
    if context == "offset":  # sqrt(x**2 - pi**2), arcsin(x) + pi/2; never 1/pi or a surd
        return plain + [(b, float(b), OFFSET_NAMED_DENOMINATOR, NAME_BITS) for b in (sympy.pi, sympy.pi ** 2)]
    return plain + [(b, float(b), min(qb, q), NAME_BITS) for b, qb in NAMED]


def _numerator_limit(base: sympy.Expr) -> int:
    """The largest ``|p|`` of a candidate ``(p/q) * base``."""
    return 10 ** MAX_DIGITS - 1 if base == 1 else MAX_NAMED_NUMERATOR


def exact_candidates(v: float, context: str, radius: float) -> list[Exact]:
    """Exact numbers within ``radius`` of ``v`` allowed in ``context``, fewest bits first.

    Candidates are ``(p/q) * B`` with ``B`` 1 or, in a factor, one of :data:`NAMED` (in a
    phase only ``pi``, in an offset ``pi`` and ``pi**2`` with ``q <= 2``, in an exponent
    none), ``q`` up to :data:`MAX_DENOMINATOR` of the context, ``p`` of at
    most :data:`MAX_DIGITS` digits (below 100 in front of a named constant,
    :data:`MAX_NAMED_NUMERATOR`); 0 in every context but ``log_factor``. In a
    ``log_factor`` (``v`` is ``log C``) they are the logs of the factor candidates of
    ``exp(v)``: ``log(3/2)``, never ``25/2`` (which would be ``exp(25/2)``).
    Ties in bits go to the nearer value, then to the shorter text.
    """
    v, radius = float(v), abs(float(radius))
    if not (math.isfinite(v) and math.isfinite(radius)):
        return []
    if context == "log_factor":
        c = math.exp(v) if v < 700 else math.inf
        if not math.isfinite(c) or c == 0:
            return []
        span = c * math.expm1(min(radius, 50.0))
        return [Exact(sympy.log(e.expr), math.log(e.value), e.bits)
                for e in exact_candidates(c, "factor", span) if e.value > 0
                and abs(math.log(e.value) - v) <= radius]
    if context not in MAX_DENOMINATOR:
        raise ValueError(f"unknown constant context {context!r}; choose from {CONTEXTS}")
    found: dict[sympy.Expr, Exact] = {}
    if abs(v) <= radius:
        found[sympy.Integer(0)] = Exact(sympy.Integer(0), 0.0, 0.0)
    for base, value, qmax, extra in _bases(context):
        pmax = _numerator_limit(base)
        for q in range(1, qmax + 1):
            lo, hi = (v - radius) * q / value, (v + radius) * q / value
            first, last = math.ceil(min(lo, hi)), math.floor(max(lo, hi))
            if last - first > 4:  # a radius wider than the spacing: the nearest few suffice
                mid = round(v * q / value)
                first, last = mid - 2, mid + 2
            for p in range(first, last + 1):
                if p == 0 or math.gcd(p, q) != 1 or abs(p) > pmax:
                    continue
                val = p * value / q
                if abs(val - v) > radius:
                    continue
                expr = sympy.Rational(p, q) * base
                if expr not in found:
                    found[expr] = Exact(expr, val, rational_bits(p, q) + extra)
    return sorted(found.values(), key=lambda e: (e.bits, abs(e.value - v), str(e.expr)))


def precision_step(se: float) -> float:
    """The rounding step of a float whose standard error is ``se`` (the PDG rule).

    The error's three leading digits decide: 100-354, two significant digits; 355-949,
    one; 950-999, rounded up to two digits of 1000. ``0.0012 -> 0.0001``, ``150 -> 10``,
    ``0.04 -> 0.01``; 0 for an error that is not positive and finite.
    """
    se = float(se)
    if not math.isfinite(se) or se <= 0:
        return 0.0
    e = math.floor(math.log10(se))
    lead = se / 10.0 ** (e - 2)
    if lead >= 949.5:
        e, lead = e + 1, 100.0
    return 10.0 ** (e - (1 if lead < 354.5 else 0))


def round_to_step(c: float, step: float) -> float:
    """``c`` rounded to a multiple of ``step`` (a power of ten), as the decimal it prints as."""
    if step <= 0 or not math.isfinite(c):
        return float(c)
    k = -math.floor(math.log10(step) + 1e-9)
    return float(round(c, k)) if k > 0 else float(round(c / step) * step)


def near_miss_exponents(expr: sympy.Expr, *, rel_tol: float = NEAR_MISS,
                        max_denominator: int = NEAR_MISS_DENOMINATOR) -> list[tuple[sympy.Float, sympy.Rational]]:
    """The float exponents of ``expr`` within ``rel_tol`` of a simple rational (denominator at most
    ``max_denominator``) that they are not: ``x**0.99969`` near 1, ``x**0.87397`` near 7/8;
    near 0 within ``rel_tol`` itself (``x**0.00025``: an input the law may not hold).

    A refined formula keeps such a float only when the data reject the simple value it is near
    (the snap's test, :func:`kansym.symbolic.snap.snap_constants`) or its refinement was cut
    short. Either way the form is not verified: a power whose best exponent is significantly off
    a near simple value is the mark of a law of another form there (``sqrt(1 + 3 u^2)`` fitted
    as ``u^0.9997``, the large-``u`` limit, a correction where ``u`` is small).

    Returns
    -------
    list of (Float, Rational)
        Each such exponent and the rational it is near, in the order of ``expr``'s powers.
    """
    out = []
    for power in sympy.preorder_traversal(sympy.sympify(expr)):
        if not (isinstance(power, sympy.Pow) and isinstance(power.exp, sympy.Float)):
            continue
        v = float(power.exp)
        near = sympy.Rational(v).limit_denominator(max_denominator)
        off = abs(v - float(near))
        # near 0 the tolerance is absolute: x**0.00025 is an input the law may not hold
        if (1e-9 * abs(v) < off <= rel_tol * max(abs(float(near)), 1.0 if near == 0 else 0.0)
                and (power.exp, near) not in out):
            out.append((power.exp, near))
    return out


def fitted_exponents(expr: sympy.Expr, *, max_denominator: int = NEAR_MISS_DENOMINATOR) -> list[sympy.Float]:
    """The float exponents of ``expr`` that are no simple rational (denominator at most
    ``max_denominator``): ``(1 + 6.5 x**0.8633)**1.16374``.

    The refinement snaps every exponent the data allow to a simple value
    (:func:`kansym.symbolic.snap.snap_constants`); one left a float is a shape fitted to the rows,
    not a power of a law of physics, whose exponents are small rationals (dimensional analysis:
    Buckingham 1914). Such a formula is an empirical fit at best, not a verified law.

    Returns
    -------
    list of Float
        Each such exponent once, in the order of ``expr``'s powers.
    """
    out: list[sympy.Float] = []
    for power in sympy.preorder_traversal(sympy.sympify(expr)):
        if not (isinstance(power, sympy.Pow) and isinstance(power.exp, sympy.Float)):
            continue
        v = float(power.exp)
        if (abs(v - float(sympy.Rational(v).limit_denominator(max_denominator))) > 1e-9 * max(abs(v), 1.0)
                and power.exp not in out):
            out.append(power.exp)
    return out
