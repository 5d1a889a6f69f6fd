"""Architectures: gfx target names, per-architecture register naming, and the generated tables each one reads."""

from dataclasses import dataclass, field
from functools import cache
from types import ModuleType, SimpleNamespace

from .errors import UnknownArchError
from .tables import cdna, rdna3, rdna4

# gfx target -> architecture family. LLVM 15 knows gfx90a/gfx940; gfx942/gfx950 share the CDNA tables.
TARGETS: dict[str, str] = {
    "gfx1100": "rdna3", "gfx1101": "rdna3", "gfx1102": "rdna3", "gfx1103": "rdna3", "gfx1150": "rdna3", "gfx1151": "rdna3",
    "gfx1200": "rdna4", "gfx1201": "rdna4",
    "gfx90a": "cdna", "gfx940": "cdna", "gfx941": "cdna", "gfx942": "cdna", "gfx950": "cdna",
}
DEFAULT_TARGET = {"rdna3": "gfx1100", "rdna4": "gfx1200", "cdna": "gfx942"}

# Names of the special scalar operand codes (the 8/9-bit source field), 32-bit views first.
_COMMON_SPECIAL = {
    106: "vcc_lo", 107: "vcc_hi", 126: "exec_lo", 127: "exec_hi",
    235: "src_shared_base", 236: "src_shared_limit", 237: "src_private_base", 238: "src_private_limit",
    239: "src_pops_exiting_wave_id", 251: "src_vccz", 252: "src_execz", 253: "src_scc", 254: "src_lds_direct",
}
_GFX11_SPECIAL = {**_COMMON_SPECIAL, 124: "null", 125: "m0"}
_GFX11_UNAVAILABLE = frozenset((239, 251, 252, 254))
_CDNA_UNAVAILABLE = frozenset((254,))  # lds_direct: not on gfx90a and later (LLVM: lds_direct is not supported on this GPU)
_GFX9_SPECIAL = {**_COMMON_SPECIAL, 102: "flat_scratch_lo", 103: "flat_scratch_hi", 104: "xnack_mask_lo", 105: "xnack_mask_hi", 124: "m0"}
# Codes whose name changes when the operand is 64 bits wide.
_WIDE_SPECIAL = {106: "vcc", 126: "exec", 102: "flat_scratch", 104: "xnack_mask", 235: "src_shared_base", 236: "src_shared_limit",
                 237: "src_private_base", 238: "src_private_limit", 124: "null"}


@dataclass(frozen=True)
class Arch:
    """One instruction-set family: its tables, wave size and scalar register naming."""

    name: str
    tables: ModuleType | SimpleNamespace
    wave: int
    num_sgprs: int
    special: dict[int, str]
    null_code: int
    vop3_literal: bool
    wide_special: dict[int, str] = field(default_factory=lambda: dict(_WIDE_SPECIAL))
    # Target-specific spellings on shared tables: gfx90a names gfx940's sc0/nt/sc1 cache bits glc/slc/scc and has no scratch SVE bit.
    cache_names: dict[str, str] = field(default_factory=dict)
    scratch_sve: bool = True
    # hwreg(...) names as LLVM spells them (read off llvm-mc's disassembler); empty: the table's names.
    hwreg_names: dict[int, str] = field(default_factory=dict)
    # 16-bit VGPR operands of VOP1/VOP2/VOPC encodings are register halves: v0-v127, bit 7 selecting the high half.
    # The assembler promotes other registers to VOP3 and the printer names the halves (v3.h), as LLVM 19 does for gfx11
    # and gfx12 (LLVM 15's gfx11 encodes v128 and up as such fields, which the hardware then reads as halves).
    short16_halves: bool = False
    # The name the tables and their caches are looked up by: the family's, or a target's whose opcodes differ (gfx90a).
    key: str = ""
    # Source codes this target does not have although the tables name them (gfx11+: src_vccz, src_execz,
    # src_pops_exiting_wave_id, src_lds_direct; LLVM: "... register not available on this GPU")
    unavailable: frozenset = frozenset()

    def __post_init__(self):
        if not self.key:
            object.__setattr__(self, "key", self.name)

    @property
    def formats(self) -> dict:
        """Encoding formats of the generated tables: name -> size, identifying bits, fields."""
        return self.tables.FORMATS

    @property
    def ops(self) -> dict:
        """Opcodes of the generated tables: format -> opcode -> (mnemonic, operand info)."""
        return self.tables.OPS


_LLVM_HWREG_GFX11 = {1: "HW_REG_MODE", 2: "HW_REG_STATUS", 3: "HW_REG_TRAPSTS", 5: "HW_REG_GPR_ALLOC", 6: "HW_REG_LDS_ALLOC",
                     7: "HW_REG_IB_STS", 15: "HW_REG_SH_MEM_BASES", 20: "HW_REG_FLAT_SCR_LO", 21: "HW_REG_FLAT_SCR_HI", 23: "HW_REG_HW_ID1",
                     24: "HW_REG_HW_ID2", 29: "HW_REG_SHADER_CYCLES", 18: "HW_REG_PERF_SNAPSHOT_PC_LO", 19: "HW_REG_PERF_SNAPSHOT_PC_HI",
                     27: "HW_REG_PERF_SNAPSHOT_DATA"}
_LLVM_HWREG_GFX90A = {1: "HW_REG_MODE", 2: "HW_REG_STATUS", 3: "HW_REG_TRAPSTS", 4: "HW_REG_HW_ID", 5: "HW_REG_GPR_ALLOC",
                      6: "HW_REG_LDS_ALLOC", 7: "HW_REG_IB_STS", 15: "HW_REG_SH_MEM_BASES", 16: "HW_REG_TBA_LO", 17: "HW_REG_TBA_HI",
                      18: "HW_REG_TMA_LO", 19: "HW_REG_TMA_HI"}
_LLVM_HWREG_GFX940 = {**_LLVM_HWREG_GFX90A, 20: "HW_REG_XCC_ID", 21: "HW_REG_SQ_PERF_SNAPSHOT_DATA", 22: "HW_REG_SQ_PERF_SNAPSHOT_DATA1",
                      23: "HW_REG_SQ_PERF_SNAPSHOT_PC_LO", 24: "HW_REG_SQ_PERF_SNAPSHOT_PC_HI"}

# gfx12 (read off llvm-mc-19's disassembler): the ISA document's HW_REG_WAVE_* registers without WAVE_.
_LLVM_HWREG_GFX12 = {1: "HW_REG_MODE", 2: "HW_REG_STATUS", 4: "HW_REG_STATE_PRIV", 5: "HW_REG_GPR_ALLOC", 6: "HW_REG_LDS_ALLOC",
                     7: "HW_REG_IB_STS", 10: "HW_REG_PERF_SNAPSHOT_DATA", 11: "HW_REG_PERF_SNAPSHOT_PC_LO",
                     12: "HW_REG_PERF_SNAPSHOT_PC_HI", 15: "HW_REG_PERF_SNAPSHOT_DATA1", 16: "HW_REG_PERF_SNAPSHOT_DATA2",
                     17: "HW_REG_EXCP_FLAG_PRIV", 18: "HW_REG_EXCP_FLAG_USER", 19: "HW_REG_TRAP_CTRL", 20: "HW_REG_SCRATCH_BASE_LO",
                     21: "HW_REG_SCRATCH_BASE_HI", 23: "HW_REG_HW_ID1", 24: "HW_REG_HW_ID2", 29: "HW_REG_SHADER_CYCLES_LO",
                     30: "HW_REG_SHADER_CYCLES_HI", 31: "HW_REG_DVGPR_ALLOC_LO", 32: "HW_REG_DVGPR_ALLOC_HI"}

# gfx90a's matrix ops as LLVM names them there: opcode -> (name, the CDNA table's opcode of the same operand shapes,
# source and accumulator data formats when they differ from that one's). gfx940 renamed them (32x32x1f32 ->
# 32x32x1_2b_f32), moved the bf16_1k forms to 0x5d-0x61, dropped the 2-element bf16 and 8-bit i8 forms and reused their
# opcodes for new instructions. Facts from LLVM 21's gfx90a MC tests (llvm/test/MC/Disassembler/AMDGPU/gfx90a_mai.txt).
_GFX90A_MFMA: dict[int, tuple] = {
    0x40: ("v_mfma_f32_32x32x1f32", 0x40), 0x41: ("v_mfma_f32_16x16x1f32", 0x41), 0x42: ("v_mfma_f32_4x4x1f32", 0x42),
    0x44: ("v_mfma_f32_32x32x2f32", 0x44), 0x45: ("v_mfma_f32_16x16x4f32", 0x45),
    0x48: ("v_mfma_f32_32x32x4f16", 0x48), 0x49: ("v_mfma_f32_16x16x4f16", 0x49), 0x4A: ("v_mfma_f32_4x4x4f16", 0x4A),
    0x4C: ("v_mfma_f32_32x32x8f16", 0x4C), 0x4D: ("v_mfma_f32_16x16x16f16", 0x4D),
    0x50: ("v_mfma_i32_32x32x4i8", 0x50), 0x51: ("v_mfma_i32_16x16x4i8", 0x51), 0x52: ("v_mfma_i32_4x4x4i8", 0x52),
    0x54: ("v_mfma_i32_32x32x8i8", 0x44, "PK4_I8", "PK16_I32"), 0x55: ("v_mfma_i32_16x16x16i8", 0x45, "PK4_I8", "PK4_I32"),
    0x63: ("v_mfma_f32_32x32x4bf16_1k", 0x5D), 0x64: ("v_mfma_f32_16x16x4bf16_1k", 0x5E), 0x65: ("v_mfma_f32_4x4x4bf16_1k", 0x5F),
    0x66: ("v_mfma_f32_32x32x8bf16_1k", 0x60), 0x67: ("v_mfma_f32_16x16x16bf16_1k", 0x61),
    0x68: ("v_mfma_f32_32x32x2bf16", 0x40, "PK2_BF16", None), 0x69: ("v_mfma_f32_16x16x2bf16", 0x41, "PK2_BF16", None),
    0x6B: ("v_mfma_f32_4x4x2bf16", 0x42, "PK2_BF16", None), 0x6C: ("v_mfma_f32_32x32x4bf16", 0x44, "PK2_BF16", None),
    0x6D: ("v_mfma_f32_16x16x8bf16", 0x45, "PK2_BF16", None),
    0x6E: ("v_mfma_f64_16x16x4f64", 0x6E), 0x6F: ("v_mfma_f64_4x4x4f64", 0x6F),
}


# The global wave sync ops with a data VGPR, which the generated CDNA DS table leaves out (it has the three without):
# gfx9's opcodes, the VGPR (or, with the acc bit, AGPR) in the address field. Checked with llvm-mc-19 (gfx90a, gfx942)
# and llvm-mc-22 (gfx950).
_CDNA_GWS = {153: ("ds_gws_init", (("addr", 32, "VGPR_OR_ACCVGPR", "B32"),)), 155: ("ds_gws_sema_br", (("addr", 32, "VGPR_OR_ACCVGPR", "B32"),)),
             157: ("ds_gws_barrier", (("addr", 32, "VGPR_OR_ACCVGPR", "B32"),))}


def _with_matrix_variant(ops: dict, extra_formats: dict | None = None) -> SimpleNamespace:
    """CDNA tables whose VOP3P MFMA variant (acc_cd/cbsz/abid/blgp in place of op_sel/neg bits) covers every matrix op
    of `ops`: the generated list misses gfx940's xf32 MFMAs (0x3e, 0x3f), which then decoded as plain VOP3P."""
    vop3p = dict(ops["VOP3P"])
    ops = {**ops, "DS": {**ops["DS"], **_CDNA_GWS}}
    for op, shaped_like in _XF32_SHAPES.items():  # the generated table lists them without operands
        if op in vop3p and not vop3p[op][1]:
            vop3p[op] = (vop3p[op][0], _reformat(cdna.OPS["VOP3P"][shaped_like][1], "PK2_F32", None))
    matrix = {op for op, (name, _) in vop3p.items() if name.startswith(("v_mfma", "v_smfmac")) and name != "v_mfma_ld_scale_b32"}
    formats = {**cdna.FORMATS, **(extra_formats or {}), "VOP3P_MFMA": {**cdna.FORMATS["VOP3P_MFMA"], "ops": sorted(matrix)}}
    tables = {name: value for name, value in vars(cdna).items() if name.isupper()}  # HWREG, MSG, ... as generated
    return SimpleNamespace(**{**tables, "FORMATS": formats, "OPS": {**ops, "VOP3P": vop3p}})


# gfx940's xf32 MFMAs -> the f16 MFMA of the same operand sizes (64-bit A and B; 4 or 16 accumulator registers)
_XF32_SHAPES = {0x3E: 0x4D, 0x3F: 0x4C}


def _reformat(info: tuple, src: str, acc: str | None) -> tuple:
    """Operand info with other data formats for the A/B sources (and the accumulator and result)."""
    return tuple((f, bits, optype, src if f in ("src0", "src1") else (acc or dfmt)) for f, bits, optype, dfmt in info)


# gfx90a's image instructions (gfx940 dropped images): the gfx9 MIMG encoding, with bit 16 (tfe on gfx9) selecting AGPR
# data and bit 15 naming 16-bit addresses (a16); LLVM spells the cache bits glc (13) and slc (25). No dim field: the
# address size is not in the encoding. Facts from LLVM 21's gfx90a MC tests (mimg-gfx90a.s, gfx90a_mimg.txt,
# gfx90a_ldst_acc.txt, gfx90a_err.s), checked with llvm-mc-19 -mcpu=gfx90a.
_GFX90A_MIMG_FORMAT = {"size": 8, "encoding": (31, 26, 60),
                       "fields": {"op": (24, 18), "vdata": (47, 40), "vaddr": (39, 32), "srsrc": (52, 48), "ssamp": (57, 53),
                                  "dmask": (11, 8), "unrm": (12, 12), "sc0": (13, 13), "da": (14, 14), "a16": (15, 15),
                                  "acc": (16, 16), "lwe": (17, 17), "nt": (25, 25), "d16": (63, 63)},
                       "fixed": {}}
_GFX90A_IMAGE_OPS = {0x00: "image_load", 0x01: "image_load_mip", 0x02: "image_load_pck", 0x03: "image_load_pck_sgn",
                     0x04: "image_load_mip_pck", 0x05: "image_load_mip_pck_sgn", 0x08: "image_store", 0x09: "image_store_mip",
                     0x0A: "image_store_pck", 0x0B: "image_store_mip_pck", 0x0E: "image_get_resinfo",
                     0x10: "image_atomic_swap", 0x11: "image_atomic_cmpswap", 0x12: "image_atomic_add", 0x13: "image_atomic_sub",
                     0x14: "image_atomic_smin", 0x15: "image_atomic_umin", 0x16: "image_atomic_smax", 0x17: "image_atomic_umax",
                     0x18: "image_atomic_and", 0x19: "image_atomic_or", 0x1A: "image_atomic_xor", 0x1B: "image_atomic_inc",
                     0x1C: "image_atomic_dec", 0x20: "image_sample"}


def _gfx90a_image_ops() -> dict[int, tuple]:
    """opcode -> (mnemonic, operand info): the data as wide as four channels (dmask and d16 decide how many are named),
    one address VGPR (as LLVM's disassembler names it), a 256-bit resource and, for the sample, a 128-bit sampler."""
    out = {}
    for op, name in _GFX90A_IMAGE_OPS.items():
        info = [("srsrc", 256, "SREG", "IMG"), ("vaddr", 32, "VGPR", "ANY"), ("vdata", 128, "VGPR_OR_ACCVGPR", "ANY")]
        if name == "image_sample":
            info.append(("ssamp", 128, "SREG", "SAMP"))
        out[op] = (name, tuple(info))
    return out


def _gfx90a_tables() -> SimpleNamespace:
    """The CDNA tables with gfx90a's own VOP3P matrix ops in place of gfx940/gfx950's (and no gfx950 VOP3PX2), and its
    image instructions."""
    vop3p = {op: entry for op, entry in cdna.OPS["VOP3P"].items() if not entry[0].startswith(("v_mfma", "v_smfmac"))}
    for op, (name, shaped_like, *formats) in _GFX90A_MFMA.items():
        info = cdna.OPS["VOP3P"][shaped_like][1]
        vop3p[op] = (name, _reformat(info, *formats) if formats else info)
    ops = {fmt: (vop3p if fmt == "VOP3P" else entries) for fmt, entries in cdna.OPS.items() if fmt != "VOP3PX2"}
    # gfx90a's name for the L2 invalidate gfx940 calls buffer_inv
    ops["MUBUF"] = {op: ("buffer_invl2", info) if name == "buffer_inv" else (name, info) for op, (name, info) in ops["MUBUF"].items()}
    ops["MIMG"] = _gfx90a_image_ops()
    return _with_matrix_variant(ops, {"MIMG": _GFX90A_MIMG_FORMAT})


def _rdna4_tables() -> SimpleNamespace:
    """The RDNA4 tables with s_get_barrier_state's operands, which the generated table leaves out (LLVM 21's
    gfx12_asm_sop1.s: `s_get_barrier_state s3, -1`, a destination and the barrier id), and s_waitcnt's counters, which
    it leaves out too: llvm-mc-22 takes and prints gfx11's `s_waitcnt vmcnt(0)` on gfx12 (bare `s_waitcnt`: too few
    operands; the word 0xbf8903f7 prints `s_waitcnt vmcnt(0)`)."""
    tables = {name: value for name, value in vars(rdna4).items() if name.isupper()}
    sop1 = {**rdna4.OPS["SOP1"]}
    for op, (name, info) in sop1.items():
        if name == "s_get_barrier_state" and not info:
            sop1[op] = (name, (("sdst", 32, "SDST", "B32"), ("ssrc0", 32, "SSRC", "B32")))
    sopp = {op: (name, (("simm16", 16, "WAITCNT", "B16"),) if name == "s_waitcnt" and not info else info)
            for op, (name, info) in rdna4.OPS["SOPP"].items()}
    return SimpleNamespace(**{**tables, "OPS": {**rdna4.OPS, "SOP1": sop1, "SOPP": sopp}})


ARCHS: dict[str, Arch] = {
    "rdna3": Arch("rdna3", rdna3, 32, 106, _GFX11_SPECIAL, 124, True, hwreg_names=_LLVM_HWREG_GFX11, short16_halves=True,
                  unavailable=_GFX11_UNAVAILABLE),
    "rdna4": Arch("rdna4", _rdna4_tables(), 32, 106, _GFX11_SPECIAL, 124, True, hwreg_names=_LLVM_HWREG_GFX12, short16_halves=True,
                  unavailable=_GFX11_UNAVAILABLE),
    # gfx9 has no NULL register: an unused address SGPR is 0x7f ("off"), and VOP3 cannot carry a literal.
    "cdna": Arch("cdna", _with_matrix_variant(cdna.OPS), 64, 102, _GFX9_SPECIAL, 0x7F, False, {k: v for k, v in _WIDE_SPECIAL.items() if k != 124},
                 hwreg_names=_LLVM_HWREG_GFX940, unavailable=_CDNA_UNAVAILABLE),
}


# Targets that share a family's tables but spell some operands differently (gfx90a: its own matrix opcodes too).
TARGET_ARCHS: dict[str, Arch] = {
    "gfx90a": Arch("cdna", _gfx90a_tables(), 64, 102, _GFX9_SPECIAL, 0x7F, False, {k: v for k, v in _WIDE_SPECIAL.items() if k != 124},
                   {"sc0": "glc", "nt": "slc", "sc1": "scc"}, False, _LLVM_HWREG_GFX90A, key="gfx90a", unavailable=_CDNA_UNAVAILABLE),
}


def arch_of(target: str) -> str:
    """Map a gfx target ("gfx1100", "gfx942", ...) or a family name ("rdna3") to its family: "rdna3", "rdna4" or "cdna"."""
    key = target.lower().split(":")[0]
    if key in ARCHS:
        return key
    if key in TARGETS:
        return TARGETS[key]
    raise UnknownArchError(f"unknown architecture {target!r}; use one of {', '.join(list(ARCHS) + list(TARGETS))}")


@cache
def get_arch(target: str) -> Arch:
    """The `Arch` for a family or gfx target name (with the target's own operand spellings where they differ)."""
    key = target.lower().split(":")[0]
    return TARGET_ARCHS.get(key) or ARCHS[arch_of(key)]


def target_of(target: str) -> str:
    """The gfx target for a name: gfx names pass through, family names map to their default target."""
    key = target.lower().split(":")[0]
    return DEFAULT_TARGET[key] if key in DEFAULT_TARGET else (key if key in TARGETS else DEFAULT_TARGET[arch_of(key)])
