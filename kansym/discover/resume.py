"""Resumable runs: what an interrupted ``kansym train`` / ``kansym fit`` saves, and how it continues.

An interrupted run is saved as an ordinary KAN checkpoint
(:class:`~kansym.io.bundle.ModelBundle`, usable by ``prune`` and ``symbolify``)
whose ``meta["resume"]`` holds, as plain data:

- ``stage``: where the run was. ``"shortcut"`` or ``"main"``: that training of the run
  was interrupted, and the bundle is its model at the end of the last completed step.
  ``"symbolic"``: the training had finished (a Ctrl-C in pruning, fine-tuning, the
  per-edge fits, the Occam step, the refinement or the verification) and the bundle is
  the trained model as the run went on with it;
- ``run``: which training of the run (``"shortcut"`` or ``"main"``) the bundle is;
- ``symbolic_stage``: for ``"symbolic"``, the finer stage (:attr:`kansym.discover.progress.Stages.current`);
- ``fit_state``: for a training stage, the :class:`~kansym.train.state.FitState`
  (optimiser memory, batch generator, history) at the end of the last completed step;
  a finished training keeps only its history (the bundle's ``meta["history"]``) and
  ``trained_steps``: no step is left to take;
- ``discover_config``: the :class:`~kansym.discover.config.DiscoverConfig` of the run;
- ``data_sha256``: a fingerprint of the training rows, and ``rows_sha256`` one of all the
  rows of the run (fitting and held out), so that resuming on other data is refused
  instead of silently continuing a different problem;
- ``cuts``: what the time limit had cut short by the end of that training (by the interruption, in it)
  (:attr:`kansym.deadline.Deadline.cuts`), replayed by the resumed run;
- what the run had finished before that training and need not repeat
  (below): ``direct``, the direct or structure search's
  candidates, and ``shortcut``, the trained KAN of a finished additive shortcut.

The record is read once (:func:`load_resume` or :func:`read_resume`) into a
:class:`ResumePoint`, which the pipeline takes as it is: a ``"symbolic"`` point skips
the training (no step runs again) and runs the stages after it, which are
deterministic, so the result is that of the uninterrupted run.

What an interrupted ``kansym fit`` carries into its resumed run besides the model it saved.

A run interrupted in (or after) its main training has often finished costly work before
it: the direct search, or the structure search with its oracle KAN
(:mod:`kansym.discover.structure_search`), and an additive shortcut KAN that was trained and
symbolified before the hidden-layer KAN. The resume record
(below) keeps them as plain data:

- ``direct``: the search's candidates (each formula as text with its float constants
  kept apart as exact floats, so that they read back bit for bit through the safe
  :func:`kansym.symbolic.parse.parse_formula`), the reference model's held-out R², and
  the options that shaped them. The resumed run reuses them only when those options are
  unchanged, and only when they read back exactly (else it searches again: the search is
  deterministic, only slower);
- ``shortcut``: the finished shortcut's trained bundle (:meth:`ModelBundle.to_dict`), in the
  run's working units; the resumed run symbolifies it again instead of training it again;
- ``screening``: the input screening's verdict (:func:`kansym.discover.screen.screening_to_record`,
  CSV units) and its options; the resumed run continues on the checkpoint's columns
  without screening again (:mod:`kansym.discover.screen`).

Each entry is used only when the options that shaped it are unchanged (:func:`reusable`);
else that stage runs again, which gives the same result, only later. ``direct`` and
``shortcut`` are in the working units of the run's columns (:mod:`kansym.discover.rows`).
"""

from __future__ import annotations

import copy
import hashlib
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import sympy

from kansym.discover.config import DiscoverConfig
from kansym.errors import DataError, CheckpointError, ConfigError
from kansym.io.bundle import ModelBundle
from kansym.symbolic.compose import input_symbols
from kansym.symbolic.direct import DirectCandidate
from kansym.symbolic.parse import parse_formula
from kansym.train.state import FitState

__all__ = ['read_carried', 'reusable', 'carried_direct', 'direct_entry',
    'DIRECT_FIELDS', 'ResumePoint', 'ResumeConflict', 'data_fingerprint', 'rows_fingerprint', 'resume_record',
    'trained_record', 'read_resume', 'load_resume', 'merge_resume_config', 'TRAINING_FIELDS', 'SYMBOLIC']

log = logging.getLogger("kansym")


# DiscoverConfig fields (besides the training ones, which a resumed run keeps) that shape the search
DIRECT_FIELDS = ("library", "direct_search", "structure", "complexity_weight")
MARK = "_kansym_c"  # name of the placeholder of the k-th float constant in a saved formula


def _encode(expr: sympy.Expr, names: Sequence[str]) -> dict | None:
    """``{"text", "floats"}`` of ``expr``, or None when it would not read back exactly."""
    floats = sorted(expr.atoms(sympy.Float), key=sympy.default_sort_key)
    if any(f._prec != 53 for f in floats):  # a float64 holds it exactly only at 53 bits
        return None
    marks = {f: sympy.Symbol(f"{MARK}{k}", real=True) for k, f in enumerate(floats)}
    entry = {"text": str(expr.xreplace(marks)), "floats": [float(f) for f in floats]}
    try:
        same = sympy.srepr(_decode(entry, names)) == sympy.srepr(expr)
    except DataError:
        same = False
    return entry if same else None


def _decode(entry: dict, names: Sequence[str]) -> sympy.Expr:
    floats = [float(v) for v in entry["floats"]]
    marks = {f"{MARK}{k}": sympy.Symbol(f"{MARK}{k}", real=True) for k in range(len(floats))}
    symbols = {s.name: s for s in input_symbols(names)}
    expr = parse_formula(str(entry["text"]), {**symbols, **marks})
    return expr.xreplace({marks[f"{MARK}{k}"]: sympy.Float(v) for k, v in enumerate(floats)})


def direct_entry(direct: Sequence[DirectCandidate] | None, reference: float, config: Any,
                 input_names: Sequence[str]) -> dict | None:
    """The record's ``direct`` entry of a finished direct or structure search.

    Parameters
    ----------
    direct : sequence of DirectCandidate or None
        The search's candidates (None: no search ran), working units.
    reference : float
        The reference (oracle) model's held-out R² (NaN: none).
    config : DiscoverConfig
        The run's config (its :data:`DIRECT_FIELDS` are kept with the entry).
    input_names : sequence of str
        The run's columns: the candidates' symbols.

    Returns
    -------
    dict or None
        None when some candidate would not read back exactly (the resumed run then
        searches again).
    """
    settings = config.to_dict()
    candidates = None
    if direct is not None:
        candidates = []
        for c in direct:
            text = _encode(c.expr, input_names)
            if text is None:
                return None
            candidates.append({**text, "error": float(c.error), "complexity": int(c.complexity), "origin": c.origin,
                               "structure": copy.deepcopy(c.structure)})  # candidates share it: a checkpoint is a tree
    return {"candidates": candidates, "reference": float(reference),
            "config": {f: settings[f] for f in DIRECT_FIELDS}}


def read_carried(record: dict, source: str) -> dict:
    """What a resume record carries: ``{"direct": entry, "screening": entry, "shortcut": ModelBundle}``,
    the keys it holds (the entries are read when used: :func:`carried_direct`, :func:`reusable`).

    Raises
    ------
    CheckpointError
        A saved shortcut bundle that cannot be read.
    """
    out: dict = {k: record[k] for k in ("direct", "screening") if isinstance(record.get(k), dict)}
    if isinstance(record.get("shortcut"), dict):
        out["shortcut"] = ModelBundle.from_dict(record["shortcut"], f"the shortcut KAN saved in '{source}'")
    return out


def reusable(point: Any, key: str, settings: dict, what: str) -> dict | None:
    """The ``key`` entry carried by an interrupted run, if its options still hold.

    Parameters
    ----------
    point : ResumePoint or None
        The resumed run (:class:`ResumePoint`).
    key : str
        ``"direct"`` or ``"screening"``.
    settings : dict
        The resumed run's values of the options that shape that entry.
    what : str
        The stage, for the line saying why it runs again.

    Returns
    -------
    dict or None
        The entry; None when there is none or an option changed (logged).
    """
    entry = None if point is None else point.carried.get(key)
    if entry is None:
        return None
    changed = [f for f in settings if entry.get("config", {}).get(f) != settings[f]]
    if changed:
        log.info("%s: runs again (%s changed since the interrupted run)", what, ", ".join(changed))
        return None
    return entry


def carried_direct(point: Any, config: Any, input_names: Sequence[str]) -> tuple[list | None, float] | None:
    """The search result the interrupted run carries, read back.

    Parameters
    ----------
    point : ResumePoint or None
    config : DiscoverConfig
        The resumed run's config (its :data:`DIRECT_FIELDS` must equal the saved ones).
    input_names : sequence of str
        The run's columns.

    Returns
    -------
    (list of DirectCandidate or None, float) or None
        The candidates (None: no search had run) and the reference model's R², exactly
        as the interrupted run had them; None: search again.
    """
    settings = config.to_dict()
    entry = reusable(point, "direct", {f: settings[f] for f in DIRECT_FIELDS}, "search before the KAN")
    if entry is None:
        return None
    try:
        candidates = None if entry["candidates"] is None else [
            DirectCandidate(expr=_decode(c, input_names), error=float(c["error"]), complexity=int(c["complexity"]),
                            origin=str(c["origin"]), structure=c.get("structure"))
            for c in entry["candidates"]]
        reference = float(entry["reference"])
    except (DataError, KeyError, TypeError, ValueError):
        log.info("search before the KAN: runs again (the interrupted run's candidates could not be read)")
        return None
    if candidates is not None:
        log.info("search before the KAN: the %d candidate%s of the interrupted run taken as %s", len(candidates),
                 "" if len(candidates) == 1 else "s", "it is" if len(candidates) == 1 else "they are")
    return candidates, reference


# DiscoverConfig fields (dotted for nested TrainConfig fields) that shape the training of a run:
# a resumed run must keep them
TRAINING_FIELDS = ("hidden", "grid_size", "space", "seed", "train.lamb")
SYMBOLIC = "symbolic"  # the stage of a run interrupted after its training had finished


def data_fingerprint(x: np.ndarray, y: np.ndarray, *more: np.ndarray) -> str:
    """SHA-256 of the rows (float64 values and shapes of each array in turn), CSV units."""
    h = hashlib.sha256()
    for a in (x, y, *more):
        a = np.ascontiguousarray(a, dtype=np.float64)
        h.update(repr(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def rows_fingerprint(rows: Any) -> str:
    """:func:`data_fingerprint` of all the rows of a run (a :class:`kansym.discover.rows.Rows`):
    the fitting rows and the held-out ones."""
    held = () if rows.x_test is None else (rows.x_test, rows.y_test)
    return data_fingerprint(rows.x, rows.y, *held)


def resume_record(state: FitState, config: DiscoverConfig, x: np.ndarray, y: np.ndarray, *,
                  stage: str = "main", cuts: Sequence[str] = ()) -> dict:
    """The plain ``meta["resume"]`` entry of a run interrupted in a training.

    Parameters
    ----------
    state : FitState
    config : DiscoverConfig
        The whole run's config (not the config of the stage that was running).
    x, y : ndarray, CSV units
        The rows the interrupted training trains on.
    stage : str
        The training stage that was interrupted.
    cuts : sequence of str
        What the time limit had cut short before the interruption (the screening's or the
        structure search's share), replayed by the resumed run as a finished training's are.
    """
    return {"fit_state": state.to_dict(), "discover_config": config.to_dict(), "data_sha256": data_fingerprint(x, y),
            "stage": stage, "run": stage, "cuts": list(cuts)}


def trained_record(config: DiscoverConfig, rows: Any, *, run: str, cuts: Sequence[str] = (), steps: int = 0) -> dict:
    """The ``meta["resume"]`` entry of a run whose training ``run`` has finished, for an
    interruption in a stage after it (which :meth:`kansym.discover.run.Run.interrupted`
    writes into ``symbolic_stage``).

    Parameters
    ----------
    config : DiscoverConfig
        The whole run's config.
    rows : kansym.discover.rows.Rows
        The run's rows (working units, as :func:`resume_record`'s).
    run : {"shortcut", "main"}
        The training whose model the record's bundle is.
    cuts : sequence of str
        What the time limit had cut short by the end of that training.
    steps : int
        Steps the training took.
    """
    return {"stage": SYMBOLIC, "run": run, "symbolic_stage": "", "discover_config": config.to_dict(),
            "data_sha256": data_fingerprint(rows.x_train, rows.y_train), "rows_sha256": rows_fingerprint(rows),
            "cuts": list(cuts), "trained_steps": int(steps)}


@dataclass(frozen=True)
class ResumePoint:
    """An interrupted run, read once from its checkpoint.

    Attributes
    ----------
    bundle : ModelBundle
        The model at the end of the last completed step (the finished model for a
        :attr:`trained` point), with its transform.
    state : FitState or None
        The training state; None for a :attr:`trained` point.
    config : DiscoverConfig
        The interrupted run's config.
    data_sha256 : str
        Fingerprint of the rows it trains on (:func:`data_fingerprint`).
    stage : str
        ``"shortcut"``, ``"main"`` (that training was interrupted) or ``"symbolic"``
        (a stage after the training ``run``) for ``kansym fit``; ``"main"`` for ``kansym train``.
    source : str
        The checkpoint's path, for messages.
    run : str
        The training the bundle belongs to: ``"shortcut"`` or ``"main"``.
    symbolic_stage : str
        For ``"symbolic"``: the stage that was running.
    rows_sha256 : str
        Fingerprint of all the run's rows (:func:`rows_fingerprint`; "" in older checkpoints).
    cuts : tuple of str
        What the time limit had cut by the end of the training.
    carried : dict
        What the run had finished before that training (below).
    """

    bundle: ModelBundle
    state: FitState | None
    config: DiscoverConfig
    data_sha256: str
    stage: str = "main"
    source: str = "the resumed checkpoint"
    run: str = "main"
    symbolic_stage: str = ""
    rows_sha256: str = ""
    cuts: tuple[str, ...] = ()
    carried: dict = field(default_factory=dict)

    @property
    def trained(self) -> bool:
        """Whether the training had finished: the run goes on after it, with :meth:`trained_bundle`."""
        return self.stage == SYMBOLIC

    def trained_bundle(self) -> ModelBundle:
        """The finished model as the uninterrupted run had it (the resume record removed)."""
        return replace(self.bundle, meta={k: v for k, v in self.bundle.meta.items() if k != "resume"})

    def for_run(self, run: str) -> "ResumePoint | None":
        """The point that training ``run`` continues from: this one for its own run, a
        :attr:`trained` point of the finished shortcut the run carried, or None (train anew)."""
        if run == self.run:
            return self
        if run == "shortcut" and "shortcut" in self.carried:
            return replace(self, bundle=self.carried["shortcut"], state=None, stage=SYMBOLIC, run="shortcut",
                           carried={})
        return None

    def check_data(self, x: np.ndarray, y: np.ndarray) -> None:
        """Refuse rows other than those the run was given.

        Raises
        ------
        DataError
        """
        if data_fingerprint(x, y) != self.data_sha256:
            raise DataError(
                f"the data differ from the rows '{self.source}' was trained on; resume with the same file, "
                "target, inputs and --dropna"
            )

    def check_rows(self, rows: Any) -> None:
        """Refuse a run whose rows (training, fitting and held out) are not those of the
        interrupted one (:func:`rows_fingerprint`; only the training rows in older checkpoints).

        Raises
        ------
        DataError
        """
        self.check_data(rows.x_train, rows.y_train)
        if self.rows_sha256 and rows_fingerprint(rows) != self.rows_sha256:
            raise DataError(
                f"the data differ from the rows of the run saved in '{self.source}'; resume with the same file, "
                "target, inputs, --dropna and --max-train-rows"
            )


class ResumeConflict(ConfigError):
    """A resumed run was given a training option with another value than the saved one.

    Attributes
    ----------
    field : str
        The :data:`TRAINING_FIELDS` entry (``"train.lamb"``, ``"hidden"``, ...).
    given, saved : object
        The two values.
    """

    def __init__(self, field: str, given: Any, saved: Any) -> None:
        super().__init__(f"cannot resume with {field} = {_show(given)}: the run was started with {_show(saved)}; "
                         f"keep {field} or start a new run")
        self.field, self.given, self.saved = field, given, saved


def _config_from_record(data: Any) -> DiscoverConfig:
    try:
        return DiscoverConfig.from_dict(dict(data))
    except (KeyError, TypeError, ValueError) as exc:  # ConfigError is a ValueError
        raise CheckpointError(f"the saved run options cannot be read ({exc}); the run cannot be resumed") from exc


def read_resume(bundle: ModelBundle, source: str = "the resumed checkpoint") -> ResumePoint:
    """The resume point stored in ``bundle``.

    Raises
    ------
    CheckpointError
        The checkpoint holds no (readable) resume state: it is a finished model.
    """
    record = bundle.meta.get("resume")
    if not isinstance(record, dict):
        raise CheckpointError(
            f"'{source}' is a finished model, not an interrupted run; only checkpoints saved on Ctrl-C can be resumed"
        )
    stage = str(record.get("stage", "main"))
    state = None if stage == SYMBOLIC else FitState.from_dict(record.get("fit_state", {}))
    config = _config_from_record(record.get("discover_config", {}))
    try:
        cuts = tuple(str(c) for c in record.get("cuts", ()))
    except TypeError as exc:
        raise CheckpointError(
            f"the saved run's time-limit record cannot be read ({exc}); the run cannot be resumed") from exc
    return ResumePoint(bundle=bundle, state=state, config=config, data_sha256=str(record.get("data_sha256", "")),
                       stage=stage, source=source, run=str(record.get("run", stage if stage != SYMBOLIC else "main")),
                       symbolic_stage=str(record.get("symbolic_stage", "")),
                       rows_sha256=str(record.get("rows_sha256", "")), cuts=cuts,
                       carried=read_carried(record, source))


def load_resume(path: str | Path) -> ResumePoint:
    """Read the checkpoint of an interrupted run (``weights_only`` load) and its resume record.

    Raises
    ------
    CheckpointError
        Missing, corrupt or finished checkpoint.
    """
    return read_resume(ModelBundle.load(path), str(path))


def merge_resume_config(saved: DiscoverConfig, current: DiscoverConfig, given: set[str], *,
                        trained: bool = False) -> DiscoverConfig:
    """The config of a resumed run: the saved training options, the rest from ``current``.

    Parameters
    ----------
    saved : DiscoverConfig
        The interrupted run's config.
    current : DiscoverConfig
        The new invocation's config (defaults where nothing was given).
    given : set of str
        The fields the caller set explicitly, dotted for nested ones (``"train.lamb"``,
        ``"train.steps"``). A given :data:`TRAINING_FIELDS` entry must equal the saved
        value; a given ``"train.steps"`` makes the run longer or shorter (not below the
        steps already done, see :meth:`kansym.train.state.check_resume`).
    trained : bool
        The training had finished (:attr:`ResumePoint.trained`): ``"train.steps"`` is then
        a training field too (the model is taken as it is).

    Raises
    ------
    ResumeConflict
        A field of :data:`TRAINING_FIELDS` was given with another value than the saved one.
    """
    for name in TRAINING_FIELDS + (("train.steps",) if trained else ()):
        if name in given and _get(current, name) != _get(saved, name):
            raise ResumeConflict(name, _get(current, name), _get(saved, name))
    train = saved.train.replace(device=current.device)
    if "train.steps" in given:
        train = train.replace(steps=current.train.steps)
    return current.replace(
        hidden=saved.hidden, grid_size=saved.grid_size, spline_order=saved.spline_order, space=saved.space,
        seed=saved.seed, dtype=saved.dtype, train=train,
    )


def _get(config: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        config = getattr(config, part)
    return config


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)
