"""Gradients of 2x2 pooling and 2x upsampling read each element of their input for two neighbouring outputs
(`x // 2`): the CPU code generator pads such rows to vectors and gathers those reads lane by lane. Checked against
numpy over row widths that are and are not multiples of the vector (the suite under `UOP_CPU_VECTOR_WIDTH=8` takes
AVX2's widths)."""

import numpy as np
import pytest
from uop_scheduler import Tensor


def _max_pool_grad(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """d(sum(maxpool2x2(x) * g))/dx, the gradient split evenly between tied maxima (none in random data)."""
    n, c, h, w = x.shape
    win = x[:, :, : h // 2 * 2, : w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2)
    top = win.max(axis=(3, 5), keepdims=True)
    hit = (win == top).astype(np.float64)
    share = hit / hit.sum(axis=(3, 5), keepdims=True) * g[:, :, :, None, :, None]
    out = np.zeros_like(x, dtype=np.float64)
    out[:, :, : h // 2 * 2, : w // 2 * 2] = share.reshape(n, c, h // 2 * 2, w // 2 * 2)
    return out


@pytest.mark.parametrize("width", [8, 11, 13, 26, 28, 33])
def test_max_pool_gradient_matches_numpy(width):
    rng = np.random.default_rng(width)
    xv = rng.standard_normal((2, 3, width, width)).astype(np.float32)
    gv = rng.standard_normal((2, 3, width // 2, width // 2)).astype(np.float32)
    x = Tensor(xv, requires_grad=True)
    (x.relu().max_pool2d(2) * Tensor(gv)).sum().backward()
    expected = _max_pool_grad(np.maximum(xv, 0), gv) * (xv > 0)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("width", [7, 13, 16])
def test_nearest_upsampling_and_its_gradient_match_numpy(width):
    rng = np.random.default_rng(width)
    xv = rng.standard_normal((2, width, width)).astype(np.float32)
    gv = rng.standard_normal((2, 2 * width, 2 * width)).astype(np.float32)
    x = Tensor(xv, requires_grad=True)
    up = x.reshape(2, width, 1, width, 1).expand(2, width, 2, width, 2).reshape(2, 2 * width, 2 * width)
    np.testing.assert_array_equal(up.numpy(), xv.repeat(2, axis=1).repeat(2, axis=2))
    scaled = up * Tensor(gv) / 3.0  # a value computed from the gathered reads, in the kernel that reads them
    np.testing.assert_allclose(scaled.numpy(), xv.repeat(2, axis=1).repeat(2, axis=2) * gv / 3.0, rtol=1e-6)
    scaled.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), gv.reshape(2, width, 2, width, 2).sum(axis=(2, 4)) / 3.0, rtol=1e-5, atol=1e-6)
