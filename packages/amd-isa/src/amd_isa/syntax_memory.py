"""Syntax of the memory and interpolation formats: DS, FLAT/GLOBAL/SCRATCH, MUBUF/MTBUF, MIMG and the gfx12 V* forms."""

from functools import cache

from .errors import EncodeError
from .operands import OFF, Operand, Reg, Special, Sym, plain_reg
from .symbols import parse_swizzle, swizzle_text
from .syntax_common import Draft, decode_src, encode_scalar, encode_src, encode_vgpr, reg_count, scalar_operand, split_mod_const

Mods = dict[str, object]
Split = tuple[str, list, Mods]
FLAT_FORMATS = ("FLAT", "GLOBAL", "SCRATCH", "VFLAT", "VGLOBAL", "VSCRATCH")
BUFFER_FORMATS = ("MUBUF", "MTBUF", "VBUFFER")
IMAGE_FORMATS = ("MIMG", "VIMAGE", "VSAMPLE")
MIMG_DIMS = ("SQ_RSRC_IMG_1D", "SQ_RSRC_IMG_2D", "SQ_RSRC_IMG_3D", "SQ_RSRC_IMG_CUBE", "SQ_RSRC_IMG_1D_ARRAY", "SQ_RSRC_IMG_2D_ARRAY",
             "SQ_RSRC_IMG_2D_MSAA", "SQ_RSRC_IMG_2D_MSAA_ARRAY")
# Cache-policy bits in the order LLVM prints them, per family (gfx11 / gfx9-gfx940 / gfx12 numeric fields).
CACHE_FLAGS = ("glc", "slc", "dlc", "sc0", "nt", "sc1")
NUMERIC_POLICY = ("th", "scope")
# gfx9 MTBUF without a format operand: BUF_DATA_FORMAT_8, BUF_NUM_FORMAT_UNORM (LLVM's default).
GFX9_DEFAULT_FORMAT = (1, 0)
GFX9_DFMT = ("INVALID", "8", "16", "8_8", "32", "16_16", "10_11_11", "11_11_10", "10_10_10_2", "2_10_10_10", "8_8_8_8", "32_32",
             "16_16_16_16", "32_32_32", "32_32_32_32", "RESERVED_15")
GFX9_NFMT = ("UNORM", "SNORM", "USCALED", "SSCALED", "UINT", "SINT", "RESERVED_6", "FLOAT")


# gfx11/gfx12 unified buffer formats, in encoding order (LLVM's UfmtSymbolicGFX11): data layout, then the number formats
# that exist for it.
_UFMT_GROUPS = (("INVALID", ("",)), ("8", ("UNORM", "SNORM", "USCALED", "SSCALED", "UINT", "SINT")),
                ("16", ("UNORM", "SNORM", "USCALED", "SSCALED", "UINT", "SINT", "FLOAT")),
                ("8_8", ("UNORM", "SNORM", "USCALED", "SSCALED", "UINT", "SINT")), ("32", ("UINT", "SINT", "FLOAT")),
                ("16_16", ("UNORM", "SNORM", "USCALED", "SSCALED", "UINT", "SINT", "FLOAT")), ("10_11_11", ("FLOAT",)),
                ("11_11_10", ("FLOAT",)), ("10_10_10_2", ("UNORM", "SNORM", "UINT", "SINT")),
                ("2_10_10_10", ("UNORM", "SNORM", "USCALED", "SSCALED", "UINT", "SINT")),
                ("8_8_8_8", ("UNORM", "SNORM", "USCALED", "SSCALED", "UINT", "SINT")), ("32_32", ("UINT", "SINT", "FLOAT")),
                ("16_16_16_16", ("UNORM", "SNORM", "USCALED", "SSCALED", "UINT", "SINT", "FLOAT")),
                ("32_32_32", ("UINT", "SINT", "FLOAT")), ("32_32_32_32", ("UINT", "SINT", "FLOAT")))
UFMT_NAMES = tuple(f"BUF_FMT_{layout}_{kind}".rstrip("_") for layout, kinds in _UFMT_GROUPS for kind in kinds)
UFMT_DEFAULT = 1  # BUF_FMT_8_UNORM: what LLVM assumes when the format is left out


def ufmt_text(value: int) -> object:
    """LLVM's `[BUF_FMT_*]` spelling of a gfx11/gfx12 unified format, or the number when it has no name."""
    return f"[{UFMT_NAMES[value]}]" if value < len(UFMT_NAMES) else value


def parse_ufmt(value: object) -> int:
    """A unified format from `format:N`, `format:[BUF_FMT_*]` or the gfx9 split form `format:[BUF_DATA_FORMAT_*,
    BUF_NUM_FORMAT_*]` (either part may be left out: 8 and UNORM)."""
    if isinstance(value, int):
        return value
    name = str(value).strip("[] ")
    if "BUF_DATA_FORMAT_" in name or "BUF_NUM_FORMAT_" in name:
        dfmt, nfmt = parse_gfx9_format(value)
        name = f"BUF_FMT_{GFX9_DFMT[dfmt]}_{GFX9_NFMT[nfmt]}"
        if name not in UFMT_NAMES:
            raise EncodeError(f"unsupported format {str(value).strip()}: no unified buffer format {name}")
    if name not in UFMT_NAMES:
        raise EncodeError(f"unknown buffer format {name!r}")
    return UFMT_NAMES.index(name)


def gfx9_format_text(dfmt: int, nfmt: int) -> str:
    """LLVM's `[BUF_DATA_FORMAT_*,BUF_NUM_FORMAT_*]`, leaving out the parts that are at their default."""
    parts = []
    if dfmt != GFX9_DEFAULT_FORMAT[0]:
        parts.append(f"BUF_DATA_FORMAT_{GFX9_DFMT[dfmt]}")
    if nfmt != GFX9_DEFAULT_FORMAT[1]:
        parts.append(f"BUF_NUM_FORMAT_{GFX9_NFMT[nfmt]}")
    return f"[{','.join(parts)}]"


def parse_gfx9_format(value: object) -> tuple[int, int]:
    """(dfmt, nfmt) from `format:N` or the symbolic list form."""
    if isinstance(value, int):
        return value & 0xF, value >> 4 & 7
    dfmt, nfmt = GFX9_DEFAULT_FORMAT
    for part in str(value).strip("[]").split(","):
        part = part.strip()
        if part.startswith("BUF_DATA_FORMAT_") and part[16:] in GFX9_DFMT:
            dfmt = GFX9_DFMT.index(part[16:])
        elif part.startswith("BUF_NUM_FORMAT_") and part[15:] in GFX9_NFMT:
            nfmt = GFX9_NFMT.index(part[15:])
        else:
            raise EncodeError(f"unknown buffer format {part!r}")
    return dfmt, nfmt


def _signed(raw: int, width: int) -> int:
    return raw - (1 << width) if raw >> (width - 1) & 1 else raw


def _width(spec: tuple) -> int:
    return spec[0] - spec[1] + 1


def _vreg(index: int, bits: int, acc: bool = False) -> Reg:
    return plain_reg("a" if acc else "v", index, reg_count(bits))


# gfx12 cache policy spellings LLVM uses (from its gfx12 MC tests): temporal hints are named per kind of access;
# values without a name print as numbers.
SCOPE_NAMES = ("SCOPE_CU", "SCOPE_SE", "SCOPE_DEV", "SCOPE_SYS")
TH_LOAD_NAMES = {1: "TH_LOAD_NT", 2: "TH_LOAD_HT", 3: "TH_LOAD_LU", 4: "TH_LOAD_NT_RT", 5: "TH_LOAD_RT_NT", 6: "TH_LOAD_NT_HT"}
TH_STORE_NAMES = {1: "TH_STORE_NT", 2: "TH_STORE_HT", 3: "TH_STORE_WB", 4: "TH_STORE_NT_RT", 5: "TH_STORE_RT_NT", 6: "TH_STORE_NT_HT",
                  7: "TH_STORE_NT_WB"}
# atomics: bit 0 returns the old value, bit 1 is non-temporal, bit 2 cascades
TH_ATOMIC_NAMES = {1: "TH_ATOMIC_RETURN", 2: "TH_ATOMIC_NT", 3: "TH_ATOMIC_NT_RETURN", 4: "TH_ATOMIC_CASCADE_RT", 6: "TH_ATOMIC_CASCADE_NT"}
# what the assembler reads: every printed name, the defaults and BYPASS (3 at system scope, where LU / WB are not said;
# LLVM 19-22 refuse the TH_LOAD_WB, TH_LOAD_NT_WB and TH_STORE_LU spellings: invalid th value)
TH_BY_NAME = {**{name: value for names in (TH_LOAD_NAMES, TH_STORE_NAMES, TH_ATOMIC_NAMES) for value, name in names.items()},
              "TH_LOAD_RT": 0, "TH_STORE_RT": 0, "TH_ATOMIC_RT": 0, "TH_ATOMIC_RT_RETURN": 1, "TH_LOAD_BYPASS": 3, "TH_STORE_BYPASS": 3}


# the names the assembler takes for each kind of access
_TH_BY_KIND = {kind: {th: v for th, v in TH_BY_NAME.items() if th.startswith(f"TH_{kind}_")} for kind in ("LOAD", "STORE", "ATOMIC")}


def _th_kind(name: str) -> str:
    """The kind of access a temporal hint of instruction `name` is named for: ATOMIC, STORE or LOAD."""
    return "ATOMIC" if "atomic" in name else "STORE" if "store" in name else "LOAD"


def th_text(name: str, th: int, scope: int) -> object:
    """LLVM's spelling of a gfx12 temporal hint for this instruction's kind of access (TH_ATOMIC_*, TH_STORE_*, TH_LOAD_*;
    3 at system scope is BYPASS), else the number."""
    kind = _th_kind(name)
    if kind == "ATOMIC":
        return TH_ATOMIC_NAMES.get(th, f"{th:#x}")
    if th == 3 and scope == 3:
        return f"TH_{kind}_BYPASS"
    return (TH_STORE_NAMES if kind == "STORE" else TH_LOAD_NAMES).get(th, f"{th:#x}")  # LLVM: unnamed hints in hex


def parse_policy(key: str, value: object, name: str) -> int:
    """A th:/scope: value of instruction `name` from its LLVM name (a temporal hint's name must be of the instruction's
    kind of access: TH_ATOMIC_* for atomics, TH_STORE_* for stores, TH_LOAD_* otherwise); a scope may be a number. A
    numeric th is refused as LLVM refuses it ("expected an identifier"), though LLVM and we print a hint with no name
    (7 at the default scope) as th:0x7."""
    if isinstance(value, int) and not isinstance(value, bool):
        if key == "th":
            raise EncodeError(f"{name}: th:{value} is a number: expected an identifier, one of {', '.join(_TH_BY_KIND[_th_kind(name)])}")
        return value
    names = {scope: i for i, scope in enumerate(SCOPE_NAMES)} if key == "scope" else _TH_BY_KIND[_th_kind(name)]
    if str(value) not in names:
        raise EncodeError(f"{name}: unknown {key} value {value!r}; use {'a number or ' if key == 'scope' else ''}one of {', '.join(names)}")
    return names[str(value)]


def _cache_mods(inst_fields: dict[str, int], layout_fields: dict, mods: Mods, arch, name: str = "") -> None:
    for flag in CACHE_FLAGS:
        if inst_fields.get(flag):
            mods[arch.cache_names.get(flag, flag)] = True
    if inst_fields.get("th"):
        mods["th"] = th_text(name, inst_fields["th"], inst_fields.get("scope", 0))
    if inst_fields.get("scope"):
        mods["scope"] = SCOPE_NAMES[inst_fields["scope"]]
    for flag in ("tfe", "lwe", "nv"):
        if inst_fields.get(flag):
            mods[flag] = True


def _join_cache(draft: Draft, layout_fields: dict, mods: Mods) -> None:
    th_names: list[str] = []
    for field_name, spelling in draft.arch.cache_names.items():
        if field_name in mods:  # gfx90a: the bits are glc/slc/scc there (LLVM: invalid operand for instruction)
            raise EncodeError(f"{draft.name}: this target spells the {field_name} bit {spelling}")
        if spelling in mods:
            mods[field_name] = mods.pop(spelling)
    for key in (*CACHE_FLAGS, *NUMERIC_POLICY, "tfe", "lwe", "nv"):
        if key in mods:
            if key not in layout_fields:
                raise EncodeError(f"{draft.name} ({draft.arch.name}) has no {key} bit")
            value = mods.pop(key)
            draft.fields[key] = parse_policy(key, value, draft.name) if key in NUMERIC_POLICY else int(value)  # type: ignore[call-overload]
            if key == "th" and isinstance(value, str):
                th_names.append(value)
    for th in th_names:  # load/store hint 3 is BYPASS at system scope, LU (loads) / WB (stores) at the others
        bypass = th.endswith("_BYPASS")
        if TH_BY_NAME.get(th) == 3 and not th.startswith("TH_ATOMIC") and bypass != (draft.fields.get("scope", 0) == 3):
            where = "system scope" if bypass else "scopes below SCOPE_SYS"
            raise EncodeError(f"{draft.name}: scope and th combination is not valid ({th} is for {where})")


def _done(draft: Draft, mods: Mods) -> None:
    if mods:
        raise EncodeError(f"{draft.name} does not take modifier(s) {', '.join(sorted(mods))}")


def _has_vdst(name: str, info: dict) -> bool:
    """Loads to LDS (`*_load_lds_*`) write LDS, not a VGPR, although the ISA tables list a destination."""
    return "vdst" in info and "load_lds" not in name


def _return_bits(name: str, bits: int, data_bits: int) -> int:
    """Compare-and-swap atomics return one value although their data operand holds two."""
    return data_bits // 2 if "cmpswap" in name and data_bits >= 64 else bits


def _returns(name: str, fields: dict[str, int], arch_name: str) -> bool:
    """Atomics write their destination only when asked to return the old value (glc / sc0 / th bit 0)."""
    if "atomic" not in name:
        return True
    if arch_name == "rdna4":
        return bool(fields.get("th", 0) & 1)
    return bool(fields.get("glc") or fields.get("sc0"))


# ----------------------------------------------------------------------------- DS


def _two_offsets(name: str) -> bool:
    """DS ops addressing two elements take offset0/offset1 (gfx11 *_2addr_*, gfx9 read2/write2)."""
    return any(part in name for part in ("2addr", "read2", "write2", "wrxchg2"))


def split_ds(inst) -> Split:
    """DS: vdst, addr, data0, data1, then offset (or offset0/offset1) and gds."""
    info, fields = inst.operand_info, inst.fields
    acc = bool(fields.get("acc"))
    ops: list = []
    for field in ("vdst", "addr", "data0", "data1"):
        if field in info:
            # the global wave sync ops carry their data in the address field (AGPRs too)
            ops.append(_vreg(fields[field], info[field][0], acc and (field != "addr" or "_gws_" in inst.mnemonic)))
    mods: Mods = {}
    if _two_offsets(inst.mnemonic):
        for key in ("offset0", "offset1"):
            if fields[key]:
                mods[key] = fields[key]
    elif fields["offset0"] or fields["offset1"]:
        offset = fields["offset1"] << 8 | fields["offset0"]
        mods["offset"] = Sym(offset, swizzle_text(offset)) if "swizzle" in inst.mnemonic else offset
    # CDNA has GDS for its wave sync ops alone: elsewhere the bit is printed by no one (LLVM's disassembler neither)
    if fields.get("gds") and (inst.arch.name != "cdna" or "_gws_" in inst.mnemonic):
        mods["gds"] = True
    return inst.mnemonic, ops, mods


def join_ds(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of split_ds."""
    slots = [f for f in ("vdst", "addr", "data0", "data1") if f in draft.info]
    if len(ops) != len(slots):
        raise EncodeError(f"{draft.name} takes {len(slots)} operand(s) ({', '.join(slots)}), got {len(ops)}")
    for slot, operand in zip(slots, ops, strict=True):
        draft.fields[slot] = encode_vgpr(draft, slot, operand)
        if isinstance(operand, Reg) and operand.kind == "a":
            draft.fields["acc"] = 1
        if "_gws_" in draft.name and draft.arch.name == "cdna" and draft.fields[slot] % 2:
            raise EncodeError(f"{draft.name}: the data register must be even aligned on CDNA, got {operand}")
    if "offset" in mods:
        value = mods.pop("offset")
        offset = value.value if isinstance(value, Sym) else parse_swizzle(value) if isinstance(value, str) else int(value)  # type: ignore[call-overload]
        if not 0 <= offset <= 0xFFFF:
            raise EncodeError(f"{draft.name}: offset {offset} is outside 0..65535")
        draft.fields.update(offset0=offset & 0xFF, offset1=offset >> 8)
    for key in ("offset0", "offset1"):
        if key in mods:
            draft.fields[key] = int(mods.pop(key)) & 0xFF  # type: ignore[call-overload]
    # The global wave sync, ordered-count and GS-register operations always address GDS; CDNA's wave sync ops spell
    # it out (LLVM: "too few operands for instruction" without it)
    gds = mods.pop("gds", False)
    if "_gws_" in draft.name and draft.arch.name == "cdna" and not gds:
        raise EncodeError(f"{draft.name}: write gds (CDNA's wave sync ops address GDS)")
    if gds and draft.arch.name == "cdna" and "_gws_" not in draft.name:
        raise EncodeError(f"{draft.name}: gds modifier is not supported on this GPU (CDNA has GDS for the wave sync ops alone)")
    if gds or any(part in draft.name for part in ("_gws_", "ordered_count", "gs_reg")):
        draft.fields["gds"] = 1
    _done(draft, mods)


# ----------------------------------------------------------------------------- FLAT / GLOBAL / SCRATCH


def _flat_names(fmt: str) -> tuple[str, str, str]:
    return ("vaddr", "vsrc", "ioffset") if fmt.startswith("V") else ("addr", "data", "offset")


def split_flat(inst) -> Split:
    """FLAT/GLOBAL/SCRATCH: [vdst,] addr, [data,] [saddr | off], offset and cache bits."""
    fmt, info, fields, arch = inst.fmt, inst.operand_info, inst.fields, inst.arch
    addr_f, data_f, off_f = _flat_names(fmt)
    acc = bool(fields.get("acc"))
    kind = fmt.removeprefix("V")
    saddr = fields.get("saddr", arch.null_code)
    has_saddr = kind != "FLAT" and saddr != arch.null_code
    ops: list = []
    if _has_vdst(inst.mnemonic, info) and _returns(inst.mnemonic, fields, arch.name):
        ops.append(_vreg(fields["vdst"], _return_bits(inst.mnemonic, info["vdst"][0], info.get(data_f, (0,))[0]), acc))
    if addr_f in info:
        if kind == "SCRATCH" and not (fields.get("sve") or (not arch.scratch_sve and not has_saddr)):
            ops.append(OFF)
        else:
            wide = kind == "FLAT" or (kind == "GLOBAL" and not has_saddr)
            ops.append(Reg("v", fields[addr_f], 2 if wide else 1))
    if data_f in info:
        ops.append(_vreg(fields[data_f], info[data_f][0], acc))
    if kind != "FLAT" and info:  # gfx12's global_inv/wb/wbinv take no operands
        ops.append(scalar_operand(arch, saddr, 2 if kind == "GLOBAL" else 1) if has_saddr else OFF)
    mods: Mods = {}
    raw = fields[off_f]
    offset = raw if _unsigned_flat_offset(arch.name, kind) else _signed(raw, _width(inst.layout["fields"][off_f]))
    if offset:
        mods["offset"] = offset
    _cache_mods(fields, inst.layout["fields"], mods, arch, inst.mnemonic)
    return inst.mnemonic, ops, mods


def _unsigned_flat_offset(arch_name: str, kind: str) -> bool:
    """FLAT-segment offsets are unsigned 12-bit on gfx9 and gfx11 (GLOBAL and SCRATCH ones signed); gfx12's are all
    signed 24-bit."""
    return kind == "FLAT" and arch_name != "rdna4"


def join_flat(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of split_flat."""
    fmt, info, arch, fields, name = draft.fmt, draft.info, draft.arch, draft.fields, draft.name
    layout = arch.formats[fmt]["fields"]
    addr_f, data_f, off_f = _flat_names(fmt)
    kind = fmt.removeprefix("V")
    _join_cache(draft, layout, mods)
    ops = list(ops)
    returns = _returns(name, fields, arch.name)
    slots = [s for s, present in (("vdst", _has_vdst(name, info) and returns), (addr_f, addr_f in info), (data_f, data_f in info),
                                  ("saddr", kind != "FLAT" and bool(info))) if present]
    if len(ops) != len(slots):
        raise EncodeError(f"{name} takes {len(slots)} operand(s) ({', '.join(slots)}), got {len(ops)}")
    for slot, operand in zip(slots, ops, strict=True):
        if slot == "saddr":
            if _is_null(operand) and kind == "GLOBAL" and "addtid" not in name:  # LLVM: invalid operand (spelled off)
                raise EncodeError(f"{name}: saddr cannot be null; write off for no scalar address")
            want = 2 if kind == "GLOBAL" else 1
            if isinstance(operand, Reg | Special) and operand.count != want and not (_is_null(operand) or _is_off(operand)):
                raise EncodeError(f"{name}: saddr is {want} SGPR(s) ({'a 64-bit base such as s[0:1]' if want == 2 else 'such as s0'}), got {operand}")
            fields["saddr"] = arch.null_code if _is_off(operand) else encode_scalar(arch, f"{name} saddr", operand)
        elif slot == addr_f and _is_off(operand):
            fields[addr_f] = 0
        else:
            fields[slot] = encode_vgpr(draft, slot, operand)
            if isinstance(operand, Reg) and operand.kind == "a":
                fields["acc"] = 1
            if slot == addr_f and kind == "SCRATCH" and "sve" in layout and arch.scratch_sve:
                fields["sve"] = 1
    if kind == "FLAT" and arch.name == "cdna":
        fields["saddr"] = 0  # gfx9 FLAT has no SADDR; LLVM leaves the field zero
    offset = int(mods.pop("offset", 0))  # type: ignore[call-overload]
    width = _width(layout[off_f])
    if _unsigned_flat_offset(arch.name, kind):
        if not 0 <= offset < 4096:
            raise EncodeError(f"{name}: offset {offset} is outside 0..4095 (a FLAT offset is 12-bit unsigned; GLOBAL and SCRATCH take signed ones)")
    elif not -(1 << (width - 1)) <= offset < (1 << (width - 1)):
        raise EncodeError(f"{name}: offset {offset} is outside {-(1 << (width - 1))}..{(1 << (width - 1)) - 1} (a {width}-bit signed offset)")
    fields[off_f] = offset & ((1 << width) - 1)
    _done(draft, mods)


def _is_null(operand: object) -> bool:
    return isinstance(operand, Special) and operand.name == "null"


def _is_off(operand: object) -> bool:
    return isinstance(operand, Special) and operand.name == "off"


# ----------------------------------------------------------------------------- MUBUF / MTBUF


def split_buffer(inst) -> Split:
    """MUBUF/MTBUF: vdata, vaddr | off, srsrc, soffset, then format, idxen/offen, offset and cache bits."""
    fmt, info, fields, arch = inst.fmt, inst.operand_info, inst.fields, inst.arch
    rsrc_f = "rsrc" if fmt == "VBUFFER" else "srsrc"
    off_f = "ioffset" if fmt == "VBUFFER" else "offset"
    acc = bool(fields.get("acc"))
    ops: list = []
    if "vaddr" not in info and "vdata" not in info:  # cache writeback / invalidate: gfx940+ scope them with sc0 sc1
        return inst.mnemonic, [], {flag: True for flag in _scoped_cache_ops(arch) if fields.get(flag)}
    if "vdata" in info and not _loads_to_lds(arch, fields):
        extra = 32 if fields.get("tfe") else 0
        ops.append(_vreg(fields["vdata"], info["vdata"][0] + extra, acc))
    addresses = fields.get("idxen", 0) + fields.get("offen", 0)
    ops.append(Reg("v", fields["vaddr"], addresses) if addresses else OFF)
    rsrc = fields[rsrc_f] if fmt == "VBUFFER" else fields[rsrc_f] << 2
    ops.append(scalar_operand(arch, rsrc, 4))
    ops.append(decode_src(arch, fields["soffset"], 32, None))
    mods: Mods = {}
    if "format" in fields and fields["format"] != UFMT_DEFAULT:
        mods["format"] = ufmt_text(fields["format"])
    if "dfmt" in fields and (fields["dfmt"], fields["nfmt"]) != GFX9_DEFAULT_FORMAT:
        mods["format"] = gfx9_format_text(fields["dfmt"], fields["nfmt"])
    for flag in ("idxen", "offen"):
        if fields.get(flag):
            mods[flag] = True
    if fields[off_f]:
        mods["offset"] = fields[off_f]
    _cache_mods(fields, inst.layout["fields"], mods, arch, inst.mnemonic)
    if fields.get("lds"):
        mods["lds"] = True
    return inst.mnemonic, ops, mods


def _loads_to_lds(arch, fields: dict[str, int]) -> bool:
    """A CDNA buffer load with the lds bit writes LDS, not VGPRs: LLVM names no data register (and refuses one)."""
    return arch.name == "cdna" and bool(fields.get("lds"))


def _scoped_cache_ops(arch) -> tuple[str, ...]:
    """The scope bits of the operand-less buffer cache ops (buffer_wbl2, buffer_inv): sc0 and sc1 on gfx940+ (LLVM
    prints and takes them there); gfx90a and the RDNA targets take none."""
    return ("sc0", "sc1") if arch.name == "cdna" and "sc0" not in arch.cache_names else ()


def join_buffer(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of split_buffer."""
    fmt, info, fields, arch, name = draft.fmt, draft.info, draft.fields, draft.arch, draft.name
    layout = arch.formats[fmt]["fields"]
    rsrc_f = "rsrc" if fmt == "VBUFFER" else "srsrc"
    off_f = "ioffset" if fmt == "VBUFFER" else "offset"
    to_lds = _loads_to_lds(arch, {"lds": int(bool(mods.get("lds")))})
    want = 4 if "vdata" in info and not to_lds else 3 if "vaddr" in info else 0
    if want == 0 and not ops:
        fields["soffset"] = 0
        for flag in _scoped_cache_ops(arch):
            if mods.pop(flag, False):
                fields[flag] = 1
        _done(draft, mods)
        return
    if len(ops) != want:
        names = "vaddr, srsrc, soffset: a load to LDS names no data register" if to_lds else "vdata, vaddr, srsrc, soffset"
        raise EncodeError(f"{name} takes {want} operands ({names}), got {len(ops)}")
    ops = list(ops)
    if "vdata" in info and not to_lds:
        vdata = ops.pop(0)
        fields["vdata"] = encode_vgpr(draft, "vdata", vdata)
        if isinstance(vdata, Reg) and vdata.kind == "a":
            fields["acc"] = 1
    vaddr, rsrc, soffset = ops
    fields["vaddr"] = 0 if _is_off(vaddr) else encode_vgpr(draft, "vaddr", vaddr)
    if _is_null(rsrc):
        raise EncodeError(f"{name}: the buffer resource must be 4 SGPRs, not null")
    code = encode_scalar(arch, f"{name} srsrc", rsrc)
    fields[rsrc_f] = code if fmt == "VBUFFER" else code >> 2
    fields["soffset"] = encode_src(draft, "soffset", soffset, allow_literal=False)
    for flag in ("idxen", "offen", "lds"):
        if mods.pop(flag, False):
            fields[flag] = 1
    if mods.get("tfe") and "store" in name:
        raise EncodeError(f"{name}: TFE modifier has no meaning for store instructions")
    if "dfmt" in layout:
        # gfx9 numeric format:N packs the data format in bits 3:0 and the number format above.
        if "dfmt" in mods or "nfmt" in mods:  # the pre-gfx10 spelling: dfmt:N, nfmt:N
            if "format" in mods:
                raise EncodeError(f"{name}: give format: or dfmt:/nfmt:, not both")
            fields["dfmt"] = int(mods.pop("dfmt", GFX9_DEFAULT_FORMAT[0]))  # type: ignore[call-overload]
            fields["nfmt"] = int(mods.pop("nfmt", GFX9_DEFAULT_FORMAT[1]))  # type: ignore[call-overload]
        else:
            fields["dfmt"], fields["nfmt"] = parse_gfx9_format(mods.pop("format", GFX9_DEFAULT_FORMAT[0]))
    if "format" in layout:
        fields["format"] = parse_ufmt(mods.pop("format", UFMT_DEFAULT))
    offset = int(mods.pop("offset", 0))  # type: ignore[call-overload]
    if not 0 <= offset < (1 << _width(layout[off_f])):
        raise EncodeError(f"{name}: offset {offset} is outside 0..{(1 << _width(layout[off_f])) - 1}")
    fields[off_f] = offset
    _join_cache(draft, layout, mods)
    _done(draft, mods)


# ----------------------------------------------------------------------------- MIMG


class AddressList(list):
    """Separately named image address VGPRs: `[v4, v6]`."""

    def __str__(self) -> str:
        return "[" + ", ".join(str(reg) for reg in self) + "]"


# Coordinates per dim (1D, 2D, 3D, CUBE, 1D_ARRAY, 2D_ARRAY, 2D_MSAA, 2D_MSAA_ARRAY) and gradient pairs per dim.
_DIM_COORDS = (1, 2, 3, 3, 2, 3, 3, 4)
_DIM_GRADS = (1, 2, 3, 2, 1, 2, 2, 2)


@cache
def image_address_count(name: str, dim: int, a16: bool) -> int:
    """VGPRs of a non-NSA image address: coordinates plus the extra arguments the mnemonic names (LLVM's rules)."""
    tokens = name.split("_")[1:]
    coords = _DIM_COORDS[dim]
    # offset, bias and depth compare take a dword each; the mip level, lod or clamp goes with the coordinates, which
    # a16 packs two to a VGPR
    dwords = sum(token in tokens for token in ("c", "o", "b"))
    with_coords = int("mip" in tokens or "resinfo" in tokens or "l" in tokens or "cl" in tokens)
    if "resinfo" in tokens:
        coords = 0
    gradient_dims = _DIM_GRADS[dim] if "d" in tokens or "cd" in tokens else 0
    # d/dx and d/dy are separate vectors; 16-bit gradients (the g16 opcodes; a16 alone keeps them 32-bit) pack two
    # components per VGPR.
    grads = 2 * ((gradient_dims + 1) // 2) if "g16" in tokens else 2 * gradient_dims
    if a16:
        return grads + dwords + (coords + with_coords + 1) // 2
    return max(1, grads + dwords + with_coords + coords)


def split_image(inst) -> Split:
    """MIMG/VIMAGE/VSAMPLE: vdata, vaddr, resource, [sampler], then dmask, dim and flags."""
    fmt, info, fields, arch = inst.fmt, inst.operand_info, inst.fields, inst.arch
    if arch.name == "cdna":
        return _split_image_gfx9(inst)
    if "bvh" in inst.mnemonic:
        return _split_bvh(inst) if fmt == "MIMG" and inst.variant != "NSA" else _split_bvh_list(inst)
    dmask = fields.get("dmask", 0)
    channels = max(1, bin(dmask).count("1")) if not any(p in inst.mnemonic for p in ("gather4", "msaa_load")) else 4
    if fields.get("d16"):
        channels = (channels + 1) // 2
    channels += 1 if fields.get("tfe") else 0  # the status dword tfe returns (lwe alone adds none, as LLVM counts)
    ops: list = [plain_reg("v", fields["vdata"], channels)]
    count = image_address_count(inst.mnemonic, fields.get("dim", 0), bool(fields.get("a16")))
    if fmt == "MIMG":
        if inst.variant == "NSA":
            # up to five addresses; the last holds all remaining ones (gfx11's NSA has five address fields)
            regs = [plain_reg("v", fields["vaddr"])] + [plain_reg("v", fields[f"vaddr{i}"]) for i in range(1, min(count, 5))]
            if count > 5:
                regs[-1] = plain_reg("v", fields["vaddr4"], count - 4)
            ops.append(AddressList(regs))
        else:
            ops.append(plain_reg("v", fields["vaddr"], count))
        ops.append(scalar_operand(arch, fields["srsrc"] << 2, 8))  # LLVM names 8 registers, r128 or not
        if "ssamp" in info:
            ops.append(scalar_operand(arch, fields["ssamp"] << 2, 4))
    else:
        # gfx12 names up to five (VSAMPLE: four) address VGPRs one by one; the last holds all remaining coordinates.
        slots = sum(f"vaddr{i}" in fields for i in range(5))
        regs = [plain_reg("v", fields[f"vaddr{i}"]) for i in range(min(count, slots))]
        if count > slots:
            regs[-1] = plain_reg("v", fields[f"vaddr{slots - 1}"], count - slots + 1)
        ops.append(regs[0] if count == 1 else AddressList(regs))
        ops.append(scalar_operand(arch, fields["rsrc"], 4 if fields.get("r128") else 8))
        if "samp" in info:
            ops.append(scalar_operand(arch, fields["samp"], 4))
    mods: Mods = {"dmask": Sym(dmask, f"{dmask:#x}"), "dim": MIMG_DIMS[fields.get("dim", 0)]}
    if fields.get("unrm"):
        mods["unorm"] = True
    _cache_mods(fields, inst.layout["fields"], mods, arch, inst.mnemonic)
    # LLVM's order: cache policy, r128, a16, tfe, lwe, d16
    late = {flag: mods.pop(flag) for flag in ("tfe", "lwe") if flag in mods}
    for flag in ("r128", "a16"):
        if fields.get(flag):
            mods[flag] = True
    mods.update(late)
    if fields.get("d16"):
        mods["d16"] = True
    return inst.mnemonic, ops, mods


def _bvh_address_count(name: str, a16: bool) -> int:
    """VGPRs of a ray query's single address range."""
    return sum(_bvh_address_sizes(name, a16))


def _split_bvh(inst) -> Split:
    """`image_bvh_intersect_ray v[4:7], v[9:16], s[4:7] a16`: no dmask or dim; the descriptor is 128 bits."""
    fields = inst.fields
    a16 = bool(fields.get("a16"))
    ops = [Reg("v", fields["vdata"], 4), Reg("v", fields["vaddr"], _bvh_address_count(inst.mnemonic, a16)),
           scalar_operand(inst.arch, fields["srsrc"] << 2, 4)]
    return inst.mnemonic, ops, ({"a16": True} if a16 else {})


def _bvh_address_sizes(name: str, a16: bool) -> list[int]:
    """VGPRs of each separately named address of a ray query: node pointer, ray extent, origin, direction, inverse
    direction (a16 packs direction and inverse direction into three); gfx12's dual/bvh8 queries take a 64-bit node, an
    extent with its instance mask, origin, direction and the node offsets (two for dual)."""
    if "dual" in name or "bvh8" in name:
        return [2, 2, 3, 3, 2 if "dual" in name else 1]
    node = 2 if "bvh64" in name else 1
    return [node, 1, 3, 3] if a16 else [node, 1, 3, 3, 3]


def _split_bvh_list(inst) -> Split:
    """Ray queries with their addresses named one by one (gfx11 NSA, gfx12 VIMAGE): no dmask, dim or r128 printed."""
    fields, fmt = inst.fields, inst.fmt
    a16 = bool(fields.get("a16"))
    first = "vaddr" if fmt == "MIMG" else "vaddr0"
    names = [first] + [f"vaddr{i}" for i in range(1, 5)]
    addresses = [Reg("v", fields[n], size) for n, size in zip(names, _bvh_address_sizes(inst.mnemonic, a16), strict=False) if n in fields]
    vdata = 10 if "dual" in inst.mnemonic or "bvh8" in inst.mnemonic else 4
    rsrc = scalar_operand(inst.arch, fields["srsrc"] << 2, 4) if fmt == "MIMG" else scalar_operand(inst.arch, fields["rsrc"], 4)
    mods: Mods = {"a16": True} if a16 else {}
    _cache_mods(fields, inst.layout["fields"], mods, inst.arch, inst.mnemonic)
    return inst.mnemonic, [Reg("v", fields["vdata"], vdata), AddressList(addresses), rsrc], mods


def _join_bvh(draft: Draft, ops: list, mods: Mods) -> None:
    if len(ops) != 3:
        raise EncodeError(f"{draft.name} takes 3 operands (vdata, vaddr, srsrc), got {len(ops)}")
    fields = draft.fields
    if _is_null(ops[2]):
        raise EncodeError(f"{draft.name}: the ray query's resource must be 4 SGPRs, not null")
    a16 = bool(mods.pop("a16", False))
    _check_bvh_widths(draft.name, ops[0], [ops[1]], [_bvh_address_count(draft.name, a16)], a16)
    fields.update(vdata=encode_vgpr(draft, "vdata", ops[0]), vaddr=encode_vgpr(draft, "vaddr", ops[1]))
    fields["srsrc"] = encode_scalar(draft.arch, "srsrc", ops[2]) >> 2
    # The hardware wants dmask 0xf, unnormalized coordinates and a 128-bit descriptor for ray queries.
    fields.update(dmask=0xF, unrm=1, r128=1, a16=int(a16))
    _done(draft, mods)


def _check_bvh_widths(name: str, vdata: object, addresses: list, sizes: list[int], a16: bool) -> None:
    """A ray query's result is 4 VGPRs (10 for gfx12's dual/bvh8 queries) and its addresses are as many and as wide as
    `_bvh_address_sizes` says for its a16 setting (LLVM: invalid operand for instruction)."""
    want = 10 if "dual" in name or "bvh8" in name else 4
    if isinstance(vdata, Reg) and vdata.count != want:
        raise EncodeError(f"{name}: vdata is {want} VGPRs, got {vdata}")
    got = [reg.count if isinstance(reg, Reg) else 1 for reg in addresses]
    if got != sizes:
        spelled = ", ".join(str(n) for n in sizes)
        raise EncodeError(f"{name}: the address{'es are' if len(sizes) > 1 else ' is'} {spelled} VGPR(s){' with a16' if a16 else ''}, "
                          f"got {', '.join(str(a) for a in addresses)}")


def _gfx9_image_channels(dmask: int, d16: bool) -> int:
    """Data VGPRs of a gfx90a image instruction: one per dmask channel (at least one), two 16-bit channels per VGPR
    under d16 (packed, as on gfx9). gfx90a has no tfe (its bit selects AGPR data)."""
    channels = max(1, dmask.bit_count())
    return (channels + 1) // 2 if d16 else channels


def _split_image_gfx9(inst) -> Split:
    """gfx90a MIMG: vdata (AGPRs when the acc bit is set), vaddr, srsrc[, ssamp], then dmask, unorm, glc, slc, a16,
    lwe, da, d16 (LLVM's order). Without a dim field the address size is unknown: LLVM's disassembler names one VGPR,
    and its assembler takes any range there and encodes its first register."""
    fields, arch = inst.fields, inst.arch
    dmask = fields["dmask"]
    ops: list = [plain_reg("a" if fields["acc"] else "v", fields["vdata"], _gfx9_image_channels(dmask, bool(fields["d16"]))),
                 plain_reg("v", fields["vaddr"]), scalar_operand(arch, fields["srsrc"] << 2, 8)]
    if "ssamp" in inst.operand_info:
        ops.append(scalar_operand(arch, fields["ssamp"] << 2, 4))
    mods: Mods = {"dmask": Sym(dmask, f"{dmask:#x}")} if dmask else {}
    if fields["unrm"]:
        mods["unorm"] = True
    _cache_mods(fields, inst.layout["fields"], mods, arch, inst.mnemonic)  # glc, slc, then lwe
    lwe = mods.pop("lwe", False)
    if fields["a16"]:
        mods["a16"] = True
    if lwe:
        mods["lwe"] = True
    for flag in ("da", "d16"):
        if fields[flag]:
            mods[flag] = True
    return inst.mnemonic, ops, mods


def _join_image_gfx9(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of _split_image_gfx9; the data range must be as wide as dmask and d16 say (LLVM's rule)."""
    fields, arch, name = draft.fields, draft.arch, draft.name
    want = 4 if "ssamp" in draft.info else 3
    if len(ops) != want:
        raise EncodeError(f"{name} takes {want} operands (vdata, vaddr, srsrc{', ssamp' if want == 4 else ''}), got {len(ops)}")
    vdata, vaddr = ops[0], ops[1]
    fields["vdata"] = encode_vgpr(draft, "vdata", vdata)
    if isinstance(vdata, Reg) and vdata.kind == "a":
        fields["acc"] = 1
    if isinstance(vaddr, Reg) and vaddr.kind == "a":
        raise EncodeError(f"{name}: vaddr must be VGPRs, got {vaddr}")
    fields["vaddr"] = encode_vgpr(draft, "vaddr", vaddr)
    fields["srsrc"] = encode_scalar(arch, "srsrc", ops[2]) >> 2
    if want == 4:
        fields["ssamp"] = encode_scalar(arch, "ssamp", ops[3]) >> 2
    dmask = mods.pop("dmask", 0)  # LLVM's default here (one channel is still read or written)
    fields["dmask"] = dmask.value if isinstance(dmask, Sym) else int(dmask)  # type: ignore[call-overload]
    if not 0 <= fields["dmask"] <= 0xF:
        raise EncodeError(f"{name}: dmask {fields['dmask']:#x} is outside 0x0..0xf")
    if mods.pop("unorm", False):
        fields["unrm"] = 1
    for flag in ("a16", "da", "d16"):
        if mods.pop(flag, False):
            fields[flag] = 1
    if "tfe" in mods:
        raise EncodeError(f"{name}: gfx90a has no tfe bit (bit 16 selects AGPR data)")
    _join_cache(draft, arch.formats[draft.fmt]["fields"], mods)
    _done(draft, mods)
    d16 = bool(fields.get("d16"))
    channels = _gfx9_image_channels(fields["dmask"], d16)
    if isinstance(vdata, Reg) and vdata.count != channels:
        raise EncodeError(f"{name}: image data size does not match dmask and d16: dmask {fields['dmask']:#x}"
                          f"{' with d16' if d16 else ''} needs {channels} register(s), got {vdata}")


def _parse_dim(name: str, dim: object) -> int:
    """dim:SQ_RSRC_IMG_2D, LLVM's short form dim:2D, or the number."""
    text = str(dim).upper()
    for spelling in (text, "SQ_RSRC_IMG_" + text):
        if spelling in MIMG_DIMS:
            return MIMG_DIMS.index(spelling)
    if isinstance(dim, int) and 0 <= dim < len(MIMG_DIMS):
        return dim
    raise EncodeError(f"{name}: unknown dim {dim!r}; use one of {', '.join(d.removeprefix('SQ_RSRC_IMG_') for d in MIMG_DIMS)} (or SQ_RSRC_IMG_*)")


def join_image(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of split_image."""
    fmt, info, fields, arch, name = draft.fmt, draft.info, draft.fields, draft.arch, draft.name
    if arch.name == "cdna":
        _join_image_gfx9(draft, ops, mods)
        return
    if "bvh" in name and fmt == "MIMG" and not isinstance(ops[1] if len(ops) > 1 else None, list):
        _join_bvh(draft, ops, mods)
        return
    samp = "ssamp" in info or "samp" in info
    if len(ops) != 3 + samp:
        raise EncodeError(f"{name} takes {3 + samp} operands, got {len(ops)}")
    fields["vdata"] = encode_vgpr(draft, "vdata", ops[0])
    if _is_null(ops[2]):  # LLVM: invalid operand for instruction
        raise EncodeError(f"{name}: the image resource must be SGPRs, not null")
    if samp and _is_null(ops[3]):
        raise EncodeError(f"{name}: the sampler must be 4 SGPRs, not null")
    addresses = list(ops[1]) if isinstance(ops[1], list) else [ops[1]]
    if fmt == "MIMG":
        if len(addresses) > 1:
            if "MIMG_NSA" not in arch.formats or len(addresses) > 5:
                raise EncodeError(f"{name}: {arch.name} takes at most 5 separate address VGPRs")
            draft.variant = "NSA"
            fields["nsa"] = 1
            for i, reg in enumerate(addresses[1:], 1):
                fields[f"vaddr{i}"] = encode_vgpr(draft, f"vaddr{i}", reg)
        fields["vaddr"] = encode_vgpr(draft, "vaddr", addresses[0])
        fields["srsrc"] = encode_scalar(arch, "srsrc", ops[2]) >> 2
        if samp:
            fields["ssamp"] = encode_scalar(arch, "ssamp", ops[3]) >> 2
    else:
        slots = sum(f"vaddr{i}" in arch.formats[fmt]["fields"] for i in range(5))
        if len(addresses) > slots:
            raise EncodeError(f"{name}: at most {slots} address operands; put the remaining coordinates in the last as a range")
        for i, reg in enumerate(addresses):
            fields[f"vaddr{i}"] = encode_vgpr(draft, f"vaddr{i}", reg)
        fields["rsrc"] = encode_scalar(arch, "rsrc", ops[2])
        if samp:
            fields["samp"] = encode_scalar(arch, "samp", ops[3])
    if "bvh" in name:  # ray queries: the hardware wants dmask 0xf, unnormalized coordinates, a 128-bit descriptor
        a16 = bool(mods.get("a16"))
        _check_bvh_widths(name, ops[0], addresses, _bvh_address_sizes(name, a16), a16)
        mods.setdefault("dmask", 0xF)
        mods.setdefault("r128", True)
        if "unrm" in arch.formats[fmt]["fields"]:
            mods.setdefault("unorm", True)
    dmask = mods.pop("dmask", 1)
    fields["dmask"] = dmask.value if isinstance(dmask, Sym) else int(dmask)  # type: ignore[call-overload]
    if "dim" not in mods and "bvh" not in name:  # LLVM: missing dim operand (gfx10+ images name their dimensions)
        raise EncodeError(f"{name}: missing dim operand (dim:1D, dim:2D, dim:3D, dim:CUBE, dim:1D_ARRAY, dim:2D_ARRAY, "
                          "dim:2D_MSAA or dim:2D_MSAA_ARRAY)")
    if ("gather4" in name or "msaa_load" in name) and fields["dmask"].bit_count() != 1:
        raise EncodeError(f"{name}: invalid image_gather dmask {fields['dmask']:#x}: only one bit must be set")
    fields["dim"] = _parse_dim(name, mods.pop("dim", MIMG_DIMS[0]))
    if mods.pop("unorm", False):
        fields["unrm"] = 1
    for flag in ("r128", "a16", "d16"):
        if mods.pop(flag, False):
            fields[flag] = 1
    _join_cache(draft, arch.formats[fmt]["fields"], mods)
    _done(draft, mods)


# ----------------------------------------------------------------------------- LDS direct / parameter loads and VINTERP


def split_ldsdir(inst) -> Split:
    """LDSDIR/VDSDIR: `lds_param_load v0, attr0.x wait_vdst:1` (gfx11), `ds_direct_load v0 wait_va_vdst:0 wait_vm_vsrc:0` (gfx12)."""
    fields = inst.fields
    ops: list = [Reg("v", fields["vdst"])]
    if "param" in inst.mnemonic:
        ops.append(Sym(fields["attr"] << 2 | fields["attr_chan"], f"attr{fields['attr']}.{'xyzw'[fields['attr_chan']]}"))
    if "wait_va_vdst" in fields:  # gfx12: LLVM 19 prints both wait fields, zero or not
        return inst.mnemonic, ops, {"wait_va_vdst": fields["wait_va_vdst"], "wait_vm_vsrc": fields["wait_vm_vsrc"]}
    return inst.mnemonic, ops, {"wait_vdst": fields["wait_vdst"]}  # printed when zero too, as LLVM 19+ do


def join_ldsdir(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of split_ldsdir."""
    draft.fields["vdst"] = encode_vgpr(draft, "vdst", ops[0])
    if len(ops) > 1:
        attr = ops[1]
        value = attr.value if isinstance(attr, Sym) else int(attr)  # type: ignore[call-overload]
        if value >> 2 > MAX_ATTR:
            raise EncodeError(f"{draft.name}: out of bounds interpolation attribute number attr{value >> 2} (attr0..attr{MAX_ATTR})")
        draft.fields.update(attr=value >> 2, attr_chan=value & 3)
    for key in ("wait_vdst", "wait_va_vdst", "wait_vm_vsrc"):
        if key in mods:
            draft.fields[key] = _counter_value(draft, key, mods.pop(key))
    _done(draft, mods)


#: the highest interpolation attribute LLVM names (attr0..attr32; the field has room for 63)
MAX_ATTR = 32


def _counter_value(draft: Draft, key: str, value: object) -> int:
    """A wait counter's number: `wait_vdst:1`, never the bare word (LLVM: invalid operand; was read as 1)."""
    if isinstance(value, bool):
        raise EncodeError(f"{draft.name}: {key} takes a number ({key}:N)")
    return int(value)  # type: ignore[call-overload]


def split_vinterp(inst) -> Split:
    """VINTERP: `v_interp_p10_f32 v0, v1, v2, v3 wait_exp:0`."""
    fields, info = inst.fields, inst.operand_info
    ops: list = [Reg("v", fields["vdst"])]
    for i, field in enumerate(("src0", "src1", "src2")):
        operand: Operand = decode_src(inst.arch, fields[field], info.get(field, (32,))[0], None)
        ops.append(-operand if fields["neg"] >> i & 1 and isinstance(operand, Reg) else operand)
    mods: Mods = {}
    if fields.get("clmp"):
        mods["clamp"] = True
    mods["wait_exp"] = fields["waitexp"]  # printed when zero too, as LLVM 19+ do (LLVM 15 left gfx11's out)
    return inst.mnemonic, ops, mods


def join_vinterp(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of split_vinterp. Its sources are VGPRs (LLVM: invalid operand for instruction)."""
    for i, operand in enumerate(ops[1:4]):
        value = split_mod_const(operand)[0]
        if not (isinstance(value, Reg) and value.kind == "v"):
            raise EncodeError(f"{draft.name}: src{i} must be a VGPR, got {operand}")
    if len(ops) != 4:
        raise EncodeError(f"{draft.name} takes 4 operands, got {len(ops)}")
    draft.fields["vdst"] = encode_vgpr(draft, "vdst", ops[0])
    neg = 0
    for i, (field, operand) in enumerate(zip(("src0", "src1", "src2"), ops[1:], strict=True)):
        if isinstance(operand, Reg) and operand.neg:
            neg |= 1 << i
            operand = -operand
        draft.fields[field] = encode_src(draft, field, operand, allow_literal=False)
    draft.fields["neg"] = neg
    draft.fields["clmp"] = int(bool(mods.pop("clamp", False)))
    draft.fields["waitexp"] = _counter_value(draft, "wait_exp", mods.pop("wait_exp", 0))
    _done(draft, mods)


# ----------------------------------------------------------------------------- exports

# gfx11/gfx12 export targets (names as LLVM prints them); other values print as invalid_target_N.
EXPORT_TARGETS = {**{i: f"mrt{i}" for i in range(8)}, 8: "mrtz", **{12 + i: f"pos{i}" for i in range(5)}, 20: "prim",
                  21: "dual_src_blend0", 22: "dual_src_blend1"}


def split_export(inst) -> Split:
    """EXP/VEXPORT: `exp mrt0 v1, off, v2, off done row_en` (a source is `off` when its enable bit is clear)."""
    fields = inst.fields
    target = fields["target"]
    ops: list = [Sym(target, EXPORT_TARGETS.get(target, f"invalid_target_{target}"))]
    ops += [Reg("v", fields[f"vsrc{i}"]) if fields["en"] >> i & 1 else OFF for i in range(4)]
    mods: Mods = {}
    if fields.get("done"):
        mods["done"] = True
    if fields.get("row"):
        mods["row_en"] = True
    return inst.mnemonic, ops, mods


def join_export(draft: Draft, ops: list, mods: Mods) -> None:
    """Inverse of split_export."""
    if len(ops) != 5:
        raise EncodeError(f"{draft.name} takes a target and four sources (use off for unused ones), got {len(ops)} operands")
    target = ops[0]
    names = {name: value for value, name in EXPORT_TARGETS.items()}
    if isinstance(target, Sym):
        draft.fields["target"] = target.value
    elif isinstance(target, int) and not isinstance(target, bool):
        draft.fields["target"] = target
    elif isinstance(target, str) and target in names:
        draft.fields["target"] = names[target]
    else:
        raise EncodeError(f"{draft.name}: unknown export target {target!r}; use one of {', '.join(names)}")
    enable = 0
    for i, operand in enumerate(ops[1:]):
        if not _is_off(operand):
            draft.fields[f"vsrc{i}"] = encode_vgpr(draft, f"vsrc{i}", operand)
            enable |= 1 << i
    draft.fields["en"] = enable
    draft.fields["done"] = int(bool(mods.pop("done", False)))
    draft.fields["row"] = int(bool(mods.pop("row_en", False)))
    _done(draft, mods)
