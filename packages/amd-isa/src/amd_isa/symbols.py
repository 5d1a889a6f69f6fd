"""Symbolic 16-bit immediates: s_waitcnt counters, s_delay_alu, hwreg(...), sendmsg(...), s_waitcnt_depctr fields."""

import re

from .arch import Arch
from .errors import EncodeError
from .operands import Sym

# (name, low bit, width) of each counter; the hardware treats the all-ones value as "do not wait".
WAITCNT_GFX11 = (("vmcnt", 10, 6), ("expcnt", 0, 3), ("lgkmcnt", 4, 6))
WAITCNT_GFX9 = (("vmcnt", 0, 4), ("expcnt", 4, 3), ("lgkmcnt", 8, 4))
DEPCTR_GFX11 = (("depctr_hold_cnt", 7, 1), ("depctr_sa_sdst", 0, 1), ("depctr_va_vdst", 12, 4), ("depctr_va_sdst", 9, 3),
                ("depctr_va_ssrc", 8, 1), ("depctr_va_vcc", 1, 1), ("depctr_vm_vsrc", 2, 3))
DELAY_INSTID = ("NO_DEP", "VALU_DEP_1", "VALU_DEP_2", "VALU_DEP_3", "VALU_DEP_4", "TRANS32_DEP_1", "TRANS32_DEP_2", "TRANS32_DEP_3",
                "FMA_ACCUM_CYCLE_1", "SALU_CYCLE_1", "SALU_CYCLE_2", "SALU_CYCLE_3")
DELAY_SKIP = ("SAME", "NEXT", "SKIP_1", "SKIP_2", "SKIP_3", "SKIP_4")
DELAY_FIELDS = (("instid0", 0, 4, DELAY_INSTID), ("instskip", 4, 3, DELAY_SKIP), ("instid1", 7, 4, DELAY_INSTID))
GPR_IDX_MODES = ("SRC0", "SRC1", "SRC2", "DST")
SENDMSG_GFX11 = {1: "MSG_INTERRUPT", 2: "MSG_HS_TESSFACTOR", 3: "MSG_DEALLOC_VGPRS", 9: "MSG_GS_ALLOC_REQ"}
SENDMSG_GFX9 = {1: "MSG_INTERRUPT", 2: "MSG_GS", 3: "MSG_GS_DONE", 4: "MSG_SAVEWAVE", 5: "MSG_STALL_WAVE_GEN", 6: "MSG_HALT_WAVES",
                7: "MSG_ORDERED_PS_DONE", 8: "MSG_EARLY_PRIM_DEALLOC", 9: "MSG_GS_ALLOC_REQ", 10: "MSG_GET_DOORBELL", 15: "MSG_SYSMSG"}
# s_version: the microcode version code (bits 7:0, named where LLVM names it) and three flag bits.
UC_VERSIONS = {0: "UC_VERSION_GFX7", 4: "UC_VERSION_GFX10", 6: "UC_VERSION_GFX11", 9: "UC_VERSION_GFX12"}
UC_VERSION_BITS = {13: "UC_VERSION_W64_BIT", 14: "UC_VERSION_W32_BIT", 15: "UC_VERSION_MDP_BIT"}
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(([^()]*)\)")


def _waitcnt_layout(arch: Arch) -> tuple:
    return WAITCNT_GFX9 if arch.name == "cdna" else WAITCNT_GFX11


def _counters(raw: int, layout: tuple) -> list[tuple[str, int, int]]:
    return [(name, (raw >> lo) & ((1 << width) - 1), (1 << width) - 1) for name, lo, width in layout]


def _hwreg_names(arch: Arch) -> dict[int, str]:
    return arch.hwreg_names or getattr(arch.tables, "HWREG", {})


def _sendmsg_names(arch: Arch) -> dict[int, str]:
    """The message names LLVM prints in s_sendmsg: on gfx11/gfx12 the returning messages' names too."""
    return SENDMSG_GFX9 if arch.name == "cdna" else {**SENDMSG_GFX11, **_rtn_names(arch)}


def _rtn_names(arch: Arch) -> dict[int, str]:
    """The returning messages LLVM names (read off llvm-mc-19/22's disassembler): the table's, without the illegal
    message 255 (printed sendmsg(255, 0, 0)), with gfx12's name for 135."""
    names = {ident: name for ident, name in getattr(arch.tables, "MSG", {}).items() if ident != 255}
    return {**names, 135: "MSG_RTN_GET_SE_AID_ID"} if 135 in names else names


def format_simm16(arch: Arch, optype: str, raw: int, mnemonic: str) -> str:
    """LLVM's spelling of a 16-bit immediate of operand type `optype`."""
    if optype == "WAITCNT":
        layout = _waitcnt_layout(arch)
        if arch.name == "cdna":
            # gfx9 keeps vmcnt's two high bits at [15:14].
            vm = (raw & 0xF) | ((raw >> 14) & 3) << 4
            counters = [("vmcnt", vm, 63), ("expcnt", (raw >> 4) & 7, 7), ("lgkmcnt", (raw >> 8) & 15, 15)]
        else:
            counters = _counters(raw, layout)
        shown = [c for c in counters if c[1] != c[2]] or counters
        return " ".join(f"{name}({value})" for name, value, _ in shown)
    if optype == "WAITCNT_DEPCTR" and arch.name != "cdna":
        known = sum(((1 << width) - 1) << lo for _, lo, width in DEPCTR_GFX11)
        if raw & ~known & 0xFFFF:
            return f"{raw:#x}"
        counters = _counters(raw, DEPCTR_GFX11)
        shown = [c for c in counters if c[1] != c[2]] or counters
        return " ".join(f"{name}({value})" for name, value, _ in shown)
    if optype == "DELAY":
        parts = []
        for name, lo, width, names in DELAY_FIELDS:
            value = (raw >> lo) & ((1 << width) - 1)
            if value:  # a value with no name: LLVM's comment (its assembler, as ours, reads names alone)
                parts.append(f"{name}({names[value] if value < len(names) else f'/* invalid {name[:-1] if name[-1].isdigit() else name} value */'})")
        return " | ".join(parts) if parts and not raw >> 11 else str(raw) if not parts else f"{raw:#x}"
    if optype == "HWREG":
        ident, offset, size = raw & 0x3F, (raw >> 6) & 0x1F, ((raw >> 11) & 0x1F) + 1
        name = _hwreg_names(arch).get(ident, str(ident))
        return f"hwreg({name})" if offset == 0 and size == 32 else f"hwreg({name}, {offset}, {size})"
    if optype == "SENDMSG":
        names = _sendmsg_names(arch)
        if arch.name == "cdna":
            ident, op, stream = raw & 0xF, (raw >> 4) & 7, (raw >> 8) & 3
            if raw >> 10:
                return f"{raw:#x}"
        else:
            ident, op, stream = raw & 0xFF, 0, 0
            if raw >> 8:
                return str(raw)  # LLVM prints a value with bits beyond the message id as a plain number
        if ident in names and op == 0 and stream == 0:
            return f"sendmsg({names[ident]})"
        return f"sendmsg({ident}, {op}, {stream})"
    if optype == "GPR_IDX":
        return f"gpr_idx({','.join(mode for i, mode in enumerate(GPR_IDX_MODES) if raw >> i & 1)})"
    if optype == "SENDMSG_RTN":
        names = _rtn_names(arch)
        return f"sendmsg({names[raw]})" if raw in names else f"sendmsg({raw}, 0, 0)"
    return f"{raw:#x}"


def version_text(raw: int) -> str:
    """LLVM 19's spelling of an s_version operand: `UC_VERSION_GFX12|UC_VERSION_W32_BIT`, or hex when bits 12:8 are set."""
    if raw & 0x1F00:
        return f"{raw:#x}"
    text = UC_VERSIONS.get(raw & 0xFF, str(raw & 0xFF))
    for bit, name in UC_VERSION_BITS.items():
        if raw >> bit & 1:
            text = f"({text})|{name}" if "|" in text else f"{text}|{name}"
    return text


def parse_version(text: str) -> int:
    """Inverse of version_text: names and numbers joined by `|` (parentheses ignored)."""
    names = {name: value for value, name in UC_VERSIONS.items()} | {name: 1 << bit for bit, name in UC_VERSION_BITS.items()}
    value = 0
    for part in text.replace("(", "").replace(")", "").split("|"):
        part = part.strip()
        value |= names[part.upper()] if part.upper() in names else asm_int(part)
    return value


def is_symbolic(text: str) -> bool:
    """Whether an immediate operand is written symbolically (`vmcnt(0)`, `UC_VERSION_GFX12|UC_VERSION_W32_BIT`)."""
    return "(" in text or "|" in text or text.strip().upper().startswith("UC_VERSION_")


def swizzle_text(raw: int) -> str:
    """LLVM's spelling of a ds_swizzle_b32 offset: swizzle(QUAD_PERM|SWAP|REVERSE|BROADCAST|BITMASK_PERM|FFT|ROTATE, ...)
    or a number. FFT (offset bits 15:13 = 7) reads only its 5-bit control, ROTATE (6) a direction and an amount."""
    if raw & 0xE000 == 0xE000:
        return f"swizzle(FFT,{raw & 0x1F})"
    if raw & 0xE000 == 0xC000:
        return f"swizzle(ROTATE,{raw >> 10 & 1},{raw >> 5 & 0x1F})"
    if raw & 0xFF00 == 0x8000:
        return "swizzle(QUAD_PERM," + ",".join(str(raw >> (2 * i) & 3) for i in range(4)) + ")"
    if raw & 0x8000:
        return str(raw)
    and_mask, or_mask, xor_mask = raw & 0x1F, raw >> 5 & 0x1F, raw >> 10 & 0x1F
    if and_mask == 0x1F and or_mask == 0 and xor_mask.bit_count() == 1:
        return f"swizzle(SWAP,{xor_mask})"
    if and_mask == 0x1F and or_mask == 0 and xor_mask and (xor_mask + 1) & xor_mask == 0:
        return f"swizzle(REVERSE,{xor_mask + 1})"
    group = 0x1F - and_mask + 1
    if group > 1 and group & (group - 1) == 0 and or_mask < group and xor_mask == 0:
        return f"swizzle(BROADCAST,{group},{or_mask})"
    chars = []
    for bit in range(4, -1, -1):
        a, o, x = and_mask >> bit & 1, or_mask >> bit & 1, xor_mask >> bit & 1
        chars.append(("i" if x else "p") if a and not o else str(o ^ x))
    return f'swizzle(BITMASK_PERM,"{"".join(chars)}")'


def parse_swizzle(text: str) -> int:
    """Inverse of swizzle_text."""
    inner = text.strip()[len("swizzle("):-1]
    mode, *args = [part.strip() for part in inner.split(",")]
    if mode == "QUAD_PERM":
        return 0x8000 | sum((asm_int(arg) & 3) << (2 * i) for i, arg in enumerate(args))
    if mode == "SWAP":
        return 0x1F | asm_int(args[0]) << 10
    if mode == "REVERSE":
        return 0x1F | (asm_int(args[0]) - 1) << 10
    if mode == "BROADCAST":
        return (0x1F - asm_int(args[0]) + 1) & 0x1F | asm_int(args[1]) << 5
    if mode == "BITMASK_PERM":
        value = 0
        for i, char in enumerate(args[0].strip('"')):
            bit = 4 - i
            value |= {"p": 1, "i": 1 | 1 << 10, "0": 0, "1": 1 << 5}[char] << bit
        return value
    if mode == "FFT":
        return 0xE000 | asm_int(args[0]) & 0x1F
    if mode == "ROTATE":
        return 0xC000 | (asm_int(args[0]) & 1) << 10 | (asm_int(args[1]) & 0x1F) << 5
    raise EncodeError(f"unknown swizzle mode {mode!r}")


def parse_symbolic(arch: Arch, text: str) -> int:
    """The raw 16-bit value of a symbolic immediate such as `vmcnt(0) lgkmcnt(0)` or `hwreg(HW_REG_MODE, 0, 4)`."""
    if "UC_VERSION_" in text.upper():
        return parse_version(text)
    if text.replace(" ", "").startswith("gpr_idx("):
        modes = [m.strip() for m in text.strip()[8:-1].split(",") if m.strip()]
        if any(m not in GPR_IDX_MODES for m in modes):
            raise EncodeError(f"gpr_idx takes {', '.join(GPR_IDX_MODES)}, got {text!r}")
        return sum(1 << GPR_IDX_MODES.index(m) for m in modes)
    calls = _CALL.findall(text)
    leftover = _CALL.sub("", text).replace("|", "").replace("&", "").replace(",", "").strip()
    if not calls or leftover:
        raise EncodeError(f"cannot read immediate {text!r}")
    head = calls[0][0]
    args = [[a.strip() for a in call[1].split(",")] for call in calls]
    if head == "hwreg":
        # Accept LLVM's spellings and the ISA document's (the table's) alike.
        # (a register the target lacks is refused by name: gfx90a shares gfx940's tables, not its XCC_ID or PERF registers)
        named = _hwreg_names(arch)
        ids = {name: ident for ident, name in getattr(arch.tables, "HWREG", {}).items() if not arch.hwreg_names or ident in named}
        ids.update({name: ident for ident, name in named.items()})
        first = args[0][0]
        if first not in ids and first.upper().startswith("HW_REG_"):
            raise EncodeError(f"invalid hardware register: {first} is not supported on {arch.key}")
        ident = ids[first] if first in ids else asm_int(first)
        offset = asm_int(args[0][1]) if len(args[0]) > 1 else 0
        size = asm_int(args[0][2]) if len(args[0]) > 2 else 32
        return ident | offset << 6 | (size - 1) << 11
    if head == "sendmsg":
        names = {name: ident for ident, name in _sendmsg_names(arch).items()}
        names.update({name: ident for ident, name in getattr(arch.tables, "MSG", {}).items()})
        names.update({name: ident for ident, name in _rtn_names(arch).items()})
        first = args[0][0]
        ident = names[first] if first in names else asm_int(first)
        op = asm_int(args[0][1]) if len(args[0]) > 1 else 0
        stream = asm_int(args[0][2]) if len(args[0]) > 2 else 0
        return ident | op << 4 | stream << 8 if arch.name == "cdna" else ident
    if head in ("vmcnt", "expcnt", "lgkmcnt"):
        if arch.name == "cdna":
            value = 0xF | 7 << 4 | 15 << 8 | 3 << 14
            for name, (arg,) in zip((c[0] for c in calls), args, strict=True):
                count = asm_int(arg)
                if name == "vmcnt":
                    value = (value & ~0xC00F) | (count & 0xF) | ((count >> 4) & 3) << 14
                elif name == "expcnt":
                    value = (value & ~0x70) | (count & 7) << 4
                else:
                    value = (value & ~0xF00) | (count & 15) << 8
            return value
        return _set_fields(calls, args, _waitcnt_layout(arch), 0xFFF7)
    if head.startswith("depctr_"):
        return _set_fields(calls, args, DEPCTR_GFX11, 0xFF9F)
    if head in ("instid0", "instskip", "instid1"):
        value = 0
        spec = {name: (lo, names) for name, lo, _, names in DELAY_FIELDS}
        for (name, _), (arg,) in zip(calls, args, strict=True):
            lo, names = spec[name]
            if arg not in names:  # LLVM: a name, not a number (it prints unnamed values as a comment it cannot read back)
                raise EncodeError(f"expected a value name in {name}(...): one of {', '.join(names)}; got {arg!r}")
            value |= names.index(arg) << lo
        return value
    raise EncodeError(f"unknown symbolic immediate {head}(...)")


def _set_fields(calls: list, args: list, layout: tuple, start: int) -> int:
    spec = {name: (lo, width) for name, lo, width in layout}
    value = start
    for (name, _), (arg,) in zip(calls, args, strict=True):
        if name not in spec:
            raise EncodeError(f"unknown counter {name}(...)")
        lo, width = spec[name]
        value = (value & ~(((1 << width) - 1) << lo)) | (asm_int(arg) & ((1 << width) - 1)) << lo
    return value


def asm_int(text: str) -> int:
    """An integer as LLVM's assembler reads it: decimal, 0x hex, 0b binary, and octal when it starts with 0 (`03`)."""
    body = text[1:] if text.startswith("-") else text
    try:
        value = int(body, 8) if len(body) > 1 and body[0] == "0" and body[1].isdigit() else int(body, 0)
    except ValueError:
        raise EncodeError(f"expected a number, got {text!r}") from None
    return -value if text.startswith("-") else value


def parse_simm16_operand(arch: Arch, operand: object) -> int:
    """The raw value of an immediate operand given as an int, a Sym or symbolic text."""
    if isinstance(operand, Sym):
        return operand.value
    if isinstance(operand, bool):
        raise EncodeError(f"expected an immediate, got {operand!r}")
    if isinstance(operand, int):
        return operand
    if isinstance(operand, str):
        return parse_symbolic(arch, operand)
    raise EncodeError(f"expected an immediate, got {operand!r}")
