"""CDNA (gfx90a, gfx940-gfx942, gfx950) instruction builders: one function per LLVM mnemonic, plus register files and special operands.

    from amd_isa.cdna import *
    inst = s_mov_b32(s[0], 0x3c003c00)
"""

from .dsl import make_builders, make_specials
from .operands import (
    EXEC,
    EXEC_HI,
    EXEC_LO,
    EXECZ,
    INV_2PI,
    NULL,
    OFF,
    POPS_EXITING_WAVE_ID,
    PRIVATE_BASE,
    PRIVATE_LIMIT,
    SCC,
    SHARED_BASE,
    SHARED_LIMIT,
    SRC_LDS_DIRECT,
    VCC,
    VCC_HI,
    VCC_LO,
    VCCZ,
    Lit,
    Special,
    a,
    s,
    ttmp,
    v,
)

# gfx9 numbers M0 124 (where gfx10+ has NULL), and FLAT_SCRATCH / XNACK_MASK take 102-105.
M0 = Special("m0", 124)
FLAT_SCRATCH = Special("flat_scratch", 102, 2)
XNACK_MASK = Special("xnack_mask", 104, 2)
BUILDERS = make_builders("cdna")
globals().update(BUILDERS)
# Every named scalar operand of this architecture, so repr() output evaluates in this module.
SPECIAL_OPERANDS = make_specials("cdna")
globals().update(SPECIAL_OPERANDS)

__all__ = [
    "s", "v", "a", "ttmp", "Lit", "VCC", "VCC_LO", "VCC_HI", "EXEC", "EXEC_LO", "EXEC_HI", "M0", "NULL", "OFF", "SCC", "VCCZ", "EXECZ",
    "SRC_LDS_DIRECT", "SHARED_BASE", "SHARED_LIMIT", "PRIVATE_BASE", "PRIVATE_LIMIT", "POPS_EXITING_WAVE_ID", "INV_2PI", "BUILDERS",
    "FLAT_SCRATCH", "XNACK_MASK",
    *BUILDERS,
    *SPECIAL_OPERANDS,
]
