"""KAN building blocks: pure B-spline math, the KAN layer and the KAN model."""

from kansym.nn.config import KANConfig
from kansym.nn.kan import KAN, KANTrace, LayerTrace
from kansym.nn.layer import KANLayer

__all__ = ["KAN", "KANConfig", "KANLayer", "KANTrace", "LayerTrace"]
