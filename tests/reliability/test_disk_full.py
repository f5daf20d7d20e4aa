"""A save onto a full disk: one error line, exit 2, and the earlier files intact (issue 17).

A real full file system: a small tmpfs mounted for the test (needs root and the right to
mount, as on the project's build machines; skipped elsewhere). The writes are atomic
(kansym.io.atomic: temp file, fsync, rename), so ENOSPC in the middle of one leaves the
previous file as it was and no temp file behind.
"""

import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from kansym.cli.main import cli


def _can_mount() -> str:
    """Why a tmpfs cannot be mounted here, or ``""``."""
    if not sys.platform.startswith("linux"):
        return "tmpfs mounts need Linux"
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "no mount/umount command"
    return ""


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs at ``tmp_path / "disk"``, unmounted afterwards."""
    why = _can_mount()
    if why:
        pytest.skip(f"no full-disk test: {why}")
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"no full-disk test: cannot mount a tmpfs here ({done.stderr.strip() or done.returncode})")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def _fill(disk):
    """Write a filler file until the file system is full."""
    block = b"\0" * 65536
    with open(disk / "filler", "wb", buffering=0) as fh:
        while True:
            try:
                fh.write(block)
            except OSError:
                break
    for size in (4096, 512, 1):  # the last partial blocks too
        with open(disk / "filler", "ab", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * size)
            except OSError:
                pass


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _one_line_enospc(result):
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, result.stderr
    assert "No space left on device" in lines[0], lines[0]


def test_fit_and_train_onto_a_full_disk_keep_the_earlier_files(small_disk, write_csv, tmp_path):
    data = write_csv(tmp_path / "d.csv", n=60, seed=3)
    out, ckpt = small_disk / "out", small_disk / "m.pt"
    opts = ["--steps", "3", "--hidden", "2", "--grid-size", "4", "-q"]
    runner = CliRunner()
    assert runner.invoke(cli, ["fit", str(data), "-t", "y", "-o", str(out), *opts]).exit_code == 0
    assert runner.invoke(cli, ["train", str(data), "-t", "y", "-o", str(ckpt), *opts]).exit_code == 0
    before, before_ckpt = _snapshot(out), ckpt.read_bytes()
    assert {"model.pt", "formula.json"} <= set(before)

    _fill(small_disk)
    _one_line_enospc(runner.invoke(cli, ["fit", str(data), "-t", "y", "-o", str(out), "--seed", "1", *opts]))
    assert _snapshot(out) == before  # every earlier file, byte for byte; no temp or lock file left
    _one_line_enospc(runner.invoke(cli, ["train", str(data), "-t", "y", "-o", str(ckpt), "--seed", "1", *opts]))
    assert ckpt.read_bytes() == before_ckpt
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "m.pt", "out"]
