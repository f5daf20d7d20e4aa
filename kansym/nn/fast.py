"""Fast B-spline evaluation for KAN layers: closed form on uniform grids, custom autograd.

The hot path of :class:`kansym.nn.layer.KANLayer` is one matmul ``out = F(x) W^T`` of
features ``F (N, 1 + K, in)``: row 0 is ``silu(x)``, rows ``1..K`` the ``K = G + k``
B-splines of every input feature (laid out ``(sample, basis, feature)`` so that every
elementwise step broadcasts over a contiguous feature axis), and ``W (out, (1 + K) in)``
holds ``w_b`` and ``w_s c``: the matmul of the dense-equivalent
``Linear(in (G + k + 1), out)``, and no ``(N, out, in)`` tensor.

Basis evaluation (values equal :func:`kansym.nn.spline.bspline_basis` to rounding):

- uniform knots ``t_i = t_0 + i h`` (every grid :func:`kansym.nn.spline.make_grid` makes):
  closed form. With ``s = (x - t_0) / h``, ``B_i(x) = beta_k(s - i)`` where ``beta_k`` is
  the cardinal B-spline of degree ``k`` on ``[0, k + 1]``; symmetric about ``c = (k+1)/2``
  it is ``k! beta_k = sum_{0 <= j < c} (-1)^j C(k + 1, j) (c - j - |s - i - c|)_+^k``
  (Schoenberg 1946; Unser 1999, "Splines: a perfect fit for signal and image processing",
  IEEE Signal Processing Magazine 16(6), eq. 7, in its symmetric form). No knot
  comparisons, exact zeros outside the support; ``k!`` is folded into the weights (for
  ``k = 3`` the features are ``-6 B``, from two clamped terms, see :func:`_cubic_into`).
- other knots (after ``update_grid``): piecewise polynomials. Between two knots every
  B-spline is a polynomial of degree ``k``; :func:`make_plan` runs the Cox–de Boor
  recursion (de Boor 1978) once per grid on the polynomial coefficients (in the local
  variable ``u = x - t_j`` of each interval ``j``, float64), so a forward only locates
  each input's interval (``searchsorted``), gathers that interval's ``(k + 1, K)``
  coefficients and runs Horner's rule (de Boor 1978, ch. I): about ten tensor ops for
  any ``k`` instead of the recursion's ``O(k)`` passes over ``(N, G + 2k, in)``. Inputs
  outside the extended grid get zero polynomials, as in the recursion. The recursion on
  samples (``force_reference``) stays as the reference.

Backward (memory-lean, one custom autograd node per layer): saved are ``F`` (which the
weight gradient needs anyway), the ``(out, in)``-sized weights and, only when ``x``
requires grad, ``dF/dx`` (``silu'`` and ``B'``), computed in the forward from the same
intermediates: ``B'`` in closed form on uniform grids, from the differentiated
polynomials on other grids, and ``B'_{i,k} = k (B_{i,k-1} / (t_{i+k} - t_i) -
B_{i+1,k-1} / (t_{i+k+1} - t_{i+1}))`` on the reference path (de Boor 1978).
Then ``dL/dx = sum_r (dL/dF W)_r dF_r/dx``. Elementwise work runs in row chunks on
reused buffers, so only ``F`` and ``dF/dx`` are full-size: no autograd graph of the
basis and no ``(N, out, in)`` tensor. :func:`compile_kernels` fuses the cubic
uniform-grid kernel with ``torch.compile`` (optional).

Device placement: every tensor is created on the input's device, the plan's knots
follow the layer's ``grid`` buffer, and inputs in float16/bfloat16 (autocast) are
evaluated in float32; the matmul runs in the autocast dtype.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = [
    "SplinePlan", "FeatureCache", "make_plan", "features", "kan_linear", "kan_linear_l1", "spline_basis",
    "compile_kernels",
]

# elements of a (rows, K, in) chunk: small enough for the cache, large enough to amortise op overhead
_CHUNK = 1 << 17


@dataclass(frozen=True)
class SplinePlan:
    """How to evaluate the basis of one layer's grid (built by :func:`make_plan`).

    Attributes
    ----------
    order : int
        Spline order ``k``.
    n_basis : int
        ``K = G + k``.
    uniform : bool
        Closed form on ``t_0 + i h`` when True; otherwise per-interval polynomials (``piecewise``),
        or Cox–de Boor on the samples with ``force_reference``.
    t0, inv_h : Tensor (in,) or None
        First knot and inverse knot step per feature (uniform plans).
    knots : Tensor (G + 2k + 1, in)
        The knots, transposed (every plan).
    scale : float
        The stored features are ``B / scale`` (``scale`` is folded into the weights).
    dfac : Tensor (in,) or None
        The stored derivative times ``dfac`` is ``d (B / scale) / dx`` (None: 1).
    centers : Tensor (K, 1) or None
        ``i + 2``, the centres of the cubic B-splines in knot steps (cubic uniform plans).
    rows : Tensor (in, M) or None
        The knots per feature, contiguous, for ``searchsorted`` (piecewise plans;
        ``M = G + 2k + 1``).
    origins : Tensor (in * (M + 1),) or None
        ``t_{s-1}``, the origin of the local variable in slot ``s`` (piecewise plans).
    table : Tensor (in * (M + 1), k + 1, 2K) or None
        Slot ``s = #{knots <= x}`` of feature ``f`` is row ``f (M + 1) + s``: entry
        ``[e, i]`` is the coefficient of ``u^e`` of basis ``i`` on ``[t_{s-1}, t_s)``,
        ``[e, K + i]`` that of its derivative (0 for ``e = k``); slots ``0`` and ``M``
        (outside the extended grid) are zero.
    offsets : Tensor (in, 1) or None
        ``f (M + 1)`` (piecewise plans).
    """

    order: int
    n_basis: int
    uniform: bool
    t0: torch.Tensor | None
    inv_h: torch.Tensor | None
    knots: torch.Tensor
    scale: float
    dfac: torch.Tensor | None
    centers: torch.Tensor | None = None
    rows: torch.Tensor | None = None
    origins: torch.Tensor | None = None
    table: torch.Tensor | None = None
    offsets: torch.Tensor | None = None

    @property
    def piecewise(self) -> bool:
        """True when the basis is evaluated from the per-interval polynomials."""
        return self.table is not None


def make_plan(grid: torch.Tensor, order: int, *, force_reference: bool = False) -> SplinePlan:
    """Inspect a knot tensor and choose the evaluation path (one host sync).

    Parameters
    ----------
    grid : Tensor (in, G + 2k + 1)
        Sorted knots per input feature.
    order : int
        Spline order ``k``.
    force_reference : bool
        Use the Cox–de Boor recursion on the samples, whatever the grid (for tests).

    Returns
    -------
    SplinePlan
        Uniform when every row is an arithmetic progression to within 64 float32 ulps of
        its magnitude (what :func:`kansym.nn.spline.make_grid` produces, also after a cast
        to float64); the closed form then uses the exact progression ``t_0 + i h``, whose
        knots differ from the stored ones by that rounding at most. Otherwise piecewise
        polynomials of the stored knots (see :func:`_piecewise_table`).
    """
    grid = grid.detach()
    n_knots = grid.shape[1]
    n_basis = n_knots - 1 - order
    knots = grid.T.contiguous()  # (G + 2k + 1, in)
    t0 = grid[:, 0].clone()
    h = (grid[:, -1] - t0) / (n_knots - 1)  # (in,)
    # float32 precision for every dtype: a grid built in float32 and cast to float64 is still uniform
    tol = 64 * torch.finfo(torch.float32).eps * grid.abs().amax(dim=1).clamp_min(1.0)
    uniform = (not force_reference) and bool(
        ((grid.diff(dim=1) - h[:, None]).abs().amax(dim=1) <= tol).all() and (h > 0).all()
    )
    if force_reference:
        return SplinePlan(order, n_basis, False, None, None, knots, 1.0, None)
    if not uniform:
        rows = grid.contiguous()  # (in, M)
        origins, table = _piecewise_table(rows, order)
        offsets = (torch.arange(rows.shape[0], device=grid.device) * (n_knots + 1)).view(-1, 1)  # (in, 1)
        return SplinePlan(order, n_basis, False, None, None, knots, 1.0, None, None, rows, origins, table, offsets)
    if order == 3:  # stored as -6 B (see _cubic_into)
        centers = (torch.arange(n_basis, dtype=grid.dtype, device=grid.device) + 2.0).view(-1, 1)
        return SplinePlan(order, n_basis, True, t0, 1.0 / h, knots, -1.0 / 6.0, 3.0 / h, centers)
    return SplinePlan(order, n_basis, True, t0, 1.0 / h, knots, 1.0 / math.factorial(order), 1.0 / h)


def _centers(plan: SplinePlan, shift: float, like: torch.Tensor) -> torch.Tensor:
    return (torch.arange(plan.n_basis, dtype=like.dtype, device=like.device) + shift).view(-1, 1)  # (K, 1)


def _knot_units(x: torch.Tensor, plan: SplinePlan) -> torch.Tensor:
    return (x - plan.t0.to(x.dtype)).mul_(plan.inv_h.to(x.dtype))  # (n, in): (x - t_0) / h


def _cubic_into(out: torch.Tensor, deriv: torch.Tensor | None, x: torch.Tensor, plan: SplinePlan, tmp) -> None:
    """Cubic B-splines on a uniform grid: ``out = -6 B``, ``deriv = d out / d s / 3``.

    With ``e = clamp(s - i - 2, -2, 2)``, ``a = |e| - 2`` and ``b = min(|e| - 1, 0)``:
    ``6 B = -a^3 + 4 b^3`` and ``d(6 B)/ds = -3 sign(e) (a^2 - 4 b^2)``.
    """
    s = _knot_units(x, plan)
    e = torch.sub(s.unsqueeze(1), plan.centers.to(x.dtype), out=tmp[0]).clamp_(-2.0, 2.0)  # (n, K, in)
    a = torch.abs(e, out=tmp[1]).sub_(2.0)
    b = torch.add(a, 1.0, out=tmp[2]).clamp_max_(0.0)
    if deriv is not None:  # a^2 - 4 b^2 >= 0: copy the sign of e onto it
        sq = torch.mul(a, a, out=tmp[3]).addcmul_(b, b, value=-4.0).copysign_(e)
        deriv.copy_(sq)  # out= into a strided view would go through a hidden temporary
    out.copy_(a.pow_(3).sub_(b.pow_(3), alpha=4.0))


def _cubic_pure(
    x: torch.Tensor, t0: torch.Tensor, inv_h: torch.Tensor, dfac: torch.Tensor, centers: torch.Tensor,
    with_base: bool, with_deriv: bool,
):
    """:func:`features` for a cubic uniform plan, all rows at once and without in-place ops (for ``torch.compile``)."""
    s = (x - t0) * inv_h  # (N, in)
    e = (s.unsqueeze(1) - centers).clamp(-2.0, 2.0)  # (N, K, in)
    a = e.abs() - 2.0
    b = (a + 1.0).clamp_max(0.0)
    spline = a * a * a - 4.0 * b * b * b
    feats = torch.cat([F.silu(x).unsqueeze(1), spline], dim=1) if with_base else spline
    if not with_deriv:
        return feats, None
    deriv = torch.copysign(a * a - 4.0 * b * b, e) * dfac
    if with_base:
        sig = torch.sigmoid(x)
        deriv = torch.cat([(sig * (1 + x * (1 - sig))).unsqueeze(1), deriv], dim=1)
    return feats, deriv


_compiled_cubic = None  # the compiled _cubic_pure while compile_kernels() is on
_compiled_cache = None


def compile_kernels(enabled: bool = True) -> None:
    """Fuse the cubic uniform-grid basis (and its derivative) with ``torch.compile``.

    Off by default: the first call of each shape family compiles (tens of seconds on CPU,
    needs a C++ compiler there), after which the whole elementwise chain is one fused
    loop (about 10x faster than eager on CPU). Affects every :class:`KANLayer` of order 3
    on a uniform grid; other orders and non-uniform grids stay eager.

    Parameters
    ----------
    enabled : bool
        False goes back to the eager kernels.
    """
    global _compiled_cubic, _compiled_cache
    if enabled and _compiled_cache is None:
        _compiled_cache = torch.compile(_cubic_pure, dynamic=True)
    _compiled_cubic = _compiled_cache if enabled else None


def _truncated_terms(order: int) -> list[float]:
    """Coefficients ``(-1)^j C(k + 1, j)`` for ``0 <= j < (k + 1) / 2``."""
    return [(-1) ** j * math.comb(order + 1, j) for j in range(math.ceil((order + 1) / 2))]


def _uniform_into(out: torch.Tensor, deriv: torch.Tensor | None, x: torch.Tensor, plan: SplinePlan) -> None:
    """Any order on a uniform grid: ``out = k! B``, ``deriv = d out / d s``."""
    k = plan.order
    s = _knot_units(x, plan)
    if k == 0:
        d = torch.sub(s.unsqueeze(1), _centers(plan, 0.0, x))  # s - i
        out.copy_((d >= 0) & (d < 1))
        if deriv is not None:
            deriv.zero_()
        return
    c = (k + 1) / 2
    d = torch.sub(s.unsqueeze(1), _centers(plan, c, x))  # (n, K, in): s - i - c
    sign = d.sign() if deriv is not None else None
    coefs = _truncated_terms(k)
    terms = [d.abs_().neg_().add_(c).clamp_min_(0)]  # (c - j - |s - i - c|)_+
    for _ in coefs[1:]:
        terms.append((terms[-1] - 1).clamp_min_(0))
    if deriv is not None:
        if k == 1:
            deriv.copy_(terms[0] > 0)
            for coef, term in zip(coefs[1:], terms[1:]):
                deriv.add_((term > 0).to(x.dtype), alpha=coef)
        else:
            deriv.copy_(terms[0].pow(k - 1))
            for coef, term in zip(coefs[1:], terms[1:]):
                deriv.add_(term.pow(k - 1), alpha=coef)
        deriv.mul_(sign).mul_(-float(k))
    out.copy_(terms[0].pow_(k))
    for coef, term in zip(coefs[1:], terms[1:]):
        out.add_(term.pow_(k), alpha=coef)


def _cox_de_boor(x: torch.Tensor, knots: torch.Tensor, order: int, *, keep_lower: bool = False):
    """Cox–de Boor in ``(n, basis, in)`` layout: ``x (n, in)``, ``knots (M, in)`` -> ``(n, M - 1 - order, in)``.

    With ``keep_lower`` also returns the order ``k - 1`` basis ``(n, M - order, in)`` (None for ``k = 0``).
    """
    xs = x.unsqueeze(1)  # (n, 1, in)
    g = knots.unsqueeze(0)  # (1, M, in)
    step = (xs >= g).to(x.dtype)  # (n, M, in): 1 where x >= t_i (knots sorted)
    basis = step[:, :-1] - step[:, 1:]  # (n, M - 1, in): 1 on [t_i, t_{i+1})
    lower = None
    for p in range(1, order + 1):
        if keep_lower and p == order:
            lower = basis
        left = (xs - g[:, : -(p + 1)]) / (g[:, p:-1] - g[:, : -(p + 1)]) * basis[:, :-1]
        right = (g[:, p + 1 :] - xs) / (g[:, p + 1 :] - g[:, 1:-p]) * basis[:, 1:]
        basis = left + right  # (n, M - 1 - p, in)
    return (basis, lower) if keep_lower else basis


def _piecewise_table(rows: torch.Tensor, order: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Polynomial pieces of every B-spline of order ``order`` on the knots ``rows (in, M)``.

    Runs the Cox–de Boor recursion (de Boor 1978) on coefficient vectors in float64: on
    interval ``j`` with ``u = x - t_j``, ``x - t_i = u + (t_j - t_i)`` and ``t_{i+p+1} - x
    = (t_{i+p+1} - t_j) - u``, so each level multiplies the pieces of order ``p - 1`` by a
    linear polynomial. A zero knot span contributes 0 (the convention ``0 / 0 = 0``).

    Returns
    -------
    origins : Tensor (in * (M + 1),)
    table : Tensor (in * (M + 1), k + 1, 2K)
        See :class:`SplinePlan`; in the dtype of ``rows``.
    """
    g = rows.to(torch.float64)
    n_f, m = g.shape
    n_int = m - 1  # intervals [t_j, t_{j+1})
    t_j = g[:, :n_int, None]  # (in, J, 1)
    # q[f, j, i, e]: coefficient of u^e of B_{i,p} on interval j
    q = torch.eye(n_int, dtype=g.dtype, device=g.device).expand(n_f, n_int, n_int).unsqueeze(-1)  # (in, J, J, 1)
    for p in range(1, order + 1):
        nb = m - 1 - p
        t_i, t_ip, t_i1, t_ip1 = g[:, :nb], g[:, p : p + nb], g[:, 1 : 1 + nb], g[:, p + 1 : p + 1 + nb]  # (in, nb)
        dl, dr = t_ip - t_i, t_ip1 - t_i1
        inv_l = torch.where(dl > 0, 1.0 / torch.where(dl > 0, dl, 1.0), 0.0)[:, None, :, None]  # (in, 1, nb, 1)
        inv_r = torch.where(dr > 0, 1.0 / torch.where(dr > 0, dr, 1.0), 0.0)[:, None, :, None]
        low, high = q[:, :, :nb] * inv_l, q[:, :, 1 : nb + 1] * inv_r  # (in, J, nb, p)
        shift_l = (t_j - t_i[:, None, :]).unsqueeze(-1)  # (in, J, nb, 1): t_j - t_i
        shift_r = (t_ip1[:, None, :] - t_j).unsqueeze(-1)  # t_{i+p+1} - t_j
        new = torch.zeros(n_f, n_int, nb, p + 1, dtype=g.dtype, device=g.device)
        new[..., :p] += low * shift_l + high * shift_r
        new[..., 1:] += low - high
        q = new
    # q (in, J, K, k + 1) -> slots (in, M + 1, k + 1, 2K): [pieces | derivative pieces], zero outside
    n_basis = q.shape[2]
    powers = torch.arange(1, order + 1, dtype=g.dtype, device=g.device)  # (k,)
    table = torch.zeros(n_f, m + 1, order + 1, 2 * n_basis, dtype=g.dtype, device=g.device)
    table[:, 1:m, :, :n_basis] = q.transpose(-1, -2)
    table[:, 1:m, :order, n_basis:] = (q[..., 1:] * powers).transpose(-1, -2)  # d/du u^e = e u^(e-1)
    origins = torch.cat([g[:, :1], g], dim=1)  # (in, M + 1): slot s -> t_{s-1}
    return origins.reshape(-1).to(rows.dtype), table.reshape(n_f * (m + 1), order + 1, -1).to(rows.dtype)


def _piecewise_into(out: torch.Tensor, deriv: torch.Tensor | None, x: torch.Tensor, plan: SplinePlan) -> None:
    """Any knots, from the plan's polynomial pieces: ``out = B``, ``deriv = dB/dx`` (Horner's rule)."""
    k, n_basis = plan.order, plan.n_basis
    xt = x.T.contiguous()  # (in, n)
    slot = torch.searchsorted(plan.rows.to(x.dtype), xt, right=True).add_(plan.offsets)  # (in, n): row of the table
    u = torch.sub(xt, plan.origins.to(x.dtype)[slot]).unsqueeze(-1)  # (in, n, 1): x - t_{s-1} (xt may share x's memory)
    width = 2 * n_basis if deriv is not None else n_basis  # values and derivatives in one Horner pass
    c = plan.table.to(x.dtype).index_select(0, slot.view(-1))[..., :width]  # (in n, k + 1, width)
    c = c.view(xt.shape[0], xt.shape[1], k + 1, width)  # (in, n, k + 1, width)
    val = c[:, :, k]
    for e in range(k - 1, -1, -1):
        val = torch.addcmul(c[:, :, e], val, u)  # (in, n, width)
    out.copy_(val[..., :n_basis].permute(1, 2, 0))
    if deriv is not None:
        deriv.copy_(val[..., n_basis:].permute(1, 2, 0))


def _reference_into(out: torch.Tensor, deriv: torch.Tensor | None, x: torch.Tensor, plan: SplinePlan) -> None:
    """Any knots: ``out = B``; ``deriv = dB/dx`` from the order ``k - 1`` basis."""
    k, g = plan.order, plan.knots.to(x.dtype)
    if deriv is None:
        out.copy_(_cox_de_boor(x, g, k))
        return
    basis, lower = _cox_de_boor(x, g, k, keep_lower=True)  # (n, K, in), (n, K + 1, in)
    out.copy_(basis)
    if k == 0:
        deriv.zero_()
        return
    left = k / (g[k:-1] - g[: -(k + 1)])  # (K, in)
    right = k / (g[k + 1 :] - g[1:-k])  # (K, in)
    deriv.copy_(lower[:, :-1] * left - lower[:, 1:] * right)


def features(
    x: torch.Tensor, plan: SplinePlan, *, with_base: bool, with_deriv: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Features of a KAN layer and, optionally, their derivatives.

    Parameters
    ----------
    x : Tensor (N, in)
    plan : SplinePlan
    with_base : bool
        Put ``silu(x)`` in row 0.
    with_deriv : bool
        Also return ``D = d F / d x`` (row by row: each feature depends on one input).

    Returns
    -------
    F : Tensor (N, K + with_base, in)
        ``F[:, with_base + i, j] = B_i(x_j) / plan.scale``; ``F[:, 0] = silu(x)`` with a base.
    D : Tensor (N, K + with_base, in) or None
        ``d F[n, r, j] / d x[n, j]``.
    """
    n, width = x.shape
    k_basis, off = plan.n_basis, int(with_base)
    dfac = plan.dfac.to(x.dtype) if plan.dfac is not None else None
    if _compiled_cubic is not None and plan.uniform and plan.order == 3:
        t0, inv_h = plan.t0.to(x.dtype), plan.inv_h.to(x.dtype)
        return _compiled_cubic(x, t0, inv_h, dfac, plan.centers.to(x.dtype), with_base, with_deriv)
    feats = torch.empty(n, k_basis + off, width, dtype=x.dtype, device=x.device)
    deriv = torch.empty(n, k_basis + off, width, dtype=x.dtype, device=x.device) if with_deriv else None
    rows = max(1, _CHUNK // (k_basis * width))
    cubic = plan.uniform and plan.order == 3
    tmp = [torch.empty(min(rows, n), k_basis, width, dtype=x.dtype, device=x.device) for _ in range(4)] if cubic else None
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        xs = x[start:stop]
        if with_base:
            sig = torch.sigmoid(xs)
            torch.mul(xs, sig, out=feats[start:stop, 0])  # silu
            if deriv is not None:  # silu' = sig (1 + x (1 - sig))
                torch.mul(torch.rsub(sig, 1.0).mul_(xs).add_(1.0), sig, out=deriv[start:stop, 0])
        out = feats[start:stop, off:]
        d = deriv[start:stop, off:] if deriv is not None else None
        if cubic:
            _cubic_into(out, d, xs, plan, [t[: stop - start] for t in tmp])
        elif plan.uniform:
            _uniform_into(out, d, xs, plan)
        elif plan.piecewise:
            _piecewise_into(out, d, xs, plan)
        else:
            _reference_into(out, d, xs, plan)
        if d is not None and dfac is not None:
            d.mul_(dfac)
    return feats, deriv


class FeatureCache:
    """The features of a layer's recent inputs, reused while an input and the grid stay the same.

    A training loop feeds the first layer the same data tensor in every closure; its
    features ``F (N, K + 1, in)`` depend only on that tensor and the grid, so they are
    computed once per grid. A hit needs the very same tensor object (held by weak
    reference, so a freed input cannot alias a new one), unchanged since
    (``Tensor._version``), the same plan object (replaced on every grid change) and the
    same options. Keeps the ``size`` most recent inputs (default 2: the training rows
    and the validation rows of :func:`kansym.train.fit.fit`, which sets one on the first
    layer during a fit); memory: their ``F`` (and ``dF/dx`` where asked for).

    Parameters
    ----------
    size : int
        Entries kept, at least 1.
    """

    def __init__(self, size: int = 2) -> None:
        self.size = max(1, int(size))
        self._entries: list[tuple] = []  # (weakref to x, key, plan, (F, dF/dx)), most recent last
        self.hits = 0

    def __deepcopy__(self, memo) -> "FeatureCache":
        return FeatureCache(self.size)  # a copied layer starts with an empty cache

    def __getstate__(self) -> dict:
        return {"size": self.size}

    def __setstate__(self, state) -> None:
        self.__init__(state.get("size", 2))

    def features(self, x: torch.Tensor, xc: torch.Tensor, plan: SplinePlan, *, with_base: bool, with_deriv: bool):
        """:func:`features` of ``xc`` (``x`` in the compute dtype), from the cache when ``x`` was seen recently."""
        key = (x._version, with_base, x.dtype)
        for i, (ref, k, p, value) in enumerate(self._entries):
            if ref() is x and k == key and p is plan and (value[1] is not None or not with_deriv):
                self.hits += 1
                self._entries.append(self._entries.pop(i))
                return value
        value = features(xc, plan, with_base=with_base, with_deriv=with_deriv)
        self._entries = [e for e in self._entries if e[0]() is not None and e[0]() is not x][-(self.size - 1) :]
        if self.size == 1:
            self._entries = []
        self._entries.append((weakref.ref(x), key, plan, value))
        return value

    def clear(self) -> None:
        """Drop every entry."""
        self._entries = []


def _features(x, xc, plan, cache, with_base, with_deriv):
    if cache is None:
        return features(xc, plan, with_base=with_base, with_deriv=with_deriv)
    return cache.features(x, xc, plan, with_base=with_base, with_deriv=with_deriv)


def _compute_dtype(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


class _Basis(torch.autograd.Function):
    """``x (N, in) -> B(x) / plan.scale (N, K, in)`` with an analytic backward."""

    @staticmethod
    def forward(ctx, x, plan):
        xc = _compute_dtype(x.detach())
        feats, deriv = features(xc, plan, with_base=False, with_deriv=ctx.needs_input_grad[0])
        ctx.save_for_backward(deriv)
        return feats

    @staticmethod
    def backward(ctx, grad):  # grad: (N, K, in)
        (deriv,) = ctx.saved_tensors
        return (grad.to(deriv.dtype) * deriv).sum(dim=1), None


class _KANLinear(torch.autograd.Function):
    """``F(x) W^T`` with ``W`` assembled from the layer's parameters; saves ``F``, ``W`` and (if needed) ``dF/dx``.

    The weight assembly (``w_b mask``, ``c w_s mask scale``) and its backward are done
    here by hand, so one autograd node covers the whole layer.
    """

    @staticmethod
    def forward(ctx, x, coef, scale_base, scale_sp, mask, plan, with_base, cache):
        # x (N, in); coef (out, in, K); scale_base, scale_sp, mask (out, in)
        xc = _compute_dtype(x.detach())
        weight, live = _weight(coef, scale_base, scale_sp, mask, plan, with_base)
        weight = weight.view(coef.shape[0], -1)  # (out, (K + with_base) in)
        feats, deriv = _features(x, xc, plan, cache, with_base, ctx.needs_input_grad[0])
        flat = feats.view(xc.shape[0], -1)  # (N, (K + with_base) in)
        out = flat @ weight.to(flat.dtype).T  # (N, out); autocast may run it in bf16/fp16
        ctx.with_base, ctx.x_dtype, ctx.scale = with_base, x.dtype, plan.scale
        ctx.save_for_backward(flat, weight, deriv, coef, scale_sp, mask, live)
        return out

    @staticmethod
    def backward(ctx, grad):  # grad: (N, out)
        flat, weight, deriv, coef, scale_sp, mask, live = ctx.saved_tensors
        grad = grad.to(flat.dtype)
        n_out, width, _ = coef.shape
        g_x = g_coef = g_base = g_sp = None
        if ctx.needs_input_grad[0]:
            g_feats = (grad @ weight.to(grad.dtype)).view(grad.shape[0], -1, width)  # (N, K + with_base, in)
            g_x = g_feats.mul_(deriv).sum(dim=1).to(ctx.x_dtype)  # (N, in)
        if any(ctx.needs_input_grad[1:4]):
            g_w = (grad.T @ flat).view(n_out, -1, width).to(coef.dtype)  # (out, K + with_base, in)
            g_coef, g_base, g_sp = _param_grads(ctx, g_w, coef, scale_sp, mask, live, ctx.needs_input_grad[1:4])
        return g_x, g_coef, g_base, g_sp, None, None, None, None


def _weight(coef, scale_base, scale_sp, mask, plan, with_base):
    """``W (out, K + with_base, in)``: ``w_b mask`` in row 0 and ``c w_s mask scale`` (and ``live = w_s mask scale``)."""
    n_out, width, _ = coef.shape
    off = int(with_base)
    live = (scale_sp * mask).mul_(plan.scale)  # (out, in)
    weight = torch.empty(n_out, plan.n_basis + off, width, dtype=coef.dtype, device=coef.device)
    if with_base:
        torch.mul(scale_base, mask, out=weight[:, 0])
    torch.mul(coef.transpose(1, 2), live.unsqueeze(1), out=weight[:, off:])  # (out, K, in)
    return weight, live


def _param_grads(ctx, g_w, coef, scale_sp, mask, live, needs):
    """Gradients of ``coef``, ``scale_base``, ``scale_sp`` from that of ``W`` (out, K + with_base, in)."""
    off = int(ctx.with_base)
    g_coef = g_base = g_sp = None
    g_spline = g_w[:, off:].transpose(1, 2)  # (out, in, K)
    if needs[0]:
        g_coef = g_spline * live.unsqueeze(-1)
    if needs[2]:
        g_sp = (g_spline * coef).sum(dim=-1) * mask * ctx.scale
    if ctx.with_base and needs[1]:
        g_base = g_w[:, 0] * mask
    return g_coef, g_base, g_sp


class _KANLinearL1(torch.autograd.Function):
    """Node outputs and ``mean_s |phi_ji(x_s)|`` of every edge, one autograd node for both.

    The edge values ``E (in, N, out)`` come from one batched matmul of the features with
    the weights and are saved (the backward needs their signs); nodes are ``E`` summed
    over ``in``. Meant for models whose ``(N, out, in)`` edges fit in memory (training
    small KANs with the sample-based penalty).
    """

    @staticmethod
    def forward(ctx, x, coef, scale_base, scale_sp, mask, plan, with_base, cache):
        xc = _compute_dtype(x.detach())
        weight, live = _weight(coef, scale_base, scale_sp, mask, plan, with_base)  # (out, R, in)
        feats, deriv = _features(x, xc, plan, cache, with_base, ctx.needs_input_grad[0])  # (N, R, in)
        w_p = weight.to(feats.dtype).permute(2, 1, 0)  # (in, R, out)
        edges = torch.bmm(feats.permute(2, 0, 1), w_p)  # (in, N, out)
        out = edges.sum(dim=0)  # (N, out)
        l1 = edges.abs().mean(dim=1).T  # (out, in)
        ctx.with_base, ctx.x_dtype, ctx.scale = with_base, x.dtype, plan.scale
        ctx.save_for_backward(feats, w_p, deriv, edges, coef, scale_sp, mask, live)
        return out, l1

    @staticmethod
    def backward(ctx, g_out, g_l1):  # (N, out), (out, in)
        feats, w_p, deriv, edges, coef, scale_sp, mask, live = ctx.saved_tensors
        width, n = edges.shape[0], edges.shape[1]
        g_edges = g_out.to(edges.dtype).unsqueeze(0).expand(width, n, -1)  # (in, N, out)
        if g_l1 is not None:
            g_edges = torch.sign(edges).mul_((g_l1.T.to(edges.dtype) / n).unsqueeze(1)).add_(g_edges)
        g_x = None
        if ctx.needs_input_grad[0]:
            g_feats = torch.bmm(g_edges, w_p.transpose(1, 2))  # (in, N, R)
            g_x = (g_feats.mul_(deriv.permute(2, 0, 1))).sum(dim=-1).T.to(ctx.x_dtype)  # (N, in)
        g_coef = g_base = g_sp = None
        if any(ctx.needs_input_grad[1:4]):
            g_w = torch.bmm(feats.permute(2, 1, 0), g_edges).permute(2, 1, 0).to(coef.dtype)  # (out, R, in)
            g_coef, g_base, g_sp = _param_grads(ctx, g_w, coef, scale_sp, mask, live, ctx.needs_input_grad[1:4])
        return g_x, g_coef, g_base, g_sp, None, None, None, None


def kan_linear_l1(
    x: torch.Tensor,
    coef: torch.Tensor,
    scale_base: torch.Tensor,
    scale_sp: torch.Tensor,
    mask: torch.Tensor,
    plan: SplinePlan,
    *,
    with_base: bool = True,
    cache: FeatureCache | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Node outputs of a B-spline KAN layer and the L1 norm of each edge on the samples.

    Parameters
    ----------
    x : Tensor (N, in)
    coef, scale_base, scale_sp, mask, plan, with_base, cache
        As in :func:`kan_linear`.

    Returns
    -------
    out : Tensor (N, out)
        As :func:`kan_linear`.
    l1 : Tensor (out, in)
        ``|phi_ji|_1 = mean_s |phi_ji(x_s)|`` (KAN paper eq. 2.17), masked edges 0 with a
        zero gradient; both outputs differentiable in ``x`` and the parameters.

    Notes
    -----
    Holds the ``(N, out, in)`` edge values until the backward: for layers whose edges
    fit in memory (see :func:`kansym.train.regularization.sampled_regularization` for
    the chunked alternative).
    """
    return _KANLinearL1.apply(x, coef, scale_base, scale_sp, mask, plan, with_base, cache)


def kan_linear(
    x: torch.Tensor,
    coef: torch.Tensor,
    scale_base: torch.Tensor,
    scale_sp: torch.Tensor,
    mask: torch.Tensor,
    plan: SplinePlan,
    *,
    with_base: bool = True,
    cache: FeatureCache | None = None,
) -> torch.Tensor:
    """Node outputs of a B-spline KAN layer in one fused matmul (one autograd node).

    Parameters
    ----------
    x : Tensor (N, in)
    coef : Tensor (out, in, K)
    scale_base, scale_sp, mask : Tensor (out, in)
        ``w_b``, ``w_s`` and the live-edge mask.
    plan : SplinePlan
    with_base : bool
        Whether the SiLU residual ``w_b silu(x)`` is present.
    cache : FeatureCache, optional
        Reuse the features of ``x`` when it is the tensor seen last (a fixed input).

    Returns
    -------
    Tensor (N, out)
        ``sum_i mask (w_b silu(x_i) + w_s sum_m c_m B_m(x_i))`` (KAN paper eq. 2.10);
        differentiable in ``x``, ``coef``, ``scale_base`` and ``scale_sp``.
    """
    return _KANLinear.apply(x, coef, scale_base, scale_sp, mask, plan, with_base, cache)


def spline_basis(x: torch.Tensor, plan: SplinePlan) -> torch.Tensor:
    """Differentiable basis ``B(x)`` of shape ``(N, in, K)`` (the layout of ``bspline_basis``)."""
    out = _Basis.apply(x, plan) * plan.scale  # (N, K, in)
    return out.transpose(1, 2).to(x.dtype)
