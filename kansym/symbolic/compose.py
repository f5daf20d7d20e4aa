"""From a (pruned) KAN to a symbolic network and a sympy formula.

Every live edge of the KAN is replaced by a fitted primitive ``c * f(a x + b) + d``
(:func:`symbolify`), which gives a :class:`SymbolicKAN`. Its numeric forward and its
sympy formula come from ONE walk over the layers (:meth:`SymbolicKAN.walk`) with
either tensors or sympy expressions as node values, so the formula always equals
the symbolic model's forward (docs/algorithms.md §6, "Composition").

Source: Liu et al. 2024, "KAN: Kolmogorov–Arnold Networks", arXiv:2404.19756, §2.5.1
(symbolification of a pruned KAN).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np
import sympy
import torch

from kansym.config import MIN_EDGE_R2, R2_THRESHOLD
from kansym.deadline import Deadline, time_is_up
from kansym.errors import DataError
from kansym.nn.kan import KAN
from kansym.symbolic.refit import stable_lambdify
from kansym.symbolic.fit import EdgeFit, select_edge_fit, numeric_edge
from kansym.symbolic.library import Primitive, get_library
from kansym.io.transform import DataTransform

__all__ = ["SymbolicKAN", "symbolify", "input_symbols", "lambdify_formula", "formula_values", "predictions"]

log = logging.getLogger("kansym")

EdgeId = tuple[int, int, int]  # (layer, i_in, j_out)
QUICK_ROWS = 500  # samples a late edge is fitted on (a 4-input law: the primitives of 2000, in half the time)


def input_symbols(names: Sequence[str], *, positive: bool = False) -> list[sympy.Symbol]:
    """Sympy symbols named exactly like the CSV columns (explicit ``Symbol``, no parsing).

    ``positive=True`` lets sympy merge ``exp(p log a)`` into ``a**p`` in log space.
    """
    return [sympy.Symbol(n, positive=True) if positive else sympy.Symbol(n, real=True) for n in names]


@dataclass(frozen=True)
class SymbolicKAN:
    """A KAN whose edges are symbolic primitives.

    Attributes
    ----------
    width : tuple of int
        Nodes per layer (inputs first).
    edges : Mapping[(layer, i_in, j_out), EdgeFit]
        The live edges and their fits; a missing edge contributes 0.
    transform : DataTransform
        CSV units <-> model units.
    input_names, output_names : tuple of str
        CSV column names.
    """

    width: tuple[int, ...]
    edges: Mapping[EdgeId, EdgeFit]
    transform: DataTransform
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]

    def walk(self, inputs: list, edge_fn: Callable[[EdgeFit, object], object], zero: object) -> list:
        """Propagate node values through the layers (the single composition path).

        Parameters
        ----------
        inputs : list, length width[0]
            Model-unit values of the input nodes (tensors or sympy expressions).
        edge_fn : callable (EdgeFit, value) -> value
            Evaluates one edge on a node value.
        zero : object
            The additive zero of the value type.

        Returns
        -------
        list, length width[-1]
            Model-unit values of the output nodes.
        """
        nodes = list(inputs)
        for layer in range(len(self.width) - 1):
            out = []
            for j in range(self.width[layer + 1]):
                acc = zero
                for i in range(self.width[layer]):
                    fit = self.edges.get((layer, i, j))
                    if fit is not None:
                        acc = acc + edge_fn(fit, nodes[i])
                out.append(acc)
            nodes = out
        return nodes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Predictions in CSV units.

        Parameters
        ----------
        x : Tensor (N, d_in)
            CSV inputs (float64 recommended).

        Returns
        -------
        Tensor (N, d_out)
        """
        u = self.transform.inputs_torch(x)
        zero = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
        outs = self.walk([u[:, i] for i in range(u.shape[1])], lambda f, v: f.torch(v), zero)
        o = torch.stack([zero + v for v in outs], dim=1)  # (N, d_out)
        return self.transform.outputs_torch(o)

    __call__ = forward

    def model_unit_exprs(self, symbols: Sequence[sympy.Symbol]) -> list[sympy.Expr]:
        """Formulas of the outputs in model units, as functions of model-unit inputs ``symbols``."""
        return self.walk(list(symbols), lambda f, v: f.sympy(v), sympy.Integer(0))

    def expressions(self, symbols: Sequence[sympy.Symbol] | None = None) -> list[sympy.Expr]:
        """One sympy formula per output, in CSV units and CSV names.

        Parameters
        ----------
        symbols : sequence of sympy.Symbol, optional
            Defaults to :func:`input_symbols` of the input names.
        """
        if symbols is None:
            symbols = input_symbols(self.input_names, positive=self.transform.log_space)
        outs = self.walk(self.transform.input_exprs(list(symbols)), lambda f, v: f.sympy(v), sympy.Integer(0))
        return [self.transform.output_expr(o, k) for k, o in enumerate(outs)]

    def to_dict(self) -> dict:
        """Plain dict (edge fits stored by primitive name)."""
        return {
            "width": list(self.width),
            "edges": [{"id": list(k), **v.to_dict()} for k, v in sorted(self.edges.items())],
            "transform": self.transform.to_dict(),
            "input_names": list(self.input_names),
            "output_names": list(self.output_names),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "SymbolicKAN":
        edges = {}
        for e in data["edges"]:
            e = dict(e)
            key = tuple(int(v) for v in e.pop("id"))
            edges[key] = EdgeFit.from_dict(e)  # a NumericEdge for numeric records
        return cls(
            width=tuple(data["width"]),
            edges=edges,
            transform=DataTransform.from_dict(data["transform"]),
            input_names=tuple(data["input_names"]),
            output_names=tuple(data["output_names"]),
        )


def symbolify(
    model: KAN,
    x: torch.Tensor,
    transform: DataTransform,
    input_names: Sequence[str],
    output_names: Sequence[str],
    *,
    library: Sequence[Primitive] | Sequence[str] | None = None,
    r2_threshold: float = R2_THRESHOLD,
    constant_tol: float = 1e-3,
    min_r2: float = MIN_EDGE_R2,
    exhaustive: bool = True,
    deadline: Deadline | None = None,
) -> tuple[SymbolicKAN, dict[EdgeId, list[EdgeFit]]]:
    """Fit a primitive to every live edge of ``model`` on the activations of ``x``.

    Parameters
    ----------
    model : KAN
        Usually the pruned model.
    x : Tensor (N, d_in)
        Model-unit inputs (``transform.inputs`` of CSV data).
    transform : DataTransform
    input_names, output_names : sequence of str
    library : primitives or their names, optional
        Defaults to the whole library of :mod:`kansym.symbolic.library`.
    r2_threshold : float
        An edge takes the simplest primitive whose R² reaches this value.
    constant_tol : float
        An edge whose output spread (std) is below ``constant_tol`` times the spread of
        the node it feeds is fitted as a constant.
    min_r2 : float
        An edge whose best primitive reaches an R² below this is not forced into that
        primitive: it stays numeric (:class:`~kansym.symbolic.fit.NumericEdge`, an
        opaque ``phi_l_i_j`` in the formula) and is logged as a warning.
    exhaustive : bool
        Fit and refine every candidate primitive of every edge (``select_edge_fit(...,
        exhaustive=True)``), so that the Occam step (:mod:`kansym.symbolic.occam`) can
        weigh accurate alternatives. False fits only up to the complexity at which a
        primitive first clears ``r2_threshold`` (refining those with a grid R² of at
        least 0.5): the chosen fits are the same, the candidates are those primitives
        (the unrefined ones at grid precision). Use it when no Occam step follows.
    deadline : kansym.deadline.Deadline, optional
        The run's time limit, looked at before each edge. Once it has expired, the
        remaining edges are fitted quickly: on at most ``QUICK_ROWS`` evenly spaced samples
        and without ``exhaustive`` (about 0.07 s an edge instead of about a second on 10^5
        rows), and the cut is recorded (:meth:`~kansym.deadline.Deadline.cut`).

    Returns
    -------
    (SymbolicKAN, dict)
        The symbolic network and, per edge, all candidate fits sorted by complexity.
    """
    if library is None or all(isinstance(p, str) for p in library):
        library = get_library(library)
    constant_lib = get_library(["0"])
    hurried = 0  # edges fitted quickly, after the deadline
    edges: dict[EdgeId, EdgeFit] = {}
    candidates: dict[EdgeId, list[EdgeFit]] = {}
    for edge, xv, yv, spread in _live_edge_samples(model, x):
        fit, cands, late = _fit_edge(edge, xv, yv, spread, constant_lib, library, r2_threshold=r2_threshold,
                                     constant_tol=constant_tol, min_r2=min_r2, exhaustive=exhaustive,
                                     deadline=deadline)
        hurried += late
        candidates[edge] = cands
        edges[edge] = fit
        _log_edge_fit(edge, fit, yv, spread, input_names, r2_threshold, late)
    if hurried:
        deadline.cut(f"per-edge fits: {hurried} of {len(edges)} edges fitted quickly (on at most {QUICK_ROWS} samples)")
    sym = SymbolicKAN(
        width=tuple(model.width),
        edges=edges,
        transform=transform,
        input_names=tuple(input_names),
        output_names=tuple(output_names),
    )
    return sym, candidates


def _live_edge_samples(model: KAN, x: torch.Tensor) -> Iterator[tuple[EdgeId, np.ndarray, np.ndarray, float]]:
    """Each live edge of ``model`` on the activations of ``x``: its id, input and output samples, and
    the spread (std) of the node it feeds."""
    with torch.no_grad():
        trace = model.trace(x.to(model.layers[0].coef.dtype))
    for layer, lt in enumerate(trace.layers):
        mask = model.layers[layer].mask
        node_std = lt.outputs.std(dim=0).double().cpu().numpy()  # (out,)
        inputs = lt.inputs.double().cpu().numpy()  # (N, in)
        values = lt.edges.double().cpu().numpy()  # (N, out, in)
        for j in range(values.shape[1]):
            for i in range(values.shape[2]):
                if mask[j, i] == 0:
                    continue
                yield (layer, i, j), inputs[:, i], values[:, j, i], float(node_std[j])


def _fit_edge(edge: EdgeId, xv: np.ndarray, yv: np.ndarray, spread: float, constant_lib: Sequence[Primitive],
              library: Sequence[Primitive], *, r2_threshold: float, constant_tol: float, min_r2: float,
              exhaustive: bool, deadline: Deadline | None) -> tuple[EdgeFit, list[EdgeFit], bool]:
    """Fit one edge (a constant when flat, quickly once the deadline has passed, numeric when no
    primitive reaches ``min_r2``): its fit, its candidates and whether it was fitted quickly."""
    small = yv.std() <= constant_tol * max(spread, 1e-12)
    late = not small and time_is_up(deadline)
    lib = constant_lib if small else library
    rows = np.unique(np.linspace(0, len(xv) - 1, QUICK_ROWS).astype(int)) if late else slice(None)
    # exhaustive: every candidate refined, so the Occam step can weigh accurate alternatives
    fit, cands = select_edge_fit(xv[rows], yv[rows], lib, r2_threshold=r2_threshold,
                                 exhaustive=exhaustive and not late)
    if fit.primitive != "0" and fit.r2 < min_r2:
        log.warning("edge %d:%d->%d fits no primitive (best: %s, R² = %.4f < %g); kept numeric",
                    *edge, fit.primitive, fit.r2, min_r2)
        fit = numeric_edge(edge, xv, yv, r2=fit.r2, best=fit.primitive)
    return fit, cands, late


def _log_edge_fit(edge: EdgeId, fit: EdgeFit, yv: np.ndarray, spread: float, input_names: Sequence[str],
                  r2_threshold: float, late: bool) -> None:
    """Log one edge's fit at INFO level (a constant edge with its spread relative to its node's)."""
    layer, i, j = edge
    if fit.primitive == "0":  # its R² (0 for a constant fit) says nothing: it is flat
        source = f" (input {input_names[i]})" if layer == 0 else ""
        log.info("edge %d:%d->%d%s: constant, flat on the data (spread %.2g of its node's)", layer, i, j,
                 source, yv.std() / max(spread, 1e-300))
        return
    flag = ((f" (below {r2_threshold}: best trade-off)" if fit.r2 < r2_threshold else "")
            + (f" (time limit: fitted on at most {QUICK_ROWS} samples)" if late else ""))
    log.info("edge %d:%d->%d: %s, R² = %.6f%s", layer, i, j, fit.primitive, fit.r2, flag)


@functools.lru_cache(maxsize=128)
def _lambdified(expr: sympy.Expr, symbols: tuple) -> Callable:
    return stable_lambdify(symbols, expr)


def lambdify_formula(expr: sympy.Expr, symbols: Sequence[sympy.Symbol]) -> Callable[[np.ndarray], np.ndarray]:
    """A numpy function ``X (N, d) -> (N,)`` of a formula (columns ordered like ``symbols``).

    The generated function is cached per ``(expr, symbols)``: verification, the Pareto
    front and the direct-search choice evaluate the same few formulas several times
    (the hello world lambdified its KAN formula six times, 1-4 ms each). Its code does
    not depend on what the process did before (:func:`kansym.symbolic.refit.stable_lambdify`).
    """
    try:
        f = _lambdified(expr, tuple(symbols))
    except TypeError:  # an unhashable argument: no cache
        f = stable_lambdify(list(symbols), expr)

    def call(x: np.ndarray) -> np.ndarray:
        out = f(*[x[:, i] for i in range(x.shape[1])])
        return np.broadcast_to(np.asarray(out, dtype=float), (x.shape[0],)).copy()

    return call


def formula_values(expr: sympy.Expr, symbols: Sequence[sympy.Symbol], x: np.ndarray, what: str = "the formula") -> np.ndarray:
    """The formula on rows ``x (N, d)`` (columns ordered like ``symbols``) -> ``(N,)``, numpy's
    warnings silenced (a value outside the formula's domain is NaN or inf, for the caller to report).

    Raises
    ------
    DataError
        ``expr`` cannot be evaluated at all: an opaque ``phi_l_i_j`` without its numeric curve,
        a number numpy cannot hold (an integer of hundreds of digits), code too deep to compile.
    """
    try:
        with np.errstate(all="ignore"):
            return lambdify_formula(expr, symbols)(np.asarray(x, dtype=np.float64))
    except (TypeError, ValueError, ArithmeticError, NameError, RecursionError, MemoryError, SyntaxError) as exc:
        detail = " ".join(str(exc).split())[:100]
        raise DataError(f"{what} cannot be evaluated with numpy ({type(exc).__name__}: {detail}); "
                        "pass a formula that kansym wrote") from None


def predictions(expr: sympy.Expr, symbols: Sequence[sympy.Symbol], x: np.ndarray) -> np.ndarray:
    """:func:`formula_values` for ranking and testing candidates: never raises.

    Returns
    -------
    numpy.ndarray, shape (N,)
        float64; NaN on every row where ``expr`` cannot be evaluated at all (the error measures,
        :func:`kansym.symbolic.verify.nrmse` and :func:`~kansym.symbolic.verify.r2_score`, then
        score it as the worst), NaN or inf where a value leaves the formula's domain.
    """
    try:
        return formula_values(expr, symbols, x)
    except DataError:
        return np.full(np.shape(x)[0], np.nan)
