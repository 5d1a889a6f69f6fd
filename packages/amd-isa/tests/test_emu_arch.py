"""The emulator beyond RDNA3 wave32: RDNA4 programs, CDNA (gfx9) wave64 programs with gfx9 names and rules, and the
SQTT trace mode of `run_kernel` (a code object built from assembled code, so no LLVM is needed)."""

import struct

import numpy as np
import pytest
from amd_isa import assemble, assemble_insts
from amd_isa.codeobject import CodeObject
from amd_isa.emu import EmulatorError, Memory, WaveState, run_kernel, run_program
from amd_isa.sqtt import decode, map_insts
from amd_isa.sqtt.mapping import SILENT

M32 = 0xFFFFFFFF


def test_rdna4_scalar_vector_and_memory() -> None:
    mem = Memory()
    data = np.arange(64, dtype=np.uint32) * 3 + 1
    base = mem.map(data)
    state = WaveState(32, "rdna4")
    state.s[0], state.s[1] = base & M32, base >> 32
    state.v[1] = np.arange(32) * 4
    prog = assemble_insts("""
        s_load_b32 s4, s[0:1], 0x8
        s_add_co_u32 s5, s4, -1
        s_add_co_ci_u32 s6, 0, 0
        s_wait_kmcnt 0
        global_load_b32 v2, v1, s[0:1] offset:4
        s_wait_loadcnt 0
        v_add_nc_u32_e32 v3, s5, v2
        v_max_num_f32_e32 v4, 1.0, v5
    """, "rdna4")
    st = run_program(prog, 32, "rdna4", state=state, memory=mem)
    assert st.s[4] == int(data[2]) and st.s[5] == int(data[2]) - 1 and st.s[6] == 1
    assert [int(x) for x in st.v[2]] == [int(d) for d in data[1:33]]
    assert [int(x) for x in st.v[3]] == [int(d) + int(data[2]) - 1 for d in data[1:33]]
    assert st.vf[4, 0] == 1.0


def test_cdna_wave64_gfx9_names_and_carries() -> None:
    state = WaveState(64, "cdna")
    a = np.arange(64, dtype=np.uint64) * 0x0800_0000 + 0xF000_0000
    state.v[0] = (a & M32).astype(np.uint32)
    state.v[1] = 0x1000_0000
    prog = assemble_insts("""
        v_add_co_u32_e32 v2, vcc, v0, v1
        s_mov_b64 s[0:1], -1
        s_andn2_b64 s[2:3], s[0:1], vcc
        v_addc_co_u32_e32 v3, vcc, 0, v5, vcc
        v_add_u32_e32 v4, 5, v0
        v_cmpx_gt_u32_e64 s[4:5], v0, v1
    """, "cdna")
    st = run_program(prog, 64, "cdna", state=state)
    full = [(int(x) & M32) + 0x1000_0000 for x in a]
    assert [int(x) for x in st.v[2]] == [f & M32 for f in full]
    assert [int(x) for x in st.v[3]] == [f >> 32 for f in full]
    assert [int(x) for x in st.v[4]] == [(int(x) + 5) & M32 for x in a]
    carry = sum((f >> 32) << lane for lane, f in enumerate(full))
    assert st.s[2] | st.s[3] << 32 == ~carry & (2**64 - 1)
    gt = sum(int((int(x) & M32) > 0x1000_0000) << lane for lane, x in enumerate(a))
    assert st.exec == gt and st.s[4] | st.s[5] << 32 == gt, "gfx9 v_cmpx writes its SGPR destination and EXEC"


def test_cdna_memory_names() -> None:
    mem = Memory()
    data = np.arange(128, dtype=np.uint32) * 7
    base = mem.map(data)
    lds = np.zeros(1024, np.uint8)
    state = WaveState(64, "cdna")
    state.attach_lds(lds)
    state.s[0], state.s[1] = base & M32, base >> 32
    state.v[0] = np.arange(64) * 4
    prog = assemble_insts("""
        s_load_dwordx2 s[4:5], s[0:1], 0x10
        global_load_dword v1, v0, s[0:1]
        global_load_ushort v2, v0, s[0:1] offset:2
        s_waitcnt vmcnt(0) lgkmcnt(0)
        ds_write_b32 v0, v1
        ds_read2_b32 v[4:5], v0 offset1:1
        s_waitcnt lgkmcnt(0)
    """, "cdna")
    st = run_program(prog, 64, "cdna", state=state, memory=mem)
    assert (st.s[4], st.s[5]) == (int(data[4]), int(data[5]))
    assert [int(x) for x in st.v[1]] == [int(d) for d in data[:64]]
    assert [int(x) for x in st.v[2]] == [int(d) >> 16 for d in data[:64]]
    assert [int(x) for x in st.v[4]] == [int(d) for d in data[:64]]
    assert [int(x) for x in st.v[5, :63]] == [int(d) for d in data[1:64]]


TRACED = """
    s_load_b64 s[2:3], s[0:1], 0x0
    v_lshlrev_b32_e32 v1, 2, v0
    s_waitcnt lgkmcnt(0)
    s_mov_b32 s4, 0
loop:
    s_add_u32 s4, s4, 1
    s_cmp_lt_u32 s4, 3
    s_cbranch_scc1 loop
    s_delay_alu instid0(VALU_DEP_1)
    v_add_nc_u32_e32 v2, s4, v0
    global_store_b32 v1, v2, s[2:3]
    s_barrier
    s_endpgm
"""


# the same program in gfx12 spelling (s_add_co_u32, s_wait_kmcnt, and s_barrier split into signal and wait)
TRACED_GFX12 = (TRACED.replace("s_add_u32", "s_add_co_u32").replace("s_waitcnt lgkmcnt(0)", "s_wait_kmcnt 0x0")
                .replace("s_barrier", "s_barrier_signal -1\n    s_barrier_wait 0xffff"))


@pytest.mark.parametrize("target, layout, text", [("gfx1100", "rdna3", TRACED), ("gfx1201", "rdna4", TRACED_GFX12)])
def test_trace_mode_stream_maps_back_to_the_executed_instructions(target: str, layout: str, text: str) -> None:
    code = assemble(text, target)
    blob = CodeObject.from_code(code, target, "traced").to_bytes()
    mem = Memory()
    out = np.zeros(64, np.uint32)
    run = run_kernel(blob, struct.pack("<Q", mem.map(out)), 64, 64, mem, trace=True, count_mix=True)
    assert [int(x) for x in out] == [lane + 3 for lane in range(64)]
    assert run.sqtt is not None
    packets = list(decode(run.sqtt, layout))
    assert packets[0].name == "LAYOUT_HEADER" and packets[0].layout == int(layout[-1])
    assert [p.name.removesuffix("_RDNA4") for p in packets].count("WAVESTART") == 2
    assert [p.name.removesuffix("_RDNA4") for p in packets].count("WAVEEND") == 2
    mapped = [info for _, info in map_insts(run.sqtt, blob, target) if info is not None]
    # Every executed instruction except the silent ones (s_delay_alu, s_barrier_wait: no packet on the hardware either) is
    # recorded once, in program order per wave.
    assert len(mapped) == run.instructions - sum(run.mix[name] for name in SILENT)
    executed = [line.split()[0] for line in text.strip().splitlines() if not line.strip().endswith(":")]
    per_wave = [[i.inst.mnemonic for i in mapped if i.wave == w] for w in (0, 1)]
    loop = executed[4:7]
    expected = executed[:4] + loop * 3 + [n for n in executed[7:] if n not in SILENT]
    assert per_wave[0] == per_wave[1] == expected


CDNA_TRACED = """s_load_dwordx2 s[4:5], s[0:1], 0x0
v_lshlrev_b32 v1, 2, v0
v_add_u32 v2, 3, v0
s_waitcnt lgkmcnt(0)
{mfma} v[4:7], v2, v2, 0
s_nop 7
global_store_dword v1, v2, s[4:5]
s_endpgm"""


# each target's name for the 16-block 4x4x1 f32 MFMA (LLVM takes only its own)
CDNA_4X4X1 = {"gfx90a": "v_mfma_f32_4x4x1f32", "gfx950": "v_mfma_f32_4x4x1_16b_f32"}


@pytest.mark.parametrize("target", ["gfx90a", "gfx950"])
def test_trace_mode_writes_cdna_streams_that_map_back(target: str) -> None:
    source = CDNA_TRACED.format(mfma=CDNA_4X4X1[target])
    # CDNA: CDNA_WAVESTART, one CDNA_ISSUE per issued instruction (the wave's two issue bits set), CDNA_WAVEEND; the
    # mapper follows the issues through the code, s_endpgm included
    blob = CodeObject.from_code(assemble(source, target), target, "traced").to_bytes()
    mem = Memory()
    out = np.zeros(128, np.uint32)
    run = run_kernel(blob, struct.pack("<Q", mem.map(out)), 128, 128, mem, trace=True)
    assert [int(x) for x in out] == [t + 3 for t in range(128)]
    packets = list(decode(run.sqtt, "cdna"))
    assert packets[0].name == "LAYOUT_HEADER" and packets[0].layout == 2
    assert [p.name for p in packets].count("CDNA_WAVESTART") == [p.name for p in packets].count("CDNA_WAVEEND") == 2
    mapped = [info for _, info in map_insts(run.sqtt, blob, target) if info is not None]
    assert len(mapped) == run.instructions
    executed = [line.split()[0] for line in source.splitlines()]
    assert [[i.inst.mnemonic.removesuffix("_e32") for i in mapped if i.wave == w] for w in (0, 1)] == [executed, executed]


def test_trace_mode_rejects_unknown_layouts() -> None:
    from amd_isa.emu.trace import Tracer

    with pytest.raises(EmulatorError, match="RDNA3, RDNA4 and CDNA SQTT layouts, not gcn5's"):
        Tracer("gcn5")


def _mfma_operand_regs(m: np.ndarray, per_reg: int) -> np.ndarray:
    """Registers (regs, 64 lanes) for A (rows) or B (columns; pass B.T) of v_mfma_*_16x16xK: lane l holds row l%16,
    k values (l//16)*K/4 ... +K/4-1, `per_reg` to a register from the low bits up."""
    k_lane = m.shape[1] // 4
    bits = 32 // per_reg
    raw = m.view({1: np.uint32, 2: np.uint16, 4: np.uint8}[per_reg])
    regs = np.zeros((max(1, k_lane // per_reg), 64), np.uint32)
    for lane in range(64):
        for j in range(k_lane):
            regs[j // per_reg, lane] |= np.uint32(int(raw[lane % 16, (lane // 16) * k_lane + j]) << (bits * (j % per_reg)))
    return regs


@pytest.mark.parametrize("form,dtype,per_reg", [("v_mfma_f32_16x16x16_f16", np.float16, 2), ("v_mfma_f32_16x16x4_f32", np.float32, 1),
                                                ("v_mfma_i32_16x16x32_i8", np.int8, 4)])
def test_cdna_mfma_16x16_against_numpy(form: str, dtype, per_reg: int) -> None:
    k = int(form.split("x")[-1].split("_")[0])
    rng = np.random.default_rng(9)
    if dtype is np.int8:
        a, b = rng.integers(-128, 128, (16, k)).astype(np.int8), rng.integers(-128, 128, (k, 16)).astype(np.int8)
        c = rng.integers(-5000, 5000, (16, 16)).astype(np.int32)
    else:
        a, b = rng.normal(size=(16, k)).astype(dtype), rng.normal(size=(k, 16)).astype(dtype)
        c = rng.normal(size=(16, 16)).astype(np.float32)
    a_regs, b_regs = _mfma_operand_regs(a, per_reg), _mfma_operand_regs(np.ascontiguousarray(b.T), per_reg)
    state = WaveState(64, "cdna")
    state.v[0:len(a_regs)] = a_regs
    state.v[8:8 + len(b_regs)] = b_regs
    # C in AGPRs a[0:3], D to AGPRs a[4:7] (acc_cd), then read back one register to a VGPR.
    for r in range(4):
        for lane in range(64):
            state.a[r, lane] = c.view(np.uint32)[4 * (lane // 16) + r, lane % 16]
    n_a, n_b = len(a_regs), len(b_regs)
    asm = f"{form} a[4:7], v[0:{n_a - 1}], v[8:{8 + n_b - 1}], a[0:3]\nv_accvgpr_read_b32 v20, a5" if n_a > 1 else \
        f"{form} a[4:7], v0, v8, a[0:3]\nv_accvgpr_read_b32 v20, a5"
    st = run_program(assemble_insts(asm, "cdna"), 64, "cdna", state=state)
    got = np.zeros((16, 16), np.uint32)
    for r in range(4):
        for lane in range(64):
            got[4 * (lane // 16) + r, lane % 16] = st.a[4 + r, lane]
    if dtype is np.int8:
        np.testing.assert_array_equal(got.view(np.int32), a.astype(np.int64) @ b.astype(np.int64) + c)
    else:
        np.testing.assert_allclose(got.view(np.float32), a.astype(np.float64) @ b.astype(np.float64) + c, rtol=1e-5, atol=1e-5)
    assert [int(x) for x in st.v[20]] == [int(x) for x in st.a[5]]


def _mfma32_operand_regs(m: np.ndarray, per_reg: int) -> np.ndarray:
    """Registers (regs, 64 lanes) for A (rows) or B (columns; pass B.T) of a 32x32xK MFMA: lane l holds row l%32 and
    k values (l//32)*K/2 ... +K/2-1, `per_reg` to a register from the low bits up."""
    k_lane = m.shape[1] // 2
    bits = 32 // per_reg
    raw = m.view({1: np.uint32, 2: np.uint16, 4: np.uint8}[per_reg])
    regs = np.zeros((max(1, k_lane // per_reg), 64), np.uint32)
    for lane in range(64):
        for j in range(k_lane):
            regs[j // per_reg, lane] |= np.uint32(int(raw[lane % 32, (lane // 32) * k_lane + j]) << (bits * (j % per_reg)))
    return regs


@pytest.mark.parametrize("form,per_reg", [("v_mfma_i32_32x32x16_i8", 4), ("v_mfma_f32_32x32x8_bf16", 2), ("v_mfma_f32_32x32x16_f16", 2)])
def test_cdna_mfma_32x32_against_numpy(form: str, per_reg: int) -> None:
    k = int(form.split("x")[-1].split("_")[0])
    rng = np.random.default_rng(12)
    if per_reg == 4:
        a, b = rng.integers(-128, 128, (32, k)).astype(np.int8), rng.integers(-128, 128, (k, 32)).astype(np.int8)
        c = rng.integers(-5000, 5000, (32, 32)).astype(np.int32)
    elif "bf16" in form:
        # bf16 values: float32 with the low 16 bits clear, stored as their high halves
        a32 = (rng.normal(size=(32, k)).astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
        b32 = (rng.normal(size=(k, 32)).astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
        a, b = (a32.view(np.uint32) >> 16).astype(np.uint16), (b32.view(np.uint32) >> 16).astype(np.uint16)
        c = rng.normal(size=(32, 32)).astype(np.float32)
    else:
        a, b = rng.normal(size=(32, k)).astype(np.float16), rng.normal(size=(k, 32)).astype(np.float16)
        c = rng.normal(size=(32, 32)).astype(np.float32)
    a_regs, b_regs = _mfma32_operand_regs(a, per_reg), _mfma32_operand_regs(np.ascontiguousarray(b.T), per_reg)
    state = WaveState(64, "cdna")
    state.v[0:len(a_regs)] = a_regs
    state.v[8:8 + len(b_regs)] = b_regs
    # C in v[32:47] by the documented layout: register r of lane l is C[8*(r//4) + 4*(l//32) + r%4][l%32]
    position = [(8 * (r // 4) + 4 * (lane // 32) + r % 4, lane % 32) for r in range(16) for lane in range(64)]
    for index, (row, col) in enumerate(position):
        state.v[32 + index // 64, index % 64] = c.view(np.uint32)[row, col]
    n_a, n_b = len(a_regs), len(b_regs)
    st = run_program(assemble_insts(f"{form} v[48:63], v[0:{n_a - 1}], v[8:{8 + n_b - 1}], v[32:47]", "cdna"), 64, "cdna", state=state)
    got = np.zeros((32, 32), np.uint32)
    for index, (row, col) in enumerate(position):
        got[row, col] = st.v[48 + index // 64, index % 64]
    if per_reg == 4:
        np.testing.assert_array_equal(got.view(np.int32), a.astype(np.int64) @ b.astype(np.int64) + c)
    elif "bf16" in form:
        np.testing.assert_allclose(got.view(np.float32), a32.astype(np.float64) @ b32.astype(np.float64) + c, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_allclose(got.view(np.float32), a.astype(np.float64) @ b.astype(np.float64) + c, rtol=1e-5, atol=1e-5)


def test_cdna_mfma_scale_load_is_reported_unsupported() -> None:
    with pytest.raises(EmulatorError, match="v_mfma_ld_scale_b32"):
        run_program(assemble_insts("v_mfma_ld_scale_b32 v0, v1", "cdna"), 64, "cdna")
