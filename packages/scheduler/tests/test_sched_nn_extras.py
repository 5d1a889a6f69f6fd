"""Pooling with ceil_mode and argmax indices (against direct loop implementations of PyTorch's rules), einsum diagonals and
accumulation dtypes, grouped-query attention, exact GELU, repeat_interleave, clone to a device, index errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from uop_scheduler import Tensor, dtypes


def pool_ref(x: np.ndarray, k: int, s: int, p: int, ceil_mode: bool, mode: str, count_include_pad: bool = True) -> np.ndarray:
    """PyTorch's pooling for a square kernel over the last two axes, window by window."""
    n = x.shape[-1]
    span = n + 2 * p - k
    o = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (o - 1) * s >= n + p:
        o -= 1
    out = np.zeros(x.shape[:-2] + (o, o), np.float32)
    for oy, ox in itertools.product(range(o), range(o)):
        y0, x0 = oy * s - p, ox * s - p
        y1, x1 = min(y0 + k, n + p), min(x0 + k, n + p)  # the window clipped to input + padding
        window = x[..., max(y0, 0):min(y1, n), max(x0, 0):min(x1, n)]
        if mode == "max":
            out[..., oy, ox] = window.max(axis=(-1, -2))
        else:
            div = (y1 - y0) * (x1 - x0) if count_include_pad else window.shape[-1] * window.shape[-2]
            out[..., oy, ox] = window.sum(axis=(-1, -2)) / div
    return out


@pytest.mark.parametrize("n, k, s, p", [(5, 2, 2, 0), (7, 3, 2, 1), (6, 3, 3, 1), (8, 3, 2, 0)])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool_matches_reference(n, k, s, p, ceil_mode):
    x = np.random.default_rng(n * k).standard_normal((2, 3, n, n)).astype(np.float32)
    out = Tensor(x).max_pool2d(k, s, padding=p, ceil_mode=ceil_mode).numpy()
    np.testing.assert_allclose(out, pool_ref(x, k, s, p, ceil_mode, "max"), rtol=1e-6)


def argmax_pool_ref(x: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    """The flat (row-major, unpadded) position of the first maximum of each k x k window of the last two axes."""
    n = x.shape[-1]
    o = (n + 2 * p - k) // s + 1
    out = np.zeros(x.shape[:-2] + (o, o), np.int64)
    for idx in itertools.product(*map(range, x.shape[:-2])):
        for oy, ox in itertools.product(range(o), range(o)):
            cells = [(y, xx) for y in range(oy * s - p, oy * s - p + k) for xx in range(ox * s - p, ox * s - p + k)
                     if 0 <= y < n and 0 <= xx < n]
            best = max(cells, key=lambda c: (x[idx + c], -(c[0] * n + c[1])))
            out[idx + (oy, ox)] = best[0] * n + best[1]
    return out


@pytest.mark.parametrize("n, k, s, p", [(4, 2, 2, 0), (7, 3, 2, 1), (6, 3, 1, 1)])
def test_max_pool_returns_the_first_argmax_of_each_window(n, k, s, p):
    rng = np.random.default_rng(n + 10 * k)
    x = rng.integers(0, 4, (2, 2, n, n)).astype(np.float32)  # few values: ties pick the first position
    values, indices = Tensor(x).max_pool2d(k, s, padding=p, return_indices=True)
    np.testing.assert_array_equal(values.numpy(), pool_ref(x, k, s, p, False, "max"))
    np.testing.assert_array_equal(indices.numpy(), argmax_pool_ref(x, k, s, p))


@pytest.mark.parametrize("n, k, s, p", [(5, 2, 2, 0), (7, 3, 2, 1), (6, 3, 3, 1)])
@pytest.mark.parametrize("ceil_mode, count_include_pad", [(True, True), (True, False), (False, False)])
def test_avg_pool_matches_reference(n, k, s, p, ceil_mode, count_include_pad):
    x = np.random.default_rng(n + k).standard_normal((1, 2, n, n)).astype(np.float32)
    out = Tensor(x).avg_pool2d(k, s, padding=p, ceil_mode=ceil_mode, count_include_pad=count_include_pad).numpy()
    np.testing.assert_allclose(out, pool_ref(x, k, s, p, ceil_mode, "avg", count_include_pad), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("formula, shapes", [("ii->i", [(4, 4)]), ("ii", [(3, 3)]), ("iji->j", [(3, 4, 3)]), ("iji,jj->ij", [(3, 4, 3), (4, 4)]),
                                             ("bii,bj->bij", [(2, 3, 3), (2, 5)])])
def test_einsum_with_repeated_letters_takes_diagonals(formula, shapes):
    rng = np.random.default_rng(len(formula))
    ops = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    np.testing.assert_allclose(Tensor.einsum(formula, *[Tensor(o) for o in ops]).numpy(), np.einsum(formula, *ops), rtol=1e-5, atol=1e-5)


def test_out_of_range_host_indices_raise_index_error():
    t = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    with pytest.raises(IndexError, match="index 3 is out of bounds with size=3"):
        t[[0, 3]]
    with pytest.raises(IndexError, match="index -5 is out of bounds with size=4"):
        t[:, np.array([1, -5])]
    np.testing.assert_array_equal(t[[2, -1], [0, -1]].numpy(), np.arange(12).reshape(3, 4)[[2, -1], [0, -1]])


def test_einsum_accumulates_in_the_requested_dtype():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 300)).astype(np.float16), rng.standard_normal((300, 5)).astype(np.float16)
    out = Tensor.einsum("ik,kj->ij", Tensor(a), Tensor(b), dtype=dtypes.float32)
    assert out.dtype is dtypes.float32
    products = (a[:, :, None] * b[None]).astype(np.float32)  # half products, summed in float32
    np.testing.assert_allclose(out.numpy(), products.sum(1), rtol=1e-5, atol=1e-4)


def test_grouped_query_attention_shares_each_kv_head_with_a_group_of_query_heads():
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 6, 5, 8)).astype(np.float32)
    k, v = (rng.standard_normal((2, 2, 7, 8)).astype(np.float32) for _ in range(2))
    kr, vr = np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1)  # query heads 0-2 read kv head 0, 3-5 kv head 1
    scores = q @ kr.transpose(0, 1, 3, 2) / math.sqrt(8)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    ref = (e / e.sum(-1, keepdims=True)) @ vr
    out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), enable_gqa=True)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-5)


def test_exact_and_tanh_gelu():
    x = np.linspace(-5, 5, 41, dtype=np.float32)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    tanh = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(Tensor(x).gelu(approximate="none").numpy(), exact, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(Tensor(x).gelu().numpy(), tanh, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="approximate='erf' is not supported"):
        Tensor(x).gelu(approximate="erf")


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_repeat_interleave_matches_numpy(dim):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(Tensor(x).repeat_interleave(3, dim).numpy(), np.repeat(x, 3, axis=dim))


def test_clone_copies_value_and_gradient_to_a_device():
    t = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    (t * t).sum().backward()
    c = t.clone("CPU:1")
    assert c.device == "CPU:1" and c.grad is not None and c.grad.device == "CPU:1"
    np.testing.assert_array_equal(c.numpy(), [1, 2, 3])
    np.testing.assert_array_equal(c.grad.numpy(), [2, 4, 6])
    t.assign(Tensor([7.0, 8.0, 9.0]))
    np.testing.assert_array_equal(t.clone().numpy(), [7, 8, 9])
    np.testing.assert_array_equal(c.numpy(), [1, 2, 3])


def test_load_state_dict_takes_a_scalar_for_a_one_element_vector_and_back():
    from uop_scheduler.nn import BatchNorm
    from uop_scheduler.nn.state import load_state_dict
    layer = BatchNorm(1)
    target = layer.num_batches_tracked
    for value in (Tensor([7.0]), Tensor(3.0)):
        load_state_dict(layer, {"weight": Tensor.ones(1), "bias": Tensor.ones(1), "running_mean": Tensor.zeros(1),
                                "running_var": Tensor.ones(1), "num_batches_tracked": value.cast(target.dtype)})
        assert layer.num_batches_tracked.shape == target.shape
        assert layer.num_batches_tracked.numpy().reshape(()) == value.numpy().reshape(())


def test_load_state_dict_shape_mismatch_is_a_value_error_naming_the_tensor():
    from uop_scheduler.nn import Linear
    from uop_scheduler.nn.state import load_state_dict
    with pytest.raises(ValueError, match=r"Shape mismatch in layer `weight`: Expected shape \(2, 2\), but found \(4, 4\)"):
        load_state_dict(Linear(2, 2, bias=False), {"weight": Tensor.ones(4, 4)})
