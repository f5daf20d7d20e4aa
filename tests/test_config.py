import pytest

from kansym.errors import ConfigError
from kansym.gpt.config import GPTTrainConfig, KANGPTConfig
from kansym.nn.config import KANConfig
from kansym.discover import DiscoverConfig
from kansym.train.fit import TrainConfig


@pytest.mark.parametrize("cls, changes", [
    (KANConfig, {"width": (3, 4, 1), "grid_size": 7}),
    (TrainConfig, {"lamb": 0.3, "steps": 5}),
    (KANGPTConfig, {"kan_grid_size": 7}),
    (GPTTrainConfig, {"max_iters": 7}),
])
def test_round_trip_replace_and_unknown_keys(cls, changes):
    cfg = cls().replace(**changes)
    data = cfg.to_dict()
    assert all(not isinstance(v, tuple) for v in data.values())  # plain lists for checkpoints
    assert cls.from_dict(data) == cfg
    for key, value in changes.items():
        assert getattr(cfg, key) == value
    with pytest.raises(ConfigError, match=f"unknown {cls.__name__} fields: bogus"):
        cls.from_dict({**data, "bogus": 1})


def test_replace_validates_again_and_nested_configs_become_dicts():
    with pytest.raises(ConfigError, match="grid_size"):
        KANConfig().replace(grid_size=0)
    data = DiscoverConfig(hidden=(3,)).to_dict()
    assert data["hidden"] == [3] and data["train"]["lamb"] == TrainConfig().lamb


def test_the_configs_import_without_torch_and_the_packages_keep_their_names():
    import subprocess
    import sys

    code = ("import sys\nfrom kansym.discover.config import DiscoverConfig\nDiscoverConfig()\n"
            "print(sorted(m for m in ('torch', 'sympy', 'networkx') if m in sys.modules))\n"
            "import importlib, kansym.train.fit, kansym.train as t, kansym.nn as nn, kansym.discover as d\n"
            "print(t.fit.__name__, t.regularization.__name__, t.fit is importlib.import_module('kansym.train.fit').fit,"
            " nn.KAN.__name__, d.discover.__module__, d.Formula.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["[]", "fit regularization True KAN kansym.discover.run Formula"]


@pytest.mark.parametrize("make, message", [
    (lambda: TrainConfig(lamb="abc"), "lamb must be a number, got 'abc'"),
    (lambda: TrainConfig(steps=2.5), "steps must be an integer, got 2.5"),
    (lambda: TrainConfig(lr=True), "lr must be a number, got True"),
    (lambda: DiscoverConfig(theta="x"), "theta must be a number, got 'x'"),
    (lambda: DiscoverConfig(max_train_rows=3000.0), "max_train_rows must be an integer, got 3000.0"),
    (lambda: DiscoverConfig(hidden=("a",)), "hidden widths must be integers, got ('a',)"),
])
def test_a_value_of_the_wrong_type_is_one_config_error(make, message):
    # regression (fresh-user check, 2026-12-07): KANRegressor(lamb='abc').fit raised a raw
    # TypeError ('>=' not supported between instances of 'str' and 'int')
    with pytest.raises(ConfigError) as info:
        make()
    assert str(info.value) == message
