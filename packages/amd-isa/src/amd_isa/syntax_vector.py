"""Syntax of the vector ALU formats: VOP1/VOP2/VOPC (e32), VOP3/VOP3SD (e64), VOP3P, VOPD, and their DPP16/DPP8/SDWA forms."""

from functools import cache

from .arch import get_arch
from .errors import DecodeError, EncodeError
from .modifier_rules import NO_CLAMP, NO_CLAMP_OMOD, NO_OMOD, no_dpp_form
from .operands import INLINE_FLOATS, INV_2PI_CODE, VGPR_BASE, Lit, Operand, Reg, Special, Sym, float_bits, plain_reg
from .syntax_common import (
    Draft,
    check_width,
    decode_src,
    encode_scalar,
    encode_src,
    encode_vgpr,
    flag_list,
    list_flags,
    reg_count,
    scalar_operand,
    split_mod_const,
    with_mods,
    x2_prefix,
)

Mods = dict[str, object]
Split = tuple[str, list, Mods]
OMOD = {1: ("mul", 2), 2: ("mul", 4), 3: ("div", 2)}
DPP_KEYS = ("quad_perm", "row_shl", "row_shr", "row_ror", "row_mirror", "row_half_mirror", "row_share", "row_xmask", "wave_shl", "wave_rol",
            "wave_shr", "wave_ror", "row_bcast", "row_mask", "bank_mask", "bound_ctrl", "fi", "dpp8")
SDWA_SEL = ("BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD")
SDWA_UNUSED = ("UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE")
# dpp_ctrl ranges: (first code, last code, modifier name, value of the first code); quad_perm is 0x00-0xff.
DPP_RANGES = (
    (0x101, 0x10F, "row_shl", 1), (0x111, 0x11F, "row_shr", 1), (0x121, 0x12F, "row_ror", 1),
    (0x150, 0x15F, "row_share", 0), (0x160, 0x16F, "row_xmask", 0),
)
_DPP_KEY_SET = frozenset((*DPP_KEYS, "row_newbcast"))
_SDWA_KEY_SET = frozenset(("dst_sel", "dst_unused", "src0_sel", "src1_sel"))
DPP_SINGLE = {0x140: ("row_mirror", True), 0x141: ("row_half_mirror", True), 0x130: ("wave_shl", 1), 0x134: ("wave_rol", 1),
              0x138: ("wave_shr", 1), 0x13C: ("wave_ror", 1), 0x142: ("row_bcast", 15), 0x143: ("row_bcast", 31)}


def _dpp_range_name(arch, key: str) -> str:
    """CDNA (gfx90a+) has no row_share: its codes 0x150-0x15f broadcast a lane within each row (LLVM's row_newbcast)."""
    return "row_newbcast" if key == "row_share" and arch.name == "cdna" else key


def _count(arch, info_entry: tuple[int, str, str]) -> int:
    bits, _, dfmt = info_entry
    # Lane masks (VCC-like operands) are one SGPR per 32 lanes of the wave.
    return arch.wave // 32 if dfmt == "M64" else reg_count(bits)


def _vcc(arch) -> Special:
    return Special("vcc", 106, 2) if arch.wave == 64 else Special("vcc_lo", 106)


@cache
def _carry(name: str) -> tuple[bool, bool]:
    """(writes VCC, reads VCC) for the e32 forms whose carry is implicit."""
    reads = any(part in name for part in ("_co_ci_", "addc_co", "subb_co", "subbrev_co", "cndmask"))
    writes = reads and "cndmask" not in name or any(name.startswith(p) for p in ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32"))
    return writes, reads


def _dst_operand(arch, info: dict, field: str, raw: int, acc: bool = False) -> Operand:
    bits, optype, _ = info[field]
    if optype in ("SREG", "SDST", "SREG_NOVCC", "EXEC"):
        return scalar_operand(arch, raw, _count(arch, info[field]))
    return Reg("a" if acc or optype == "ACCVGPR" else "v", raw, reg_count(bits))


def is_half_operand(arch, fmt: str, info_entry: tuple[int, str, str]) -> bool:
    """Whether a VGPR operand is a 16-bit register half in this encoding (`short16_halves`: RDNA3/RDNA4 VOP1/VOP2/VOPC).

    LLVM 19 keeps the packed fp8/bf8 sources of v_cvt_pk_f32_fp8/bf8 whole registers.
    """
    bits, _, dfmt = info_entry
    return arch.short16_halves and fmt in ("VOP1", "VOP2", "VOPC") and bits == 16 and dfmt not in ("PK2_FP8", "PK2_BF8")


# Opcodes LLVM 19 knows only in its true16 spelling, which names both halves: v_mov_b16_e32 v1.l, v2.h.
TRUE16_SPELLED = ("v_mov_b16_e32",)


def _as_half(operand: Operand, name: str) -> Operand:
    """A decoded VGPR of a half operand as the half it names (v212 -> v84.h; v3 stays v3 unless `name` spells v3.l)."""
    if isinstance(operand, Reg) and operand.kind == "v":
        if operand.index >= 128:
            return Reg("v", operand.index - 128, half="h")
        if name in TRUE16_SPELLED:
            return Reg("v", operand.index, half="l")
    return operand


def _from_half(draft: Draft, field: str, operand: object) -> object:
    """A half operand's register as the encoding sees it (v84.h -> v212); v128-v255 do not fit and need VOP3."""
    if not (isinstance(operand, Reg) and operand.kind == "v" and field in draft.info and is_half_operand(draft.arch, draft.fmt, draft.info[field])):
        return operand
    if operand.index >= 128:
        form = "_e64_dpp" if draft.variant.startswith("DPP") else "_e64"
        raise EncodeError(f"{draft.name}: a 16-bit {field} of this encoding reaches v0-v127 and their .h halves, got {operand}; use {form}")
    return Reg("v", operand.index + (128 if operand.hi else 0), neg=operand.neg, abs=operand.abs)


def _src_list(info: dict, names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in info]


def dpp_mnemonic(name: str, fmt: str, variant: str) -> str:
    """LLVM's mnemonic of a DPP/SDWA form: `v_mov_b32_dpp`, `v_add_f32_e64_dpp`, and VOPC DPP without a suffix."""
    suffix = "_sdwa" if variant.startswith("SDWA") else "_dpp"
    if fmt in ("VOP3", "VOP3SD", "VOP3P"):
        return (name if name.endswith("_e64") else name + "_e64") + suffix
    base = name.removesuffix("_e32")
    return base if fmt == "VOPC" and suffix == "_dpp" else base + suffix


class _OpFacts:
    """What both directions of the VALU syntax read off an opcode alone, worked out once per (tables, format, opcode):
    its encoding length, implicit VCC operands, K constant, destination kind and sources. Name-derived facts read
    substrings every spelling of the opcode shares (table name, LLVM name)."""

    __slots__ = ("long", "writes_vcc", "reads_vcc", "k_at", "k_mask", "dst", "srcs", "bus_fields", "bus_room", "plain", "vgpr_dst",
                 "has_abs", "dst_count", "src_counts", "cdna")

    def __init__(self, arch, fmt: str, name: str, info: dict):
        self.long = long = fmt in ("VOP3", "VOP3SD", "VOP3P")
        self.writes_vcc, self.reads_vcc = _carry(name) if not long else (False, False)
        # the K constant of madak/fmaak (last operand) or madmk/fmamk (before the last); a 16-bit op's is the low half
        # of the literal dword
        self.k_at = 1 if "madak" in name or "fmaak" in name else 2 if "madmk" in name or "fmamk" in name else 0
        self.k_mask = 0xFFFF if info.get("vdst", (32,))[0] == 16 else 0xFFFFFFFF
        # 1: EXEC (v_cmpx_*_e64), 2: a destination operand, 3: VOPC's implicit vcc, 0: none
        if "vdst" in info:
            self.dst = 1 if info["vdst"][1] == "EXEC" else 2
        else:
            self.dst = 3 if fmt == "VOPC" and (arch.wave == 64 or "cmpx" not in name) else 0
        # (field, a lane-mask operand, a 16-bit register half in this encoding)
        self.srcs = tuple((field, info[field][2] == "M64", is_half_operand(arch, fmt, info[field]))
                          for field in _src_list(info, ("src0", "src1", "src2") if long else ("src0", "vsrc1")))
        # the constant bus (constant_bus_problem): the 9-bit source fields, and how many of them may hold no VGPR
        # before distinct registers and constants need counting (the limit less an implicit vcc read)
        self.bus_fields = tuple(field for field, _, _ in self.srcs if field != "vsrc1")
        self.bus_room = (1 if arch.name == "cdna" or name.startswith(_ONE_SCALAR_SHIFTS) else 2) - int(self.reads_vcc)
        self.plain = plain_sources(name, fmt, info, self.srcs)  # the sources that take no neg/abs
        # a destination that is a whole VGPR (no scalar destination, no 16-bit half): `_join_valu` encodes a plain
        # register there directly
        self.vgpr_dst = self.dst == 2 and info["vdst"][1] not in ("SREG", "SDST", "SREG_NOVCC") and not is_half_operand(arch, fmt, info["vdst"])
        self.has_abs = "abs" in arch.formats[fmt]["fields"]
        # registers of the destination and of each source (0: encoded through `encode_src`'s general path), for the
        # plain VGPR operands `_join_valu` encodes directly; CDNA's tuple alignment is left to encode_vgpr
        self.cdna = arch.name == "cdna"
        self.dst_count = reg_count(info["vdst"][0]) if self.vgpr_dst else 0
        self.src_counts = tuple(0 if m64 else reg_count(info[field][0]) for field, m64, _ in self.srcs)


_OP_FACTS: dict[tuple[str, str, int], _OpFacts] = {}


def _op_facts(arch, fmt: str, op: int, name: str, info: dict) -> _OpFacts:
    key = (arch.key, fmt, op)
    facts = _OP_FACTS.get(key)
    if facts is None:
        facts = _OP_FACTS[key] = _OpFacts(arch, fmt, name, info)
    return facts


class _ValuPlan:
    """Everything split_valu derives from the opcode alone (names, which fields print as what, which modifiers can
    appear), worked out once per (tables, format, opcode, variant); the per-instruction work is reading the fields."""

    __slots__ = ("facts", "name", "printed", "dst", "vcc", "sdst_count", "srcs", "vop3p", "mix", "byte_sel", "two_entry",
                 "opsel_n", "nsrc", "index_key", "opsel_mask", "hi_ignored")

    def __init__(self, inst):
        arch, fmt, variant = inst.arch, inst.fmt, inst.variant
        info = inst.operand_info
        self.name = name = inst.mnemonic
        self.facts = facts = _op_facts(arch, fmt, inst.op, name, info)
        self.printed = dpp_mnemonic(name, fmt, variant) if variant else name
        self.vcc = _vcc(arch)
        # (scalar, count, kind, half) of the vdst operand, or None
        self.dst = None
        if facts.dst == 2:
            bits, optype, _ = info["vdst"]
            scalar = optype in ("SREG", "SDST", "SREG_NOVCC", "EXEC")
            count = _count(arch, info["vdst"]) if scalar else reg_count(bits)
            self.dst = (scalar, count, "a" if optype == "ACCVGPR" else "v", is_half_operand(arch, fmt, info["vdst"]))
        self.sdst_count = _count(arch, info.get("sdst", (64, "SREG", "M64"))) if fmt == "VOP3SD" else 0
        mix = fmt == "VOP3P" and _is_mix(name)
        # per source: (index, field, how, count, bits, half, m64, acc, acc_if_vgpr, mods); how: 0 a DPP/SDWA form's
        # src0 (vsrc0), 1 vsrc1, 2 a 9-bit source code; mods: 0 none, 1 VOP3 neg/abs, 2 mix neg/neg_hi, 3 DPP/SDWA bits
        srcs = []
        for i, (field, m64, half) in enumerate(facts.srcs):
            bits, optype, _ = info[field]
            how = 0 if i == 0 and variant else 1 if field == "vsrc1" else 2
            if mix:
                mods = 2
            elif fmt in ("VOP3", "VOP3SD"):
                mods = 1
            elif variant in ("DPP16", "SDWA", "SDWA_SDST") and i < 2:
                mods = 3
            else:
                mods = 0
            srcs.append((i, field, how, reg_count(bits), bits, half, m64, optype == "ACCVGPR", optype == "SRC_ACCVGPR", mods))
        self.srcs = tuple(srcs)
        self.nsrc = len(srcs)
        self.vop3p, self.mix = fmt == "VOP3P", mix
        self.index_key = fmt == "VOP3P" and vop3p_rules(arch, name, info).index_key >= 0
        # CDNA ops without halves ignore op_sel_hi (LLVM 22 prints such words without it; RDNA's decoder refuses them)
        self.hi_ignored = fmt == "VOP3P" and arch.name == "cdna" and not vop3p_rules(arch, name, info).op_sel
        self.byte_sel = _byte_sel_bits(arch, name)
        self.two_entry = _two_entry_opsel(name)
        self.opsel_n = opsel_sources(arch, name, len(srcs))
        self.opsel_mask = 0b1100 if _dpp_dot2_f16(arch, name, variant) else 0b1111


_VALU_PLANS: dict[tuple[str, str, int, str], _ValuPlan] = {}
_SRC_NEG_ABS = (("src0_neg", "src0_abs"), ("src1_neg", "src1_abs"))


def _bitop3_value(fields: dict[str, int]) -> int:
    """gfx950's v_bitop3 truth table, held in the VOP3 modifier bits: [2:0] in neg, [5:3] in abs, [7:6] in omod."""
    return fields.get("neg", 0) | fields.get("abs", 0) << 3 | fields.get("omod", 0) << 6


def _split_bitop3(inst) -> Split:
    """v_bitop3_b16/b32: a plain VOP3 whose neg/abs/omod bits are the `bitop3:N` truth table (LLVM prints N in hex
    from 10 on)."""
    value = _bitop3_value(inst.fields)
    plain = type(inst)(inst.arch, inst.fmt, inst.op, {**inst.fields, "neg": 0, "abs": 0, "omod": 0}, inst.literal, inst.variant)
    name, ops, mods = _split_valu(plain)
    if value:
        mods["bitop3"] = Sym(value, f"{value:#x}" if value > 9 else str(value))
    return name, ops, mods


# VOP3 opcodes whose modifier bits mean something else: gfx950's v_bitop3 (a truth table in neg/abs/omod) and
# v_permlane16/32_swap (fi and bound_ctrl in op_sel bits 0 and 1)
_REPURPOSED = ("v_bitop3_", "v_permlane16_swap_", "v_permlane32_swap_")


@cache
def _repurposed_opcodes(key: str, fmt: str) -> frozenset[int]:
    arch = get_arch(key)
    return frozenset(op for op, (name, _) in arch.ops.get(fmt, {}).items() if name.startswith(_REPURPOSED)) if fmt == "VOP3" else frozenset()


def _split_permlane_swap(inst) -> Split:
    """v_permlane16_swap_b32_e64 / v_permlane32_swap_b32_e64: op_sel bit 0 is fi, bit 1 bound_ctrl (LLVM's spelling)."""
    opsel = inst.fields.get("opsel", 0)
    plain = type(inst)(inst.arch, inst.fmt, inst.op, {**inst.fields, "opsel": 0}, inst.literal, inst.variant)
    name, ops, mods = _split_valu(plain)
    if opsel & 2:
        mods["bound_ctrl"] = 1
    if opsel & 1:
        mods["fi"] = 1
    return name, ops, mods


def _join_permlane_swap(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of _split_permlane_swap. As in DPP, LLVM sets the bound_ctrl bit for bound_ctrl:0 and bound_ctrl:1."""
    bound = "bound_ctrl" in mods
    mods.pop("bound_ctrl", None)
    fi = int(mods.pop("fi", 0))  # type: ignore[call-overload]
    if "op_sel" in mods:
        raise EncodeError(f"{draft.name}: write its op_sel bits as fi:1 and bound_ctrl:1")
    _join_valu(draft, ops, mods)
    draft.fields["opsel"] = int(bool(fi)) | int(bound) << 1


def split_valu(inst) -> Split:
    """Operands and modifiers of any vector ALU instruction."""
    if inst.op in _repurposed_opcodes(inst.arch.key, inst.fmt):
        return _split_bitop3(inst) if inst.mnemonic.startswith("v_bitop3_") else _split_permlane_swap(inst)
    return _split_valu(inst)


def _split_valu(inst) -> Split:
    fmt, variant, arch = inst.fmt, inst.variant, inst.arch
    if fmt == "VOPD":
        return _split_vopd(inst)
    if variant == "MFMA" or fmt == "VOP3PX2":
        return _split_mfma(inst)
    key = (arch.key, fmt, inst.op, variant)
    plan = _VALU_PLANS.get(key)
    if plan is None:
        plan = _VALU_PLANS[key] = _ValuPlan(inst)
    fields = inst.fields
    name, facts = plan.name, plan.facts
    ops: list = []
    mods: Mods = {}
    if plan.dst is not None:
        scalar, count, kind, half = plan.dst
        dst = scalar_operand(arch, fields["vdst"], count) if scalar else plain_reg(kind, fields["vdst"], count)
        ops.append(_as_half(dst, name) if half else dst)
    elif facts.dst == 3:
        # gfx9's VOPC SDWA writes any lane mask: the sd bit selects the sdst field over vcc
        ops.append(scalar_operand(arch, fields["sdst"], arch.wave // 32) if variant == "SDWA_SDST" and fields.get("sd") else plan.vcc)
    if plan.sdst_count:
        ops.append(scalar_operand(arch, fields["sdst"], plan.sdst_count))
    if facts.writes_vcc:
        ops.append(plan.vcc)
    for i, field, how, count, bits, half, m64, acc, acc_if_vgpr, kind in plan.srcs:
        raw = fields[field]
        if how == 0:
            operand: Operand = plain_reg("v", fields["vsrc0"], count)
            if fields.get("s0") and variant.startswith("SDWA"):  # an SGPR, special register or inline constant
                operand = _sdwa_scalar(arch, fields["vsrc0"], bits)
        elif how == 1:
            operand = plain_reg("v", raw, count)
            if fields.get("s1") and variant.startswith("SDWA"):
                operand = _sdwa_scalar(arch, raw, bits)
        elif m64 and raw < 256:
            operand = scalar_operand(arch, raw, arch.wave // 32)
        elif acc or (acc_if_vgpr and raw >= 256):
            operand = plain_reg("a", raw - 256, count)
        else:
            operand = decode_src(arch, raw, bits, inst.literal)
        if half:
            operand = _as_half(operand, name)
        if kind == 1:
            operand = with_mods(operand, bool(fields.get("neg", 0) >> i & 1), bool(fields.get("abs", 0) >> i & 1))
        elif kind == 2:
            operand = with_mods(operand, bool(fields.get("neg", 0) >> i & 1), bool(fields.get("neg_hi", 0) >> i & 1))
        elif kind == 3:
            neg, abs_ = _SRC_NEG_ABS[i]
            operand = with_mods(operand, bool(fields.get(neg)), bool(fields.get(abs_)))
        ops.append(operand)
    if facts.reads_vcc:
        ops.append(plan.vcc)
    if facts.k_at == 1:
        ops.append(Lit((inst.literal or 0) & facts.k_mask))
    elif facts.k_at == 2:
        ops.insert(len(ops) - 1, Lit((inst.literal or 0) & facts.k_mask))
    if facts.long:
        _split_long_mods(plan, fields, mods)
    if variant:
        _split_variant_mods(inst, mods)
    return plan.printed, ops, mods


def _sdwa_scalar(arch, code: int, bits: int) -> Operand:
    """A non-VGPR SDWA source (its S bit set): the 8-bit code of an SGPR, special register or inline constant."""
    if code == 255:
        raise DecodeError("an SDWA source cannot be a literal constant (code 255)")
    return decode_src(arch, code, bits, None)


def _fixed_sdwa_dst(name: str) -> bool:
    """gfx940+'s fp8/bf8 -> f32 conversions write whole dwords: their SDWA form has no dst_sel/dst_unused (LLVM neither
    prints nor takes them; the bits hold DWORD and UNUSED_PAD)."""
    return name.startswith(("v_cvt_f32_fp8", "v_cvt_f32_bf8", "v_cvt_pk_f32_fp8", "v_cvt_pk_f32_bf8"))


def _is_mix(name: str) -> bool:
    """v_fma_mix*/v_mad_mix*: f16/f32 sources whose neg_lo/neg_hi bits are each source's -x and |x| (LLVM prints and
    takes them as source modifiers)."""
    return "_mix" in name


class Vop3pRules:
    """Which VOP3P modifiers and operand kinds LLVM takes for an RDNA opcode, read off its sources' data formats (LLVM's MC
    tests, gfx11/gfx12): op_sel/op_sel_hi pick 16-bit halves, so only ops with 16-bit-pair (or mixed-precision)
    sources have them (gfx11's 16-bit-result WMMA also selects the result half, op_sel:[0,0,1]); neg_lo on a signed
    8/4-bit integer source is its signedness and such ops have no neg_hi; fp8/bf8 sources, unsigned integer sources,
    integer accumulators and sparse indices take no negation; clamp is for integer results (and non-matrix float
    ones), not fp8/bf8 dots or float matrix results; matrix sources and the sparse index are VGPRs, a matrix
    accumulator a VGPR or an inline constant. SWMMAC's op_sel bits are index_key:0..1 (wave32)."""

    __slots__ = ("op_sel", "dst_half", "index_key", "neg_lo", "neg_hi", "clamp", "vgpr_only", "no_sgpr", "no_op_sel_bits")

    def __init__(self, arch, name: str, info: dict):
        dfmts = [info[f][2] for f in ("src0", "src1", "src2") if f in info]
        rdna = arch.name in ("rdna3", "rdna4")
        matrix = any(d.startswith("WMMA") for d in dfmts)
        # CDNA's 8-bit and 4-bit integer dots have no halves either (LLVM 21/22 refuse op_sel there; 19 took it)
        self.op_sel = (not rdna and not any(d.startswith(("PK4_", "PK8_")) for d in dfmts)) or _is_mix(name) or \
            any(d.startswith("PK2_") for d in dfmts)
        # gfx11 WMMA with a 16-bit result: op_sel:[0,0,1] writes the high halves
        result = info.get("vdst", (0, "", ""))[2]
        self.dst_half = rdna and arch.name == "rdna3" and matrix and result.startswith("WMMA_DC") and result.endswith(("_F16", "_BF16"))
        # the 4-bit 16x16x64 op's index has no slices to pick in wave32
        self.index_key = 1 if rdna and name.startswith("v_swmmac") and "x64_iu4" not in name else -1
        self.neg_lo = self.neg_hi = 7
        self.clamp = True
        # gfx940+ dot products: LLVM takes op_sel:[0,0,0] and no op_sel_hi at all (invalid op_sel operand; gfx90a takes both)
        self.no_op_sel_bits = arch.key == "cdna" and name.startswith("v_dot")
        self.vgpr_only = self.no_sgpr = 0
        if name.startswith("v_mfma_ld_scale"):  # gfx950's scale load: op_sel picks bytes; no negation, no clamp (mai-gfx950-err.s)
            self.neg_lo = self.neg_hi = 0
            self.clamp = False
        if not rdna:
            return
        for i, d in enumerate(dfmts):
            if d.endswith(("IU8", "IU4")):
                if arch.name == "rdna4":  # gfx11 still takes neg_hi there
                    self.neg_hi &= ~(1 << i)
            elif d.endswith(("_U8", "_U4", "FP8", "BF8", "_I32", "INDEX_SET")) and (matrix or d.startswith("PK")):
                self.neg_lo &= ~(1 << i)
                self.neg_hi &= ~(1 << i)
            if matrix and (d.startswith("WMMA_AB") or d == "WMMA_INDEX_SET"):
                self.vgpr_only |= 1 << i
            elif matrix:
                self.no_sgpr |= 1 << i
        if any(d.endswith(("FP8", "BF8")) for d in dfmts) or (matrix and not result.endswith("I32")):
            self.clamp = False


_VOP3P_RULES: dict[tuple[str, str], Vop3pRules] = {}


def vop3p_rules(arch, name: str, info: dict) -> Vop3pRules:
    key = (arch.key, name)
    rules = _VOP3P_RULES.get(key)
    if rules is None:
        rules = _VOP3P_RULES[key] = Vop3pRules(arch, name, info)
    return rules


def _vgpr_code(code: int) -> bool:
    return code >= VGPR_BASE


# the inline constants of a 9-bit source code: integers (128..208), floats (INLINE_FLOATS) and 1/(2*pi) at 248
_INLINE_CODES = frozenset(code for code in range(256) if 128 <= code <= 208 or code in INLINE_FLOATS or code == INV_2PI_CODE)


def _inline_code(code: int) -> bool:
    """An inline integer or float constant of a 9-bit source code (_INLINE_CODES)."""
    return code in _INLINE_CODES


def vop3p_word_problem(arch, name: str, info: dict, fields: dict) -> str | None:
    """Why a decoded RDNA VOP3P word is not an instruction LLVM (and our assembler) accepts, or None: a modifier bit
    the opcode does not take (see `Vop3pRules`), or a matrix operand that is not a VGPR (nor, for an accumulator, an
    inline constant). LLVM's disassembler calls such words invalid encodings; printed, they would be text the
    assembler refuses."""
    rules = vop3p_rules(arch, name, info)
    srcs = [f for f in ("src0", "src1", "src2") if f in info]
    nsrc = len(srcs)
    used = (1 << nsrc) - 1
    opsel = fields.get("opsel", 0) & 7
    opsel_hi = (fields.get("opsel_hi", 3) | fields.get("opsel_hi2", 1) << 2) & 7
    if rules.index_key >= 0:
        if opsel & 4 or opsel & 3 > rules.index_key:
            return f"index_key:{opsel & 3}{' with the result op_sel bit' if opsel & 4 else ''} (it takes 0..{rules.index_key})"
    elif not rules.op_sel and opsel and not (rules.dst_half and opsel == 4):
        return f"op_sel bits {opsel:#05b} (its sources are not pairs of 16-bit halves)"
    if not rules.op_sel and opsel_hi & used != used:
        return f"op_sel_hi bits {opsel_hi:#05b} (its sources are not pairs of 16-bit halves)"
    for key, field, allowed in (("neg_lo", "neg", rules.neg_lo), ("neg_hi", "neg_hi", rules.neg_hi)):
        if fields.get(field, 0) & used & ~allowed:
            return f"{key} on a source that takes none"
    if fields.get("clmp") and not rules.clamp:
        return "clamp (not for fp8/bf8 dots, float matrix results or the scale load)"
    for i, field in enumerate(srcs):
        code = fields.get(field, 256)
        if rules.vgpr_only >> i & 1 and not _vgpr_code(code):
            return f"{field} code {code}: a matrix operand is a VGPR range"
        if rules.no_sgpr >> i & 1 and not _vgpr_code(code) and not _inline_code(code):
            return f"{field} code {code}: a matrix accumulator is a VGPR range or an inline constant"
    return None


def _split_long_mods(plan: _ValuPlan, fields: dict, mods: Mods) -> None:
    nsrc = plan.nsrc
    if plan.vop3p:
        opsel = fields.get("opsel", 0)
        opsel_hi = fields.get("opsel_hi", 3) | fields.get("opsel_hi2", 1) << 2
        mix = plan.mix  # its neg bits print as source modifiers (split_valu)
        default_hi = 0 if mix else (1 << nsrc) - 1
        if plan.index_key and opsel & 3:
            mods["index_key"] = opsel & 3  # SWMMAC: which slice of the sparsity index
        elif opsel & ((1 << nsrc) - 1):
            mods["op_sel"] = flag_list(opsel, nsrc)
        if opsel_hi & ((1 << nsrc) - 1) != default_hi and not plan.hi_ignored:
            mods["op_sel_hi"] = flag_list(opsel_hi, nsrc)
        if fields.get("neg", 0) & ((1 << nsrc) - 1) and not mix:
            mods["neg_lo"] = flag_list(fields["neg"], nsrc)
        if fields.get("neg_hi", 0) & ((1 << nsrc) - 1) and not mix:
            mods["neg_hi"] = flag_list(fields["neg_hi"], nsrc)
        if fields.get("clmp"):
            mods["clamp"] = True
        return
    opsel = fields.get("opsel", 0) & plan.opsel_mask
    byte_sel = plan.byte_sel
    if byte_sel and opsel and not opsel & ~(1 << byte_sel[0] | 1 << byte_sel[1]):
        mods["byte_sel"] = (opsel >> byte_sel[0] & 1) << 1 | (opsel >> byte_sel[1] & 1)
    elif plan.two_entry:  # the other two bits mean nothing here: LLVM neither prints nor takes them
        if opsel & 3:
            mods["op_sel"] = flag_list(opsel, 2)
    elif opsel:
        mods["op_sel"] = flag_list(opsel, plan.opsel_n) + [opsel >> 3 & 1]
    if fields.get("clmp"):
        mods["clamp"] = True
    if fields.get("omod"):
        key, value = OMOD[fields["omod"]]
        mods[key] = value


def opsel_sources(arch, name: str, nsrc: int) -> int:
    """Sources an RDNA VOP3 op_sel list names before the destination's entry: the multiply-accumulates (v_fmac_f16_e64)
    count their tied accumulator as a third source, so LLVM 19 spells op_sel:[src0,src1,src2,dst] (LLVM 15 rejects it);
    gfx940's stochastic-rounding fp8 conversions use the src2 bit as a byte select, op_sel:[0,0,1,1]."""
    if nsrc == 2 and ("mac_" in name if arch.name != "cdna" else
                      name.startswith(("v_cvt_sr_fp8_f32", "v_cvt_sr_bf8_f32", "v_cvt_scalef32_pk_fp4_f16", "v_cvt_scalef32_pk_fp4_bf16"))):
        return 3
    return nsrc


def _byte_sel_bits(arch, name: str) -> tuple[int, int] | None:
    """gfx12's fp8/bf8 conversions spell two op_sel bits as byte_sel:N: (the op_sel bit of N's high bit, of its low
    bit), from LLVM's gfx12 encodings (v_cvt_f32_fp8: src0's op_sel bits 0/1; v_cvt_sr_fp8_f32: the src2/dst bits)."""
    if arch.name != "rdna4":
        return None
    if name.startswith(("v_cvt_f32_fp8", "v_cvt_f32_bf8")):
        return (0, 1)
    if name.startswith(("v_cvt_sr_fp8_f32", "v_cvt_sr_bf8_f32")):
        return (3, 2)
    return None


def _dpp_dot2_f16(arch, name: str, variant: str) -> bool:
    """RDNA's v_dot2_f16_f16 / v_dot2_bf16_bf16 in DPP form: sources VGPRs only, no op_sel on them (only on src2 and the
    result). LLVM refuses such text and prints such words without those bits, as ours does."""
    return arch.name != "cdna" and variant.startswith("DPP") and name.startswith(("v_dot2_f16_f16", "v_dot2_bf16_bf16"))


def _two_entry_opsel(name: str) -> bool:
    """v_permlane(x)16(_var)_b32: op_sel:[a,b] are the fetch-inactive and bound-control bits (opsel bits 0 and 1)."""
    return name.startswith(("v_permlane16_", "v_permlanex16_"))


def _split_variant_mods(inst, mods: Mods) -> None:
    fields, variant = inst.fields, inst.variant
    if variant == "DPP8":
        mods["dpp8"] = [fields[f"lane_sel_{i}"] for i in range(8)]
        src0 = fields["src0"]
        if src0 == 234:
            mods["fi"] = 1
        return
    if variant.startswith("SDWA"):
        if fields.get("clmp"):
            mods["clamp"] = True
        if fields.get("omod"):
            key, value = OMOD[fields["omod"]]
            mods[key] = value
        if "dst_sel" in fields and not _fixed_sdwa_dst(inst.mnemonic):
            mods["dst_sel"] = SDWA_SEL[min(fields["dst_sel"], 6)]
            mods["dst_unused"] = SDWA_UNUSED[min(fields["dst_unused"], 2)]
        for i in range(2):
            if f"src{i}_sel" in fields and (i == 0 or inst.fmt != "VOP1"):
                mods[f"src{i}_sel"] = SDWA_SEL[min(fields[f"src{i}_sel"], 6)]
        return
    ctrl = fields["dpp"]
    if ctrl <= 0xFF:
        mods["quad_perm"] = [(ctrl >> (2 * i)) & 3 for i in range(4)]
    elif ctrl in DPP_SINGLE:
        key, value = DPP_SINGLE[ctrl]
        mods[key] = value
    else:
        for first, last, key, base in DPP_RANGES:
            if first <= ctrl <= last:
                mods[_dpp_range_name(inst.arch, key)] = ctrl - first + base
                break
        else:
            mods["dpp_ctrl"] = ctrl
    mods["row_mask"] = Sym(fields["row_mask"], f"{fields['row_mask']:#x}")
    mods["bank_mask"] = Sym(fields["bank_mask"], f"{fields['bank_mask']:#x}")
    if fields.get("bc"):
        mods["bound_ctrl"] = 1
    if fields.get("fi"):
        mods["fi"] = 1


def _split_vopd(inst) -> Split:
    arch, fields = inst.arch, inst.fields
    halves = []
    for side, opcode in (("x", inst.op), ("y", fields["opy"])):
        name, info = arch.ops["VOPD"][opcode][0], {f[0]: f for f in arch.ops["VOPD"][opcode][1]}
        dst = fields[f"vdst{side}"]
        if side == "y":
            dst = (dst << 1) | ((fields["vdstx"] & 1) ^ 1)
        ops: list = [Reg("v", dst), decode_src(arch, fields[f"src{side}0"], 32, inst.literal)]
        if "vsrcy1" in info:
            ops.append(Reg("v", fields[f"vsrc{side}1"]))
        if "fmaak" in name:
            ops.append(Lit(inst.literal or 0))
        elif "fmamk" in name:
            ops.insert(2, Lit(inst.literal or 0))
        halves.append((name, ops))
    return halves[0][0], [*halves[0][1], VopdJoin(halves[1][0]), *halves[1][1]], {}


class VopdJoin(str):
    """The `::` separator of a VOPD pair, carrying the Y mnemonic (builders also accept a plain string here)."""


# f8f6f4 MFMA: cbsz (A) and blgp (B) name each matrix's element format (fp8, bf8, fp6, bf6, fp4), which sets how many
# VGPRs the operand spans (LLVM checks and prints these widths).
F8F6F4_REGS = (8, 8, 6, 6, 4)


def _mfma_src_bits(inst, index: int) -> int:
    bits = inst.operand_info[("src0", "src1", "src2")[index]][0]
    if index < 2 and "f8f6f4" in inst.mnemonic:
        fmt_code = inst.fields.get("cbsz" if index == 0 else "blgp", 0)
        return 32 * F8F6F4_REGS[fmt_code] if fmt_code < len(F8F6F4_REGS) else bits
    return bits


def _split_mfma(inst) -> Split:
    fields, info, arch = inst.fields, inst.operand_info, inst.arch
    acc_cd = bool(fields.get("acc_cd"))
    ops: list = [_dst_operand(arch, info, "vdst", fields["vdst"], acc_cd)]
    for i, field in enumerate(("src0", "src1", "src2")):
        if field not in info:
            continue
        raw = fields[field]
        operand = decode_src(arch, raw, _mfma_src_bits(inst, i), None)
        # acc_cd names the accumulator's file; a sparse MFMA's src2 is its index VGPR
        in_acc = (i == 2 and acc_cd and info[field][1] != "SRC_VGPR") or (i < 2 and fields.get("acc", 0) >> i & 1)
        if isinstance(operand, Reg) and operand.kind == "v" and in_acc:
            operand = Reg("a", operand.index, operand.count)
        ops.append(operand)
    mods: Mods = {}
    if _blgp_is_neg(inst.arch, inst.mnemonic):
        if fields.get("blgp"):
            mods["neg"] = flag_list(fields["blgp"], 3)
        fields = {**fields, "blgp": 0}
    if inst.fmt == "VOP3PX2":
        ops += [decode_src(arch, fields[f"scale_src{i}"], 32, None) for i in range(2)]
        # The scale word's selects: LLVM always prints op_sel_hi for the pair (its defaults are 0, unlike VOP3P's).
        if fields.get("opsel"):
            mods["op_sel"] = flag_list(fields["opsel"], 3)
        mods["op_sel_hi"] = flag_list(fields.get("opsel_hi", 0), 3)
        if fields.get("neg"):
            mods["neg_lo"] = flag_list(fields["neg"], 3)
        if fields.get("neg_hi"):
            mods["neg_hi"] = flag_list(fields["neg_hi"], 3)
    for key in ("cbsz", "abid", "blgp"):
        if fields.get(key, 0) != _mfma_default(inst.fmt, key):
            mods[key] = fields.get(key, 0)
    return inst.mnemonic, ops, mods


def mfma_overlap(dst_kind: str, dst: int, dst_count: int, src2_kind: str, src2: int, src2_count: int) -> bool:
    """Whether an MFMA's accumulator input partly overlaps its result, which LLVM refuses for results wider than 128
    bits (source 2 operand must not partially overlap with dst): the same registers, or none in common."""
    return dst_count > 4 and dst_kind == src2_kind != "" and src2 != dst and src2 < dst + dst_count and dst < src2 + src2_count


def _blgp_is_neg(arch, mnemonic: str) -> bool:
    """gfx940+ f64 MFMAs have no B-matrix broadcast: the blgp bits negate the sources (LLVM's neg:[a,b,c]); gfx90a
    still calls them blgp."""
    return arch.key == "cdna" and "_f64" in mnemonic


def _mfma_default(fmt: str, key: str) -> int:
    # LLVM encodes the MFMA word of a scaled pair with abid bit 0 set (every gfx950 MC test vector has it).
    return 1 if fmt == "VOP3PX2" and key == "abid" else 0


# ----------------------------------------------------------------------------- building


def join_valu(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of split_valu: fill the draft's fields from operands and modifiers."""
    if draft.fmt == "VOP3" and draft.name.startswith(_REPURPOSED):
        (_join_bitop3 if draft.name.startswith("v_bitop3_") else _join_permlane_swap)(draft, ops, mods)
        return
    _join_valu(draft, ops, mods)


def _join_bitop3(draft: Draft, ops: list, mods: Mods) -> None:
    """v_bitop3: `bitop3:N` (0..255) in the neg/abs/omod bits; sources take no neg/abs, and there is no omod."""
    raw = mods.pop("bitop3", 0)
    value = raw.value if isinstance(raw, Sym) else int(raw)  # type: ignore[call-overload]
    if not 0 <= value <= 0xFF:
        raise EncodeError(f"{draft.name}: bitop3 {value} is outside 0..255")
    _join_valu(draft, ops, mods)
    fields = draft.fields
    if fields.get("neg") or fields.get("abs") or fields.get("omod"):
        raise EncodeError(f"{draft.name} takes no source modifiers or mul/div (their bits hold bitop3)")
    fields.update(neg=value & 7, abs=value >> 3 & 7, omod=value >> 6)


def _join_valu(draft: Draft, ops: list, mods: Mods) -> None:
    fmt, arch, name, fields = draft.fmt, draft.arch, draft.name, draft.fields
    if fmt == "VOPD":
        _join_vopd(draft, ops, mods)
        return
    if draft.variant == "MFMA":
        _join_mfma(draft, ops, mods)
        return
    if fmt == "VOP3PX2":
        _join_scaled_mfma(draft, ops, mods)
        return
    facts = _op_facts(arch, fmt, draft.op, name, draft.info)
    long = facts.long
    if mods and not _DPP_KEY_SET.isdisjoint(mods):
        draft.variant = "DPP8" if "dpp8" in mods else "DPP16"
        if f"{fmt}_{draft.variant}" not in arch.formats:  # gfx9 VOPC, gfx9 and gfx12 VOP3P's dpp8 ...
            raise EncodeError(f"{name}: {'dpp8' if draft.variant == 'DPP8' else 'dpp'} variant of this instruction is not supported on {arch.name}")
        if arch.name != "cdna" and (problem := dp_dpp_problem(arch, draft.info, None)) is not None:
            raise EncodeError(f"{name}: {problem}")
        if no_dpp_form(arch.name, arch.ops[fmt][draft.op][0]):
            raise EncodeError(f"{name}: {'e64_dpp' if long else 'dpp'} variant of this instruction is not supported")
    elif mods and not _SDWA_KEY_SET.isdisjoint(mods):
        draft.variant = "SDWA" if f"{fmt}_SDWA" in arch.formats else "SDWA_SDST"
        if (problem := sdwa_problem(name, draft.info)) is not None:
            raise EncodeError(f"{name}: {problem}")
    # `ops` is build's own copy of the operands: taken apart in place
    if facts.k_at == 1:
        fields["_lit"] = _literal_of(draft, ops.pop())
    elif facts.k_at == 2:
        fields["_lit"] = _literal_of(draft, ops.pop(len(ops) - 2))
    if facts.dst == 1:
        fields["vdst"] = 126  # v_cmpx_*_e64 writes EXEC: the destination field names exec_lo
    elif facts.dst == 2:
        if facts.vgpr_dst and ops and type(first := ops[0]) is Reg and first.kind == "v" and not first.neg and not first.abs:
            if first.count == facts.dst_count and first.half != "h" and (first.count == 1 or not facts.cdna):
                fields["vdst"] = ops.pop(0).index  # what encode_vgpr gives a register of the destination's width
            else:
                fields["vdst"] = encode_vgpr(draft, "vdst", ops.pop(0))
        else:
            fields["vdst"] = _encode_dst(draft, ops, "vdst")
    elif facts.dst == 3 and draft.variant == "SDWA_SDST" and ops and not (isinstance(ops[0], Special) and ops[0].code == 106):
        sdst = _pop(draft, ops, "sdst")
        _lane_mask(draft, "sdst", sdst)
        fields.update(sd=1, sdst=encode_scalar(arch, f"{name} sdst", sdst))
    elif facts.dst == 3:
        _take_implicit(draft, ops, "vcc")
    if fmt == "VOP3SD":  # the carry-out / div_scale condition: a lane mask
        sdst = _pop(draft, ops, "sdst")
        _lane_mask(draft, "sdst", sdst)
        fields["sdst"] = encode_scalar(arch, f"{name} sdst", sdst)
    if facts.writes_vcc:
        _take_implicit(draft, ops, "vcc")
    if facts.reads_vcc:
        if not ops:
            raise EncodeError(f"{name} expects vcc as its last operand")
        last = ops.pop()
        if not isinstance(last, Special) or last.code != 106:
            raise EncodeError(f"{name} reads vcc implicitly; its last operand must be {_vcc(arch)}, got {last}")
        _lane_mask(draft, "the carry-in", last)
    srcs = facts.srcs
    if len(ops) != len(srcs):
        raise EncodeError(f"{name} takes {len(srcs)} source operand(s), got {len(ops)}")
    neg = abs_ = 0
    allow_literal = not long or arch.vop3_literal
    variant = draft.variant
    counts = facts.src_counts
    for i, (field, m64, half) in enumerate(srcs):
        operand = ops[i]
        if half:
            operand = _from_half(draft, field, operand)
        kind = type(operand)
        if kind is Reg or kind is Special:
            value = operand
            if operand.neg:
                neg |= 1 << i
            if operand.abs:
                abs_ |= 1 << i
            if (kind is Reg and not variant and operand.kind == "v" and operand.count == counts[i] and operand.half != "h"
                    and (operand.count == 1 or not facts.cdna)):
                # a plain VGPR of the source's width: the code encode_src (or encode_vgpr for vsrc1) gives it
                fields[field] = operand.index if field == "vsrc1" else VGPR_BASE + operand.index
                continue
        else:
            value, n, a = split_mod_const(operand)
            neg |= n << i
            abs_ |= a << i
        if i == 0 and draft.variant:
            if draft.variant.startswith("SDWA") and not (isinstance(value, Reg) and value.kind == "v"):
                fields["s0"] = 1
                fields["vsrc0"] = _sdwa_scalar_code(draft, "src0", value)
            else:
                fields["vsrc0"] = encode_vgpr(draft, "src0", value)
            fields["src0"] = {"DPP16": 250, "DPP8": 234 if mods.get("fi") else 233}.get(draft.variant, 249)
        elif field == "vsrc1" and draft.variant.startswith("SDWA") and not (isinstance(value, Reg) and value.kind == "v"):
            fields["s1"] = 1
            fields["vsrc1"] = _sdwa_scalar_code(draft, "src1", value)
        elif field == "vsrc1":
            if not (isinstance(value, Reg) and value.kind == "v"):
                raise EncodeError(f"{name}: src1 of the e32 form must be a VGPR, got {value}; use the _e64 form")
            fields["vsrc1"] = encode_vgpr(draft, field, value)
        elif m64 and isinstance(value, Reg | Special):
            _lane_mask(draft, field, value)
            fields[field] = encode_scalar(arch, field, value)
        else:
            if fmt != "VOP3P" and draft.info[field][1] == "SRC_VGPR" and not (isinstance(value, Reg) and value.kind in ("v", "a")):
                # a VGPR-only source (permlanes, gfx950's packed scale conversions): LLVM: invalid operand for instruction
                raise EncodeError(f"{name}: {field} must be a VGPR, got {value}")
            fields[field] = encode_src(draft, field, value, allow_literal=allow_literal)
    if fmt == "VOP3P" and srcs:
        rules = vop3p_rules(arch, name, draft.info)
        for i, (field, _, _) in enumerate(srcs):
            value = split_mod_const(ops[i])[0]
            vgpr = isinstance(value, Reg) and value.kind in ("v", "a")
            if rules.vgpr_only >> i & 1 and not vgpr:
                raise EncodeError(f"{name}: {field} is a matrix operand: a VGPR range, got {value}")
            if rules.no_sgpr >> i & 1 and not vgpr and (isinstance(value, Reg | Special) or fields.get(field) == 255):
                raise EncodeError(f"{name}: {field} is a VGPR range or an inline constant, got {value}")
    if "_lit" in fields:
        draft.set_literal(fields.pop("_lit"))
    if (neg or abs_) and not long and draft.variant not in ("DPP16", "SDWA", "SDWA_SDST"):
        raise EncodeError(f"{name}: neg/abs source modifiers need the _e64 form")
    if (neg | abs_) & (plain := facts.plain):
        which = next(field for i, (field, _, _) in enumerate(srcs) if ((neg | abs_) & plain) >> i & 1)
        raise EncodeError(f"{name}: {which} takes no neg/abs (an integer or bit operand; only float operands take source modifiers)")
    if long:
        _join_long_mods(draft, len(srcs), neg, abs_, mods)
    else:
        for i in range(2):
            if neg >> i & 1:
                fields[f"src{i}_neg"] = 1
            if abs_ >> i & 1:
                fields[f"src{i}_abs"] = 1
    if draft.variant:
        _join_variant_mods(draft, mods)
    if mods:
        raise EncodeError(f"{name} does not take modifier(s) {', '.join(sorted(mods))}")
    if arch.name == "cdna" and long and name.startswith(NO_CLAMP_OMOD) and (fields.get("clmp") or fields.get("omod")):
        raise EncodeError(f"{name} takes no clamp or mul/div")
    if long and draft.variant in ("DPP16", "DPP8") and (problem := vop3_dpp_problem(arch, fmt, fields, draft.info)) is not None:
        raise EncodeError(f"{name}: {problem}")
    _check_constant_bus(draft, facts)


def plain_sources(name: str, fmt: str, info: dict, srcs: tuple) -> int:
    """Bit i set: source i (in `srcs` order) takes no neg/abs. LLVM gives source modifiers to float operands alone
    (and to v_cndmask's two values): an integer or bit operand's neg/abs is refused by its assembler ("not a valid
    operand") and its disassembler; VOP3P's neg_lo/neg_hi are rules of their own (vop3p_rules)."""
    if fmt == "VOP3P" or name.startswith(("v_cndmask_b", *_REPURPOSED)):  # bitop3 / permlane swaps: the bits are fields
        return 0
    return sum(1 << i for i, (field, _, _) in enumerate(srcs) if not _float_type(info.get(field, (0, "", "F"))[2]))


def _float_type(dfmt: str) -> bool:
    """F16, F32, F64, BF16 and packed pairs of them (PK2_F16, PK2_BF16, ...), as LLVM's operand types count floats."""
    return dfmt.split("_", 1)[-1].startswith(("F", "BF")) if dfmt.startswith("PK") else dfmt.startswith(("F", "BF"))


def no_dpp(info: dict) -> bool:
    """Ops with a scalar-only source (v_permlane16_b32's lane selects, v_readlane/v_writelane's lane, the v_s_* scalar
    floats) have no DPP form (LLVM: e64_dpp variant of this instruction is not supported)."""
    return any(info[f][1] in ("SSRC", "SSRC_LANESEL", "SREG") and info[f][2] != "M64" for f in ("src0", "src1", "src2") if f in info)


def _wide_vgpr_operand(info: dict) -> bool:
    """Whether an op has a 64-bit operand other than a lane mask (a "DP ALU" op to LLVM)."""
    return any(entry[0] == 64 and entry[2] != "M64" for entry in info.values())


def dp_dpp_problem(arch, info: dict, ctrl: int | None) -> str | None:
    """DPP of an op with a 64-bit VGPR operand (f64 arithmetic, v_mov_b64, 64-bit shifts, conversions to and from f64):
    RDNA has none (LLVM: dpp variant of this instruction is not supported), and CDNA's takes row_newbcast alone (LLVM's
    assembler refuses the rest; its disassembler prints such words with a comment in place of the control). `ctrl`:
    the DPP16 control, None for dpp8."""
    if arch.name == "cdna" and ctrl is not None and not 0x150 <= ctrl <= 0x15F and _wide_vgpr_operand(info):
        return "DP ALU dpp only supports row_newbcast"
    if arch.name != "cdna" and _wide_vgpr_operand(info):
        return "dpp variant of this instruction is not supported (it has 64-bit operands)"
    return None


# the ops with a 64-bit result that have an SDWA form all the same (gfx940+: an fp8/bf8 pair unpacked to two floats)
_SDWA_WIDE_RESULT = ("v_cvt_pk_f32_fp8", "v_cvt_pk_f32_bf8")


def sdwa_problem(name: str, info: dict) -> str | None:
    """SDWA selects bytes and words of 32-bit registers: no op with a 64-bit VGPR operand has an SDWA form (LLVM's
    assembler refuses it; its disassembler does not decode such a word as SDWA), but for the fp8/bf8 pair unpacks."""
    if _wide_vgpr_operand(info) and not name.startswith(_SDWA_WIDE_RESULT):
        return "sdwa variant of this instruction is not supported (it has 64-bit operands)"
    return None


def vop3_dpp_problem(arch, fmt: str, fields: dict[str, int], info: dict) -> str | None:
    """What LLVM refuses in a VOP3/VOP3P DPP form's sources: a literal anywhere, and in src1 anything but a VGPR on gfx11
    (gfx12 takes SGPRs and inline constants there, except in the mixed-precision VOP3P ops). VOP3P has DPP forms only
    for its float results that are not packed (v_dot2_f32_*, v_fma_mix*, gfx12's fp8/bf8 dots, whose sources are all
    VGPRs there): llvm-mc-22 refuses row_shl:1 on every v_pk_* op and the integer dots."""
    if no_dpp(info):
        return "this instruction has no DPP form"
    if fmt == "VOP3P" and not info.get("vdst", (0, "", ""))[2].startswith("F"):
        return "dpp variant of this instruction is not supported (a packed or integer result)"
    if fmt == "VOP3P" and any(d[2].endswith(("FP8", "BF8")) for d in info.values()) and fields.get("src2", VGPR_BASE) < VGPR_BASE:
        return "src2 of this DPP form must be a VGPR"
    if any(fields.get(f) == 255 for f in ("src1", "src2") if f in info):
        return "a DPP form takes no literal constant"
    if (arch.name == "rdna3" or fmt == "VOP3P") and "src1" in info and fields.get("src1", VGPR_BASE) < VGPR_BASE:
        return "src1 of this DPP form must be a VGPR"
    return None


# the 64-bit shifts read one scalar value on gfx10+ too (LLVM: violates constant bus restrictions)
_ONE_SCALAR_SHIFTS = ("v_lshlrev_b64", "v_lshrrev_b64", "v_ashrrev_i64")
# source codes that are no register: inline integers and floats (and 1/(2pi)), the literal marker, DPP/SDWA markers
_NOT_REGISTER = _INLINE_CODES | {233, 234, 249, 250, 255}


def _check_constant_bus(draft: Draft, facts) -> None:
    """A VALU instruction reads at most one scalar value on gfx9/CDNA and two on gfx10+ (one for the 64-bit shifts): the
    distinct SGPRs and special registers its sources and implicit VCC read, plus its literal (one, however often it is
    used). Inline constants are free; null is no read; gfx9's v_writelane may take m0 as its lane select besides."""
    problem = constant_bus_problem(draft.arch, draft.name, facts, draft.info, draft.fields, draft.variant, draft.literal)
    if problem is not None:
        raise EncodeError(f"{draft.name}: {problem}")


def constant_bus_problem(arch, name: str, facts, info: dict, fields: dict[str, int], variant: str, literal: int | None) -> str | None:
    """Why an instruction's sources break the constant bus limit (see _check_constant_bus), or None."""
    if variant:
        if variant[0] != "S":
            return None  # DPP: src0 is a VGPR; gfx11's VOP3 DPP reads at most two other sources
    else:
        scalars = 0
        for f in facts.bus_fields:
            if fields.get(f, VGPR_BASE) < VGPR_BASE:
                scalars += 1
        if scalars <= facts.bus_room:
            return None  # few enough non-VGPR sources, whatever they are
    used: set = set()
    for i, (field, _, _) in enumerate(facts.srcs):
        if i == 0 and variant:
            if not (variant.startswith("SDWA") and fields.get("s0")):
                continue
            code = fields.get("vsrc0", 0)
        elif field == "vsrc1":
            if not (variant.startswith("SDWA") and fields.get("s1")):
                continue
            code = fields.get("vsrc1", 0)
        else:
            code = fields.get(field, VGPR_BASE)
        if code >= VGPR_BASE or code in _NOT_REGISTER:
            if code == 255 and not variant:
                used.add(("literal", literal))
            continue
        if code == arch.null_code and arch.name != "cdna":
            continue
        if code == 124 and arch.name == "cdna" and name.startswith("v_writelane_b32"):
            continue
        # SGPR ranges of other widths are other registers (s0, s[0:1]); src_scc and the other src_* registers are one
        used.add(code if code >= 235 else (code, reg_count(info[field][0]) if field in info else 1))
    if facts.reads_vcc:
        used.add((106, arch.wave // 32))
    limit = 1 if arch.name == "cdna" or name.startswith(_ONE_SCALAR_SHIFTS) else 2
    if len(used) > limit:
        return (f"reads {len(used)} scalar values (SGPRs, special registers, literals, implicit vcc); {arch.name} allows {limit} "
                "per instruction (constant bus)")
    return None


def _sdwa_scalar_code(draft: Draft, what: str, value: Operand) -> int:
    """The 8-bit code of an SGPR, special register or inline constant as an SDWA source (no literals there)."""
    code = encode_src(draft, what, value, allow_literal=False)
    if code >= VGPR_BASE:
        raise EncodeError(f"{draft.name}: {what} must be a VGPR, an SGPR, a special register or an inline constant, got {value}")
    return code


def _literal_of(draft: Draft, operand: object) -> int:
    mask = 0xFFFF if draft.bits("vdst") == 16 else 0xFFFFFFFF
    if isinstance(operand, Lit | Sym):
        return operand.value & mask
    if isinstance(operand, float):
        return float_bits(operand, draft.dfmt("vdst"))
    if isinstance(operand, int):
        return operand & mask
    raise EncodeError(f"{draft.name}: expected a literal constant, got {operand!r}")


def _pop(draft: Draft, ops: list, what: str) -> Operand:
    if not ops:
        raise EncodeError(f"{draft.name} is missing its {what} operand")
    return ops.pop(0)


def _take_implicit(draft: Draft, ops: list, what: str) -> None:
    operand = _pop(draft, ops, what)
    if not (isinstance(operand, Special) and operand.code == 106):
        raise EncodeError(f"{draft.name}: expected {_vcc(draft.arch)} here, got {operand}")
    _lane_mask(draft, what, operand)


def _lane_mask(draft: Draft, what: str, operand: object) -> None:
    """A lane mask (VCC-like operand) is one SGPR per 32 lanes: vcc_lo or s10 in wave32, vcc or s[10:11] in wave64, as
    LLVM requires of each wave size."""
    want = draft.arch.wave // 32
    if isinstance(operand, Reg | Special) and operand.count != want:
        example = "vcc_lo or s10" if want == 1 else "vcc or s[10:11]"
        raise EncodeError(f"{draft.name}: {what} is a lane mask, {want} SGPR(s) in wave{draft.arch.wave} ({example}); got {operand}")


def _encode_dst(draft: Draft, ops: list, field: str) -> int:
    operand = _from_half(draft, field, _pop(draft, ops, field))
    if getattr(operand, "neg", False) or getattr(operand, "abs", False):  # LLVM: not a valid operand
        raise EncodeError(f"{draft.name}: the destination takes no neg/abs, got {operand}")
    optype = draft.info[field][1]
    if optype in ("SREG", "SDST", "SREG_NOVCC"):
        if draft.info[field][2] == "M64":
            _lane_mask(draft, field, operand)
        else:
            check_width(draft, field, operand)
        return encode_scalar(draft.arch, f"{draft.name} {field}", operand)
    return encode_vgpr(draft, field, operand)


def _join_long_mods(draft: Draft, nsrc: int, neg: int, abs_: int, mods: Mods) -> None:
    fields, name = draft.fields, draft.name
    if draft.fmt == "VOP3P":
        mix = _is_mix(name)
        if abs_ and not mix:
            raise EncodeError(f"{name}: packed instructions take neg_lo/neg_hi, not abs")
        rules = vop3p_rules(draft.arch, name, draft.info)
        if "index_key" in mods:
            if rules.index_key < 0:
                raise EncodeError(f"{name} takes no index_key (only the sparse matrix ops, v_swmmac_*, do)")
            key = int(mods.pop("index_key"))  # type: ignore[call-overload]
            if not 0 <= key <= rules.index_key:
                raise EncodeError(f"{name}: index_key:{key} is out of range 0..{rules.index_key}")
            if "op_sel" in mods:
                raise EncodeError(f"{name}: index_key and op_sel set the same bits; use index_key")
            mods["op_sel"] = [key & 1, key >> 1 & 1, 0]
        elif not rules.op_sel and ("op_sel" in mods or "op_sel_hi" in mods):
            half = rules.dst_half and "op_sel_hi" not in mods and list(mods["op_sel"])[:2] == [0, 0]  # type: ignore[call-overload]
            if not half:
                what = "only op_sel:[0,0,1] (the result's high halves)" if rules.dst_half else "no op_sel/op_sel_hi"
                raise EncodeError(f"{name} takes {what}: its sources are not pairs of 16-bit halves")
        if rules.no_op_sel_bits and ("op_sel_hi" in mods or list_flags(mods.get("op_sel", 0))):  # type: ignore[arg-type]
            raise EncodeError(f"{name}: invalid op_sel operand: gfx940+ dot products take no op_sel bits and no op_sel_hi")
        opsel = list_flags(mods.pop("op_sel", 0))  # type: ignore[arg-type]
        default_hi = 0 if mix else 7
        hi_value = mods.pop("op_sel_hi", None)
        opsel_hi = default_hi if hi_value is None else list_flags(hi_value) | (7 & ~((1 << nsrc) - 1) if default_hi else 0)  # type: ignore[arg-type]
        fields.update(opsel=opsel & 7, opsel_hi=opsel_hi & 3, opsel_hi2=opsel_hi >> 2 & 1)
        fields["neg"] = list_flags(mods.pop("neg_lo", 0)) | neg  # type: ignore[arg-type]
        fields["neg_hi"] = list_flags(mods.pop("neg_hi", 0)) | (abs_ if mix else 0)  # type: ignore[arg-type]
        for key, field, allowed in (("neg_lo", "neg", rules.neg_lo), ("neg_hi", "neg_hi", rules.neg_hi)):
            if fields[field] & ((1 << nsrc) - 1) & ~allowed:
                which = [f"src{i}" for i in range(nsrc) if allowed >> i & 1]
                raise EncodeError(f"{name}: {key} applies to {', '.join(which) if which else 'none of its sources'} here")
        fields["clmp"] = int(bool(mods.pop("clamp", False)))
        if fields["clmp"] and not rules.clamp:
            raise EncodeError(f"{name} takes no clamp (not for fp8/bf8 dots, float matrix results or the scale load)")
        return
    fields["neg"] = neg
    has_abs = _op_facts(draft.arch, draft.fmt, draft.op, name, draft.info).has_abs
    if abs_ and not has_abs:
        raise EncodeError(f"{name} takes no abs modifiers")
    if has_abs:
        fields["abs"] = abs_
    if not mods:
        fields["clmp"] = 0
        return
    if "byte_sel" in mods:
        bits = _byte_sel_bits(draft.arch, name)
        value = int(mods.pop("byte_sel"))  # type: ignore[call-overload]
        if bits is None or not 0 <= value <= 3 or "op_sel" in mods:
            raise EncodeError(f"{name}: byte_sel:0..3 is gfx12's spelling for its fp8/bf8 conversions (alone, without op_sel)")
        fields["opsel"] = (value >> 1) << bits[0] | (value & 1) << bits[1]
    if "op_sel" in mods:
        flags = list(mods.pop("op_sel"))  # type: ignore[call-overload]
        nsel = opsel_sources(draft.arch, name, nsrc)
        if _two_entry_opsel(name):
            if len(flags) != 2:
                raise EncodeError(f"{name}: op_sel takes 2 entries (fetch inactive, bound control), got {len(flags)}")
            fields["opsel"] = list_flags(flags)
        elif len(flags) != nsel + 1:
            raise EncodeError(f"{name}: op_sel needs {nsel + 1} entries (sources, then destination), got {len(flags)}")
        else:
            fields["opsel"] = list_flags(flags[:-1]) | int(flags[-1]) << 3
            if fields["opsel"] & 3 and _dpp_dot2_f16(draft.arch, name, draft.variant):
                raise EncodeError(f"{name}: op_sel on src0/src1 is not available in DPP form")
    fields["clmp"] = int(bool(mods.pop("clamp", False)))
    if fields["clmp"] and name in NO_CLAMP.get(draft.arch.name, ()):  # LLVM: invalid operand for instruction
        raise EncodeError(f"{name} takes no clamp (an integer or bit result that does not saturate)")
    omod = 0
    if "mul" in mods:
        omod = {2: 1, 4: 2}.get(int(mods.pop("mul")), -1)  # type: ignore[call-overload]
    if "div" in mods:
        omod = 3 if int(mods.pop("div")) == 2 else -1  # type: ignore[call-overload]
    if omod < 0:
        raise EncodeError(f"{name}: output modifier must be mul:2, mul:4 or div:2")
    if omod and "omod" not in draft.arch.formats[draft.fmt]["fields"]:
        raise EncodeError(f"{name} has no output modifier")
    if omod and name in NO_OMOD.get(draft.arch.name, ()):
        raise EncodeError(f"{name} takes no output modifier (mul:2, mul:4, div:2 scale float results only)")
    if omod:
        fields["omod"] = omod


def _join_variant_mods(draft: Draft, mods: Mods) -> None:
    fields = draft.fields
    if draft.variant == "DPP8":
        lanes = list(mods.pop("dpp8"))  # type: ignore[call-overload]
        if len(lanes) != 8:
            raise EncodeError(f"{draft.name}: dpp8 needs 8 lane selects")
        for i, lane in enumerate(lanes):
            fields[f"lane_sel_{i}"] = int(lane) & 7
        mods.pop("fi", None)
        return
    if draft.variant.startswith("SDWA"):
        layout = draft.arch.formats[f"{draft.fmt}_{draft.variant}"]["fields"]
        fixed_dst = _fixed_sdwa_dst(draft.name)
        if fixed_dst and ("dst_sel" in mods or "dst_unused" in mods):
            raise EncodeError(f"{draft.name}: its SDWA form writes whole dwords (no dst_sel/dst_unused)")
        for key, names in (("dst_sel", SDWA_SEL), ("dst_unused", SDWA_UNUSED), ("src0_sel", SDWA_SEL), ("src1_sel", SDWA_SEL)):
            # VOP1 has no second source: its src1_sel bits stay zero. LLVM's default dst_unused is UNUSED_PRESERVE
            # (UNUSED_PAD where the form has no dst_unused operand)
            default = (0 if fixed_dst else 2) if key == "dst_unused" else 0 if key == "src1_sel" and draft.fmt == "VOP1" else 6
            value = mods.pop(key, None)
            if key in layout:
                fields[key] = default if value is None else names.index(str(value)) if str(value) in names else int(value)  # type: ignore[call-overload]
        if mods.pop("clamp", False):
            if "clmp" not in layout:
                raise EncodeError(f"{draft.name}: its SDWA form has no clamp bit")
            fields["clmp"] = 1
        omod = {("mul", 2): 1, ("mul", 4): 2, ("div", 2): 3}
        for key in ("mul", "div"):
            if key in mods:
                value = omod.get((key, int(mods.pop(key))))  # type: ignore[call-overload]
                if value is None or "omod" not in layout:
                    raise EncodeError(f"{draft.name}: its SDWA form takes mul:2, mul:4 or div:2" if "omod" in layout else
                                      f"{draft.name}: its SDWA form has no output modifier")
                fields["omod"] = value
        return
    ctrl = None
    if "quad_perm" in mods:
        perm = list(mods.pop("quad_perm"))  # type: ignore[call-overload]
        ctrl = sum((int(p) & 3) << (2 * i) for i, p in enumerate(perm))
    for first, last, key, base in DPP_RANGES:
        key = _dpp_range_name(draft.arch, key)
        if key in mods:
            ctrl = first + int(mods.pop(key)) - base  # type: ignore[call-overload]
            if not first <= ctrl <= last:
                raise EncodeError(f"{draft.name}: {key} value out of range")
    for code, (key, value) in DPP_SINGLE.items():
        if key in mods and (value is True or int(mods[key]) == value):  # type: ignore[call-overload]
            mods.pop(key)
            ctrl = code
    if "dpp_ctrl" in mods:
        ctrl = int(mods.pop("dpp_ctrl"))  # type: ignore[call-overload]
    if ctrl is None:
        raise EncodeError(f"{draft.name}: DPP needs a control such as quad_perm:[0,1,2,3] or row_shl:1")
    fields["dpp"] = ctrl
    if (problem := dp_dpp_problem(draft.arch, draft.info, ctrl)) is not None:
        raise EncodeError(f"{draft.name}: {problem}")
    fields["row_mask"] = _int_mod(mods.pop("row_mask", 0xF))
    fields["bank_mask"] = _int_mod(mods.pop("bank_mask", 0xF))
    fields["bc"] = _int_mod(mods.pop("bound_ctrl", 0))
    if "fi" in draft.arch.formats[f"{draft.fmt}_DPP16"]["fields"]:
        fields["fi"] = _int_mod(mods.pop("fi", 0))


def _int_mod(value: object) -> int:
    if isinstance(value, Sym):
        return value.value
    return int(value)  # type: ignore[call-overload]


def _join_vopd(draft: Draft, ops: list, mods: Mods) -> None:
    arch, fields = draft.arch, draft.fields
    split = next((i for i, op in enumerate(ops) if isinstance(op, str)), None)
    if split is None:
        raise EncodeError(f"{draft.name} needs its Y half: `{draft.name} v0, v1 :: v_dual_mov_b32 v2, v3`")
    y_name = str(ops[split])
    y_op = next((code for code, (n, _) in arch.ops["VOPD"].items() if n == y_name), None)
    if y_op is None:
        raise EncodeError(f"unknown VOPD instruction {y_name}")
    fields["opy"] = y_op
    for side, opcode, half in (("x", draft.op, ops[:split]), ("y", y_op, ops[split + 1:])):
        name, info = arch.ops["VOPD"][opcode][0], {f[0]: f for f in arch.ops["VOPD"][opcode][1]}
        half = list(half)
        if "fmaak" in name:
            draft.set_literal(_literal_of(draft, half.pop()))
        elif "fmamk" in name:
            draft.set_literal(_literal_of(draft, half.pop(2)))
        want = 3 if "vsrcy1" in info else 2
        if len(half) != want:
            raise EncodeError(f"{name} takes {want} operands in a VOPD pair, got {len(half)}")
        dst = encode_vgpr(draft, f"vdst{side}", half[0])
        fields[f"vdst{side}"] = dst >> 1 if side == "y" else dst
        fields[f"src{side}0"] = encode_src(draft, f"src{side}0", half[1])
        if want == 3:
            fields[f"vsrc{side}1"] = encode_vgpr(draft, f"vsrc{side}1", half[2])
        if side == "y" and (dst & 1) == (fields["vdstx"] & 1):
            raise EncodeError(f"{draft.name}: the X and Y destinations of a VOPD pair must differ in parity (one even, one odd)")
    if mods:
        raise EncodeError(f"VOPD instructions take no modifiers, got {', '.join(sorted(mods))}")
    if (problem := vopd_problem(arch, draft.op, y_op, fields)) is not None:
        raise EncodeError(f"{draft.name} :: {y_name}: {problem}")


def vopd_problem(arch, x_op: int, y_op: int, fields: dict[str, int]) -> str | None:
    """LLVM's VOPD pairing rules beyond the destinations' parity: the VGPRs X and Y read in the same slot in different
    banks: the first sources by register number mod 4, the second sources mod 4, the third sources (fmac's and dot2acc's
    accumulator, its destination; fmamk's addend) by parity; at most two scalar values for the pair (SGPRs, one literal,
    v_dual_cndmask_b32's implicit vcc_lo)."""
    names = (arch.ops["VOPD"][x_op][0], arch.ops["VOPD"][y_op][0])
    x0, y0 = fields.get("srcx0", 0), fields.get("srcy0", 0)
    # (a mov_b32 Y after a mov_b32 X reads through the src2 cache: no conflict, gfx12_asm_vopd_features.s)
    if x0 >= VGPR_BASE and y0 >= VGPR_BASE and x0 % 4 == y0 % 4 and names != ("v_dual_mov_b32", "v_dual_mov_b32"):
        return f"src0 operands must use different VGPR banks (v{x0 - VGPR_BASE} and v{y0 - VGPR_BASE})"
    y_dst = fields.get("vdsty", 0) << 1 | (1 - (fields.get("vdstx", 0) & 1))
    x_slots = _vopd_slots(arch, x_op, fields.get("vsrcx1", 0), fields.get("vdstx", 0))
    y_slots = _vopd_slots(arch, y_op, fields.get("vsrcy1", 0), y_dst)
    for slot, banks, x, y in (("src1", 4, x_slots[0], y_slots[0]), ("src2", 2, x_slots[1], y_slots[1])):
        if x is not None and y is not None and x % banks == y % banks:
            return f"{slot} operands must use different VGPR banks (v{x} and v{y})"
    scalars: set = set()
    for code in (x0, y0):
        if code == 255:
            scalars.add("literal")
        elif code < VGPR_BASE and code not in _INLINE_CODES and code != arch.null_code:
            scalars.add(code)
    if any("fmaak" in n or "fmamk" in n for n in names):
        scalars.add("literal")
    if any("cndmask" in n for n in names):
        # cndmask's implicit read counts apart from an explicit vcc_lo source, as LLVM counts them (its implicit
        # operand is VCC, another register than VCC_LO): `v_dual_add_f32 v255, vcc_lo, v2 :: v_dual_cndmask_b32 v6,
        # s1, v3` reads three values (gfx11_asm_vopd_err.s), `... vcc_lo, v2 :: v_dual_cndmask_b32 v6, vcc_lo, v3` two
        scalars.add("vcc")
    if len(scalars) > 2:
        return f"reads {len(scalars)} scalar values (SGPRs, a literal, cndmask's vcc_lo); a VOPD pair allows 2 (constant bus)"
    return None


def _vopd_slots(arch, op: int, vsrc1: int, dst: int) -> tuple[int | None, int | None]:
    """The VGPRs one VOPD component reads in the second and third source slots (None: that slot unused): its vsrc1 field
    is the second source, or fmamk's addend in the third; fmac and dot2acc read their destination there."""
    name, info = arch.ops["VOPD"][op][0], arch.ops["VOPD"][op][1]
    has_vsrc1 = any(entry[0] in ("vsrcx1", "vsrcy1") for entry in info)
    if "fmamk" in name:
        return None, vsrc1
    return (vsrc1 if has_vsrc1 else None), (dst if "fmac" in name or "dot2acc" in name else None)


def _join_mfma(draft: Draft, ops: list, mods: Mods) -> None:
    fields, info = draft.fields, draft.info
    srcs = _src_list(info, ("src0", "src1", "src2"))
    if len(ops) != len(srcs) + 1:
        raise EncodeError(f"{draft.name} takes {len(srcs) + 1} operands, got {len(ops)}")
    dst = ops[0]
    fields["vdst"] = encode_vgpr(draft, "vdst", dst)
    acc_cd = isinstance(dst, Reg) and dst.kind == "a"
    fields["acc_cd"] = int(acc_cd)
    acc = 0
    for i, (field, operand) in enumerate(zip(srcs, ops[1:], strict=True)):
        fields[field] = code = encode_src(draft, field, operand, allow_literal=False)
        if i < 2 and isinstance(operand, Reg) and operand.kind == "a":
            acc |= 1 << i
        # A and B are VGPRs or AGPRs; C one or an inline constant (a sparse op's index a VGPR), as LLVM requires
        if code < VGPR_BASE and (i < 2 or draft.name.startswith("v_smfmac") or code not in _INLINE_CODES):
            what = "a VGPR or AGPR range" if i < 2 or draft.name.startswith("v_smfmac") else "a VGPR or AGPR range or an inline constant"
            raise EncodeError(f"{draft.name}: {field} must be {what}, got {operand}")
    fields["acc"] = acc
    if _blgp_is_neg(draft.arch, draft.name):
        if "blgp" in mods:  # (mai-err-gfx942.s: invalid modifier: blgp is not supported)
            raise EncodeError(f"{draft.name}: blgp is not supported (gfx940+ f64 MFMAs negate their sources there: neg:[a,b,c])")
        if "neg" in mods:
            mods["blgp"] = list_flags(mods.pop("neg")) & 7  # type: ignore[arg-type]
    # the accumulator input (a sparse op's src2 is its index VGPR instead: the result is its accumulator)
    src2 = ops[-1] if not draft.name.startswith("v_smfmac") else None
    if isinstance(src2, Reg) and isinstance(dst, Reg) and {src2.kind, dst.kind} == {"v", "a"}:  # one acc_cd bit for both
        raise EncodeError(f"{draft.name}: src2 and the result are both VGPRs or both AGPRs, got {src2} for {dst}")
    if mfma_overlap(dst.kind if isinstance(dst, Reg) else "", fields["vdst"], dst.count if isinstance(dst, Reg) else 0,
                    src2.kind if isinstance(src2, Reg) else "", fields.get("src2", 0) - VGPR_BASE, src2.count if isinstance(src2, Reg) else 0):
        raise EncodeError(f"{draft.name}: source 2 operand must not partially overlap with dst ({src2} and {dst})")
    for key in ("cbsz", "abid", "blgp"):
        fields[key] = int(mods.pop(key, _mfma_default(draft.fmt, key)))  # type: ignore[call-overload]
    if mods:
        raise EncodeError(f"{draft.name} does not take modifier(s) {', '.join(sorted(mods))}")
    if "f8f6f4" in draft.name:  # each matrix spans as many VGPRs as its element format needs (LLVM: wrong tuple size)
        for i, key in enumerate(("cbsz", "blgp")):
            operand, code = ops[1 + i], fields[key]
            want = F8F6F4_REGS[code] if code < len(F8F6F4_REGS) else None
            if want is not None and isinstance(operand, Reg) and operand.count != want:
                raise EncodeError(f"{draft.name}: src{i} is {want} VGPRs for {key}:{code} ({('fp8', 'bf8', 'fp6', 'bf6', 'fp4')[code]}), "
                                  f"got {operand}")


def _join_scaled_mfma(draft: Draft, ops: list, mods: Mods) -> None:
    """A VOP3PX2 pair: the MFMA's operands, then the two scale sources and the scale word's selects."""
    fields = draft.fields
    if len(ops) != 6:
        raise EncodeError(f"{draft.name} takes 6 operands (vdst, src0, src1, src2, scale_src0, scale_src1), got {len(ops)}")
    for i, operand in enumerate(ops[4:]):
        fields[f"scale_src{i}"] = encode_src(draft, f"scale_src{i}", operand, allow_literal=False)
    fields["opsel"] = list_flags(mods.pop("op_sel", 0)) & 7  # type: ignore[arg-type]
    fields["opsel_hi"] = list_flags(mods.pop("op_sel_hi", 0)) & 3  # type: ignore[arg-type]
    fields["neg"] = list_flags(mods.pop("neg_lo", 0)) & 7  # type: ignore[arg-type]
    fields["neg_hi"] = list_flags(mods.pop("neg_hi", 0)) & 7  # type: ignore[arg-type]
    fields["x2encoding"] = x2_prefix(draft.arch)
    _join_mfma(draft, ops[:4], mods)
