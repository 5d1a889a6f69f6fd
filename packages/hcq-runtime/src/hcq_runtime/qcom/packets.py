"""Adreno 6xx CP packets: type-4 register writes and type-7 commands, with their parity bits, and the A6xx
compute registers and field layouts the compute queue writes.

Values are facts from mesa's freedreno register database (adreno_pm4.xml, a6xx.xml) as tinygrad's autogen carries
them. Each encoder returns command words; a word may be a `Sym` (patched in later), a 64-bit `Sym` counts two dwords.
"""

from __future__ import annotations

from ..hcq2.cmdbuf import Sym, Word, dwords, qword

TYPE4, TYPE7 = 0x4, 0x7  # the header's top nibble
PKT4_MAX_COUNT, PKT7_MAX_COUNT = 0x7F, 0x3FFF

#: type-7 opcodes (adreno_pm4.xml)
CP_NOP = 0x10
CP_WAIT_MEM_WRITES = 0x12
CP_WAIT_FOR_IDLE = 0x26
CP_RUN_OPENCL = 0x31
CP_EXEC_CS = 0x33
CP_LOAD_STATE6_FRAG = 0x34
CP_WAIT_REG_MEM = 0x3C
CP_REG_TO_MEM = 0x3E
CP_EVENT_WRITE = 0x46
CP_SET_MARKER = 0x65
OPCODE_NAMES = {CP_NOP: "CP_NOP", CP_WAIT_MEM_WRITES: "CP_WAIT_MEM_WRITES", CP_WAIT_FOR_IDLE: "CP_WAIT_FOR_IDLE",
                CP_RUN_OPENCL: "CP_RUN_OPENCL", CP_EXEC_CS: "CP_EXEC_CS", CP_LOAD_STATE6_FRAG: "CP_LOAD_STATE6_FRAG",
                CP_WAIT_REG_MEM: "CP_WAIT_REG_MEM", CP_REG_TO_MEM: "CP_REG_TO_MEM", CP_EVENT_WRITE: "CP_EVENT_WRITE",
                CP_SET_MARKER: "CP_SET_MARKER"}

#: A6xx registers (dword offsets) of the compute state
REG_CP_ALWAYS_ON_COUNTER = 0x0980
REG_SP_CS_CNTL_0 = 0xA9B0  # then CNTL_1, BOOLEAN_CF_MASK, PROGRAM_COUNTER_OFFSET, BASE (64), PVT_MEM_PARAM, PVT_MEM_BASE (64), PVT_MEM_SIZE
REG_SP_CS_PROGRAM_COUNTER_OFFSET = 0xA9B3
REG_SP_CS_BASE = 0xA9B4
REG_SP_CS_PVT_MEM_PARAM = 0xA9B6
REG_SP_CS_PVT_MEM_BASE = 0xA9B7
REG_SP_CS_PVT_MEM_SIZE = 0xA9B9
REG_SP_CS_TSIZE = 0xA9BA
REG_SP_CS_CONFIG = 0xA9BB
REG_SP_CS_INSTR_SIZE = 0xA9BC
REG_SP_CS_PVT_MEM_STACK_OFFSET = 0xA9BD
REG_SP_CS_SAMPLER_BASE = 0xA9E2
REG_SP_CS_TEXMEMOBJ_BASE = 0xA9E6
REG_SP_CS_UAV_BASE = 0xA9F2
REG_SP_CS_USIZE = 0xAA00
REG_SP_MODE_CNTL = 0xAB00
REG_SP_PERFCTR_SHADER_MASK = 0xAE0F
REG_TPL1_CS_BORDER_COLOR_BASE = 0xB180
REG_TPL1_MODE_CNTL = 0xB309
REG_TPL1_DBG_ECO_CNTL = 0xB600
REG_SP_REG_PROG_ID_0 = 0xB983  # then PROG_ID_1..3 and SP_CS_CONST_CONFIG
REG_SP_CS_CONST_CONFIG = 0xB987
REG_SP_CS_NDRANGE_0 = 0xB990  # then NDRANGE_1..6, CONST_CONFIG_0, WGE_CNTL, KERNEL_GROUP_X/Y/Z
REG_SP_CS_CONST_CONFIG_0 = 0xB997
REG_SP_CS_WGE_CNTL = 0xB998
REG_SP_CS_KERNEL_GROUP_X = 0xB999
REG_SP_UPDATE_CNTL = 0xBB08

#: register -> (name, how many consecutive dwords a write may cover from it)
COMPUTE_REGISTERS: dict[int, tuple[str, int]] = {
    REG_SP_CS_CNTL_0: ("SP_CS_CNTL_0", 10), REG_SP_CS_TSIZE: ("SP_CS_TSIZE", 1), REG_SP_CS_CONFIG: ("SP_CS_CONFIG", 1),
    REG_SP_CS_INSTR_SIZE: ("SP_CS_INSTR_SIZE", 1), REG_SP_CS_PVT_MEM_STACK_OFFSET: ("SP_CS_PVT_MEM_STACK_OFFSET", 1),
    REG_SP_CS_SAMPLER_BASE: ("SP_CS_SAMPLER_BASE", 2), REG_SP_CS_TEXMEMOBJ_BASE: ("SP_CS_TEXMEMOBJ_BASE", 2),
    REG_SP_CS_UAV_BASE: ("SP_CS_UAV_BASE", 2), REG_SP_CS_USIZE: ("SP_CS_USIZE", 1), REG_SP_MODE_CNTL: ("SP_MODE_CNTL", 1),
    REG_SP_PERFCTR_SHADER_MASK: ("SP_PERFCTR_SHADER_MASK", 1), REG_TPL1_CS_BORDER_COLOR_BASE: ("TPL1_CS_BORDER_COLOR_BASE", 2),
    REG_TPL1_MODE_CNTL: ("TPL1_MODE_CNTL", 1), REG_TPL1_DBG_ECO_CNTL: ("TPL1_DBG_ECO_CNTL", 1),
    REG_SP_REG_PROG_ID_0: ("SP_REG_PROG_ID_0", 5), REG_SP_CS_CONST_CONFIG_0: ("SP_CS_CONST_CONFIG_0", 2),
    REG_SP_CS_NDRANGE_0: ("SP_CS_NDRANGE_0", 12), REG_SP_UPDATE_CNTL: ("SP_UPDATE_CNTL", 1),
}

# field layouts: (shift) or single-bit flags
SP_UPDATE_CNTL_CS_STATE, SP_UPDATE_CNTL_CS_UAV = 0x20, 0x40
SP_MODE_CNTL_CONSTANT_DEMOTION_ENABLE, SP_MODE_CNTL_ISAMMODE_SHIFT = 0x1, 1
TPL1_MODE_CNTL_ISAMMODE_SHIFT = 0
ISAMMODE_CL, ISAMMODE_GL = 1, 2
SP_PERFCTR_SHADER_MASK_CS = 0x20
NDRANGE_0_KERNELDIM_SHIFT, NDRANGE_0_LOCALSIZEX_SHIFT, NDRANGE_0_LOCALSIZEY_SHIFT, NDRANGE_0_LOCALSIZEZ_SHIFT = 0, 2, 12, 22
CS_CNTL_0_HALFREGFOOTPRINT_SHIFT, CS_CNTL_0_FULLREGFOOTPRINT_SHIFT, CS_CNTL_0_BRANCHSTACK_SHIFT = 1, 7, 14
CS_CNTL_0_THREADSIZE_SHIFT, THREAD64 = 20, 0
CS_CNTL_1_SHARED_SIZE_SHIFT, CS_CNTL_1_CONSTANTRAMMODE_SHIFT, CONSTLEN_256 = 0, 5, 2
CS_CONFIG_ENABLED, CS_CONFIG_NTEX_SHIFT, CS_CONFIG_NSAMP_SHIFT, CS_CONFIG_NUAV_SHIFT = 0x100, 9, 17, 22
CS_CONST_CONFIG_ENABLED, CS_CONST_CONFIG_CONSTLEN_MASK = 0x100, 0xFF
CONST_CONFIG_0_WGID_SHIFT, CONST_CONFIG_0_WGSIZE_SHIFT, CONST_CONFIG_0_WGOFFSET_SHIFT, CONST_CONFIG_0_LOCALID_SHIFT = 0, 8, 16, 24
WGE_CNTL_THREADSIZE_SHIFT = 9
INVALID_REGID = 0xFC  # "no register / no constant" in the *REGID and *CONSTID fields
#: SP_CS_CONST_CONFIG_0 of an OpenCL (non-NIR) program: the work-group id and local id live in fixed registers
CL_CONST_CONFIG_0 = 0xCCC0CF

#: CP_SET_MARKER
SET_MARKER_MODE_SHIFT, RM6_COMPUTE = 0, 8
#: CP_EVENT_WRITE events
CACHE_FLUSH_TS, CACHE_INVALIDATE = 0x04, 0x31
#: CP_WAIT_REG_MEM
WAIT_REG_MEM_FUNCTION_SHIFT, WAIT_REG_MEM_POLL_SHIFT, WRITE_GE, POLL_MEMORY = 0, 4, 5, 1
#: CP_REG_TO_MEM
REG_TO_MEM_REG_MASK, REG_TO_MEM_CNT_SHIFT, REG_TO_MEM_64B = 0x3FFFF, 18, 0x40000000
#: CP_LOAD_STATE6 word 0
LOAD_STATE6_STATE_TYPE_SHIFT, LOAD_STATE6_STATE_SRC_SHIFT, LOAD_STATE6_STATE_BLOCK_SHIFT, LOAD_STATE6_NUM_UNIT_SHIFT = 14, 16, 18, 22
LOAD_STATE6_NUM_UNIT_MAX = 0x3FF
ST6_SHADER, ST6_CONSTANTS, ST6_UAV = 0, 1, 3
SS6_INDIRECT = 2
SB6_CS_TEX, SB6_CS_SHADER = 5, 13
CONSTANT_UNIT, SHADER_UNIT = 16, 128  # bytes per LOAD_STATE6 unit: a vec4 of constants, 16 instructions of 8 bytes

#: texture / sampler descriptors
TEX_CONST_0_SWIZ_SHIFTS, TEX_CONST_0_FMT_SHIFT, TEX_CONST_0_TILE_MODE_SHIFT = (4, 7, 10, 13), 22, 0
TEX_CONST_1_WIDTH_SHIFT, TEX_CONST_1_HEIGHT_SHIFT = 0, 15
TEX_CONST_2_PITCHALIGN_SHIFT, TEX_CONST_2_PITCH_SHIFT, TEX_CONST_2_TYPE_SHIFT = 0, 7, 29
TEX_CONST_6_PLANE_PITCH_SHIFT = 8
A6XX_TEX_2D = 1
FMT6_16_16_16_16_FLOAT, FMT6_32_32_32_32_FLOAT = 98, 130
TEX_SAMP_0_WRAP_S_SHIFT, TEX_SAMP_0_WRAP_T_SHIFT, TEX_SAMP_0_WRAP_R_SHIFT, A6XX_TEX_CLAMP_TO_BORDER = 5, 8, 11, 3
TEX_SAMP_1_CUBEMAPSEAMLESSFILTOFF, TEX_SAMP_1_UNNORM_COORDS = 0x10, 0x20


def parity(value: int) -> int:
    """The CP's odd-parity bit of `value`: 1 when `value` has an even number of set bits."""
    return (value.bit_count() & 1) ^ 1


def pkt4(register: int, *values: Word) -> list[Word]:
    """A type-4 packet: write `values` to consecutive registers starting at `register`."""
    count = dwords(values)
    if not 1 <= count <= PKT4_MAX_COUNT:
        raise ValueError(f"a type-4 packet writes 1..{PKT4_MAX_COUNT} registers, not {count}")
    if not 0 <= register <= 0x3FFFF:
        raise ValueError(f"register {register:#x} does not fit the 18-bit offset field")
    return [TYPE4 << 28 | count | parity(count) << 7 | register << 8 | parity(register) << 27, *values]


def pkt7(opcode: int, *body: Word) -> list[Word]:
    """A type-7 packet: command `opcode` with `body`."""
    count = dwords(body)
    if count > PKT7_MAX_COUNT:
        raise ValueError(f"a type-7 packet body has at most {PKT7_MAX_COUNT} dwords, not {count}")
    if not 0 <= opcode <= 0x7F:
        raise ValueError(f"opcode {opcode:#x} does not fit 7 bits")
    return [TYPE7 << 28 | count | parity(count) << 15 | opcode << 16 | parity(opcode) << 23, *body]


def load_state6(state_type: int, state_block: int, num_unit: int, address: int | Sym) -> list[Word]:
    """CP_LOAD_STATE6_FRAG from memory (indirect): `num_unit` units of state `state_type` into `state_block`."""
    if not 0 < num_unit <= LOAD_STATE6_NUM_UNIT_MAX:
        raise ValueError(f"CP_LOAD_STATE6 loads 1..{LOAD_STATE6_NUM_UNIT_MAX} units, not {num_unit}")
    word0 = (state_type << LOAD_STATE6_STATE_TYPE_SHIFT | SS6_INDIRECT << LOAD_STATE6_STATE_SRC_SHIFT
             | state_block << LOAD_STATE6_STATE_BLOCK_SHIFT | num_unit << LOAD_STATE6_NUM_UNIT_SHIFT)
    return pkt7(CP_LOAD_STATE6_FRAG, word0, *qword(address))


def event_write(event: int, address: int | Sym | None = None, value: Word | None = None) -> list[Word]:
    """CP_EVENT_WRITE `event`; a timestamped event (CACHE_FLUSH_TS) writes `value` to `address` once reached."""
    body: list[Word] = [event]
    if address is not None:
        body += [*qword(address), 0 if value is None else value]
    return pkt7(CP_EVENT_WRITE, *body)


def wait_reg_mem(address: int | Sym, reference: Word, *, mask: int = 0xFFFFFFFF, delay_loop_cycles: int = 32) -> list[Word]:
    """CP_WAIT_REG_MEM: stall until `(mem32[address] & mask) >= reference`."""
    info = WRITE_GE << WAIT_REG_MEM_FUNCTION_SHIFT | POLL_MEMORY << WAIT_REG_MEM_POLL_SHIFT
    return pkt7(CP_WAIT_REG_MEM, info, *qword(address), reference, mask, delay_loop_cycles)


def reg_to_mem(register: int, count: int, address: int | Sym) -> list[Word]:
    """CP_REG_TO_MEM: copy `count` dwords of registers from `register` to `address` (as one 64-bit value when 2)."""
    return pkt7(CP_REG_TO_MEM, register | count << REG_TO_MEM_CNT_SHIFT | (REG_TO_MEM_64B if count == 2 else 0), *qword(address))

