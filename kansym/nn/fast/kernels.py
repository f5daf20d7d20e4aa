"""B-spline features of a layer's inputs (and their derivatives) for every kind of plan.

See :mod:`kansym.nn.fast` for the algorithms and their sources.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kansym.nn.fast import backends, native
from kansym.nn.fast.plan import SplinePlan

__all__ = ["features", "contract", "input_grad", "recomputes_derivative", "compile_kernels"]

# elements of a (rows, K, in) chunk: small enough for the cache, large enough to amortise op overhead
_CHUNK = 1 << 17


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
    deriv = (a * a - 4.0 * b * b) * torch.where(e < 0, -1.0, 1.0) * dfac  # copysign does not vectorise in inductor
    if with_base:
        sig = torch.sigmoid(x)
        deriv = torch.cat([(sig * (1 + x * (1 - sig))).unsqueeze(1), deriv], dim=1)
    return feats, deriv


def _cubic_input_grad_pure(
    g_feats: torch.Tensor, x: torch.Tensor, t0: torch.Tensor, inv_h: torch.Tensor, dfac: torch.Tensor,
    centers: torch.Tensor, with_base: bool,
) -> torch.Tensor:
    """``sum_r g_feats[:, r] dF_r/dx`` with ``dF/dx`` recomputed from ``x`` (cubic uniform plans, for ``torch.compile``).

    One fused pass over ``g_feats (N, K + with_base, in)`` instead of writing ``dF/dx``
    in the forward and reading it back here: the recomputation is cheaper than the
    memory traffic once compiled.
    """
    s = (x - t0) * inv_h
    e = (s.unsqueeze(1) - centers).clamp(-2.0, 2.0)
    a = e.abs() - 2.0
    b = (a + 1.0).clamp_max(0.0)
    deriv = (a * a - 4.0 * b * b) * torch.where(e < 0, -1.0, 1.0) * dfac
    if not with_base:
        return (g_feats * deriv).sum(dim=1)
    sig = torch.sigmoid(x)
    return (g_feats[:, 1:] * deriv).sum(dim=1) + g_feats[:, 0] * (sig * (1 + x * (1 - sig)))


def _contract_pure(g_feats: torch.Tensor, deriv: torch.Tensor) -> torch.Tensor:
    """``sum_r g_feats[:, r] * deriv[:, r]``: ``(N, R, in), (N, R, in) -> (N, in)`` (the input gradient)."""
    return (g_feats * deriv).sum(dim=1)


_compiled: dict[str, object] = {}  # name -> compiled function while compile_kernels() is on
_compiled_cache: dict[str, object] = {}


def compile_kernels(enabled: bool = True) -> None:
    """Fuse the cubic uniform-grid basis, its derivative and the input-gradient contraction with ``torch.compile``.

    Off by default. The first call of each input shape compiles (seconds to tens of
    seconds on CPU, where it needs a C++ compiler; inductor caches the result on disk for
    later processes); a second shape recompiles once with a dynamic batch size. After
    that the basis of a layer is one fused loop writing ``F`` and ``dF/dx`` (about 5x
    faster than the eager chain on CPU), and the backward's ``sum_r dL/dF_r dF_r/dx`` one
    fused reduction. Affects every :class:`KANLayer` of order 3 on a uniform grid; other
    orders and non-uniform grids stay eager. If compiling fails (no compiler), a warning
    is given once and the eager kernels are used.

    Parameters
    ----------
    enabled : bool
        False goes back to the eager kernels.
    """
    if enabled and not _compiled_cache:
        _compiled_cache["cubic"] = torch.compile(_cubic_pure)
        _compiled_cache["contract"] = torch.compile(_contract_pure)
        _compiled_cache["cubic_input_grad"] = torch.compile(_cubic_input_grad_pure)
    _compiled.clear()
    if enabled:
        _compiled.update(_compiled_cache)


def _run_compiled(name: str, *args):
    """The compiled kernel ``name`` on ``args``, or None when compiling is off or has failed."""
    fn = _compiled.get(name)
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - any backend failure (no compiler, unsupported device) -> eager
        import warnings

        warnings.warn(f"kansym: torch.compile of the KAN kernels failed ({type(exc).__name__}); using eager kernels")
        _compiled.clear()
        return None


def _native_kind(plan: SplinePlan, x: torch.Tensor) -> str | None:
    """"cubic" or "piecewise" when a native kernel evaluates this plan on ``x``, else None."""
    if plan.uniform and plan.order == 3:
        kind = "cubic"
    elif plan.piecewise and plan.order <= native.MAX_ORDER:
        kind = "piecewise"
    else:
        return None
    return kind if native.usable(x) and backends.native_kernels() is not None else None


def recomputes_derivative(plan: SplinePlan, x: torch.Tensor) -> bool:
    """True when the backward will recompute ``dF/dx`` of ``x`` (native or compiled kernels, see :func:`input_grad`)."""
    return _native_kind(plan, x) is not None or (plan.uniform and plan.order == 3 and bool(_compiled))


def input_grad(
    g_feats: torch.Tensor, x: torch.Tensor, aux: torch.Tensor | None, plan: SplinePlan, with_base: bool
) -> torch.Tensor | None:
    """``sum_r g_feats[:, r] dF_r/dx`` recomputing ``dF/dx`` in one native or compiled pass, or None.

    Parameters
    ----------
    g_feats : Tensor (N, K + with_base, in)
        Gradient of the loss with respect to the features.
    x : Tensor (N, in)
        The layer's input (compute dtype).
    aux : Tensor (N, in) or None
        What :func:`features` returned with ``aux=True`` for ``x``.
    plan : SplinePlan
        A cubic uniform plan.
    with_base : bool
        Whether row 0 of the features is ``silu(x)``.

    Returns
    -------
    Tensor (N, in) or None
        None when neither kernel applies any more (switched off since the forward).
    """
    if not recomputes_derivative(plan, x) or g_feats.dtype != x.dtype:
        return None
    kind = _native_kind(plan, x)
    if kind is not None:
        sig = (aux if aux is not None else torch.sigmoid(x)) if with_base else None
        kernels = backends.native_kernels()
        if kind == "cubic":
            return kernels.cubic_input_grad(g_feats, x, sig, plan.t0, plan.inv_h)
        return kernels.piecewise_input_grad(g_feats, x, sig, plan)
    dfac = plan.dfac.to(x.dtype)
    t0, inv_h, centers = plan.t0.to(x.dtype), plan.inv_h.to(x.dtype), plan.centers.to(x.dtype)
    return _run_compiled("cubic_input_grad", g_feats, x, t0, inv_h, dfac, centers, with_base)


def contract(g_feats: torch.Tensor, deriv: torch.Tensor) -> torch.Tensor:
    """Input gradient ``sum_r g_feats[:, r] deriv[:, r]`` of a layer, ``(N, R, in) -> (N, in)``; ``g_feats`` may be overwritten."""
    out = _run_compiled("contract", g_feats, deriv) if g_feats.dtype == deriv.dtype else None
    return g_feats.mul_(deriv).sum(dim=1) if out is None else out


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



def _piecewise_into(out: torch.Tensor, deriv: torch.Tensor | None, x: torch.Tensor, plan: SplinePlan) -> None:
    """Any knots, from the plan's polynomial pieces: ``out = B``, ``deriv = dB/dx`` (Horner's rule)."""
    k, n_basis = plan.order, plan.n_basis
    xt = x.T.contiguous()  # (in, n)
    slot = torch.searchsorted(plan.rows.to(x.dtype), xt, right=True).add_(plan.offsets)  # (in, n): row of the table
    u = torch.sub(xt, plan.origins.to(x.dtype)[slot])  # (in, n): x - t_{s-1} (xt may share x's memory)
    u = u.masked_fill_(torch.isinf(u), 0.0).unsqueeze(-1)  # +-inf lie outside the grid: 0, not 0 * inf
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
    x: torch.Tensor, plan: SplinePlan, *, with_base: bool, with_deriv: bool, aux: bool = False
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
    aux : bool
        With ``with_deriv=False`` and :func:`recomputes_derivative`: return instead of
        ``D`` what :func:`input_grad` needs besides ``x`` (``sigmoid(x)`` for the native
        kernels with a base, else None).

    Returns
    -------
    F : Tensor (N, K + with_base, in)
        ``F[:, with_base + i, j] = B_i(x_j) / plan.scale``; ``F[:, 0] = silu(x)`` with a base.
    D : Tensor (N, K + with_base, in) or None
        ``d F[n, r, j] / d x[n, j]`` (or the auxiliary tensor, see ``aux``).
    """
    n, width = x.shape
    k_basis, off = plan.n_basis, int(with_base)
    kind = None if with_deriv else _native_kind(plan, x)
    if kind is not None:
        kernels = backends.native_kernels()
        if kind == "cubic":
            feats, sig = kernels.cubic_features(x, plan.t0, plan.inv_h, k_basis, with_base)
        else:
            feats, sig = kernels.piecewise_features(x, plan, with_base)
        return feats, (sig if aux else None)
    dfac = plan.dfac.to(x.dtype) if plan.dfac is not None else None
    if _compiled and plan.uniform and plan.order == 3:
        t0, inv_h = plan.t0.to(x.dtype), plan.inv_h.to(x.dtype)
        done = _run_compiled("cubic", x, t0, inv_h, dfac, plan.centers.to(x.dtype), with_base, with_deriv)
        if done is not None:
            return done
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
