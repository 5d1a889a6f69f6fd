"""GPU opts on AMD kernels run in the amd-isa emulator: the seed's test_kernel_opts and test_tensor_cores cases
(locals, grouped reductions, upcast/unroll and padto on top of them, tensor cores with padded shapes), each compared
with the unoptimized kernel and with numpy."""

import struct

import numpy as np
import pytest
from amd_isa import emu
from hcq_runtime import AMDCompiler, CompileError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uopir import AMDOpenCLRenderer, AxisType, CodegenError, DType, Ops, Opt, OptOps, UOp, dtypes, float_to_bf16_bits, to_program

try:
    COMPILER = AMDCompiler("gfx1100")
except CompileError:
    COMPILER = None
pytestmark = pytest.mark.skipif(COMPILER is None, reason="clang-15 and ld.lld-15 are needed to build AMD kernels")
RENDERER = AMDOpenCLRenderer("gfx1100")


def run(ast: UOp, out: np.ndarray, *inputs: np.ndarray, opts: list[Opt] | None = None) -> tuple[np.ndarray, UOp]:
    """Lower `ast` with `opts` (None: the heuristic), run it in the emulator; returns the output and the PROGRAM."""
    program = to_program(ast, RENDERER, opts=opts)
    info = program.arg
    memory = emu.Memory()
    arrays = [out.copy(), *inputs]
    kernargs = b"".join(struct.pack("<Q", memory.map(arrays[slot])) for slot in info.globals)
    grid = tuple(g * size for g, size in zip(info.global_size, info.local_size))
    emu.run_kernel(COMPILER.compile(program.src[2].arg), kernargs, grid, info.local_size, memory)
    return arrays[0], program


def check_opts(ast: UOp, out: np.ndarray, inputs: tuple[np.ndarray, ...], expected: np.ndarray, opts: list[Opt], tol: float = 1e-5,
               plain: bool = True) -> UOp:
    """Run `ast` with `opts` (and with `plain` without opts): each result must match numpy's `expected`, and each other."""
    optimized, program = run(ast, out, *inputs, opts=opts)
    np.testing.assert_allclose(optimized, expected, rtol=tol, atol=tol)
    if plain:
        np.testing.assert_allclose(optimized, run(ast, out, *inputs, opts=[])[0], rtol=tol, atol=tol)
    return program


def source(program: UOp) -> str:
    return program.src[2].arg


# ---- the seed's test_grouped_reduce_with_local_upcast_padto ----
def sum_plus_max(shape: tuple[int, int, int]) -> UOp:
    """out[i] = a[i].sum() + a[i].max() over the last two axes; axes 0 i, 1-2 the sum's, 3-4 the max's."""
    n, h, w = shape
    out, a = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float32.ptr(n * h * w))
    i = UOp.range(n, 0)
    (y, x), (y2, x2) = (UOp.range(h, 1, AxisType.REDUCE), UOp.range(w, 2, AxisType.REDUCE)), \
        (UOp.range(h, 3, AxisType.REDUCE), UOp.range(w, 4, AxisType.REDUCE))
    total = a.index(i * h * w + y * w + x).load().reduce(y, x)
    largest = a.index(i * h * w + y2 * w + x2).load().reduce(y2, x2, arg=Ops.MAX)
    return UOp.sink(out.index(i).store(total + largest).end(i))


@pytest.mark.parametrize("opts", [
    # the seed's combination: every row a local, the sum's first axis unrolled, its second grouped (top) and padded
    # past the group (axis 7 is that group: derived axes follow the kernel's own, locals first)
    [Opt(OptOps.LOCAL, 0, 0), Opt(OptOps.UNROLL, 1, 0), Opt(OptOps.GROUPTOP, 2, 0), Opt(OptOps.PADTO, 7, 32)],
    [Opt(OptOps.LOCAL, 0, 0), Opt(OptOps.PADTO, 5, 8), Opt(OptOps.GROUP, 2, 13)],  # a padded local
    [Opt(OptOps.GROUP, 4, 13), Opt(OptOps.UNROLL, 3, 11), Opt(OptOps.PADTO, 5, 16)],  # the max grouped and padded
    [Opt(OptOps.PADTO, 0, 8), Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.GROUPTOP, 1, 11)],
], ids=["seed", "padded-local", "grouped-max", "upcast-on-local"])
def test_grouped_reduce_with_local_upcast_padto(opts):
    shape = (7, 11, 13)
    x = np.random.default_rng(7).random(shape, dtype=np.float32) - 2  # all negative: a padded lane that read 0 would win the max
    program = check_opts(sum_plus_max(shape), np.zeros(7, np.float32), (x.ravel(),), x.sum((1, 2)) + x.max((1, 2)), opts)
    assert "__local float" in source(program) and "__builtin_amdgcn_s_barrier" in source(program)


def test_flipped_padded_sum_grouped_upcast_local():
    # b.flip(0).pad(((2, 3), (0, 0))).sum(0) for b of 17x19: row i of the padded tensor is b[18 - i] for 2 <= i < 19
    rows, cols = 17, 19
    out, b = UOp.param(0, dtypes.float32.ptr(cols)), UOp.param(1, dtypes.float32.ptr(rows * cols))
    j, i = UOp.range(cols, 0), UOp.range(rows + 5, 1, AxisType.REDUCE)
    value = b.index((rows + 1 - i) * cols + j, (i >= 2) & (i < rows + 2)).load()
    ast = UOp.sink(out.index(j).store(value.reduce(i)).end(j))
    x = np.random.default_rng(7).random((rows, cols), dtype=np.float32)
    opts = [Opt(OptOps.GROUPTOP, 1, 0), Opt(OptOps.PADTO, 0, 8), Opt(OptOps.UPCAST, 0, 12), Opt(OptOps.LOCAL, 0, 0)]
    program = check_opts(ast, np.zeros(cols, np.float32), (x.ravel(),), np.pad(x[::-1], ((2, 3), (0, 0))).sum(0), opts)
    assert program.arg.local_size == (2, 22, 1)


def test_strided_conv2d_grouped_with_local():
    # x (1, 3, 15, 15) conv w (4, 3, 3, 3), padding 1, stride 2 -> (1, 4, 8, 8); axes co, oy, ox, ci, ky, kx
    cin, cout, size, k, out_size = 3, 4, 15, 3, 8
    out = UOp.param(0, dtypes.float32.ptr(cout * out_size * out_size))
    xs, ws = UOp.param(1, dtypes.float32.ptr(cin * size * size)), UOp.param(2, dtypes.float32.ptr(cout * cin * k * k))
    co, oy, ox = (UOp.range(n, axis) for axis, n in enumerate((cout, out_size, out_size)))
    ci, ky, kx = (UOp.range(n, 3 + axis, AxisType.REDUCE) for axis, n in enumerate((cin, k, k)))
    iy, ix = oy * 2 + ky - 1, ox * 2 + kx - 1
    inside = (iy >= 0) & (iy < size) & (ix >= 0) & (ix < size)
    value = xs.index(ci * size * size + iy * size + ix, inside).load() * ws.index(((co * cin + ci) * k + ky) * k + kx).load()
    ast = UOp.sink(out.index((co * out_size + oy) * out_size + ox).store(value.reduce(ci, ky, kx)).end(co, oy, ox))
    rng = np.random.default_rng(7)
    x, w = rng.random((cin, size, size), dtype=np.float32), rng.random((cout, cin, k, k), dtype=np.float32)
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (k, k), axis=(1, 2))[:, ::2, ::2]  # ci, oy, ox, ky, kx
    expected = np.einsum("cyxab,ocab->oyx", windows, w)
    program = check_opts(ast, np.zeros(cout * out_size * out_size, np.float32), (x.ravel(), w.ravel()), expected.ravel(),
                         [Opt(OptOps.GROUPTOP, 5, 0), Opt(OptOps.LOCAL, 1, 0)])
    assert program.arg.local_size == (8, 3, 1)


def test_unrolled_padded_cumsum():
    # a.cumsum(1) for a of 13x17: out[i, j] = sum over k <= j of a[i, k]; axes i, j, k
    rows, cols = 13, 17
    out, a = UOp.param(0, dtypes.float32.ptr(rows * cols)), UOp.param(1, dtypes.float32.ptr(rows * cols))
    i, j, k = UOp.range(rows, 0), UOp.range(cols, 1), UOp.range(cols, 2, AxisType.REDUCE)
    ast = UOp.sink(out.index(i * cols + j).store(a.index(i * cols + k, k <= j).load().reduce(k)).end(i, j))
    x = np.random.default_rng(7).random((rows, cols), dtype=np.float32)
    check_opts(ast, np.zeros(rows * cols, np.float32), (x.ravel(),), np.cumsum(x, 1).ravel(),
               [Opt(OptOps.UNROLL, 2, 0), Opt(OptOps.UPCAST, 0, 0), Opt(OptOps.PADTO, 1, 4)])


@pytest.mark.parametrize("opts", [
    [Opt(OptOps.LOCAL, 1, 16)],
    [Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.LOCAL, 1, 4)],
    [Opt(OptOps.GROUPTOP, 2, 32)],
    [Opt(OptOps.GROUPTOP, 2, 16), Opt(OptOps.UNROLL, 2, 4)],
    [Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.LOCAL, 1, 2), Opt(OptOps.GROUPTOP, 2, 32)],
    [Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.GROUP, 2, 4)],
    [Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.LOCAL, 1, 4), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.GROUP, 2, 8),
     Opt(OptOps.UNROLL, 2, 2)],
], ids=["local", "locals", "group", "group-unroll", "locals-group", "local-local-group", "all"])
def test_matmul_with_locals_and_groups(opts):
    # the seed's test_matmul, at 16x64 @ 64x16
    rng = np.random.default_rng(1552)
    a, b = rng.random((16, 64), dtype=np.float32), rng.random((64, 16), dtype=np.float32)
    check_opts(matmul(16, 64, 16, dtypes.float32, dtypes.float32), np.zeros(256, np.float32), (a.ravel(), b.ravel()), (a @ b).ravel(),
               opts, tol=1e-4, plain=False)


@pytest.mark.parametrize("opt, message", [
    (Opt(OptOps.UPCAST, 5, 2), "split off by an earlier opt"),
    (Opt(OptOps.GROUP, 0, 4), "GROUP splits a reduce axis"),
    (Opt(OptOps.LOCAL, 0, 3), "must be a multiple"),
])
def test_opts_that_do_not_apply_say_why(opt, message):
    ast = sum_plus_max((8, 4, 4))
    with pytest.raises(CodegenError, match=message):
        to_program(ast, RENDERER, opts=[Opt(OptOps.LOCAL, 0, 2), opt])


# ---- tensor cores (the seed's test_tc_shape_padded, test_tc_padto_full_upcast and the dtype combinations) ----
def matmul(m: int, k: int, n: int, dtype_in: DType, acc: DType) -> UOp:
    """out (m x n, of `acc`) = a (m x k) @ b (k x n); products formed in `acc`."""
    out, a, b = UOp.param(0, acc.ptr(m * n)), UOp.param(1, dtype_in.ptr(m * k)), UOp.param(2, dtype_in.ptr(k * n))
    i, j, r = UOp.range(m, 0), UOp.range(n, 1), UOp.range(k, 2, AxisType.REDUCE)
    x, y = a.index(i * k + r).load(), b.index(r * n + j).load()
    if acc != dtype_in:
        x, y = x.cast(acc), y.cast(acc)
    return UOp.sink(out.index(i * n + j).store((x * y).reduce(r)).end(i, j))


def to_device(x: np.ndarray, dt: DType) -> np.ndarray:
    """float32 values as the bits of `dt` the kernel reads."""
    if dt == dtypes.bfloat16:
        return np.array([float_to_bf16_bits(float(v)) for v in x.ravel()], np.uint16)
    return x.astype(np.float16 if dt == dtypes.float16 else np.float32).ravel()


def from_device(x: np.ndarray, dt: DType) -> np.ndarray:
    return (x.astype(np.uint32) << 16).view(np.float32) if dt == dtypes.bfloat16 else x.astype(np.float32)


def check_tc(m: int, k: int, n: int, dtype_in: DType, acc: DType, opts: list[Opt] | None, seed: int = 3, plain: bool = False) -> UOp:
    """Run the matmul with `opts` (and, with `plain`, without opts) and compare with numpy in float64."""
    rng = np.random.default_rng(seed)
    a, b = to_device(rng.random((m, k), dtype=np.float32), dtype_in), to_device(rng.random((k, n), dtype=np.float32), dtype_in)
    expected = from_device(a, dtype_in).reshape(m, k).astype(np.float64) @ from_device(b, dtype_in).reshape(k, n)
    out = to_device(np.zeros(m * n, np.float32), acc)
    ast = matmul(m, k, n, dtype_in, acc)
    # 16-bit accumulators round every partial sum: allow a few ulps of the largest output
    tol = {dtypes.float32: 1e-5, dtypes.float16: 4e-3, dtypes.bfloat16: 3e-2}[acc] * max(1.0, float(np.abs(expected).max()))
    if plain:
        np.testing.assert_allclose(from_device(run(ast, out, a, b, opts=[])[0], acc).reshape(m, n), expected, atol=tol, rtol=0)
    result, program = run(ast, out, a, b, opts=opts)
    np.testing.assert_allclose(from_device(result, acc).reshape(m, n), expected, atol=tol, rtol=0)
    return program


def test_tc_shape_padded():
    program = check_tc(17, 23, 29, dtypes.float16, dtypes.float32, [Opt(OptOps.TC, 0, 2)], plain=True)
    assert "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32" in source(program)
    assert program.arg.local_size == (32, 1, 1) and program.arg.global_size == (2, 2, 1)


def test_tc_padto_full_upcast():
    # the padded tile row of the upcast makes the A operand of two of the four WMMAs entirely padding
    program = check_tc(17, 23, 29, dtypes.float16, dtypes.float32, [Opt(OptOps.TC, 0, 2), Opt(OptOps.PADTO, 0, 4), Opt(OptOps.UPCAST, 0, 0)],
                       plain=True)
    assert program.arg.global_size == (2, 1, 1)


@pytest.mark.parametrize("dtype_in, acc", [(dtypes.float16, dtypes.float16), (dtypes.bfloat16, dtypes.float32),
                                           (dtypes.bfloat16, dtypes.bfloat16)], ids=["f16-f16", "bf16-f32", "bf16-bf16"])
def test_tc_dtypes(dtype_in, acc):
    program = check_tc(32, 32, 16, dtype_in, acc, [Opt(OptOps.TC, 0, 0)])
    assert source(program).count("__builtin_amdgcn_wmma_") == 1


@pytest.mark.parametrize("opts", [
    [],
    [Opt(OptOps.UPCAST, 0, 2)],
    [Opt(OptOps.UPCAST, 1, 2)],
    [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UPCAST, 1, 2)],
    [Opt(OptOps.UNROLL, 2, 2)],
    [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UNROLL, 2, 4)],
    [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UNROLL, 2, 2)],
    [Opt(OptOps.UNROLL, 2, 2), Opt(OptOps.LOCAL, 1, 2)],
    [Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UNROLL, 2, 2)],
    [Opt(OptOps.PADTO, 2, 3), Opt(OptOps.PADTO, 1, 3)],  # whole k and n tiles of padding
], ids=["tc", "upcast-m", "upcast-n", "upcasts", "unroll", "upcast-unroll4", "upcasts-unroll", "unroll-local", "local-upcast-unroll",
        "padded-tiles"])
def test_tc_with_upcast_unroll_and_locals(opts):
    # the seed's test_tensor_core_opts (half accumulation), at 32x64 @ 64x32: 2x2 tiles, 4 k tiles
    check_tc(32, 64, 32, dtypes.float16, dtypes.float16, [Opt(OptOps.TC, 0, 0), *opts])


def test_tc_with_a_gated_epilogue():
    # relu(a @ b + bias[n]) on padded tiles: the bias reads past n's end are gated off like the stores
    m, k, n = 20, 24, 18
    out, a, b, bias = UOp.param(0, dtypes.float32.ptr(m * n)), UOp.param(1, dtypes.float16.ptr(m * k)), \
        UOp.param(2, dtypes.float16.ptr(k * n)), UOp.param(3, dtypes.float32.ptr(n))
    i, j, r = UOp.range(m, 0), UOp.range(n, 1), UOp.range(k, 2, AxisType.REDUCE)
    total = (a.index(i * k + r).load().cast(dtypes.float32) * b.index(r * n + j).load().cast(dtypes.float32)).reduce(r)
    ast = UOp.sink(out.index(i * n + j).store((total + bias.index(j).load()).maximum(0.0)).end(i, j))
    rng = np.random.default_rng(5)
    x, y, z = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16), rng.standard_normal(n, dtype=np.float32)
    expected = np.maximum(x.astype(np.float32) @ y.astype(np.float32) + z, 0)
    program = check_opts(ast, np.zeros(m * n, np.float32), (x.ravel(), y.ravel(), z), expected.ravel(), [Opt(OptOps.TC, 0, 2)], tol=1e-4,
                         plain=False)
    assert "wmma" in source(program)


def test_heuristic_uses_tensor_cores_for_half_matmuls():
    program = check_tc(32, 32, 64, dtypes.float16, dtypes.float32, None)
    assert "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32" in source(program)
    assert "wmma" not in source(to_program(matmul(32, 32, 64, dtypes.float32, dtypes.float32), RENDERER))


def test_heuristic_keeps_rows_of_a_float_matmul_in_registers():
    rng = np.random.default_rng(2)
    a, b = rng.random((64, 32), dtype=np.float32), rng.random((32, 64), dtype=np.float32)
    result, program = run(matmul(64, 32, 64, dtypes.float32, dtypes.float32), np.zeros(64 * 64, np.float32), a.ravel(), b.ravel())
    np.testing.assert_allclose(result.reshape(64, 64), a @ b, rtol=1e-5, atol=1e-5)
    assert program.arg.local_size == (32, 1, 1) and program.arg.global_size == (2, 16, 1)  # 4 rows per work-item


@pytest.mark.parametrize("opts, message", [
    ([Opt(OptOps.TC, 0, 0)], "not a multiple of 16"),
    ([Opt(OptOps.UPCAST, 0, 1), Opt(OptOps.TC, 0, 2)], "TC must be the first opt"),
    ([Opt(OptOps.TC, 1, 2)], "not one numbered 1"),
])
def test_tc_that_does_not_apply_says_why(opts, message):
    with pytest.raises(CodegenError, match=message):
        to_program(matmul(17, 23, 29, dtypes.float16, dtypes.float32), RENDERER, opts=opts)


@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 40), st.integers(2, 40), st.integers(2, 40), st.sampled_from([1, 2]))
def test_tc_padding_matches_numpy_for_any_shape(m, k, n, pad_to):
    check_tc(m, k, n, dtypes.float16, dtypes.float32, [Opt(OptOps.TC, 0, 2), Opt(OptOps.PADTO, 1, pad_to)], seed=m * 41 + k)
