"""KAN-GPT: a GPT whose feed-forward blocks are KANs (DESIGN.md §4)."""

from kansym.gpt.config import FFN_KINDS, KANGPTConfig, match_kan_hidden, parse_ffn
from kansym.gpt.model import KANGPT

__all__ = ["FFN_KINDS", "KANGPT", "KANGPTConfig", "match_kan_hidden", "parse_ffn"]
