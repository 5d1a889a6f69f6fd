"""RDNA3 (gfx11: gfx1100-gfx1103, gfx1150/1151) instruction builders: one function per LLVM mnemonic, plus register files and special operands.

    from amd_isa.rdna3 import *
    inst = s_mov_b32(s[0], 0x3c003c00)
"""

from .dsl import make_builders, make_specials
from .operands import (
    EXEC,
    EXEC_HI,
    EXEC_LO,
    EXECZ,
    INV_2PI,
    M0,
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
    a,
    s,
    ttmp,
    v,
)

BUILDERS = make_builders("rdna3")
globals().update(BUILDERS)
# Every named scalar operand of this architecture, so repr() output evaluates in this module.
SPECIAL_OPERANDS = make_specials("rdna3")
globals().update(SPECIAL_OPERANDS)

__all__ = [
    "s", "v", "a", "ttmp", "Lit", "VCC", "VCC_LO", "VCC_HI", "EXEC", "EXEC_LO", "EXEC_HI", "M0", "NULL", "OFF", "SCC", "VCCZ", "EXECZ",
    "SRC_LDS_DIRECT", "SHARED_BASE", "SHARED_LIMIT", "PRIVATE_BASE", "PRIVATE_LIMIT", "POPS_EXITING_WAVE_ID", "INV_2PI", "BUILDERS",
    *BUILDERS,
    *SPECIAL_OPERANDS,
]
