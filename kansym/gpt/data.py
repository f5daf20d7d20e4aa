"""Character-level data for KAN-GPT: vocabulary, train/val split, shifted batches.

As in nanoGPT's ``shakespeare_char``: every distinct character of the text is a token
(sorted by code point), the first 90 % of the text trains and the last 10 % validates,
and a batch is ``B`` random windows ``x = data[i : i + T]`` with targets
``y = data[i + 1 : i + 1 + T]``, the same window shifted by one character (next-token
prediction, not the next block).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from kansym.config import DEVICE
from kansym.errors import DataError

__all__ = ["CharVocab", "CharData", "read_text", "load_char_data", "get_batch"]


@dataclass(frozen=True)
class CharVocab:
    """A character vocabulary: token ``i`` is ``chars[i]``.

    Attributes
    ----------
    chars : tuple of str
        Distinct characters, sorted.
    """

    chars: tuple[str, ...]

    @classmethod
    def from_text(cls, text: str) -> "CharVocab":
        """Every distinct character of ``text``, sorted by code point."""
        return cls(tuple(sorted(set(text))))

    @property
    def size(self) -> int:
        """Number of tokens."""
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``.

        Raises
        ------
        DataError
            If ``text`` has a character outside the vocabulary.
        """
        index = {c: i for i, c in enumerate(self.chars)}
        try:
            return [index[c] for c in text]
        except KeyError as exc:
            raise DataError(f"the character {exc.args[0]!r} is not in the model's vocabulary; remove it from the text") from None

    def decode(self, ids) -> str:
        """Text of token ids (any iterable of ints or a 1-D tensor)."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return "".join(self.chars[i] for i in ids)

    def to_dict(self) -> dict:
        """Plain dict for a checkpoint."""
        return {"chars": list(self.chars)}

    @classmethod
    def from_dict(cls, data: dict) -> "CharVocab":
        """Inverse of :meth:`to_dict`."""
        return cls(tuple(data["chars"]))


@dataclass(frozen=True)
class CharData:
    """An encoded text split for training.

    Attributes
    ----------
    vocab : CharVocab
    train, val : LongTensor (N_train,), (N_val,)
        Token ids of the first ``1 - val_fraction`` and the last ``val_fraction`` of the text.
    """

    vocab: CharVocab
    train: torch.Tensor
    val: torch.Tensor

    def split(self, name: str) -> torch.Tensor:
        """``"train"`` or ``"val"`` token ids."""
        return self.train if name == "train" else self.val


def read_text(path: str | os.PathLike[str]) -> str:
    """Read a UTF-8 text file.

    Raises
    ------
    DataError
        If the file is missing, a directory, not UTF-8 or empty.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"text file '{path}' does not exist; check the path")
    if path.is_dir():
        raise DataError(f"'{path}' is a directory; give a UTF-8 text file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"'{path}' is not UTF-8 text (bad byte at offset {exc.start}); convert it to UTF-8") from None
    if not text:
        raise DataError(f"'{path}' is empty; give a text to train on")
    return text


def load_char_data(
    path: str | os.PathLike[str], *, val_fraction: float = 0.1, vocab: CharVocab | None = None
) -> CharData:
    """Encode a text file and split it into train and val.

    Parameters
    ----------
    path : path of a UTF-8 text file
    val_fraction : float
        Share of the text, taken from its end, held out for validation.
    vocab : CharVocab, optional
        Use this vocabulary (resuming a run) instead of the text's own.

    Returns
    -------
    CharData

    Raises
    ------
    DataError
        Unreadable file, a character outside ``vocab``, or a text too short to split.
    """
    if not 0.0 < val_fraction < 1.0:
        raise DataError(f"val_fraction must lie in (0, 1), got {val_fraction}")
    text = read_text(path)
    vocab = vocab or CharVocab.from_text(text)
    ids = torch.tensor(vocab.encode(text), dtype=torch.long)  # (N,)
    n_train = int(len(ids) * (1.0 - val_fraction))
    if n_train < 2 or len(ids) - n_train < 2:
        raise DataError(f"'{path}' has only {len(ids)} characters; give a longer text")
    return CharData(vocab=vocab, train=ids[:n_train], val=ids[n_train:])


def get_batch(
    data: torch.Tensor,
    batch_size: int,
    block_size: int,
    generator: torch.Generator | None = None,
    device: torch.device | str = DEVICE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of ``data`` and their next-character targets.

    Parameters
    ----------
    data : LongTensor (N,)
    batch_size, block_size : int
        ``B`` and ``T``.
    generator : torch.Generator, optional
        Draws the window starts (the data order); same state, same batch.
    device : torch device for the returned tensors

    Returns
    -------
    x, y : LongTensor (B, T)
        ``y[:, t] == x[:, t + 1]`` for ``t < T - 1``, and ``y[:, T - 1]`` is the
        character after the window.

    Raises
    ------
    DataError
        If ``data`` is not longer than ``block_size``.
    """
    if len(data) <= block_size:
        raise DataError(f"a split of {len(data)} characters is too short for block size {block_size}; use a smaller --block-size")
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    offsets = starts[:, None] + torch.arange(block_size)[None, :]  # (B, T)
    x, y = data[offsets], data[offsets + 1]  # (B, T), (B, T)
    return x.to(device), y.to(device)
