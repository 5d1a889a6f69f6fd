"""Matmuls whose row count no register tile divides (a batch of 100, a prompt of 77 tokens) take the tile with an
overlapping last one (uopir's OVERLAP): through the whole stack (packing, two cores), against numpy in float64."""

import numpy as np
import pytest
from hypothesis import given, settings
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
