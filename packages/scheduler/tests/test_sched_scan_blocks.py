"""Running sums, products and maxima along long axes are scanned in blocks (`ReduceMixin._running`): each block of
SCAN_BLOCK elements, then the blocks' totals, combined. A cumsum over 2^20 elements was an (n, n) masked sum (2^40
compare-and-adds: minutes); values against float64 numpy, dtypes as the short form gives them, infinities and NaNs
carried forward as numpy does, and the work the kernels do bounded by about n * SCAN_BLOCK."""

import numpy as np
import pytest
from uop_scheduler import Tensor
from uop_scheduler.helpers import GlobalCounters
from uop_scheduler.reduce import SCAN_BLOCK


@pytest.mark.parametrize("n", [2 * SCAN_BLOCK + 1, 1000, 4097, 70_000])
def test_long_cumsum_matches_float64_numpy(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    got = Tensor(x).cumsum(0).numpy()
    exact = np.cumsum(x.astype(np.float64))
    # float32 rounding of running values up to ~sqrt(n): numpy's own sequential float32 cumsum is further off
    assert np.max(np.abs(got - exact)) <= max(1e-3, 4 * np.max(np.abs(np.cumsum(x) - exact)))


def test_scans_along_an_inner_axis_of_a_batch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 700, 5)).astype(np.float32)
    np.testing.assert_allclose(Tensor(x).cumsum(1).numpy(), np.cumsum(x.astype(np.float64), 1), rtol=1e-4, atol=1e-4)
    values, indices = Tensor(x).cummax(1)
    np.testing.assert_array_equal(values.numpy(), np.maximum.accumulate(x, 1))
    first = np.array([[[int(np.argmax(x[b, : i + 1, c])) for c in range(5)] for i in range(700)] for b in range(3)])
    np.testing.assert_array_equal(indices.numpy(), first)
    np.testing.assert_array_equal(Tensor(x).cummin(1)[0].numpy(), np.minimum.accumulate(x, 1))


def test_long_cumprod_and_integer_and_bool_scans_keep_the_short_forms_dtypes():
    rng = np.random.default_rng(2)
    signs = rng.choice(np.array([-1.0, 1.0, 1.0625], np.float32), 600)
    np.testing.assert_allclose(Tensor(signs).cumprod(0).numpy(), np.cumprod(signs.astype(np.float64)), rtol=1e-5)
    for dtype in (np.int8, np.uint8, np.int32, np.bool_):
        short, long = (rng.integers(0, 3, n).astype(dtype) for n in (100, 1000))
        assert Tensor(short).cumsum(0).dtype == Tensor(long).cumsum(0).dtype
        np.testing.assert_array_equal(Tensor(long).cumsum(0).numpy(), np.cumsum(long.astype(np.int64)))


def test_infinities_and_nans_are_carried_forward():
    x = np.array([1.0, np.inf, 2.0, np.nan, -np.inf] + [1.0] * 500, np.float32)
    np.testing.assert_array_equal(Tensor(x).cumsum(0).numpy(), np.cumsum(x))
    y = np.array([1.0, 5.0, np.nan, 2.0] + list(range(500)), np.float32)
    np.testing.assert_array_equal(Tensor(y).cummax(0)[0].numpy(), np.maximum.accumulate(y))
    z = np.array([3.0] * 300 + [-np.inf] + [0.0] * 300, np.float32)
    np.testing.assert_array_equal(Tensor(z).cumsum(0).numpy(), np.cumsum(z))


def test_the_work_grows_as_n_times_the_block_not_n_squared():
    n = 1 << 16
    t = Tensor(np.ones(n, np.float32)).realize()
    GlobalCounters.reset()
    out = t.cumsum(0).numpy()
    np.testing.assert_array_equal(out, np.arange(1, n + 1, dtype=np.float32))
    assert GlobalCounters.global_ops < 8 * n * SCAN_BLOCK, GlobalCounters.global_ops


def test_only_cheap_arithmetic_on_aranges_is_kept_out_of_buffers():
    from uop_scheduler.schedule import _index_arithmetic

    n = 300
    rows, cols = Tensor.arange(n).reshape(n, 1), Tensor.arange(n).reshape(1, n)
    assert _index_arithmetic((rows >= cols).uop)  # a scan's mask
    assert _index_arithmetic(((rows * 3 + 1) % 7 < cols).uop)
    idx = Tensor(np.arange(5, dtype=np.int32)).realize()
    assert _index_arithmetic((idx.reshape(5, 1) == Tensor.arange(n).reshape(1, n)).uop)  # a one-hot
    assert not _index_arithmetic((idx.reshape(5, 1) < Tensor.arange(n).reshape(1, n)).uop)  # reads a buffer, not a one-hot
    assert not _index_arithmetic((rows.float() * 0.01).sin().uop)  # a rotary embedding's sin: computed once
