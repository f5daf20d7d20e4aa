"""Shared pieces of the CLI: error reporting, common options, safe output paths."""

from __future__ import annotations

import functools
import logging
import sys
from pathlib import Path
from typing import Callable

import click

from kansym.config import DEVICE, MAX_SEED, SEED
from kansym.errors import ConfigError, KansymError

MARKER = ".kansym-output"  # in a directory kansym created: its files may be replaced
LEDGER = ".kansym-written"  # {name: sha256} of the text outputs kansym wrote in a directory (written_by_kansym)


class CLIError(click.ClickException):
    """A user mistake: printed as ``error: <message>`` (one line), exit status 2."""

    exit_code = 2

    def show(self, file=None) -> None:  # noqa: D102 - click API
        click.echo(f"error: {self.format_message()}", err=True)


def run_safely(fn: Callable) -> Callable:
    """Turn :class:`KansymError` (and a few OS errors) into :class:`CLIError`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KansymError as exc:
            raise CLIError(" ".join(str(exc).split())) from exc  # one line, whatever the library said
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            raise CLIError(f"{exc.strerror}: {exc.filename}") from exc

    return wrapper


def common_options(fn: Callable) -> Callable:
    """``--seed``, ``--device``, ``--quiet`` on a command."""
    fn = click.option("--quiet", "-q", is_flag=True, help="Print only results; no progress bars or notices.")(fn)
    fn = click.option("--device", default=DEVICE, show_default=True, help="Torch device: cpu, cuda, cuda:0, ... (checked before any work).")(fn)
    fn = click.option("--seed", default=SEED, show_default=True, type=click.IntRange(0, MAX_SEED), help="Seed of every random choice the command makes.")(fn)
    return fn


def check_device(device: str) -> str:
    """Validate a torch device string before any work starts."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise ConfigError(f"unknown device {device!r}; use cpu or cuda[:N]") from exc
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"unsupported device {device!r}; use cpu or cuda[:N]")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device {device!r} requested but CUDA is not available here; use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(
                f"device {device!r} requested but this machine has {torch.cuda.device_count()} CUDA device(s); "
                "use cuda:0 or --device cpu"
            )
    if dev.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ConfigError(f"device {device!r} requested but Apple MPS is not available here; use --device cpu")
    return device


def setup_logging(quiet: bool) -> None:
    """Notices of the library go to stderr unless ``--quiet``."""
    logger = logging.getLogger("kansym")
    logger.setLevel(logging.WARNING if quiet else logging.INFO)
    for h in logger.handlers:
        if getattr(h, "_kansym_cli", False):
            h.setStream(sys.stderr)  # the current stderr (click's CliRunner swaps it per call)
    if not any(getattr(h, "_kansym_cli", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler._kansym_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)


def prepare_out_dir(out_dir: Path, names: list[str], *, force: bool, protect: list[Path], create: bool = True) -> None:
    """Create ``out_dir`` or check that writing ``names`` there loses no user file.

    Files in a directory that kansym created earlier (it holds a marker file) are
    replaced; anywhere else an existing file is kept unless ``force``. With
    ``create=False`` only the checks run (call again with ``create=True`` once the
    work has succeeded, so that a failed run leaves no empty directory).

    Raises
    ------
    ConfigError
        An output would overwrite an input or a file kansym did not write.
    """
    protected = {p.resolve() for p in protect}
    for name in names:
        target = (out_dir / name).resolve()
        if target in protected:
            raise ConfigError(f"output {out_dir / name} would overwrite an input file; choose another -o")
    if out_dir.resolve() in protected:
        raise ConfigError(f"output directory {out_dir} is an input file; choose another -o")
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"{out_dir} exists and is not a directory; choose another -o")
    ours = (out_dir / MARKER).exists()
    clash = [n for n in names if (out_dir / n).exists()]
    if clash and not ours and not force:
        raise ConfigError(f"{out_dir / clash[0]} already exists and was not written by kansym; use --force or another -o")
    if create:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / MARKER).touch()


def written_by_kansym(path: Path) -> bool:
    """Whether ``path`` is a file kansym wrote and may replace: a kansym checkpoint or JSON output
    (their format tag), an image of :mod:`kansym.plot` (its metadata), or a text output listed
    with its current SHA-256 in the directory's :data:`LEDGER` (:func:`write_output_text`)."""
    import json

    try:
        if path.suffix == ".json" and str(json.loads(path.read_text(encoding="utf-8")).get("format", "")).startswith("kansym"):
            return True
        if path.suffix == ".pt":
            from kansym.io.checkpoint import load_checkpoint

            return load_checkpoint(path).get("format") == "kansym"
        from kansym.plot._mpl import FORMATS, written_by_kansym as image_by_kansym

        if path.suffix.lower() in FORMATS:
            return image_by_kansym(path)
        return _ledger(path.parent).get(path.name) == _digest(path)
    except (OSError, ValueError, AttributeError, KansymError):
        return False


def _digest(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _ledger(directory: Path) -> dict[str, str]:
    """``{file name: sha256}`` of the outputs kansym wrote in ``directory`` (empty without a ledger)."""
    import json

    try:
        data = json.loads((directory / LEDGER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) and data.get("format") == "kansym-written" else None
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def remember_output(path: Path) -> None:
    """List the file kansym just wrote at ``path`` in its directory's :data:`LEDGER`, so that a later
    command may replace it; if the file changes afterwards (a user's edit) it is no longer kansym's.
    A ledger that cannot be written only means the next command asks for ``--force``."""
    import json

    from kansym.io.atomic import atomic_write_text

    try:
        files = {**_ledger(path.parent), path.name: _digest(path)}
        atomic_write_text(path.parent / LEDGER, json.dumps({"format": "kansym-written", "files": files}, indent=1) + "\n")
    except (OSError, KansymError):
        pass


def write_output_text(path: Path, text: str) -> None:
    """Write a text output atomically and :func:`remember_output` it."""
    from kansym.io.atomic import atomic_write_text

    atomic_write_text(path, text)
    remember_output(path)


def check_output_file(path: Path, *, force: bool, protect: list[Path]) -> None:
    """Refuse to write onto an input file, or onto an existing file kansym did not write.

    A file kansym wrote (:func:`written_by_kansym`), or any file in a directory kansym
    created, is replaced; anything else needs ``force``.
    """
    if path.resolve() in {p.resolve() for p in protect}:
        raise ConfigError(f"output {path} would overwrite an input file; choose another path")
    if path.is_dir():
        raise ConfigError(f"output {path} is a directory; give a file name")
    if path.exists() and not force and not (path.parent / MARKER).exists() and not written_by_kansym(path):
        raise ConfigError(f"{path} already exists and was not written by kansym; use --force or another path")
