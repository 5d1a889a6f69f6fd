"""Sharded tensors over CPU devices: elementwise ops, reductions (also across the sharded axis) and matmul vs numpy."""

import numpy as np
import pytest
from hcq_runtime import counters
from uop_scheduler import ShardedTensor, Tensor
from uop_scheduler.errors import TensorRuntimeError

DEVS = ("CPU:0", "CPU:1", "CPU:2")


@pytest.fixture
def data(rng):
    return rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)


@pytest.mark.parametrize("axis", [0, 1, None])
def test_shard_roundtrip_and_elementwise(data, close, axis):
    x, _ = data
    s = Tensor(x).shard(DEVS, axis)
    assert isinstance(s, ShardedTensor) and s.shape == x.shape and len(s.device) == 3
    close(s, x)
    close((s * 2 + 1).exp(), np.exp(x * 2 + 1), rtol=1e-5)
    close(s + Tensor(x[0]), x + x[0])
    close(s * s, x * x)
    close(s.relu(), np.maximum(x, 0))


@pytest.mark.parametrize("axis", [0, 1])
def test_sharded_reductions(data, close, axis):
    x, _ = data
    s = Tensor(x).shard(DEVS, axis)
    for red_axis in (0, 1, None):
        close(s.sum(red_axis), x.sum(red_axis), rtol=1e-5, atol=1e-5)
        close(s.max(red_axis), x.max(red_axis))
        close(s.min(red_axis), x.min(red_axis))
        close(s.mean(red_axis), x.mean(red_axis), rtol=1e-5, atol=1e-6)
    close(s.sum(axis, keepdim=True), x.sum(axis, keepdims=True), rtol=1e-5, atol=1e-5)


def test_reduce_across_sharded_axis_uses_copies(data):
    x, _ = data
    s = Tensor(x).shard(DEVS, 0).realize()
    counters.reset()
    total = s.sum(0).realize()
    assert counters.copies >= 2  # the partial sums travel between devices
    assert total.axis is None


def test_sharded_matmul_layouts(data, close):
    x, w = data
    close(Tensor(x).shard(DEVS, 0) @ Tensor(w), x @ w, rtol=1e-5, atol=1e-5)
    close(Tensor(x) @ Tensor(w).shard(DEVS, 1), x @ w, rtol=1e-5, atol=1e-5)
    close(Tensor(x).shard(DEVS[:2], 1) @ Tensor(w).shard(DEVS[:2], 0), x @ w, rtol=1e-5, atol=1e-5)
    close(Tensor(x).shard(DEVS, 1) @ Tensor(w).shard(DEVS, 1), x @ w, rtol=1e-5, atol=1e-5)


def test_uneven_shards(close):
    x = np.arange(14, dtype=np.float32).reshape(7, 2)
    s = Tensor(x).shard(DEVS, 0)
    assert [sh.shape[0] for sh in s.shards] == [3, 3, 1]
    close(s.sum(0), x.sum(0))
    close(s.to("CPU"), x)


def test_sharded_permute_and_softmax(data, close):
    x, w = data
    s = Tensor(x).shard(DEVS, 0)
    t = s.T
    assert t.axis == 1 and t.shape == (4, 6)
    close(t, x.T)
    close(t.sum(1), x.T.sum(1), rtol=1e-5, atol=1e-5)
    e = np.exp(x - x.max(-1, keepdims=True))
    close(s.softmax(-1), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    e0 = np.exp(x - x.max(0, keepdims=True))
    close(s.softmax(0), e0 / e0.sum(0, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reader_first", [False, True])
def test_tensor_realize_takes_sharded_tensors_with_a_pending_write(reader_first):
    devices = ("CPU:0", "CPU:1")
    buf = Tensor([1.0, 2.0, 3.0, 4.0]).contiguous().realize().shard(devices, 0).realize()
    stale = buf.to("CPU")
    buf.assign(Tensor.full(buf.shape, 10.0).shard(devices, 0).contiguous().realize())
    Tensor.realize(stale, buf) if reader_first else Tensor.realize(buf, stale)
    np.testing.assert_array_equal(stale.numpy(), [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(buf.numpy(), [10.0] * 4)


@pytest.mark.parametrize("n_devices", [2, 4])
def test_data_parallel_backward_matches_numpy(n_devices):
    devices = tuple(f"CPU:{i}" for i in range(n_devices))
    rng = np.random.default_rng(n_devices)
    xn, wn, gn = (rng.standard_normal(s).astype(np.float32) for s in ((8, 3), (3, 2), (8, 2)))
    x, w = Tensor(xn).shard(devices, axis=0), Tensor(wn).shard(devices, axis=None)
    ((x @ w) * Tensor(gn).shard(devices, axis=0)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), gn @ wn.T, rtol=1e-5)
    # the replicas of w are one value: its gradient sums every device's part, and every device holds the sum
    np.testing.assert_allclose(w.grad.numpy(), xn.T @ gn, rtol=1e-5)
    for shard in w.grad.shards:
        np.testing.assert_allclose(shard.numpy(), xn.T @ gn, rtol=1e-5)


def test_function_over_sharded_tensors_and_gradient_accumulation():
    from uop_scheduler import function

    devices = ("CPU:0", "CPU:1")
    w = Tensor([[1.0, 2.0], [3.0, 4.0]]).shard(devices, axis=None).realize()
    w.grad = w.zeros_like().contiguous().realize()

    @function(allow_implicit=True)
    def f(x):
        return x @ w

    xn = np.arange(16, dtype=np.float32).reshape(8, 2)
    for _ in range(2):
        x = Tensor(xn).shard(devices, axis=0)
        f(x).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.ones((8, 2)) @ np.array([[1, 2], [3, 4]]).T)
    np.testing.assert_allclose(w.grad.numpy(), 2 * xn.T @ np.ones((8, 2)))

    @function
    def g(a, b):  # a body that shards its plain inputs returns a sharded value
        return a.shard(devices, axis=0) @ b.shard(devices, axis=None)

    a, b = np.arange(8, dtype=np.float32).reshape(4, 2), np.array([[1.0, 2], [3, 4]], np.float32)
    for _ in range(2):  # the second call takes the path the first one found
        np.testing.assert_allclose(g(Tensor(a), Tensor(b)).numpy(), a @ b)
    with pytest.raises(TensorRuntimeError, match="explicit `gradient=`"):
        (x * 2).backward()
