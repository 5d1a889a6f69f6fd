"""topk of a few elements of a long axis picks them one by one (`ReduceMixin._top_by_picks`) instead of ranking the
whole axis (n^2 comparisons per row): the same values and indices as the stable sort gives, ties in index order, NaN as
the largest value (PyTorch's rule), along any axis, for ints too; and the work bounded by about k^2 * n."""

import numpy as np
import pytest
from uop_scheduler import Tensor
from uop_scheduler.helpers import GlobalCounters
from uop_scheduler.reduce import TOPK_PICKS


def reference(x: np.ndarray, k: int, axis: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    key = np.where(np.isnan(x), np.inf, x) if x.dtype.kind == "f" else x.astype(np.int64)
    order = np.argsort(-key if largest else key, axis=axis, kind="stable")
    index = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, index, axis), index


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("axis", [0, 1])
def test_picks_match_the_stable_sort_with_ties_and_nans(largest, axis):
    rng = np.random.default_rng(axis + 2 * largest)
    x = rng.standard_normal((600, 700)).astype(np.float32)
    x[5, :] = 3.0  # ties along axis 1
    x[:, 9] = np.round(x[:, 9])  # ties along axis 0
    x[17, 40] = x[300, 40] = np.nan
    for k in (1, 7, TOPK_PICKS):
        values, indices = Tensor(x).topk(k, dim=axis, largest=largest)
        want_v, want_i = reference(x, k, axis, largest)
        np.testing.assert_array_equal(indices.numpy(), want_i)
        np.testing.assert_array_equal(values.numpy(), want_v)
        assert indices.dtype.name == "int" and values.shape == want_v.shape


def test_integer_picks_and_the_sorted_path_agree():
    rng = np.random.default_rng(5)
    x = rng.integers(-4, 4, (6, 300)).astype(np.int32)
    for k in (3, TOPK_PICKS, TOPK_PICKS + 1):  # the last is ranked by the sort
        values, indices = Tensor(x).topk(k)
        want_v, want_i = reference(x, k, 1, True)
        np.testing.assert_array_equal(indices.numpy(), want_i)
        np.testing.assert_array_equal(values.numpy(), want_v)


def test_a_few_of_many_costs_k_squared_n_not_n_squared():
    n = 4096
    t = Tensor(np.random.default_rng(6).standard_normal((8, n)).astype(np.float32)).realize()
    GlobalCounters.reset()
    values, _ = t.topk(10)
    values.realize()
    assert GlobalCounters.global_ops < 8 * n * 10 * 10 * 8, GlobalCounters.global_ops  # the sort's ranks: 8 * n * n * 4
