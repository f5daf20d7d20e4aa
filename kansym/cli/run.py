"""What ``kansym fit`` and ``kansym train`` share around a run: signals, interruptions, resuming.

- :func:`stop_on_sigterm`: SIGTERM stops training like Ctrl-C (exit status 143 instead of 130);
- :func:`ctrl_c_note`: what Ctrl-C will do to this process, said before training starts;
- :func:`load_resume`: the ``--resume`` checkpoint and the config of the resumed run;
- :func:`save_interrupted`: the resumable checkpoint of an interrupted run, and the line
  that says how to continue;
- :func:`remove_finished_checkpoint`: the interrupted run's checkpoint, once resumed to the end.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Iterator

import click

from kansym.cli.common import check_output_file
from kansym.cli.options import OPTION_SETTINGS, option_flag
from kansym.errors import ConfigError, KansymError

__all__ = ["EXIT_INTERRUPTED", "EXIT_TERMINATED", "stop_on_sigterm", "interrupted_status", "ctrl_c_note",
           "prepare_training", "given_fields", "load_resume", "check_same_columns", "resume_command",
           "save_interrupted", "remove_finished_checkpoint"]

# exit status of a run stopped by Ctrl-C (128 + SIGINT) or by SIGTERM (128 + 15), as shells report them
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

_terminated = threading.Event()  # set by the SIGTERM handler of stop_on_sigterm


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM (``kill``, a batch scheduler's time limit) stops training like Ctrl-C.

    The handler raises ``KeyboardInterrupt``, so the training loop rolls back to its
    last completed step and the command saves the same resumable checkpoint as for
    Ctrl-C (exit status 143 instead of 130). A SIGTERM the caller chose to ignore stays
    ignored, and off the main thread (where Python cannot install handlers) nothing
    changes; the previous handler is restored on leaving.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        yield
        return

    def on_sigterm(signum, frame):
        _terminated.set()
        raise KeyboardInterrupt("SIGTERM")

    _terminated.clear()
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted_status() -> tuple[str, int]:
    """``("interrupted", 130)`` after Ctrl-C, ``("terminated (SIGTERM)", 143)`` after SIGTERM."""
    return ("terminated (SIGTERM)", EXIT_TERMINATED) if _terminated.is_set() else ("interrupted", EXIT_INTERRUPTED)


def ctrl_c_note() -> str:
    """What Ctrl-C will do to this process, for the line said before training starts.

    A process started as a background job by a shell without job control (``cmd &``
    in a script, some CI runners) inherits SIGINT *ignored* (POSIX, Shell Command
    Language §2.11), and Python then installs no ``KeyboardInterrupt`` handler: a
    SIGINT is dropped by the kernel and training goes on. kansym keeps that choice
    of the caller (as every Python program does) but says so instead of promising a
    checkpoint on Ctrl-C.
    """
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if not ignored and hasattr(signal, "pthread_sigmask"):
        ignored = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    if ignored:
        return ("SIGINT is ignored or blocked in this process (a background job of a non-interactive shell?), "
                "so Ctrl-C cannot stop it; SIGTERM (kill PID) still saves a resumable checkpoint")
    return "Ctrl-C saves a resumable checkpoint"


def prepare_training() -> None:
    """Pay the first torch optimiser's import of ``torch._dynamo`` (seconds on a busy machine)
    before the interruptible part: a Ctrl-C inside that import sometimes ended the process
    by the signal (rc -2) instead of the clean save."""
    import torch

    torch.optim.Adam([torch.zeros(1, requires_grad=True)])


def given_fields(ctx: click.Context) -> set[str]:
    """The config fields (dotted for a nested one, ``"train.steps"``) of the setting options
    (:data:`~kansym.cli.options.OPTION_SETTINGS`) given on the command line."""
    return {OPTION_SETTINGS[n].field for n in ctx.params
            if n in OPTION_SETTINGS and ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE}


def load_resume(resume: str | None, config, ctx: click.Context):
    """The ``--resume`` point (None without it) and the config of the resumed run.

    Raises
    ------
    ConfigError
        An option that shapes training was given with another value than the saved one
        (named by its flag), or ``--steps`` below the steps already done.
    """
    if resume is None:
        return None, config
    from kansym.discover.resume import ResumeConflict, load_resume as read_point, merge_resume_config

    point = read_point(resume)
    try:
        config = merge_resume_config(point.config, config, given_fields(ctx), trained=point.trained)
    except ResumeConflict as exc:
        flag = next(option_flag(s) for s in OPTION_SETTINGS.values() if s.field == exc.field)
        raise ConfigError(f"cannot resume with {flag} {_show(exc.given)}: the run was started with {_show(exc.saved)}; "
                          f"drop {flag} or start a new run") from None
    if point.state is not None and config.train.steps < point.state.step:
        raise ConfigError(f"'{resume}' already completed {point.state.step} steps; give --steps {point.state.step} or more")
    return point, config


def _show(value) -> str:
    return ",".join(str(v) for v in value) if isinstance(value, tuple) else str(value)


def check_same_columns(table, point, resume: str | None) -> None:
    """Refuse to resume a run on other columns than it was trained on."""
    if point is None:
        return
    bundle = point.bundle
    names = list(table.input_names)
    # a screened run trained on some of the columns, in the table's order (kansym.discover.screen)
    subset = (all(n in names for n in bundle.input_names)
              and [n for n in names if n in bundle.input_names] == list(bundle.input_names))
    if not subset or not bundle.input_names or table.target_names != bundle.output_names:
        raise ConfigError(
            f"'{resume}' was trained on inputs {', '.join(bundle.input_names)} -> {', '.join(bundle.output_names)}, "
            f"not {', '.join(table.input_names)} -> {', '.join(table.target_names)}; give the same columns"
        )


def resume_command(ctx: click.Context, data, example, target, inputs, dropna, out_flag: str, out: str, ckpt: Path) -> str:
    """The command line that continues an interrupted run: its data, its output and every
    other option given on the command line (``--theta 0``, ``--quiet``), then ``--resume CKPT``."""
    words = [program_name(ctx.find_root().info_name or "kansym", sys.argv[0] if sys.argv else ""), ctx.info_name]
    words += [str(data)] if data is not None else ["--example", example]
    if target:
        words += ["--target", target]
    if inputs:
        words += ["--inputs", inputs]
    if dropna:
        words.append("--dropna")
    words += [out_flag, str(out)]
    for param in ctx.command.params:
        if (isinstance(param, click.Option) and out_flag not in param.opts and param.name not in _NAMED
                and ctx.get_parameter_source(param.name) == click.core.ParameterSource.COMMANDLINE):
            words += _option_words(param, ctx.params.get(param.name))
    words += ["--resume", str(ckpt)]
    return " ".join(shlex.quote(w) for w in words)


def program_name(name: str, argv0: str) -> str:
    """How to call the program again: its ``name`` (``kansym``, ``python -m kansym``), or the
    path it was started by (``.venv/bin/kansym``) when ``name`` alone would not find that
    script on the ``PATH`` (another one, or none)."""
    if os.sep not in argv0 or os.path.basename(argv0) != name:
        return name
    found = shutil.which(name)
    same = found is not None and os.path.exists(argv0) and os.path.samefile(found, argv0)
    return name if same else argv0


_NAMED = {"data", "example", "target", "inputs", "dropna", "resume"}  # written by resume_command itself
BEFORE_TRAINING = ("set-up", "input screening", "direct search", "structure search")  # kansym.discover.progress names


def _option_words(param: click.Option, value) -> list[str]:
    """``["--theta", "0.0"]`` for an option and its parsed value (a flag: its name alone)."""
    flag = next((o for o in param.opts if o.startswith("--")), param.opts[0])
    if param.is_flag:
        off = next((o for o in param.secondary_opts if o.startswith("--")), None)
        return [flag] if value else ([off] if off else [])
    if value is None:
        return []
    if isinstance(value, (tuple, list)):
        return [flag, ",".join(str(v) for v in value)]
    return [flag, repr(value) if isinstance(value, float) else str(value)]


def save_interrupted(stop: KeyboardInterrupt, path: Path, *, force: bool, protect: list[Path],
                     command: str) -> click.exceptions.Exit:
    """Save the resumable checkpoint of an interrupted run; the caller raises the returned exit (130 or 143).

    ``stop`` is a :class:`~kansym.discover.result.RunInterrupted` with a resumable bundle
    (its ``meta["resume"]``) when the training, or a stage after it, was interrupted: in
    the training the checkpoint is the model of the last completed step, after it the
    trained model, which ``--resume`` takes as it is (no training step runs again). Any
    other ``KeyboardInterrupt`` (the screening, the direct or structure search, set-up)
    leaves nothing to save, and the line says so.
    """
    what, status = interrupted_status()
    bundle = getattr(stop, "bundle", None)
    record = None if bundle is None else bundle.meta.get("resume")
    if not isinstance(record, dict):
        stage = getattr(stop, "stage", "")
        if stage in BEFORE_TRAINING:
            where = "" if stage == "set-up" else f" during the {stage},"
            click.echo(f"{what}{where} before the KAN's training; nothing was written (run the command again)",
                       err=True)
        else:  # outside discover's stages (reading the table, writing the files) or between two of them
            where = f" during the {stage}" if stage and stage not in ("main", "shortcut", "train") else ""
            click.echo(f"{what}{where}; nothing resumable was saved (run the command again)", err=True)
        return click.exceptions.Exit(status)
    if record.get("stage") == "symbolic":
        done = f"during the {record.get('symbolic_stage') or 'stages after the training'}, after the training"
        kept = " (the trained model: --resume goes on from there, no training step runs again)"
    else:
        done, kept = f"after {record['fit_state']['step']} of {bundle.meta['train_config']['steps']} steps", ""
    try:
        check_output_file(path, force=force, protect=protect)
        bundle.save(path, protect=protect)
    except KansymError as exc:
        click.echo(f"{what} {done}; could not save a resumable checkpoint: {exc}", err=True)
        return click.exceptions.Exit(status)
    click.echo(f"{what} {done}; saved a resumable checkpoint to {path}{kept}; continue with: {command}", err=True)
    return click.exceptions.Exit(status)


def remove_finished_checkpoint(resume: str | None, ckpt: Path, quiet: bool) -> None:
    """After a resumed run has finished, delete the interrupted run's checkpoint it continued, if kansym wrote it there.

    Only the file this command itself saves on an interruption (``OUT/interrupted.pt``
    or ``OUTPUT.interrupted.pt``) is removed; a checkpoint resumed from anywhere else
    is the user's and stays.
    """
    if resume is None or Path(resume).resolve() != ckpt.resolve() or not ckpt.is_file():
        return
    ckpt.unlink()
    if not quiet:
        click.echo(f"removed {ckpt}: the run it saved has now finished", err=True)

