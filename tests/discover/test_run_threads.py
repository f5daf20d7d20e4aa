"""discover holds numpy/scipy's BLAS to the training's thread count (kansym.discover.run._blas_threads)."""

import pytest

from kansym.discover.run import _blas_threads


def test_blas_threads_are_held_within_the_block_and_restored():
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads():
        return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]

    before = blas_threads()
    if not before:
        pytest.skip("no BLAS library loaded that threadpoolctl can see")
    with _blas_threads(1):
        assert blas_threads() == [1] * len(before)
    assert blas_threads() == before
    with _blas_threads(None):  # None leaves BLAS alone
        assert blas_threads() == before
