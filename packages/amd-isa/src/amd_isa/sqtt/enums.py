"""Enumerations carried in SQTT packet fields: instruction kinds and execution units.

Values are hardware facts taken from the seed decoder (tinygrad's `renderer/amd/sqtt.py`). A field holding a value
that is not listed here still decodes (as a plain int); `op_name` gives it a readable name.
"""

from enum import IntEnum


class MemSrc(IntEnum):
    """Memory pipe named by a VMEMEXEC packet."""

    LDS = 0
    LDS_ALT = 1
    VMEM = 2
    VMEM_ALT = 3


class AluSrc(IntEnum):
    """ALU pipe named by an ALUEXEC packet."""

    NONE = 0
    SALU = 1
    VALU = 2
    VALU_SALU = 3


class InstOp(IntEnum):
    """Instruction kind of an RDNA3 INST packet (ops issued on other SIMDs are the OTHER_* ranges, see `op_name`)."""

    SALU = 0x0
    SMEM_RD = 0x1
    JUMP = 0x3  # branch taken
    JUMP_NO = 0x4  # branch not taken
    CALL = 0x5
    MESSAGE = 0x9
    VALUT_4 = 0xB  # transcendental VALU
    VALUB_2 = 0xD  # 64-bit shifts
    VALUB_4 = 0xE  # 64-bit multiply-add
    VALUB_16 = 0xF  # other 64-bit VALU
    VINTERP = 0x12
    BARRIER = 0x13
    FLAT_RD_2 = 0x1C
    FLAT_WR_3 = 0x1D
    FLAT_WR_4 = 0x1E
    FLAT_WR_5 = 0x1F
    FLAT_WR_6 = 0x20
    SGMEM_RD_1 = 0x21
    SGMEM_RD_2 = 0x22
    SGMEM_WR_2 = 0x24
    SGMEM_WR_3 = 0x25
    SGMEM_WR_4 = 0x26
    SGMEM_WR_5 = 0x27
    SGMEM_WR_6 = 0x28
    LDS_RD = 0x29
    LDS_WR_1 = 0x2A
    LDS_WR_2 = 0x2B
    LDS_WR_3 = 0x2C
    LDS_WR_4 = 0x2D
    LDS_WR_5 = 0x2E
    SALU_WR_EXEC = 0x72
    VALU1_WR_EXEC = 0x73


class InstOpRDNA4(IntEnum):
    """Instruction kind of an RDNA4 INST packet (a different numbering from RDNA3)."""

    SALU = 0x0
    SMEM = 0x1
    SMEM_WR = 0x2
    JUMP = 0x3
    JUMP_NO = 0x4
    CALL = 0x5
    SALU_NO_EXEC = 0x7
    MESSAGE = 0x9
    VALU_1 = 0xA
    VALUT_4 = 0xB
    VALUB_1 = 0xC
    VALUB_2 = 0xD
    VALUB_4 = 0xE
    VALUB_16 = 0xF
    VINTERP = 0x12
    BARRIER_WAIT = 0x13
    FLAT_RD_2 = 0x1C
    FLAT_WR_3 = 0x1D
    FLAT_WR_4 = 0x1E
    FLAT_WR_5 = 0x1F
    FLAT_WR_6 = 0x20
    VMEM_RD_1 = 0x21
    VMEM_RD_2 = 0x22
    VMEM_WR_1 = 0x23
    VMEM_WR_2 = 0x24
    VMEM_WR_3 = 0x25
    VMEM_WR_4 = 0x26
    VMEM_WR_5 = 0x27
    VMEM_WR_6 = 0x28
    LDS_RD = 0x29
    LDS_WR_1 = 0x2A
    LDS_WR_2 = 0x2B
    LDS_WR_3 = 0x2C
    LDS_WR_4 = 0x2D
    LDS_WR_5 = 0x2E
    BUF_RD_1 = 0x2F
    BUF_RD_2 = 0x30
    BUF_WR_1 = 0x31
    BUF_WR_2 = 0x32
    BUF_WR_3 = 0x33
    BUF_WR_4 = 0x34
    BUF_WR_5 = 0x35
    BUF_WR_6 = 0x36
    LDS_DIR_LOAD = 0x6E
    LDS_PARAM_LOAD = 0x6F
    SALU_WR_EXEC = 0x72
    VALU1_WR_EXEC = 0x73
    VALU_WR_EXEC_2 = 0x74
    OTHER_LDS_6 = 0x77
    OTHER_LDS_10 = 0x78
    BARRIER_SIGNAL = 0x7A
    DYN_VGPR = 0x87
    BARRIER_JOIN = 0x8A
    WMMA_8 = 0x8C
    WMMA_16 = 0x8D
    WMMA_32 = 0x8E
    WMMA_64 = 0x8F
    VALU_DPFP = 0x92
    SALU_FLOAT_3 = 0x98
    VALU_SCL_TRANS = 0x99
    SALU_2 = 0x9B
    SALU_5 = 0x9C


class InstOpCDNA(IntEnum):
    """Instruction kind of a CDNA_INST packet."""

    SMEM_RD = 0
    SALU_32 = 1
    VMEM_RD = 2
    VMEM_WR = 3
    FLAT_WR = 4
    VALU_32 = 5
    LDS = 6
    PC = 7
    JUMP = 12
    NEXT = 13
    FLAT_RD = 14
    OTHER_MSG = 15
    SMEM_WR = 16
    SALU_64 = 17
    VALU_64 = 18
    VALU_MAI = 28


# Memory ops executed for a wave on another SIMD: (category, first value, last value, cycles of the first value).
# The name is OTHER_{category}_{cycles}, cycles counting up from the first value of the range.
_OTHER_SIMD_RANGES: dict[type[IntEnum], tuple[tuple[str, int, int, int], ...]] = {
    InstOp: (("LDS", 0x50, 0x54, 1), ("FLAT", 0x55, 0x59, 2), ("VMEM", 0x5A, 0x66, 1)),
    InstOpRDNA4: (("LDS", 0x50, 0x54, 1), ("FLAT", 0x55, 0x59, 2), ("VMEM", 0xBC, 0xDD, 1)),
    InstOpCDNA: (),
}


def op_name(enum_cls: type[IntEnum], value: int) -> str:
    """The name of an instruction kind: the enum member, an OTHER_* range name, or hex when the value is unknown."""
    try:
        return enum_cls(value).name
    except ValueError:
        pass
    for category, first, last, base_cycles in _OTHER_SIMD_RANGES.get(enum_cls, ()):
        if first <= value <= last:
            return f"OTHER_{category}_{value - first + base_cycles}"
    return f"0x{value:02x}"
