"""Operand values of the instruction DSL: registers, register files with slices, special registers and constants."""

import math
import struct
from dataclasses import dataclass, replace
from functools import cache

from .errors import EncodeError

# Inline float constants of the 9-bit source field (code -> value). 248 is 1/(2*pi).
INLINE_FLOATS: dict[int, float] = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0}
INV_2PI_CODE = 248  # the source code of the inline constant 1/(2*pi)
LITERAL = 255
VGPR_BASE = 256
TTMP_BASE = 108


@dataclass(frozen=True)
class Reg:
    """`count` consecutive registers of file `kind` ("s", "v", "a", "ttmp") starting at `index`, with source modifiers.

    `half` is "h" or "l" for one 16-bit half of a VGPR (`v3.h`, `v3.l`: LLVM's true16 spelling); only RDNA (gfx11, gfx12)
    VOP1/VOP2/VOPC encodings address high halves directly. A plain VGPR in a 16-bit operand is its low half.
    """

    kind: str
    index: int
    count: int = 1
    neg: bool = False
    abs: bool = False
    half: str = ""

    def __neg__(self) -> "Reg":
        return replace(self, neg=not self.neg)

    def __abs__(self) -> "Reg":
        return replace(self, abs=True)

    @property
    def h(self) -> "Reg":
        """The high 16-bit half of this VGPR (`v[3].h` is `v3.h`)."""
        return replace(self, half="h")

    @property
    def l(self) -> "Reg":  # noqa: E743 - LLVM's name for the low half
        """The low 16-bit half of this VGPR (`v3.l`, the same as `v3` in a 16-bit operand)."""
        return replace(self, half="l")

    @property
    def hi(self) -> bool:
        """Whether this names the high 16-bit half of a VGPR."""
        return self.half == "h"

    def __str__(self) -> str:
        # kept after the first call (outside the fields: equality, hashing and replace() never see it)
        text = self.__dict__.get("_text")
        if text is None:
            text = f"{self.kind}{self.index}" if self.count == 1 else f"{self.kind}[{self.index}:{self.index + self.count - 1}]"
            text += f".{self.half}" if self.half else ""
            if self.abs:
                text = f"|{text}|"
            text = f"-{text}" if self.neg else text
            object.__setattr__(self, "_text", text)
        return text

    def __repr__(self) -> str:
        text = f"{self.kind}[{self.index}]" if self.count == 1 else f"{self.kind}[{self.index}:{self.index + self.count - 1}]"
        text += f".{self.half}" if self.half else ""
        if self.abs:
            text = f"abs({text})"
        return f"-{text}" if self.neg else text


@cache
def plain_reg(kind: str, index: int, count: int = 1) -> Reg:
    """`Reg(kind, index, count)` without modifiers, one shared object per value (Reg is immutable; decoding makes
    millions of them and a frozen dataclass costs about a microsecond to build)."""
    return Reg(kind, index, count)


class RegFile:
    """A register file: `v[3]` is one register, `v[0:7]` is eight (the slice end is inclusive, as in LLVM syntax)."""

    def __init__(self, kind: str, size: int):
        self.kind = kind
        self.size = size

    def __getitem__(self, key: int | slice) -> Reg:
        if isinstance(key, slice):
            if key.start is None or key.stop is None or key.step is not None:
                raise EncodeError(f"register range {self.kind}[{key.start}:{key.stop}] needs a start and an inclusive end, like {self.kind}[0:3]")
            start, count = key.start, key.stop - key.start + 1
        else:
            start, count = key, 1
        if not (0 <= start and count >= 1 and start + count <= self.size):
            raise EncodeError(f"register {self.kind}[{key}] is out of range 0..{self.size - 1}")
        return Reg(self.kind, start, count)

    def __repr__(self) -> str:
        return self.kind


s = RegFile("s", 106)
v = RegFile("v", 256)
a = RegFile("a", 256)
ttmp = RegFile("ttmp", 16)


@dataclass(frozen=True)
class Special:
    """A named scalar operand with a fixed source code (VCC, EXEC, M0, NULL, SCC, ...); `count` is 2 for 64-bit views."""

    name: str
    code: int
    count: int = 1
    neg: bool = False
    abs: bool = False
    py: str = ""  # Python spelling for repr() when it is not the upper-cased name

    def __neg__(self) -> "Special":
        return replace(self, neg=not self.neg)

    def __abs__(self) -> "Special":
        return replace(self, abs=True)

    def __str__(self) -> str:
        text = f"|{self.name}|" if self.abs else self.name
        if self.neg and not self.abs and self.name[0].isdigit():  # 1/(2pi): "-0.159..." would read as a literal
            return f"neg({text})"
        return f"-{text}" if self.neg else text

    def __repr__(self) -> str:
        base = self.py or self.name.upper()
        text = f"abs({base})" if self.abs else base
        return f"-{text}" if self.neg else text


VCC_LO, VCC_HI, VCC = Special("vcc_lo", 106), Special("vcc_hi", 107), Special("vcc", 106, 2)
EXEC_LO, EXEC_HI, EXEC = Special("exec_lo", 126), Special("exec_hi", 127), Special("exec", 126, 2)
NULL, M0 = Special("null", 124), Special("m0", 125)
SCC, VCCZ, EXECZ = Special("src_scc", 253), Special("src_vccz", 251), Special("src_execz", 252)
SRC_LDS_DIRECT = Special("src_lds_direct", 254)
SHARED_BASE, SHARED_LIMIT = Special("src_shared_base", 235), Special("src_shared_limit", 236)
PRIVATE_BASE, PRIVATE_LIMIT = Special("src_private_base", 237), Special("src_private_limit", 238)
POPS_EXITING_WAVE_ID = Special("src_pops_exiting_wave_id", 239)
OFF = Special("off", 124)
# 1/(2*pi) is an inline constant; LLVM spells it with the precision of the operand.
INV_2PI = Special("0.15915494", 248, py="INV_2PI")
INV_2PI_64 = Special("0.15915494309189532", 248, 2, py="INV_2PI")
SPECIALS = [INV_2PI, VCC_LO, VCC_HI, VCC, EXEC_LO, EXEC_HI, EXEC, NULL, M0, SCC, VCCZ, EXECZ, SRC_LDS_DIRECT, SHARED_BASE, SHARED_LIMIT,
            PRIVATE_BASE, PRIVATE_LIMIT, POPS_EXITING_WAVE_ID]


@dataclass(frozen=True)
class Sym:
    """An immediate given as its raw encoded value with its LLVM spelling (hwreg(...), vmcnt(0), sendmsg(...), ...)."""

    value: int
    text: str

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"{self.value:#x}" if self.value > 9 else str(self.value)


@dataclass(frozen=True)
class Lit:
    """A constant forced into the 32-bit literal slot (even when it would fit an inline constant)."""

    value: int

    def __repr__(self) -> str:
        return f"Lit({self.value:#x})"


Operand = Reg | Special | Sym | Lit | int | float


def float_bits(value: float, fmt: str) -> int:
    """The literal encoding of a float for an operand of data format `fmt` (64-bit floats keep their high dword)."""
    if "BF16" in fmt:  # rounded to nearest even, as LLVM converts it (10.1 -> 0x4122)
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        return bits >> 16 if math.isnan(value) else ((bits + 0x7FFF + (bits >> 16 & 1)) >> 16) & 0xFFFF
    if "F16" in fmt and "F32" not in fmt:
        return struct.unpack("<H", struct.pack("<e", value))[0]
    if "F64" in fmt:
        return struct.unpack("<Q", struct.pack("<d", value))[0] >> 32
    return struct.unpack("<I", struct.pack("<f", value))[0]


def inline_int_code(value: int) -> int | None:
    """The inline-constant source code of an integer, or None if it needs a literal."""
    if 0 <= value <= 64:
        return 128 + value
    if -16 <= value <= -1:
        return 192 - value
    return None


def inline_float_code(value: float) -> int | None:
    """The inline-constant source code of a float, or None if it needs a literal. +0.0 is the integer constant 0 (as
    in LLVM); -0.0 is not inline."""
    if value == 0.0 and math.copysign(1.0, value) > 0:
        return 128
    for code, inline in INLINE_FLOATS.items():
        if value == inline:
            return code
    return 248 if math.isclose(value, 1 / (2 * math.pi), rel_tol=1e-7) else None
