"""Comparisons, selects, max, trunc, square roots and constant divisions inside GCC vector blocks (uopir's cvector: a lane-dependent
bool is a mask vector), compiled for the CPU with clang and with GCC where present, checked against numpy on values
that exercise the edges: NaN, infinities, signed zeros, fractions around the rounding points, integers past 2**23."""

import ctypes
import mmap
import shutil

import numpy as np
import pytest
from hcq_runtime import CCompiler, Device
from uopir import AxisType, CRenderer, Ops, Opt, OptOps, UOp, dtypes, to_program

NP = {dtypes.float32: np.float32, dtypes.float64: np.float64, dtypes.int32: np.int32, dtypes.int64: np.int64, dtypes.int8: np.int8,
      dtypes.int16: np.int16, dtypes.uint32: np.uint32}
N = 64
# one clang (its vector builtins) and GCC (the fallback code of the trunc helper), each where installed
COMPILERS = [found for names in (("clang", "clang-19", "clang-15"), ("gcc",)) if (found := next(filter(shutil.which, names), None))]


def kernel(in_dtypes, out_dtype, fn) -> UOp:
    out = UOp.param(0, out_dtype.ptr(N))
    i = UOp.range(N, 0)
    loads = [UOp.param(s + 1, dt.ptr(N)).index(i).load() for s, dt in enumerate(in_dtypes)]
    return UOp.sink(out.index(i).store(fn(*loads)).end(i))


_compilers: dict[str, CCompiler] = {}
_chunks = [1]


@pytest.fixture(autouse=True, params=[1, 2], ids=["one-vector", "two-vectors"])
def chunks(request):
    """Every block of this module is rendered as one vector, then as two vectors of a register each (a block wider than
    the target's vector register, as a matmul tile's rows of 32 lanes are on AVX-512)."""
    _chunks[0] = request.param
    yield request.param
    _chunks[0] = 1


def compiled(cc: str, src: str, name: str):
    if cc not in _compilers:
        _compilers[cc] = CCompiler(cc=cc)
    return Device["CPU"].program(name, _compilers[cc].compile(src))


def blocks_as(lanes: int) -> str:
    """How the source names a block of `lanes` lanes split as this test's chunk count says."""
    n = _chunks[0]
    return f"{lanes} lanes as one vector" if n == 1 else f"{lanes} lanes as {n} vectors of {lanes // n}"


def run(cc: str, ast: UOp, out_dtype, *arrays: np.ndarray, lanes: int = 8) -> np.ndarray:
    """Render `ast` with vector blocks of `lanes` lanes per register (in `chunks` registers), compile it with `cc` and
    run it on the host over `arrays`."""
    widest = max(p.dtype.base.itemsize for p in ast.toposort() if p.op is Ops.PARAM)
    assert lanes * widest % 4 == 0
    upcast = lanes * _chunks[0]
    program = to_program(ast, CRenderer(vector_width=lanes * widest // 4), opts=[Opt(OptOps.UPCAST, 0, upcast)])
    src = program.src[2].arg
    assert blocks_as(upcast) in src, "the block stayed a scalar loop"
    prog = compiled(cc, src, program.arg.function_name)
    out = np.zeros(N, NP[out_dtype])
    arrays = tuple(np.ascontiguousarray(a) for a in arrays)
    prog([out.ctypes.data, *(a.ctypes.data for a in arrays)], [], n_cores=1)
    return out


def special_floats(rng, dtype) -> np.ndarray:
    big = 2.0**23 if dtype == np.float32 else 2.0**52
    edge = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -0.49999997, 0.49999997, big - 0.5, -(big - 0.5), big,
            -big, big + 1, 3e9, -3e9, 1e30 if dtype == np.float32 else 1e300, 1e-40 if dtype == np.float32 else 5e-320]
    vals = np.concatenate([np.array(edge), rng.standard_normal(N) * 10])[:N]
    return rng.permutation(vals).astype(dtype)


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("dtype, lanes", [(dtypes.float32, 8), (dtypes.float32, 16), (dtypes.float64, 4)])
def test_trunc(rng, cc, dtype, lanes):
    x = special_floats(rng, NP[dtype])
    got = run(cc, kernel([dtype], dtype, lambda a: a.trunc()), dtype, x, lanes=lanes)
    np.testing.assert_array_equal(got, np.trunc(x))
    assert (np.signbit(got) == np.signbit(np.trunc(x)))[~np.isnan(x)].all()  # trunc(-0.5) is -0.0


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("dtype, lanes", [(dtypes.float32, 4), (dtypes.float32, 16), (dtypes.float64, 8)])
def test_sqrt(rng, cc, dtype, lanes):
    """A square root in a vector block (an optimizer's update divides by one) is vector code, exact per lane: negative
    inputs give NaN, -0.0 stays -0.0, subnormals and infinities as numpy has them."""
    x = special_floats(rng, NP[dtype])
    got = run(cc, kernel([dtype], dtype, lambda a: a.sqrt() * 2), dtype, x, lanes=lanes)
    with np.errstate(invalid="ignore"):
        want = np.sqrt(x) * 2
    np.testing.assert_array_equal(got, want)
    assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all()


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.int8, dtypes.int16])
def test_max_and_selects(rng, cc, dtype):
    if dtypes.is_float(dtype):
        a, b = special_floats(rng, NP[dtype]), special_floats(rng, NP[dtype])
    else:
        info = np.iinfo(NP[dtype])
        a, b = (rng.integers(info.min, info.max, N, endpoint=True).astype(NP[dtype]) for _ in range(2))
        b[:8] = a[:8]  # ties
    np.testing.assert_array_equal(run(cc, kernel([dtype] * 2, dtype, lambda x, y: x.maximum(y)), dtype, a, b), np.maximum(a, b))
    # a select between vectors and a broadcast constant, through a comparison of the loaded values
    got = run(cc, kernel([dtype] * 2, dtype, lambda x, y: (x < y).where(x, y.const_like(3))), dtype, a, b)
    np.testing.assert_array_equal(got, np.where(a < b, a, NP[dtype](3)))


@pytest.mark.parametrize("cc", COMPILERS)
def test_logical_ops_on_masks(rng, cc):
    f = dtypes.float32
    a, b, c = (special_floats(rng, np.float32) for _ in range(3))
    c[:10] = a[:10]

    def fn(x, y, z):
        keep = ((x < y) & y.ne(z)) | (x.eq(z) ^ (z < 0.0)) | (x.ne(x))
        return keep.logical_not().where(x * 2.0, z)

    got = run(cc, kernel([f] * 3, f, fn), f, a, b, c)
    with np.errstate(invalid="ignore", over="ignore"):
        keep = ((a < b) & (b != c)) | ((a == c) ^ (c < 0)) | (a != a)
        np.testing.assert_array_equal(got, np.where(~keep, a * np.float32(2), c))


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.int64, dtypes.int8])
@pytest.mark.parametrize("d", [2, 3, -7])
def test_division_by_constants_truncates_like_c(rng, cc, dtype, d):
    info = np.iinfo(NP[dtype])
    a = rng.integers(info.min, info.max, N, endpoint=True).astype(NP[dtype])
    a[:4] = [info.min, info.max, -1, 0]
    q = run(cc, kernel([dtype], dtype, lambda x: x.cdiv(d)), dtype, a)
    r = run(cc, kernel([dtype], dtype, lambda x: x.alu(Ops.CMOD, x.const_like(d))), dtype, a)
    exact = [int(v) for v in a]
    np.testing.assert_array_equal(q, np.array([abs(v) // abs(d) * (1 if (v < 0) == (d < 0) else -1) for v in exact], NP[dtype]))
    np.testing.assert_array_equal(r, np.array([v - abs(v) // abs(d) * (1 if (v < 0) == (d < 0) else -1) * d for v in exact], NP[dtype]))


@pytest.mark.parametrize("cc", COMPILERS)
def test_exp2_and_log2_decompositions_are_vector_code(rng, cc):
    # their clamps and roundings are selects and truncs: the whole decomposition is one vector block now
    f = dtypes.float32
    x = np.concatenate([special_floats(rng, np.float32)[:24], rng.uniform(-160, 140, N - 24).astype(np.float32)])
    got = run(cc, kernel([f], f, lambda v: v.exp2()), f, x)
    with np.errstate(over="ignore"):
        ref = np.exp2(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, ref, rtol=3e-7, atol=0)
    pos = np.abs(x) + np.float32(1e-30)
    pos[:4] = [0.0, np.inf, np.nan, 1e-42]
    got = run(cc, kernel([f], f, lambda v: v.log2()), f, pos)
    with np.errstate(divide="ignore"):
        ref = np.log2(pos.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=4e-7)


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("lanes", [4, 8])
def test_gated_vector_blocks(rng, cc, lanes):
    """A padded odd row (13 wide) of a vector block whose loads are gated both by the padding (lane-dependent: vector or
    lane by lane) and by a row condition (lane-independent) that a select also reads as a mask, as a concatenation
    lowers to; every compiler takes the block (GCC refuses a _Bool operand of a vector op) and the values match numpy."""
    rows, cols = 4, 13
    out, a, b = (UOp.param(s, dtypes.float32.ptr(rows * cols)) for s in range(3))
    r, c = UOp.range(rows, 0), UOp.range(cols, 1)
    first = r < 2
    va = a.index(r * cols + c, first).load()  # a third INDEX source gates the access
    vb = b.index(r * cols + c, first.ne(True)).load()
    ast = UOp.sink(out.index(r * cols + c).store(first.where(va, vb) + 1.0).end(r, c))
    # (two vectors: the padded row is two blocks of 2 * lanes, the last vector of the second partly gated)
    width = lanes * _chunks[0]
    program = to_program(ast, CRenderer(vector_width=lanes), opts=[Opt(OptOps.PADTO, 1, width), Opt(OptOps.UPCAST, 1, width)])
    src = program.src[2].arg
    assert blocks_as(width) in src and "else for (int l = 0;" in src
    prog = compiled(cc, src, program.arg.function_name)
    an, bn = rng.standard_normal((rows, cols), dtype=np.float32), rng.standard_normal((rows, cols), dtype=np.float32)
    got = np.full((rows, cols), np.nan, np.float32)
    prog([got.ctypes.data, an.ctypes.data, bn.ctypes.data], [], n_cores=1)
    np.testing.assert_array_equal(got, np.where(np.arange(rows)[:, None] < 2, an, bn) + 1)


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float64])
def test_gated_vectors_never_touch_memory_past_their_lanes(cc, dtype):
    """A padded row (13 wide, in vectors of 16) whose input ends where an inaccessible page begins: the padded lanes of
    its last vector are gated off, so neither the lane-by-lane path nor GCC's masked load and store (AVX-512) may read
    or write them. Its output likewise ends at an inaccessible page."""
    n, itemsize = 13, dtype.itemsize
    lanes = 64 // itemsize  # a block of one 512-bit register (or two of 256 bits)
    out, a = UOp.param(0, dtype.ptr(n)), UOp.param(1, dtype.ptr(n))
    c = UOp.range(n, 0)
    ast = UOp.sink(out.index(c).store(a.index(c).load() * 2.0 + 1.0).end(c))
    program = to_program(ast, CRenderer(vector_width=16 // _chunks[0]), opts=[Opt(OptOps.PADTO, 0, lanes), Opt(OptOps.UPCAST, 0, lanes)])
    src = program.src[2].arg
    assert "else for (int l = 0;" in src and "_mask(" in src  # the lane-by-lane path, and GCC's masked one
    # GCC's mask is built in an unrolled loop (GCC 12 kept a loop, run for every vector at every step: 3x slower)
    width = lanes // _chunks[0]
    assert f'_Pragma("GCC unroll {width}") for (int l = 0; l < {width}; l++) m_ |=' in src, src
    prog = compiled(cc, src, program.arg.function_name)
    page = mmap.PAGESIZE
    maps = [mmap.mmap(-1, 2 * page) for _ in range(2)]
    libc = ctypes.CDLL(None)
    views = []
    for m in maps:
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        assert libc.mprotect(ctypes.c_void_p(base + page), ctypes.c_size_t(page), 0) == 0  # PROT_NONE
        views.append(np.frombuffer(m, dtype=NP[dtype], count=n, offset=page - n * itemsize))
    got, x = views
    x[:] = np.arange(n, dtype=NP[dtype]) - 6.5
    got[:] = np.nan
    prog([got.ctypes.data, x.ctypes.data], [], n_cores=1)
    np.testing.assert_array_equal(got, x * 2 + 1)
    del got, x, views


@pytest.mark.parametrize("chunks", [1], indirect=True)  # (scalar code: no vector block to split)
@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float64])
def test_scalar_max_propagates_nan_from_either_side(chunks, cc, dtype):
    """The scalar float max (a helper: GCC gets a select of a select, clang one select of two tests) against numpy over
    every pairing of NaN, infinities, signed zeros and ordinary values, in both operand orders."""
    edge = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -1.5, 3e38 if dtype == dtypes.float32 else 1e300], NP[dtype])
    a, b = (np.ascontiguousarray(v.ravel()) for v in np.meshgrid(edge, edge))
    n = a.size
    out_p, a_p, b_p = (UOp.param(s, dtype.ptr(n)) for s in range(3))
    i = UOp.range(n, 0)
    ast = UOp.sink(out_p.index(i).store(a_p.index(i).load().maximum(b_p.index(i).load())).end(i))
    program = to_program(ast, CRenderer(vector_width=16), opts=[])
    src = program.src[2].arg
    assert "uop_max_" in src and "lanes as" not in src
    got = np.zeros(n, NP[dtype])
    compiled(cc, src, program.arg.function_name)([got.ctypes.data, a.ctypes.data, b.ctypes.data], [], n_cores=1)
    np.testing.assert_array_equal(got, np.maximum(a, b))


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_every_half_converts_to_its_float(cc, lanes):
    """Vector conversions of all 65536 float16 bit patterns to float32 (GCC on x86 takes the conversion instruction's
    builtin for 8 and 16 lanes) give numpy's floats bit for bit; a NaN stays a NaN (its payload may be quieted)."""
    n = 1 << 16
    halves = np.arange(n, dtype=np.uint16).view(np.float16)
    out, a = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float16.ptr(n))
    i = UOp.range(n, 0)
    ast = UOp.sink(out.index(i).store(a.index(i).load().cast(dtypes.float32)).end(i))
    upcast = lanes * _chunks[0]
    program = to_program(ast, CRenderer(vector_width=lanes), opts=[Opt(OptOps.UPCAST, 0, upcast)])
    src = program.src[2].arg
    assert blocks_as(upcast) in src and ("uop_half_to_float_x" in src) == (lanes in (8, 16))
    got = np.zeros(n, np.float32)
    compiled(cc, src, program.arg.function_name)([got.ctypes.data, halves.ctypes.data], [], n_cores=1)
    want = halves.astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


def row_reduce(rows: int, n: int, how: Ops) -> UOp:
    """out[i] = the sum (ADD) or maximum (MAX) of row i of x, its reduce axis summed in vector lanes."""
    out, x = UOp.param(0, dtypes.float32.ptr(rows)), UOp.param(1, dtypes.float32.ptr(rows * n))
    i, k = UOp.range(rows, 0), UOp.range(n, 1, AxisType.REDUCE)
    return UOp.sink(out.index(i).store(x.index(i * n + k).load().reduce(k, arg=how)).end(i))


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("lanes", [4, 8, 16])
@pytest.mark.parametrize("how", [Ops.ADD, Ops.MAX])
def test_a_single_accumulator_combines_its_lanes_by_halves(rng, cc, lanes, how):
    """A row's sum or max taken in vector lanes ends with the lanes combined by halves (CUSTOM(LANE_REDUCE)), with the
    plain update's values: a NaN anywhere in the row gives NaN, infinities and signed zeros as numpy has them."""
    rows, n = 12, 4 * lanes
    x = rng.standard_normal((rows, n)).astype(np.float32)
    x[1, 3] = np.nan
    x[2, :] = -np.inf
    x[3, n - 1] = np.inf
    x[4, :] = -0.0
    x[5, 0], x[5, n - 1] = np.inf, -np.inf  # a sum of NaN
    x[6, lanes + 1] = np.nan
    ast = row_reduce(rows, n, how)
    # (two vectors: the accumulator's lanes are two registers, updated in two vector statements)
    program = to_program(ast, CRenderer(vector_width=lanes // _chunks[0]), opts=[Opt(OptOps.LANES, 1, lanes)])
    src = program.src[2].arg
    assert f"uop_lane_{how.name.lower()}_float_{lanes}(" in src
    prog = compiled(cc, src, program.arg.function_name)
    out = np.zeros(rows, np.float32)
    prog([out.ctypes.data, x.ctypes.data], [], n_cores=1)
    with np.errstate(invalid="ignore"):  # (inf + -inf)
        want = x.astype(np.float64).sum(axis=1) if how is Ops.ADD else x.max(axis=1)
    np.testing.assert_allclose(out, want.astype(np.float32), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.int32, dtypes.int64])
@pytest.mark.parametrize("scale", [1, -3])
def test_the_lane_index_as_data(rng, cc, dtype, scale):
    """Index math read as a value (an argmax's position where the element equals the maximum, a one-hot's row number)
    is a vector of the lanes' indices: the block is vector code, each lane its own index (it was a scalar loop)."""
    a = rng.integers(-3, 4, N).astype(NP[dtype])

    def fn(x):
        i = UOp.range(N, 0)  # (the kernel's own range: ranges are hash-consed)
        position = (i * scale + 5).cast(dtype)
        return x.eq(x.const_like(1)).where(position, position.const_like(-1)) + x

    want = np.where(a == 1, np.arange(N) * scale + 5, -1).astype(NP[dtype]) + a
    np.testing.assert_array_equal(run(cc, kernel([dtype], dtype, fn), dtype, a), want)


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("op", [Ops.MAX, Ops.ADD])
def test_half_reductions_in_lanes(rng, cc, op):
    """A float16 reduction split into vector lanes starts its lane accumulators at a broadcast constant (-inf for a
    max): GCC refused `-inf - (vector of halves){}` (a narrowing from float), so a half tensor's max along its rows did
    not compile with GCC. The broadcast is now a float vector converted."""
    rows, k = 4, 64
    out, src = UOp.param(0, dtypes.float32.ptr(rows)), UOp.param(1, dtypes.float16.ptr(rows * k))
    i, r = UOp.range(rows, 0), UOp.range(k, 1, AxisType.REDUCE)
    ast = UOp.sink(out.index(i).store(src.index(i * k + r).load().reduce(r, arg=op).cast(dtypes.float32)).end(i))
    program = to_program(ast, CRenderer(vector_width=16), opts=[Opt(OptOps.LANES, 1, 16)])
    prog = compiled(cc, program.src[2].arg, program.arg.function_name)
    x = rng.standard_normal((rows, k)).astype(np.float16)
    got = np.zeros(rows, np.float32)
    prog([got.ctypes.data, x.ctypes.data], [], n_cores=1)
    want = x.max(1) if op is Ops.MAX else x.astype(np.float32).sum(1)
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=2e-3, atol=2e-2)
