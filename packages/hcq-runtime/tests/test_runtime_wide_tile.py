"""A large float32 matmul's register tile of 6 rows of 4 vectors (AVX-512; 2 on AVX2), whose rows no power of two
divides: each core's last tile overlaps the one before (`OptOps.OVERLAP`). Compiled with clang and GCC, run on two
cores, checked against numpy; the overlapped rows must hold the same values as every other row."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_asts import C_COMPILERS as COMPILERS
from kernel_asts import cpu_kernel
from kernel_asts import float_matmul as matmul
from uopir import AxisType, CodegenError, CRenderer, Opt, OptOps, UOp, dtypes, heuristic_opts, to_program
from uopir.codegen.opts import WIDE_TILE_ROWS
from uopir.codegen.program import lower_kernel


def run(cc: str, n: int, m: int, k: int, opts=None, cores: int = 2, seed: int = 0, vector_width: int = 16) -> tuple[np.ndarray, np.ndarray, str]:
    """The kernel's result (opts None: the heuristic's for `vector_width` and `cores`), numpy's in float64, and the
    source."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((k, m), dtype=np.float32)
    prog, parts, src = cpu_kernel(cc, matmul(n, m, k), opts, cores, vector_width)
    out = np.full((n, m), np.nan, np.float32)
    prog([out.ctypes.data, a.ctypes.data, b.ctypes.data], [], n_cores=parts)
    return out, a.astype(np.float64) @ b.astype(np.float64), src


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("vector_width", [16, 8], ids=["avx512", "avx2"])
@pytest.mark.parametrize("n, m, k", [(392, 128, 256), (1024, 128, 300), (2 * 6 * 20, 192, 256)])
def test_the_heuristic_tiles_large_matmuls_with_overlapping_last_rows(cc, vector_width, n, m, k):
    opts = heuristic_opts(lower_kernel(matmul(n, m, k)), 2, vector_width)
    per_core = n // 2
    assert Opt(OptOps.THREAD, 0, 2) in opts and Opt(OptOps.OVERLAP, 0, WIDE_TILE_ROWS) in opts
    # rows of 4 vectors (2 runs of 2) on AVX-512, of 2 on AVX2
    assert Opt(OptOps.UPCAST, 1, 2 * vector_width) in opts and (Opt(OptOps.UPCAST, 1, 2) in opts) == (vector_width == 16)
    out, want, src = run(cc, n, m, k, vector_width=vector_width)
    # every row written (NaN-filled before), each within float32 rounding of the float64 product
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    # no gate: the last tile of each core starts earlier instead of reading or writing past its rows
    assert " if (" not in src and ("? " in src) == bool(per_core % WIDE_TILE_ROWS)
    if per_core % WIDE_TILE_ROWS:
        # the overlapped rows were computed twice: bit for bit the values an unoverlapped tiling computes
        plain_opts = [o for o in opts if o.op is not OptOps.OVERLAP] + [Opt(OptOps.UPCAST, 0, 2)]
        plain, _, _ = run(cc, n, m, k, opts=plain_opts, vector_width=vector_width)
        np.testing.assert_array_equal(out, plain)


@pytest.mark.parametrize("n, m, k, vector_width, why", [
    (1024, 128, 256, 4, "SSE (4 lanes) keeps its tile"),
    (64, 128, 256, 16, "too few rows per core"),
    (1024, 128, 64, 16, "a short reduction"),
    (1024, 96, 256, 16, "the row is not a multiple of 4 vectors"),
    (208, 128, 256, 16, "104 rows per core in tiles of 6 compute 4 again: more than 1/32 of them"),
])
def test_the_wide_tile_is_only_for_large_float32_matmuls_on_avx2_or_avx512(n, m, k, vector_width, why):
    opts = heuristic_opts(lower_kernel(matmul(n, m, k)), 2, vector_width)
    assert not any(o.op is OptOps.OVERLAP for o in opts), why


def test_no_wide_tile_for_float64_or_a_kernel_reading_its_output():
    out, a, b = (UOp.param(slot, dtypes.float64.ptr(size)) for slot, size in enumerate((1024 * 128, 1024 * 256, 256 * 128)))
    i, j, r = UOp.range(1024, 0), UOp.range(128, 1), UOp.range(256, 2, AxisType.REDUCE)
    f64 = UOp.sink(out.index(i * 128 + j).store((a.index(i * 256 + r).load() * b.index(r * 128 + j).load()).reduce(r)).end(i, j))
    for ast in (f64, matmul(1024, 128, 256, accumulate=True)):
        assert not any(o.op is OptOps.OVERLAP for o in heuristic_opts(lower_kernel(ast), 2, 16))


def test_overlap_is_refused_where_a_second_store_would_differ():
    # C += A @ B: the overlapped rows would add A @ B twice
    with pytest.raises(CodegenError, match="reads a buffer it writes"):
        to_program(matmul(20, 16, 8, accumulate=True), CRenderer(), opts=[Opt(OptOps.OVERLAP, 0, 6)])
    with pytest.raises(CodegenError, match="loop axis"):
        to_program(matmul(20, 16, 8), CRenderer(), opts=[Opt(OptOps.OVERLAP, 2, 3)])
    with pytest.raises(CodegenError, match="loop axis"):
        to_program(matmul(4, 16, 8), CRenderer(), opts=[Opt(OptOps.OVERLAP, 0, 6)])


@pytest.mark.parametrize("cc", COMPILERS[:1])
@settings(max_examples=20, deadline=None, derandomize=True)
@given(n=st.integers(2, 40), m=st.sampled_from([1, 3, 16, 20]), amount=st.integers(2, 9), cores=st.sampled_from([1, 2]), col=st.booleans())
def test_overlapping_tiles_of_any_size_compute_every_element(cc, n, m, amount, cores, col):
    threaded = cores > 1 and n % cores == 0 and not col
    axis, size = (1, m) if col else (0, n // cores if threaded else n)
    if size < amount:
        return
    opts = [Opt(OptOps.THREAD, 0, cores)] if threaded else []
    opts.append(Opt(OptOps.OVERLAP, axis, amount))
    out, want, _ = run(cc, n, m, 8, opts=opts, cores=cores, seed=n * 100 + m)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("vector_width, n, m, k", [(16, 100, 128, 300), (16, 29, 64, 40), (8, 77, 64, 100), (8, 50, 48, 9)])
def test_rows_no_tile_divides_get_the_tile_with_an_overlapping_last_one(cc, vector_width, n, m, k):
    # without it such a matmul had no row tile at all (100x1024 @ 1024x1024: 7.4 ms, with it 1.1)
    rows = 8 if vector_width == 16 else 4
    assert n % rows
    opts = heuristic_opts(lower_kernel(matmul(n, m, k)), 2, vector_width)
    assert Opt(OptOps.OVERLAP, 0, rows) in opts
    # the cores split another axis: both would store the rows where the last tile overlaps
    assert not any(o.op is OptOps.THREAD and o.axis == 0 for o in opts)
    out, want, src = run(cc, n, m, k, vector_width=vector_width)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    assert " if (" not in src


@pytest.mark.parametrize("n, accumulate, why", [(100, True, "the kernel reads the buffer it writes"),
                                                 (10, False, "10 rows in tiles of 8 would compute 6 twice")])
def test_uneven_rows_that_keep_no_row_tile(n, accumulate, why):
    opts = heuristic_opts(lower_kernel(matmul(n, 128, 300, accumulate=accumulate)), 2, 16)
    assert not any(o.op is OptOps.OVERLAP for o in opts), why


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("vector_width, n, m, k", [(16, 64, 100, 300), (16, 40, 77, 64), (16, 96, 200, 40), (8, 48, 100, 70), (8, 24, 36, 33),
                                                   (16, 256, 784, 64), (16, 48, 400, 100), (8, 40, 72, 90)])
def test_output_rows_no_vector_divides_take_two_vector_tiles_with_an_overlapping_last_one(cc, vector_width, n, m, k):
    # they had vectors of 4 lanes or padded ones and no unrolled reduce loop: 1024x1024 @ 1024x100 2.7 -> 1.1 ms; rows of
    # an odd number of whole vectors (784 = 49 x 16, 400, 72 = 9 x 8) had one vector per row
    assert m % (2 * vector_width)
    opts = heuristic_opts(lower_kernel(matmul(n, m, k)), 2, vector_width)
    assert Opt(OptOps.OVERLAP, 1, 2 * vector_width) in opts
    assert not any(o.op is OptOps.THREAD and o.axis == 1 for o in opts)
    out, want, src = run(cc, n, m, k, vector_width=vector_width)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    assert " if (" not in src and f"{2 * vector_width} lanes as" in src  # whole vectors, no gated lanes


@pytest.mark.parametrize("m, why", [(48, "a multiple of a vector: one-vector rows, exact"), (40, "40 columns in tiles of 32 compute 24 twice"),
                                    (30, "not longer than one tile")])
def test_output_rows_that_keep_their_vectors(m, why):
    opts = heuristic_opts(lower_kernel(matmul(64, m, 300)), 2, 16)
    assert not any(o.op is OptOps.OVERLAP and o.axis == 1 for o in opts), why


@pytest.mark.parametrize("vector_width", [16, 8], ids=["avx512", "avx2"])
@pytest.mark.parametrize("n, m", [(1023, 1023), (600, 999)])
def test_the_wide_tile_takes_strips_of_an_operand_packed_with_an_overlapping_last_strip(n, m, vector_width):
    # 999 or 1023 columns: `operand_packs` splits the column axis into strips of two vectors (axis 1, the last one
    # overlapping) and lanes (a new axis); the tile's 4 vectors per row are then 2 strips on AVX-512, its 2 one strip on
    # AVX2
    from uopir import operand_packs

    kernel, packs = operand_packs(matmul(n, m, 1024), CRenderer(vector_width=vector_width).packed_operand_bytes)
    assert len(packs) == 1
    opts = heuristic_opts(lower_kernel(kernel), 2, vector_width)
    assert Opt(OptOps.OVERLAP, 0, WIDE_TILE_ROWS) in opts and (Opt(OptOps.UPCAST, 1, 2) in opts) == (vector_width == 16), opts
    # strips outside the rows (the packed operand is larger than half of a 1 MiB L2)
    assert any(o.op is OptOps.SWAP for o in opts)
