"""Kernel ASTs lowered by uopir's codegen, compiled for the CPU and run through run_linear, checked against numpy."""

import numpy as np
import pytest
from hcq_runtime import CCompiler, CompileError, Device, buffer_for, counters, run_linear
from uopir import AxisType, CodegenError, CRenderer, Ops, Opt, OptOps, SpecError, UOp, dtypes, heuristic_opts, to_program
from uopir.codegen.program import lower_kernel

NP_DTYPES = {
    dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.uint16: np.uint16,
    dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64, dtypes.uint64: np.uint64,
    dtypes.float16: np.float16, dtypes.float32: np.float32, dtypes.float64: np.float64,
}


def param(slot: int, dtype, size: int) -> UOp:
    return UOp.param(slot, dtype.ptr(size))


def run(ast: UOp, out: tuple[int, object], *inputs, device: str = "CPU") -> np.ndarray:
    """Run the kernel (or PROGRAM) `ast` with an output buffer (size, dtype) at slot 0 and `inputs` after it.

    Each input is a numpy array (its uopir dtype inferred) or an (array, uopir dtype) pair for raw bits."""
    size, dtype = out
    buffers = [UOp.new_buffer(device, size, dtype)]
    for item in inputs:
        arr, dt = item if isinstance(item, tuple) else (item, next(k for k, v in NP_DTYPES.items() if v == item.dtype))
        buffers.append(UOp.new_buffer(device, arr.size, dt))
        buffer_for(buffers[-1]).copyin(np.ascontiguousarray(arr))
    call = UOp(Ops.CALL, dtypes.void, (ast, *buffers))
    run_linear(UOp(Ops.LINEAR, dtypes.void, (call,)))
    return buffer_for(buffers[0]).numpy()


def elementwise_add_broadcast(rows: int, cols: int) -> UOp:
    """out[i, j] = a[i, j] + b[j]"""
    out, a, b = param(0, dtypes.float32, rows * cols), param(1, dtypes.float32, rows * cols), param(2, dtypes.float32, cols)
    i, j = UOp.range(rows, 0), UOp.range(cols, 1)
    return UOp.sink(out.index(i * cols + j).store(a.index(i * cols + j).load() + b.index(j).load()).end(i, j))


def reduce_axis(rows: int, cols: int, axis: int, op: Ops) -> UOp:
    """out = a.reshape(rows, cols) reduced with `op` over `axis`."""
    kept, reduced = (rows, cols) if axis == 1 else (cols, rows)
    out, a = param(0, dtypes.float32, kept), param(1, dtypes.float32, rows * cols)
    k, r = UOp.range(kept, 0), UOp.range(reduced, 1, AxisType.REDUCE)
    idx = k * cols + r if axis == 1 else r * cols + k
    return UOp.sink(out.index(k).store(a.index(idx).load().reduce(r, arg=op)).end(k))


def matmul(n: int, m: int, k: int, dtype=dtypes.float32) -> UOp:
    """out[n, m] = a[n, k] @ b[k, m]"""
    out, a, b = param(0, dtype, n * m), param(1, dtype, n * k), param(2, dtype, k * m)
    i, j, r = UOp.range(n, 0), UOp.range(m, 1), UOp.range(k, 2, AxisType.REDUCE)
    value = (a.index(i * k + r).load() * b.index(r * m + j).load()).reduce(r)
    return UOp.sink(out.index(i * m + j).store(value).end(i, j))


def pad1d(n: int, before: int, after: int) -> UOp:
    """out = pad(a, (before, after)) with zeros, through gated loads."""
    out, a = param(0, dtypes.float32, n + before + after), param(1, dtypes.float32, n)
    i = UOp.range(n + before + after, 0)
    valid = (i >= before) & (i < n + before)
    return UOp.sink(out.index(i).store(a.index(i - before, valid).load()).end(i))


def binary(n: int, op: Ops, dtype, out_dtype=None) -> UOp:
    out, a, b = param(0, out_dtype or dtype, n), param(1, dtype, n), param(2, dtype, n)
    i = UOp.range(n, 0)
    return UOp.sink(out.index(i).store(a.index(i).load().alu(op, b.index(i).load())).end(i))


def unary(n: int, src_dtype, dst_dtype, fn) -> UOp:
    out, a = param(0, dst_dtype, n), param(1, src_dtype, n)
    i = UOp.range(n, 0)
    return UOp.sink(out.index(i).store(fn(a.index(i).load())).end(i))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def test_broadcasting_elementwise(rng):
    a, b = rng.standard_normal((7, 33), dtype=np.float32), rng.standard_normal(33, dtype=np.float32)
    out = run(elementwise_add_broadcast(7, 33), (7 * 33, dtypes.float32), a, b)
    np.testing.assert_array_equal(out.reshape(7, 33), a + b)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("op, ref", [(Ops.ADD, np.sum), (Ops.MAX, np.max)])
def test_reduce_inner_and_outer_axis(rng, axis, op, ref):
    a = rng.standard_normal((13, 40), dtype=np.float32)
    out = run(reduce_axis(13, 40, axis, op), (a.shape[1 - axis], dtypes.float32), a)
    np.testing.assert_allclose(out, ref(a, axis=axis), rtol=1e-5, atol=1e-5)


def test_max_reduce_propagates_nan():
    a = np.array([[1, np.nan, 3], [4, 5, 6]], dtype=np.float32)
    out = run(reduce_axis(2, 3, 1, Ops.MAX), (2, dtypes.float32), a)
    assert np.isnan(out[0]) and out[1] == 6


@pytest.mark.parametrize("opts", [[], [Opt(OptOps.UPCAST, 0, 8)]])
def test_max_takes_a_nan_from_either_side_without_a_branch(opts):
    # NaN first, last, alone, beside infinities; scalar and 8-wide; the float max tests NaN with `|`, so the compiler
    # can select instead of branching per element (a max pool over random data mispredicted about every other one)
    a = np.array([[np.nan, 1, 2], [1, 2, np.nan], [-np.inf, np.nan, np.inf], [np.nan] * 3, [-np.inf, -1, -np.inf], [3, 9, 1],
                  [0, -0.0, -1], [np.inf, 1, 2]], dtype=np.float32)
    program = to_program(reduce_axis(8, 3, 1, Ops.MAX), CRenderer(vector_width=8), opts=opts)
    assert "||" not in program.src[2].arg
    out = run(program, (8, dtypes.float32), a)
    np.testing.assert_array_equal(out, np.max(a, axis=1))


@pytest.mark.parametrize("n, m, k", [(1, 1, 1), (17, 5, 9), (64, 64, 64), (48, 32, 100)])
def test_matmul(rng, n, m, k):
    a, b = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((k, m), dtype=np.float32)
    out = run(matmul(n, m, k), (n * m, dtypes.float32), a, b)
    np.testing.assert_allclose(out.reshape(n, m), a @ b, rtol=1e-4, atol=1e-4)


def test_padded_gated_loads(rng):
    a = rng.standard_normal(10, dtype=np.float32)
    out = run(pad1d(10, 3, 2), (15, dtypes.float32), a)
    np.testing.assert_array_equal(out, np.pad(a, (3, 2)))


def c_trunc_div(a, b):
    """C semantics written independently: the quotient truncated toward zero (computed in float64, exact here)."""
    q = np.trunc(a.astype(np.float64) / np.where(b == 0, 1, b)).astype(a.dtype)
    return np.where(b == 0, 0, q)


@pytest.mark.parametrize("dtype, np_dtype", [(dtypes.int32, np.int32), (dtypes.int64, np.int64), (dtypes.int8, np.int8)])
def test_integer_division_and_modulo_of_negative_numbers(dtype, np_dtype):
    a = np.array([7, -7, 7, -7, 0, 5, -128 if np_dtype == np.int8 else -1000, 3, 9, -9], dtype=np_dtype)
    b = np.array([2, 2, -2, -2, 3, 0, 7, -1, 0, 4], dtype=np_dtype)
    quotient = run(binary(10, Ops.CDIV, dtype), (10, dtype), a, b)
    remainder = run(binary(10, Ops.CMOD, dtype), (10, dtype), a, b)
    expected_q = c_trunc_div(a, b)
    np.testing.assert_array_equal(quotient, expected_q)
    # x % 0 is x, and the identity a == (a / b) * b + a % b holds for every pair
    np.testing.assert_array_equal(remainder, np.where(b == 0, a, a - expected_q * b))
    np.testing.assert_array_equal(quotient.astype(np.int64) * b + remainder, a)


def test_second_run_does_not_invoke_the_compiler(rng):
    ast = elementwise_add_broadcast(5, 6)  # unique to this test, so the first run compiles
    a, b = rng.standard_normal((5, 6), dtype=np.float32), rng.standard_normal(6, dtype=np.float32)
    counters.reset()
    run(ast, (30, dtypes.float32), a, b)
    first = CCompiler.invocations
    out = run(ast, (30, dtypes.float32), a * 2, b)
    assert CCompiler.invocations == first
    assert counters.kernels == 2 and counters.compiles == 1
    np.testing.assert_array_equal(out.reshape(5, 6), a * 2 + b)


OPT_LISTS = [
    [],
    [Opt(OptOps.UPCAST, 1, 4)],
    [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UPCAST, 1, 8)],
    [Opt(OptOps.UNROLL, 2, 4)],
    [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UNROLL, 2, 2)],
    [Opt(OptOps.THREAD, 0, 2)],
    [Opt(OptOps.THREAD, 0, 4), Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.UNROLL, 2, 4)],
    [Opt(OptOps.PADTO, 0, 48)],
    [Opt(OptOps.PADTO, 2, 48)],
    [Opt(OptOps.PADTO, 1, 40), Opt(OptOps.UPCAST, 1, 8)],
    [Opt(OptOps.LANES, 2, 8)],
    [Opt(OptOps.LANES, 2, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.THREAD, 0, 2)],
    [Opt(OptOps.LANES, 2, 16), Opt(OptOps.UNROLL, 2, 2)],
    [Opt(OptOps.SWAP, 0, 1)],
    [Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.THREAD, 0, 2), Opt(OptOps.SWAP, 0, 1)],
    [Opt(OptOps.LANES, 2, 8), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.THREAD, 0, 2), Opt(OptOps.SWAP, 0, 1)],
]


@pytest.mark.parametrize("opts", OPT_LISTS, ids=lambda o: ",".join(f"{x.op.name}{x.axis}:{x.arg}" for x in o) or "none")
def test_results_do_not_depend_on_opts(rng, opts):
    n, m, k = 32, 32, 32
    a, b = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((k, m), dtype=np.float32)
    program = to_program(matmul(n, m, k), CRenderer(), opts=opts)
    out = run(program, (n * m, dtypes.float32), a, b)
    np.testing.assert_allclose(out.reshape(n, m), a @ b, rtol=1e-4, atol=1e-4)


def matmul_t(n: int, m: int, k: int) -> UOp:
    """out[n, m] = a[n, k] @ b[m, k].T: both operands contiguous along the reduce axis (`x @ w.T`, `q @ k^T`)"""
    out, a, b = param(0, dtypes.float32, n * m), param(1, dtypes.float32, n * k), param(2, dtypes.float32, m * k)
    i, j, r = UOp.range(n, 0), UOp.range(m, 1), UOp.range(k, 2, AxisType.REDUCE)
    value = (a.index(i * k + r).load() * b.index(j * k + r).load()).reduce(r)
    return UOp.sink(out.index(i * m + j).store(value).end(i, j))


@pytest.mark.parametrize("n, m, k, lanes", [(64, 256, 784, 16), (8, 12, 64, 8), (3, 5, 48, 4), (16, 16, 40, 4), (5, 7, 30, None), (4, 4, 24, None)])
def test_reductions_along_the_contiguous_axis_accumulate_in_vector_lanes(rng, n, m, k, lanes):
    # the heuristic splits the reduce axis into lanes (one vector load per operand row) instead of gathering a strided
    # operand along the output axis; the lanes are combined after the loop, so the result is a reordered sum
    a, b = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((m, k), dtype=np.float32)
    renderer = CRenderer(vector_width=16)
    program = to_program(matmul_t(n, m, k), renderer, n_cores=2)
    # the widest of 16, 8 or 4 lanes that divides the axis and leaves the loop 8 steps or more
    opts = heuristic_opts(lower_kernel(matmul_t(n, m, k)), 2, 16)
    assert next((o.arg for o in opts if o.op is OptOps.LANES), None) == lanes
    out = run(program, (n * m, dtypes.float32), a, b)
    np.testing.assert_allclose(out.reshape(n, m), a.astype(np.float64) @ b.T.astype(np.float64), rtol=1e-4, atol=1e-4)
    for op, ref in ((Ops.ADD, np.sum), (Ops.MAX, np.max)):
        got = run(to_program(reduce_axis(n, k, 1, op), renderer, n_cores=2), (n, dtypes.float32), a)
        np.testing.assert_allclose(got, ref(a.astype(np.float64), axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opts", [[Opt(OptOps.SWAP, 0, 1)], [Opt(OptOps.SWAP, 1, 0), Opt(OptOps.UPCAST, 1, 4)],
                                  [Opt(OptOps.LANES, 2, 4), Opt(OptOps.UPCAST, 1, 5), Opt(OptOps.UPCAST, 0, 3), Opt(OptOps.THREAD, 0, 2),
                                   Opt(OptOps.SWAP, 0, 1)]])
def test_swapped_loops_of_different_sizes_compute_the_same_values(rng, opts):
    # the loops exchange places (and numbers), each keeping its own size: 24 rows of a outside or 40 rows of b
    n, m, k = 24, 40, 16
    a, b = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((m, k), dtype=np.float32)
    program = to_program(matmul_t(n, m, k), CRenderer(), opts=opts)
    out = run(program, (n * m, dtypes.float32), a, b)
    np.testing.assert_allclose(out.reshape(n, m), a.astype(np.float64) @ b.T.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_swap_takes_two_loop_axes():
    with pytest.raises(CodegenError, match="not reduce or split-off axes"):
        to_program(matmul_t(8, 8, 16), CRenderer(), opts=[Opt(OptOps.SWAP, 0, 2)])
    with pytest.raises(CodegenError, match="two different axes"):
        to_program(matmul_t(8, 8, 16), CRenderer(), opts=[Opt(OptOps.SWAP, 1, 1)])


def test_lanes_split_only_a_reduce_axis_by_a_divisor():
    with pytest.raises(CodegenError, match="into 16 lanes"):
        to_program(matmul_t(8, 8, 40), CRenderer(), opts=[Opt(OptOps.LANES, 2, 16)])
    with pytest.raises(CodegenError, match="LANES splits a reduce axis"):
        to_program(matmul_t(8, 8, 40), CRenderer(), opts=[Opt(OptOps.LANES, 1, 4)])


def test_opts_that_do_not_apply_are_refused():
    ast = matmul(32, 32, 30)
    with pytest.raises(CodegenError, match="size 30 by 4"):
        to_program(ast, CRenderer(), opts=[Opt(OptOps.UNROLL, 2, 4)])
    with pytest.raises(CodegenError, match="UPCAST applies to loop axes"):
        to_program(ast, CRenderer(), opts=[Opt(OptOps.UPCAST, 2, 2)])
    with pytest.raises(CodegenError, match="names axis 7"):
        to_program(ast, CRenderer(), opts=[Opt(OptOps.UPCAST, 7, 2)])


@pytest.mark.parametrize(("out_ch", "size", "vector_width", "first"), [
    (8, 12, 16, OptOps.PADTO),  # 10-wide rows: one vector, 6 padded lanes
    (16, 28, 16, OptOps.PADTO),  # 26: two vectors, the loop over them unrolled
    (8, 18, 16, OptOps.LANES),  # 16: one whole vector
    (8, 34, 16, OptOps.LANES),  # 32: a loop of whole vectors
    (16, 28, 8, OptOps.UPCAST),  # 26 on 8 lanes: over two vectors padded, so a tile of scalar accumulators
])
def test_a_convolution_weight_gradient_against_numpy(rng, out_ch, size, vector_width, first):
    """dw[o, ky, kx] = sum of g[b, o, y, x] * x[b, y + ky, x + kx] with the heuristic's opts: the image rows summed in
    vector lanes (padded to whole vectors) with a tile of vector accumulators over the taps and the output channels,
    or a tile of scalar accumulators, against numpy."""
    batch, taps = 4, 3
    n = size - taps + 1
    out = param(0, dtypes.float32, out_ch * taps * taps)
    g, x = param(1, dtypes.float32, batch * out_ch * n * n), param(2, dtypes.float32, batch * size * size)
    o, ky, kx = UOp.range(out_ch, 0), UOp.range(taps, 1), UOp.range(taps, 2)
    b, y, xx = (UOp.range(s, 3 + i, AxisType.REDUCE) for i, s in enumerate((batch, n, n)))
    value = (g.index(((b * out_ch + o) * n + y) * n + xx).load() * x.index((b * size + y + ky) * size + xx + kx).load()).reduce(b, y, xx)
    ast = UOp.sink(out.index((o * taps + ky) * taps + kx).store(value).end(o, ky, kx))
    opts = heuristic_opts(lower_kernel(ast), n_cores=2, vector_width=vector_width)
    assert opts[0].op is first and Opt(OptOps.UPCAST, 2, 3) in opts
    gn, xn = rng.standard_normal((batch, out_ch, n, n), dtype=np.float32), rng.standard_normal((batch, size, size), dtype=np.float32)
    got = run(to_program(ast, CRenderer(vector_width=vector_width), opts=opts, n_cores=2), (out_ch * taps * taps, dtypes.float32), gn, xn)
    want = np.stack([np.einsum("boyx,byx->o", gn, xn[:, i:i + n, j:j + n]) for i in range(taps) for j in range(taps)], axis=1)
    np.testing.assert_allclose(got.reshape(out_ch, taps * taps), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(("body", "want", "vector"), [
    (lambda a, c: a * c, lambda an, cn: (an * cn).sum(1), True),  # a product of gated loads: 0 by itself, vector code
    # + 1 in a padded lane would count: selected away, by a mask of the lanes' gates (vector code too since those are
    # built lane by lane; it was scalar code)
    (lambda a, c: a + 1.0, lambda an, cn: (an + 1).sum(1), True),
    (lambda a, c: a * 3.0, lambda an, cn: (an * 3).sum(1), True),
])
def test_padded_reduce_lanes_add_nothing(rng, body, want, vector):
    """A row sum over an 11-wide axis padded to 16 lanes: the padded lanes must add the sum's identity, whether the
    summed value is 0 there by itself (a product of loads that read 0 past the row) or not (+ 1, a constant factor).
    The rows are 11 apart, so a padded lane that read memory would read the next row."""
    rows, n = 6, 11
    out, a, c = param(0, dtypes.float32, rows), param(1, dtypes.float32, rows * n), param(2, dtypes.float32, rows * n)
    r, k = UOp.range(rows, 0), UOp.range(n, 1, AxisType.REDUCE)
    value = body(a.index(r * n + k).load(), c.index(r * n + k).load()).reduce(k)
    ast = UOp.sink(out.index(r).store(value).end(r))
    an, cn = rng.standard_normal((rows, n), dtype=np.float32), rng.standard_normal((rows, n), dtype=np.float32)
    program = to_program(ast, CRenderer(vector_width=16), opts=[Opt(OptOps.PADTO, 1, 16), Opt(OptOps.LANES, 1, 16)])
    assert ("*(uop_float_x16_u *)&data1" in program.src[2].arg) is vector  # the row read as vectors
    got = run(program, (rows, dtypes.float32), an, cn)
    np.testing.assert_allclose(got, want(an, cn), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("size", "lanes"), [(13, 4), (28, 8), (9, 4), (13, 16), (9, 8)])
def test_a_convolution_over_odd_rows_padded_to_whole_vectors(rng, size, lanes):
    """A valid 3x3 convolution whose output rows (11, 26, 7 wide) are padded to whole vectors: full vectors inside the
    row, the last partial one lane by lane, against numpy. The output rows are `GAP` elements apart, filled with NaN
    before the run: a lane written past its row would overwrite one (gated loads read 0, gated stores write nothing)."""
    batch, out_ch, in_ch, taps, gap = 2, 8, 3, 3, 9
    n = size - taps + 1
    row = n + gap
    out = param(0, dtypes.float32, batch * out_ch * n * row)
    x, w = param(1, dtypes.float32, batch * in_ch * size * size), param(2, dtypes.float32, out_ch * in_ch * taps * taps)
    b, o, y, xx = (UOp.range(s, i) for i, s in enumerate((batch, out_ch, n, n)))
    i, ky, kx = (UOp.range(s, 4 + j, AxisType.REDUCE) for j, s in enumerate((in_ch, taps, taps)))
    value = (x.index(((b * in_ch + i) * size + y + ky) * size + xx + kx).load() * w.index(((o * in_ch + i) * taps + ky) * taps + kx).load())
    ast = UOp.sink(out.index(((b * out_ch + o) * n + y) * row + xx).store(value.reduce(i, ky, kx)).end(b, o, y, xx))
    opts = [Opt(OptOps.PADTO, 3, lanes), Opt(OptOps.UPCAST, 3, lanes), Opt(OptOps.UPCAST, 1, 4)]
    program = to_program(ast, CRenderer(vector_width=16), opts=opts)
    assert "else for (int l = 0;" in program.src[2].arg
    xn, wn = rng.standard_normal((batch, in_ch, size, size), dtype=np.float32), rng.standard_normal((out_ch, in_ch, taps, taps), dtype=np.float32)
    buffers = [UOp.new_buffer("CPU", a.size, dtypes.float32) for a in (np.zeros(batch * out_ch * n * row), xn, wn)]
    for buf, arr in zip(buffers, (np.full(batch * out_ch * n * row, np.nan, np.float32), xn, wn)):
        buffer_for(buf).copyin(np.ascontiguousarray(arr))
    run_linear(UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (program, *buffers)),)))
    got = buffer_for(buffers[0]).numpy().reshape(batch, out_ch, n, row)
    want = np.einsum("biyxkl,oikl->boyx", np.lib.stride_tricks.sliding_window_view(xn, (taps, taps), axis=(2, 3)), wn)
    np.testing.assert_allclose(got[..., :n], want, rtol=1e-4, atol=1e-4)
    assert np.isnan(got[..., n:]).all()


def test_threaded_kernel_uses_several_cores(rng):
    a = rng.standard_normal((64, 64), dtype=np.float32)
    program = to_program(elementwise_add_broadcast(64, 64), CRenderer(), opts=[Opt(OptOps.THREAD, 0, 4)])
    assert program.arg.global_size == (4, 1, 1)
    out = run(program, (64 * 64, dtypes.float32), a, a[0])
    np.testing.assert_array_equal(out.reshape(64, 64), a + a[0])


def test_program_info():
    program = to_program(matmul(8, 4, 2), CRenderer(), opts=[])
    info = program.arg
    assert info.function_name == "r_8_4_2"
    assert info.globals == (0, 1, 2) and info.outs == (0,) and info.ins == (1, 2)
    assert to_program(elementwise_add_broadcast(3, 5), CRenderer(), opts=[]).arg.function_name == "E_3_5"
    assert "restrict" in program.src[2].arg


def test_malformed_kernel_is_refused_with_a_clear_error():
    a = UOp.param(0, dtypes.float32.ptr(4))
    with pytest.raises(SpecError, match="RESHAPE is a tensor-graph op: it must be lowered before codegen"):
        to_program(UOp.sink(a.index(UOp.const(0)).store(a.index(UOp.const(1)).load().reshape((1,)))), CRenderer())
    with pytest.raises(SpecError, match="INDEX offsets must be ints"):
        to_program(UOp.sink(a.index(UOp.const(0.5)).store(1.0)), CRenderer())
    with pytest.raises(CodegenError, match="a kernel SINK holds STOREs"):
        to_program(UOp.sink(a.index(UOp.const(0)).load()), CRenderer())
    with pytest.raises(CodegenError, match="a kernel AST is a SINK"):
        to_program(a.index(UOp.const(0)).load(), CRenderer())


def test_compiler_failure_shows_the_offending_line():
    dev = Device["CPU"]
    with pytest.raises(CompileError, match=r"line 2: .*undefined_name.* -- `return undefined_name;`"):
        dev.compiler.compile("int f(void) {\n  return undefined_name;\n}\n")


def test_debug_levels_print_calls_and_sources(rng, monkeypatch, capsys):
    a, b = rng.standard_normal((3, 7), dtype=np.float32), rng.standard_normal(7, dtype=np.float32)
    ast = elementwise_add_broadcast(3, 7)
    monkeypatch.setenv("DEBUG", "4")
    run(ast, (21, dtypes.float32), a, b)
    printed = capsys.readouterr().out
    assert "void E_3_7(void **bufs" in printed and "restrict" in printed
    assert "*** E_3_7" in printed
    monkeypatch.setenv("DEBUG", "2")
    run(ast, (21, dtypes.float32), a, b)
    printed = capsys.readouterr().out
    assert "*** E_3_7" in printed and "restrict" not in printed


def test_contiguous_upcasts_become_gcc_vectors_and_gathers_stay_loops(rng):
    n = 32
    program = to_program(elementwise_add_broadcast(n, n), CRenderer(), opts=[Opt(OptOps.UPCAST, 1, 8)])
    assert "vector_size(8 * sizeof(float))" in program.src[2].arg and "GCC unroll" not in program.src[2].arg
    # a transpose reads with stride n along the upcast axis: that block stays a scalar loop, and is still right
    out, a = UOp.param(0, dtypes.float32.ptr(n * n)), UOp.param(1, dtypes.float32.ptr(n * n))
    i, j = UOp.range(n, 0), UOp.range(n, 1)
    transpose = UOp.sink(out.index(i * n + j).store(a.index(j * n + i).load()).end(i, j))
    program = to_program(transpose, CRenderer(), opts=[Opt(OptOps.UPCAST, 1, 8)])
    assert "vector_size" not in program.src[2].arg and "GCC unroll 8" in program.src[2].arg
    x = rng.standard_normal((n, n), dtype=np.float32)
    np.testing.assert_array_equal(run(program, (n * n, dtypes.float32), x).reshape(n, n), x.T)


def test_regressions_found_by_the_tensor_layer():
    n = 4
    out, a = UOp.param(0, dtypes.int32.ptr(n)), UOp.param(1, dtypes.int32.ptr(n))
    i = UOp.range(n, 0)
    # the most negative int32 as a literal (a max-reduce identity)
    values = np.array([-5, 3, -(2**31), 0], np.int32)
    lowest = run(UOp.sink(out.index(i).store(a.index(i).load().maximum(-(2**31))).end(i)), (n, dtypes.int32), values)
    np.testing.assert_array_equal(lowest, [-5, 3, -(2**31), 0])
    # Python floor division in index math is lowered to something C can render
    j, k = UOp.range(4, 0), UOp.range(3, 1)
    out12, a12 = UOp.param(0, dtypes.float32.ptr(12)), UOp.param(1, dtypes.float32.ptr(4))
    floor_idx = UOp.sink(out12.index(j * 3 + k).store(a12.index((j * 2 + k) // 3).load()).end(j, k))
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(run(floor_idx, (12, dtypes.float32), x), [x[(jj * 2 + kk) // 3] for jj in range(4) for kk in range(3)])
    # a chain of thousands of ops: no recursion limit in the linearizer, no bracket limit in the C compiler
    value = a12.index(i).load()
    for step in range(3000):
        value = value * 1.0 + (1.0 if step % 2 else -1.0)
    chain = UOp.sink(param(0, dtypes.float32, n).index(i).store(value).end(i))
    np.testing.assert_array_equal(run(chain, (n, dtypes.float32), x), x)


def matvec(k: int, n: int, wdtype=dtypes.float16, weight=lambda w: w) -> UOp:
    """out[j] = sum_r x[r] * weight(W[r, j]) in float32: the decode-step matmul of an LLM, weight rows streamed."""
    out, x, w = param(0, dtypes.float32, n), param(1, dtypes.float32, k), param(2, wdtype, k * n)
    j, r = UOp.range(n, 0), UOp.range(k, 1, AxisType.REDUCE)
    value = (x.index(r).load() * weight(w.index(r * n + j).load()).cast(dtypes.float32)).reduce(r)
    return UOp.sink(out.index(j).store(value).end(j))


@pytest.mark.parametrize("k", [512, 510])  # 510 rows do not split into MATVEC_ROWS-row passes
def test_half_matvec_with_wide_vectors_and_two_cores(rng, k):
    n = 4608
    x, w = rng.standard_normal(k, dtype=np.float32), rng.standard_normal((k, n)).astype(np.float16)
    program = to_program(matvec(k, n), CRenderer(vector_width=16), n_cores=2)
    src = program.src[2].arg
    assert program.arg.global_size[0] == 2 and "_Float16" in src and "32 lanes as 2 vectors of 16" in src
    out = run(program, (n, dtypes.float32), x, w)
    np.testing.assert_allclose(out, x @ w.astype(np.float32), rtol=1e-4, atol=1e-3)


def test_long_accumulator_row_stays_a_loop(rng):
    # 72 accumulator vectors per core are more than MAX_UNROLL: unrolled, the body of relu(W) . x took clang seconds
    k, n = 64, 2 * 72 * 16
    x, w = rng.standard_normal(k, dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    program = to_program(matvec(k, n, dtypes.float32, lambda v: v.maximum(0.0)), CRenderer(vector_width=16), n_cores=2)
    assert "GCC unroll 72" not in program.src[2].arg
    out = run(program, (n, dtypes.float32), x, w)
    np.testing.assert_allclose(out, x @ np.maximum(w, 0), rtol=1e-4, atol=1e-4)


def test_int8_weights_scaled_per_row_like_q8(rng):
    k, n = 256, 1024
    x, q = rng.standard_normal(k, dtype=np.float32), rng.integers(-128, 128, (k, n), dtype=np.int8)
    program = to_program(matvec(k, n, dtypes.int8), CRenderer(vector_width=16), n_cores=2)
    out = run(program, (n, dtypes.float32), x, q)
    np.testing.assert_allclose(out, x @ q.astype(np.float32), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype, np_dtype", [(dtypes.uint8, np.uint8), (dtypes.int8, np.int8), (dtypes.int16, np.int16),
                                             (dtypes.uint16, np.uint16)])
@pytest.mark.parametrize("op", [Ops.ADD, Ops.MUL, Ops.SUB, Ops.XOR])
def test_narrow_integer_vectors_wrap_like_numpy(rng, dtype, np_dtype, op):
    n = 256
    info = np.iinfo(np_dtype)
    a, b = (rng.integers(info.min, info.max + 1, n).astype(np_dtype) for _ in range(2))
    program = to_program(binary(n, op, dtype), CRenderer(vector_width=16), opts=[Opt(OptOps.UPCAST, 0, 16)])
    assert "vector_size(16 * sizeof(" in program.src[2].arg
    ref = {Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.SUB: np.subtract, Ops.XOR: np.bitwise_xor}[op](a, b)
    np.testing.assert_array_equal(run(program, (n, dtype), a, b), ref)


def test_narrow_integer_shifts_and_half_bitcasts_as_vectors(rng):
    n = 128
    a = rng.integers(-2**15, 2**15, n).astype(np.int16)
    shifted = unary(n, dtypes.int16, dtypes.int16, lambda v: (v << 3) ^ (v >> 2))
    program = to_program(shifted, CRenderer(vector_width=16), opts=[Opt(OptOps.UPCAST, 0, 16)])
    assert "vector_size(16 * sizeof(" in program.src[2].arg
    np.testing.assert_array_equal(run(program, (n, dtypes.int16), a), (a << 3) ^ (a >> 2))
    h = rng.standard_normal(n).astype(np.float16)
    bits = unary(n, dtypes.float16, dtypes.uint16, lambda v: v.bitcast(dtypes.uint16) & 0x7FFF)
    program = to_program(bits, CRenderer(vector_width=16), opts=[Opt(OptOps.UPCAST, 0, 16)])
    np.testing.assert_array_equal(run(program, (n, dtypes.uint16), h), h.view(np.uint16) & 0x7FFF)


def test_scalar_narrow_integer_ops_wrap(rng):
    # outside vector blocks C promotes uint8 to int: every result is narrowed back
    a, b = np.array([250, 3, 128, 255], np.uint8), np.array([10, 255, 128, 255], np.uint8)
    add = to_program(binary(4, Ops.ADD, dtypes.uint8), CRenderer(), opts=[])
    np.testing.assert_array_equal(run(add, (4, dtypes.uint8), a, b), a + b)
    cmp = to_program(UOp.sink(param(0, dtypes.bool, 4).index(i := UOp.range(4, 0)).store(
        (param(1, dtypes.uint8, 4).index(i).load() + param(2, dtypes.uint8, 4).index(i).load()) < 5).end(i)), CRenderer(), opts=[])
    np.testing.assert_array_equal(run(cmp, (4, dtypes.bool), a, b), (a + b) < 5)


def test_attention_over_a_symbolic_number_of_rows_with_the_heuristic_opts(rng):
    # scores[h, g, p] = q[h, g] . k[p, h] for the first `live` of 96 cached rows: grouped heads as accumulators, 2 cores
    heads, group, dim, cap = 4, 3, 64, 96
    var = UOp.variable("start_pos", 0, cap - 1)
    rows = var + 1
    out, q = param(0, dtypes.float32, heads * group * cap), param(1, dtypes.float32, heads * group * dim)
    k = param(2, dtypes.float32, cap * heads * dim)
    h, g, p, d = UOp.range(heads, 0), UOp.range(group, 1), UOp.range(rows, 2), UOp.range(dim, 3, AxisType.REDUCE)
    value = (q.index((h * group + g) * dim + d).load() * k.index((p * heads + h) * dim + d).load()).reduce(d)
    program = to_program(UOp.sink(out.index((h * group + g) * rows + p).store(value).end(h, g, p)), CRenderer(vector_width=16), n_cores=2)
    assert program.arg.global_size[0] == 2
    qs, ks = rng.standard_normal((heads, group, dim), dtype=np.float32), rng.standard_normal((cap, heads, dim), dtype=np.float32)
    bufs = [UOp.new_buffer("CPU", heads * group * cap, dtypes.float32), UOp.new_buffer("CPU", qs.size, dtypes.float32),
            UOp.new_buffer("CPU", ks.size, dtypes.float32)]
    buffer_for(bufs[1]).copyin(qs)
    buffer_for(bufs[2]).copyin(ks)
    for live in (1, 17, cap):
        run_linear(UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (program, *bufs, var.bind(live - 1))),)))
        got = buffer_for(bufs[0]).numpy()[: heads * group * live].reshape(heads, group, live)
        np.testing.assert_allclose(got, np.einsum("hgd,phd->hgp", qs, ks[:live]), rtol=1e-5, atol=1e-5)


def test_threaded_kernels_launched_from_several_python_threads(rng):
    # launches are serialized and each core's part is claimed exactly once, even with more parts than pool threads
    from concurrent.futures import ThreadPoolExecutor

    program = to_program(elementwise_add_broadcast(96, 64), CRenderer(), opts=[Opt(OptOps.THREAD, 0, 6)])
    arrays = [rng.standard_normal((96, 64), dtype=np.float32) for _ in range(8)]
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda a: run(program, (96 * 64, dtypes.float32), a, a[0]), arrays))
    for a, out in zip(arrays, outs):
        np.testing.assert_array_equal(out.reshape(96, 64), a + a[0])


def test_a_scalar_broadcast_into_a_vector_keeps_the_sign_of_zero():
    # out[i, j] = a[i, j] + b[i] with j as a GCC vector: b[i] is broadcast, and -0.0 + -0.0 must stay -0.0
    rows, cols = 4, 16
    out, a, b = param(0, dtypes.float32, rows * cols), param(1, dtypes.float32, rows * cols), param(2, dtypes.float32, rows)
    i, j = UOp.range(rows, 0), UOp.range(cols, 1)
    ast = UOp.sink(out.index(i * cols + j).store(a.index(i * cols + j).load() + b.index(i).load()).end(i, j))
    program = to_program(ast, CRenderer(), opts=[Opt(OptOps.UPCAST, 1, cols)])
    av = np.full((rows, cols), -0.0, dtype=np.float32)
    av[1] = 1.5
    bv = np.array([-0.0, -0.0, 0.0, 2.0], dtype=np.float32)
    got = run(program, (rows * cols, dtypes.float32), av, bv).reshape(rows, cols)
    np.testing.assert_array_equal(got.view(np.uint32), (av + bv[:, None]).view(np.uint32))


@pytest.mark.parametrize("n, m, k, width, helper", [(64, 256, 784, 16, 16), (8, 12, 64, 8, 8), (16, 16, 40, 8, 4), (8, 3, 64, 8, None)])
def test_lane_sums_add_the_lanes_of_several_accumulators_at_once(rng, n, m, k, width, helper):
    # after a LANES loop, the lanes of each group of `helper` accumulators are added by one shuffle tree; a tile whose
    # accumulators do not fill whole groups (3 outputs of 8 lanes) keeps the lane-by-lane sum
    a, b = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((m, k), dtype=np.float32)
    program = to_program(matmul_t(n, m, k), CRenderer(vector_width=width), n_cores=2)
    src = program.src[2].arg
    assert (f"uop_lane_sums_float_{helper}(" in src) if helper else "uop_lane_sums" not in src
    out = run(program, (n * m, dtypes.float32), a, b)
    np.testing.assert_allclose(out.reshape(n, m), a.astype(np.float64) @ b.T.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_sixteen_lane_matmuls_read_packed_strips_as_whole_vectors(rng):
    # with 16-lane vectors (AVX-512) the heuristic's column tile is 32 floats: the packed copy of B is laid out in
    # strips of 32 (128 bytes), so the kernel reads each step's tile with whole-vector loads at a linear index; over
    # 16-float strips it read `(n / 16) * rows + n % 16`, which clang vectorized into gathers (1024^3: 17.5 -> 12.5 ms)
    from uopir import operand_packs

    assert CRenderer(vector_width=16).packed_operand_bytes == 128 and CRenderer(vector_width=8).packed_operand_bytes == 64
    n, m, k = 64, 256, 256
    out, a, b = (param(i, dtypes.float32, s) for i, s in enumerate((n * m, n * k, k * m)))
    i, j, r = UOp.range(n, 0), UOp.range(m, 1), UOp.range(k, 2, AxisType.REDUCE)
    ast = UOp.sink(out.index(i * m + j).store((a.index(i * k + r).load() * b.index(r * m + j).load()).reduce(r)).end(i, j))
    renderer = CRenderer(vector_width=16)
    kernel, (pack,) = operand_packs(ast, renderer.packed_operand_bytes)
    program = to_program(kernel, renderer, n_cores=2)
    source = program.src[2].arg
    assert "/ 16ll" not in source and "% 16ll" not in source and "/ 32ll" not in source and "% 32ll" not in source
    x, w = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((k, m), dtype=np.float32)
    packed = run(to_program(pack.ast, renderer), (pack.size, pack.dtype), w)
    got = run(program, (n * m, dtypes.float32), x, packed)
    np.testing.assert_allclose(got.reshape(n, m), x.astype(np.float64) @ w.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lanes", [8, 16])
def test_matmuls_whose_right_operand_outgrows_the_l2_loop_over_its_strips_outside(rng, lanes):
    # heuristic_opts puts the column-strip loop outside the row-block loop when the right operand is larger than the
    # L2 (each strip then stays in the L2 while the row blocks pass); the values are the same either way
    n, m, k = 64, 256, 256
    out, a, b = (param(i, dtypes.float32, s) for i, s in enumerate((n * m, n * k, k * m)))
    i, j, r = UOp.range(n, 0), UOp.range(m, 1), UOp.range(k, 2, AxisType.REDUCE)
    ast = UOp.sink(out.index(i * m + j).store((a.index(i * k + r).load() * b.index(r * m + j).load()).reduce(r)).end(i, j))
    x, w = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((k, m), dtype=np.float32)
    want = x.astype(np.float64) @ w.astype(np.float64)
    for l2_bytes, swapped in ((64 << 10, True), (4 << 20, False)):  # the operand is 256 KiB
        assert any(o.op is OptOps.SWAP for o in heuristic_opts(lower_kernel(ast), 2, lanes, l2_bytes)) is swapped
        program = to_program(ast, CRenderer(vector_width=lanes, l2_bytes=l2_bytes), n_cores=2)
        got = run(program, (n * m, dtypes.float32), x, w)
        np.testing.assert_allclose(got.reshape(n, m), want, rtol=1e-4, atol=1e-4)
