"""Shared pieces of the per-format syntax: turning raw field values into operand values and back.

Each format module pairs a `split_*` function (Inst -> mnemonic, operands, modifiers) with a `join_*` function
(operands, modifiers -> field values); the printer, the DSL builders and the assembler all go through them.
"""

from dataclasses import dataclass

from .arch import Arch
from .errors import EncodeError
from .operands import (
    INLINE_FLOATS,
    INV_2PI,
    INV_2PI_64,
    INV_2PI_CODE,
    LITERAL,
    TTMP_BASE,
    VGPR_BASE,
    Lit,
    Operand,
    Reg,
    Special,
    Sym,
    float_bits,
    inline_float_code,
    inline_int_code,
    plain_reg,
)

# CDNA4's MFMA scale load: the first word of a scaled-MFMA (VOP3PX2) pair.
SCALE_LOAD = "v_mfma_ld_scale_b32"


def x2_prefix(arch: Arch) -> int:
    """Bits 31:16 of a VOP3PX2 pair: the VOP3P encoding and the opcode of v_mfma_ld_scale_b32 (0xd3ac on CDNA4)."""
    _, lo, value = arch.formats["VOP3P"]["encoding"]
    op_lo = arch.formats["VOP3P"]["fields"]["op"][1]
    scale_op = next(code for code, (name, _) in arch.ops["VOP3P"].items() if name == SCALE_LOAD)
    return (value << (lo - 16)) | (scale_op << (op_lo - 16))


def reg_count(bits: int) -> int:
    """Registers (dwords) an operand of `bits` bits occupies."""
    return (bits + 31) // 32 or 1


class Draft:
    """An instruction being built: arch, format, opcode and the field values, literal and variant collected so far."""

    __slots__ = ("arch", "fmt", "op", "name", "info", "fields", "literal", "variant")

    def __init__(self, arch: Arch, fmt: str, op: int, name: str, info: dict[str, tuple[int, str, str]], fields: dict[str, int] | None = None,
                 literal: int | None = None, variant: str = ""):
        self.arch, self.fmt, self.op, self.name, self.info = arch, fmt, op, name, info
        self.fields: dict[str, int] = {} if fields is None else fields
        self.literal = literal
        self.variant = variant

    def __repr__(self) -> str:
        return f"Draft({self.name}, fields={self.fields}, literal={self.literal}, variant={self.variant!r})"

    def bits(self, name: str, default: int = 32) -> int:
        """Width in bits of an operand field of this opcode."""
        return self.info[name][0] if name in self.info else default

    def dfmt(self, name: str) -> str:
        """Data format (F32, B64, PK2_F16, ...) of an operand field of this opcode."""
        return self.info[name][2] if name in self.info else "B32"

    def set_literal(self, value: int) -> int:
        """Claim the literal dword for `value`; returns the literal source code. Two different literals cannot share it."""
        value &= 0xFFFFFFFF
        if self.literal is not None and self.literal != value:
            raise EncodeError(f"{self.name}: only one literal constant fits, got {self.literal:#x} and {value:#x}")
        self.literal = value
        return LITERAL


_SCALARS: dict[tuple[str, int, int], Reg | Special] = {}


def scalar_operand(arch: Arch, code: int, count: int) -> Reg | Special:
    """The operand named by a scalar register code (SGPR, TTMP or special register). A 64-bit or wider operand names
    an aligned range: LLVM reads an odd code as the aligned pair (s[104:105] for 105), and a code inside a range of
    three or more as the 4-aligned range (s[72:75] for 74), as the hardware does.
    Operands are immutable: each (tables, code, count) is built once (an Arch's key names its register spellings)."""
    key = (arch.key, code, count)
    ret = _SCALARS.get(key)
    if ret is None:
        ret = _SCALARS[key] = _scalar_operand(arch, code, count)
    return ret


def _scalar_operand(arch: Arch, code: int, count: int) -> Reg | Special:
    if count >= 2 and (code < arch.num_sgprs or TTMP_BASE <= code < TTMP_BASE + 16):
        code &= ~1 if count == 2 else ~3
    if code < arch.num_sgprs:
        return Reg("s", code, count)
    if TTMP_BASE <= code < TTMP_BASE + 16:
        return Reg("ttmp", code - TTMP_BASE, count)
    if count >= 2 and code in arch.wide_special:
        return Special(arch.wide_special[code], code, count)
    if code in arch.special:
        return Special(arch.special[code], code, count)
    return Special(f"src_{code}", code, count, py=f"Sym({code}, 'src_{code}')")


def decode_src(arch: Arch, code: int, bits: int, literal: int | None) -> Operand:
    """The operand a 9-bit source code denotes, for an operand of `bits` bits."""
    count = reg_count(bits)
    if code >= VGPR_BASE:
        return plain_reg("v", code - VGPR_BASE, count)
    if 128 <= code <= 192:
        return code - 128
    if 193 <= code <= 208:
        return 192 - code
    if code in INLINE_FLOATS:
        return INLINE_FLOATS[code]
    if code == INV_2PI_CODE:
        return INV_2PI_64 if bits == 64 else INV_2PI
    if code == LITERAL:
        return Lit(literal if literal is not None else 0)
    return scalar_operand(arch, code, count)


def encode_scalar(arch: Arch, what: str, operand: Operand) -> int:
    """The register code of a scalar operand (SGPR, TTMP or special register)."""
    if isinstance(operand, Reg):
        if operand.count > 1 and operand.kind in ("s", "ttmp") and operand.index % (align := min(1 << (operand.count - 1).bit_length(), 4)):
            # LLVM: invalid register alignment (the encodings address pairs by even and wider ranges by 4-aligned codes)
            raise EncodeError(f"{what}: {operand} is misaligned: a range of {operand.count} scalar registers must start at a multiple of {align}")
        if operand.kind == "s":
            if operand.index + operand.count > arch.num_sgprs:
                raise EncodeError(f"{what}: {operand} is beyond the {arch.num_sgprs} SGPRs of {arch.name}")
            return operand.index
        if operand.kind == "ttmp":
            return TTMP_BASE + operand.index
        raise EncodeError(f"{what}: expected a scalar register, got {operand}")
    if isinstance(operand, Special):
        return operand.code
    if isinstance(operand, Sym):
        return operand.value
    raise EncodeError(f"{what}: expected a scalar register, got {operand!r}")


def _short_literal(draft: Draft, what: str) -> bool:
    """A vector 16-bit operand's literal is the low half of the literal dword; scalar ops read their 16-bit operands
    from a full 32-bit literal, which LLVM keeps whole (s_pack_ll_b32_b16 s0, 0xaf123456, s2)."""
    return draft.bits(what) == 16 and not draft.fmt.startswith("SOP")


# formats whose operand widths the tables fix (a memory instruction's address and data widths depend on its modifiers:
# image dmask/dim/d16/tfe, buffer idxen/offen, flat saddr, atomic returns)
TABLE_WIDTHS = frozenset(("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P", "SOP1", "SOP2", "SOPC", "SOPK"))


def check_width(draft: Draft, what: str, operand: object) -> None:
    """A register range must be as wide as the operand field it goes to (v[0:1] for a 64-bit source, one register for a
    32-bit one), as LLVM requires ("invalid operand for instruction"): `v_add_f64 v0, v2, v4` names 64-bit values by
    their first register only."""
    if type(operand) is Reg and ((info := draft.info.get(what)) is None or operand.count == reg_count(info[0])):
        return  # the usual case, asked first: a register as wide as its field
    if draft.fmt not in TABLE_WIDTHS or "f8f6f4" in draft.name:  # f8f6f4 MFMA sources: cbsz/blgp set the width
        return
    if type(operand) is Special and operand.count == 2 and (info := draft.info.get(what)) is not None and reg_count(info[0]) == 1 \
            and info[2] != "M64":  # exec, vcc, ... for a 32-bit operand: exec_lo, vcc_lo (LLVM: invalid operand)
        raise EncodeError(f"{draft.name}: {what} is 32 bits wide, got the 64-bit {operand}")
    if type(operand) is Reg and (info := draft.info.get(what)) is not None and operand.count != (want := reg_count(info[0])):
        example = f"{operand.kind}{operand.index}" if want == 1 else f"{operand.kind}[{operand.index}:{operand.index + want - 1}]"
        raise EncodeError(f"{draft.name}: {what} is {info[0]} bits wide, {want} register(s) such as {example}; got {operand}")


def encode_src(draft: Draft, what: str, operand: Operand, allow_literal: bool = True) -> int:
    """The 9-bit source code of an operand; a constant that is not inline goes to the draft's literal."""
    if type(operand) is Reg:
        if operand.kind in ("v", "a"):
            return VGPR_BASE + encode_vgpr(draft, what, operand)  # width and half checked there
        check_width(draft, what, operand)
    elif type(operand) is Special and operand.count == 2:
        check_width(draft, what, operand)
    if isinstance(operand, Reg | Special | Sym):
        return encode_scalar(draft.arch, what, operand)
    if isinstance(operand, Lit):
        if not allow_literal:
            raise EncodeError(f"{draft.name}: {what} cannot be a literal constant")
        return draft.set_literal(operand.value & 0xFFFF if _short_literal(draft, what) else operand.value)
    if isinstance(operand, bool) or not isinstance(operand, int | float):
        raise EncodeError(f"{draft.name}: {what} got {operand!r}, expected a register or a number")
    if isinstance(operand, int):
        code = inline_int_code(operand)
        if code is not None:
            return code
        if not -(1 << 31) <= operand < (1 << 32):
            raise EncodeError(f"{draft.name}: constant {operand} of {what} does not fit 32 bits")
        # A 16-bit operand's literal occupies the low half of the literal dword.
        value = operand & 0xFFFF if _short_literal(draft, what) else operand
    else:
        code = inline_float_code(operand)
        if code is not None:
            return code
        value = float_bits(operand, draft.dfmt(what))
    if not allow_literal:
        raise EncodeError(f"{draft.name}: {what} cannot hold {operand!r}: it is not an inline constant")
    return draft.set_literal(value)


def encode_vgpr(draft: Draft, what: str, operand: Operand) -> int:
    """The index of a VGPR (or, on CDNA, AGPR) operand."""
    if type(operand) is Reg and operand.kind in ("v", "a"):
        check_width(draft, what, operand)
        if operand.half == "h":
            raise EncodeError(f"{draft.name}: {what} cannot name the 16-bit half {operand} in this encoding")
        if operand.count > 1 and operand.index & 1 and draft.arch.name == "cdna" and "_tr_b6" not in draft.name:
            # gfx90a and later read VGPR and AGPR tuples from even registers (LLVM: vgpr tuples must be 64 bit aligned)
            raise EncodeError(f"{draft.name}: {what} {operand} starts at an odd register; {draft.arch.name} tuples are even-aligned")
        return operand.index
    raise EncodeError(f"{draft.name}: {what} must be a vector register, got {operand!r}")


# the operand types that carry neg/abs themselves
_MODIFIABLE = frozenset((Reg, Special))


def mods_of(operand: Operand) -> tuple[bool, bool]:
    """(neg, abs) source modifiers carried by an operand."""
    if type(operand) in _MODIFIABLE:
        return operand.neg, operand.abs  # type: ignore[union-attr]
    return False, False


def with_mods(operand: Operand, neg: bool, abs_: bool) -> Operand:
    """Attach neg/abs modifiers to an operand (numbers get negated only when they are registers' stand-ins)."""
    if not (neg or abs_):
        return operand
    if isinstance(operand, Reg | Special):
        result = abs(operand) if abs_ else operand
        return -result if neg else result
    return _ModConst(operand, neg, abs_)


@dataclass(frozen=True)
class _ModConst:
    """A constant with neg/abs source modifiers (`-|0.5|`), kept apart from its value so it round-trips."""

    value: Operand
    neg: bool
    abs: bool

    def __str__(self) -> str:
        text = f"|{_const_text(self.value)}|" if self.abs else _const_text(self.value)
        # "-2.0" would read as the constant -2.0, so a negated constant takes the function form of the modifier.
        if not self.neg:
            return text
        return f"-{text}" if self.abs else f"neg({text})"

    def __repr__(self) -> str:
        text = f"abs({self.value!r})" if self.abs else repr(self.value)
        return f"-{text}" if self.neg else text


def _const_text(value: Operand) -> str:
    if isinstance(value, Lit):
        return f"{value.value:#x}"
    return str(value)


def split_mod_const(operand: object) -> tuple[Operand, bool, bool]:
    """Undo `with_mods` for constants: (operand, neg, abs)."""
    kind = type(operand)
    if kind in _MODIFIABLE:
        return operand, operand.neg, operand.abs  # type: ignore[return-value, attr-defined]
    if kind is _ModConst:
        return operand.value, operand.neg, operand.abs  # type: ignore[attr-defined]
    return operand, False, False  # type: ignore[return-value]


def flag_list(value: int, count: int) -> list[int]:
    """Bits 0..count-1 of `value` as a list, as in op_sel:[1,0,0]."""
    return [(value >> i) & 1 for i in range(count)]


def list_flags(values: list[int] | tuple[int, ...] | int | bool) -> int:
    """Inverse of flag_list; also accepts the packed integer form."""
    if isinstance(values, bool | int):
        return int(values)
    if any(bit not in (0, 1) for bit in values):  # LLVM: invalid op_sel value (was: the low bit taken)
        raise EncodeError(f"each entry of [{', '.join(str(bit) for bit in values)}] must be 0 or 1")
    return sum(int(bit) << i for i, bit in enumerate(values))
