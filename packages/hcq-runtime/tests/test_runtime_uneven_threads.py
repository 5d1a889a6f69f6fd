"""Cores that do not divide a kernel's axis (1024 rows on 6 or 3 cores, 999 rows on 2): every core still gets a part,
the last part ending with the axis and overlapping the one before (`OptOps.THREAD` with an uneven size). The kernels
run here with more parts than this machine has cores (the launcher's threads claim them), compiled with clang and GCC,
checked against numpy in float64, and the overlapped elements bit for bit against an even split."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_asts import C_COMPILERS as COMPILERS
from kernel_asts import cpu_kernel
from kernel_asts import float_matmul as matmul
from uopir import CodegenError, CRenderer, Opt, OptOps, UOp, dtypes, heuristic_opts, to_program
from uopir.codegen.opts import WIDE_TILE_ROWS, thread_fits
from uopir.codegen.program import lower_kernel


def elementwise(n: int, m: int) -> UOp:
    """out[n, m] = a[n, m] * 2 + b[n, m]."""
    out, a, b = (UOp.param(slot, dtypes.float32.ptr(n * m)) for slot in range(3))
    i, j = UOp.range(n, 0), UOp.range(m, 1)
    return UOp.sink(out.index(i * m + j).store(a.index(i * m + j).load() * 2.0 + b.index(i * m + j).load()).end(i, j))


def scatter(n: int, m: int) -> UOp:
    """out[idx[i], j] = a[i, j]: rows may write one output row (the last writer wins), so no part may run twice."""
    out, a = UOp.param(0, dtypes.float32.ptr(n * m)), UOp.param(1, dtypes.float32.ptr(n * m))
    idx = UOp.param(2, dtypes.int32.ptr(n))
    i, j = UOp.range(n, 0), UOp.range(m, 1)
    row = idx.index(i).load().cast(dtypes.int64)
    return UOp.sink(out.index(row * m + j).store(a.index(i * m + j).load()).end(i, j))


def run_matmul(cc: str, n: int, m: int, k: int, opts=None, cores: int = 2, vector_width: int = 16, seed: int = 0):
    """The kernel's result (opts None: the heuristic's for `cores`), numpy's in float64, the parts it ran on."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((k, m), dtype=np.float32)
    prog, parts, _ = cpu_kernel(cc, matmul(n, m, k), opts, cores, vector_width)
    out = np.full((n, m), np.nan, np.float32)
    prog([out.ctypes.data, a.ctypes.data, b.ctypes.data], [], n_cores=parts)
    return out, a.astype(np.float64) @ b.astype(np.float64), parts


def run_elementwise(cc: str, n: int, m: int, opts=None, cores: int = 2, vector_width: int = 16):
    rng = np.random.default_rng(n * 1000 + m)
    a, b = rng.standard_normal((n, m), dtype=np.float32), rng.standard_normal((n, m), dtype=np.float32)
    prog, parts, _ = cpu_kernel(cc, elementwise(n, m), opts, cores, vector_width)
    out = np.full((n, m), np.nan, np.float32)
    prog([out.ctypes.data, a.ctypes.data, b.ctypes.data], [], n_cores=parts)
    return out, a * np.float32(2) + b, parts


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("cores, n, wide", [(3, 1024, True), (6, 1000, True), (6, 1030, True), (3, 1025, True), (6, 1024, True), (7, 1056, False)])
def test_a_large_matmul_runs_on_every_core(cc, cores, n, wide):
    # 1024 rows on 3 cores ran on 2 of them, on 6 cores on 4 (the most that divide 1024), and without the wide tile.
    # (1056 rows on 7 cores: 151 each, in tiles of 6 rows 5 computed twice, more than the wide tile's 1/32: the 8-row tile)
    assert n % cores
    opts = heuristic_opts(lower_kernel(matmul(n, 128, 256)), cores, 16)
    assert any(o.op is OptOps.THREAD and o.axis == 0 and o.arg == cores for o in opts), opts
    assert (Opt(OptOps.OVERLAP, 0, WIDE_TILE_ROWS) in opts) == wide, opts
    out, want, parts = run_matmul(cc, n, 128, 256, cores=cores)
    assert parts == cores
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * 16)
    # the rows two cores both computed hold what a split the cores divide computes, bit for bit
    even, _, _ = run_matmul(cc, n, 128, 256, opts=[o if o.op is not OptOps.THREAD else Opt(OptOps.THREAD, 0, 2) for o in opts], cores=2)
    np.testing.assert_array_equal(out, even)


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("cores, n, m", [(2, 999, 77), (3, 1024, 64), (6, 257, 300), (2, 4097, 17)])
def test_elementwise_kernels_of_sizes_the_cores_do_not_divide_use_every_core(cc, cores, n, m):
    opts = heuristic_opts(lower_kernel(elementwise(n, m)), cores, 16)
    assert any(o.op is OptOps.THREAD and o.arg == cores for o in opts), opts
    out, want, parts = run_elementwise(cc, n, m, cores=cores)
    assert parts == cores
    np.testing.assert_array_equal(out, want)  # every element written (NaN before), each once or twice the same


def test_the_cores_are_not_split_unevenly_where_a_second_store_would_differ():
    # C += A @ B: the rows two cores both computed would add A @ B twice
    with pytest.raises(CodegenError, match="reads a buffer it writes"):
        to_program(matmul(1025, 16, 8, accumulate=True), CRenderer(), opts=[Opt(OptOps.THREAD, 0, 2)])
    # a scatter: an earlier row's value stored again after a later row's
    with pytest.raises(CodegenError, match="not a multiple"):
        to_program(scatter(1025, 16), CRenderer(), opts=[Opt(OptOps.THREAD, 0, 2)])
    with pytest.raises(CodegenError, match="at least one iteration per core"):
        to_program(elementwise(3, 16), CRenderer(), opts=[Opt(OptOps.THREAD, 0, 4)])
    # so the heuristic splits them evenly among fewer cores, or not at all
    # (an uneven split clamps the last core's start: `(core_id < cores - 1) ? ...`)
    for ast, cores in ((matmul(1026, 128, 256, accumulate=True), 4), (scatter(1026, 4096), 4), (scatter(999, 4097), 2)):
        assert "(core_id < " not in to_program(ast, CRenderer(vector_width=16), n_cores=cores).src[2].arg
    assert "(core_id < " in to_program(elementwise(999, 71), CRenderer(vector_width=16), n_cores=2).src[2].arg  # (no even axis)
    # an even split is as before: every core takes its own rows
    assert to_program(matmul(1024, 16, 8, accumulate=True), CRenderer(), opts=[Opt(OptOps.THREAD, 0, 2)]).arg.global_size[0] == 2


def test_uneven_splits_compute_few_elements_twice():
    assert thread_fits(1024, 6) and thread_fits(999, 2) and thread_fits(7, 7)
    # 40 rows on 6 cores: 7 each, 2 rows twice (5%); 5 rows on 6 cores: a core would have none
    assert not thread_fits(40, 6) and not thread_fits(5, 6)


@pytest.mark.parametrize("cc", COMPILERS[:1])
@settings(max_examples=25, deadline=None, derandomize=True)
@given(n=st.integers(1, 300), m=st.integers(1, 70), cores=st.integers(2, 7), matmul_kernel=st.booleans())
def test_any_split_among_any_number_of_cores_computes_every_element(cc, n, m, cores, matmul_kernel):
    if n < cores:
        return
    opts = [Opt(OptOps.THREAD, 0, cores)]
    if matmul_kernel:
        out, want, _ = run_matmul(cc, n, m, 24, opts=opts, cores=cores, seed=n * 100 + m)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
    else:
        out, want, _ = run_elementwise(cc, n, m, opts=opts, cores=cores)
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("cores, n, m, k", [(2, 999, 999, 64), (2, 1023, 1023, 48), (3, 77, 1000, 40), (6, 333, 250, 64)])
def test_matmuls_whose_axes_are_all_overlapped_tiles_run_on_every_core(cc, cores, n, m, k):
    # rows and columns no tile divides: both take tiles with an overlapping last one, and the cores split the tiles of
    # one of them (999x512 @ 512x999 ran on one core: 17.8 -> 4.2 ms on 2)
    opts = heuristic_opts(lower_kernel(matmul(n, m, k)), cores, 16)
    assert any(o.op is OptOps.OVERLAP for o in opts) and any(o.op is OptOps.THREAD and o.arg == cores for o in opts), opts
    out, want, parts = run_matmul(cc, n, m, k, cores=cores, seed=n + m)
    assert parts == cores
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    # bit for bit what one core computes
    one, _, _ = run_matmul(cc, n, m, k, opts=[o for o in opts if o.op is not OptOps.THREAD], cores=1, seed=n + m)
    np.testing.assert_array_equal(out, one)
