"""SQTT profiling on MOCKAMD (the seed's test_sqtt_profiler, adapted): with PROFILE=1 every dispatch records the
emulator's trace, named after its program and numbered per run; traces map back to the code and export as a timeline."""

import itertools
import json

import numpy as np
import pytest
from amd_isa import CodeObject, assemble, sqtt
from hcq_runtime import AMDCompiler, CompileError, Device, buffer_for, run_linear
from uopir import Ops, ProgramInfo, UOp, dtypes

try:
    AMDCompiler("gfx1100")
except CompileError:
    pytest.skip("clang-15 and ld.lld-15 are needed to build AMD kernels", allow_module_level=True)

N = 32


_FRESH_DEVICES = itertools.count(1000)


@pytest.fixture
def dev(monkeypatch, request):
    monkeypatch.setenv("PROFILE", "1")
    # a fresh device opened with profiling on: a number of its own per test (a str hash differs per process, and two
    # tests hashing to one device saw each other's traces)
    return f"MOCKAMD:{next(_FRESH_DEVICES)}"


def scale(factor: float) -> UOp:
    out, a = UOp.param(0, dtypes.float32.ptr(N)), UOp.param(1, dtypes.float32.ptr(N))
    i = UOp.range(N, 0)
    return UOp.sink(out.index(i).store(a.index(i).load() * factor).end(i))


def calls(dev: str, *bodies: UOp) -> tuple[UOp, list[UOp]]:
    bufs = [UOp.new_buffer(dev, N, dtypes.float32) for _ in range(len(bodies) + 1)]
    buffer_for(bufs[0]).copyin(np.arange(N, dtype=np.float32))
    linear = UOp(Ops.LINEAR, dtypes.void, tuple(UOp(Ops.CALL, dtypes.void, (b, bufs[k + 1], bufs[k])) for k, b in enumerate(bodies)))
    return linear, bufs


def mapped(trace) -> list:
    return [info for _, info in sqtt.map_insts(trace.sqtt, trace.code, "gfx1100") if info is not None]


def test_simple_and_multiple_runs(dev):
    linear, bufs = calls(dev, scale(2.0))
    for _ in range(3):
        run_linear(linear)
    np.testing.assert_array_equal(buffer_for(bufs[1]).numpy(), np.arange(N) * 2)
    traces = Device[dev].profile_traces()
    assert [t.name for t in traces] == ["E_32", "E_32 n2", "E_32 n3"]
    assert all(mapped(t)[-1].inst.mnemonic == "s_endpgm" for t in traces)


def test_multiple_kernels_in_one_submit_and_a_timeline(dev, tmp_path):
    linear, bufs = calls(dev, scale(2.0), UOp.sink(*scale(3.0).src))  # two programs (same shape, different code)
    run_linear(linear)
    np.testing.assert_array_equal(buffer_for(bufs[2]).numpy(), np.arange(N) * 6)
    traces = Device[dev].profile_traces()
    assert len(traces) == 2 and traces[0].code.text != traces[1].code.text
    events = [e for k, t in enumerate(traces) for e in sqtt.trace_events(sqtt.map_insts(t.sqtt, t.code, "gfx1100"), "gfx1100", pid=k,
                                                                          process_name=t.name)]
    sqtt.write_timeline(tmp_path / "timeline.json", events)
    doc = json.loads((tmp_path / "timeline.json").read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert names == {t.name for t in traces}
    assert sum(1 for e in doc["traceEvents"] if e.get("ph") == "X") >= sum(len(mapped(t)) for t in traces)


def test_assembled_kernel_runs_and_traces(dev):
    code = assemble("s_nop 0\ns_mov_b32 s0, 10\ns_endpgm", "rdna3")
    binary = CodeObject.from_code(code, "gfx1100", kernel="asm_kernel").to_bytes()
    info = ProgramInfo("asm_kernel", target="gfx1100")
    program = UOp(Ops.PROGRAM, dtypes.void, (UOp.sink(), UOp(Ops.LINEAR, dtypes.void, ()), UOp(Ops.SOURCE, dtypes.void, (), "s_nop 0"),
                                              UOp(Ops.BINARY, dtypes.void, (), binary)), info)
    anchor = UOp.new_buffer(dev, 1, dtypes.float32)  # a call runs on its buffers' device; the kernel reads none
    run_linear(UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (program, anchor)),)))
    (trace,) = Device[dev].profile_traces()
    assert trace.name == "asm_kernel"
    assert [i.inst.mnemonic for i in mapped(trace)] == ["s_nop", "s_mov_b32", "s_endpgm"]


def test_rdna4_dispatches_trace_in_the_rdna4_layout(monkeypatch):
    try:
        AMDCompiler("gfx1201")
    except CompileError as e:
        pytest.skip(str(e))
    monkeypatch.setenv("PROFILE", "1")
    dev = "MOCKAMD:gfx1201:7"  # a fresh gfx12 device opened with profiling on
    linear, bufs = calls(dev, scale(2.0))
    run_linear(linear)
    np.testing.assert_array_equal(buffer_for(bufs[1]).numpy(), np.arange(N) * 2)
    (trace,) = Device[dev].profile_traces()
    assert next(iter(sqtt.decode(trace.sqtt, "rdna4"))).layout == 4
    insts = [info.inst.mnemonic for _, info in sqtt.map_insts(trace.sqtt, trace.code, "gfx1201") if info is not None]
    assert insts[-1] == "s_endpgm" and any(m.startswith("global_store") for m in insts)
