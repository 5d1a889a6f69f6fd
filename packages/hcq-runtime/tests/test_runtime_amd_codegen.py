"""Kernel ASTs lowered for AMD (OpenCL C with GPU dims), compiled by clang-15 for gfx1100, run in the amd-isa emulator; the
choice of LLVM per target."""

import struct

import numpy as np
import pytest
from amd_isa import emu
from hcq_runtime import AMDCompiler, CompileError, amd_toolchain
from uopir import AMDOpenCLRenderer, AxisType, Ops, Opt, OptOps, UOp, dtypes, to_program

try:
    COMPILER = AMDCompiler("gfx1100")
except CompileError:
    COMPILER = None
pytestmark = pytest.mark.skipif(COMPILER is None, reason="clang-15 and ld.lld-15 are needed to build AMD kernels")


def run_on_emulator(ast: UOp, out: np.ndarray, *inputs: np.ndarray, var_vals: dict[str, int] | None = None,
                    opts: list[Opt] | None = None) -> tuple[np.ndarray, UOp]:
    program = to_program(ast, AMDOpenCLRenderer("gfx1100"), opts=opts)
    info = program.arg
    code = COMPILER.compile(program.src[2].arg)
    memory = emu.Memory()
    arrays = [out, *inputs]
    kernargs = b"".join(struct.pack("<Q", memory.map(arrays[slot])) for slot in info.globals)
    kernargs += b"".join(struct.pack("<q", (var_vals or {})[v.arg[0]]) for v in info.vars)
    grid = tuple(g * l for g, l in zip(info.global_size, info.local_size))
    emu.run_kernel(code, kernargs, grid, info.local_size, memory)
    return out, program


def test_elementwise_broadcast_uses_workgroups():
    rows, cols = 6, 64
    out, a, b = (UOp.param(s, dtypes.float32.ptr(n)) for s, n in ((0, rows * cols), (1, rows * cols), (2, cols)))
    i, j = UOp.range(rows, 0), UOp.range(cols, 1)
    ast = UOp.sink(out.index(i * cols + j).store(a.index(i * cols + j).load() * 2.0 + b.index(j).load()).end(i, j))
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(rows * cols, dtype=np.float32), rng.standard_normal(cols, dtype=np.float32)
    result, program = run_on_emulator(ast, np.zeros(rows * cols, np.float32), x, y)
    assert program.arg.local_size == (32, 1, 1) and program.arg.global_size == (2, 6, 1)
    assert "__builtin_amdgcn_workgroup_id_x" in program.src[2].arg
    np.testing.assert_array_equal(result.reshape(rows, cols), x.reshape(rows, cols) * 2 + y)


def test_reduction_and_matmul():
    n, m, k = 8, 16, 12
    out, a, b = (UOp.param(s, dtypes.float32.ptr(size)) for s, size in ((0, n * m), (1, n * k), (2, k * m)))
    i, j, r = UOp.range(n, 0), UOp.range(m, 1), UOp.range(k, 2, AxisType.REDUCE)
    ast = UOp.sink(out.index(i * m + j).store((a.index(i * k + r).load() * b.index(r * m + j).load()).reduce(r)).end(i, j))
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((k, m), dtype=np.float32)
    result, _ = run_on_emulator(ast, np.zeros(n * m, np.float32), x.ravel(), y.ravel())
    np.testing.assert_allclose(result.reshape(n, m), x @ y, rtol=1e-5, atol=1e-5)


def test_max_reduce_transcendentals_and_gated_loads():
    n = 40
    out, a = UOp.param(0, dtypes.float32.ptr(n + 4)), UOp.param(1, dtypes.float32.ptr(n))
    i = UOp.range(n + 4, 0)
    valid = (i >= 2) & (i < n + 2)
    value = a.index(i - 2, valid).load()
    ast = UOp.sink(out.index(i).store(value.exp2() + value.sin()).end(i))
    x = np.linspace(-3, 3, n, dtype=np.float32)
    result, program = run_on_emulator(ast, np.zeros(n + 4, np.float32), x)
    assert "exp2" not in program.src[2].arg.replace("__builtin_amdgcn", "")
    padded = np.pad(x, 2).astype(np.float64)
    np.testing.assert_allclose(result, np.exp2(padded) + np.sin(padded), rtol=2e-6, atol=2e-6)


def test_integer_math_and_variables():
    n = 32
    out, a = UOp.param(0, dtypes.int32.ptr(n)), UOp.param(1, dtypes.int32.ptr(n))
    scale = UOp.variable("scale", 1, 100)
    i = UOp.range(n, 0)
    v = a.index(i).load()
    ast = UOp.sink(out.index(i).store(v.cdiv(3) * scale.cast(dtypes.int32) + v.cmod(3)).end(i))
    x = np.arange(-16, 16, dtype=np.int32)
    result, _ = run_on_emulator(ast, np.zeros(n, np.int32), x, var_vals={"scale": 7})
    quotient = np.trunc(x / 3).astype(np.int32)
    np.testing.assert_array_equal(result, quotient * 7 + (x - quotient * 3))


def sum_and_max_kernel(shape: tuple[int, int, int]) -> UOp:
    """out[i] = a[i].sum((1,2)) + a[i].max((1,2)) -- the seed's grouped-reduce case."""
    n, h, w = shape
    out, a = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float32.ptr(n * h * w))
    i, y, x = UOp.range(n, 0), UOp.range(h, 1, AxisType.REDUCE), UOp.range(w, 2, AxisType.REDUCE)
    y2, x2 = UOp.range(h, 3, AxisType.REDUCE), UOp.range(w, 4, AxisType.REDUCE)
    total = a.index(i * h * w + y * w + x).load().reduce(y, x)
    largest = a.index(i * h * w + y2 * w + x2).load().reduce(y2, x2, arg=Ops.MAX)
    return UOp.sink(out.index(i).store(total + largest).end(i))


@pytest.mark.parametrize("opts", [
    [],
    [Opt(OptOps.GROUP, 2, 13)],
    [Opt(OptOps.GROUP, 1, 11), Opt(OptOps.UNROLL, 2, 13)],
    [Opt(OptOps.PADTO, 2, 16), Opt(OptOps.GROUP, 2, 8)],
    [Opt(OptOps.PADTO, 0, 8), Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.GROUP, 2, 13)],
], ids=lambda o: ",".join(f"{x.op.name}{x.axis}:{x.arg}" for x in o) or "none")
def test_grouped_reduce_with_local_upcast_and_padto(opts):
    shape = (7, 11, 13)
    x = np.random.default_rng(3).standard_normal(shape, dtype=np.float32)
    result, program = run_on_emulator(sum_and_max_kernel(shape), np.zeros(7, np.float32), x.ravel(), opts=opts)
    np.testing.assert_allclose(result, x.sum((1, 2)) + x.max((1, 2)), rtol=1e-5, atol=1e-5)
    if any(o.op is OptOps.GROUP for o in opts):
        assert "__local float" in program.src[2].arg and "__builtin_amdgcn_s_barrier" in program.src[2].arg


def test_gpu_heuristic_groups_a_long_reduction():
    n, k = 4, 256
    out, a = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float32.ptr(n * k))
    i, r = UOp.range(n, 0), UOp.range(k, 1, AxisType.REDUCE)
    ast = UOp.sink(out.index(i).store(a.index(i * k + r).load().reduce(r)).end(i))
    x = np.random.default_rng(4).standard_normal((n, k), dtype=np.float32)
    result, program = run_on_emulator(ast, np.zeros(n, np.float32), x.ravel())
    assert program.arg.local_size == (32, 1, 1)
    np.testing.assert_allclose(result, x.sum(1), rtol=1e-5, atol=1e-5)


def test_each_target_gets_the_oldest_llvm_that_knows_it(monkeypatch):
    clang, lld = amd_toolchain("gfx1100")
    assert clang.endswith("clang-15") and lld.endswith("ld.lld-15")
    with pytest.raises(CompileError, match="no installed clang targets gfx9999 .*tried clang-15"):
        amd_toolchain("gfx9999")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(CompileError, match="needs clang and ld.lld with the AMDGPU target"):
        amd_toolchain("gfx1100")
