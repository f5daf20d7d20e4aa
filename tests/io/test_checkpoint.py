"""Tests of kansym.io.checkpoint: round trip, atomicity, refusal of unsafe files."""

from __future__ import annotations

import collections
import os
import pickle
import stat

import numpy as np
import pytest
import torch

from kansym.errors import CheckpointError
from kansym.io import checkpoint as ckpt_mod
from kansym.io.checkpoint import load_checkpoint, save_checkpoint


def sample():
    g = torch.Generator().manual_seed(0)
    return {
        "kind": "kan",
        "config": {"width": [2, 5, 1], "grid_size": 5, "lamb": 0.01, "base": "bspline", "bias": True},
        "state_dict": collections.OrderedDict(
            [("layers.0.coef", torch.randn(5, 2, 8, generator=g)), ("layers.0.mask", torch.ones(5, 2))]
        ),
        "scaler": {"x": {"shift": [0.5, 1.0], "scale": [2.0, 3.0]}, "y": None},
        "names": ("a", "b"),
        "calibration": [torch.arange(6.0).reshape(3, 2), {"n": 3}],
    }


def test_round_trip_nested(tmp_path):
    obj = sample()
    p = save_checkpoint(obj, tmp_path / "sub" / "m.pt")
    assert p == tmp_path / "sub" / "m.pt"
    back = load_checkpoint(p, kind="kan")
    assert back["format"] == "kansym" and back["version"] == 1 and back["kind"] == "kan"
    assert back["config"] == obj["config"]
    assert back["scaler"] == obj["scaler"]
    assert back["names"] == ("a", "b")
    for k, v in obj["state_dict"].items():
        assert torch.equal(back["state_dict"][k], v)
    assert torch.equal(back["calibration"][0], obj["calibration"][0])
    assert back["calibration"][1] == {"n": 3}
    assert "format" not in obj, "save must not modify its argument"
    assert [f.name for f in (tmp_path / "sub").iterdir()] == ["m.pt"], "no temp file left"


def test_file_permissions_follow_umask(tmp_path):
    old = os.umask(0o022)
    try:
        p = save_checkpoint({"kind": "kan"}, tmp_path / "m.pt")
    finally:
        os.umask(old)
    assert stat.S_IMODE(p.stat().st_mode) == 0o644


def test_tensor_loaded_on_cpu_without_grad_graph(tmp_path):
    w = torch.nn.Parameter(torch.ones(3))
    p = save_checkpoint({"kind": "kan", "w": w}, tmp_path / "m.pt")
    back = load_checkpoint(p)
    assert back["w"].device.type == "cpu"
    assert torch.equal(back["w"], torch.ones(3))


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda x: x, "function"),
        (torch.nn.Linear(2, 2), "state_dict"),
        (np.zeros(3), "tolist"),
        ({1.5: "x"}, "key of type float"),
        (object(), "object"),
    ],
)
def test_rejects_non_plain_values(tmp_path, bad, match):
    with pytest.raises(TypeError, match=match):
        save_checkpoint({"kind": "kan", "x": [1, {"y": bad}]}, tmp_path / "m.pt")
    assert not (tmp_path / "m.pt").exists()
    assert list(tmp_path.iterdir()) == []


def test_rejects_cycles_and_non_dict(tmp_path):
    a: list = []
    a.append(a)
    with pytest.raises(TypeError, match="itself"):
        save_checkpoint({"kind": "kan", "a": a}, tmp_path / "m.pt")
    with pytest.raises(TypeError, match="dict"):
        save_checkpoint([1, 2], tmp_path / "m.pt")  # type: ignore[arg-type]


def test_requires_kind(tmp_path):
    with pytest.raises(ValueError, match="kind"):
        save_checkpoint({"x": 1}, tmp_path / "m.pt")


def test_failed_save_keeps_previous_file(tmp_path, monkeypatch):
    p = save_checkpoint({"kind": "kan", "v": torch.tensor([1.0])}, tmp_path / "m.pt")
    before = p.read_bytes()
    real_save = torch.save

    def exploding_save(obj, f, *args, **kwargs):
        f.write(b"partial garbage")
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(ckpt_mod.torch, "save", exploding_save)
    with pytest.raises(RuntimeError, match="disk on fire"):
        save_checkpoint({"kind": "kan", "v": torch.tensor([2.0])}, p)
    monkeypatch.setattr(ckpt_mod.torch, "save", real_save)
    assert p.read_bytes() == before
    assert torch.equal(load_checkpoint(p)["v"], torch.tensor([1.0]))
    assert [f.name for f in tmp_path.iterdir()] == ["m.pt"], "temp file removed"


def test_failed_replace_becomes_checkpoint_error(tmp_path, monkeypatch):
    p = save_checkpoint({"kind": "kan", "v": 1}, tmp_path / "m.pt")

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt_mod.os, "replace", failing_replace)
    with pytest.raises(CheckpointError, match="No space left"):
        save_checkpoint({"kind": "kan", "v": 2}, p)
    monkeypatch.undo()
    assert load_checkpoint(p)["v"] == 1
    assert [f.name for f in tmp_path.iterdir()] == ["m.pt"]


def test_overwrite_protect(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("a,y\n1,2\n")
    with pytest.raises(CheckpointError, match="refusing to overwrite"):
        save_checkpoint({"kind": "kan"}, data, overwrite_protect=[data])
    # the same file reached through another spelling of the path
    with pytest.raises(CheckpointError, match="refusing to overwrite"):
        save_checkpoint({"kind": "kan"}, tmp_path / "." / "data.csv", overwrite_protect=[str(data)])
    assert data.read_text() == "a,y\n1,2\n"
    save_checkpoint({"kind": "kan"}, tmp_path / "m.pt", overwrite_protect=[data])


def test_save_onto_directory(tmp_path):
    with pytest.raises(CheckpointError, match="directory"):
        save_checkpoint({"kind": "kan"}, tmp_path)


# ----------------------------------------------------------------------------- loading bad files


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.pt")


def test_truncated_file(tmp_path):
    p = save_checkpoint(sample(), tmp_path / "m.pt")
    data = p.read_bytes()
    for cut in (0, 10, len(data) // 2, len(data) - 30):
        p.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match="truncated or corrupt") as info:
            load_checkpoint(p)
        assert "\n" not in str(info.value)


def test_random_bytes(tmp_path):
    p = tmp_path / "r.pt"
    p.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(p)


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("via", ["pickle", "torch.save"])
def test_malicious_pickle_is_refused_not_run(tmp_path, via):
    marker = tmp_path / "pwned"
    p = tmp_path / "evil.pt"
    if via == "pickle":
        p.write_bytes(pickle.dumps({"format": "kansym", "version": 1, "x": _Evil(marker)}, protocol=2))
    else:
        torch.save({"format": "kansym", "version": 1, "kind": "kan", "x": _Evil(marker)}, p)
    with pytest.raises(CheckpointError):
        load_checkpoint(p)
    assert not marker.exists()


def test_not_a_kansym_checkpoint(tmp_path):
    p = tmp_path / "other.pt"
    torch.save({"weights": torch.ones(2)}, p)
    with pytest.raises(CheckpointError, match="not a kansym checkpoint"):
        load_checkpoint(p)


def test_unknown_version(tmp_path):
    p = tmp_path / "m.pt"
    save_checkpoint({"kind": "kan", "version": 99}, p)
    with pytest.raises(CheckpointError, match="version 99"):
        load_checkpoint(p)


def test_wrong_kind(tmp_path):
    p = save_checkpoint({"kind": "kan-gpt"}, tmp_path / "gpt.pt")
    with pytest.raises(CheckpointError, match=r"is a kan-gpt checkpoint; use `kansym gpt"):
        load_checkpoint(p, kind="kan")
    assert load_checkpoint(p, kind="kan-gpt")["kind"] == "kan-gpt"


def test_malicious_pickle_protocol4_is_refused(tmp_path, recwarn):
    marker = tmp_path / "pwned"
    p = tmp_path / "evil.pt"
    p.write_bytes(pickle.dumps(_Evil(marker), protocol=4))
    with pytest.raises(CheckpointError):
        load_checkpoint(p)
    assert not marker.exists()
    assert not [w for w in recwarn if "pickle protocol" in str(w.message)]


def test_refusal_message_says_why(tmp_path):
    p = tmp_path / "evil.pt"
    torch.save({"x": _Evil(tmp_path / "m")}, p)
    with pytest.raises(CheckpointError, match="refused for safety"):
        load_checkpoint(p)
