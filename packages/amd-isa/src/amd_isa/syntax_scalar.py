"""Syntax of the scalar formats (SOP1, SOP2, SOPC, SOPK, SOPP, SMEM): operand order, symbolic immediates, SMEM offsets."""

from operator import itemgetter

from .errors import EncodeError
from .operands import Operand, Reg, Special, Sym
from .symbols import format_simm16, parse_simm16_operand, version_text
from .syntax_common import Draft, check_width, decode_src, encode_scalar, encode_src, reg_count, scalar_operand
from .syntax_memory import SCOPE_NAMES, parse_policy, th_text

Mods = dict[str, object]
Split = tuple[str, list, Mods]
# simm16 spellings printed in hex by LLVM (everything else prints in decimal).
HEX_SIMM16_OPS = ("s_clause", "s_wait_event", "s_set_inst_prefetch_distance", "s_ttracedata_imm", "s_round_mode")


def _fields_of(inst) -> dict[str, int]:
    """Every field of the instruction's encoding but the opcode, as attribute access reads them (defaults for fields it
    does not carry; branch offsets signed). Read with one itemgetter when it carries them all, as decoded ones do."""
    key = (inst.arch.key, inst.fmt, inst.variant, inst.op)
    spec = _FIELD_SPECS.get(key)
    if spec is None:
        names = tuple(name for name in inst.layout["fields"] if name != "op")
        info = inst.operand_info
        signed = tuple(name for name in names if name in info and info[name][1] == "LABEL")
        spec = _FIELD_SPECS[key] = (names, itemgetter(*names) if len(names) > 1 else None, signed)
    names, getter, signed = spec
    if getter is not None and not signed:
        try:
            return dict(zip(names, getter(inst.fields)))
        except KeyError:
            pass
    return {name: getattr(inst, name) for name in names}


# (tables, format, variant, opcode) -> (field names but the opcode, their itemgetter, the signed label fields)
_FIELD_SPECS: dict[tuple, tuple] = {}


def _imm_text(raw: int) -> str:
    """LLVM prints a 16-bit immediate in decimal when it is an inline-constant value (0..64), in hex otherwise."""
    return str(raw) if raw <= 64 else f"{raw:#x}"


def _sign16(value: int) -> int:
    return value - 0x10000 if value & 0x8000 else value


def split_salu(inst) -> Split:
    """SOP1/SOP2/SOPC/SOPK operands in LLVM order: destination first (setreg: hwreg first), then sources."""
    name, info, fields, arch = inst.mnemonic, inst.operand_info, inst.fields, inst.arch
    ops: list = []
    if "sdst" in info:
        ops.append(scalar_operand(arch, fields.get("sdst", 0), reg_count(info["sdst"][0])))
    for src in ("ssrc0", "ssrc1"):
        if src in info:
            bits, optype, _ = info[src]
            code = fields.get(src, 0)
            if optype == "SENDMSG_RTN":
                ops.append(Sym(code, format_simm16(arch, "SENDMSG_RTN", code, name)))
            elif optype == "SIMM4":
                ops.append(Sym(code, format_simm16(arch, "GPR_IDX", code, name)))
            else:
                ops.append(decode_src(arch, code, bits, inst.literal))
    if "simm16" in info:
        optype = info["simm16"][1]
        raw = fields.get("simm16", 0)
        if optype == "LABEL":
            imm: Operand = _sign16(raw)
        elif optype in ("HWREG", "SENDMSG", "WAITCNT", "DELAY", "WAITCNT_DEPCTR"):
            imm = Sym(raw, format_simm16(arch, optype, raw, name))
        elif optype == "VERSION" and arch.name == "rdna4":
            imm = Sym(raw, version_text(raw))  # LLVM 15 prints gfx11's s_version in hex, LLVM 19 gfx12's symbolically
        else:
            imm = Sym(raw, f"{raw:#x}")
        if "setreg" in name:
            ops.insert(0, imm)
            if "imm32" in name:
                ops[1:] = [Sym(inst.literal or 0, _imm_text(inst.literal or 0))]
        else:
            ops.append(imm)
    elif any(part in name for part in ("fmaak", "fmamk")):
        ops.insert(3 if "fmaak" in name else 2, Sym(inst.literal or 0, f"{inst.literal or 0:#x}"))
    return name, ops, {}


def join_salu(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of split_salu."""
    info, name = draft.info, draft.name
    slots = [f for f in ("sdst", "ssrc0", "ssrc1") if f in draft.info]
    if "simm16" in info:
        slots = (["simm16"] + slots) if "setreg" in name else (slots + ["simm16"])
        if "imm32" in name:
            slots = ["simm16", "literal"]
    if any(part in name for part in ("fmaak", "fmamk")):
        slots.insert(3 if "fmaak" in name else 2, "literal")
    _expect(draft, ops, slots)
    for slot, operand in zip(slots, ops, strict=True):
        if slot == "sdst" and draft.arch.name == "rdna3" and name.startswith(GFX11_WAITCNT_SOPK) and \
                not (isinstance(operand, Special) and operand.name == "null"):
            # gfx11's counter waits read a register that must be null (LLVM: src0 must be null; its disassembler prints others)
            raise EncodeError(f"{name}: src0 must be null, got {operand}")
        if slot == "sdst":
            check_width(draft, "sdst", operand)
            draft.fields["sdst"] = encode_scalar(draft.arch, f"{name} sdst", operand)
        elif slot == "simm16":
            draft.fields["simm16"] = _imm16(draft, operand)
        elif slot == "literal":
            draft.set_literal(operand.value if isinstance(operand, Sym) else int(operand))
        elif info[slot][1] in ("SENDMSG_RTN", "SIMM4"):
            draft.fields[slot] = parse_simm16_operand(draft.arch, operand) & 0xFF
        else:
            if register_only(name, info[slot][1]) and not isinstance(operand, Reg | Special):
                raise EncodeError(f"{name}: {slot} must be a scalar register, got {operand!r} (no constants here)")
            draft.fields[slot] = encode_src(draft, slot, operand)
    _no_mods(draft, mods)


GFX11_WAITCNT_SOPK = ("s_waitcnt_vscnt", "s_waitcnt_vmcnt", "s_waitcnt_expcnt", "s_waitcnt_lgkmcnt")


def register_only(name: str, optype: str) -> bool:
    """Scalar sources that take registers alone, no constants (LLVM: invalid operand; its disassembler marks one
    /*Invalid immediate*/): s_setpc_b64, s_rfe_b64, s_movrels*, s_cbranch_join (s_swappc_b64 takes constants)."""
    return optype == "SREG" and not name.startswith("s_swappc")


def split_sopp(inst) -> Split:
    """SOPP: one optional immediate (symbolic for waitcnt, delay_alu, sendmsg, depctr)."""
    name, info = inst.mnemonic, inst.operand_info
    raw = inst.fields.get("simm16", 0)
    if "simm16" not in info:
        return name, ([Sym(raw, str(raw))] if raw else []), {}
    optype = info["simm16"][1]
    if optype == "LABEL":
        return name, [_sign16(raw)], {}
    if name == "s_set_gpr_idx_mode":
        return name, [Sym(raw, format_simm16(inst.arch, "GPR_IDX", raw, name))], {}
    if optype == "WAIT_ALU":
        return name, [Sym(raw, format_simm16(inst.arch, "WAITCNT_DEPCTR", raw, name))], {}
    hex_text = name in HEX_SIMM16_OPS or name.startswith("s_wait_")  # gfx12's s_wait_*cnt print their count in hex
    if optype in ("SIMM16", "SLEEP") and not hex_text:
        return name, [Sym(raw, _imm_text(raw))], {}
    if optype in ("SIMM16", "CLAUSE", "WAIT_EVENT") or hex_text:
        return name, [Sym(raw, f"{raw:#x}")], {}
    return name, [Sym(raw, format_simm16(inst.arch, optype, raw, name))], {}


def join_sopp(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of split_sopp."""
    if len(ops) > 1:
        raise EncodeError(f"{draft.name} takes at most one operand, got {len(ops)}")
    if ops:
        draft.fields["simm16"] = _imm16(draft, ops[0])
    elif "simm16" in draft.info:  # LLVM: too few operands for instruction (s_nop 0, s_delay_alu 0, a branch's target)
        raise EncodeError(f"{draft.name}: too few operands: it takes an immediate operand")
    _no_mods(draft, mods)


def _imm16(draft: Draft, operand: object) -> int:
    value = parse_simm16_operand(draft.arch, operand)
    if not -0x8000 <= value <= 0xFFFF:
        raise EncodeError(f"{draft.name}: immediate {value} does not fit 16 bits")
    return value & 0xFFFF


def split_smem(inst) -> Split:
    """SMEM: sdata, sbase, then the offset (an SGPR, an immediate, or both with offset:)."""
    name, info, arch = inst.mnemonic, inst.operand_info, inst.arch
    fields = _fields_of(inst)
    ops: list = []
    if "sdata" in info:
        bits, optype, _ = info["sdata"]
        ops.append(fields["sdata"] if optype.startswith("SIMM") else scalar_operand(arch, fields["sdata"], reg_count(bits)))
    if "sbase" not in info:
        if _is_prefetch(info):  # s_prefetch_*_pc_rel: offset, soffset, then the length
            return name, [_smem_off(fields["ioffset"], 24), scalar_operand(arch, fields["soffset"], 1), ops[0]], {}
        return name, ops, {}
    ops.append(scalar_operand(arch, fields["sbase"] << 1, reg_count(info["sbase"][0])))
    if _is_prefetch(info):
        return name, [*ops[1:], _smem_off(fields["ioffset"], 24), scalar_operand(arch, fields["soffset"], 1), fields["sdata"]], {}
    mods: Mods = {}
    if arch.name == "cdna":
        offset = fields["offset"]
        if not fields.get("imm"):
            ops.append(scalar_operand(arch, offset & 0x7F, 1))
        elif fields.get("soffset_en"):
            ops.append(scalar_operand(arch, fields["soffset"], 1))
            mods["offset"] = _smem_off(offset, 21)
        else:
            ops.append(_smem_off(offset, 21))
        for flag in ("glc", "nv"):
            if fields.get(flag):
                mods[flag] = True
        return name, ops, mods
    off_name = "ioffset" if "ioffset" in fields else "offset"
    width = 24 if off_name == "ioffset" else 21
    offset, soffset = fields[off_name], fields["soffset"]
    # gfx11 (LLVM 15) spells a bare null offset `null` and leaves out offset:0; gfx12 (LLVM 19) prints the immediate
    # whenever there is one to print: `0x0` for null, `s2 offset:0x0` for an SGPR.
    if soffset == arch.null_code and (offset or off_name == "ioffset"):
        ops.append(_smem_off(offset, width))
    else:
        ops.append(scalar_operand(arch, soffset, 1))
        if offset or off_name == "ioffset":
            mods["offset"] = _smem_off(offset, width)
    for flag in ("glc", "dlc"):
        if fields.get(flag):
            mods[flag] = True
    if fields.get("th"):
        mods["th"] = th_text(name, fields["th"], fields.get("scope", 0))
    if fields.get("scope"):
        mods["scope"] = SCOPE_NAMES[fields["scope"]]
    return name, ops, mods


class _SmemOffset(int):
    """An SMEM immediate offset: LLVM prints it in signed hex."""

    def __str__(self) -> str:
        return f"-{-self:#x}" if self < 0 else f"{int(self):#x}"

    def __repr__(self) -> str:
        return str(self)


def _smem_off(raw: int, width: int) -> _SmemOffset:
    return _SmemOffset(raw - (1 << width) if raw >> (width - 1) else raw)


def join_smem(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of split_smem."""
    info, name, arch, fields = draft.info, draft.name, draft.arch, draft.fields
    if _is_prefetch(info):
        _join_prefetch(draft, ops, mods)
        return
    slots = [f for f in ("sdata", "sbase") if f in info]
    expected = len(slots) + (1 if "sbase" in info else 0)
    if len(ops) != expected:
        raise EncodeError(f"{name} takes {expected} operands, got {len(ops)}")
    if "sdata" in info:
        fields["sdata"] = ops[0] if isinstance(ops[0], int) else encode_scalar(arch, f"{name} sdata", ops[0])
    if "sbase" not in info:
        fields["soffset"] = 0
        _no_mods(draft, mods)
        return
    base = ops[len(slots) - 1]
    if isinstance(base, Special) and base.name == "null" and "buffer" in name:  # LLVM: invalid operand for instruction
        raise EncodeError(f"{name}: sbase is a buffer resource (4 SGPRs), not null")
    fields["sbase"] = encode_scalar(arch, f"{name} sbase", base) >> 1
    where = ops[-1]
    extra = int(mods.pop("offset", 0))  # type: ignore[call-overload]
    if arch.name == "cdna":
        fields["soffset"] = 0
        if isinstance(where, Reg | Special):
            if extra:
                fields.update(imm=1, soffset_en=1, soffset=encode_scalar(arch, "soffset", where), offset=_smem_offset(draft, extra, 21))
            else:
                fields.update(imm=0, offset=encode_scalar(arch, "soffset", where))
        else:
            fields.update(imm=1, offset=_smem_offset(draft, int(where), 21))
    else:
        off_name, width = ("ioffset", 24) if "ioffset" in draft.arch.formats["SMEM"]["fields"] else ("offset", 21)
        if isinstance(where, Reg | Special):
            fields["soffset"] = encode_scalar(arch, "soffset", where)
            fields[off_name] = _smem_offset(draft, extra, width)
        else:
            fields["soffset"] = arch.null_code
            fields[off_name] = _smem_offset(draft, int(where), width)
    for flag in ("glc", "dlc", "nv"):
        if flag in mods:
            fields[flag] = int(mods.pop(flag))  # type: ignore[call-overload]
    for flag in ("th", "scope"):
        if flag in mods:
            fields[flag] = parse_policy(flag, mods.pop(flag), draft.name)
    _no_mods(draft, mods)


def _smem_offset(draft: Draft, value: int, width: int) -> int:
    """The `width`-bit field of a scalar load's immediate offset: signed, but for buffer loads unsigned in one bit less
    (LLVM: expected a 21-bit signed offset / a 20-bit unsigned offset; gfx12: 24 and 23 bits; was: any value masked)."""
    top = 1 << (width - 1)
    if "buffer" in draft.name:
        if not 0 <= value < top:
            raise EncodeError(f"{draft.name}: offset {value} is outside 0..{top - 1} (a {width - 1}-bit unsigned offset for buffer ops)")
    elif not -top <= value < top:
        raise EncodeError(f"{draft.name}: offset {value} is outside {-top}..{top - 1} (a {width}-bit signed offset)")
    return value & ((1 << width) - 1)


def _is_prefetch(info: dict) -> bool:
    """gfx12's s_prefetch_* and s_buffer_prefetch_data: sdata holds a length, not a register."""
    return info.get("sdata", (0, ""))[1] == "SIMM5"


def _join_prefetch(draft: Draft, ops: list, mods: Mods) -> None:
    """Prefetches as LLVM 19 spells them: `s_prefetch_data s[0:1], 0x10, null, 7` (the _pc_rel forms without sbase)."""
    slots = (["sbase"] if "sbase" in draft.info else []) + ["ioffset", "soffset", "sdata"]
    _expect(draft, ops, slots)
    values = dict(zip(slots, ops, strict=True))
    if "sbase" in values:
        base = values["sbase"]
        if isinstance(base, Special) and base.name == "null" and "buffer" in draft.name:  # LLVM: invalid operand for instruction
            raise EncodeError(f"{draft.name}: sbase is a buffer resource (4 SGPRs), not null")
        draft.fields["sbase"] = encode_scalar(draft.arch, f"{draft.name} sbase", base) >> 1
    # a 24-bit signed offset, 23-bit unsigned for the buffer prefetch (LLVM: expected a 24-bit signed offset; was: masked)
    draft.fields["ioffset"] = _smem_offset(draft, int(values["ioffset"]), 24)  # type: ignore[call-overload]
    draft.fields["soffset"] = encode_scalar(draft.arch, f"{draft.name} soffset", values["soffset"])
    draft.fields["sdata"] = int(values["sdata"])  # type: ignore[call-overload]
    _no_mods(draft, mods)


def _expect(draft: Draft, ops: list, slots: list[str]) -> None:
    if len(ops) != len(slots):
        raise EncodeError(f"{draft.name} takes {len(slots)} operand(s) ({', '.join(slots) or 'none'}), got {len(ops)}")


def _no_mods(draft: Draft, mods: Mods) -> None:
    if mods:
        raise EncodeError(f"{draft.name} does not take modifier(s) {', '.join(sorted(mods))}")
