import pytest
import torch

from kansym.errors import ConfigError
from kansym.nn import KAN, KANConfig
from kansym.prune.prune import PruneReport, mask_nodes, prune, subset
from kansym.prune.scores import edge_scores, input_scores, node_scores


def _constant_kan():
    """(2, 3, 1) KAN whose edges are constants (spline only, no residual).

    B-splines sum to one inside the grid, so edge (j, i) of layer 0 is c0[j, i] for any
    input in [-1, 1]; hidden node values sum(c0[j]) stay inside [-1, 1], so layer 1's
    edges are the constants c1[0, j]. Scores |phi|_1 are then |c| exactly.
    """
    model = KAN(KANConfig(width=(2, 3, 1), grid_size=4)).double()
    c0 = torch.tensor([[0.30, -0.20], [0.005, 0.002], [-0.10, 0.40]], dtype=torch.float64)  # (3, 2)
    c1 = torch.tensor([[0.50, 0.80, 0.004]], dtype=torch.float64)  # (1, 3)
    with torch.no_grad():
        for layer, c in zip(model.layers, (c0, c1)):
            layer.scale_base.zero_()
            layer.scale_sp.fill_(1.0)
            layer.coef.copy_(c.unsqueeze(-1).expand_as(layer.coef))
    return model, c0, c1


X = torch.rand(64, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 1.8 - 0.9


def test_scores_by_hand():
    model, c0, c1 = _constant_kan()
    edges = edge_scores(model, X)
    torch.testing.assert_close(edges[0], c0.abs())
    torch.testing.assert_close(edges[1], c1.abs())
    ((inc, out),) = node_scores(model, X)
    # I_i = max_j |c0[i, j]|, O_i = |c1[0, i]|
    torch.testing.assert_close(inc, torch.tensor([0.30, 0.005, 0.40], dtype=torch.float64))
    torch.testing.assert_close(out, torch.tensor([0.50, 0.80, 0.004], dtype=torch.float64))
    torch.testing.assert_close(input_scores(model, X), torch.tensor([0.30, 0.40], dtype=torch.float64))


def test_prune_keeps_nodes_above_theta_in_both_directions():
    model, _, _ = _constant_kan()
    result = prune(model, X, theta=1e-2)
    # node 1: I = 0.005 (dead); node 2: O = 0.004 (dead); node 0 survives
    assert result.kept == ((0, 1), (0,), (0,))
    assert result.model.width == (2, 1, 1)
    assert result.report.removed_nodes == {1: [1, 2]}
    assert result.report.width_before == [2, 3, 1] and result.report.width_after == [2, 1, 1]
    assert result.report.forced == {}
    assert "[2, 3, 1] -> [2, 1, 1]" in result.report.summary()
    d = result.report.to_dict()
    assert d["removed_nodes"] == {"1": [1, 2]} and d["theta"] == 1e-2
    assert model.width == (2, 3, 1)  # input unchanged


def test_all_nodes_below_theta_keeps_the_best_and_says_so():
    model, _, _ = _constant_kan()
    result = prune(model, X, theta=0.9)
    assert result.kept[1] == (0,)  # min(I, O) = [0.30, 0.005, 0.004]
    assert result.report.forced == {1: 0}
    assert "kept the best one" in result.report.summary()


def _random_kan(width=(3, 6, 4, 2), seed=0):
    model = KAN(KANConfig(width=width, grid_size=5, seed=seed)).double()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in model.layers:
            layer.coef.copy_(torch.randn(layer.coef.shape, generator=gen, dtype=torch.float64))
            # a few weak nodes: scale down some outgoing or incoming edges
        model.layers[0].scale_sp[1].mul_(1e-4)
        model.layers[0].scale_base[1].mul_(1e-4)  # hidden node (1, 1) has weak inputs
        model.layers[1].scale_sp[:, 3].mul_(1e-4)
        model.layers[1].scale_base[:, 3].mul_(1e-4)  # hidden node (1, 3) has weak outputs
        model.layers[2].scale_sp[:, 0].mul_(1e-4)
        model.layers[2].scale_base[:, 0].mul_(1e-4)  # hidden node (2, 0) has weak outputs
        model.layers[0].scale_sp[:, 2].mul_(1e-4)
        model.layers[0].scale_base[:, 2].mul_(1e-4)  # input 2 unused
    return model


def test_pruned_model_equals_masked_model():
    model = _random_kan()
    x = torch.rand(200, 3, dtype=torch.float64) * 2 - 1
    result = prune(model, x, theta=1e-2)
    assert result.kept == ((0, 1, 2), (0, 2, 4, 5), (1, 2, 3), (0, 1))
    assert result.model.width == (3, 4, 3, 2)
    masked = mask_nodes(model, result.kept)
    assert masked.width == model.width
    torch.testing.assert_close(result.model(x), masked(x), atol=1e-12, rtol=0)
    assert not torch.allclose(model(x), masked(x))  # the removed nodes did contribute a little
    assert model.layers[0].mask.min() == 1.0  # mask_nodes copies


def test_input_pruning():
    model = _random_kan()
    x = torch.rand(200, 3, dtype=torch.float64) * 2 - 1
    result = prune(model, x, theta=1e-2, prune_inputs=True)
    assert result.kept[0] == (0, 1)
    assert result.report.removed_inputs == [2]
    masked = mask_nodes(model, result.kept)
    torch.testing.assert_close(result.model(x[:, [0, 1]]), masked(x), atol=1e-12, rtol=0)


def test_subset_slices_grids_per_input():
    model = _random_kan()
    x = torch.rand(100, 3, dtype=torch.float64) * 4 - 2
    model.update_grid(x)  # different grids per feature
    kept = ((0, 2), (1, 5), (0, 3), (1,))
    small = subset(model, kept)
    torch.testing.assert_close(small.layers[0].grid, model.layers[0].grid[[0, 2]])
    torch.testing.assert_close(small.layers[1].grid, model.layers[1].grid[[1, 5]])
    torch.testing.assert_close(small.layers[1].coef, model.layers[1].coef[[0, 3]][:, [1, 5]])
    torch.testing.assert_close(small(x[:, [0, 2]]), mask_nodes(model, kept)(x)[:, [1]], atol=1e-12, rtol=0)


def test_errors():
    model, _, _ = _constant_kan()
    with pytest.raises(ConfigError):
        prune(model, X, theta=-1.0)
    with pytest.raises(ConfigError):
        prune(model, X[:, :1])
    with pytest.raises(ConfigError):
        mask_nodes(model, ((0, 1), (0,)))
    with pytest.raises(ConfigError):
        mask_nodes(model, ((0, 1), (5,), (0,)))


def test_report_is_frozen():
    report = prune(_constant_kan()[0], X).report
    assert isinstance(report, PruneReport)
    with pytest.raises(AttributeError):
        report.theta = 1.0
