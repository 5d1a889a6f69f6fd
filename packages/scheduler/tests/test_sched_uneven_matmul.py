"""Matmuls whose row count no register tile divides (a batch of 100, a prompt of 77 tokens) take the tile with an
overlapping last one (uopir's OVERLAP): through the whole stack (packing, two cores), against numpy in float64."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor


@pytest.mark.parametrize("m, k, n", [(100, 1024, 256), (77, 576, 384), (13, 300, 64), (1030, 256, 128), (6, 512, 512),
                                     (256, 784, 16), (100, 300, 32), (64, 256, 8), (50, 200, 100)])
def test_uneven_matmul_against_numpy(m, k, n):
    rng = np.random.default_rng(m * 7 + n)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    out = (Tensor(a) @ Tensor(b)).numpy()
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("m, k, n", [(77, 576, 1536), (50, 784, 250), (64, 300, 250), (9, 200, 100)])
def test_uneven_matmul_with_a_transposed_operand_against_numpy(m, k, n):
    # x @ w.T: both operands contiguous along k (vector lanes along the reduction), rows or outputs the tile does not divide
    rng = np.random.default_rng(m + 31 * n)
    a, w = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((n, k), dtype=np.float32)
    out = (Tensor(a) @ Tensor(w).T).numpy()
    np.testing.assert_allclose(out, a.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_uneven_linear_layer_and_its_gradients():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((77, 320), dtype=np.float32), rng.standard_normal((192, 320), dtype=np.float32) * 0.1
    xt, wt = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
    y = xt @ wt.T
    (y * y).sum().backward()
    want = x.astype(np.float64) @ w.T.astype(np.float64)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(xt.grad.numpy(), 2 * want @ w.astype(np.float64), rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(wt.grad.numpy(), 2 * want.T @ x.astype(np.float64), rtol=1e-3, atol=1e-2)


@settings(max_examples=16, deadline=None, derandomize=True)
@given(m=st.integers(1, 160), k=st.integers(1, 400), n=st.integers(1, 200), transposed=st.booleans())
def test_matmuls_of_any_shape_against_numpy(m, k, n, transposed):
    # every kind of tile: rows and columns that the tiles divide or not, short and long reductions, packed operands
    rng = np.random.default_rng(m * 1_000_003 + k * 1009 + n)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if transposed else (k, n), dtype=np.float32)
    out = (Tensor(a) @ (Tensor(b).T if transposed else Tensor(b))).numpy()
    want = a.astype(np.float64) @ (b.T if transposed else b).astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("size, in_ch, out_ch", [(58, 3, 16), (104, 2, 8), (230, 3, 4)])
def test_convolutions_over_rows_no_vector_divides(size, in_ch, out_ch):
    # output rows of 56, 102 and 228: tiles of two vectors, the last overlapping the one before
    rng = np.random.default_rng(size)
    x, w = rng.standard_normal((2, in_ch, size, size), dtype=np.float32), rng.standard_normal((out_ch, in_ch, 3, 3), dtype=np.float32)
    out = Tensor(x).conv2d(Tensor(w)).numpy()
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(2, 3))  # b, i, y, x, ky, kx
    want = np.einsum("biyxkl,oikl->boyx", windows, w.astype(np.float64))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


@pytest.fixture
def cores(request):
    """The CPU device's core count set to request.param for the test (kernels compiled meanwhile split among that many
    cores: this machine's threads run the parts)."""
    from hcq_runtime import Device

    dev = Device["CPU"]
    saved = dev.n_cores
    dev.n_cores = request.param
    yield request.param
    dev.n_cores = saved


@pytest.mark.parametrize("cores", [3, 6, 5], indirect=True)
def test_programs_on_core_counts_that_divide_no_axis(cores):
    # 1024 rows on 6 cores used to run on 4 of them: every core takes a part now, the last overlapping the one before
    rng = np.random.default_rng(cores)
    shapes = [(1031 + cores, 300, 96), (999, 257, 64 + 16 * cores)]
    for m, k, n in shapes:
        a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
        out = (Tensor(a) @ Tensor(b)).numpy()
        np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4 * np.sqrt(k))
    x = rng.standard_normal((997 + cores, 131), dtype=np.float32)
    y = rng.standard_normal((131,), dtype=np.float32)
    np.testing.assert_array_equal(((Tensor(x) * 2 + Tensor(y)).relu()).numpy(), np.maximum(x * np.float32(2) + y, 0))
    np.testing.assert_allclose(Tensor(x).sum(axis=1).numpy(), x.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-3)
    img = rng.standard_normal((2 + cores, 3, 61, 59), dtype=np.float32)
    w = rng.standard_normal((8, 3, 3, 3), dtype=np.float32)
    got = Tensor(img).conv2d(Tensor(w), padding=1).numpy()
    pad = np.pad(img.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((img.shape[0], 8, 61, 59))
    for dy in range(3):
        for dx in range(3):
            want += np.einsum("nchw,oc->nohw", pad[:, :, dy:dy + 61, dx:dx + 59], w[:, :, dy, dx].astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    # a write in place whose kernel reads what it writes: split evenly among fewer cores, or not at all
    acc = Tensor(x.copy())
    acc += Tensor(x)
    np.testing.assert_array_equal(acc.numpy(), x * np.float32(2))


@pytest.mark.parametrize("m, k, n", [(999, 512, 999), (1023, 64, 1001), (77, 300, 1000)])
def test_matmuls_no_tile_divides_either_way_against_numpy(m, k, n):
    # rows and columns both in tiles with an overlapping last one: the cores split one of them (it ran on one core)
    rng = np.random.default_rng(m + n)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    out = (Tensor(a) @ Tensor(b)).numpy()
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4 * np.sqrt(k))
    w = rng.standard_normal((n, k), dtype=np.float32)
    out = (Tensor(a) @ Tensor(w).T).numpy()
    np.testing.assert_allclose(out, a.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4 * np.sqrt(k))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


_OPS = {
    "add_broadcast": (lambda t, u: t + u[:1], lambda x, y: x + y[:1]),
    "mul_relu": (lambda t, u: (t * u).relu(), lambda x, y: np.maximum(x * y, 0)),
    "sum_rows": (lambda t, u: t.sum(axis=1), lambda x, y: x.astype(np.float64).sum(axis=1)),
    "max_cols": (lambda t, u: t.max(axis=0), lambda x, y: x.max(axis=0)),
    "transpose_add": (lambda t, u: t.T + u.T, lambda x, y: x.T + y.T),
    "softmax": (lambda t, u: t.softmax(-1), lambda x, y: _softmax(x)),
    "matmul_t": (lambda t, u: t @ u.T, lambda x, y: x.astype(np.float64) @ y.T.astype(np.float64)),
}


@pytest.mark.parametrize("cores", [3, 7], indirect=True)
@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(200, 1500), cols=st.integers(40, 700), op=st.sampled_from(sorted(_OPS)))
def test_random_programs_on_core_counts_that_divide_no_axis(cores, rows, cols, op):
    # (sizes big enough to be split among the cores: `THREAD_MIN_WORK` elements of work or more; the fixture's core count holds for
    # every example)
    rng = np.random.default_rng(rows * 1000 + cols)
    x, y = rng.standard_normal((rows, cols), dtype=np.float32), rng.standard_normal((rows, cols), dtype=np.float32)
    ours, ref = _OPS[op]
    np.testing.assert_allclose(ours(Tensor(x), Tensor(y)).numpy(), ref(x, y), rtol=1e-4, atol=1e-4 * np.sqrt(cols))
