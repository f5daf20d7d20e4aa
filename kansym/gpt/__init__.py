"""KAN-GPT: a GPT whose feed-forward blocks are KANs (docs/algorithms.md §11)."""

from kansym.gpt.config import FFN_KINDS, KANGPTConfig, match_kan_hidden, parse_ffn
from kansym.gpt.model import KANGPT

__all__ = ["FFN_KINDS", "KANGPT", "KANGPTConfig", "match_kan_hidden", "parse_ffn"]
