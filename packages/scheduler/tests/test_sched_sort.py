"""sort and argsort against numpy's stable sort, by both of their algorithms: the rank count (rows x n^2 comparisons,
one kernel) and the bitonic merge network taken from SORT_NETWORK_COMPARISONS on (O(n log^2 n))."""

import contextlib
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor, dtypes
from uop_scheduler import reduce as reduce_module


def stable_order(x: np.ndarray, descending: bool) -> np.ndarray:
    """numpy's stable order along the last axis with PyTorch's rules: NaN the largest value, -0.0 equal to 0.0, equal
    elements in index order in both directions."""
    if x.dtype.kind == "f":
        x = x.astype(np.float64)
        nan = np.isnan(x)
        key = np.where(nan, 0.0, x)
        # NaN above everything: a second, more significant key
        return np.lexsort((np.broadcast_to(np.arange(x.shape[-1]), x.shape), -key if descending else key, ~nan if descending else nan), axis=-1)
    return np.argsort(~x if descending else x, axis=-1, kind="stable")  # (~ reverses the order of ints and bools)


def special_floats(rng, shape, dtype):
    x = rng.choice(np.array([-2, -1, -0.0, 0.0, 0.5, 1, 3, np.inf, -np.inf, np.nan], np.float32), size=shape)
    return np.where(rng.random(shape) < 0.5, rng.standard_normal(shape) * 4, x).astype(dtype)


@contextlib.contextmanager
def sorting_by(algorithm: str):
    kept = reduce_module.SORT_NETWORK_COMPARISONS
    reduce_module.SORT_NETWORK_COMPARISONS = 1 << 62 if algorithm == "ranks" else 0
    try:
        yield
    finally:
        reduce_module.SORT_NETWORK_COMPARISONS = kept


@pytest.mark.parametrize("algorithm", ["ranks", "network"])
@settings(max_examples=25, deadline=None, derandomize=True)
@given(data=st.data())
def test_sort_matches_numpys_stable_order_property(algorithm, data):
    dtype = data.draw(st.sampled_from([np.float32, np.float16, np.int8, np.uint8, np.int32, np.uint32, np.bool_, np.float64, np.int64, np.uint64]))
    shape = tuple(data.draw(st.lists(st.sampled_from([1, 2, 5, 16, 33, 64, 100]), min_size=1, max_size=3)))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    descending = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 1 << 16)))
    if dtype in (np.float32, np.float16, np.float64):
        x = special_floats(rng, shape, dtype)
    elif dtype in (np.uint32, np.uint64):
        bits = 8 * np.dtype(dtype).itemsize
        x = rng.choice(np.array([0, 1, 7, 1 << (bits - 1), (1 << bits) - 1], dtype), size=shape)
    elif dtype is np.bool_:
        x = rng.random(shape) < 0.5
    else:
        info = np.iinfo(dtype)
        x = rng.choice(np.array([info.min, info.min + 1, -1 if info.min else 0, 0, 3, info.max], np.int64), size=shape).astype(dtype)
    with sorting_by(algorithm):
        values, indices = Tensor(x).sort(dim, descending)
    moved = np.moveaxis(x, dim, -1)
    order = stable_order(moved, descending)
    np.testing.assert_array_equal(indices.numpy(), np.moveaxis(order, -1, dim))
    np.testing.assert_array_equal(values.numpy(), np.moveaxis(np.take_along_axis(moved, order, -1), -1, dim))
    assert values.dtype is Tensor(x).dtype and indices.dtype is dtypes.int32


@pytest.mark.parametrize("algorithm", ["ranks", "network"])
def test_negative_zero_and_nan_keep_their_values(algorithm):
    # the network sorts canonical keys (-0.0 as 0.0, every NaN as one NaN) but returns the elements themselves
    x = np.array([0.0, -0.0, np.nan, -np.nan, -0.0, 1.0], np.float32)
    with sorting_by(algorithm):
        values, indices = Tensor(x).sort()
    np.testing.assert_array_equal(indices.numpy(), [0, 1, 4, 5, 2, 3])
    np.testing.assert_array_equal(np.signbit(values.numpy()), np.signbit(x[[0, 1, 4, 5, 2, 3]]))


def test_a_long_axis_sorts_in_n_log_n():
    # 2^18 elements: 2^36 comparisons for the rank count (minutes), 171 steps of the network
    x = np.random.default_rng(0).standard_normal(1 << 18).astype(np.float32)
    start = time.perf_counter()
    values, indices = Tensor(x).sort(descending=True)
    np.testing.assert_array_equal(indices.numpy(), np.argsort(-x, kind="stable"))
    np.testing.assert_array_equal(values.numpy(), -np.sort(-x))
    assert time.perf_counter() - start < 60
