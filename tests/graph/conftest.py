"""Fixtures for graph tests."""

from __future__ import annotations

import pytest

from graph_fakes import fake_kan


@pytest.fixture
def pruned_kan():
    """Width (3, 4, 2): input 2 unused, hidden 1 has no way out, hidden 3 no way in.

    Live paths: x0 -> h0 -> y0, x1 -> h2 -> y1, x0 -> h2.
    """
    m0 = [  # (out=4, in=3)
        [1, 0, 0],
        [1, 1, 0],
        [1, 1, 0],
        [0, 0, 0],
    ]
    m1 = [  # (out=2, in=4)
        [1, 0, 0, 1],
        [0, 0, 1, 0],
    ]
    return fake_kan((3, 4, 2), [m0, m1])
