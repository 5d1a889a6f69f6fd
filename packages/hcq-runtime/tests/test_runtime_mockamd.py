"""run_linear on MOCKAMD: kernels rendered as OpenCL C, compiled for gfx1100 (and CDNA: gfx90a, gfx940; gfx950 runs
kernels assembled by amd-isa), dispatched through the PM4 queue of the
mock KFD GPU, executed in the amd-isa emulator; results against numpy."""

import dataclasses

import numpy as np
import pytest
from amd_isa import CodeObject, assemble, sqtt
from hcq_runtime import AMDCompiler, CompileError, Device, buffer_for, link_linear, run_linear
from uopir import AxisType, Ops, ProgramInfo, UOp, dtypes

try:
    AMDCompiler("gfx1100")
except CompileError:
    pytest.skip("clang-15 and ld.lld-15 are needed to build AMD kernels", allow_module_level=True)


def run(ast: UOp, out_size: int, *inputs: np.ndarray, device: str = "MOCKAMD") -> np.ndarray:
    bufs = [UOp.new_buffer(device, out_size, dtypes.float32)] + [UOp.new_buffer(device, x.size, dtypes.float32) for x in inputs]
    for buf, x in zip(bufs[1:], inputs):
        buffer_for(buf).copyin(x)
    run_linear(UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (ast, *bufs)),)))
    return buffer_for(bufs[0]).numpy()


def test_mockamd_is_a_registered_compiled_device():
    dev = Device["MOCKAMD"]
    assert dev.renderer.device == "AMD" and dev.arch == "gfx1100"


def test_matmul_and_grouped_reduce_on_mockamd():
    n, m, k = 8, 32, 16
    out, a, b = (UOp.param(s, dtypes.float32.ptr(size)) for s, size in ((0, n * m), (1, n * k), (2, k * m)))
    i, j, r = UOp.range(n, 0), UOp.range(m, 1), UOp.range(k, 2, AxisType.REDUCE)
    ast = UOp.sink(out.index(i * m + j).store((a.index(i * k + r).load() * b.index(r * m + j).load()).reduce(r)).end(i, j))
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((k, m), dtype=np.float32)
    np.testing.assert_allclose(run(ast, n * m, x.ravel(), y.ravel()).reshape(n, m), x @ y, rtol=1e-5, atol=1e-5)
    # a long reduction feeding few outputs: the GPU heuristic groups it across a work group
    rows, cols = 4, 512
    out2, a2 = UOp.param(0, dtypes.float32.ptr(rows)), UOp.param(1, dtypes.float32.ptr(rows * cols))
    i2, r2 = UOp.range(rows, 0), UOp.range(cols, 1, AxisType.REDUCE)
    ast2 = UOp.sink(out2.index(i2).store(a2.index(i2 * cols + r2).load().reduce(r2, arg=Ops.MAX)).end(i2))
    z = rng.standard_normal((rows, cols), dtype=np.float32)
    np.testing.assert_array_equal(run(ast2, rows, z.ravel()), z.max(1))


def test_copies_between_cpu_and_mockamd_are_bit_exact():
    data = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    cpu, gpu, back = UOp.new_buffer("CPU", 1000, dtypes.float32), UOp.new_buffer("MOCKAMD", 1000, dtypes.float32), \
        UOp.new_buffer("CPU", 1000, dtypes.float32)
    buffer_for(cpu).copyin(data)
    copy = UOp(Ops.COPY, dtypes.float32, (), "MOCKAMD")
    calls = (UOp(Ops.CALL, dtypes.void, (copy, gpu, cpu)), UOp(Ops.CALL, dtypes.void, (copy, back, gpu)))
    run_linear(UOp(Ops.LINEAR, dtypes.void, calls))
    np.testing.assert_array_equal(buffer_for(back).numpy(), data)


def test_profile_records_an_sqtt_trace_per_dispatch(monkeypatch):
    monkeypatch.setenv("PROFILE", "1")
    dev = Device["MOCKAMD:7"]  # a device opened with profiling on
    n = 64
    out, a = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float32.ptr(n))
    i = UOp.range(n, 0)
    ast = UOp.sink(out.index(i).store(a.index(i).load() * 3.0).end(i))
    x = np.arange(n, dtype=np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(run(ast, n, x, device="MOCKAMD:7"), x * 3)
    traces = dev.profile_traces()
    assert [t.name for t in traces] == ["E_64", "E_64 n2"]
    for trace in traces:
        mapped = [info for _, info in sqtt.map_insts(trace.sqtt, trace.code, "gfx1100") if info is not None]
        assert mapped, "the trace maps back to the kernel's instructions"
        assert mapped[-1].inst.mnemonic == "s_endpgm"
        assert all(trace.code.text_addr <= info.pc < trace.code.text_addr + len(trace.code.text) for info in mapped)


# CDNA (gfx9, wave64) on the same mock: `MOCKAMD:<target>` opens a mock GPU of that target. clang-15 builds gfx90a and
# gfx940 (it has no gfx941/gfx942/gfx950), so these stand for MI200 and MI300.
@pytest.mark.parametrize("arch", ["gfx90a", "gfx940"])
def test_run_linear_on_a_cdna_mockamd(arch):
    dev = Device[f"MOCKAMD:{arch}"]
    assert dev.arch == arch and dev.renderer.arch == arch and dev.compiler.arch == arch and dev.driver.target[0] == 9
    n, m, k = 4, 16, 8
    out, a, b = (UOp.param(s, dtypes.float32.ptr(size)) for s, size in ((0, n * m), (1, n * k), (2, k * m)))
    i, j, r = UOp.range(n, 0), UOp.range(m, 1), UOp.range(k, 2, AxisType.REDUCE)
    ast = UOp.sink(out.index(i * m + j).store((a.index(i * k + r).load() * b.index(r * m + j).load()).reduce(r)).end(i, j))
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((k, m), dtype=np.float32)
    before = dev.driver.gpu.dispatches
    got = run(ast, n * m, x.ravel(), y.ravel(), device=f"MOCKAMD:{arch}").reshape(n, m)
    np.testing.assert_allclose(got, x @ y, rtol=1e-5, atol=1e-5)
    assert dev.driver.gpu.dispatches == before + 1


def test_cdna_copies_and_linked_replays_with_new_inputs():
    device = "MOCKAMD:gfx940"
    data = np.random.default_rng(6).standard_normal(100).astype(np.float32)
    cpu, gpu, back = (UOp.new_buffer(d, 100, dtypes.float32) for d in ("CPU", device, "CPU"))
    buffer_for(cpu).copyin(data)
    copy = UOp(Ops.COPY, dtypes.float32, (), device)
    run_linear(UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (copy, gpu, cpu)), UOp(Ops.CALL, dtypes.void, (copy, back, gpu)))))
    np.testing.assert_array_equal(buffer_for(back).numpy(), data)
    n = 48
    out, a = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float32.ptr(n))
    i = UOp.range(n, 0)
    ast = UOp.sink(out.index(i).store(a.index(i).load() * 1.5 + 1.0).end(i))
    bufs = [UOp.new_buffer(device, n, dtypes.float32) for _ in range(3)]
    linear = UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (ast, bufs[1], bufs[0])), UOp(Ops.CALL, dtypes.void, (ast, bufs[2], bufs[1]))))
    linked = link_linear(linear, [bufs[0], bufs[2]])
    assert linked.submits == 1
    for step in range(2):
        x = np.arange(n, dtype=np.float32) - step
        src, dst = (buffer_for(UOp.new_buffer(device, n, dtypes.float32)) for _ in range(2))
        linked([src.copyin(x), dst.ensure_allocated()])
        np.testing.assert_array_equal(dst.numpy(), (x * np.float32(1.5) + np.float32(1.0)) * np.float32(1.5) + np.float32(1.0))


GFX950_KERNEL = """s_load_dwordx2 s[4:5], s[0:1], 0x0
v_lshlrev_b32 v1, 2, v0
s_lshl_b32 s3, s2, 8
v_add_u32 v1, s3, v1
v_lshlrev_b32 v3, 1, v0
v_add_u32 v3, s2, v3
v_cvt_f32_u32 v3, v3
s_waitcnt lgkmcnt(0)
global_store_dword v1, v3, s[4:5]
s_endpgm"""


def test_gfx950_runs_kernels_assembled_by_amd_isa():
    # gfx950 support came in LLVM 20 (Debian 12's security updates carry clang-22): without it the backend says so, and
    # MOCKAMD:gfx950 runs a kernel assembled by amd-isa either way (out[g * 64 + t] = 2t + g, wave64, gfx9 packets)
    try:
        AMDCompiler("gfx950")
    except CompileError as err:
        assert "gfx950 LLVM 20" in str(err)
    co = CodeObject.from_code(assemble(GFX950_KERNEL, "gfx950"), "gfx950", kernel="twice_plus_group")
    co.descriptors["twice_plus_group"] = dataclasses.replace(co.descriptors["twice_plus_group"], kernarg_size=8)
    info = ProgramInfo("twice_plus_group", globals=(0,), outs=(0,), global_size=(3, 1, 1), local_size=(64, 1, 1), target="gfx950")
    program = UOp(Ops.PROGRAM, dtypes.void, (UOp.sink(), UOp(Ops.LINEAR, dtypes.void, ()), UOp(Ops.SOURCE, dtypes.void, (), GFX950_KERNEL),
                                              UOp(Ops.BINARY, dtypes.void, (), co.to_bytes())), info)
    out = UOp.new_buffer("MOCKAMD:gfx950", 192, dtypes.float32)
    gpu = Device["MOCKAMD:gfx950"].driver.gpu
    before = gpu.dispatches  # other tests of the process may have used the device
    run_linear(UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (program, out)),)))
    lane = np.arange(192)
    np.testing.assert_array_equal(buffer_for(out).numpy(), 2 * (lane % 64) + lane // 64)
    assert gpu.dispatches == before + 1
