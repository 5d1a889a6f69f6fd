"""Reductions against numpy, over several shapes, axes and dtypes."""

import numpy as np
import pytest
from uop_scheduler import Tensor, dtypes

AXES = [None, 0, 1, -1, (0, 2)]


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_float_reductions(rng, close, axis, keepdim):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    t = Tensor(x)
    close(t.sum(axis, keepdim), x.sum(axis, keepdims=keepdim), rtol=1e-5, atol=1e-5)
    close(t.max(axis, keepdim), x.max(axis, keepdims=keepdim))
    close(t.min(axis, keepdim), x.min(axis, keepdims=keepdim))
    close(t.mean(axis, keepdim), x.mean(axis, keepdims=keepdim), rtol=1e-5, atol=1e-6)
    close(t.prod(axis, keepdim), x.prod(axis, keepdims=keepdim), rtol=1e-4, atol=1e-6)
    close(t.var(axis, keepdim), x.var(axis, keepdims=keepdim, ddof=1), rtol=1e-4, atol=1e-6)
    close(t.std(axis, keepdim, correction=0), x.std(axis, keepdims=keepdim), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("np_dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint32])
def test_int_reductions(rng, close, np_dtype):
    lo = 0 if np.dtype(np_dtype).kind == "u" else -100
    x = rng.integers(lo, 100, (4, 6)).astype(np_dtype)
    t = Tensor(x)
    acc = np.uint32 if np.dtype(np_dtype).kind == "u" and np.dtype(np_dtype).itemsize <= 4 else np.int32
    acc = np.int64 if np_dtype is np.int64 else acc
    close(t.sum(1), x.sum(1).astype(acc))
    assert t.sum().dtype.itemsize >= 4
    close(t.max(0), x.max(0))
    close(t.min(1), x.min(1))
    close(t.argmax(1), x.argmax(1).astype(np.int32))
    close(t.argmin(0), x.argmin(0).astype(np.int32))


def test_sum_dtype_rules():
    assert Tensor([1, 2], dtype=dtypes.int8).sum().dtype is dtypes.int32
    assert Tensor([1, 2], dtype=dtypes.uint8).sum().dtype is dtypes.uint32
    assert Tensor([True, True]).sum().dtype is dtypes.int32
    assert Tensor([1, 2], dtype=dtypes.float16).sum().dtype is dtypes.float16
    assert Tensor([1, 2]).mean().dtype is dtypes.float32
    assert Tensor([True, True, False]).sum().item() == 2


def test_argmax_first_occurrence_and_flat(close):
    x = np.array([[1, 5, 5], [7, 7, 0]], np.float32)
    close(Tensor(x).argmax(1), np.array([1, 0], np.int32))
    close(Tensor(x).argmax(), np.array(3, np.int32))
    close(Tensor(x).argmax(0, keepdim=True), np.array([[1, 1, 0]], np.int32))


def test_any_all(close):
    x = np.array([[0, 1, 0], [0, 0, 0]], np.int32)
    close(Tensor(x).any(1), x.any(1))
    close(Tensor(x).all(0), x.all(0))
    close(Tensor(x == 0).all(), np.array((x == 0).all()))


@pytest.mark.parametrize("shape,axis", [((4, 7), -1), ((3, 4, 5), 1), ((6,), 0)])
def test_softmax_family(rng, close, shape, axis):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    e = np.exp(x - x.max(axis, keepdims=True))
    soft = e / e.sum(axis, keepdims=True)
    close(Tensor(x).softmax(axis), soft, rtol=1e-5, atol=1e-6)
    close(Tensor(x).log_softmax(axis), np.log(soft), rtol=1e-5, atol=1e-5)
    lse = np.log(np.exp(x.astype(np.float64)).sum(axis))
    close(Tensor(x).logsumexp(axis), lse.astype(np.float32), rtol=1e-5, atol=1e-5)


def _softmax_by_tensor_ops(x: Tensor, axis: int, log: bool) -> Tensor:
    """softmax and log_softmax written with tensor ops: the reference graph of their UOp-built path."""
    shifted = x.sub(x.max(axis, keepdim=True).detach())
    if log:
        return shifted.sub(shifted.exp().sum(axis, keepdim=True).log())
    e = shifted.exp()
    return e.div(e.sum(axis, keepdim=True))


@pytest.mark.parametrize("shape,axis", [((5,), -1), ((3, 4), 0), ((3, 4), -1), ((2, 3, 4), 1), ((1, 7), -1), ((2, 1, 3), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_builds_the_tensor_ops_graph(rng, shape, axis, dtype, log):
    x = Tensor((rng.standard_normal(shape) * 3).astype(dtype))
    got = x.log_softmax(axis) if log else x.softmax(axis)
    assert got.uop is _softmax_by_tensor_ops(x, axis, log).uop  # hash-consed: the same node is the same graph
    v = x.numpy().astype(np.float64)
    e = np.exp(v - v.max(axis, keepdims=True))
    soft = e / e.sum(axis, keepdims=True)
    np.testing.assert_allclose(got.numpy(), np.log(soft) if log else soft, rtol=1e-5, atol=1e-6)


def test_softmax_of_half_and_empty_axes(rng):
    """The tensor-op path still serves what the UOp-built one leaves to it: half (computed in float32), a 0-d tensor and
    an empty axis."""
    x = (rng.standard_normal((3, 5)) * 3).astype(np.float16)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(Tensor(x).softmax(-1).numpy(), e / e.sum(-1, keepdims=True), rtol=2e-3, atol=2e-3)
    assert Tensor(2.0).softmax().item() == 1.0
    assert Tensor.ones(0, 3).softmax(-1).shape == (0, 3)


def test_cumulative(rng, close):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    close(Tensor(x).cumsum(1), x.cumsum(1), rtol=1e-5, atol=1e-6)
    close(Tensor(x).cumsum(0), x.cumsum(0), rtol=1e-5, atol=1e-6)
    close(Tensor(x).cummax(1)[0], np.maximum.accumulate(x, 1))
    i = np.array([3, -1, 4, 1, -5, 4], np.int32)
    close(Tensor(i).cumsum(), i.cumsum().astype(np.int32))
    values, indices = Tensor(i).cummax()
    close(values, np.maximum.accumulate(i))
    # the index of the first element equal to the running max (a direct loop)
    np.testing.assert_array_equal(indices.numpy(), [int(np.argmax(i[:k + 1])) for k in range(len(i))])


def test_nan_propagates_through_max():
    assert np.isnan(Tensor([1.0, float("nan"), 3.0]).max().item())


@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 6), -1), ((4, 3, 2), 1)])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_against_numpy(rng, close, shape, dim, descending):
    x = rng.integers(-3, 4, shape).astype(np.float32)  # many ties: stability matters
    values, indices = Tensor(x).sort(dim, descending)
    order = np.argsort(-x if descending else x, axis=dim, kind="stable")
    close(indices, order.astype(np.int32))
    close(values, np.take_along_axis(x, order, dim))


def test_topk(rng, close):
    x = rng.standard_normal((3, 8)).astype(np.float32)
    values, indices = Tensor(x).topk(3)
    order = np.argsort(-x, axis=-1, kind="stable")[:, :3]
    close(indices, order.astype(np.int32))
    close(values, np.take_along_axis(x, order, -1))
    small, _ = Tensor(x).topk(2, dim=0, largest=False)
    close(small, np.sort(x, axis=0)[:2])
    with pytest.raises(ValueError):
        Tensor(x).topk(9)


def test_empty_reductions(close):
    close(Tensor.zeros(0, 3).sum(0), np.zeros(3, np.float32))
    close(Tensor.zeros(0, 3).reshape(3, 0).sum(1), np.zeros(3, np.float32))
    assert Tensor.ones(2, 0).sum().item() == 0
    np.testing.assert_array_equal(Tensor.ones(2, 0).max(1).numpy(), [-np.inf, -np.inf])  # tinygrad: the lowest value
    np.testing.assert_array_equal(Tensor.ones(2, 0).prod(1).numpy(), np.ones((2, 0)).prod(1))


def test_sum_over_a_padded_int_axis_is_not_miscompiled():
    # found by the write fuzzer: GCC 12.2 -O2 -march=native vectorized this kernel's if-converted gated loads wrongly
    # (garbage or [0, 8, 9, 18]); the C compiler now runs with -fno-tree-loop-if-convert
    x = np.array([2, 7, 9, 9, 8, 9], np.int32).reshape((2, 3))
    for dtype in (np.int32, np.float32):
        got = Tensor(x.astype(dtype)).pad(((0, 2), (1, 0))).sum(0, keepdim=True).numpy()
        np.testing.assert_array_equal(got, np.pad(x.astype(dtype), ((0, 2), (1, 0))).sum(0, keepdims=True))


# ---- reductions over broadcast axes (the value does not vary along the reduced axis) ----

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def broadcast_reductions(draw):
    full = draw(st.lists(st.sampled_from([1, 3, 4, 6, 8, 12, 20, 32]), min_size=1, max_size=3))
    base = [n if draw(st.booleans()) else 1 for n in full]
    axes = draw(st.lists(st.integers(0, len(full) - 1), min_size=1, max_size=len(full), unique=True))
    op = draw(st.sampled_from(["sum", "max", "min", "mean"]))
    const = draw(st.booleans())
    return tuple(full), tuple(base), tuple(sorted(axes)), op, const


@given(broadcast_reductions())
@example(((20, 6), (1, 6), (0,), "sum", False))
@example(((6, 20), (6, 1), (1,), "sum", True))
@settings(max_examples=40, deadline=None, derandomize=True)
def test_reduce_of_a_broadcast_value_counts_every_element(case):
    # an unrolled reduce axis the value does not depend on was iterated once instead of its size: ones(20, 6).sum(0)
    # was 5, and so was every gradient of a broadcast (a bias's, summed over the batch)
    full, base, axes, op, const = case
    x = np.full(base, 1.5, np.float32) if const else np.random.default_rng(len(full)).standard_normal(base).astype(np.float32)
    t = (Tensor.full(base, 1.5) if const else Tensor(x)).expand(full)
    want = getattr(np.broadcast_to(x, full), op)(axis=axes)
    np.testing.assert_allclose(getattr(t, op)(axes).numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", [8, 20, 64])
def test_bias_gradient_sums_over_the_batch(batch):
    b = Tensor(np.zeros(6, np.float32))
    (Tensor.ones(batch, 6, 3) + b.reshape(1, 6, 1)).sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), np.full(6, batch * 3.0))


@given(st.sampled_from([1, 3, 8, 64]), st.sampled_from([16, 100, 128, 256, 1024]), st.sampled_from(["argmax", "argmin", "max", "sum"]),
       st.sampled_from([np.float32, np.int32, np.float16]), st.integers(0, 9))
@settings(max_examples=40, deadline=None, derandomize=True)
def test_row_reductions_read_in_order_property(rows, k, op, dtype, seed):
    # rows read contiguously (lanes along the reduce axis, see uopir.codegen.opts._lane_opts), an argmax's two
    # reductions in sequence included; small integer values, so ties pick the first index as numpy does
    x = np.random.default_rng(seed).integers(-5, 6, (rows, k)).astype(dtype)
    got = getattr(Tensor(x), op)(1).numpy()
    want = getattr(x, op)(1)
    np.testing.assert_allclose(got, want.astype(got.dtype), rtol=1e-3)
