"""Indexing by tensors reads the indexed elements: `table[idx]`, `gather`, several index tensors at once. They are built
from one-hots summed over the indexed axis (as tinygrad builds them); the scheduler keeps the one-hot in the kernel that
sums it and the kernel reads the row instead (`uopir.codegen.onehot`). Before, a 32000x256 embedding read by 512 tokens
compared all 32000 rows per token (70 ms; PyTorch 0.03 ms). Values against numpy, with negative and repeated indices,
and the work the kernels do (their estimated ops) against the size of what is read."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor
from uop_scheduler.helpers import GlobalCounters


def _ops_of(fn) -> int:
    GlobalCounters.reset()
    fn()
    return GlobalCounters.global_ops


def test_an_embedding_reads_its_rows_not_the_whole_table():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((32000, 64)).astype(np.float32)
    tokens = rng.integers(-32000, 32000, 128).astype(np.int32)
    t, i = Tensor(table).realize(), Tensor(tokens).realize()
    out = None

    def run():
        nonlocal out
        out = t[i].realize()

    ops = _ops_of(run)
    np.testing.assert_array_equal(out.numpy(), table[tokens])
    # a compare and a select per table element of each token would be 128 * 32000 * 64 * 2 ops
    assert ops < 128 * 64 * 64, ops


def test_a_wrapped_index_is_computed_where_it_is_read():
    # negative indices wrap (idx + n) inside the kernel that reads the rows: given a buffer as an expanded value (it
    # is compared with every row number), the wrap was a kernel of its own ahead of every embedding
    rng = np.random.default_rng(2)
    table = rng.standard_normal((32000, 16)).astype(np.float32)
    tokens = rng.integers(-32000, 32000, (4, 64)).astype(np.int32)
    t, i = Tensor(table).realize(), Tensor(tokens).realize()
    GlobalCounters.reset()
    out = t[i].realize()
    assert GlobalCounters.kernel_count == 1
    np.testing.assert_array_equal(out.numpy(), table[tokens])


def test_gather_along_an_axis_reads_the_picked_elements():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 4096)).astype(np.float32)
    idx = rng.integers(0, 4096, (64, 8)).astype(np.int32)
    out = None

    def run():
        nonlocal out
        out = Tensor(x).gather(1, Tensor(idx)).realize()

    ops = _ops_of(run)
    np.testing.assert_array_equal(out.numpy(), np.take_along_axis(x, idx, 1))
    assert ops < 64 * 8 * 4096, ops


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.data())
def test_tensor_indexing_matches_numpy(data):
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 40), min_size=ndim, max_size=ndim)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.standard_normal(shape).astype(np.float32)
    # one or two indexed axes, each by an int tensor of indices in [-size, size)
    axes = sorted(data.draw(st.sets(st.integers(0, ndim - 1), min_size=1, max_size=min(2, ndim))))
    ishape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=2)))
    dtype = data.draw(st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8]))
    idxs = {a: rng.integers(0 if dtype is np.uint8 else -shape[a], shape[a], ishape).astype(dtype) for a in axes}
    key = tuple(Tensor(idxs[a]) if a in idxs else slice(None) for a in range(ndim))
    want = x[tuple(idxs[a] if a in idxs else slice(None) for a in range(ndim))]
    got = Tensor(x)[key].numpy()
    np.testing.assert_array_equal(got, want)


def test_a_gradient_through_an_index_still_scatters_into_the_table():
    rng = np.random.default_rng(2)
    table = rng.standard_normal((50, 4)).astype(np.float32)
    tokens = np.array([3, 7, 3, -1, 49], np.int32)
    t = Tensor(table, requires_grad=True)
    (t[Tensor(tokens)] * Tensor(np.arange(20, dtype=np.float32).reshape(5, 4))).sum().backward()
    want = np.zeros_like(table)
    np.add.at(want, tokens, np.arange(20, dtype=np.float32).reshape(5, 4))
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-6)


def test_interpolate_reads_each_outputs_sources_only():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 64, 64)).astype(np.float32)
    t = Tensor(x).realize()
    out = {}

    def run():
        out["linear"] = t.interpolate((128, 128), mode="linear").realize()
        out["nearest"] = t.interpolate((128, 128), mode="nearest").realize()

    ops = _ops_of(run)
    # a sum over every source with the weights as a mask: 64 sources per output and axis
    assert ops < 2 * 4 * 128 * 128 * 32, ops
    # nearest: source floor(i * in / out) on each axis
    rows = (np.arange(128) * 64) // 128
    np.testing.assert_array_equal(out["nearest"].numpy(), x[:, :, rows][:, :, :, rows])
    # linear with half-pixel centers, from its definition in float64
    pos = np.clip((np.arange(128) + 0.5) * 64 / 128 - 0.5, 0, 63)
    lo, frac = np.floor(pos).astype(int), pos - np.floor(pos)
    hi = np.minimum(lo + 1, 63)
    a = x.astype(np.float64)
    a = a[:, :, lo] * (1 - frac)[:, None] + a[:, :, hi] * frac[:, None]
    a = a[:, :, :, lo] * (1 - frac) + a[:, :, :, hi] * frac
    np.testing.assert_allclose(out["linear"].numpy(), a, rtol=1e-5, atol=1e-6)


def test_negative_indices_of_narrow_int_dtypes_wrap_as_in_numpy():
    # -1 + 200 overflowed int8 when the wrap was computed in the index's dtype: the read fell out of range (zeros)
    x = np.arange(200 * 3, dtype=np.float32).reshape(200, 3)
    for dtype in (np.int8, np.int16):
        idx = np.array([-1, 5, -100, 127, -128], dtype)
        np.testing.assert_array_equal(Tensor(x)[Tensor(idx)].numpy(), x[idx])
        np.testing.assert_array_equal(Tensor(x.T)[:, Tensor(idx)].numpy(), x.T[:, idx])
