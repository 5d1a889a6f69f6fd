"""GCC if-converts (and so vectorizes) the loops of kernels with selects, except in kernels with a gated access, which
keep their branches (`uopir.renderer.cstyle.GCC_KEEP_BRANCHES`: GCC 12.2 miscompiled if-converted gated loads in a
reduction). Each kernel is compiled by every C compiler on PATH, run on two cores and checked against numpy."""

import numpy as np
import pytest
from kernel_asts import C_COMPILERS as COMPILERS
from kernel_asts import cpu_kernel
from uopir import AxisType, CRenderer, UOp, dtypes, to_program
from uopir.renderer.cstyle import GCC_KEEP_BRANCHES

ROWS, WIDTH = 64, 26


def pool_gradient() -> UOp:
    """A max pool's gradient over 26-wide rows: out[r, c] = x > 0 and relu(x) == m ? g / n : 0, where m, g and n are
    read at (r // 2, c // 2) of the pooled 13-wide rows (a select per element, an index divided by 2)."""
    half = WIDTH // 2
    out, x = UOp.param(0, dtypes.float32.ptr(ROWS * WIDTH)), UOp.param(1, dtypes.float32.ptr(ROWS * WIDTH))
    m, g, n = (UOp.param(s, dtypes.float32.ptr(ROWS // 2 * half)) for s in (2, 3, 4))
    r, c = UOp.range(ROWS, 0), UOp.range(WIDTH, 1)
    xv = x.index(r * WIDTH + c).load()
    pooled = (r // 2) * half + c // 2
    positive = UOp.const(0.0, dtypes.float32) < xv
    hit = positive.where(xv, 0.0).eq(m.index(pooled).load()).cast(dtypes.float32)
    value = positive.where(hit * (g.index(pooled).load() / n.index(pooled).load()), 0.0)
    return UOp.sink(out.index(r * WIDTH + c).store(value).end(r, c))


def padded_sum() -> UOp:
    """out[j] = sum over i < 4 of padded[i, j], padded = x (2 x 3 ints) padded by 2 rows below and 1 column before: a
    reduction of gated loads (the kernel GCC 12.2 miscompiled when it if-converted them)."""
    out, x = UOp.param(0, dtypes.int32.ptr(4)), UOp.param(1, dtypes.int32.ptr(6))
    j, i = UOp.range(4, 0), UOp.range(4, 1, AxisType.REDUCE)
    gate = (i < 2) & (j >= 1)
    value = x.index(i * 3 + j - 1, gate).load().reduce(i)
    return UOp.sink(out.index(j).store(value).end(j))


def _pool_gradient_inputs(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    x = rng.standard_normal((ROWS, WIDTH)).astype(np.float32)
    relu = np.maximum(x, 0)
    pooled = relu.reshape(ROWS // 2, 2, WIDTH // 2, 2).max(axis=(1, 3))
    g = rng.standard_normal(pooled.shape).astype(np.float32)
    count = (relu.reshape(ROWS // 2, 2, WIDTH // 2, 2) == pooled[:, None, :, None]).sum(axis=(1, 3)).astype(np.float32)
    return x, pooled, g, count


def test_only_kernels_with_a_gated_access_keep_their_branches():
    renderer = CRenderer(vector_width=16)
    # (without opts: the heuristic pads its 26-wide rows to vectors, whose last one is gated)
    assert not to_program(pool_gradient(), renderer, opts=[]).src[2].arg.startswith(GCC_KEEP_BRANCHES)
    assert to_program(pool_gradient(), renderer).src[2].arg.startswith(GCC_KEEP_BRANCHES)
    assert to_program(padded_sum(), renderer, n_cores=1).src[2].arg.startswith(GCC_KEEP_BRANCHES)


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_pool_gradient_of_selects_matches_numpy(cc):
    rng = np.random.default_rng(0)
    x, pooled, g, count = _pool_gradient_inputs(rng)
    prog, parts, _ = cpu_kernel(cc, pool_gradient(), None, 2, 16)
    out = np.full((ROWS, WIDTH), np.nan, np.float32)
    prog([out.ctypes.data, x.ctypes.data, pooled.ctypes.data, g.ctypes.data, count.ctypes.data], [], n_cores=parts)
    up = lambda a: np.repeat(np.repeat(a, 2, axis=0), 2, axis=1)  # noqa: E731
    relu = np.maximum(x, 0)
    want = np.where(x > 0, (relu == up(pooled)) * (up(g) / up(count)), 0).astype(np.float32)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_sum_of_gated_loads_matches_numpy(cc):
    x = np.array([2, 7, 9, 9, 8, 9], np.int32)
    prog, parts, _ = cpu_kernel(cc, padded_sum(), None, 1, 16)
    out = np.full(4, -1, np.int32)
    prog([out.ctypes.data, x.ctypes.data], [], n_cores=parts)
    np.testing.assert_array_equal(out, np.pad(x.reshape(2, 3), ((0, 2), (1, 0))).sum(0))


def cropped_pool_gradient() -> UOp:
    """A small CNN's pool gradient over 11-wide rows (a 2x2 pool keeps 10 of them): out[r, c] = (r, c) inside the pooled
    10 x 10 ? x[r, c] * g[r // 2, c // 2] : 0. Both reads are gated; x's address is inside x for every (r, c), g's is not
    (row 10 of the last image reads past g)."""
    side, half = 11, 5
    out, x = UOp.param(0, dtypes.float32.ptr(ROWS * side * side)), UOp.param(1, dtypes.float32.ptr(ROWS * side * side))
    g = UOp.param(2, dtypes.float32.ptr(ROWS * half * half))
    b, r, c = UOp.range(ROWS, 0), UOp.range(side, 1), UOp.range(side, 2)
    inside = (r < 2 * half) & (c < 2 * half)
    xv = x.index(b * side * side + r * side + c, inside).load()
    gv = g.index(b * half * half + (r // 2) * half + c // 2, inside).load()
    return UOp.sink(out.index(b * side * side + r * side + c).store(xv * gv).end(b, r, c))


def test_a_gated_load_whose_address_is_always_inside_its_buffer_is_a_plain_load_and_a_select():
    source = to_program(cropped_pool_gradient(), CRenderer(vector_width=16), n_cores=1).src[2].arg
    loads = [line for line in source.splitlines() if "data1[" in line or "data2[" in line]
    assert any("data1[" in line and "?" not in line for line in loads), source  # x: read unconditionally
    assert any("data2[" in line and "?" in line for line in loads), source  # g: still gated
    assert source.startswith(GCC_KEEP_BRANCHES)


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_cropped_pool_gradient_matches_numpy(cc):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((ROWS, 11, 11)).astype(np.float32)
    g = rng.standard_normal((ROWS, 5, 5)).astype(np.float32)
    prog, parts, _ = cpu_kernel(cc, cropped_pool_gradient(), None, 2, 16)
    out = np.full((ROWS, 11, 11), np.nan, np.float32)
    prog([out.ctypes.data, x.ctypes.data, g.ctypes.data], [], n_cores=parts)
    want = np.zeros_like(x)
    want[:, :10, :10] = x[:, :10, :10] * np.repeat(np.repeat(g, 2, axis=1), 2, axis=2)
    np.testing.assert_array_equal(out, want)
