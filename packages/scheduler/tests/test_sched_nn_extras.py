"""Pooling with ceil_mode (against a direct loop implementation of PyTorch's rules), einsum diagonals, index errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from uop_scheduler import Tensor


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
