"""The CPU heuristic and the C renderer's unroll plan, read from the opts and the rendered source (the kernels' results
are checked against numpy in hcq-runtime's test_runtime_kernels)."""

import math
import re

import pytest
from uopir import AMDOpenCLRenderer, AxisType, CRenderer, Ops, Opt, OptOps, UOp, dtypes, heuristic_opts, to_program
from uopir.codegen.linearize import MAX_UNROLL
from uopir.codegen.opts import MATMUL_UNROLL, MATVEC_ROWS
from uopir.renderer.cstyle import UNROLL_BUDGET


def matvec(k: int, n: int) -> UOp:
    out, x, w = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float32.ptr(k)), UOp.param(2, dtypes.float16.ptr(k * n))
    j, r = UOp.range(n, 0), UOp.range(k, 1, AxisType.REDUCE)
    value = (x.index(r).load() * w.index(r * n + j).load().cast(dtypes.float32)).reduce(r)
    return UOp.sink(out.index(j).store(value).end(j))


def matmul(n: int, m: int, k: int, dtype=dtypes.float32) -> UOp:
    out, a, b = (UOp.param(i, dtype.ptr(s)) for i, s in enumerate((n * m, n * k, k * m)))
    i, j, r = UOp.range(n, 0), UOp.range(m, 1), UOp.range(k, 2, AxisType.REDUCE)
    return UOp.sink(out.index(i * m + j).store((a.index(i * k + r).load() * b.index(r * m + j).load()).reduce(r)).end(i, j))


def unroll_pragmas(src: str) -> list[int]:
    return [int(x) for x in re.findall(r"GCC unroll (\d+)", src)]


@pytest.mark.parametrize("k, rows", [(512, MATVEC_ROWS), (510, None)])
def test_matvec_keeps_the_accumulator_row_and_reads_several_weight_rows_per_pass(k, rows):
    opts = heuristic_opts(matvec(k, 4608), n_cores=2, vector_width=16)
    # the row is split into 32-lane vectors and two cores; each core keeps its remaining 72 vectors as accumulators
    assert opts[:3] == [Opt(OptOps.UPCAST, 0, 32), Opt(OptOps.THREAD, 0, 2), Opt(OptOps.UPCAST, 0, 72)]
    assert opts[3:] == ([Opt(OptOps.UNROLL, 1, rows)] if rows else [])


def test_matmuls_get_a_register_tile_and_step_the_reduce_loop_by_eight():
    # two vectors per row: the reduce loop takes MATMUL_UNROLL steps per iteration (no matvec row unroll)
    opts = heuristic_opts(matmul(64, 64, 64), vector_width=8)
    assert opts == [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UNROLL, 2, MATMUL_UNROLL)]
    # a tile of one-vector rows (112 = 7 x 16) keeps its loop as it is; so does a reduce of 8 or fewer steps
    assert not any(o.op is OptOps.UNROLL for o in heuristic_opts(matmul(128, 112, 256), vector_width=16))
    assert not any(o.op is OptOps.UNROLL for o in heuristic_opts(matmul(64, 64, 8), vector_width=8))


@pytest.mark.parametrize("m, vector_width", [(16, 16), (32, 16), (8, 8), (16, 8)])
def test_a_row_of_exactly_one_or_two_vectors_is_one_tile(m, vector_width):
    # 16 or 32 outputs per row (a linear layer's, a convolution's 32-wide image rows) had 4-lane vectors, or two tiles
    # of one vector: 256x784 @ 784x16 127 -> 63 us, 1024x1024 @ 1024x32 534 -> 435 us (AVX-512, 2 cores)
    opts = heuristic_opts(matmul(256, m, 784), vector_width=vector_width)
    assert opts[0] == Opt(OptOps.UPCAST, 1, m)


def test_a_row_of_one_vector_takes_twice_the_rows():
    # 112 columns are 7 vectors of 16 (pairs of them would compute one vector in 7 twice): one vector per row, so 16
    # rows keep 16 accumulators
    assert heuristic_opts(matmul(256, 112, 64), vector_width=16)[:2] == [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 16)]
    # two vectors per row keep 8 rows; so do rows no axis divides into 16
    assert heuristic_opts(matmul(256, 1024, 64), vector_width=16)[:2] == [Opt(OptOps.UPCAST, 1, 32), Opt(OptOps.UPCAST, 0, 8)]
    assert heuristic_opts(matmul(24, 112, 64), vector_width=16)[:2] == [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 8)]
    # and so do rows too long for 16 of them to stay in the first-level cache (16 x 784 floats: 50 KiB)
    assert heuristic_opts(matmul(64, 112, 784), vector_width=16)[:2] == [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 8)]
    assert heuristic_opts(matmul(512, 112, 512), vector_width=16)[:2] == [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 16)]


@pytest.mark.parametrize("m", [784, 400, 144])
def test_a_row_of_an_odd_number_of_vectors_takes_pairs_of_them_with_an_overlapping_last_one(m):
    # 784 = 49 x 16 (an MLP's weight gradient, 256x64 @ 64x784: 131-140 -> 109-111 us on 2 AVX-512 cores) or 25 or 9
    # vectors: tiles of two vectors and 8 rows, the last tile overlapping the one before (one vector of the row twice)
    opts = heuristic_opts(matmul(256, m, 64), n_cores=2, vector_width=16)
    assert opts[0] == Opt(OptOps.OVERLAP, 1, 32) and Opt(OptOps.UPCAST, 0, 8) in opts, opts
    # not for a kernel that reads what it writes (a second store of the overlapped columns would add again)
    out, a, b = (UOp.param(i, dtypes.float32.ptr(s)) for i, s in enumerate((256 * m, 256 * 64, 64 * m)))
    i, j, r = UOp.range(256, 0), UOp.range(m, 1), UOp.range(64, 2, AxisType.REDUCE)
    acc = (a.index(i * 64 + r).load() * b.index(r * m + j).load()).reduce(r) + out.index(i * m + j).load()
    accumulate = UOp.sink(out.index(i * m + j).store(acc).end(i, j))
    assert not any(o.op is OptOps.OVERLAP for o in heuristic_opts(accumulate, n_cores=2, vector_width=16))


def test_a_long_accumulator_loop_is_not_unrolled_and_runs_outside_the_row_unroll():
    src = to_program(matvec(512, 4608), CRenderer(vector_width=16), n_cores=2).src[2].arg
    assert all(n <= MAX_UNROLL for n in unroll_pragmas(src)) and f"< {72}" in src
    # the 72-iteration accumulator loop opens before the unrolled rows so each accumulator is updated 4 times per load
    assert src.index("< 72") < src.index(f"GCC unroll {MATVEC_ROWS}")


def test_nested_scalar_unrolls_stay_within_the_budget():
    # a transposed 4x24x32 read cannot be vectorized: unrolling the whole nest would copy its body 3072 times
    n0, n1, n2 = 4, 24, 32
    out, a = UOp.param(0, dtypes.float32.ptr(n0 * n1 * n2)), UOp.param(1, dtypes.float32.ptr(n0 * n1 * n2))
    i, j, k = UOp.range(n0, 0), UOp.range(n1, 1), UOp.range(n2, 2)
    ast = UOp.sink(out.index((i * n1 + j) * n2 + k).store(a.index((k * n1 + j) * n0 + i).load()).end(i, j, k))
    opts = [Opt(OptOps.UPCAST, 0, n0), Opt(OptOps.UPCAST, 1, n1), Opt(OptOps.UPCAST, 2, n2)]
    src = to_program(ast, CRenderer(vector_width=8), opts=opts).src[2].arg
    assert "vector_size" not in src and math.prod(unroll_pragmas(src)) <= UNROLL_BUDGET
    # a GPU-style renderer without SIMD lanes unrolls every register loop up to MAX_UNROLL
    assert sorted(unroll_pragmas(to_program(ast, CRenderer(vector_width=1), opts=opts).src[2].arg)) == [n0, n1, n2]


def prefetches(src: str) -> list[str]:
    return re.findall(r"__builtin_prefetch\(&(data\d+)\[.* \+ (\d+)ll\]\);", src)


@pytest.mark.parametrize(("vector_width", "dtype", "lanes", "per_vector"),
                         [(16, dtypes.float32, 32, 16), (8, dtypes.float32, 16, 8), (16, dtypes.float64, 32, 8)])
def test_vector_blocks_wider_than_a_register_are_written_as_register_vectors(vector_width, dtype, lanes, per_vector):
    """A matmul tile's rows of two vectors are written as register-wide vectors, the loop over them unrolled: GCC 12 keeps
    a vector type twice a register wide in two registers within an expression but sends it through the stack between
    statements (1024^3 float32 on AVX-512: 12 ms instead of 6.7; clang is as fast either way)."""
    src = to_program(matmul(256, 256, 256, dtype), CRenderer(vector_width=vector_width), n_cores=2).src[2].arg
    assert f"{lanes} lanes as {lanes // per_vector} vectors of {per_vector}" in src
    widths = {int(w) for w in re.findall(r"vector_size\((\d+) \* sizeof", src)}
    assert widths and max(widths) * dtype.itemsize <= vector_width * 4, widths


def test_matvec_weight_loads_prefetch_the_next_pass():
    n = 4608
    src = to_program(matvec(512, n), CRenderer(vector_width=16), n_cores=2).src[2].arg
    # each 64-byte half vector is one cache line; the next pass starts MATVEC_ROWS weight rows further on
    assert prefetches(src) == [("data2", str(MATVEC_ROWS * n))]
    # float32 weights: a block of 32 lanes is two vectors of one line each, each prefetching its own line
    out, x, w = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float32.ptr(512)), UOp.param(2, dtypes.float32.ptr(512 * n))
    j, r = UOp.range(n, 0), UOp.range(512, 1, AxisType.REDUCE)
    f32 = UOp.sink(out.index(j).store((x.index(r).load() * w.index(r * n + j).load()).reduce(r)).end(j))
    src = to_program(f32, CRenderer(vector_width=16), n_cores=2).src[2].arg
    assert "32 lanes as 2 vectors of 16" in src and prefetches(src) == [("data2", str(MATVEC_ROWS * n))]


def test_no_prefetch_for_an_operand_every_output_tile_reads_again():
    # a weight gradient x^T @ g (784 x 64 @ 64 x 256, x 64 x 784 row-major): B moves 1 KiB per reduce step, but each row
    # tile of the output reads all of it again, so it is in cache after the first pass
    ast = matmul(256, 784, 64)
    src = to_program(ast, CRenderer(vector_width=8), n_cores=2).src[2].arg
    assert prefetches(src) == []
    # the matrix-vector kernel, whose weights each output tile reads once, still prefetches (above)
    assert prefetches(to_program(matvec(512, 4608), CRenderer(vector_width=16), n_cores=2).src[2].arg)


def test_no_prefetch_for_short_jumps_or_on_gpus():
    # a 64-wide float32 matmul moves its B loads 256 bytes per step: the hardware prefetcher follows that on its own
    assert "__builtin_prefetch" not in to_program(matmul(64, 64, 64), CRenderer(vector_width=8)).src[2].arg
    assert AMDOpenCLRenderer().prefetch("&data0[0]") is None


def attention_scores(heads: int, group: int, dim: int, rows: UOp) -> UOp:
    """scores[h, g, p] = sum_d q[h, g, d] * k[p, h, d] over a symbolic number of cached rows p (grouped-query)."""
    n = int(rows.vmax)
    out, q = UOp.param(0, dtypes.float32.ptr(heads * group * n)), UOp.param(1, dtypes.float32.ptr(heads * group * dim))
    k = UOp.param(2, dtypes.float32.ptr(n * heads * dim))
    h, g, p, d = UOp.range(heads, 0), UOp.range(group, 1), UOp.range(rows, 2), UOp.range(dim, 3, AxisType.REDUCE)
    value = (q.index((h * group + g) * dim + d).load() * k.index((p * heads + h) * dim + d).load()).reduce(d)
    return UOp.sink(out.index((h * group + g) * rows + p).store(value).end(h, g, p))


@pytest.mark.parametrize("vector_width", [8, 16])
@pytest.mark.parametrize(("n", "m", "k"), [(8, 768, 576), (8, 160, 576), (1, 768, 576), (4, 1536, 576), (16, 3072, 576)])
def test_matvec_rows_with_a_register_tile_stay_within_the_vector_nest_bound(n, m, k, vector_width):
    # a prompt of 8 tokens on AVX2 got a 4-token register tile, and then the whole 48-vector accumulator row with 4
    # weight rows per pass on top: a nest of 768 vector bodies (found on a Zen 3 CPU by test_sched_compile_bounds)
    nest = math.prod(o.arg for o in heuristic_opts(matmul(n, m, k), n_cores=2, vector_width=vector_width)
                     if o.op in (OptOps.UPCAST, OptOps.UNROLL)) // vector_width
    assert nest <= 512


def test_symbolic_kernels_get_cores_and_independent_accumulators_but_no_split_of_the_symbolic_axis():
    rows = UOp.variable("start_pos", 0, 255) + 1
    opts = heuristic_opts(attention_scores(4, 3, 64, rows), n_cores=2, vector_width=16)
    # the head dimension (contiguous in q and k) becomes 8 vector lanes; the 3 query heads of a group are 3 lane
    # vectors sharing each key vector; the 4 KV heads go 2 per core; the symbolic rows axis is left whole
    assert opts == [Opt(OptOps.LANES, 3, 8), Opt(OptOps.UPCAST, 1, 3), Opt(OptOps.THREAD, 0, 2)]
    assert heuristic_opts(attention_scores(1, 24, 64, rows), n_cores=1, vector_width=16) == [Opt(OptOps.LANES, 3, 8), Opt(OptOps.UPCAST, 1, 4)]
    # no constant reduce axis with contiguous operands: independent accumulators (8 on AVX-512) along a long axis
    # instead, which share each key
    assert heuristic_opts(attention_scores(1, 24, 6, rows), n_cores=1, vector_width=16) == [Opt(OptOps.UPCAST, 1, 8)]


def test_a_reduction_along_the_contiguous_axis_gets_vector_lanes_and_an_output_tile():
    # x @ w.T: both operands are contiguous along k, and w is strided along the output's contiguous axis
    out, a, b = (UOp.param(i, dtypes.float32.ptr(s)) for i, s in enumerate((64 * 256, 64 * 784, 256 * 784)))
    i, j, r = UOp.range(64, 0), UOp.range(256, 1), UOp.range(784, 2, AxisType.REDUCE)
    ast = UOp.sink(out.index(i * 256 + j).store((a.index(i * 784 + r).load() * b.index(j * 784 + r).load()).reduce(r)).end(i, j))
    # w (256 x 784) is the bigger operand: the loop over its rows goes outside, so x's rows stay in cache
    assert heuristic_opts(ast, n_cores=2, vector_width=16) == [Opt(OptOps.LANES, 2, 16), Opt(OptOps.UPCAST, 1, 4),
                                                               Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.THREAD, 1, 2), Opt(OptOps.SWAP, 0, 1)]
    src = to_program(ast, CRenderer(vector_width=16), n_cores=2).src[2].arg
    loops = re.findall(r"for \(long long ridx(\d+) = 0; ridx\d+ < (\d+)ll", src)
    # the cores split w's rows (each reads half of the larger operand): this core's 32 quads of them outside, the 16
    # quads of x's rows inside
    assert loops[:2] == [("0", "32"), ("1", "16")]
    assert "core_id * 128ll" in src  # ... 128 of w's rows a core
    # x the bigger operand: no swap
    big_x = UOp.sink(out.index(i * 256 + j).store((UOp.param(1, dtypes.float32.ptr(64 * 784 * 16)).index(i * 784 + r).load()
                                                   * b.index(j * 784 + r).load()).reduce(r)).end(i, j))
    assert not any(o.op is OptOps.SWAP for o in heuristic_opts(big_x, n_cores=2, vector_width=16))
    src = to_program(ast, CRenderer(vector_width=16), n_cores=2).src[2].arg
    assert "uop_fma_float_x16" in src  # the lanes are one vector per operand row
    # AVX2: 8 lanes and a 4x2 tile (16 registers)
    assert heuristic_opts(ast, vector_width=8)[:3] == [Opt(OptOps.LANES, 2, 8), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 2)]
    # a row sum (softmax's denominator, a norm): lanes along the row, four rows at a time
    x = UOp.param(1, dtypes.float32.ptr(64 * 512))
    row = UOp.sink(UOp.param(0, dtypes.float32.ptr(64)).index(i).store(x.index(i * 512 + UOp.range(512, 1, AxisType.REDUCE)).load()
                                                                       .reduce(UOp.range(512, 1, AxisType.REDUCE), arg=Ops.MAX)).end(i))
    assert heuristic_opts(row, vector_width=16) == [Opt(OptOps.LANES, 1, 16), Opt(OptOps.UPCAST, 0, 4)]
    # the usual layout (b contiguous along the output axis) keeps the output-axis vectors
    assert not any(o.op is OptOps.LANES for o in heuristic_opts(matmul(64, 256, 784), vector_width=16))


@pytest.mark.parametrize("n, m, overlapped", [(77, 256, [0]), (64, 250, [1]), (50, 250, [1, 0])])
def test_a_lanes_tile_overlaps_axes_it_does_not_divide(n, m, overlapped):
    # x @ w.T with a prompt of 77 tokens or 250 outputs: the 4x4 tile with an overlapping last one, where it had none
    out, a, b = (UOp.param(i, dtypes.float32.ptr(s)) for i, s in enumerate((n * m, n * 576, m * 576)))
    i, j, r = UOp.range(n, 0), UOp.range(m, 1), UOp.range(576, 2, AxisType.REDUCE)
    ast = UOp.sink(out.index(i * m + j).store((a.index(i * 576 + r).load() * b.index(j * 576 + r).load()).reduce(r)).end(i, j))
    opts = heuristic_opts(ast, n_cores=2, vector_width=16)
    assert [o.axis for o in opts if o.op is OptOps.OVERLAP] == overlapped and all(o.arg == 4 for o in opts if o.op is OptOps.OVERLAP)
    # the cores split an axis the tile divides; only when there is none, the overlapped tiles (50 x 250: both axes)
    threads = [o for o in opts if o.op is OptOps.THREAD]
    assert len(threads) == 1 and (threads[0].axis in overlapped) == (len(overlapped) == 2)


def test_the_register_tile_takes_rows_that_share_the_loaded_vectors():
    # a convolution: the input row vector (along ox) is the same for every output channel but not for every output row,
    # so the tile's rows are output channels (the old choice, output rows, loaded the input again for each channel)
    co, oy, ox, ci, k = 16, 16, 32, 4, 3
    out = UOp.param(0, dtypes.float32.ptr(co * oy * ox))
    x, w = UOp.param(1, dtypes.float32.ptr(ci * (oy + 2) * (ox + 2))), UOp.param(2, dtypes.float32.ptr(co * ci * k * k))
    c, y, xx = UOp.range(co, 0), UOp.range(oy, 1), UOp.range(ox, 2)
    i, ky, kx = (UOp.range(n, a, AxisType.REDUCE) for n, a in ((ci, 3), (k, 4), (k, 5)))
    value = (x.index((i * (oy + 2) + y + ky) * (ox + 2) + xx + kx).load() * w.index(((c * ci + i) * k + ky) * k + kx).load()).reduce(i, ky, kx)
    ast = UOp.sink(out.index((c * oy + y) * ox + xx).store(value).end(c, y, xx))
    opts = heuristic_opts(ast, vector_width=16)
    assert opts[:2] == [Opt(OptOps.UPCAST, 2, 32), Opt(OptOps.UPCAST, 0, 8)]


def test_a_store_under_a_loop_that_may_run_zero_times_keeps_the_loop():
    # the store does not read the range: a loop that runs at least once may be left out (the same value stored again),
    # one that may run zero times may not (was: `data0[1] = 7.0f;` run once for an empty view's write)
    out = UOp.param(0, dtypes.float32.ptr(4))
    for end, looped in ((0, True), (UOp.variable("n", 0, 8), True), (3, False)):
        i = UOp.range(end, 0, AxisType.LOOP)
        ast = UOp.sink(out.index(UOp.const(1)).store(UOp.const(7.0, dtypes.float32)).end(i))
        source = to_program(ast, CRenderer(), opts=[]).src[2].arg
        assert ("for (" in source) is looped, source


def conv_weight_gradient(batch: int, out_ch: int, size: int, taps: int = 3) -> UOp:
    """dw[o, ky, kx] = sum over b, y, x of g[b, o, y, x] * x[b, y + ky, x + kx] (one input channel, a valid convolution
    of `size` x `size` images): its contiguous output axis is a filter row's 3 taps, too short for a vector."""
    n = size - taps + 1
    out = UOp.param(0, dtypes.float32.ptr(out_ch * taps * taps))
    g, x = UOp.param(1, dtypes.float32.ptr(batch * out_ch * n * n)), UOp.param(2, dtypes.float32.ptr(batch * size * size))
    o, ky, kx = UOp.range(out_ch, 0), UOp.range(taps, 1), UOp.range(taps, 2)
    b, y, xx = (UOp.range(s, 3 + i, AxisType.REDUCE) for i, s in enumerate((batch, n, n)))
    value = (g.index(((b * out_ch + o) * n + y) * n + xx).load() * x.index((b * size + y + ky) * size + xx + kx).load()).reduce(b, y, xx)
    return UOp.sink(out.index((o * taps + ky) * taps + kx).store(value).end(o, ky, kx))


@pytest.mark.parametrize(("vector_width", "out_ch", "size", "tile"), [(8, 16, 28, 4), (8, 8, 60, 4)])
def test_a_reduction_without_an_output_vector_keeps_a_register_tile_of_accumulators(vector_width, out_ch, size, tile):
    # the filter row's 3 taps whole, times a tile of output channels (the image row each tap loads serves all of them),
    # instead of one serial chain of adds per output; within 3 * rows scalar accumulators. Image rows more than two
    # vectors wide and not a whole number of them (26 and 58 on 8 lanes) are not summed in lanes
    opts = heuristic_opts(conv_weight_gradient(16, out_ch, size), n_cores=2, vector_width=vector_width)
    assert opts[:2] == [Opt(OptOps.UPCAST, 2, 3), Opt(OptOps.UPCAST, 0, tile)]
    rows = 8 if vector_width >= 16 else 4
    assert math.prod(o.arg for o in opts if o.op is OptOps.UPCAST) <= 3 * rows and any(o.op is OptOps.THREAD for o in opts)


@pytest.mark.parametrize(("size", "lanes_opts"), [
    (13, [Opt(OptOps.PADTO, 5, 16), Opt(OptOps.LANES, 5, 16)]),  # 11-wide rows: one vector, padded
    (28, [Opt(OptOps.PADTO, 5, 16), Opt(OptOps.LANES, 5, 16), Opt(OptOps.UNROLL, 5, 2)]),  # 26: two, the loop unrolled
    (18, [Opt(OptOps.LANES, 5, 16)]),  # 16: a whole vector
    (66, [Opt(OptOps.LANES, 5, 16)]),  # 64: a loop of whole vectors
])
def test_a_weight_gradient_sums_its_image_rows_in_vector_lanes(size, lanes_opts):
    # with no output axis to vectorize, the image rows (contiguous in both operands) are the lanes, padded to whole
    # vectors; the tile is the 3 taps times output channels (the channels' gradient rows beside the taps' input rows:
    # 3 + 4 vector loads for 12 accumulators), at most 2 * rows of them
    opts = heuristic_opts(conv_weight_gradient(16, 8, size), n_cores=2, vector_width=16)
    assert opts[:len(lanes_opts)] == lanes_opts
    assert opts[len(lanes_opts):len(lanes_opts) + 2] == [Opt(OptOps.UPCAST, 2, 3), Opt(OptOps.UPCAST, 0, 4)]
    src = to_program(conv_weight_gradient(16, 8, size), CRenderer(vector_width=16), n_cores=2).src[2].arg
    assert "uop_fma_float_x16(" in src


def conv_forward(batch: int, out_ch: int, in_ch: int, size: int, taps: int = 3) -> UOp:
    """out[b, o, y, x] = sum over i, ky, kx of x[b, i, y + ky, x + kx] * w[o, i, ky, kx] (a valid convolution)."""
    n = size - taps + 1
    out = UOp.param(0, dtypes.float32.ptr(batch * out_ch * n * n))
    x, w = UOp.param(1, dtypes.float32.ptr(batch * in_ch * size * size)), UOp.param(2, dtypes.float32.ptr(out_ch * in_ch * taps * taps))
    b, o, y, xx = (UOp.range(s, i) for i, s in enumerate((batch, out_ch, n, n)))
    i, ky, kx = (UOp.range(s, 4 + j, AxisType.REDUCE) for j, s in enumerate((in_ch, taps, taps)))
    value = (x.index(((b * in_ch + i) * size + y + ky) * size + xx + kx).load() * w.index(((o * in_ch + i) * taps + ky) * taps + kx).load())
    return UOp.sink(out.index(((b * out_ch + o) * n + y) * n + xx).store(value.reduce(i, ky, kx)).end(b, o, y, xx))


@pytest.mark.parametrize(("size", "lanes"), [(13, 16), (28, 4), (36, 8)])
def test_an_odd_contiguous_output_axis_is_padded_to_whole_vectors(size, lanes):
    # image rows of 11, 26 and 34 outputs: padded to whole vectors of the lanes that leave the least scalar work (the
    # last, partial vector runs lane by lane), or to one vector when the row is more than half of one (its gates are
    # constants then), then the usual register tile of output channels
    opts = heuristic_opts(conv_forward(16, 16, 8, size), n_cores=2, vector_width=16)
    assert opts[:3] == [Opt(OptOps.PADTO, 3, lanes), Opt(OptOps.UPCAST, 3, lanes), Opt(OptOps.UPCAST, 1, 8)]
    src = to_program(conv_forward(16, 16, 8, size), CRenderer(vector_width=16), n_cores=2).src[2].arg
    assert "lanes as one vector" in src and "else for (int l = 0;" in src


@pytest.mark.parametrize("size", [104, 58, 230])
def test_a_long_odd_output_row_takes_two_vector_tiles_the_last_overlapping(size):
    # rows of 102, 56 and 228 outputs: tiles of 32 lanes, the last moved back to end with the row (stored twice, the same
    # values), instead of 8 padded lanes or 4 (convolutions over them 1.5-3.2x faster on AVX-512)
    opts = heuristic_opts(conv_forward(8, 16, 16, size), n_cores=2, vector_width=16)
    assert opts[:2] == [Opt(OptOps.OVERLAP, 3, 32), Opt(OptOps.UPCAST, 1, 8)]


def test_an_odd_axis_read_with_a_stride_is_not_padded():
    # a read every other element along x: no vector block would form, so no padding (it would only add work)
    out, g = UOp.param(0, dtypes.float32.ptr(8 * 26)), UOp.param(1, dtypes.float32.ptr(8 * 52))
    y, x = UOp.range(8, 0), UOp.range(26, 1)
    ast = UOp.sink(out.index(y * 26 + x).store(g.index(y * 52 + x * 2).load()).end(y, x))
    assert not any(o.op is OptOps.PADTO for o in heuristic_opts(ast, vector_width=16))


def test_a_pooling_gradient_reading_pairs_of_lanes_is_padded_and_gathered():
    # a 2x2 pool's gradient reads its input at x // 2 (each element for two outputs): padded to vectors, and rendered
    # as vector code that gathers those loads lane by lane (a small CNN's 26-wide pooling gradient: 70 -> 22 us)
    out, g, m = UOp.param(0, dtypes.float32.ptr(8 * 26)), UOp.param(1, dtypes.float32.ptr(8 * 13)), UOp.param(2, dtypes.float32.ptr(8 * 26))
    y, x = UOp.range(8, 0), UOp.range(26, 1)
    picked = m.index(y * 26 + x).load().ne(0).cast(dtypes.float32)  # a mask's lanes as 1.0 and 0.0
    ast = UOp.sink(out.index(y * 26 + x).store(picked * g.index(y * 13 + x // 2).load() / 4.0).end(y, x))
    opts = heuristic_opts(ast, vector_width=8)
    assert Opt(OptOps.PADTO, 1, 4) in opts and Opt(OptOps.UPCAST, 1, 4) in opts
    src = to_program(ast, CRenderer(vector_width=8), opts=opts).src[2].arg
    assert "uop_float_x4 val" in src and "__builtin_convertvector(-(" in src
    assert re.search(r"\(\(uop_float_x4\)\{.*data1\[.*data1\[.*data1\[.*data1\[", src)  # the gather, lane by lane
    # an 11-wide row would be one padded vector of 16 lanes, but each gathered lane is a load of its own: 4-lane vectors
    y, x = UOp.range(8, 0), UOp.range(11, 1)
    ast = UOp.sink(out.index(y * 11 + x).store(g.index(y * 6 + x // 2).load() * 2.0).end(y, x))
    assert Opt(OptOps.PADTO, 1, 4) in heuristic_opts(ast, vector_width=16)


def test_a_select_on_a_lane_dependent_gate_is_vector_code_with_the_mask_built_lane_by_lane():
    # a cropped pooling's gradient: the 11th column of each row is outside the pooled 10 (a select on x < 10, which
    # the padded vector's lanes answer one by one); it was scalar code (a small CNN's 11-wide one: 44 -> 20 us)
    out, g = UOp.param(0, dtypes.float32.ptr(8 * 11)), UOp.param(1, dtypes.float32.ptr(8 * 5))
    y, x = UOp.range(8, 0), UOp.range(11, 1)
    inside = x < 10
    value = inside.where(g.index(y * 5 + x // 2, inside).load() * 2.0, 0.0)
    ast = UOp.sink(out.index(y * 11 + x).store(value).end(y, x))
    opts = heuristic_opts(ast, vector_width=16)
    src = to_program(ast, CRenderer(vector_width=16), opts=opts).src[2].arg
    assert "uop_int_x4 alu" in src and src.count("-(int)(") == 4, src  # the condition's mask, one lane at a time
    assert "*(uop_float_x4_u *)&data0[" in src  # stored as a vector


def test_a_short_reduction_without_an_output_vector_tiles_along_its_stores():
    # a convolution's input gradient before the window sum: col[b, i, y, x, ky, kx] = sum over 16 output channels of
    # g[b, o, y, x] * w[o, i, ky, kx]. Each output is 16 products, so the stores bound it: the tile is the two tap axes
    # (9 outputs written as one run), not taps times rows of another axis (8 scattered runs of 3)
    batch, in_ch, out_ch, n, taps = 16, 8, 16, 11, 3
    out = UOp.param(0, dtypes.float32.ptr(batch * in_ch * n * n * taps * taps))
    g, w = UOp.param(1, dtypes.float32.ptr(batch * out_ch * n * n)), UOp.param(2, dtypes.float32.ptr(out_ch * in_ch * taps * taps))
    b, i, y, x, ky, kx = (UOp.range(s, j) for j, s in enumerate((batch, in_ch, n, n, taps, taps)))
    o = UOp.range(out_ch, 6, AxisType.REDUCE)
    value = (g.index(((b * out_ch + o) * n + y) * n + x).load() * w.index(((o * in_ch + i) * taps + ky) * taps + kx).load()).reduce(o)
    ast = UOp.sink(out.index(((((b * in_ch + i) * n + y) * n + x) * taps + ky) * taps + kx).store(value).end(b, i, y, x, ky, kx))
    assert heuristic_opts(ast, n_cores=2, vector_width=16)[:2] == [Opt(OptOps.UPCAST, 5, 3), Opt(OptOps.UPCAST, 4, 3)]


def test_an_odd_axis_of_half_floats_is_not_padded():
    # the renderer keeps gated float16 accesses lane by lane (each is converted): padding them would only add work
    out, a = UOp.param(0, dtypes.float16.ptr(8 * 26)), UOp.param(1, dtypes.float16.ptr(8 * 26))
    y, x = UOp.range(8, 0), UOp.range(26, 1)
    ast = UOp.sink(out.index(y * 26 + x).store(a.index(y * 26 + x).load() * 2).end(y, x))
    assert not any(o.op is OptOps.PADTO for o in heuristic_opts(ast, vector_width=16))


def row_softmax(rows: int, n: int) -> UOp:
    """out[i, j] = exp(x[i, j] - max_k x[i, k]) / sum_k exp(x[i, k] - max): the rows' reductions beside the output loop,
    as the scheduler fuses them (uop_scheduler.schedule._row_fused)."""
    out, x = UOp.param(0, dtypes.float32.ptr(rows * n)), UOp.param(1, dtypes.float32.ptr(rows * n))
    i, j = UOp.range(rows, 0), UOp.range(n, 1)
    k1, k2 = UOp.range(n, 2, AxisType.REDUCE), UOp.range(n, 3, AxisType.REDUCE)
    top = x.index(i * n + k1).load().reduce(k1, arg=Ops.MAX)
    total = (x.index(i * n + k2).load() - top).exp2().reduce(k2)
    return UOp.sink(out.index(i * n + j).store((x.index(i * n + j).load() - top).exp2() / total).end(i, j))


def _loops_in_order(lin: list[UOp]) -> list[tuple[int, int]]:
    """(axis id, depth) of each loop (not a register axis) a linear program opens, in program order."""
    depth, ret = 0, []
    for u in lin:
        if u.op is Ops.RANGE:
            if u.arg[1] in (AxisType.LOOP, AxisType.REDUCE):
                ret.append((u.arg[0], depth))
            depth += 1
        elif u.op is Ops.END:
            depth -= 1
    return ret


@pytest.mark.parametrize("opts", [[], None])
def test_a_row_reduction_the_row_reads_is_one_loop_per_row_ahead_of_the_row(opts):
    # the max and the sum do not move along j: each is computed once per row i, in a loop beside j's, not inside it
    # (inside, each row would be reduced once per element: n times the work). The sum reads the max: the max comes first
    lin = list(to_program(row_softmax(8, 64), CRenderer(), opts=opts).src[1].src)
    loops = _loops_in_order(lin)
    reduce_loops = [(a, d) for a, d in loops if a in (2, 3)]
    assert [a for a, _ in reduce_loops] == [2, 3], loops
    j_depth = next(d for a, d in loops if a == 1)
    assert all(d == j_depth for _, d in reduce_loops), loops  # siblings of j's loop (same depth), not nested in it
    assert [a for a, _ in loops].index(1) == len(loops) - 1  # j's loop opens last


def test_row_reductions_get_vector_lanes_the_output_vectors_and_the_rows_the_cores():
    opts = heuristic_opts(row_softmax(2048, 256), n_cores=2, vector_width=16)
    # axes: i, j (loops), then k1, k2 (reduces)
    assert opts == [Opt(OptOps.LANES, 2, 16), Opt(OptOps.LANES, 3, 16), Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.THREAD, 0, 2)]
    # an odd row keeps its reductions scalar, and no cores for a small kernel
    assert heuristic_opts(row_softmax(4, 30), n_cores=2, vector_width=16) == []


def permuted_copy(n: int, m: int, transposed: bool = True) -> UOp:
    out, src = UOp.param(0, dtypes.float32.ptr(n * m)), UOp.param(1, dtypes.float32.ptr(n * m))
    i, j = UOp.range(n, 0), UOp.range(m, 1)
    read = src.index(j * n + i if transposed else i * m + j)
    return UOp.sink(out.index(i * m + j).store(read.load() + 1.0).end(i, j))


def test_a_transposed_copy_is_tiled_square():
    # vectors along the output rows, and as many of the rows the source reads contiguously: each vector's cache lines
    # are then read whole while they are cached
    assert heuristic_opts(permuted_copy(1024, 1024), n_cores=2, vector_width=16) == \
        [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.THREAD, 0, 2)]
    assert heuristic_opts(permuted_copy(64, 24), vector_width=8)[:2] == [Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.UPCAST, 0, 8)]
    # not when the source is read in order, nor when the rows are not a whole number of tiles
    assert heuristic_opts(permuted_copy(1024, 1024, transposed=False), vector_width=16) == [Opt(OptOps.UPCAST, 1, 16)]
    assert heuristic_opts(permuted_copy(40, 32), vector_width=16) == [Opt(OptOps.UPCAST, 1, 16)]


def row_argmax(n: int, k: int, gathered: bool = False) -> UOp:
    # the row's maximum over one reduce axis, then over a second one the first index holding it (as k - index); with
    # `gathered`, the element at that index read after both reductions (as topk's picks read their values)
    out, src = UOp.param(0, (dtypes.float32 if gathered else dtypes.int32).ptr(n)), UOp.param(1, dtypes.float32.ptr(n * k))
    i, r1, r2 = UOp.range(n, 0), UOp.range(k, 1, AxisType.REDUCE), UOp.range(k, 2, AxisType.REDUCE)
    top = src.index(i * k + r1).load().reduce(r1, arg=Ops.MAX)
    first = src.index(i * k + r2).load().eq(top).where(UOp.const(k, dtypes.int32) - r2.cast(dtypes.int32), 0).reduce(r2, arg=Ops.MAX)
    value = src.index(i * k + (UOp.const(k, dtypes.int32) - first).cast(i.dtype)).load() if gathered else first
    return UOp.sink(out.index(i).store(value).end(i))


@pytest.mark.parametrize("gathered", [False, True])
def test_reductions_in_sequence_over_rows_read_in_order_take_lanes_each(gathered):
    # each reduce axis is read contiguously and the outputs are rows 1024 floats apart: lanes along both reduce axes
    # and a tile of rows, not 32 rows as lanes (each lane a load 4 KiB from the next). A read at the index the
    # reductions found does not move with their axes: it is made once they are done
    opts = heuristic_opts(row_argmax(1024, 1024, gathered), n_cores=2, vector_width=16)
    assert opts == [Opt(OptOps.LANES, 1, 16), Opt(OptOps.LANES, 2, 16), Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.THREAD, 0, 2)]


def elementwise(*shape: int) -> UOp:
    """out = a / b + a over a contiguous `shape`."""
    n = math.prod(shape)
    out, a, b = (UOp.param(i, dtypes.float32.ptr(n)) for i in range(3))
    rs = [UOp.range(s, i) for i, s in enumerate(shape)]
    idx = rs[0]
    for r, s in zip(rs[1:], shape[1:]):
        idx = idx * s + r
    return UOp.sink(out.index(idx).store(a.index(idx).load() / b.index(idx).load() + a.index(idx).load()).end(*rs))


def test_kernels_from_thread_min_work_iterations_are_split_among_the_cores():
    from uopir.codegen.opts import THREAD_MIN_WORK

    # a small CNN's pooling gradient, 16x16x11x11 (31k iterations), ran on one core at 83 us, on two at 44
    assert any(o.op is OptOps.THREAD for o in heuristic_opts(elementwise(16, 16, 11, 11), n_cores=2, vector_width=16))
    assert THREAD_MIN_WORK <= 16 * 16 * 11 * 11
    # below the bound a kernel stays on one core (waking the other costs more than it saves), and one core never splits
    assert not any(o.op is OptOps.THREAD for o in heuristic_opts(elementwise(2, THREAD_MIN_WORK // 4), n_cores=2, vector_width=16))
    assert not any(o.op is OptOps.THREAD for o in heuristic_opts(elementwise(16, 16, 11, 11), n_cores=1, vector_width=16))
