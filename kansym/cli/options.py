"""Options shared by ``kansym fit`` and ``kansym train``: the data, the model, the symbolic stage.

The options that set a :class:`~kansym.discover.config.DiscoverConfig` field are generated from
:data:`~kansym.discover.config.SETTINGS` (:func:`setting_option`): flag, type and range, help
and default come from there, never restated here. The CLI only parses: click's types check
ranges (and name the flag), and :func:`discover_config` hands the values to the config, whose
own checks (finite values, known primitives) are the only others.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import click

from kansym.cli.common import CLIError
from kansym.discover.config import SETTINGS, Setting, setting, settings_config
from kansym.errors import ConfigError

__all__ = ["EXAMPLES", "NON_NEGATIVE", "data_options", "model_options", "symbolic_options", "resolve_data", "split_names",
           "parse_hidden", "discover_config", "size_options", "parse_drop", "setting_option", "option_flag",
           "OPTION_SETTINGS"]

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


def discover_config(options: Mapping[str, Any]):
    """The :class:`~kansym.discover.config.DiscoverConfig` of a command's parsed options
    (``ctx.params``): each setting's option (:data:`OPTION_SETTINGS`) that has a value, parsed,
    over the config's defaults; the other entries are not settings and are ignored.

    Raises
    ------
    ConfigError
        A list option that names nothing, or the config's own checks (e.g. a NaN ``lamb``).
    """
    values = {}
    for key, value in options.items():
        row = OPTION_SETTINGS.get(key)
        if row is not None and value is not None:
            values[row.name] = _parsed(row, value)
    return settings_config(values)


def _parsed(row: Setting, value: Any) -> Any:
    """The setting's value of its option's ``value``: lists split, a switch's flag turned into the
    setting, the ``off`` value (``--time-limit 0``) into None."""
    if row.kind == "ints":
        return parse_hidden(value)
    if row.kind == "names":
        what, example = (LIB_FLAG, LIB_EXAMPLE) if row.name == "library" else (option_flag(row), "one column")
        return split_names(value, what, example)
    if row.kind == "switch":
        return (not row.default()) if value else row.default()
    if row.off is not None and value == row.off:
        return None
    return value


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


def option_flag(row: Setting) -> str:
    """The command line's flag of the setting ``row``: ``--name`` with dashes, ``--no-name`` for a switch
    on by default, or the row's own :attr:`~kansym.discover.config.Setting.flag`."""
    if row.flag:
        return row.flag
    dashed = row.name.replace("_", "-")
    return f"--no-{dashed}" if row.kind == "switch" and row.default() else f"--{dashed}"


def _click_type(row: Setting) -> click.ParamType | None:
    """A number's range, or the choices, as click checks them (its message names the flag)."""
    if row.kind == "choice":
        return click.Choice(list(row.choices))
    if row.kind == "int":
        return click.IntRange(row.low, row.high)
    if row.kind == "float" and row.low == 0 and row.high is None and not row.low_open:
        return NON_NEGATIVE
    if row.kind == "float":
        return click.FloatRange(row.low, row.high, min_open=row.low_open)
    return None


def setting_option(name: str, **overrides: Any) -> Callable:
    """The click option of the setting ``name`` of :data:`~kansym.discover.config.SETTINGS`: its
    flag (:func:`option_flag`), type and range, help (meaning, then the command line's syntax) and
    the config's default, shown in ``--help``; ``overrides`` adds click arguments (``metavar``)."""
    row = setting(name)
    default = row.default()
    text = " ".join(t for t in (row.help, row.cli) if t)
    if row.off is not None:
        text = f"{text} {row.off:g}: {row.none}."
    if row.kind == "switch":
        kwargs: dict[str, Any] = {"is_flag": True}
    elif row.kind in ("ints", "names"):
        shown = ",".join(str(v) for v in default) if default else None
        kwargs = {"default": shown, "show_default": True if shown else row.none or False}
    else:
        kwargs = {"default": default, "show_default": True, "type": _click_type(row)}
    return click.option(option_flag(row), **{**kwargs, "help": text, **overrides})


def symbolic_options(fn):
    for name in ("r2_threshold", "complexity_weight", "library", "theta"):
        fn = setting_option(name)(fn)
    return fn


def model_options(fn):
    fn = click.option("--resume", default=None, type=click.Path(dir_okay=False), help="Continue the run interrupted (Ctrl-C or SIGTERM) into this checkpoint; give the same data.")(fn)
    for name in ("space", "lamb", "steps", "grid_size", "hidden"):
        fn = setting_option(name)(fn)
    return fn


def size_options(fn):
    """``kansym fit``'s options on which rows and columns a run uses (issues 19, 37)."""
    fn = click.option("--drop", multiple=True, metavar="COLUMNS", help="Comma-separated columns to leave out of the inputs (repeatable), e.g. a copy of the target: kansym fit names a column that equals the target up to scale.")(fn)
    for name in ("keep_inputs", "screen", "max_train_rows"):
        fn = setting_option(name)(fn)
    return fn


OPTION_SETTINGS = {option_flag(s).lstrip("-").replace("-", "_"): s for s in SETTINGS}
"""The setting each option sets, by the option's parameter name (``lib``: ``library``, ``no_screen``: ``screen``)."""
