import numpy as np
import pytest
import torch
from scipy.interpolate import BSpline

from kansym.nn.spline import bspline_basis, coef_to_curve, curve_to_coef, grid_from_samples, make_grid


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_basis_equals_scipy_bspline(k):
    grid = make_grid(-1.0, 1.0, 5, k, in_features=1, dtype=torch.float64)  # (1, G + 2k + 1)
    x = torch.linspace(-0.999, 0.999, 101, dtype=torch.float64)[:, None]
    ours = bspline_basis(x, grid, k)[:, 0, :].numpy()  # (101, G + k)
    knots = grid[0].numpy()
    n_basis = len(knots) - k - 1
    assert ours.shape == (101, n_basis)
    for i in range(n_basis):
        coef = np.zeros(n_basis)
        coef[i] = 1.0
        ref = BSpline(knots, coef, k, extrapolate=False)(x[:, 0].numpy())
        np.testing.assert_allclose(ours[:, i], np.nan_to_num(ref), atol=1e-12)
    # partition of unity inside the grid
    np.testing.assert_allclose(ours.sum(axis=1), 1.0, atol=1e-12)


def test_curve_to_coef_inverts_coef_to_curve():
    gen = torch.Generator().manual_seed(0)
    grid = make_grid(-1.0, 1.0, 7, 3, in_features=3, dtype=torch.float64)
    coef = torch.randn(4, 3, 10, generator=gen, dtype=torch.float64)
    x = torch.rand(500, 3, generator=gen, dtype=torch.float64) * 2 - 1
    y = coef_to_curve(x, grid, coef, 3)
    assert y.shape == (500, 4, 3)
    back = curve_to_coef(x, y, grid, 3, ridge=0.0)
    torch.testing.assert_close(back, coef, atol=1e-8, rtol=0)


def test_grid_from_samples_spans_data_and_is_sorted():
    x = torch.tensor([[0.0, -5.0], [1.0, 5.0], [3.0, 0.0], [2.0, 1.0]], dtype=torch.float64)
    grid = grid_from_samples(x, 3, 2, grid_eps=1.0)
    assert grid.shape == (2, 3 + 2 * 2 + 1)
    torch.testing.assert_close(grid[:, 2], torch.tensor([0.0, -5.0], dtype=torch.float64))
    torch.testing.assert_close(grid[:, -3], torch.tensor([3.0, 5.0], dtype=torch.float64))
    assert torch.all(grid[:, 1:] > grid[:, :-1])
    torch.testing.assert_close(grid[0], torch.arange(-2.0, 6.0, dtype=torch.float64))
