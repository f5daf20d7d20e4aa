"""KAN-GPT: a pre-LayerNorm GPT decoder whose feed-forward blocks may be KANs.

The decoder follows GPT-2 (Radford et al. 2019, "Language Models are Unsupervised
Multitask Learners") as laid out in Karpathy's nanoGPT: learned token and position
embeddings, ``n_layer`` blocks ``x + attn(ln_1(x))`` then ``x + ffn(ln_2(x))``, a final
LayerNorm and an output head tied to the token embedding (Press & Wolf 2017,
arXiv:1608.05859). The FFN of each block is chosen by ``config.ffn`` (docs/algorithms.md §11):
an MLP, a KAN (Liu et al. 2024, arXiv:2404.19756) or a KAN with a linear shortcut.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from kansym.errors import CheckpointError, ConfigError
from kansym.gpt.config import KANGPTConfig
from kansym.gpt.ffn import GPT2_STD, KANFFN, build_ffn, input_projection_stds

__all__ = ["CausalSelfAttention", "Block", "KANGPT"]


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with linear projections.

    ``c_attn`` maps ``C -> 3C`` (queries, keys, values of all heads), ``c_proj`` maps the
    concatenated head outputs ``C -> C``. The per-head output projection ``W_O^(h)``
    (``d_head x C``) is the block of rows ``h d_head .. (h + 1) d_head`` of
    ``c_proj.weight.T``; :meth:`head_output_weights` returns all of them as a view.

    ``head_order`` (from ``config.head_order``) says which original head each stored
    head is: stored head ``s`` holds the query/key/value rows and ``W_O`` rows of
    original head ``head_order[s]`` (see :func:`kansym.gpt.heads.reorder_heads`). The
    forward pass gathers the weights back into the original order before the matrix
    products, so every floating-point sum runs in the original order and the logits
    are bit-identical to the unpermuted model's (a permuted ``c_proj`` reduction would
    differ in the last bits).
    """

    def __init__(self, config: KANGPTConfig, head_order: tuple[int, ...] | None = None) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.head_dim = config.n_embd // config.n_head
        self.dropout = config.dropout
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        # Hook point: receives every head's output y, (B, H, T, hs), in stored head order
        # (kansym.gpt.heads masks heads here for ablations without touching weights).
        self.head_out = nn.Identity()
        self.head_order = tuple(range(self.n_head)) if head_order is None else tuple(int(h) for h in head_order)
        if sorted(self.head_order) != list(range(self.n_head)):
            raise ConfigError(f"head order {list(self.head_order)} is not a permutation of 0..{self.n_head - 1}")
        # index buffers (not saved: rebuilt from head_order) that follow the module's .to(device)
        for name in ("_attn_index", "_proj_index", "_order", "_inverse"):
            self.register_buffer(name, None, persistent=False)
        if self.head_order != tuple(range(self.n_head)):
            inv = [0] * self.n_head
            for s, h in enumerate(self.head_order):
                inv[h] = s
            hs = self.head_dim
            proj = torch.tensor([inv[h] * hs + d for h in range(self.n_head) for d in range(hs)])  # (C,)
            self._proj_index = proj
            self._order, self._inverse = torch.tensor(self.head_order), torch.tensor(inv)
            self._attn_index = torch.cat([part * self.n_embd + proj for part in range(3)])  # (3C,)

    def head_output_weights(self) -> torch.Tensor:
        """Per-head output projections, shape (H, d_head, C): a view of ``c_proj.weight``.

        ``attn_out = sum_h y_h @ W_O[h]`` (+ bias), with ``y_h`` the ``(B, T, d_head)``
        output of head ``h``.
        """
        return self.c_proj.weight.T.view(self.n_head, self.head_dim, self.n_embd)  # (H, hs, C)

    def head_qkv_weights(self) -> torch.Tensor:
        """Per-head query, key and value weights, shape (3, H, d_head, C): a view of ``c_attn.weight``."""
        return self.c_attn.weight.view(3, self.n_head, self.head_dim, self.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        w_attn, b_attn, w_proj = self.c_attn.weight, self.c_attn.bias, self.c_proj.weight
        if self._attn_index is not None:  # stored (permuted) head order -> original order
            ia, ip = self._attn_index, self._proj_index
            w_attn, w_proj = w_attn[ia], w_proj[:, ip]  # (3C, C), (C, C)
            b_attn = None if b_attn is None else b_attn[ia]
        q, k, v = F.linear(x, w_attn, b_attn).split(C, dim=2)  # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, H, T, hs)
        k = k.view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, H, T, hs)
        v = v.view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, H, T, hs)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, H, T, hs)
        if self._proj_index is None:
            y = self.head_out(y)  # (B, H, T, hs)
        else:  # hooks see the stored order
            y = self.head_out(y[:, self._order])[:, self._inverse]  # (B, H, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.resid_dropout(F.linear(y, w_proj, self.c_proj.bias))


class Block(nn.Module):
    """Pre-LN decoder block: ``x + attn(ln_1(x))``, then ``x + ffn(ln_2(x))``."""

    def __init__(self, config: KANGPTConfig, layer: int, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config, None if config.head_order is None else config.head_order[layer])
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.ffn = build_ffn(config, layer, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))  # (B, T, C)
        return x + self.ffn(self.ln_2(x))  # (B, T, C)


class KANGPT(nn.Module):
    """Character- or token-level GPT with MLP, KAN or hybrid feed-forward blocks.

    Parameters
    ----------
    config : KANGPTConfig
        Architecture; all initial values come from a private generator seeded with
        ``config.seed`` (the global RNG is not seeded).

    Examples
    --------
    >>> model = KANGPT(KANGPTConfig(vocab_size=10, block_size=8, n_layer=2, n_head=2, n_embd=16, ffn="kan"))
    >>> logits, loss = model(torch.zeros(3, 8, dtype=torch.long), torch.zeros(3, 8, dtype=torch.long))
    >>> logits.shape
    torch.Size([3, 8, 10])
    """

    def __init__(self, config: KANGPTConfig) -> None:
        super().__init__()
        self.config = config
        gen = torch.Generator().manual_seed(config.seed)
        # torch's default initialisers draw from the global RNG; keep the caller's stream intact.
        with torch.random.fork_rng(devices=[]):
            self.wte = nn.Embedding(config.vocab_size, config.n_embd)
            self.wpe = nn.Embedding(config.block_size, config.n_embd)
            self.drop = nn.Dropout(config.dropout)
            self.blocks = nn.ModuleList(Block(config, i, gen) for i in range(config.n_layer))
            self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying
        self._init_weights(gen)

    @torch.no_grad()
    def _init_weights(self, gen: torch.Generator) -> None:
        # GPT-2 init: N(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer); an FFN's input
        # projection as config.fc_init says (kansym.gpt.ffn.input_projection_stds; GR-KAN: variance preserving)
        std_resid = GPT2_STD / math.sqrt(2 * self.config.n_layer)
        chosen = {id(w): (w, std) for b in self.blocks for w, std in input_projection_stds(b.ffn, self.config.fc_init)}
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear) and module is not self.lm_head:
                resid = name.endswith(("c_proj", "shortcut"))
                _, std = chosen.pop(id(module.weight), (None, std_resid if resid else GPT2_STD))
                nn.init.normal_(module.weight, 0.0, std, generator=gen)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, GPT2_STD, generator=gen)
        for weight, std in chosen.values():  # not an nn.Linear: a KAN layer's w_b
            nn.init.normal_(weight, 0.0, std, generator=gen)

    @property
    def ffn_kinds(self) -> tuple[str, ...]:
        """FFN kind of each block."""
        return self.config.ffn

    def kan_ffns(self) -> list[tuple[int, KANFFN]]:
        """``(layer, ffn)`` for every block whose FFN is a KAN."""
        return [(i, b.ffn) for i, b in enumerate(self.blocks) if isinstance(b.ffn, KANFFN)]

    def num_params(self, non_embedding: bool = True) -> int:
        """Trainable parameters (tied weights once); without position embeddings by default, as nanoGPT."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.wpe.weight.numel()
        return n

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Next-token logits and, with targets, the mean cross-entropy.

        Parameters
        ----------
        idx : LongTensor (B, T)
            Token ids, ``T <= block_size``.
        targets : LongTensor (B, T), optional
            ``targets[:, t]`` is the token that follows ``idx[:, t]``; -1 is ignored.

        Returns
        -------
        logits : Tensor (B, T, vocab_size)
        loss : Tensor (scalar) or None

        Raises
        ------
        ConfigError
            If ``T`` exceeds ``block_size``.
        """
        B, T = idx.shape
        if T > self.config.block_size:
            raise ConfigError(f"a sequence of {T} tokens exceeds the block size {self.config.block_size}; crop it")
        pos = torch.arange(T, dtype=torch.long, device=idx.device)  # (T,)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T), ignore_index=-1)
        return logits, loss

    def state(self) -> dict:
        """Plain-dict description (config + CPU tensors) that :meth:`from_state` rebuilds."""
        return {
            "config": self.config.to_dict(),
            "state_dict": {k: v.detach().cpu() for k, v in self.state_dict().items()},
        }

    @classmethod
    def from_state(cls, state: dict) -> "KANGPT":
        """Inverse of :meth:`state`; the model gets the dtype of the saved tensors.

        Raises
        ------
        CheckpointError
            If the tensors do not fit the saved config.
        """
        model = cls(KANGPTConfig.from_dict(state["config"]))
        tensors = state["state_dict"]
        model.to(tensors["wte.weight"].dtype)
        try:
            model.load_state_dict(tensors)
        except RuntimeError as exc:
            raise CheckpointError(f"the checkpoint's weights do not fit its KAN-GPT config: {str(exc).splitlines()[0]}") from exc
        return model
