"""Char data: vocabulary, split, and next-token (not next-block) targets."""

import pytest
import torch

from kansym.errors import DataError
from kansym.gpt.data import CharVocab, get_batch, load_char_data


def test_targets_are_inputs_shifted_by_one():
    data = torch.arange(1000)  # token i at position i makes positions visible
    gen = torch.Generator().manual_seed(0)
    x, y = get_batch(data, 16, 32, gen)
    assert x.shape == y.shape == (16, 32)
    assert torch.equal(y[:, :-1], x[:, 1:])  # y[:, t] == x[:, t + 1]
    assert torch.equal(y[:, -1], x[:, -1] + 1)  # the last target is the next character
    # never the next block: a target window starts one token after its input window
    assert torch.equal(y[:, 0], x[:, 0] + 1)


def test_batches_follow_the_generator():
    data = torch.arange(500)
    a = get_batch(data, 4, 8, torch.Generator().manual_seed(3))
    b = get_batch(data, 4, 8, torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_vocab_round_trip_and_split(text_file):
    data = load_char_data(text_file)
    text = text_file.read_text()
    assert data.vocab.chars == tuple(sorted(set(text)))
    assert len(data.train) == int(len(text) * 0.9)
    assert data.vocab.decode(torch.cat([data.train, data.val])) == text
    assert CharVocab.from_dict(data.vocab.to_dict()) == data.vocab


def test_unknown_character_is_a_data_error():
    with pytest.raises(DataError, match="'z'"):
        CharVocab(("a", "b")).encode("abz")


@pytest.mark.parametrize("content, needle", [(None, "does not exist"), (b"\xff\xfe\x00bad", "UTF-8"), (b"", "empty"), (b"abc", "longer")])
def test_bad_text_files(tmp_path, content, needle):
    path = tmp_path / "t.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(DataError, match=needle):
        load_char_data(path)


def test_block_longer_than_split():
    with pytest.raises(DataError, match="block size"):
        get_batch(torch.arange(5), 2, 8)
