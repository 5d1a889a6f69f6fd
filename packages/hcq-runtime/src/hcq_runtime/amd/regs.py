"""Hardware facts of the AMD backend as data: PM4 opcodes and field layouts, compute register addresses, SDMA packets.

Sources: the amdgpu kernel driver headers as carried by tinygrad's autogen (`pm4_nv.h`, `gc_11_0_0_offset.h` and
`_sh_mask.h`, `sdma_v6_0_0_pkt_open.h`) and `navi_offsets` / `vega_offsets` for the register segment bases.
Register addresses are absolute dword addresses (segment base + offset); SET_SH_REG takes them relative to
`SH_REG_START`. Encoders (`pm4.py`, `sdma.py`), the mock GPU and the tests all read these tables.
"""

from __future__ import annotations

from dataclasses import dataclass

# ---------------------------------------------------------------------------------------------------------------
# PM4 type-3 packets: header = type << 30 | (body dwords - 1) << 16 | opcode << 8 | shader_type << 1

PM4_TYPE3 = 3
PM4_TYPE_SHIFT, PM4_COUNT_SHIFT, PM4_COUNT_MASK, PM4_OPCODE_SHIFT = 30, 16, 0x3FFF, 8
PM4_SHADER_TYPE_COMPUTE = 1 << 1

#: opcode -> name of the PM4 packets the backend emits and the mock GPU executes
PM4_OPCODES: dict[int, str] = {
    0x10: "NOP",
    0x15: "DISPATCH_DIRECT",
    0x3C: "WAIT_REG_MEM",
    0x3F: "INDIRECT_BUFFER",
    0x46: "EVENT_WRITE",
    0x49: "RELEASE_MEM",
    0x58: "ACQUIRE_MEM",
    0x76: "SET_SH_REG",
}
PM4 = {name: opcode for opcode, name in PM4_OPCODES.items()}

#: body length in dwords of the fixed-size packets (gfx10+ layouts); the rest are variable
PM4_BODY_DWORDS: dict[str, int] = {
    "DISPATCH_DIRECT": 4,    # dim x, y, z, COMPUTE_DISPATCH_INITIATOR
    "WAIT_REG_MEM": 6,       # info, addr lo / reg, addr hi / reg done, reference, mask, poll interval
    "INDIRECT_BUFFER": 3,    # base lo, base hi, size | control
    "RELEASE_MEM": 7,        # event + GCR, data/int/dst selects, addr lo, addr hi, data lo, data hi, int ctxid
    "ACQUIRE_MEM": 7,        # reserved, size lo, size hi, base lo, base hi, poll interval, GCR control
}
#: gfx9 (soc15, pm4_soc15.h / gfx_v9_0.c): ACQUIRE_MEM is CP_COHER_CNTL, size lo, size hi, base lo, base hi, poll interval
GFX9_PM4_BODY_DWORDS: dict[str, int] = {**PM4_BODY_DWORDS, "ACQUIRE_MEM": 6}
#: gfx major version -> fixed packet body lengths
PM4_BODY_DWORDS_BY_GFX: dict[int, dict[str, int]] = {9: GFX9_PM4_BODY_DWORDS, 11: PM4_BODY_DWORDS, 12: PM4_BODY_DWORDS}

SH_REG_START, SH_REG_END = 0x2C00, 0x3000

# WAIT_REG_MEM info dword
WAIT_FUNCTION_SHIFT, WAIT_MEM_SPACE_SHIFT, WAIT_OPERATION_SHIFT, WAIT_ENGINE_SHIFT = 0, 4, 6, 8
WAIT_FUNCTIONS: dict[int, str] = {0: "always", 1: "<", 2: "<=", 3: "==", 4: "!=", 5: ">=", 6: ">"}
WAIT_EQ, WAIT_NEQ, WAIT_GEQ = 3, 4, 5
WAIT_OPERATION_WRITE_WAIT_WRITE_REG = 1  # HDP flush: write a register, wait on another

INDIRECT_BUFFER_VALID = 1 << 23
INDIRECT_BUFFER_SIZE_MASK = 0xFFFFF

# EVENT_WRITE: event type bits 5:0, event index bits 11:8
EVENT_CS_PARTIAL_FLUSH, EVENT_INDEX_CS_PARTIAL_FLUSH = 7, 4
EVENT_CACHE_FLUSH_AND_INV_TS = 20
EVENT_INDEX_END_OF_PIPE = 5

# RELEASE_MEM (gfx10+): dword 1 = event type | event index << 8 | GCR bits; dword 2 = dst << 16 | int << 24 | data << 29
RELEASE_GCR_GLM_WB, RELEASE_GCR_GLM_INV, RELEASE_GCR_GLV_INV, RELEASE_GCR_GL1_INV = 1 << 12, 1 << 13, 1 << 14, 1 << 15
RELEASE_GCR_GL2_INV, RELEASE_GCR_GL2_WB, RELEASE_GCR_SEQ = 1 << 20, 1 << 21, 1 << 22
RELEASE_GCR_FLUSH_ALL = (RELEASE_GCR_GLM_WB | RELEASE_GCR_GLM_INV | RELEASE_GCR_GLV_INV | RELEASE_GCR_GL1_INV | RELEASE_GCR_GL2_INV
                         | RELEASE_GCR_GL2_WB | RELEASE_GCR_SEQ)
RELEASE_DST_SEL_SHIFT, RELEASE_INT_SEL_SHIFT, RELEASE_DATA_SEL_SHIFT = 16, 24, 29
DATA_SEL_NONE, DATA_SEL_32_LOW, DATA_SEL_64, DATA_SEL_GPU_CLOCK = 0, 1, 2, 3
INT_SEL_NONE, INT_SEL_AFTER_WRITE_CONFIRM = 0, 2

# ACQUIRE_MEM (gfx10+) GCR_CNTL bits
ACQUIRE_GLI_INV, ACQUIRE_GLM_WB, ACQUIRE_GLM_INV, ACQUIRE_GLK_WB, ACQUIRE_GLK_INV = 1 << 0, 1 << 4, 1 << 5, 1 << 6, 1 << 7
ACQUIRE_GLV_INV, ACQUIRE_GL1_INV, ACQUIRE_GL2_INV, ACQUIRE_GL2_WB = 1 << 8, 1 << 9, 1 << 14, 1 << 15
ACQUIRE_ALL = (ACQUIRE_GLI_INV | ACQUIRE_GLM_WB | ACQUIRE_GLM_INV | ACQUIRE_GLK_WB | ACQUIRE_GLK_INV | ACQUIRE_GLV_INV
               | ACQUIRE_GL1_INV | ACQUIRE_GL2_INV | ACQUIRE_GL2_WB)

# gfx9 (soc15) forms: ACQUIRE_MEM dword 1 is CP_COHER_CNTL (the gfx10+ GCR_CNTL word does not exist), RELEASE_MEM
# flushes with the EOP TC action bits
GFX9_COHER_SH_ICACHE, GFX9_COHER_SH_KCACHE, GFX9_COHER_TC, GFX9_COHER_TCL1, GFX9_COHER_TC_WB = 1 << 29, 1 << 27, 1 << 23, 1 << 22, 1 << 18
GFX9_COHER_ALL = GFX9_COHER_SH_ICACHE | GFX9_COHER_SH_KCACHE | GFX9_COHER_TC | GFX9_COHER_TCL1 | GFX9_COHER_TC_WB
GFX9_ACQUIRE_POLL_INTERVAL = 0xA
GFX9_EOP_TC_WB_ACTION, GFX9_EOP_TC_NC_ACTION = 1 << 15, 1 << 19
#: RELEASE_MEM dword 1 bits 24:12 hold the gfx10+ GCR_CNTL; on gfx9 only the EOP actions below exist there (TCL1_VOL 12,
#: TC_VOL 13, TC_WB 15, TCL1 16, TC 17, TC_NC 19, TC_WC 20, TC_MD 21): a set bit 14, 18, 22-24 is a gfx10+ GCR bit
RELEASE_CACHE_FIELD = 0x1FFF << 12
GFX9_EOP_ACTIONS = (1 << 12) | (1 << 13) | (1 << 15) | (1 << 16) | (1 << 17) | (1 << 19) | (1 << 20) | (1 << 21)

# COMPUTE_TMPRING_SIZE: WAVES bits 11:0, WAVESIZE from bit 12 (in units of SCRATCH_WAVE_ALIGN bytes)
TMPRING_WAVESIZE_SHIFT = 12
SCRATCH_WAVE_ALIGN = {9: 1024, 11: 256, 12: 256}

# COMPUTE_DISPATCH_INITIATOR fields
INITIATOR_COMPUTE_SHADER_EN, INITIATOR_FORCE_START_AT_000 = 1 << 0, 1 << 2
INITIATOR_USE_THREAD_DIMENSIONS, INITIATOR_CS_W32_EN = 1 << 5, 1 << 15

# COMPUTE_PGM_RSRC1.PRIV (bit 20): set on gfx11 to work around CWSR (as tinygrad does)
RSRC1_PRIV = 1 << 20

# COMPUTE_PGM_RSRC2 fields read by the mock GPU
RSRC2_USER_SGPR_SHIFT, RSRC2_USER_SGPR_MASK = 1, 0x1F


@dataclass(frozen=True)
class ComputeRegs:
    """Absolute dword addresses of the compute dispatch registers of one GC generation."""

    dispatch_initiator: int
    dim_x: int
    start_x: int
    num_thread_x: int
    pgm_lo: int
    dispatch_scratch_base_lo: int
    pgm_rsrc1: int
    pgm_rsrc2: int
    resource_limits: int
    tmpring_size: int
    restart_x: int
    pgm_rsrc3: int
    user_data_0: int
    user_data_count: int = 16

    def sh_offset(self, address: int) -> int:
        """The SET_SH_REG register offset of an absolute address."""
        if not SH_REG_START <= address < SH_REG_END:
            raise ValueError(f"register {address:#x} is outside the SH register space {SH_REG_START:#x}..{SH_REG_END:#x}")
        return address - SH_REG_START


# gfx11 / gfx12: GC segment 0 base 0x1260 + the gc_11_0_0 / gc_12_0_0 offsets (identical for these registers)
GFX11_COMPUTE = ComputeRegs(dispatch_initiator=0x2E00, dim_x=0x2E01, start_x=0x2E04, num_thread_x=0x2E07, pgm_lo=0x2E0C,
                            dispatch_scratch_base_lo=0x2E10, pgm_rsrc1=0x2E12, pgm_rsrc2=0x2E13, resource_limits=0x2E15,
                            tmpring_size=0x2E18, restart_x=0x2E1B, pgm_rsrc3=0x2E28, user_data_0=0x2E40)
# gfx9 (CDNA): GC segment 0 base 0x2000 + the gc_9_4_3 offsets; only RSRC3 lands elsewhere
GFX9_COMPUTE = ComputeRegs(dispatch_initiator=0x2E00, dim_x=0x2E01, start_x=0x2E04, num_thread_x=0x2E07, pgm_lo=0x2E0C,
                           dispatch_scratch_base_lo=0x2E10, pgm_rsrc1=0x2E12, pgm_rsrc2=0x2E13, resource_limits=0x2E15,
                           tmpring_size=0x2E18, restart_x=0x2E1B, pgm_rsrc3=0x2E2D, user_data_0=0x2E40)

#: gfx major version -> compute registers
COMPUTE_REGS: dict[int, ComputeRegs] = {9: GFX9_COMPUTE, 11: GFX11_COMPUTE, 12: GFX11_COMPUTE}

# ---------------------------------------------------------------------------------------------------------------
# SDMA packets (sdma 5/6): header = op | sub_op << 8 | packet-specific bits

SDMA_OPS: dict[int, str] = {0: "NOP", 1: "COPY", 2: "WRITE", 4: "INDIRECT", 5: "FENCE", 6: "TRAP", 8: "POLL_REGMEM", 13: "TIMESTAMP"}
SDMA = {name: op for op, name in SDMA_OPS.items()}
SDMA_SUBOP_COPY_LINEAR, SDMA_SUBOP_WRITE_LINEAR, SDMA_SUBOP_TIMESTAMP_GET_GLOBAL = 0, 0, 2
SDMA_SUB_OP_SHIFT = 8
SDMA_NOP_COUNT_SHIFT, SDMA_NOP_COUNT_MASK = 16, 0x3FFF
SDMA_FENCE_MTYPE_SHIFT = 16  # sdma 5+; the sdma 4 (gfx9) FENCE header has no fields above the sub-op
SDMA_MTYPE_UC = 3
SDMA_POLL_FUNC_SHIFT, SDMA_POLL_MEM_SHIFT = 28, 31
SDMA_POLL_INTERVAL_SHIFT, SDMA_POLL_RETRY_SHIFT = 0, 16
SDMA_COPY_COUNT_MASK = 0x3FFFFFFF  # COPY_LINEAR count is bytes - 1
SDMA_MAX_COPY = 0x40000000
SDMA_TRAP_CONTEXT_MASK = 0x0FFFFFFF

#: dwords of the fixed-size SDMA packets, header included
SDMA_PACKET_DWORDS: dict[str, int] = {"COPY": 7, "FENCE": 4, "TRAP": 2, "POLL_REGMEM": 6, "TIMESTAMP": 3}

# ---------------------------------------------------------------------------------------------------------------
# HSA kernel ABI: user SGPRs a kernel descriptor enables, in the order they occupy s0, s1, ... (LLVM AMDGPUUsage)

USER_SGPR_DWORDS: dict[str, int] = {"private_segment_buffer": 4, "dispatch_ptr": 2, "queue_ptr": 2, "kernarg_segment_ptr": 2,
                                    "dispatch_id": 2, "flat_scratch_init": 2, "private_segment_size": 1}
#: kernel descriptor byte offsets the mock GPU reads (llvm_amdhsa_kernel_descriptor_t)
KD_SIZE, KD_ENTRY_OFFSET = 64, 16
#: hsa_kernel_dispatch_packet_t: 64 bytes; workgroup sizes (u16) at 4, grid sizes (u32) at 12, segment sizes at 24,
#: kernarg address at 40
AQL_PACKET_SIZE = 64


def target_name(target: tuple[int, int, int]) -> str:
    """(11, 0, 0) -> "gfx1100", (9, 4, 2) -> "gfx942": major in decimal, minor and stepping in hex."""
    major, minor, stepping = target
    return f"gfx{major}{minor:x}{stepping:x}"


def parse_target(name: str) -> tuple[int, int, int]:
    """"gfx1100" -> (11, 0, 0), "gfx90a" -> (9, 0, 10): the inverse of `target_name`; ValueError for anything else."""
    digits = name.lower().removeprefix("gfx")
    if not name.lower().startswith("gfx") or len(digits) not in (3, 4):
        raise ValueError(f"{name!r} is not a gfx target name such as gfx1100 or gfx90a")
    try:
        return int(digits[:-2]), int(digits[-2], 16), int(digits[-1], 16)
    except ValueError:
        raise ValueError(f"{name!r} is not a gfx target name such as gfx1100 or gfx90a") from None
