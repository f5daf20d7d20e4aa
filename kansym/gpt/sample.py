"""Sampling text from a KAN-GPT: temperature, top-k, seeded.

Autoregressive generation as in nanoGPT's ``GPT.generate``: crop the context to the
block size, take the last position's logits, divide by the temperature, keep the
``top_k`` largest (Fan et al. 2018, "Hierarchical Neural Story Generation",
arXiv:1805.04833), and draw from the softmax with an explicit generator.
"""

from __future__ import annotations

import torch

from kansym.config import SEED
from kansym.errors import ConfigError, DataError
from kansym.gpt.data import CharVocab
from kansym.gpt.model import KANGPT

__all__ = ["generate", "sample_text"]


def _check(tokens: int, temperature: float, top_k: int | None) -> None:
    if tokens < 0:
        raise ConfigError(f"the number of tokens to sample must be >= 0, got {tokens}")
    if temperature < 0:
        raise ConfigError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 1:
        raise ConfigError(f"top-k must be at least 1, got {top_k}")


@torch.no_grad()
def generate(
    model: KANGPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Extend token sequences one token at a time.

    Parameters
    ----------
    model : KANGPT
        Used in eval mode (the caller's mode is restored).
    idx : LongTensor (B, T0)
        Prompts; only the last ``block_size`` tokens are fed to the model.
    max_new_tokens : int
    temperature : float
        Softmax temperature; 0 picks the most likely token (greedy).
    top_k : int, optional
        Sample only among the ``top_k`` most likely tokens.
    generator : torch.Generator (CPU), optional
        Same state, same text.

    Returns
    -------
    LongTensor (B, T0 + max_new_tokens)

    Raises
    ------
    ConfigError
        Negative tokens or temperature, or ``top_k < 1``.
    """
    _check(max_new_tokens, temperature, top_k)
    was_training = model.training
    model.eval()
    block = model.config.block_size
    for _ in range(max_new_tokens):
        logits, _ = model(idx[:, -block:])  # (B, T, V)
        logits = logits[:, -1, :].float().cpu()  # (B, V)
        if temperature == 0:
            nxt = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        else:
            logits = logits / temperature
            if top_k is not None:
                kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]  # (B, 1)
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = torch.softmax(logits, dim=-1)  # (B, V)
            nxt = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
        idx = torch.cat([idx, nxt.to(idx.device)], dim=1)  # (B, T + 1)
    model.train(was_training)
    return idx


def sample_text(
    model: KANGPT,
    vocab: CharVocab,
    prompt: str = "\n",
    tokens: int = 200,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = SEED,
) -> str:
    """Prompt plus ``tokens`` sampled characters.

    An empty prompt starts from a newline if the vocabulary has one, else from token 0.

    Raises
    ------
    DataError
        The prompt has a character outside the vocabulary.
    ConfigError
        Bad sampling options.
    """
    _check(tokens, temperature, top_k)
    if prompt:
        unknown = sorted({c for c in prompt if c not in vocab.chars})
        if unknown:
            raise DataError(
                f"the prompt has {', '.join(map(repr, unknown))}, not in the model's vocabulary "
                "(the characters of its training text)"
            )
        ids = vocab.encode(prompt)
    else:
        ids = vocab.encode("\n") if "\n" in vocab.chars else [0]
    device = next(model.parameters()).device
    idx = torch.tensor([ids], dtype=torch.long, device=device)  # (1, T0)
    gen = torch.Generator().manual_seed(seed)
    out = generate(model, idx, tokens, temperature=temperature, top_k=top_k, generator=gen)
    text = vocab.decode(out[0])
    return text if prompt else text[len(ids):]
