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
