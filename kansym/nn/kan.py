"""A KAN of any width list, with explicit activation traces.

Source: Liu et al. 2024, "KAN: Kolmogorov–Arnold Networks", arXiv:2404.19756, §2.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from kansym.errors import ConfigError
from kansym.nn.config import KANConfig
from kansym.nn.fast import FeatureCache
from kansym.nn.layer import KANLayer

__all__ = ["KAN", "KANTrace", "LayerTrace"]


@dataclass(frozen=True)
class LayerTrace:
    """Activations of one layer on a batch.

    Attributes
    ----------
    inputs : Tensor (batch, in)
        Values of the layer's input nodes.
    edges : Tensor (batch, out, in)
        ``phi_ji(x_i)`` of every edge.
    outputs : Tensor (batch, out)
        Node values ``sum_i phi_ji(x_i)``.
    """

    inputs: torch.Tensor
    edges: torch.Tensor
    outputs: torch.Tensor


@dataclass(frozen=True)
class KANTrace:
    """Per-layer activations returned by :meth:`KAN.trace` (never cached on the model)."""

    layers: tuple[LayerTrace, ...]

    @property
    def output(self) -> torch.Tensor:
        """The network output, shape (batch, out)."""
        return self.layers[-1].outputs


class KAN(nn.Module):
    """Kolmogorov–Arnold Network: a stack of :class:`KANLayer` s.

    Parameters
    ----------
    config : KANConfig
        Width list, grid and initialisation; the model draws its initial values from a
        private generator seeded with ``config.seed``.

    Examples
    --------
    >>> model = KAN(KANConfig(width=(2, 5, 1)))
    >>> model(torch.zeros(4, 2)).shape
    torch.Size([4, 1])
    """

    def __init__(self, config: KANConfig) -> None:
        super().__init__()
        self.config = config
        gen = torch.Generator().manual_seed(config.seed)
        self.layers = nn.ModuleList(
            KANLayer(
                config.width[i],
                config.width[i + 1],
                config.grid_size,
                config.spline_order,
                grid_range=config.grid_range,
                scale_noise=config.scale_noise,
                scale_base_mu=config.scale_base_mu,
                scale_base_sigma=config.scale_base_sigma,
                scale_sp=config.scale_sp,
                base_fun=config.base_fun,
                generator=gen,
            )
            for i in range(len(config.width) - 1)
        )

    @property
    def width(self) -> tuple[int, ...]:
        """Nodes per layer, inputs first."""
        return (self.layers[0].in_features, *(layer.out_features for layer in self.layers))

    @property
    def in_features(self) -> int:
        return self.width[0]

    @property
    def out_features(self) -> int:
        return self.width[-1]

    def _check(self, x: torch.Tensor) -> None:
        if x.shape[-1] != self.in_features:
            raise ConfigError(f"the model expects {self.in_features} input features, got {x.shape[-1]}")

    def forward(self, x: torch.Tensor, *, feature_cache: FeatureCache | None = None) -> torch.Tensor:
        """``(..., in) -> (..., out)``.

        Parameters
        ----------
        x : Tensor of shape (..., in)
        feature_cache : FeatureCache, optional
            Handed to the first layer (:meth:`KANLayer.forward`): a training loop that
            feeds the same rows in every step computes their basis once per grid.
        """
        self._check(x)
        layers = iter(self.layers)
        x = next(layers)(x, cache=feature_cache)
        for layer in layers:
            x = layer(x)
        return x

    def trace(self, x: torch.Tensor) -> KANTrace:
        """Run the model and return every layer's inputs, edge values and outputs.

        Parameters
        ----------
        x : Tensor of shape (batch, in)

        Returns
        -------
        KANTrace
            ``trace.output`` equals ``self(x)`` up to float rounding.
        """
        self._check(x)
        out = []
        for layer in self.layers:
            edges = layer.edge_outputs(x)  # (batch, out, in)
            nodes = edges.sum(dim=-1)  # (batch, out)
            out.append(LayerTrace(inputs=x, edges=edges, outputs=nodes))
            x = nodes
        return KANTrace(layers=tuple(out))

    @torch.no_grad()
    def update_grid(self, x: torch.Tensor, *, grid_eps: float | None = None) -> None:
        """Adapt every layer's grid to the activations that ``x`` produces (in place).

        Layer by layer: the grid of layer ``l`` is fitted to the inputs that reach it,
        and its splines are refit to keep their functions (KAN paper §2.4).

        Parameters
        ----------
        x : Tensor of shape (batch, in)
        grid_eps : float, optional
            Defaults to ``config.grid_eps``.
        """
        eps = self.config.grid_eps if grid_eps is None else grid_eps
        for layer in self.layers:
            layer.update_grid(x, grid_eps=eps)
            x = layer(x)

    @torch.no_grad()
    def extend_grid(self, x: torch.Tensor, grid_size: int) -> "KAN":
        """A new model whose splines live on grids of ``grid_size`` intervals.

        Each layer is refit on the activations of ``x`` (grid extension, KAN paper §2.4);
        the receiving model is unchanged.

        Returns
        -------
        KAN
        """
        new = KAN(self.config.replace(width=self.width, grid_size=grid_size))
        new.to(device=self.layers[0].coef.device, dtype=self.layers[0].coef.dtype)
        for i, layer in enumerate(self.layers):
            new.layers[i] = layer.extend_grid(x, grid_size, grid_eps=self.config.grid_eps)
            x = layer(x)
        return new

    def state(self) -> dict:
        """Plain-dict description (config + tensors) from which :meth:`from_state` rebuilds the model."""
        config = self.config.replace(width=self.width).to_dict()
        return {"config": config, "state_dict": {k: v.detach().cpu() for k, v in self.state_dict().items()}}

    @classmethod
    def from_state(cls, state: dict) -> "KAN":
        """Inverse of :meth:`state`."""
        model = cls(KANConfig.from_dict(state["config"]))
        tensors = state["state_dict"]
        dtype = tensors["layers.0.coef"].dtype
        model.to(dtype)
        model.load_state_dict(tensors)
        return model
