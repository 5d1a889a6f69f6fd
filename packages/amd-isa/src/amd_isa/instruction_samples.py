"""Sample instructions covering every opcode of an architecture, with varied operands: the corpus for tests and benchmarks.

Samples are built at the field level from the tables (no per-instruction code), so they exercise the printer, the
assembler and the codec the same way for every opcode.
"""

import random

from .arch import Arch, get_arch
from .availability import missing_on
from .inst import ALWAYS_LITERAL, SRC_FIELDS, Inst
from .modifier_rules import no_clamp, no_dpp_form
from .syntax_common import reg_count, x2_prefix
from .syntax_memory import UFMT_DEFAULT, image_address_count
from .syntax_scalar import GFX11_WAITCNT_SOPK
from .syntax_vector import (
    _NOT_REGISTER,
    _op_facts,
    constant_bus_problem,
    is_half_operand,
    mfma_overlap,
    no_dpp,
    vop3p_rules,
    vopd_problem,
)

# Variant kinds, cycled per opcode: plain registers, scalar/constant sources, modifiers and literals, then DPP forms.
KINDS = ("vgpr", "scalar", "mods", "dpp16", "dpp8")
# Formats the sampler fills.
_SUPPORTED = (
    "SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P", "VOPD", "DS", "FLAT", "GLOBAL", "SCRATCH",
    "MUBUF", "MTBUF", "MIMG", "VFLAT", "VGLOBAL", "VSCRATCH", "VBUFFER", "VIMAGE", "VSAMPLE", "LDSDIR", "VDSDIR", "VINTERP", "EXP", "VEXPORT",
    "VOP3PX2",
)
INLINE_CODES = list(range(128, 209)) + list(range(240, 248))


def _even(rng: random.Random, limit: int, count: int = 1) -> int:
    # LLVM wants SGPR tuples of 3+ aligned to 4 and pairs to 2; even indices keep every register file happy.
    align = 4 if count >= 3 else 2
    top = max(0, limit - count)
    return rng.randrange(0, top + 1, align) if top else 0


def _src_code(rng: random.Random, arch: Arch, kind: str, bits: int, may_literal: bool, is_float: bool, scalar_only: bool) -> int:
    count = reg_count(bits)
    if kind == "scalar" or (scalar_only and kind != "mods"):
        return rng.choice([_even(rng, 100, count), rng.choice(INLINE_CODES[:81])])
    if kind == "mods":
        if may_literal and bits <= 32 and rng.random() < 0.5:
            return 255
        return rng.choice(INLINE_CODES) if is_float else rng.choice(INLINE_CODES[:81])
    return 256 + _even(rng, 250, count)


def _vop_src_allowed_literal(arch: Arch, fmt: str) -> bool:
    return fmt in ("SOP1", "SOP2", "SOPC", "VOP1", "VOP2", "VOPC") or (fmt in ("VOP3", "VOP3SD", "VOP3P") and arch.vop3_literal)


def _vop3p_modifiers(arch: Arch, name: str, info: dict, fields: dict[str, int]) -> None:
    """Keep the modifier bits the opcode takes (`vop3p_rules`): no op_sel on 8-bit, fp8 or matrix sources (a SWMMAC's
    are its index_key), no negation or clamp where LLVM refuses them."""
    rules = vop3p_rules(arch, name, info)
    if "opsel" not in fields:
        return
    if rules.index_key >= 0:
        fields["opsel"] &= rules.index_key
    elif not rules.op_sel:
        fields["opsel"] &= 4 if rules.dst_half else 0
    if rules.no_op_sel_bits:  # gfx940+ dots: no op_sel bits, op_sel_hi at its default
        fields["opsel"] = 0
    if not rules.op_sel or rules.index_key >= 0 or rules.no_op_sel_bits:
        fields.update(opsel_hi=3, opsel_hi2=1)
    for field, allowed in (("neg", rules.neg_lo), ("neg_hi", rules.neg_hi)):
        if field in fields:
            fields[field] &= allowed
    if not rules.clamp and "clmp" in fields:
        fields["clmp"] = 0


def sample_fields(arch: Arch, fmt: str, opcode: int, kind: str, rng: random.Random) -> tuple[dict[str, int], int | None, str]:
    """Field values, literal and variant of one sample of an opcode."""
    name, info_list = arch.ops[fmt][opcode]
    info = {f: (bits, optype, dfmt) for f, bits, optype, dfmt in info_list}
    if fmt == "VOP3PX2":
        return _scaled_mfma_fields(arch, kind, rng), None, ""
    variant = ""
    mfma = arch.formats.get(f"{fmt}_MFMA")
    if mfma is not None and opcode in mfma.get("ops", ()):
        variant = "MFMA"
    elif kind in ("dpp16", "dpp8") and fmt in ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD") and not any(p in name for p in ALWAYS_LITERAL) \
            and not no_dpp(info) and not no_dpp_form(arch.name, name):
        # gfx9 has no DPP8: its second extended form is SDWA.
        wanted = kind.upper() if f"{fmt}_{kind.upper()}" in arch.formats else next(
            (v for v in ("SDWA", "SDWA_SDST") if kind == "dpp8" and f"{fmt}_{v}" in arch.formats), "")
        if wanted and all(info.get(f, (32,))[0] <= 32 for f in ("src0", "src1", "vdst")) and "src0" in info:
            variant = wanted
    layout = arch.formats[f"{fmt}_{variant}" if variant else fmt]["fields"]
    fields: dict[str, int] = {}
    literal = None
    is_float = any(info.get(f, (0, "", ""))[2].startswith(("F", "PK2_F", "BF")) for f in ("src0", "ssrc0", "vdst"))
    for field, spec in layout.items():
        if field in ("op", "opx") or (field == "simm16" and "simm16" not in info):
            continue
        width = spec[0] - spec[1] + 1
        bits = info.get(field, (32, "", ""))[0]
        optype = info.get(field, (32, "", ""))[1]
        if field in SRC_FIELDS and (field in info or (field == "src0" and fmt in ("VOP1", "VOP2", "VOPC"))):
            dfmt = info.get(field, (32, "", "B32"))[2]
            if optype == "SENDMSG_RTN":
                fields[field] = rng.choice(sorted(getattr(arch.tables, "MSG", {128: ""})))
                continue
            if dfmt == "M64":
                fields[field] = _even(rng, 100, arch.wave // 32)
                continue
            # Scalar-source VALU ops (v_s_exp_f32, v_readlane's lane select) take SGPRs and constants only.
            scalar_only = fmt.startswith("SOP") or optype in ("SREG", "SSRC", "SREG_LITERAL", "SSRC_LANESEL")
            may_literal = _vop_src_allowed_literal(arch, fmt) and literal is None and optype != "SREG"
            code = _src_code(rng, arch, kind, bits, may_literal, is_float, scalar_only)
            if optype == "SREG" and code >= 128:
                code = _even(rng, 100, reg_count(bits))
            if (optype.startswith("SRC_VGPR") or optype == "VGPR") and code < 256:
                code = 256 + _even(rng, 200, reg_count(bits))
            if code == 255:
                literal = rng.getrandbits(16) | 0x4000 if bits == 16 else rng.getrandbits(32) | 0x10000
            fields[field] = code
        elif field in ("vdst", "vdata", "addr", "data", "data0", "data1", "vsrc1", "vsrcx1", "vsrcy1", "vaddr", "vsrc", "vsrc0", "vdstx",
                       "vaddr0", "vsrc0", "vsrc1", "vsrc2", "vsrc3"):
            if optype in ("SREG", "SDST", "SREG_NOVCC") or (field == "vdst" and info.get("vdst", (0, "", ""))[2] == "M64"):
                fields[field] = _even(rng, 100, arch.wave // 32 if info[field][2] == "M64" else reg_count(bits))
            else:
                fields[field] = _even(rng, 240, reg_count(bits) + 1)
        elif field == "vdsty":
            fields[field] = rng.randrange(0, 100)
        elif field in ("sdst", "sdata", "ssrc0", "ssrc1"):
            if optype.startswith("SIMM"):
                fields[field] = rng.randrange(0, 1 << min(width, 3))
            else:
                fields[field] = _even(rng, 100, reg_count(bits) if field != "sdst" or fmt != "VOP3SD" else arch.wave // 32)
        elif field == "sbase":
            fields[field] = _even(rng, 96, reg_count(bits)) >> 1
        elif field in ("srsrc", "ssamp"):
            fields[field] = _even(rng, 92, 4) >> 2
        elif field in ("rsrc", "samp"):
            fields[field] = _even(rng, 92, 4)
        elif field == "saddr":
            fields[field] = arch.null_code if kind == "vgpr" else _even(rng, 100, 2)
        elif field == "soffset":
            fields[field] = arch.null_code if kind == "vgpr" or fmt == "SMEM" and arch.name != "cdna" else _even(rng, 100, 1)
            if fmt in ("MUBUF", "MTBUF") and kind == "vgpr":
                fields[field] = 128
        elif field == "simm16":
            fields[field] = _simm16(arch, optype, name, rng)
        elif field in ("offset", "ioffset", "offset0", "offset1"):
            fields[field] = rng.getrandbits(min(width, 8)) if kind != "vgpr" else 0
            if fmt == "SMEM" and kind != "vgpr":
                fields[field] = rng.randrange(0, 0x1000)
        elif field in ("offen", "idxen"):
            fields[field] = rng.getrandbits(1)
        elif field in ("format", "dfmt", "nfmt") and kind != "vgpr" and "tbuffer" in name:
            fields[field] = rng.getrandbits(min(width, 6))
        elif field == "format" and "tbuffer" not in name:
            fields[field] = UFMT_DEFAULT  # gfx12 buffer_* share tbuffer's format field; LLVM sets it to its default
        elif field == "target":
            fields[field] = rng.choice([0, 3, 7, 8, 12, 16, 20, 21])
        elif field == "en":
            fields[field] = rng.getrandbits(4)
        elif field in ("done", "row"):
            fields[field] = rng.getrandbits(1)
        elif field == "dmask":
            # Gathers read one channel; atomics one value (two for compare-swap); anything else any channel mask.
            if "gather4" in name or "msaa_load" in name:
                fields[field] = 1 << rng.randrange(4)
            elif "atomic" in name:
                fields[field] = 3 if "cmpswap" in name else 1
            else:
                fields[field] = rng.randrange(1, 16)
        elif field == "dim" and "msaa" in name:
            fields[field] = 6
        elif field in ("neg", "abs") and kind == "mods" and fmt in ("VOP3", "VOP3SD"):
            float_srcs = [i for i, f in enumerate(("src0", "src1", "src2")) if info.get(f, (0, "", ""))[2].startswith(("F", "BF"))]
            fields[field] = rng.getrandbits(width) & sum(1 << i for i in float_srcs)
        elif field in ("opsel", "neg_hi") and kind == "mods" and fmt in ("VOP3", "VOP3P"):
            # op_sel is meaningful on 16-bit operands (VOP3) and packed ones (VOP3P); neg_hi on packed float sources.
            sixteen = any(info.get(f, (32,))[0] == 16 for f in ("src0", "src1", "src2", "vdst"))
            packed = fmt == "VOP3P" and "PK" in info.get("src0", (0, "", ""))[2]
            nsrc = sum(f in info for f in ("src0", "src1", "src2"))
            printed = (1 << nsrc) - 1 if fmt == "VOP3P" or field == "neg_hi" else (1 << nsrc) - 1 | 8
            if (field == "opsel" and (sixteen or packed)) or (field == "neg_hi" and packed and is_float):
                fields[field] = rng.getrandbits(width) & printed
        elif field == "neg" and kind == "mods" and fmt == "VOP3P" and is_float and "PK" in info.get("src0", (0, "", ""))[2]:
            fields[field] = rng.getrandbits(width) & ((1 << sum(f in info for f in ("src0", "src1", "src2"))) - 1)
        elif field == "clmp" and kind == "mods" and is_float and not no_clamp(arch.name, name):
            fields[field] = rng.getrandbits(1)
        elif field in ("glc", "slc", "dlc", "sc0", "sc1", "nt") and kind == "mods":
            fields[field] = rng.getrandbits(1)
        elif field == "dpp":
            fields[field] = rng.choice([rng.getrandbits(8), 0x101 + rng.randrange(15), 0x111 + rng.randrange(15), 0x140, 0x141])
        elif field in ("row_mask", "bank_mask"):
            fields[field] = rng.choice([0xF, rng.getrandbits(4)])
        elif field.startswith("lane_sel_"):
            fields[field] = rng.getrandbits(3)
        elif field == "bc":
            fields[field] = rng.getrandbits(1)
        elif len(spec) > 2:
            fields[field] = arch.null_code if spec[2] == "NULL" else spec[2]
        else:
            fields[field] = 0
    if variant.startswith("SDWA"):
        fields["src0"] = 249
        fields.update({key: 6 for key in ("dst_sel", "src0_sel", "src1_sel") if key in layout})
        fields.update({key: rng.choice([0, 4, 5, 6]) for key in ("src0_sel", "src1_sel") if key in layout and kind == "dpp8"})
        literal = None
    if variant in ("DPP16", "DPP8"):
        fields["src0"] = 250 if variant == "DPP16" else 233
        literal = None
        for field in ("src1", "src2"):
            if fields.get(field) == 255:
                fields[field] = 256
    if fmt in ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P") and not variant:
        literal = _within_constant_bus(arch, fmt, opcode, name, info, fields, literal, rng)
    if fmt in ("VOP1", "VOP2", "VOPC"):
        _low_halves(arch, fmt, info, fields, variant)
    if fmt == "VOP3P" and not variant:
        _vop3p_modifiers(arch, name, info, fields)
    if fmt in ("VIMAGE", "VSAMPLE"):
        _image_addresses(name, fields, rng)
    if fmt == "VOPD":
        fields["opy"] = opcode
        literal = None
        for field in ("srcx0", "srcy0"):
            if fields.get(field) == 255:
                fields[field] = 129
        fields["vdstx"] &= ~1
        if vopd_problem(arch, opcode, opcode, fields) is not None:  # keep the pair within LLVM's bank and bus rules
            fields["srcx0"], fields["srcy0"] = 256 + 4 * rng.randrange(60), 257 + 4 * rng.randrange(60)
            # second sources in banks 0 and 1, the X destination even (Y's odd): fmac's third-slot reads differ too
            fields["vsrcx1"], fields["vsrcy1"] = 4 * rng.randrange(60), 1 + 4 * rng.randrange(60)
    if variant == "MFMA" and not name.startswith("v_smfmac") and fields.get("src2", 0) >= 256 and "vdst" in info and \
            mfma_overlap("v", fields["vdst"], reg_count(info["vdst"][0]), "v", fields["src2"] - 256, reg_count(info["src2"][0])):
        fields["src2"] = 256 + fields["vdst"]  # the accumulator in place (LLVM refuses a partial overlap)
    if fmt == "SOPK" and arch.name == "rdna3" and name.startswith(GFX11_WAITCNT_SOPK):
        fields["sdst"] = arch.null_code  # gfx11's counter waits name null (LLVM: src0 must be null)
    if fmt == "DS" and any(part in name for part in ("_gws_", "ordered_count", "gs_reg")):
        fields["gds"] = 1
    if any(part in name for part in ALWAYS_LITERAL):
        literal = rng.getrandbits(16 if info.get("vdst", (32,))[0] == 16 else 32)
    return fields, literal, variant


def _within_constant_bus(arch: Arch, fmt: str, opcode: int, name: str, info: dict, fields: dict[str, int], literal: int | None,
                         rng: random.Random) -> int | None:
    """Keep a VALU sample within the constant bus (syntax_vector.constant_bus_problem): scalar sources are replaced, last
    first, by VGPRs (by the inline constant 0 where only scalars go or for a literal) until it fits. Lane masks stay.
    Returns the literal (None once no source uses it)."""
    facts = _op_facts(arch, fmt, opcode, name, info)
    for field, _, _ in reversed(facts.srcs):
        if constant_bus_problem(arch, name, facts, info, fields, "", literal) is None:
            break
        code = fields.get(field, 256)
        optype, dfmt = info.get(field, (32, "", ""))[1:3]
        if field == "vsrc1" or code >= 256 or (code in _NOT_REGISTER and code != 255) or dfmt == "M64" or optype == "SREG":
            continue
        scalar_only = optype in ("SSRC", "SREG_LITERAL", "SSRC_LANESEL")
        fields[field] = 128 if code == 255 or scalar_only else 256 + _even(rng, 200, reg_count(info[field][0]) if field in info else 1)
    if literal is not None and not any(fields.get(f) == 255 for f in ("src0", "src1", "src2")) and not any(p in name for p in ALWAYS_LITERAL):
        literal = None
    return literal


def _low_halves(arch: Arch, fmt: str, info: dict, fields: dict[str, int], variant: str) -> None:
    """Keep 16-bit half operands (RDNA VOP1/VOP2/VOPC) in v0-v127: v128 and up are .h halves there, which LLVM's
    default (fake16) syntax cannot name, so the LLVM agreement tests could not check those samples."""
    for operand, field in (("vdst", "vdst"), ("src0", "vsrc0" if variant else "src0"), ("vsrc1", "vsrc1")):
        if operand in info and field in fields and is_half_operand(arch, fmt, info[operand]):
            base = 256 if field == "src0" else 0  # a 9-bit source field: VGPRs are codes 256 and up
            if fields[field] >= base:
                fields[field] = base + (fields[field] - base) % 128


def _image_addresses(name: str, fields: dict[str, int], rng: random.Random) -> None:
    """Fill the gfx12 address VGPRs the instruction reads past vaddr0 (left at v0, LLVM 19's disassembler drops them)."""
    slots = sum(f"vaddr{i}" in fields for i in range(5))
    count = image_address_count(name, fields.get("dim", 0), bool(fields.get("a16")))
    for i in range(1, min(count, slots)):
        fields[f"vaddr{i}"] = _even(rng, 240, count - slots + 1 if i == slots - 1 else 1)


def _scaled_mfma_fields(arch: Arch, kind: str, rng: random.Random) -> dict[str, int]:
    """A CDNA4 scaled MFMA: element formats (cbsz/blgp: fp8, bf8, fp6, bf6, fp4), VGPR or AGPR tuples, scale sources."""
    cbsz, blgp = rng.randrange(5), rng.randrange(5)
    fields = {"x2encoding": x2_prefix(arch), "vdst": _even(rng, 200, 16), "src0": 256 + _even(rng, 200, 8), "src1": 256 + _even(rng, 200, 8),
              "src2": 256 + _even(rng, 200, 16), "cbsz": cbsz, "blgp": blgp, "abid": 1, "acc_cd": 0, "acc": 0,
              "scale_src0": 256 + rng.randrange(250), "scale_src1": 256 + rng.randrange(250), "opsel": 0, "opsel_hi": 0, "neg": 0, "neg_hi": 0}
    if mfma_overlap("v", fields["vdst"], 16, "v", fields["src2"] - 256, 16):
        fields["src2"] = 256 + fields["vdst"]  # the accumulator in place (LLVM refuses a partial overlap)
    if kind == "scalar":
        fields.update(scale_src0=rng.randrange(100), scale_src1=rng.choice(INLINE_CODES[:81]))
    elif kind == "mods":
        fields.update(acc_cd=1, acc=rng.getrandbits(2), opsel=rng.getrandbits(2), opsel_hi=rng.getrandbits(2))
    return fields


def _simm16(arch: Arch, optype: str, name: str, rng: random.Random) -> int:
    if optype == "LABEL":
        return rng.randrange(-64, 64) & 0xFFFF
    if optype == "HWREG":
        names = list(getattr(arch.tables, "HWREG", {1: ""}))
        return rng.choice(names) | rng.choice([(0, 31), (4, 3)])[0] << 6 | rng.choice([31, 3]) << 11
    if optype == "WAITCNT":
        return rng.getrandbits(16) & (0xFC0F if arch.name != "cdna" else 0xCF7F)
    if optype == "DELAY":
        return rng.randrange(1, 12) | rng.randrange(0, 6) << 4 | rng.randrange(0, 12) << 7
    if optype == "SENDMSG":
        return rng.choice([1, 3] if arch.name != "cdna" else [1, 9])
    if optype in ("WAITCNT_DEPCTR", "CLAUSE", "WAIT_EVENT"):
        return rng.randrange(0, 8)
    return rng.randrange(0, 0x100)


def sample_corpus(arch: str, variants: int = 3, seed: int = 0) -> list[Inst]:
    """`variants` sample instructions for every opcode of `arch` (deterministic for a given seed); for a gfx target,
    only the instructions it has (availability.py)."""
    arch_obj = get_arch(arch)
    missing = missing_on(arch)
    rng = random.Random(seed)
    out = []
    for fmt, ops in arch_obj.ops.items():
        if fmt not in _SUPPORTED:
            continue
        for opcode, (name, _) in ops.items():
            if (fmt == "VOPD" and opcode > 13) or name in missing:
                continue
            if fmt in ("FLAT", "VFLAT") and not name.startswith("flat_"):
                continue  # the *_addtid entries FLAT shares with GLOBAL are sampled there
            for k in range(variants):
                fields, literal, variant = sample_fields(arch_obj, fmt, opcode, KINDS[k % len(KINDS)], rng)
                out.append(Inst(arch_obj, fmt, opcode, fields, literal, variant))
    return out
