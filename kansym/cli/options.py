"""Options shared by ``kansym fit`` and ``kansym train``: the data, the model, the symbolic stage.

The CLI only parses: click's types check ranges (and name the flag), and
:func:`discover_config` hands the values to :class:`~kansym.discover.config.DiscoverConfig`,
whose own checks (finite values, known primitives) are the only ones.
"""

from __future__ import annotations

import math

import click

from kansym.cli.common import CLIError
from kansym.config import MAX_STEPS, R2_THRESHOLD
from kansym.errors import ConfigError

__all__ = ["EXAMPLES", "NON_NEGATIVE", "data_options", "model_options", "symbolic_options", "resolve_data", "split_names",
           "parse_hidden", "discover_config", "size_options", "parse_drop"]

EXAMPLES = {
    # name: (target, inputs) of the datasets shipped in kansym/data
    "kepler": ("period_days", ("semi_major_axis_km", "primary_mass_kg")),
    "hello": ("f", ("x1", "x2")),
}


LIB_FLAG, LIB_EXAMPLE = "--lib (the primitive library)", "one primitive (e.g. --lib x,x^2,sin)"


def split_names(value: str | None, what: str = "--inputs", example: str = "one column") -> tuple[str, ...] | None:
    """``"a, b"`` -> ``("a", "b")``; None stays None; an empty list is refused, naming ``what``."""
    if value is None:
        return None
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    if not names:
        raise ConfigError(f"{what} is an empty list; name at least {example}")
    return names


def resolve_data(data: str | None, example: str | None, target: str | None, inputs: str | None,
                 drop: tuple[str, ...] = ()):
    """The CSV path, target and inputs of a command: a file, or ``--example NAME`` (whose default
    inputs lose the ``drop`` columns; :func:`~kansym.io.tabular.read_table` drops them from a file's)."""
    from kansym.io.tabular import embedded_dataset

    if data is None and example is None:
        raise CLIError("give a CSV file, or --example NAME for a dataset shipped with kansym (kepler, hello)")
    if data is not None and example is not None:
        raise CLIError("give either a CSV file or --example, not both")
    if example is not None:
        if example not in EXAMPLES:
            raise CLIError(f"unknown example {example!r}; choose from {', '.join(EXAMPLES)}")
        default_target, default_inputs = EXAMPLES[example]
        default_inputs = tuple(c for c in default_inputs if c not in drop)
        return embedded_dataset(example), target or default_target, split_names(inputs) or default_inputs
    from kansym.io.tabular import check_data_path

    path = check_data_path(data)  # a missing input is reported before anything about the outputs
    if target is None:
        raise CLIError("--target is required: name the column to predict")
    return path, target, split_names(inputs)


def parse_drop(values: tuple[str, ...], inputs: str | None, keep_inputs: str | None) -> tuple[str, ...]:
    """``--drop a,b --drop c`` -> ``("a", "b", "c")``, each name once; () without ``--drop``.

    Raises
    ------
    ConfigError
        A ``--drop`` that names nothing, or a column that ``--inputs`` or ``--keep-inputs`` names too.
    """
    names = tuple(dict.fromkeys(n for v in values for n in split_names(v, "--drop")))
    for flag, given in (("--inputs", inputs), ("--keep-inputs", keep_inputs)):
        both = [n for n in split_names(given, flag) or () if n in names]
        if both:
            raise ConfigError(f"--drop and {flag} both name column '{both[0]}'; name it in only one of them")
    return names


def parse_hidden(value: str) -> tuple[int, ...]:
    """``--hidden 5,3`` -> ``(5, 3)``."""
    try:
        widths = tuple(int(v) for v in value.split(","))
    except ValueError as exc:
        raise ConfigError(f"--hidden takes comma-separated integers like 5 or 5,3, got {value!r}") from exc
    if any(w < 1 for w in widths):
        raise ConfigError(f"--hidden widths must be >= 1, got {value!r}")
    return widths


def discover_config(*, hidden: str = "5", grid_size: int = 5, steps: int | None = None, lamb: float | None = None,
                    theta: float = 1e-2, space: str = "auto", lib: str | None = None, r2_threshold: float = R2_THRESHOLD,
                    seed: int = 0, device: str = "cpu", finetune_steps: int | None = None,
                    complexity_weight: float | None = None, max_train_rows: int | None = None,
                    screen: bool = True, keep_inputs: str | None = None, time_limit: float | None = None):
    """The :class:`~kansym.discover.config.DiscoverConfig` of the parsed options (None: the default;
    for ``time_limit`` None is no limit, which ``kansym train`` runs under: it has no ``--time-limit``).

    Raises
    ------
    ConfigError
        From the config's own checks (e.g. a NaN ``lamb``).
    """
    from kansym.discover.config import DiscoverConfig

    defaults = DiscoverConfig()
    train = defaults.train.replace(**{k: v for k, v in (("steps", steps), ("lamb", lamb)) if v is not None})
    finetune = defaults.finetune if finetune_steps is None else defaults.finetune.replace(steps=finetune_steps)
    return DiscoverConfig(
        hidden=parse_hidden(hidden), grid_size=grid_size, train=train, finetune=finetune, theta=theta, space=space,
        library=split_names(lib, LIB_FLAG, LIB_EXAMPLE), r2_threshold=r2_threshold, seed=seed, device=device,
        complexity_weight=defaults.complexity_weight if complexity_weight is None else complexity_weight,
        max_train_rows=defaults.max_train_rows if max_train_rows is None else max_train_rows,
        screen=screen, keep_inputs=split_names(keep_inputs) or (),
        time_limit=time_limit,
    )


class NonNegativeFinite(click.ParamType):
    """A finite number >= 0 (click's ``FloatRange(min=0)`` lets ``nan`` and ``inf`` through)."""

    name = "float"

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not (number >= 0 and math.isfinite(number)):
            self.fail(f"{value} is not a finite number >= 0", param, ctx)
        return number


NON_NEGATIVE = NonNegativeFinite()


def data_options(fn):
    fn = click.option("--dropna", is_flag=True, help="Drop rows with NaN/inf in the used columns (and say how many).")(fn)
    fn = click.option("--example", default=None, help="Use a dataset shipped with kansym instead of a file: kepler, hello.")(fn)
    fn = click.option("--inputs", default=None, help="Comma-separated input columns (default: every other numeric column).")(fn)
    fn = click.option("--target", "-t", default=None, help="Column to predict.")(fn)
    fn = click.argument("data", required=False, type=click.Path(dir_okay=False))(fn)
    return fn


def symbolic_options(fn):
    fn = click.option("--r2-threshold", default=R2_THRESHOLD, show_default=True, type=click.FloatRange(0, 1, min_open=True), help="R² an edge's primitive must reach.")(fn)
    fn = click.option("--complexity-weight", default=0.05, show_default=True, type=NON_NEGATIVE, help="Weight w of the choice of formula: minimise log10(error) + w * complexity (1, 2 inputs: direct search vs the KAN's formula).")(fn)
    fn = click.option("--lib", default=None, help="Comma-separated primitive names for edges (default: all), e.g. sin,exp,x^2.")(fn)
    fn = click.option("--theta", default=1e-2, show_default=True, type=NON_NEGATIVE, help="Node pruning threshold theta (>= 0): a hidden node survives iff its largest incoming and outgoing edge scores both exceed it.")(fn)
    return fn


def model_options(fn):
    fn = click.option("--resume", default=None, type=click.Path(dir_okay=False), help="Continue the run interrupted (Ctrl-C or SIGTERM) into this checkpoint; give the same data.")(fn)
    fn = click.option("--space", type=click.Choice(["auto", "linear", "log"]), default="auto", show_default=True, help="Learn in log space (positive multiplicative laws) or linear space.")(fn)
    fn = click.option("--lamb", default=None, type=NON_NEGATIVE, help="Sparsification strength lamb (>= 0) of the L1 + entropy penalty.  [default: 0.2]")(fn)
    fn = click.option("--steps", default=None, type=click.IntRange(1, MAX_STEPS), help="LBFGS steps of the sparsifying training.  [default: 20]")(fn)
    fn = click.option("--grid-size", default=5, show_default=True, type=click.IntRange(min=1), help="B-spline grid intervals G.")(fn)
    fn = click.option("--hidden", default="5", show_default=True, help="Hidden layer widths, e.g. 5 or 5,3.")(fn)
    return fn


def size_options(fn):
    """``kansym fit``'s options on which rows and columns a run uses (issues 19, 37)."""
    fn = click.option("--drop", multiple=True, metavar="COLUMNS", help="Comma-separated columns to leave out of the inputs (repeatable), e.g. a copy of the target: kansym fit names a column that equals the target up to scale.")(fn)
    fn = click.option("--keep-inputs", default=None, help="Comma-separated input columns the input screening never drops.")(fn)
    fn = click.option("--no-screen", "no_screen", is_flag=True, help="Keep every input column: no screening before the KAN (by default columns that a held-out permutation test finds unused are dropped, with a notice).")(fn)
    fn = click.option("--max-train-rows", default=None, type=click.IntRange(min=10), help="Rows the KAN trains on at most (seeded sample of the fitting rows; the symbolic stages and the verification use the others too).  [default: 3000]")(fn)
    return fn
