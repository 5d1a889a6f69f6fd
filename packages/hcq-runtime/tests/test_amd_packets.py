"""PM4 / SDMA encodings checked by an independent decoder written from the bit layouts of the amdgpu headers, and the
command-buffer patch mechanism checked against struct.pack."""

import struct

import pytest
from hcq_runtime.amd import AMDComputeQueue, AMDCopyQueue, CommandBuffer, PatchError, PatchKind, ProgramInfo, link, pm4, regs, runtime, sdma
from hypothesis import given, settings
from hypothesis import strategies as st

# facts, restated here from the headers rather than imported: PM4 opcodes (pm4_nv.h) and gfx11 registers
# (gc_11_0_0_offset.h offsets + GC segment-0 base 0x1260 from navi_offsets)
OP_NOP, OP_DISPATCH_DIRECT, OP_WAIT_REG_MEM, OP_INDIRECT_BUFFER = 0x10, 0x15, 0x3C, 0x3F
OP_EVENT_WRITE, OP_RELEASE_MEM, OP_ACQUIRE_MEM, OP_SET_SH_REG = 0x46, 0x49, 0x58, 0x76
GC_BASE = 0x1260
REG = {"PGM_LO": 0x1BAC, "PGM_RSRC1": 0x1BB2, "PGM_RSRC3": 0x1BC8, "USER_DATA_0": 0x1BE0, "START_X": 0x1BA4, "NUM_THREAD_X": 0x1BA7,
       "TMPRING_SIZE": 0x1BB8, "RESTART_X": 0x1BBB, "RESOURCE_LIMITS": 0x1BB5, "SCRATCH_BASE_LO": 0x1BB0}


def decode_pm4(words):
    """(opcode, body, compute bit) for each packet; asserts the stream is made of whole type-3 packets."""
    packets, i = [], 0
    while i < len(words):
        head = words[i]
        assert head >> 30 == 3, f"type {head >> 30} packet"
        body_len = ((head >> 16) & 0x3FFF) + 1
        assert i + 1 + body_len <= len(words), "truncated packet"
        packets.append(((head >> 8) & 0xFF, words[i + 1:i + 1 + body_len], (head >> 1) & 1))
        i += 1 + body_len
    return packets


def sh_writes(packets):
    """Absolute register address -> value, from the SET_SH_REG packets."""
    out = {}
    for opcode, body, _ in packets:
        if opcode == OP_SET_SH_REG:
            for k, value in enumerate(body[1:]):
                out[0x2C00 + body[0] + k] = value
    return out


def test_register_table_matches_header_offsets():
    c = regs.GFX11_COMPUTE
    assert c.pgm_lo == GC_BASE + REG["PGM_LO"] and c.pgm_rsrc1 == GC_BASE + REG["PGM_RSRC1"]
    assert c.pgm_rsrc3 == GC_BASE + REG["PGM_RSRC3"] and c.user_data_0 == GC_BASE + REG["USER_DATA_0"]
    assert c.num_thread_x == GC_BASE + REG["NUM_THREAD_X"] and c.start_x == GC_BASE + REG["START_X"]
    assert c.tmpring_size == GC_BASE + REG["TMPRING_SIZE"] and c.restart_x == GC_BASE + REG["RESTART_X"]
    assert c.dispatch_scratch_base_lo == GC_BASE + REG["SCRATCH_BASE_LO"] and c.resource_limits == GC_BASE + REG["RESOURCE_LIMITS"]
    assert regs.GFX9_COMPUTE.pgm_rsrc3 == 0x2000 + 0xE2D  # vega GC base + gc_9_4_3 offset


def test_header_layout():
    head = pm4.header(OP_SET_SH_REG, 3)
    assert head == (3 << 30) | (2 << 16) | (0x76 << 8) | 2
    with pytest.raises(ValueError):
        pm4.header(OP_NOP, 0)


def test_exec_sets_dispatch_registers_and_dispatches():
    info = ProgramInfo(address=0x1234_5600, rsrc1=0x11, rsrc2=0x9E, rsrc3=0x33, wave32=True, user_sgprs=("kernarg_segment_ptr",), kernarg_size=28)
    q = AMDComputeQueue((11, 0, 0)).exec(info, 0xAB_CDEF_0100, (4, 2, 1), (64, 1, 1))
    packets = decode_pm4(q.cmd.words)
    assert all(compute == 1 for _, _, compute in packets)
    ops = [op for op, _, _ in packets]
    assert ops[0] == OP_ACQUIRE_MEM and ops[-2:] == [OP_DISPATCH_DIRECT, OP_EVENT_WRITE]
    sh = sh_writes(packets)
    assert sh[GC_BASE + REG["PGM_LO"]] == 0x1234_5600 >> 8 and sh[GC_BASE + REG["PGM_LO"] + 1] == 0
    assert sh[GC_BASE + REG["PGM_RSRC1"]] == 0x11 and sh[GC_BASE + REG["PGM_RSRC1"] + 1] == 0x9E
    assert sh[GC_BASE + REG["PGM_RSRC3"]] == 0x33
    assert (sh[GC_BASE + REG["USER_DATA_0"]], sh[GC_BASE + REG["USER_DATA_0"] + 1]) == (0xCDEF_0100, 0xAB)
    assert [sh[GC_BASE + REG["NUM_THREAD_X"] + k] for k in range(3)] == [64, 1, 1]
    dispatch = packets[-2][1]
    assert dispatch[:3] == [4, 2, 1]
    assert dispatch[3] & 1 and dispatch[3] >> 2 & 1 and dispatch[3] >> 15 & 1  # compute_shader_en, force_start_at_000, cs_w32_en
    assert packets[-1][1] == [7 | 4 << 8]  # CS_PARTIAL_FLUSH, event index 4


def test_signal_wait_timestamp_packets():
    q = AMDComputeQueue().wait(0x1000_0008, 7).signal(0x2000_0010, 9).timestamp(0x3000_0018)
    packets = decode_pm4(q.cmd.words)
    assert [op for op, _, _ in packets] == [OP_WAIT_REG_MEM, OP_RELEASE_MEM, OP_RELEASE_MEM, OP_RELEASE_MEM, OP_ACQUIRE_MEM]
    wait = packets[0][1]
    assert len(wait) == 6 and wait[0] & 7 == 5 and wait[0] >> 4 & 3 == 1  # >=, memory space
    assert (wait[1], wait[2], wait[3], wait[4]) == (0x1000_0008, 0, 7, 0xFFFFFFFF)
    release = packets[1][1]
    assert len(release) == 7 and release[0] & 0x3F == 20 and release[0] >> 8 & 0xF == 5  # CACHE_FLUSH_AND_INV_TS, end of pipe
    assert release[1] >> 29 == 1 and (release[2], release[3], release[4]) == (0x2000_0010, 0, 9)  # 32-bit data
    stamp = packets[3][1]
    assert stamp[1] >> 29 == 3 and stamp[2] == 0x3000_0018  # GPU clock counter
    assert len(packets[4][1]) == 7


def test_indirect_buffer_packet():
    (op, body, _), = decode_pm4(pm4.indirect_buffer(0x1_2345_6780, 40))
    assert op == OP_INDIRECT_BUFFER and body == [0x2345_6780, 1, 40 | 1 << 23]


def test_sdma_packets():
    q = AMDCopyQueue().wait(0x10_0000_0000, 3).copy(0x20_0000_0040, 0x30_0000_0080, 100).signal(0x40_0000_0008, 5).timestamp(0x50_0000_0010)
    w = q.cmd.words
    # POLL_REGMEM: op 8, func (>=) bits 30:28, mem_poll bit 31; addr lo/hi, reference, mask, interval | retry << 16
    assert w[0] == 8 | 5 << 28 | 1 << 31 and w[1:6] == [0, 0x10, 3, 0xFFFFFFFF, 4 | 0xFFF << 16]
    # COPY_LINEAR: op 1 sub-op 0; count = bytes - 1; parameter; src lo/hi; dst lo/hi
    assert w[6:13] == [1, 99, 0, 0x80, 0x30, 0x40, 0x20]
    # FENCE: op 5, mtype UC (3) at bits 18:16; addr lo/hi; data
    assert w[13:17] == [5 | 3 << 16, 8, 0x40, 5]
    # TIMESTAMP: op 13, sub-op GET_GLOBAL (2)
    assert w[17:20] == [13 | 2 << 8, 0x10, 0x50]
    assert len(w) == 20


def test_sdma_copy_splits_large_copies():
    words = sdma.copy(0x1000, 0x2000, regs.SDMA_MAX_COPY + 8)
    assert len(words) == 14 and words[1] == regs.SDMA_MAX_COPY - 1 and words[8] == 7
    assert words[10] == 0x2000 + regs.SDMA_MAX_COPY and words[12] == 0x1000 + regs.SDMA_MAX_COPY


def test_encoders_refuse_bad_input():
    with pytest.raises(ValueError, match="SH register space"):
        pm4.set_sh_reg(0xC000, 1)
    with pytest.raises(ValueError):
        sdma.copy_linear(0, 0, 0)
    with pytest.raises(ValueError, match="function 9"):
        pm4.wait_reg_mem(0, 0, function=9)


def test_link_and_runtime_patches():
    info = ProgramInfo(address=link("prog"), rsrc1=0, rsrc2=0, rsrc3=0, wave32=True, user_sgprs=("kernarg_segment_ptr",), kernarg_size=8)
    q = AMDComputeQueue().wait(runtime("signal"), runtime("wait_value")).exec(info, runtime("kernargs"), (1, 1, 1), (32, 1, 1))
    q.signal(runtime("signal"), runtime("timeline"))
    cmd = q.cmd
    assert cmd.names(PatchKind.LINK) == {"prog"} and cmd.names(PatchKind.RUNTIME) == {"signal", "wait_value", "kernargs", "timeline"}
    assert cmd.link({"prog": 0x7_0000_1100}) == 1
    sh = sh_writes(decode_pm4(cmd.words))
    assert (sh[GC_BASE + REG["PGM_LO"] + 1] << 32 | sh[GC_BASE + REG["PGM_LO"]]) == 0x7_0000_1100 >> 8
    with pytest.raises(PatchError, match="'timeline'"):
        cmd.patch({"signal": 8, "wait_value": 1, "kernargs": 16})
    assert cmd.patch({"signal": 0x5000, "wait_value": 1, "kernargs": 0x9_0000_0000, "timeline": 2}) == 5
    sh = sh_writes(decode_pm4(cmd.words))
    assert (sh[GC_BASE + REG["USER_DATA_0"] + 1] << 32 | sh[GC_BASE + REG["USER_DATA_0"]]) == 0x9_0000_0000


@settings(max_examples=60, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from([4, 8]), st.integers(0, (1 << 64) - 1), st.integers(0, 0xFFFFFFFF)), min_size=1, max_size=12),
       st.sampled_from([PatchKind.LINK, PatchKind.RUNTIME]))
def test_patches_write_values_at_their_offsets(slots, kind):
    """Interleave fixed words and patched words; after patching, the bytes equal a struct.pack of the values."""
    cmd, expected, values = CommandBuffer(), b"", {}
    for i, (width, value, fixed) in enumerate(slots):
        value &= (1 << (8 * width)) - 1
        values[f"v{i}"] = value
        cmd.emit([fixed, runtime(f"v{i}", width) if kind is PatchKind.RUNTIME else link(f"v{i}", width)])
        expected += struct.pack("<I", fixed) + struct.pack("<I" if width == 4 else "<Q", value)
    assert cmd.patch(values, kind) == len(slots)
    assert bytes(cmd.data) == expected


def test_patch_shift_and_overflow():
    cmd = CommandBuffer()
    cmd.emit([runtime("addr", 4) >> 8, runtime("small", 4)])
    with pytest.raises(PatchError, match="does not fit"):
        cmd.patch({"addr": 0x1_0000_0000_00, "small": 1 << 32})
    cmd.patch({"addr": 0x12_3400, "small": 5})
    assert cmd.words == [0x1234, 5]


# gfx9 (soc15) facts from pm4_soc15.h: CP_COHER_CNTL action bits and the RELEASE_MEM end-of-pipe TC actions
SOC15_SH_ICACHE, SOC15_SH_KCACHE, SOC15_TC, SOC15_TCL1, SOC15_TC_WB = 1 << 29, 1 << 27, 1 << 23, 1 << 22, 1 << 18
SOC15_EOP_TC_WB, SOC15_EOP_TC_NC = 1 << 15, 1 << 19


def test_gfx9_acquire_and_release_use_the_soc15_forms():
    info = ProgramInfo(address=0x1_0000_0100, rsrc1=1, rsrc2=2, rsrc3=3, wave32=False, user_sgprs=("kernarg_segment_ptr",), kernarg_size=8)
    q = AMDComputeQueue((9, 4, 2)).exec(info, 0x2000, (1, 1, 1), (64, 1, 1)).signal(0x3000, 9)
    packets = decode_pm4(q.cmd.words)
    acquire = next(body for op, body, _ in packets if op == OP_ACQUIRE_MEM)
    assert len(acquire) == 6 and acquire[5] == 0xA  # PACKET3(ACQUIRE_MEM, 5) in gfx_v9_0.c: CP_COHER_CNTL leads, the poll interval closes
    assert acquire[0] & (SOC15_SH_ICACHE | SOC15_SH_KCACHE | SOC15_TCL1) == SOC15_SH_ICACHE | SOC15_SH_KCACHE | SOC15_TCL1
    release = next(body for op, body, _ in packets if op == OP_RELEASE_MEM)
    assert release[0] & (SOC15_EOP_TC_WB | SOC15_EOP_TC_NC) == SOC15_EOP_TC_WB | SOC15_EOP_TC_NC
    assert release[0] & 0xFF == 20 and (release[0] >> 8) & 0xF == 5  # CACHE_FLUSH_AND_INV_TS at end of pipe
    assert release[1] >> 29 == 1 and release[6] == 0  # 32-bit data, no interrupt context on soc15
    sh = sh_writes(packets)
    assert sh[0x2000 + 0xE2D] == 3, "gfx9 COMPUTE_PGM_RSRC3 lives at its own address"
    dispatch = next(body for op, body, _ in packets if op == OP_DISPATCH_DIRECT)
    assert not dispatch[3] & (1 << 15), "CDNA runs wave64: CS_W32_EN stays clear"


def test_gfx9_sdma_fence_has_no_mtype():
    # sdma_4_0_0: the FENCE header holds only op (7:0) and sub-op (15:8); sdma 5/6 add MTYPE at 18:16
    assert AMDCopyQueue((9, 4, 0)).signal(0x40_0000_0008, 5).cmd.words == [5, 8, 0x40, 5]
    assert AMDCopyQueue((11, 0, 0)).signal(0x40_0000_0008, 5).cmd.words[0] == 5 | 3 << 16


@pytest.mark.parametrize(("name", "target"), [("gfx1100", (11, 0, 0)), ("gfx1201", (12, 0, 1)), ("gfx90a", (9, 0, 10)),
                                              ("gfx942", (9, 4, 2)), ("GFX940", (9, 4, 0))])
def test_target_names_round_trip(name, target):
    assert regs.parse_target(name) == target and regs.target_name(target) == name.lower()


@pytest.mark.parametrize("name", ["gfx", "sm_90", "gfx9", "gfxzz0", "gfx12345"])
def test_parse_target_rejects_other_names(name):
    with pytest.raises(ValueError, match="gfx target name"):
        regs.parse_target(name)


def test_gfx11_release_mem_flushes_with_gcr_bits_not_soc15_bits():
    release = next(body for op, body, _ in decode_pm4(AMDComputeQueue((11, 0, 0)).signal(0x3000, 9).cmd.words) if op == OP_RELEASE_MEM)
    assert release[0] & (1 << 21) and release[0] & (1 << 20)  # GCR GL2_WB / GL2_INV (gfx10+ pm4_nv.h)


def test_scratch_descriptor_patched_at_link_keeps_the_swizzle_bit():
    info = ProgramInfo(address=0x1_0000_0100, rsrc1=1, rsrc2=2, rsrc3=3, wave32=True,
                       user_sgprs=("private_segment_buffer", "kernarg_segment_ptr"), kernarg_size=8)
    cmd = AMDComputeQueue((11, 0, 0)).exec(info, 0x2000, (1, 1, 1), (32, 1, 1), scratch=link("scratch", 8)).cmd
    cmd.link({"scratch": 0x7_1234_5600})
    sh = sh_writes(decode_pm4(cmd.words))
    user = [sh[GC_BASE + REG["USER_DATA_0"] + i] for i in range(6)]
    assert user[:4] == [0x1234_5600, 0x7 | 1 << 31, 0xFFFFFFFF, 0x20C14000]  # V# base lo, base hi | swizzle, size, word3
    assert sh[GC_BASE + REG["SCRATCH_BASE_LO"]] == 0x7_1234_5600 >> 8 & 0xFFFFFFFF


def test_gfx90a_scratch_user_sgprs_use_the_gfx9_descriptor_and_flat_scratch_base():
    # gfx9 V# word3 (union_SQ_BUF_RSRC_WORD3): DST_SEL_X..W = 4..7 at bits 0/3/6/9, NUM_FORMAT UINT (4) at 12, DATA_FORMAT 32 (4)
    # at 15, ELEMENT_SIZE 1 at 19, INDEX_STRIDE 3 at 21, ADD_TID_ENABLE at 23, TYPE 0 at 30
    word3 = 4 | 5 << 3 | 6 << 6 | 7 << 9 | 4 << 12 | 4 << 15 | 1 << 19 | 3 << 21 | 1 << 23
    info = ProgramInfo(address=0x1_0000_0100, rsrc1=1, rsrc2=2, rsrc3=3, wave32=False,
                       user_sgprs=("private_segment_buffer", "kernarg_segment_ptr", "flat_scratch_init"), kernarg_size=8)
    cmd = AMDComputeQueue((9, 0, 10)).exec(info, 0x2000, (1, 1, 1), (64, 1, 1), scratch=link("scratch", 8)).cmd
    cmd.link({"scratch": 0x7_1234_5600})
    sh = sh_writes(decode_pm4(cmd.words))
    assert [sh[0x2000 + 0xE40 + i] for i in range(8)] == [0x1234_5600, 0x7 | 1 << 31, 0xFFFFFFFF, word3, 0x2000, 0, 0x1234_5600, 0x7]
