"""The MoE router's MFMA kernel (`hcq_runtime.amd.router_mfma_program`): its code object holds what amd-isa built, its encoding
is llvm-mc's where LLVM 18+ is installed (gfx942: gfx950 needs LLVM 20), and bad requests are DeviceErrors. Its values
are checked through llm-bench's `router_mfma` (test_llm_router_mfma)."""

import subprocess

import pytest
from amd_isa import CodeObject, decode
from hcq_runtime import DeviceError, router_mfma_program
from hcq_runtime.amd.router_mfma_program import code_object, kernel_insts
from llvm_tools import find_llvm_tool


def test_the_code_object_holds_the_instructions_it_was_built_from():
    insts = kernel_insts(128)
    co = CodeObject.from_bytes(code_object(128))
    assert co.target == "gfx950" and co.descriptors["router_mfma"].kernarg_size == 32
    assert [str(i) for i in decode(co.text, "cdna")] == [str(i) for i in insts]
    assert sum("v_mfma_f32_16x16x16_bf16" in str(i) for i in insts) == 2 * 128 // 16


def test_encoding_matches_llvm_mc_for_gfx942():
    path, why = find_llvm_tool("llvm-mc", (19, 20, 21, 22, 18))
    if path is None:
        pytest.skip(f"llvm-mc 18+ is needed: {why} (apt-get install llvm-19)")
    insts = kernel_insts(64)
    text = "\n".join(str(i) for i in insts) + "\n"
    proc = subprocess.run([path, "-arch=amdgcn", "-mcpu=gfx942", "-show-encoding"], input=text, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    encodings = [bytes(int(b, 16) for b in line.split("encoding: [")[1].rstrip("]").split(",")) for line in proc.stdout.splitlines()
                 if "encoding: [" in line]
    assert encodings == [i.to_bytes() for i in insts]


def test_bad_requests_are_device_errors():
    with pytest.raises(DeviceError, match="not gfx1100"):
        code_object(64, "gfx1100")
    with pytest.raises(DeviceError, match="K a multiple of 16"):
        kernel_insts(40)
    with pytest.raises(DeviceError, match="not a multiple of 64"):
        router_mfma_program(100, 64, "gfx950")


def test_a_router_launch_traces_and_maps_back_to_the_kernel(monkeypatch):
    # with PROFILE=1 the mock GPU records the emulator's SQTT trace of each dispatch (CDNA layout on gfx950): every
    # instruction every wave of the router kernel issued maps back to the kernel's code, in order
    import numpy as np
    from amd_isa import sqtt
    from hcq_runtime import Device, buffer_for, run_linear
    from uopir import Ops, UOp, dtypes

    monkeypatch.setenv("PROFILE", "1")
    device = "MOCKAMD:gfx950:21"  # a fresh device, opened with profiling on
    rows, k = 128, 64
    rng = np.random.default_rng(4)
    bufs = [UOp.new_buffer(device, rows * 32, dtypes.float32)]
    for n in (rows * k, 32 * k, 32):
        bufs.append(UOp.new_buffer(device, n, dtypes.bfloat16))
        buffer_for(bufs[-1]).copyin(memoryview((rng.standard_normal(n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)))
    run_linear(UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (router_mfma_program(rows, k, "gfx950"), *bufs)),)))
    (trace,) = Device[device].profile_traces()
    assert trace.name == "router_mfma"
    mapped = [info for _, info in sqtt.map_insts(trace.sqtt, trace.code, "gfx950") if info is not None]
    per_wave = [str(i) for i in kernel_insts(k)]
    # two workgroups of four waves, each wave through the whole straight-line kernel
    assert len(mapped) == 8 * len(per_wave)
    assert [str(i.inst) for i in mapped[: len(per_wave)]] == per_wave
    assert sum(i.inst.mnemonic == "v_mfma_f32_16x16x16_bf16" for i in mapped) == 8 * 2 * (k // 16)
