"""Typed, immutable registry of the symbolic primitives an edge can be fitted to.

Each :class:`Primitive` pairs one function in its numpy, torch and sympy forms
with a complexity, the domain of its argument and the way its inner affine map
``u = a * x + b`` is parameterised (docs/algorithms.md §5, "Per-edge symbolic fit"; the
numpy/torch/sympy pairing follows the idea of pykan's symbolic library, made a
frozen registry here).

Complexities make the simplest explanation win when two primitives fit equally
well::

    0:0  x:1  x^2:2  exp:2  x^3:3  sin:3  cos:3  sqrt:3  1/x:3  log:3
    x^4:4  1/x^2:4  tanh:4  abs:4  x^p:4  gaussian:4  softplus:4  arcsin:5

``softplus`` is ``log(1 + exp(u))``: in log space an input enters as ``u ~ log x``, so
this edge is ``log(1 + k x)``, the log-space form of a factor ``1 + k x`` (``Y / (1 + sigma)``).

Saved state refers to primitives by name only; :data:`PRIMITIVES` is a read-only
mapping built once at import, so loading never depends on mutable global state.

Inner parameterisation (``inner``) keeps every fit identifiable:

``"none"``    ``a = 1, b = 0`` fixed (``0`` and ``x``).
``"shift"``   ``a`` is only a sign (``+1``, or ``-1`` too for primitives without
              parity), ``b`` is fitted: for a homogeneous ``f`` the scale of
              ``a`` is absorbed by ``c`` (``(a x + b)^2 = a^2 (x + b/a)^2``;
              ``log(a x + b) = log|a| + log(x sign(a) + b/|a|)``).
``"scale"``   ``b = 0`` fixed, ``a`` fitted: ``exp(a x + b) = e^b exp(a x)``.
``"affine"``  both fitted (``sin``, ``cos``, ``tanh``, ``arcsin``, ``gaussian``, ``softplus``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Literal, Mapping

import numpy as np
import sympy
import torch

from kansym.errors import ConfigError

__all__ = ["Interval", "Primitive", "PRIMITIVES", "get_library"]

Inner = Literal["none", "shift", "scale", "affine"]
Parity = Literal["even", "odd"]


@dataclass(frozen=True)
class Interval:
    """An interval ``lo .. hi`` of the argument ``u``, each end open or closed."""

    lo: float = -math.inf
    hi: float = math.inf
    lo_closed: bool = False
    hi_closed: bool = False

    def contains(self, u_min: Any, u_max: Any, margin: Any = 0.0) -> Any:
        """Whether ``[u_min, u_max]`` lies inside, ``margin`` away from open ends.

        Works elementwise on arrays (returns a bool array then). Closed ends
        allow a round-off slack of ``1e-12 * max(1, |end|)``.
        """
        if self.lo_closed:
            ok_lo = u_min >= self.lo - 1e-12 * max(1.0, abs(self.lo))
        else:
            ok_lo = u_min > self.lo + margin
        if self.hi_closed:
            ok_hi = u_max <= self.hi + 1e-12 * max(1.0, abs(self.hi))
        else:
            ok_hi = u_max < self.hi - margin
        return np.logical_and(ok_lo, ok_hi)

    def clip(self, u: np.ndarray, margin: float = 0.0) -> np.ndarray:
        """Clip ``u`` into the interval (``margin`` inside open ends)."""
        lo = self.lo if self.lo_closed else self.lo + margin
        hi = self.hi if self.hi_closed else self.hi - margin
        return np.clip(u, lo, hi)


@dataclass(frozen=True)
class Primitive:
    """One symbolic primitive ``f`` used as ``c * f(a * x + b) + d`` on an edge.

    Attributes
    ----------
    name : str
        Registry key, stored in checkpoints instead of the functions.
    numpy_fn, torch_fn, sympy_fn : callable
        ``f(u)``, or ``f(u, p)`` when ``n_params == 1``; elementwise.
    complexity : int
        Description length used to prefer simple explanations (module docstring).
    domain : tuple of Interval or None
        ``None`` if ``f`` is defined on all reals; else the argument of one fit
        must stay inside a single one of these intervals over the data range.
    n_params : int
        Extra shape parameters fitted besides ``a, b, c, d`` (1 for ``x^p``).
    inner : {"none", "shift", "scale", "affine"}
        Which of ``a, b`` are fitted (module docstring).
    outer : bool
        Whether ``c`` is fitted (``False`` only for the constant edge ``0``).
    parity : {"even", "odd"} or None
        Symmetry used to canonicalise ``a > 0``.
    period : float or None
        Period of ``f``; the phase ``b`` is reduced modulo it.
    p_range : tuple of float
        Search range of the shape parameter when ``n_params == 1``.
    """

    name: str
    numpy_fn: Callable[..., np.ndarray]
    torch_fn: Callable[..., torch.Tensor]
    sympy_fn: Callable[..., sympy.Expr]
    complexity: int
    domain: tuple[Interval, ...] | None = None
    n_params: int = 0
    inner: Inner = "affine"
    outer: bool = True
    parity: Parity | None = None
    period: float | None = None
    p_range: tuple[float, float] = (-12.0, 12.0)

    def __repr__(self) -> str:
        return f"Primitive({self.name!r}, complexity={self.complexity})"

    def in_domain(self, u_min: Any, u_max: Any, margin: Any = 0.0) -> Any:
        """Whether the argument range ``[u_min, u_max]`` is inside the domain (elementwise)."""
        ok = np.isfinite(u_min) & np.isfinite(u_max)
        if self.domain is None:
            return ok
        inside = np.zeros(np.shape(ok), dtype=bool)
        for iv in self.domain:
            inside = inside | iv.contains(u_min, u_max, margin)
        return ok & inside


_POS_OPEN = (Interval(0.0, math.inf),)
_NONZERO = (Interval(-math.inf, 0.0), Interval(0.0, math.inf))


def _zero_np(u: np.ndarray) -> np.ndarray:
    return np.zeros_like(u)


def _zero_torch(u: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(u)


def _sym_zero(u: sympy.Expr) -> sympy.Expr:
    return sympy.Integer(0)


def _pow_np(n: int) -> Callable[[np.ndarray], np.ndarray]:
    def f(u: np.ndarray) -> np.ndarray:
        return u**n

    return f


def _pow_torch(n: int) -> Callable[[torch.Tensor], torch.Tensor]:
    def f(u: torch.Tensor) -> torch.Tensor:
        return u**n

    return f


def _pow_sym(n: int) -> Callable[[sympy.Expr], sympy.Expr]:
    def f(u: sympy.Expr) -> sympy.Expr:
        return u ** sympy.Integer(n)

    return f


def _powp_np(u: np.ndarray, p: float) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.power(u, p)


def _powp_torch(u: torch.Tensor, p: float) -> torch.Tensor:
    return torch.pow(u, p)


def _powp_sym(u: sympy.Expr, p: float) -> sympy.Expr:
    return u ** sympy.Float(p)


def _gauss_np(u: np.ndarray) -> np.ndarray:
    return np.exp(-(u**2))


def _gauss_torch(u: torch.Tensor) -> torch.Tensor:
    return torch.exp(-(u**2))


def _gauss_sym(u: sympy.Expr) -> sympy.Expr:
    return sympy.exp(-(u**2))


def _softplus_np(u: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, u)


def _softplus_sym(u: sympy.Expr) -> sympy.Expr:
    return sympy.log(1 + sympy.exp(u))


def _build() -> dict[str, Primitive]:
    two_pi = 2.0 * math.pi
    prims = [
        Primitive("0", _zero_np, _zero_torch, _sym_zero, 0, inner="none", outer=False),
        Primitive("x", _pow_np(1), _pow_torch(1), _pow_sym(1), 1, inner="none"),
        Primitive("x^2", _pow_np(2), _pow_torch(2), _pow_sym(2), 2, inner="shift", parity="even"),
        Primitive("exp", np.exp, torch.exp, sympy.exp, 2, inner="scale"),
        Primitive("x^3", _pow_np(3), _pow_torch(3), _pow_sym(3), 3, inner="shift", parity="odd"),
        Primitive("sin", np.sin, torch.sin, sympy.sin, 3, parity="odd", period=two_pi),
        Primitive("cos", np.cos, torch.cos, sympy.cos, 3, parity="even", period=two_pi),
        Primitive(
            "sqrt", np.sqrt, torch.sqrt, sympy.sqrt, 3,
            domain=(Interval(0.0, math.inf, lo_closed=True),), inner="shift",
        ),
        Primitive(
            "1/x", _pow_np(-1), _pow_torch(-1), _pow_sym(-1), 3,
            domain=_NONZERO, inner="shift", parity="odd",
        ),
        Primitive("log", np.log, torch.log, sympy.log, 3, domain=_POS_OPEN, inner="shift"),
        Primitive("x^4", _pow_np(4), _pow_torch(4), _pow_sym(4), 4, inner="shift", parity="even"),
        Primitive(
            "1/x^2", _pow_np(-2), _pow_torch(-2), _pow_sym(-2), 4,
            domain=_NONZERO, inner="shift", parity="even",
        ),
        Primitive("tanh", np.tanh, torch.tanh, sympy.tanh, 4, parity="odd"),
        Primitive("abs", np.abs, torch.abs, sympy.Abs, 4, inner="shift", parity="even"),
        Primitive(
            "x^p", _powp_np, _powp_torch, _powp_sym, 4,
            domain=(Interval(0.0, math.inf, lo_closed=True),), n_params=1, inner="shift",
        ),
        Primitive("gaussian", _gauss_np, _gauss_torch, _gauss_sym, 4, parity="even"),
        Primitive("softplus", _softplus_np, torch.nn.functional.softplus, _softplus_sym, 4),
        Primitive(
            "arcsin", np.arcsin, torch.asin, sympy.asin, 5,
            domain=(Interval(-1.0, 1.0, lo_closed=True, hi_closed=True),), parity="odd",
        ),
    ]
    return {p.name: p for p in prims}


PRIMITIVES: Mapping[str, Primitive] = MappingProxyType(_build())
"""Every built-in primitive by name (read-only)."""


def get_library(names: Iterable[str] | None = None) -> tuple[Primitive, ...]:
    """Look primitives up by name, in the order given.

    Parameters
    ----------
    names : iterable of str or None
        Primitive names (keys of :data:`PRIMITIVES`); ``None`` means all of them.
        Duplicates are dropped, keeping the first occurrence.

    Returns
    -------
    tuple of Primitive

    Raises
    ------
    ConfigError
        If a name is unknown (the message lists the valid names) or none is given.
    """
    if names is None:
        return tuple(PRIMITIVES.values())
    if isinstance(names, str):
        names = [names]
    out: list[Primitive] = []
    for name in names:
        if name not in PRIMITIVES:
            valid = ", ".join(repr(n) for n in PRIMITIVES)
            raise ConfigError(f"unknown primitive {name!r}; choose among {valid}.")
        prim = PRIMITIVES[name]
        if prim not in out:
            out.append(prim)
    if not out:
        raise ConfigError("the primitive library is empty; give at least one primitive name.")
    return tuple(out)
