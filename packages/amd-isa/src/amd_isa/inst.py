"""The `Inst` value: one machine instruction as (architecture, format, opcode, raw field values, literal), and its binary codec.

Field layouts and opcodes come from the generated tables; this module holds no per-instruction code.
"""

from collections.abc import Iterator
from functools import cache

from . import printer
from .arch import Arch, get_arch
from .availability import missing_on
from .errors import DecodeError
from .modifier_rules import no_clamp, no_dpp_form, no_omod
from .syntax_common import SCALE_LOAD, reg_count
from .syntax_memory import BUFFER_FORMATS
from .syntax_scalar import register_only
from .syntax_vector import (
    _INLINE_CODES,
    _op_facts,
    constant_bus_problem,
    dp_dpp_problem,
    sdwa_problem,
    vop3_dpp_problem,
    vop3p_rules,
    vop3p_word_problem,
    vopd_problem,
)

# Source fields that may hold the literal code 255 or the DPP/SDWA codes.
SRC_FIELDS = ("ssrc0", "ssrc1", "src0", "src1", "src2", "srcx0", "srcy0")
# Mnemonic fragments of instructions that always carry a 32-bit literal, whatever their source fields say.
ALWAYS_LITERAL = ("madak", "madmk", "fmaak", "fmamk", "setreg_imm32")
DPP16_CODE, DPP8_CODE, DPP8FI_CODE, SDWA_CODE = 250, 233, 234, 249
#: the assembler's complaints about text the disassembler prints, as LLVM's disassembler does (its own MC tests hold
#: such words), though both assemblers refuse it: reserved export targets, MFMA accumulators partly overlapping a wide
#: result, interpolation attributes past attr32, gfx11 and CDNA scalar buffer loads with the offset's top bit set
#: (printed negative), gfx11 counter waits naming a register other than null, VGPR ranges running past v255 (LLVM 22
#: prints `v[255:256]` for a two-register address at 255, and refuses it: register index is out of range), s_delay_alu
#: fields with no name (printed as LLVM's comment `instid0(/* invalid instid value */)`), gfx12 temporal hints with no
#: name (th:0x7 at the default scope), gfx940+ dot products with op_sel or op_sel_hi bits. Every other decoded word
#: prints text the assembler takes back.
PRINTED_BUT_REFUSED = ("unknown export target", "must not partially overlap with dst", "out of bounds interpolation attribute",
                       "unsigned offset for buffer ops", "src0 must be null", "register index is out of range", "expected a value name",
                       "expected an identifier", "invalid op_sel operand")
_CDNA_VARIANT_CODES, _RDNA_VARIANT_CODES = (DPP16_CODE, SDWA_CODE), (DPP16_CODE, DPP8_CODE, DPP8FI_CODE)
VOP_SHORT = ("VOP1", "VOP2", "VOPC")
VOP_LONG = ("VOP3", "VOP3SD", "VOP3P")
# CDNA4 scaled MFMA (VOP3PX2): a v_mfma_ld_scale_b32 word then the MFMA word. Bits of the scale word the pair does not
# carry: its vdst (7:0), op_sel_hi[2] and clamp (15:14) and src2 (58:50).
X2_HIDDEN_BITS = 0xFF | 0b11 << 14 | 0x1FF << 50
# Branch-like immediates and memory offsets that the hardware reads as signed.
SIGNED_LABEL = ("LABEL",)


# (tables, format, variant) -> encoded size without the literal
_SIZES: dict[tuple[str, str, str], int] = {}
# (tables, format, opcode) -> LLVM mnemonic: printing asks for it several times per instruction
_MNEMONICS: dict[tuple[str, str, int], str] = {}


class Inst:
    """One instruction. Build it with an arch module's builders (`rdna3.s_mov_b32(s[0], 1)`), `decode`, or `assemble`.

    Raw field values are readable as attributes (`inst.simm16`, `inst.vdst`); branch offsets (`simm16` of SOPP/SOPK
    branches) read as signed. `str(inst)` is LLVM assembly, `repr(inst)` is Python that rebuilds it.
    """

    __slots__ = ("arch", "fmt", "op", "fields", "literal", "variant")

    def __init__(self, arch: Arch, fmt: str, op: int, fields: dict[str, int], literal: int | None = None, variant: str = ""):
        self.arch = arch
        self.fmt = fmt
        self.op = op
        self.fields = fields
        self.literal = literal
        self.variant = variant

    @property
    def layout(self) -> dict:
        """The table entry of this instruction's encoding (base format or its DPP/SDWA/MFMA variant)."""
        return self.arch.formats[f"{self.fmt}_{self.variant}" if self.variant else self.fmt]

    @property
    def mnemonic(self) -> str:
        """The LLVM mnemonic of the instruction's opcode, e.g. "s_branch", "v_add_f32_e32", "v_fmaak_f32"."""
        key = (self.arch.key, self.fmt, self.op)
        name = _MNEMONICS.get(key)
        if name is None:
            name = _MNEMONICS[key] = llvm_name(self.arch.key, self.arch.ops[self.fmt][self.op][0])
        return name

    @property
    def operand_info(self) -> dict[str, tuple[int, str, str]]:
        """Operand fields of this opcode: field -> (bits, operand type, data format)."""
        return operand_info(self.arch.key, self.fmt, self.op)

    def __getattr__(self, name: str) -> int:
        try:
            fields = object.__getattribute__(self, "fields")
        except AttributeError:
            raise AttributeError(name) from None
        if name in fields:
            value = fields[name]
            info = self.operand_info.get(name)
            if info is not None and info[1] in SIGNED_LABEL and value & 0x8000:
                return value - 0x10000
            return value
        if name in self.layout["fields"]:
            return _default(self.arch, self.layout["fields"][name])
        raise AttributeError(f"{self.mnemonic} has no field {name!r}")

    def size(self) -> int:
        """Encoded size in bytes, including the literal dword."""
        key = (self.arch.key, self.fmt, self.variant)
        size = _SIZES.get(key)
        if size is None:
            size = _SIZES[key] = self.layout["size"]
        return size + 4 if self.literal is not None else size

    def to_bytes(self) -> bytes:
        """The little-endian machine code of this instruction."""
        key = (self.arch.key, self.fmt, self.variant)
        pack = _PACKERS.get(key)
        if pack is None:
            pack = _PACKERS[key] = _packer(*key)
        try:
            data = pack(self.fields, self.op)
        except (KeyError, TypeError):  # a field missing or set to None: its default (the loop `_packer` compiles away)
            data = self._to_bytes_slow()
        if self.literal is not None:
            data += (self.literal & 0xFFFFFFFF).to_bytes(4, "little")
        return data

    def _to_bytes_slow(self) -> bytes:
        size, word, specs = _encoder(self.arch.key, self.fmt, self.variant)
        fields = self.fields
        for name, lo, mask, default in specs:
            raw = fields.get(name)
            if raw is None:
                raw = self.op if default is None else default
            word |= (raw & mask) << lo
        return word.to_bytes(size, "little")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Inst) and self.arch.name == other.arch.name and self.to_bytes() == other.to_bytes()

    def __hash__(self) -> int:
        return hash((self.arch.name, self.to_bytes()))

    def __str__(self) -> str:
        return printer.format_inst(self)

    def __repr__(self) -> str:
        return printer.repr_inst(self)


@cache
def _encoder(arch_name: str, fmt: str, variant: str) -> tuple[int, int, tuple[tuple[str, int, int, int | None], ...]]:
    """(size, constant bits, ((field, low bit, mask, default or None for the opcode), ...)) of one encoding."""
    arch = get_arch(arch_name)
    base = arch.formats[fmt]
    layout = arch.formats[f"{fmt}_{variant}" if variant else fmt]
    _, lo, value = base["encoding"]
    word = value << lo
    for _, lo, value in base["fixed"].values():
        word |= value << lo
    specs = tuple((name, spec[1], (1 << (spec[0] - spec[1] + 1)) - 1, None if name in ("op", "opx") else _default(arch, spec))
                  for name, spec in layout["fields"].items())
    return layout["size"], word, specs


# (tables, format, variant) -> a function packing an instruction's fields and opcode into its bytes (see `_packer`)
_PACKERS: dict[tuple[str, str, str], object] = {}


def _packer(arch_name: str, fmt: str, variant: str):
    """A function (fields, opcode) -> bytes of one encoding, compiled from its layout: one expression ORing each field
    masked and shifted into the constant bits. A field missing (KeyError) or None (TypeError) is left to
    `Inst._to_bytes_slow`, which reads its default: built and decoded instructions carry every field."""
    size, word, specs = _encoder(arch_name, fmt, variant)
    terms = [str(word)]
    for name, lo, mask, default in specs:
        value = f"f.get({name!r}, op)" if default is None else f"f[{name!r}]"
        terms.append(f"(({value}) & {mask}) << {lo}")
    source = f"def pack(f, op):\n    return ({' | '.join(terms)}).to_bytes({size}, 'little')\n"
    scope: dict = {}
    exec(compile(source, f"<amd_isa packer {arch_name} {fmt} {variant}>", "exec"), scope)  # noqa: S102 - source built from the tables above
    return scope["pack"]


def _default(arch: Arch, spec: tuple) -> int:
    if len(spec) < 3:
        return 0
    return arch.null_code if spec[2] == "NULL" else spec[2]


@cache
def operand_info(arch_name: str, fmt: str, op: int) -> dict[str, tuple[int, str, str]]:
    """field -> (bits, operand type, data format) for one opcode (shared, do not mutate)."""
    arch = get_arch(arch_name)
    return {f: (bits, optype, dfmt) for f, bits, optype, dfmt in arch.ops[fmt][op][1]}


@cache
def _dispatch(arch_name: str) -> list[tuple[int, int, str]]:
    """(mask, value, format) for every base format identified in dword 0, most specific first."""
    arch = get_arch(arch_name)
    out = []
    for name, fmt in arch.formats.items():
        if "encoding" not in fmt or fmt["encoding"][0] >= 32:
            continue
        assert fmt["encoding"][1] >= 23, "encoding identifiers are expected in dword0 bits 31:23"
        hi, lo, value = fmt["encoding"]
        mask = ((1 << (hi - lo + 1)) - 1) << lo
        out.append((mask, value << lo, name))
    out.sort(key=lambda entry: -entry[0].bit_count())
    return out


@cache
def _table_names(arch_name: str) -> frozenset[str]:
    return frozenset(name for ops in get_arch(arch_name).ops.values() for name, _ in ops.values())


# LLVM prints these without an encoding suffix although a twin in another encoding exists.
NO_SUFFIX = ("v_nop", "v_readfirstlane_b32", "v_pipeflush", "v_clrexcp", "v_swap_b32", "v_accvgpr_mov_b32")
# Table mnemonics LLVM spells differently.
LLVM_SPELLING = {"v_accvgpr_read": "v_accvgpr_read_b32", "v_accvgpr_write": "v_accvgpr_write_b32"}


@cache
def llvm_name(arch_name: str, name: str) -> str:
    """LLVM's spelling of a table mnemonic: `_e32`/`_e64` appear only when the other encoding of the op exists."""
    names = _table_names(arch_name)
    if name in LLVM_SPELLING:
        return LLVM_SPELLING[name]
    for base in NO_SUFFIX:
        if name in (base + "_e32", base + "_e64"):
            return base
    if name.endswith("_e32") and name[:-4] + "_e64" not in names and name[:-4] not in names:
        return name[:-4]
    if name.startswith("v_") and not name.endswith(("_e32", "_e64")) and name + "_e32" in names:
        return name + "_e64"
    if name.endswith("_e64") and name[:-4] + "_e32" not in names:
        return name[:-4]
    return name


@cache
def op_index(arch_name: str) -> dict[str, tuple[str, int]]:
    """mnemonic -> (format, opcode) for one architecture, under table names and LLVM spellings."""
    arch = get_arch(arch_name)
    index: dict[str, tuple[str, int]] = {}
    for fmt, ops in arch.ops.items():
        for opcode, (name, _) in ops.items():
            # FLAT and GLOBAL both list the *_addtid ops: keep the format the mnemonic's prefix names.
            for alias in dict.fromkeys((name, llvm_name(arch_name, name))):
                if alias not in index or alias.startswith(fmt.lower().lstrip("v") + "_"):
                    index[alias] = (fmt, opcode)
    return index


def _extract(word: int, spec: tuple) -> int:
    return (word >> spec[1]) & ((1 << (spec[0] - spec[1] + 1)) - 1)


@cache
def _candidates_by_top_bits(arch_name: str) -> tuple[tuple[str, ...], ...]:
    """For each value of dword0 bits 31:23 (every encoding identifier lives there), the formats it can be, best first."""
    out = []
    for top in range(512):
        word = top << 23
        matches = [(mask.bit_count(), name) for mask, value, name in _dispatch(arch_name) if word & mask == value]
        out.append(tuple(name for width, name in matches if width == matches[0][0]) if matches else ())
    return tuple(out)


def _base_format(arch: Arch, dword0: int, peek: int) -> str:
    candidates = _candidates_by_top_bits(arch.key)[dword0 >> 23]
    if not candidates:
        raise DecodeError(f"no {arch.name} encoding matches dword {dword0:#010x}")
    if len(candidates) == 1:
        return candidates[0]
    word = dword0 | (peek << 32)
    for name in candidates:
        fmt = arch.formats[name]
        if fmt["fixed"] and all(_extract(word, spec) == spec[2] for spec in fmt["fixed"].values()):
            return name
    # VOP3 and VOP3SD share an encoding: the opcode says which.
    op_spec = arch.formats[candidates[0]]["fields"]["op"]
    opcode = _extract(dword0, op_spec)
    for name in sorted(candidates, key=lambda n: n != "VOP3SD"):
        if opcode in arch.ops.get(name, {}):
            return name
    return candidates[0]


class _OpPlan:
    """What decoding one (format, opcode) needs, worked out once: its name, whether the target lacks it, how its variant
    is chosen and, per variant, the size and field extractors; the literal rule of its base encoding."""

    __slots__ = ("name", "missing", "scale", "vop", "mfma", "nsa", "layouts", "lit_sources", "vopd", "packed", "bus", "operands", "no_dpp")

    def __init__(self, arch: Arch, target: str, fmt: str, opcode: int):
        self.name = arch.ops[fmt][opcode][0]
        self.missing = self.name in missing_on(target)
        self.scale = self.name == SCALE_LOAD and "VOP3PX2" in arch.ops
        mfma = arch.formats.get(f"{fmt}_MFMA")
        self.mfma = mfma is not None and opcode in mfma.get("ops", ())
        self.nsa = fmt == "MIMG" and "MIMG_NSA" in arch.formats
        self.vop = fmt in VOP_SHORT + VOP_LONG
        self.vopd = fmt == "VOPD"
        self.layouts: dict[str, tuple] = {}  # variant -> (size, `_field_reader`)
        self.lit_sources = _literal_sources(arch.key, fmt, opcode) if not self.vopd else ()
        # an RDNA packed-math op: its modifier bits and matrix operands are checked against what LLVM accepts
        self.packed = (arch, self.name, operand_info(arch.key, fmt, opcode)) \
            if fmt == "VOP3P" and (arch.name in ("rdna3", "rdna4") or self.name.startswith("v_mfma_ld_scale")) else None
        # the constant bus: words whose sources read more scalar values than the target allows do not assemble
        info = operand_info(arch.key, fmt, opcode)
        self.bus = (_op_facts(arch, fmt, opcode, self.name, info), info) if fmt in VOP_SHORT + VOP_LONG and not self.mfma else None
        self.operands = _operand_checks(arch, fmt, self.name, info, self.bus[0] if self.bus else None, self.mfma)
        self.no_dpp = no_dpp_form(arch.name, self.name)  # LLVM decodes no DPP word of it


def _operand_checks(arch: Arch, fmt: str, name: str, info: dict, facts, mfma: bool) -> tuple[tuple[str, str, int, int], ...]:
    """(field, kind, scale, registers) of each field whose value LLVM refuses in text (its disassembler marks such a word
    `/*Invalid register, operand has ...*/`, calls it invalid, or prints text its assembler refuses): the decoder refuses
    those words, so every word it decodes prints text both assemblers take. See _operand_problem for each kind."""
    checks: list[tuple[str, str, int, int]] = []
    if arch.name == "cdna" and "_gws_" in name:  # CDNA's wave sync ops address GDS and take an even data register
        checks += [("gds", "set", 0, 0)] + ([("addr", "even", 0, 0)] if info else [])
    if fmt.startswith("SOP"):  # scalar sources that take registers only (syntax_scalar.register_only)
        checks += [(f, "register", 0, 0) for f, (_, optype, _) in info.items() if f.startswith("ssrc") and register_only(name, optype)]
    if mfma:  # CDNA matrix ops: A and B are VGPRs or AGPRs, C one or an inline constant (a sparse op's index a VGPR)
        checks += [("src0", "vgpr", 0, 0), ("src1", "vgpr", 0, 0),
                   ("src2", "vgpr" if name.startswith("v_smfmac") else "vgpr_or_inline", 0, 0)]

    if fmt in VOP_SHORT or fmt in ("VOP3", "VOP3SD"):  # VGPR-only sources (permlanes, gfx950's packed scale conversions)
        checks += [(f, "vgpr_src", 0, 0) for f in ("src0", "src1", "src2") if f in info and info[f][1] == "SRC_VGPR"]
    if facts is not None and (plain := facts.plain):  # neg/abs on integer/bit operands
        if facts.long:
            checks += [("neg", "plain_mods", plain, 0), ("abs", "plain_mods", plain, 0)]
        else:  # the DPP/SDWA forms' per-source bits
            checks += [(f"src{i}_{m}", "plain_mods", 1, 0) for i in range(2) if plain >> i & 1 for m in ("neg", "abs")]
    if facts is not None and facts.long:
        checks += [(field, "lane_mask", 0, 0) for field, m64, _ in facts.srcs if m64]
        if fmt == "VOP3SD":
            checks.append(("sdst", "lane_mask", 0, 0))
    fields = arch.formats[fmt]["fields"]
    for field, scale, regs in (("srsrc", 4, 4), ("ssamp", 4, 4), ("rsrc", 1, 4), ("samp", 1, 4), ("sbase", 2, 0)):
        if field in fields:
            count = regs or (reg_count(info[field][0]) if field in info else 2)
            checks.append((field, "sgprs", scale, count))
    if arch.name == "cdna" and fmt == "VOP3P" and not mfma and not vop3p_rules(arch, name, info).op_sel:
        checks.append(("opsel", "zero", 0, 0))  # ops without 16-bit halves (the 8/4-bit integer dots): LLVM 22 calls op_sel invalid
    if fmt in ("VOP3", "VOP3SD"):  # LLVM's profiles: clamp and the output modifier where the result can take them
        checks += [(f, "zero", 0, 0) for f, refused in (("clmp", no_clamp), ("omod", no_omod)) if refused(arch.name, name)]
    if arch.name == "cdna" and fmt not in ("MIMG", "VOP3PX2"):  # gfx90a+: VGPR/AGPR tuples start at even registers
        for field, (bits, optype, _) in info.items():
            if bits < 64 or optype in ("SREG", "SDST", "SSRC", "SREG_NOVCC", "SREG_LITERAL", "SSRC_LANESEL", "EXEC") \
                    or optype.startswith(("IMM", "SIMM")) or "_tr_b6" in name:
                continue
            if field in ("src0", "src1", "src2"):
                checks.append((field, "src_tuple", 0, 0))
            elif field in ("addr", "vaddr") and fmt in ("GLOBAL", "SCRATCH"):
                checks.append((field, "global_addr", 0, 0))  # 64 bits only without a scalar address
            elif field == "vaddr" and fmt in ("MUBUF", "MTBUF"):
                checks.append((field, "buffer_addr", 0, 0))  # two VGPRs only with both idxen and offen
            elif field in ("vdst", "vsrc1", "vdata", "data", "data0", "data1", "addr", "vaddr"):
                checks.append((field, "vgpr_tuple", 0, 0))
    if fmt == "VINTERP":  # interpolation sources are VGPRs
        checks += [(field, "vgpr", 0, 0) for field in ("src0", "src1", "src2") if field in fields]
    if fmt == "SMEM" and "buffer" in name and arch.name != "cdna":
        checks.append(("sbase", "not_null", 2, 0))  # a buffer resource, never null
    if fmt == "SMEM" and "buffer" in name and arch.name == "rdna4" and "ioffset" in fields:
        checks.append(("ioffset", "top_bit", 24, 0))  # 23-bit unsigned (gfx11 / CDNA words LLVM prints negative instead)
    if arch.unavailable:
        checks += [(field, "unavailable", 0, 0) for field in ("ssrc0", "ssrc1", "src0", "src1", "src2", "soffset", "srcx0", "srcy0", "sdst")
                   if field in fields]
        if "vdst" in info and info["vdst"][1] in ("SREG", "SDST", "SREG_NOVCC"):  # VOPC e64's lane mask, readfirstlane's SGPR
            checks.append(("vdst", "unavailable", 0, 0))
    if "saddr" in fields and fmt.removeprefix("V") == "GLOBAL":
        checks.append(("saddr", "sgpr_pair", 0, 0))  # a 64-bit base: SGPRs, vcc or TTMPs (or none)
    if fmt in BUFFER_FORMATS and "store" in name:
        checks.append(("tfe", "zero", 0, 0))  # LLVM: TFE modifier has no meaning for store instructions
    if fmt == "FLAT" and arch.name == "rdna3":
        checks.append(("offset", "flat12", 0, 0))
    if fmt in ("MIMG", "VIMAGE", "VSAMPLE") and arch.name != "cdna" and ("gather4" in name or "msaa_load" in name):
        checks.append(("dmask", "one_bit", 0, 0))  # gathers and MSAA loads read one channel
    if fmt in ("FLAT", "VFLAT") and not name.startswith("flat_"):  # the *_addtid ops the FLAT table shares with GLOBAL
        checks.append(("op", "never", 0, 0))
    return tuple(checks)


_ZERO_WHAT = {"opsel": "16-bit halves to select", "clmp": "clamp", "omod": "output modifier", "tfe": "TFE (a store returns no status)"}


def _problem_set(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if not code:
        return f"the {field} bit is clear (CDNA's wave sync ops address GDS; LLVM decodes no such op here)"
    return None


def _problem_even(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code & 1:
        return f"its data register {code} is odd (CDNA wants it even; LLVM prints it but does not assemble it)"
    return None


_CONSTANT_CODES = _INLINE_CODES | {255}  # inline constants and the literal


def _problem_register(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code in _CONSTANT_CODES:
        return f"its source {field} must be a scalar register, not a constant"
    return None


def _problem_vgpr(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code < 256:
        return f"{field} (code {code}) must be a VGPR or AGPR"
    return None


def _problem_vgpr_or_inline(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code < 256 and code not in _INLINE_CODES:
        return f"{field} (code {code}) must be a VGPR, an AGPR or an inline constant"
    return None


def _problem_lane_mask(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code >= 126 or (arch.wave == 64 and code & 1):
        # SGPRs, vcc or TTMPs: no VGPR, constant, exec or src_* register, and in wave64 an even-aligned pair
        what = f"SGPRs, not v{code - 256}" if code >= 256 else f"code {code} names no SGPR pair" if code < 126 else f"code {code} is no SGPR"
        return f"{field} is a lane mask: {what}"
    return None


def _problem_sgprs(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code * scale < arch.num_sgprs < code * scale + regs:
        return f"{field} names s[{code * scale}:{code * scale + regs - 1}], past the {arch.num_sgprs} SGPRs"
    if field != "sbase" and (arch.num_sgprs <= code * scale < 108 or code * scale + regs > 124):
        return f"{field} (code {code * scale}) is not a range of SGPRs or TTMPs"  # vcc, null, exec, a constant
    return None


def _problem_src_tuple(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code >= 256 and code & 1:
        return f"{field} v{code - 256} starts a 64-bit or wider tuple at an odd register (gfx90a+ want it even)"
    return None


def _problem_vgpr_tuple(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code & 1:
        return f"{field} {code} starts a 64-bit or wider tuple at an odd register (gfx90a+ want it even)"
    return None


def _problem_buffer_addr(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code & 1 and fields.get("idxen") and fields.get("offen"):
        return f"{field} v[{code}:{code + 1}] (index and offset) starts at an odd register (gfx90a+ want it even)"
    return None


def _problem_global_addr(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code & 1 and fields.get("saddr", 0) == arch.null_code:
        return f"{field} v[{code}:{code + 1}] is a 64-bit address at an odd register (gfx90a+ want it even)"
    return None


def _problem_zero(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code:
        return f"{field} bits {code:#05b} set: the instruction has no {_ZERO_WHAT.get(field, field)}"
    return None


def _problem_unavailable(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code in arch.unavailable:
        return f"{field} code {code} ({arch.special[code]}) is not available on {arch.name}"
    return None


def _problem_not_null(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code * scale == arch.null_code:
        return f"{field} is null, not a buffer resource"
    return None


def _problem_one_bit(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code.bit_count() != 1:
        return f"dmask {code:#x}: a gather reads one channel (one bit)"
    return None


def _problem_never(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    return "a GLOBAL-segment opcode in the FLAT segment"


def _problem_sgpr_pair(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code != arch.null_code and not (code < arch.num_sgprs or (code < 108 and code % 2 == 0) or 108 <= code < 124):
        return f"{field} code {code} ({arch.special.get(code, 'a constant')}) is no 64-bit base address (SGPRs, vcc or TTMPs)"
    return None


def _problem_vgpr_src(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code < 256 and code not in (_CDNA_VARIANT_CODES if arch.name == "cdna" else _RDNA_VARIANT_CODES):
        return f"{field} (code {code}) must be a VGPR"
    return None


def _problem_top_bit(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code >> (scale - 1) & 1:
        return f"{field} bit {scale - 1} set: a buffer op's offset is {scale - 1}-bit unsigned"
    return None


def _problem_plain_mods(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code & scale:
        return f"{field} bits {code & scale:#05b} set on integer or bit operands (only float operands take neg/abs)"
    return None


def _problem_flat12(arch: Arch, field: str, code: int, scale: int, regs: int, fields: dict) -> str | None:
    if code >= 4096:
        return f"{field} {code} does not fit a FLAT offset's 12 unsigned bits"
    return None


# check kind -> the function saying why a field's value breaks it (or None): one dict lookup per check instead of
# a chain of comparisons of the kind, most of a word's decode time on CDNA, whose tuples are checked on most words
_PROBLEM_OF = {
    "set": _problem_set,
    "even": _problem_even,
    "register": _problem_register,
    "vgpr": _problem_vgpr,
    "vgpr_or_inline": _problem_vgpr_or_inline,
    "lane_mask": _problem_lane_mask,
    "sgprs": _problem_sgprs,
    "src_tuple": _problem_src_tuple,
    "vgpr_tuple": _problem_vgpr_tuple,
    "buffer_addr": _problem_buffer_addr,
    "global_addr": _problem_global_addr,
    "zero": _problem_zero,
    "unavailable": _problem_unavailable,
    "not_null": _problem_not_null,
    "one_bit": _problem_one_bit,
    "never": _problem_never,
    "sgpr_pair": _problem_sgpr_pair,
    "vgpr_src": _problem_vgpr_src,
    "top_bit": _problem_top_bit,
    "plain_mods": _problem_plain_mods,
    "flat12": _problem_flat12,
}


def _operand_problem(arch: Arch, checks: tuple, fields: dict[str, int]) -> str | None:
    """Why a decoded word breaks one of `checks` (see _operand_checks), or None."""
    for field, kind, scale, regs in checks:
        if (problem := _PROBLEM_OF[kind](arch, field, fields.get(field, 0), scale, regs, fields)) is not None:
            return problem
    return None


class _FormatPlan:
    """A base format's opcode field, the src0 codes that select its DPP/SDWA variants, and its opcodes' plans."""

    __slots__ = ("op_lo", "op_mask", "src0", "variant_codes", "ops")

    def __init__(self, arch: Arch, fmt: str):
        base = arch.formats[fmt]
        op_spec = base["fields"].get("opx" if fmt == "VOPD" else "op")
        self.op_lo, self.op_mask = (op_spec[1], (1 << (op_spec[0] - op_spec[1] + 1)) - 1) if op_spec else (0, 0)
        self.src0 = None
        self.variant_codes: dict[int, str] = {}
        if fmt in VOP_SHORT + VOP_LONG:
            spec = base["fields"]["src0"]
            self.src0 = (spec[1], (1 << (spec[0] - spec[1] + 1)) - 1)
            for code, variant in ((DPP16_CODE, "DPP16"), (DPP8_CODE, "DPP8"), (DPP8FI_CODE, "DPP8"), (SDWA_CODE, "SDWA")):
                name = f"{fmt}_{variant}" if f"{fmt}_{variant}" in arch.formats else f"{fmt}_{variant}_SDST"
                if name in arch.formats:
                    self.variant_codes[code] = name.removeprefix(f"{fmt}_")
        self.ops: dict[int, _OpPlan] = {}


class _Decoder:
    """Decoding state of one target name: its Arch, the candidate formats of each dword0 top-bits value, and lazily
    built per-format and per-opcode plans (every fact decode_one derives from the tables, derived once)."""

    def __init__(self, target: str):
        self.target = target
        self.arch = get_arch(target)
        self.candidates = _candidates_by_top_bits(self.arch.key)
        self.formats: dict[str, _FormatPlan | None] = {}
        # formats sharing an encoding with no fixed bits to tell them apart (VOP3 and VOP3SD): the opcode says which,
        # as _base_format decides: (opcode field's low bit, mask, opcode -> format, the format otherwise)
        self.by_opcode: dict[tuple[str, ...], tuple[int, int, dict[int, str], str]] = {}
        for names in set(self.candidates):
            if len(names) > 1 and not any(self.arch.formats[n]["fixed"] for n in names):
                hi, lo, *_ = self.arch.formats[names[0]]["fields"]["op"]
                which: dict[int, str] = {}
                for name in sorted(names, key=lambda n: n != "VOP3SD"):
                    for opcode in self.arch.ops.get(name, {}):
                        which.setdefault(opcode, name)
                self.by_opcode[names] = (lo, (1 << (hi - lo + 1)) - 1, which, names[0])

    def format_plan(self, fmt: str) -> "_FormatPlan | None":
        if fmt not in self.formats:
            self.formats[fmt] = _FormatPlan(self.arch, fmt) if fmt in self.arch.ops else None
        return self.formats[fmt]

    def op_plan(self, fplan: _FormatPlan, fmt: str, opcode: int) -> _OpPlan | None:
        plan = fplan.ops.get(opcode)
        if plan is None and opcode in self.arch.ops[fmt]:
            plan = fplan.ops[opcode] = _OpPlan(self.arch, self.target, fmt, opcode)
        return plan


@cache
def _decoder(target: str) -> _Decoder:
    return _Decoder(target)


def decode_one(data: bytes, arch: str, offset: int = 0) -> Inst:
    """Decode the instruction at `offset` of `data` for an architecture or gfx target; raises DecodeError on bad bytes."""
    return _decode_at(data, arch, offset)[0]


def _decode_at(data: bytes, arch: str, offset: int) -> tuple[Inst, int]:
    """The instruction at `offset` and its size in bytes (literal included)."""
    dec = _decoder(arch)
    arch_obj = dec.arch
    left = len(data) - offset
    if left < 4:
        raise DecodeError(f"truncated instruction at offset {offset:#x}: {left} byte(s) left")
    dword0 = int.from_bytes(data[offset:offset + 4], "little")
    candidates = dec.candidates[dword0 >> 23]
    peek = None
    if len(candidates) == 1:
        fmt = candidates[0]
    elif candidates in dec.by_opcode:
        lo, mask, which, other = dec.by_opcode[candidates]
        fmt = which.get((dword0 >> lo) & mask, other)
    else:
        peek = int.from_bytes(data[offset + 4:offset + 8].ljust(4, b"\0"), "little")
        fmt = _base_format(arch_obj, dword0, peek)
    fplan = dec.formats.get(fmt) or dec.format_plan(fmt)
    if fplan is None:
        raise DecodeError(f"{fmt} instructions (dword {dword0:#010x} at offset {offset:#x}) are not supported by the {arch_obj.name} tables")
    # Exports have no opcode field: their format holds a single instruction, opcode 0.
    opcode = (dword0 >> fplan.op_lo) & fplan.op_mask
    plan = fplan.ops.get(opcode) or dec.op_plan(fplan, fmt, opcode)
    if plan is None:
        raise DecodeError(f"unknown {fmt} opcode {opcode} at offset {offset:#x} ({arch_obj.name})")
    if plan.missing:  # the family's tables list it, this target lacks it (LLVM does not decode it either)
        raise DecodeError(f"{plan.name} at offset {offset:#x} is not an instruction of {arch}")
    if plan.scale:
        pair = _scaled_mfma(arch_obj, data, offset)
        if pair is not None:
            return pair, 16
    variant = ""
    if plan.mfma:
        variant = "MFMA"
    elif plan.nsa:
        if dword0 & 1:
            variant = "NSA"  # bit 0 of a gfx11 MIMG: the address VGPRs are listed in an extra dword
    elif plan.vop:
        if peek is None:
            peek = int.from_bytes(data[offset + 4:offset + 8].ljust(4, b"\0"), "little")
        lo, mask = fplan.src0
        variant = fplan.variant_codes.get(((dword0 | peek << 32) >> lo) & mask, "")
    layout = plan.layouts.get(variant)
    if layout is None:
        layout = plan.layouts[variant] = (arch_obj.formats[f"{fmt}_{variant}" if variant else fmt]["size"],
                                          _field_reader(arch_obj.key, fmt, variant))
    size, read_fields = layout
    if left < size:
        raise DecodeError(f"truncated {plan.name} at offset {offset:#x}: needs {size} bytes, {left} left")
    word = int.from_bytes(data[offset:offset + size], "little")
    fields = read_fields(word)
    if plan.packed is not None and (problem := vop3p_word_problem(*plan.packed, fields)) is not None:
        raise DecodeError(f"invalid {plan.name} encoding at offset {offset:#x}: {problem}")
    if plan.bus is not None:
        # most words read few scalar sources: count the 9-bit source fields below the VGPRs before anything else
        facts = plan.bus[0]
        scalars = 0
        for f in facts.bus_fields:
            if fields[f] < 256:
                scalars += 1
        if (scalars > facts.bus_room if not variant else variant[0] == "S") and \
                (problem := constant_bus_problem(arch_obj, plan.name, *plan.bus, fields, variant, None)) is not None:
            raise DecodeError(f"invalid {plan.name} encoding at offset {offset:#x}: it {problem}")
    if plan.operands and (problem := _operand_problem(arch_obj, plan.operands, fields)) is not None:
        raise DecodeError(f"invalid {plan.name} encoding at offset {offset:#x}: {problem}")
    if variant[:3] == "DPP" and fmt in VOP_LONG and \
            (problem := vop3_dpp_problem(arch_obj, fmt, fields, operand_info(arch_obj.key, fmt, opcode))) is not None:
        raise DecodeError(f"invalid {plan.name} encoding at offset {offset:#x}: {problem}")
    if variant[:4] == "SDWA" and (problem := sdwa_problem(plan.name, operand_info(arch_obj.key, fmt, opcode))) is not None:
        raise DecodeError(f"invalid {plan.name} encoding at offset {offset:#x}: {problem}")
    if variant[:3] == "DPP" and plan.no_dpp:
        raise DecodeError(f"invalid {plan.name} encoding at offset {offset:#x}: the instruction has no DPP form")
    if variant[:3] == "DPP" and (problem := dp_dpp_problem(arch_obj, operand_info(arch_obj.key, fmt, opcode),
                                                            fields.get("dpp") if variant == "DPP16" else None)) is not None:
        raise DecodeError(f"invalid {plan.name} encoding at offset {offset:#x}: {problem}")
    literal = None
    if plan.vopd:
        if fields["opy"] not in arch_obj.ops["VOPD"]:
            raise DecodeError(f"unknown VOPD Y opcode {fields['opy']} at offset {offset:#x}")
        if (problem := vopd_problem(arch_obj, opcode, fields["opy"], fields)) is not None:
            raise DecodeError(f"invalid {plan.name} pair at offset {offset:#x}: {problem}")
        needs_literal = _needs_literal(arch_obj, fmt, opcode, fields)
    else:
        sources = plan.lit_sources
        needs_literal = not variant and (sources is None or any(fields.get(f) == 255 for f in sources))
    if needs_literal:
        if left < size + 4:
            raise DecodeError(f"truncated {plan.name} at offset {offset:#x}: its literal dword is missing")
        literal = int.from_bytes(data[offset + size:offset + size + 4], "little")
        return Inst(arch_obj, fmt, opcode, fields, literal, variant), size + 4
    return Inst(arch_obj, fmt, opcode, fields, literal, variant), size


def _scaled_mfma(arch: Arch, data: bytes, offset: int) -> Inst | None:
    """The VOP3PX2 pair starting at `offset` (a scale load whose next 8 bytes are an f8f6f4 MFMA), or None.

    Like LLVM's disassembler, a v_mfma_ld_scale_b32 followed by a scalable MFMA reads as one 16-byte instruction; a scale
    word with bits the pair's syntax cannot show (its own vdst, src2, clamp, op_sel_hi[2]) stays two instructions, so
    decoding and re-encoding keep every bit.
    """
    if len(data) - offset < 16:
        return None
    word = int.from_bytes(data[offset:offset + 16], "little")
    layout = arch.formats["VOP3PX2"]
    if _extract(word, layout["encoding"]) != layout["encoding"][2]:
        return None
    opcode = _extract(word, layout["fields"]["op"])
    if opcode not in arch.ops["VOP3PX2"] or word & X2_HIDDEN_BITS or not word >> 75 & 1:
        return None  # LLVM pairs them only when the MFMA word has abid bit 0 set (its scaled form's marker)
    fields = {f: _extract(word, spec) for f, spec in layout["fields"].items() if f != "op"}
    return Inst(arch, "VOP3PX2", opcode, fields)


@cache
def _field_extractors(arch_name: str, fmt: str, variant: str) -> tuple[tuple[str, int, int], ...]:
    """(field, low bit, mask) of every field of an encoding but its opcode, in table order."""
    layout = get_arch(arch_name).formats[f"{fmt}_{variant}" if variant else fmt]
    return tuple((f, spec[1], (1 << (spec[0] - spec[1] + 1)) - 1) for f, spec in layout["fields"].items() if f not in ("op", "opx"))


@cache
def _field_reader(arch_name: str, fmt: str, variant: str):
    """A function of an encoded word giving its fields (`_field_extractors`) as a dict, compiled from the layout: one
    dict display of shifts and masks instead of a comprehension looping over the extractors."""
    items = ", ".join(f"{f!r}: (w >> {lo}) & {mask}" for f, lo, mask in _field_extractors(arch_name, fmt, variant))
    scope: dict = {}
    exec(compile(f"def read(w):\n    return {{{items}}}\n", f"<amd_isa fields {arch_name} {fmt} {variant}>", "exec"), scope)  # noqa: S102
    return scope["read"]


def _needs_literal(arch: Arch, fmt: str, opcode: int, fields: dict[str, int]) -> bool:
    if fmt == "VOPD":
        if _literal_sources(arch.key, fmt, opcode) is None or _literal_sources(arch.key, fmt, fields["opy"]) is None:
            return True
        return fields.get("srcx0") == 255 or fields.get("srcy0") == 255
    sources = _literal_sources(arch.key, fmt, opcode)
    return sources is None or any(fields.get(f) == 255 for f in sources)


@cache
def _literal_sources(arch_name: str, fmt: str, opcode: int) -> tuple[str, ...] | None:
    """Source fields whose code 255 means a literal dword follows; None when the opcode always carries one."""
    arch = get_arch(arch_name)
    name, info = arch.ops[fmt][opcode]
    if fmt == "VOP3PX2":
        return ()  # MFMA sources are registers or inline constants
    if any(part in name for part in ALWAYS_LITERAL):
        return None
    if fmt in VOP_LONG and not arch.vop3_literal:
        return ()
    used = {entry[0] for entry in info if entry[2] != "SENDMSG_RTN" and entry[1] != "SENDMSG_RTN"}
    return tuple(f for f in SRC_FIELDS if f in used or (f == "src0" and fmt in VOP_SHORT))


def decode(data: bytes, arch: str) -> list[Inst]:
    """Decode a whole buffer of machine code into instructions; raises DecodeError on bytes that are not code."""
    return list(iter_decode(data, arch))


def iter_decode(data: bytes, arch: str) -> Iterator[Inst]:
    """Decode instructions one after another, lazily."""
    offset = 0
    while offset < len(data):
        inst, size = _decode_at(data, arch, offset)
        yield inst
        offset += size
