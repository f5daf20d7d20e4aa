"""One source of settings (issue 35, point 5): the options of ``kansym fit``/``train``/``prune``/
``symbolify`` and the parameters of ``KANRegressor`` are generated from
:data:`kansym.discover.config.SETTINGS`, whose defaults are ``DiscoverConfig``'s."""

from __future__ import annotations

import inspect
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from kansym.cli.fit import fit_command
from kansym.cli.main import cli
from kansym.cli.options import OPTION_SETTINGS, discover_config, option_flag
from kansym.cli.prune import prune_command
from kansym.cli.symbolify import symbolify_command
from kansym.cli.train import train_command
from kansym.discover.config import SETTINGS, DiscoverConfig, settings_config
from kansym.errors import ConfigError

COMMANDS = [fit_command, train_command, prune_command, symbolify_command]


def _setting_options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and p.name in OPTION_SETTINGS]


def _unset(command: click.Command) -> dict:
    """What the command's options hold when none is given (as ``ctx.params`` would)."""
    ctx = click.Context(command)
    return {o.name: o.process_value(ctx, o.consume_value(ctx, {})[0])
            for o in command.params if isinstance(o, click.Option)}


def _field(config: DiscoverConfig, dotted: str):
    for part in dotted.split("."):
        config = getattr(config, part)
    return config


def test_the_table_names_real_fields_with_their_config_defaults():
    config = DiscoverConfig()
    assert {s.default() for s in SETTINGS if s.name == "r2_threshold"} == {0.999}
    for s in SETTINGS:
        assert s.default() == _field(config, s.field), s.name
    assert [s.default() for s in SETTINGS if s.name in ("steps", "lamb", "theta", "time_limit", "max_train_rows")] == \
        [20, 0.2, 1e-2, 3000, 300.0]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_each_generated_option_defaults_to_the_config(command):
    options = _setting_options(command)
    assert options, command.name
    config, unset = DiscoverConfig(), _unset(command)
    for option in options:
        setting = OPTION_SETTINGS[option.name]
        assert option.opts == [option_flag(setting)]
        # the option's default, parsed as the command parses it, is the config's value
        parsed = discover_config({option.name: unset[option.name]})
        assert _field(parsed, setting.field) == _field(config, setting.field), option.name


def test_fit_and_train_with_no_option_give_the_default_config():
    assert discover_config(_unset(fit_command)) == DiscoverConfig()
    assert discover_config(_unset(train_command)).replace(time_limit=None) == DiscoverConfig(time_limit=None)
    assert {o.name for o in _setting_options(fit_command)} >= {
        "hidden", "grid_size", "steps", "lamb", "space", "theta", "lib", "r2_threshold", "complexity_weight",
        "max_train_rows", "no_screen", "keep_inputs", "finetune_steps", "time_limit", "seed", "device"}


def test_fit_help_shows_the_config_defaults():
    text = " ".join(CliRunner().invoke(cli, ["fit", "--help"], terminal_width=400).output.split())
    for flag, shown in [("--steps", "[default: 20; 1<=x<=1000000000]"), ("--lamb", "[default: 0.2]"),
                        ("--theta", "[default: 0.01]"), ("--r2-threshold", "[default: 0.999; 0<x<=1]"),
                        ("--complexity-weight", "[default: 0.05]"), ("--max-train-rows", "[default: 3000; x>=10]"),
                        ("--finetune-steps", "[default: 20; 1<=x<=1000000000]"), ("--time-limit", "[default: 300.0]"),
                        ("--grid-size", "[default: 5; x>=1]"), ("--hidden", "[default: 5]"),
                        ("--space", "[default: auto]"), ("--lib", "[default: (all)]")]:
        line = text[text.index(flag + " "):]
        line = line[:line.index("--", len(flag) + 1) if "--" in line[len(flag) + 1:] else len(line)]
        assert shown in line, (flag, line)


def test_every_setting_of_a_config_field_is_in_the_configs_docstring():
    doc = inspect.getdoc(DiscoverConfig)
    for s in SETTINGS:
        top = s.field.partition(".")[0]
        assert f"\n{top} :" in doc or f", {top} :" in doc or f"\n{top}, " in doc, top


def test_the_options_ranges_are_the_configs():
    # a number just outside the option's range is what the config refuses too (the CLI only says it first)
    for s in SETTINGS:
        if s.kind not in ("int", "float") or s.low is None:
            continue
        step = 1 if s.kind == "int" else 1e-9
        if s.off is None or s.low != s.off:
            settings_config({s.name: s.low + (step if s.low_open else 0)})  # the bound itself is valid
        with pytest.raises(ConfigError):
            settings_config({s.name: s.low - step if not s.low_open else s.low})
        if s.high is not None:
            settings_config({s.name: s.high})
            with pytest.raises(ConfigError):
                settings_config({s.name: s.high + step})


def test_estimator_parameters_are_the_settings_with_the_config_defaults():
    from kansym import KANRegressor

    params = KANRegressor().get_params()
    names = {s.name: s for s in SETTINGS}
    assert set(params) - set(names) == {"units"} and params["units"] is None
    config = DiscoverConfig()
    for name, value in params.items():
        if name != "units":
            assert value == _field(config, names[name].field), name
    assert KANRegressor()._config() == DiscoverConfig()
    assert KANRegressor(steps=7, library=["sin", "x"])._config() == \
        DiscoverConfig(train=DiscoverConfig().train.replace(steps=7), library=("sin", "x"))
    doc = inspect.getdoc(KANRegressor)
    for name in params:
        assert f"\n{name} : " in doc, name
    assert "theta : float, default=0.01" in doc and "{settings}" not in doc


def test_the_cli_and_its_help_import_neither_torch_nor_numpy_before_work():
    code = ("import sys\nfrom kansym.cli.main import cli\nprint('NUMPY', 'numpy' in sys.modules)\n"
            "try:\n    cli(['fit', '--help'], prog_name='kansym')\nexcept SystemExit:\n    pass\n"
            "print('TORCH', 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("NUMPY False")  # the options read the config, which stays light
    assert "--r2-threshold" in out and out.strip().endswith("TORCH False")
