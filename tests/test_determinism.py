"""Same data, seed and options -> the same model state and the same formula."""

import numpy as np
import pytest
import torch

from kansym.io.tabular import embedded_dataset, read_table
from kansym.discover import discover


@pytest.mark.slow
def test_same_seed_same_state_and_formula():
    table = read_table(embedded_dataset("hello"), "f")
    runs = [discover(table.x, table.y, table.input_names, table.target_names, progress=False) for _ in range(2)]
    for bundle in ("trained", "pruned"):
        a = getattr(runs[0], bundle).model.state_dict()
        b = getattr(runs[1], bundle).model.state_dict()
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), (bundle, key)
    assert str(runs[0].formulas[0].expr) == str(runs[1].formulas[0].expr)
    np.testing.assert_array_equal(runs[0].pruned.x_cal, runs[1].pruned.x_cal)
