"""topk of a few elements of a long axis picks them one by one (`ReduceMixin._top_by_picks`) instead of sorting the
whole axis, where its cost estimate says picking is cheaper: the same values and indices as the stable sort gives, ties
in index order, NaN above +inf (PyTorch's rule), along any axis, for ints too; and the work bounded by about k * n."""

import numpy as np
import pytest
from uop_scheduler import Tensor
from uop_scheduler.helpers import GlobalCounters
from uop_scheduler.reduce import TOPK_PICKS, _top_cost


def reference(x: np.ndarray, k: int, axis: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    if x.dtype.kind == "f":  # NaN above +inf: a second, more significant key
        nan = np.isnan(x)
        key = np.where(nan, 0.0, x).astype(np.float64)
        order = np.lexsort((-key, ~nan) if largest else (key, nan), axis=axis)
        index = np.take(order, np.arange(k), axis=axis)
        return np.take_along_axis(x, index, axis), index
    key = x.astype(np.int64)
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
    x[17, 41] = x[300, 41] = x[5, 3] = np.inf  # (NaN above +inf)
    x[6, :] = -0.0  # (-0.0 equal to 0.0: index order)
    x[6, ::3] = 0.0
    for k in (1, 7, 16, TOPK_PICKS):
        values, indices = Tensor(x).topk(k, dim=axis, largest=largest)
        picked = Tensor(x)._top_by_picks(k, axis, largest)  # (the estimate sorts for the largest k here)
        want_v, want_i = reference(x, k, axis, largest)
        for v, i in ((values, indices), picked):
            np.testing.assert_array_equal(i.numpy(), want_i)
            np.testing.assert_array_equal(v.numpy(), want_v)
            assert np.array_equal(np.signbit(v.numpy()), np.signbit(want_v))
            assert i.dtype.name == "int" and v.shape == want_v.shape


def test_integer_picks_and_the_sorted_path_agree():
    rng = np.random.default_rng(5)
    x = rng.integers(-4, 4, (6, 300)).astype(np.int32)
    for k in (3, 16, TOPK_PICKS + 1):  # the last is ranked by the sort
        want_v, want_i = reference(x, k, 1, True)
        for values, indices in (Tensor(x).topk(k), Tensor(x)._top_by_picks(k, 1, True)):
            np.testing.assert_array_equal(indices.numpy(), want_i)
            np.testing.assert_array_equal(values.numpy(), want_v)


def test_topk_picks_where_its_estimate_says_picking_is_cheaper():
    # a sampler's top 10 of a 32000-word vocabulary is picked; 40 of it, or 10 of one row of 4096 (ranked in one kernel),
    # are sorted
    assert [p < s for p, s in (_top_cost(1, 32000, 10), _top_cost(1, 32000, 40), _top_cost(1, 4096, 10))] == [True, False, False]


def test_a_few_of_many_costs_k_n_not_n_squared():
    n = 4096
    t = Tensor(np.random.default_rng(6).standard_normal((8, n)).astype(np.float32)).realize()
    GlobalCounters.reset()
    values, _ = t.topk(10)
    values.realize()
    assert GlobalCounters.global_ops < 8 * n * 10 * 40, GlobalCounters.global_ops  # the sort's ranks: 8 * n * n * 4
