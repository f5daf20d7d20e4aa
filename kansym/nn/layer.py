"""One KAN layer: a learnable function on every edge.

``phi_ij(x) = w_b[j, i] * b(x) + w_s[j, i] * sum_k c[j, i, k] B_k(x)`` (Liu et al. 2024,
"KAN: Kolmogorov–Arnold Networks", arXiv:2404.19756, eq. 2.10), node ``j`` of the
next layer sums its incoming edges. Coefficients are laid out ``(out, in, G + k)``
like ``nn.Linear.weight``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from kansym.nn.config import GRID_EPS, GRID_SIZE, SPLINE_ORDER
from kansym.nn.fast import FeatureCache, SplinePlan, kan_linear, kan_linear_l1, make_plan, spline_basis
from kansym.nn.spline import coef_to_curve, curve_to_coef, grid_from_samples, make_grid

__all__ = ["KANLayer"]


def _base(name: str, x: torch.Tensor) -> torch.Tensor:
    if name == "silu":
        return F.silu(x)
    return torch.zeros_like(x)


class KANLayer(nn.Module):
    """A fully connected KAN layer of B-spline edge functions with a SiLU residual.

    Parameters
    ----------
    in_features, out_features : int
        Nodes of the layer's input and output.
    grid_size : int
        Grid intervals ``G``.
    spline_order : int
        Spline order ``k``.
    grid_range : tuple of float
        Initial uniform grid ``[low, high]``.
    scale_noise : float
        Initial spline coefficients are uniform in ``±scale_noise / (2 G)``.
    scale_base_mu, scale_base_sigma, scale_sp : float
        Initialisation of ``w_b`` and ``w_s`` (see :class:`kansym.nn.KANConfig`).
    base_fun : {"silu", "zero"}
        Residual function ``b``.
    generator : torch.Generator, optional
        Source of randomness for the initialisation (no global RNG is touched
        when given).

    Attributes
    ----------
    grid : buffer (in, G + 2k + 1)
        Knots per input feature.
    coef : Parameter (out, in, G + k)
        Spline coefficients ``c``.
    scale_base, scale_sp : Parameter (out, in)
        ``w_b`` and ``w_s``.
    mask : buffer (out, in)
        1 for a live edge, 0 for a removed one.

    Notes
    -----
    The layer accepts any leading dimensions: ``(..., in) -> (..., out)``. The hot path
    (:mod:`kansym.nn.fast`) evaluates the basis once per input feature, in closed form
    while every feature's knots are uniform (as built, and after :func:`make_grid`-style
    grids) and from per-interval polynomial pieces otherwise (after :meth:`update_grid`), then
    contracts it with the weights in one matmul, with a custom backward that saves only
    the input and the basis. The ``(batch, out, in)`` edge tensor is built only by
    :meth:`edge_outputs` and :meth:`forward_l1` (the training penalty). Which path applies is decided once per change of ``grid``
    (one host sync), so grids assigned or edited in place are picked up.

    The backward is written by hand (first derivatives only): asking for a gradient
    with ``create_graph=True`` (for a second derivative, as in physics-informed losses)
    raises a ``RuntimeError`` saying so, instead of returning a gradient without a
    graph; the reference basis
    :func:`kansym.nn.spline.bspline_basis` is plain torch and differentiable to any order.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        grid_size: int = GRID_SIZE,
        spline_order: int = SPLINE_ORDER,
        *,
        grid_range: tuple[float, float] = (-1.0, 1.0),
        scale_noise: float = 0.1,
        scale_base_mu: float = 0.0,
        scale_base_sigma: float = 1.0,
        scale_sp: float = 1.0,
        base_fun: str = "silu",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.grid_size = grid_size
        self.spline_order = spline_order
        self.base_fun = base_fun
        grid = make_grid(grid_range[0], grid_range[1], grid_size, spline_order, in_features)
        self.register_buffer("grid", grid)
        self.register_buffer("mask", torch.ones(out_features, in_features))
        n_coef = grid_size + spline_order
        noise = torch.rand(out_features, in_features, n_coef, generator=generator) - 0.5
        self.coef = nn.Parameter(noise * scale_noise / grid_size)
        unit = torch.rand(out_features, in_features, generator=generator) * 2 - 1
        self.scale_base = nn.Parameter((scale_base_mu + scale_base_sigma * unit) / math.sqrt(in_features))
        self.scale_sp = nn.Parameter(torch.full((out_features, in_features), scale_sp / math.sqrt(in_features)))
        self._plan_key: tuple | None = None
        self._plan: SplinePlan | None = None
        self.force_reference = False  # evaluate by Cox–de Boor even on uniform grids (tests, debugging)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        # checkpoints of KAN-GPT's former fixed-grid layer carry no grid: keep the uniform one built from grid_range
        if prefix + "grid" not in state_dict and prefix + "coef" in state_dict:
            state_dict[prefix + "grid"] = self.grid.detach().clone()
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)

    def plan(self) -> SplinePlan:
        """The evaluation plan of the current grid (see :func:`kansym.nn.fast.make_plan`)."""
        grid = self._buffers["grid"]
        key = self._plan_key  # (grid object, its version, its data pointer, force_reference)
        if (key is None or key[0] is not grid or key[1] != grid._version or key[2] != grid.data_ptr()
                or key[3] != self.force_reference):
            # a new grid: update_grid / extend_grid (in place: a new version), .to() / load_state_dict (a new
            # tensor or new memory), grid.data = ... (new memory)
            self._plan = make_plan(grid, self.spline_order, force_reference=self.force_reference)
            self._plan_key = (grid, grid._version, grid.data_ptr(), self.force_reference)
        return self._plan

    def basis(self, x: torch.Tensor) -> torch.Tensor:
        """B-spline basis of every input feature: ``(N, in) -> (N, in, G + k)``.

        Equal to :func:`kansym.nn.spline.bspline_basis` on ``self.grid`` to rounding, and
        differentiable in ``x`` (analytic derivative).
        """
        return spline_basis(x, self.plan())

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"grid_size={self.grid_size}, spline_order={self.spline_order}"
        )

    def _spline_weight(self) -> torch.Tensor:
        return self.coef * (self.scale_sp * self.mask).unsqueeze(-1)  # (out, in, G + k)

    def forward(self, x: torch.Tensor, *, cache: FeatureCache | None = None) -> torch.Tensor:
        """Node outputs ``sum_i phi_ji(x_i)``: ``(..., in) -> (..., out)``.

        Parameters
        ----------
        x : Tensor of shape (..., in)
        cache : FeatureCache, optional
            Features of recent inputs to reuse (a training loop's fixed rows): a hit needs
            this very tensor, unchanged, on this grid; any other input is computed afresh.
            Only 2-D inputs can hit (others are reshaped into new tensors).

        Returns
        -------
        Tensor of shape (..., out)
        """
        params = self._parameters  # direct lookups: this runs per layer and step, and a small layer's step is short
        if x.dim() == 2:  # a 2-D input stays the same object (FeatureCache recognises it)
            return kan_linear(x, params["coef"], params["scale_base"], params["scale_sp"], self._buffers["mask"],
                              self.plan(), with_base=self.base_fun == "silu", cache=cache)
        out = kan_linear(x.reshape(-1, self.in_features), params["coef"], params["scale_base"], params["scale_sp"],
                         self._buffers["mask"], self.plan(), with_base=self.base_fun == "silu",
                         cache=cache)  # (N, out)
        return out.reshape(*x.shape[:-1], self.out_features)

    def forward_l1(self, x: torch.Tensor, *, cache: FeatureCache | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Node outputs and every edge's ``|phi_ji|_1`` on the samples, in one pass.

        Parameters
        ----------
        x : Tensor of shape (batch, in)
        cache : FeatureCache, optional
            As in :meth:`forward`.

        Returns
        -------
        out : Tensor of shape (batch, out)
            ``self(x)``.
        l1 : Tensor of shape (out, in)
            ``mean_s |phi_ji(x_s)|`` (KAN paper eq. 2.17), equal to
            ``self.edge_outputs(x).abs().mean(0)`` to rounding, values and gradients.
            Keeps the ``(batch, out, in)`` edge values for the backward.
        """
        with_base = self.base_fun == "silu"
        return kan_linear_l1(
            x, self.coef, self.scale_base, self.scale_sp, self.mask, self.plan(), with_base=with_base, cache=cache,
        )

    def edge_outputs(self, x: torch.Tensor) -> torch.Tensor:
        """Every edge function at the samples.

        Parameters
        ----------
        x : Tensor of shape (batch, in)

        Returns
        -------
        Tensor of shape (batch, out, in)
            ``phi_ji(x_i)``; summing over the last axis gives :meth:`forward`.
        """
        base = _base(self.base_fun, x).unsqueeze(1) * (self.scale_base * self.mask)  # (batch, out, in)
        basis = self.basis(x)  # (batch, in, G + k)
        spline = torch.einsum("bik,oik->boi", basis, self._spline_weight())
        return base + spline

    @torch.no_grad()
    def update_grid(self, x: torch.Tensor, *, grid_eps: float = GRID_EPS, margin: float = 0.0) -> None:
        """Move the knots to the sample distribution, keeping every edge function.

        The spline part of each edge is sampled at ``x``, new knots are placed by
        :func:`kansym.nn.spline.grid_from_samples`, and the coefficients are refit by
        least squares (KAN paper §2.4). Works in place (an explicit training step).

        Parameters
        ----------
        x : Tensor of shape (batch, in)
            Inputs reaching this layer; ``batch`` should exceed ``G + k``.
        grid_eps : float
            Weight of the uniform grid.
        margin : float
            Widening of the sample range on each side.
        """
        new_grid = grid_from_samples(x, self.grid_size, self.spline_order, grid_eps=grid_eps, margin=margin)
        self._refit(x, new_grid)

    @torch.no_grad()
    def _refit(self, x: torch.Tensor, new_grid: torch.Tensor) -> torch.Tensor:
        curve = coef_to_curve(x, self.grid, self.coef, self.spline_order)  # (batch, out, in)
        coef = curve_to_coef(x, curve, new_grid, self.spline_order)
        self.grid = new_grid.to(self.grid)
        self.coef.data = coef.to(self.coef)
        return coef

    @torch.no_grad()
    def extend_grid(self, x: torch.Tensor, grid_size: int, *, grid_eps: float = GRID_EPS) -> "KANLayer":
        """A copy of this layer on a finer (or coarser) grid of ``grid_size`` intervals.

        The new splines are least-squares fits of the old ones on the samples ``x``
        (grid extension, KAN paper §2.4); ``w_b``, ``w_s`` and the mask are copied.

        Parameters
        ----------
        x : Tensor of shape (batch, in)
        grid_size : int
            ``G'`` of the new layer.

        Returns
        -------
        KANLayer
        """
        new = KANLayer(
            self.in_features,
            self.out_features,
            grid_size,
            self.spline_order,
            base_fun=self.base_fun,
        ).to(device=self.coef.device, dtype=self.coef.dtype)
        new.scale_base.data.copy_(self.scale_base)
        new.scale_sp.data.copy_(self.scale_sp)
        new.mask.copy_(self.mask)
        new_grid = grid_from_samples(x, grid_size, self.spline_order, grid_eps=grid_eps)
        curve = coef_to_curve(x, self.grid, self.coef, self.spline_order)
        new.grid = new_grid.to(new.grid)
        new.coef.data = curve_to_coef(x, curve, new_grid, self.spline_order).to(new.coef)
        return new
