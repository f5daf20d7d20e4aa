"""Powers of two that bring columns of extreme magnitude near 1, and the exact way back.

The numerics after the CSV is read are made for columns of moderate magnitude: sums of
squares overflow above about 1e154 and underflow below 1e-162, the refit and the snapping
of constants use absolute tolerances (a constant below 1e-8 is snapped to 0), the direct
search drops features beyond 1e12. When the largest absolute value of some column lies
outside a range of moderate magnitudes, the table is worked on in other units: every
column divided by ``2**k``, ``k`` the binary exponent of its largest value less one, so
that its largest magnitude lies in ``[1, 2)``. Every column, not only the extreme one: a
law of columns near 1 has constants near 1 (rescaling one column alone moves a constant
as far as it moves that column, e.g. Kepler's ``2.8e5`` to ``2.5e-10`` with the masses
near 1 and the distances near 1e9, where it is snapped to 0). A table without extreme
columns keeps its units. The range is

- ``[2**-20, 2**34)`` (about 1e-6 to 1.7e10) for a table learned in linear units: there
  discovery finds the laws it finds on columns near 1 (measured: ``y = s (a b / 3 + 1)``
  with ``a`` and ``y`` of magnitude ``s`` is found for ``s`` from 1e-6 to 1e10; at 1e-10
  and 1e20 it was not, before this rescaling);
- ``[2**-126, 2**128)`` (float32's normal range) for a table of positive columns spanning
  decades, which is learned in log units (:func:`kansym.discover.structure_tests.choose_space`):
  there a magnitude only shifts a log, and only the float range is at stake (Kepler's
  masses near 2e30 stay in kilograms).

A target that is negative on every row is worked on as ``-y`` (its sign joins the power of
two: ``y / (-2**k)``): log units, the product tests of the structure search and the
snapping of constants all need a positive target, and a law of ``-y`` is the law of ``y``
with its sign (a binding energy, a potential). A target of both signs keeps its sign.

Multiplying by a power of two is exact in floating point (only the exponent changes), so
the rescaled table holds the same numbers. A law ``y' = g(x')`` of the rescaled columns
is the law ``y = 2**k_y * g(2**-k_x * x)`` of the table's own columns, which
:meth:`ColumnScales.expr_to_table` writes in sympy with exact powers of two (numeric
factors the substitution leaves behind are then multiplied out into one number). A model's
:class:`~kansym.io.transform.DataTransform` goes across exactly the same way
(:meth:`ColumnScales.bundle_to_table`): its input scale and shift are multiplied by
``2**k`` (in log units, ``k log 2`` is added to the shift).

:func:`kansym.discover.run.discover` works in these units throughout, once
(:mod:`kansym.discover.rows` moves its results back).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Sequence

import numpy as np
import sympy
from sympy.core.traversal import bottom_up

from kansym.io.bundle import ModelBundle
from kansym.io.scaler import Scaler
from kansym.io.transform import DataTransform

__all__ = ["ColumnScales", "LINEAR_RANGE", "LOG_RANGE", "tidy_numbers"]

LINEAR_RANGE = (-20, 34)  # binary exponents of the moderate magnitudes in linear units (about 1e-6 to 1.7e10)
LOG_RANGE = (-126, 128)  # ... in log units (float32's normal range)
_LN2 = float(np.log(2.0))


def _exponents(a: np.ndarray, low: int, high: int) -> tuple[tuple[int, ...], bool]:
    """Per column the binary exponent of its largest finite |value| less one (0 for a column
    of zeros), and whether some column lies outside ``[2**low, 2**high)``.

    A column that spans more than float64's normal range below its largest value (say 1e-30
    to 1e300) is divided by less: its smallest non-zero value stays a normal float (at least
    ``2**-1022``), so no value is rounded to a subnormal or to 0 and the way back is exact.
    """
    out, extreme = [], False
    for col in np.asarray(a, dtype=np.float64).reshape(a.shape[0], -1).T:
        m = np.abs(col[np.isfinite(col)])
        m = m[m > 0]
        if not m.size:
            out.append(0)
            continue
        top, bottom = float(m.max()), float(m.min())
        extreme |= not 2.0 ** low <= top < 2.0 ** high
        k = int(np.frexp(top)[1]) - 1
        if k > 0:  # dividing: keep the smallest value normal (frexp's exponent e: 2**(e-1) <= v < 2**e)
            k = min(k, int(np.frexp(bottom)[1]) - 1 + 1022)
        out.append(k)
    return tuple(out), extreme


def _spans_decades(x: np.ndarray, y: np.ndarray, decades: float = 2.0) -> bool:
    """Every value positive and some column spanning ``decades`` orders of magnitude (the
    table :func:`kansym.discover.structure_tests.choose_space` learns in log units)."""
    both = np.concatenate([np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)], axis=1)
    if not np.all(both > 0):
        return False
    with np.errstate(over="ignore", divide="ignore"):
        return bool(np.max(np.log10(both.max(axis=0)) - np.log10(both.min(axis=0))) >= decades)


def _ldexp(a: np.ndarray, k: Sequence[Fraction]) -> np.ndarray:
    """``a * 2**k`` per column: exact for integer ``k`` (a rational ``k`` rounds once)."""
    a = np.asarray(a, dtype=np.float64)
    if not any(k):
        return a
    if all(Fraction(v).denominator == 1 for v in k):
        return np.ldexp(a, np.asarray([int(v) for v in k], dtype=np.int64))
    return a * np.exp2(np.asarray([float(v) for v in k], dtype=np.float64))


def _pow2(k: Fraction) -> sympy.Expr:
    k = Fraction(k)
    return sympy.Integer(2) ** sympy.Rational(k.numerator, k.denominator)


def _unwieldy(r: sympy.Basic) -> bool:
    """A rational too long to read (denominator above 1000 or numerator above 1e12)."""
    return isinstance(r, sympy.Rational) and (abs(int(r.p)) > 10 ** 12 or int(r.q) > 1000)


def _float(num: sympy.Expr) -> sympy.Float:
    return sympy.Float(num.evalf(17), 15)


def tidy_numbers(expr: sympy.Expr) -> sympy.Expr:
    """Multiply out the numeric factors of each product that hold a float or an unwieldy
    rational (``3.17e20*sqrt(2)*x`` -> ``4.48e20*x``, ``x/2**60`` -> ``8.67e-19*x``), and
    take a positive numeric factor out of a log (``log(x/2**32)`` -> ``log(x) - 22.18``);
    short exact numbers (``32*x/3``, ``sqrt(2)``) stay exact."""
    def messy(num: sympy.Expr) -> bool:
        return bool(num.atoms(sympy.Float)) or any(_unwieldy(r) for r in num.atoms(sympy.Rational))

    def fix(e: sympy.Basic) -> sympy.Basic:
        if isinstance(e, sympy.Mul):
            num, rest = e.as_independent(*e.free_symbols, as_Add=False)
            if num != 1 and num.is_number and messy(num):
                return _float(num) * rest
        elif isinstance(e, sympy.log) and isinstance(e.args[0], sympy.Mul):
            num, rest = e.args[0].as_independent(*e.free_symbols, as_Add=False)
            if num.is_number and num.is_positive and num != 1 and messy(num):
                return sympy.log(rest) + _float(sympy.log(num))  # log(c z) = log(c) + log(z) for c > 0
        elif _unwieldy(e):
            return _float(e)
        return e

    return bottom_up(sympy.sympify(expr), fix, atoms=True)


def _show(k: Fraction) -> str:
    return str(k) if k.denominator == 1 else f"({k})"


@dataclass(frozen=True)
class ColumnScales:
    """The working units of a table: column ``j`` divided by ``2**k[j]``.

    Attributes
    ----------
    x_exp, y_exp : tuple of int (or Fraction)
        ``k`` of each input and each target column (0: the column keeps its units).
        :meth:`fit` makes integers (exact); a rational ``k`` (the target of a dimensional
        reduction, ``y / prod x^p`` with fractional ``p``) is exact in the formulas and
        rounds once in the rows.
    y_sign : tuple of int
        ``-1`` for a target worked on as ``-y`` (negative on every row), ``1`` otherwise;
        empty (the default) for all ``1``.
    """

    x_exp: tuple[int | Fraction, ...]
    y_exp: tuple[int | Fraction, ...]
    y_sign: tuple[int, ...] = ()

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, space: str = "auto") -> "ColumnScales":
        """The scales of table ``x (N, d_in)``, ``y (N, d_out)`` (see the module docstring):
        none, unless some column is extreme; then every column's.

        ``space`` (``"auto"``, ``"linear"``, ``"log"``) is the run's choice of units: ``log``,
        or ``auto`` on positive columns spanning decades, takes :data:`LOG_RANGE`.
        """
        y = np.asarray(y, dtype=np.float64).reshape(np.shape(y)[0], -1)
        sign = tuple(-1 if col.size and bool(np.all(col < 0)) else 1 for col in y.T)
        y = y * np.asarray(sign, dtype=np.float64)
        log_units = space == "log" or (space == "auto" and _spans_decades(x, y))
        low, high = LOG_RANGE if log_units else LINEAR_RANGE
        (kx, ex), (ky, ey) = _exponents(x, low, high), _exponents(y, low, high)
        sign = sign if -1 in sign else ()
        if not (ex or ey):
            return cls((0,) * len(kx), (0,) * len(ky), sign)
        return cls(kx, ky, sign)

    def signs(self) -> np.ndarray:
        """``y_sign`` as floats, one per target."""
        return np.asarray(self.y_sign or (1,) * len(self.y_exp), dtype=np.float64)

    @property
    def identity(self) -> bool:
        """Whether every column keeps its units (and every target its sign)."""
        return not any(self.x_exp) and not any(self.y_exp) and -1 not in self.y_sign

    def describe(self, input_names: Sequence[str], output_names: Sequence[str]) -> str:
        """``"y by 2**-1020, a by 2**997"``, ``"E by -1"``: the columns rescaled or negated."""
        pairs = [*zip(input_names, self.x_exp, [1] * len(self.x_exp)),
                 *zip(output_names, self.y_exp, self.signs())]

        def factor(k, s) -> str:
            if not k:
                return "-1"
            return f"{'-' if s < 0 else ''}2**{_show(-Fraction(k))}"

        return ", ".join(f"{n} by {factor(k, s)}" for n, k, s in pairs if k or s < 0)

    # --- rows ------------------------------------------------------------------------
    def x_to_working(self, x: np.ndarray) -> np.ndarray:
        return _ldexp(x, [-k for k in self.x_exp])

    def y_to_working(self, y: np.ndarray) -> np.ndarray:
        out = _ldexp(y, [-k for k in self.y_exp])
        return out * self.signs() if self.y_sign else out

    def x_to_table(self, x: np.ndarray) -> np.ndarray:
        return _ldexp(x, self.x_exp)

    def y_to_table(self, y: np.ndarray) -> np.ndarray:
        out = _ldexp(y, self.y_exp)
        return out * self.signs() if self.y_sign else out

    def error_to_table(self, value: float, output: int = 0) -> float:
        """An absolute error of output ``output`` in the table's units (exact)."""
        with np.errstate(over="ignore"):
            return float(_ldexp(np.asarray([value]), [self.y_exp[output]])[0])

    # --- formulas --------------------------------------------------------------------
    def expr_to_table(self, expr: sympy.Expr, symbols: Sequence[sympy.Symbol], output: int = 0) -> sympy.Expr:
        """``y = 2**k_y * g(2**-k_x x)`` of a working-unit formula ``g`` of ``symbols``
        (the inputs, in order); numeric factors then multiplied out (:func:`tidy_numbers`)."""
        return self._convert(expr, symbols, [-k for k in self.x_exp], self.y_exp[output], self.signs()[output])

    def expr_to_working(self, expr: sympy.Expr, symbols: Sequence[sympy.Symbol], output: int = 0) -> sympy.Expr:
        """The inverse of :meth:`expr_to_table`."""
        return self._convert(expr, symbols, list(self.x_exp), -self.y_exp[output], self.signs()[output])

    @staticmethod
    def _convert(expr, symbols, x_exp, y_exp, sign: float = 1.0) -> sympy.Expr:
        expr = sympy.sympify(expr)
        sub = {s: s * _pow2(k) for s, k in zip(symbols, x_exp) if k}
        out = (expr.xreplace(sub) if sub else expr) * _pow2(y_exp)
        out = tidy_numbers(out) if sub or y_exp else expr
        return -out if sign < 0 else out

    # --- models ----------------------------------------------------------------------
    def transform_to_table(self, t: DataTransform) -> DataTransform:
        """The transform from the table's units that equals ``t`` from the working units."""
        return self._move(t, list(self.x_exp), list(self.y_exp), self.signs())

    def transform_to_working(self, t: DataTransform) -> DataTransform:
        """The inverse of :meth:`transform_to_table`."""
        return self._move(t, [-k for k in self.x_exp], [-k for k in self.y_exp], self.signs())

    @staticmethod
    def _move(t: DataTransform, kx: list, ky: list, sign: np.ndarray) -> DataTransform:
        """``t`` with its inputs multiplied by ``2**kx`` and its targets by ``sign * 2**ky``:
        in log units the power goes into the log's shift and the sign outside the log
        (:attr:`DataTransform.output_sign`), in linear units both into the targets' scaler."""
        def scaler(s: Scaler, k: list, by: np.ndarray | None = None) -> Scaler:
            if t.log_space:  # log(2**k a) = log a + k log 2
                return Scaler(s.shift + np.asarray([float(v) for v in k], dtype=np.float64) * _LN2, s.scale)
            shift, scale = _ldexp(s.shift[None, :], k)[0], _ldexp(s.scale[None, :], k)[0]
            return Scaler(shift, scale) if by is None else Scaler(shift * by, scale * by)

        negated = bool(np.any(sign < 0))
        if not any(kx) and not any(ky) and not negated:
            return t
        out_sign = t.output_sign
        if t.log_space and negated:
            out_sign = tuple(float(a * b) for a, b in zip(np.asarray(t.output_sign or (1.0,) * sign.size), sign))
            out_sign = () if all(s == 1.0 for s in out_sign) else out_sign
        return DataTransform(scaler(t.inputs_scaler, kx), scaler(t.targets_scaler, ky, sign if negated else None),
                             t.log_space, out_sign)

    def to_dict(self) -> dict:
        return {"x_exp": [str(k) for k in self.x_exp], "y_exp": [str(k) for k in self.y_exp],
                **({"y_sign": list(self.y_sign)} if self.y_sign else {})}

    def bundle_to_table(self, bundle: ModelBundle) -> ModelBundle:
        """``bundle`` (trained in working units) as a bundle of the table's units: transform
        and calibration rows moved; predictions equal (to a rounding in log units).

        Its ``meta["working_units"]`` keeps these scales and the working transform, so that
        :meth:`bundle_to_working` (a resumed run) restores that transform bit for bit.
        """
        if self.identity:
            return bundle
        meta = {**bundle.meta, "working_units": {**self.to_dict(), "transform": bundle.transform.to_dict()}}
        return replace(bundle, transform=self.transform_to_table(bundle.transform),
                       x_cal=self.x_to_table(bundle.x_cal), y_cal=self.y_to_table(bundle.y_cal), meta=meta)

    def bundle_to_working(self, bundle: ModelBundle) -> ModelBundle:
        """The inverse of :meth:`bundle_to_table` (exact for a bundle it made with these scales)."""
        if self.identity:
            return bundle
        meta = dict(bundle.meta)
        saved = meta.pop("working_units", None)
        if isinstance(saved, dict) and {k: saved.get(k) for k in ("x_exp", "y_exp")} == self.to_dict():
            transform = DataTransform.from_dict(saved["transform"])
        else:
            transform = self.transform_to_working(bundle.transform)
        return replace(bundle, transform=transform, x_cal=self.x_to_working(bundle.x_cal),
                       y_cal=self.y_to_working(bundle.y_cal), meta=meta)
