"""Canonical op names: RDNA4 and CDNA (gfx9) mnemonics mapped to the RDNA3 names the semantic tables use.

The encodings differ per architecture, but most operations are the same under another name (gfx9 `ds_read2_b32` is
gfx11 `ds_load_2addr_b32`, gfx12 `s_add_co_u32` is gfx11 `s_add_u32`); renaming here keeps one semantic table.
"""

import re
from functools import cache

from ..inst import Inst

# Whole-name renames.
RENAMES: dict[str, str] = {
    # RDNA4
    "s_add_co_u32": "s_add_u32", "s_sub_co_u32": "s_sub_u32", "s_add_co_i32": "s_add_i32", "s_sub_co_i32": "s_sub_i32",
    "s_add_co_ci_u32": "s_addc_u32", "s_sub_co_ci_u32": "s_subb_u32", "s_addk_co_i32": "s_addk_i32",
    "s_max_num_f32": "s_max_f32", "s_min_num_f32": "s_min_f32", "s_max_num_f16": "s_max_f16", "s_min_num_f16": "s_min_f16",
    "s_barrier_signal": "s_barrier", "v_mad_co_u64_u32": "v_mad_u64_u32", "v_mad_co_i64_i32": "v_mad_i64_i32",
    "v_dual_max_num_f32": "v_dual_max_f32", "v_dual_min_num_f32": "v_dual_min_f32",
    # CDNA
    "s_andn2_b32": "s_and_not1_b32", "s_andn2_b64": "s_and_not1_b64", "s_orn2_b32": "s_or_not1_b32", "s_orn2_b64": "s_or_not1_b64",
    "s_andn2_saveexec_b64": "s_and_not1_saveexec_b64", "s_orn2_saveexec_b64": "s_or_not1_saveexec_b64",
    "s_andn1_saveexec_b64": "s_and_not0_saveexec_b64", "s_orn1_saveexec_b64": "s_or_not0_saveexec_b64",
    "s_andn1_wrexec_b64": "s_and_not0_wrexec_b64", "s_andn2_wrexec_b64": "s_and_not1_wrexec_b64",
    "s_ff1_i32_b32": "s_ctz_i32_b32", "s_ff1_i32_b64": "s_ctz_i32_b64", "s_flbit_i32_b32": "s_clz_i32_u32",
    "s_flbit_i32_b64": "s_clz_i32_u64", "s_flbit_i32": "s_cls_i32", "s_flbit_i32_i64": "s_cls_i32_i64",
    "v_add_u32": "v_add_nc_u32", "v_sub_u32": "v_sub_nc_u32", "v_subrev_u32": "v_subrev_nc_u32",
    "v_add_i32": "v_add_nc_i32", "v_sub_i32": "v_sub_nc_i32", "v_add_u16": "v_add_nc_u16", "v_sub_u16": "v_sub_nc_u16",
    "v_addc_co_u32": "v_add_co_ci_u32", "v_subb_co_u32": "v_sub_co_ci_u32", "v_subbrev_co_u32": "v_subrev_co_ci_u32",
    "v_ffbh_u32": "v_clz_i32_u32", "v_ffbl_b32": "v_ctz_i32_b32", "v_ffbh_i32": "v_cls_i32",
    "v_cvt_flr_i32_f32": "v_cvt_floor_i32_f32", "v_cvt_rpi_i32_f32": "v_cvt_nearest_i32_f32", "v_cvt_pkrtz_f16_f32": "v_cvt_pk_rtz_f16_f32",
    "v_mul_legacy_f32": "v_mul_dx9_zero_f32", "v_mad_mix_f32": "v_fma_mix_f32", "v_mad_mixlo_f16": "v_fma_mixlo_f16",
    "v_mad_mixhi_f16": "v_fma_mixhi_f16", "v_subrev_u16": "v_subrev_nc_u16", "v_add_i16": "v_add_nc_i16", "v_sub_i16": "v_sub_nc_i16",
    # gfx9 "legacy" encodings of the 16-bit mad/fma/div_fixup (the gfx8 forms without op_sel) compute the same.
    "v_mad_legacy_u16": "v_mad_u16", "v_mad_legacy_i16": "v_mad_i16", "v_mad_legacy_f16": "v_mad_f16", "v_fma_legacy_f16": "v_fma_f16",
    "v_div_fixup_legacy_f16": "v_div_fixup_f16", "v_exp_legacy_f32": "v_exp_f32", "v_log_legacy_f32": "v_log_f32",
    "v_dot2c_f32_f16": "v_dot2acc_f32_f16", "v_dot2c_f32_bf16": "v_dot2acc_f32_bf16",
    "v_cvt_pknorm_i16_f32": "v_cvt_pk_norm_i16_f32", "v_cvt_pknorm_u16_f32": "v_cvt_pk_norm_u16_f32",
    "v_cvt_pknorm_i16_f16": "v_cvt_pk_norm_i16_f16", "v_cvt_pknorm_u16_f16": "v_cvt_pk_norm_u16_f16", "v_cvt_pkaccum_u8_f32": "v_cvt_pk_u8_f32",
}
# Substring rules for memory mnemonics, applied in order.
MEMORY_RULES: tuple[tuple[str, str], ...] = (
    (r"^ds_read2st64_", "ds_load_2addr_stride64_"), (r"^ds_write2st64_", "ds_store_2addr_stride64_"),
    (r"^ds_read2_", "ds_load_2addr_"), (r"^ds_write2_", "ds_store_2addr_"), (r"^ds_read_", "ds_load_"), (r"^ds_write_", "ds_store_"),
    (r"^ds_wrxchg2st64_", "ds_storexchg_2addr_stride64_"), (r"^ds_wrxchg2_", "ds_storexchg_2addr_"), (r"^ds_wrxchg", "ds_storexchg"),
    (r"^ds_cmpst_", "ds_cmpstore_"),
    # RDNA4 DS names of gfx11 operations.
    (r"^ds_(min|max)_num_", r"ds_\1_"), (r"^ds_sub_clamp_", "ds_csub_"),
    (r"_dwordx16$", "_b512"), (r"_dwordx8$", "_b256"), (r"_dwordx4$", "_b128"), (r"_dwordx3$", "_b96"), (r"_dwordx2$", "_b64"),
    (r"_dword$", "_b32"),
    (r"_(load)_ubyte_d16_hi$", r"_\1_d16_hi_u8"), (r"_(load)_sbyte_d16_hi$", r"_\1_d16_hi_i8"), (r"_(load)_short_d16_hi$", r"_\1_d16_hi_b16"),
    (r"_(load)_ubyte_d16$", r"_\1_d16_u8"), (r"_(load)_sbyte_d16$", r"_\1_d16_i8"), (r"_(load)_short_d16$", r"_\1_d16_b16"),
    (r"_ubyte$", "_u8"), (r"_sbyte$", "_i8"), (r"_ushort$", "_u16"), (r"_sshort$", "_i16"),
    (r"_store_byte_d16_hi$", "_store_d16_hi_b8"), (r"_store_short_d16_hi$", "_store_d16_hi_b16"),
    (r"_store_byte$", "_store_b8"), (r"_store_short$", "_store_b16"),
)
ATOMIC_RULES: tuple[tuple[str, str], ...] = (
    (r"_atomic_smin", "_atomic_min_i"), (r"_atomic_smax", "_atomic_max_i"), (r"_atomic_umin", "_atomic_min_u"),
    (r"_atomic_umax", "_atomic_max_u"), (r"_atomic_(min|max)_num_", r"_atomic_\1_"), (r"_atomic_sub_clamp_", "_atomic_csub_"),
)
SUFFIXES = ("_e32", "_e64", "_dpp", "_sdwa")


@cache
def _canonical(name: str) -> str:
    suffix = next((s for s in SUFFIXES if name.endswith(s)), "")
    base = name[: -len(suffix)] if suffix else name
    if base in RENAMES:
        return RENAMES[base] + suffix
    if "_atomic_" in base:
        # gfx9 atomics: "global_atomic_add" is 32-bit, "_x2" 64-bit; sizes are spelled out in gfx11 names.
        wide = base.endswith("_x2")
        base = base.removesuffix("_x2")
        for pattern, repl in ATOMIC_RULES:
            base = re.sub(pattern, repl, base)
        if not re.search(r"_[biuf]\d+$", base):
            size = "64" if wide else "32"
            kind = "u" if re.search(r"_(add|sub|inc|dec)$", base) else "b"
            base = f"{base}{size}" if base.endswith(("_i", "_u")) else f"{base}_{kind}{size}"
        return base + suffix
    if base.startswith(("ds_", "global_", "flat_", "scratch_", "buffer_", "s_load", "s_buffer_load", "s_store", "s_buffer_store", "s_scratch")):
        for pattern, repl in MEMORY_RULES:
            base = re.sub(pattern, repl, base)
    return base + suffix


def canonical_name(mnemonic: str) -> str:
    """`canonical` for a bare mnemonic."""
    return _canonical(mnemonic)


# gfx90a's matrix op names (v_mfma_f32_32x32x1f32, v_mfma_f32_16x16x16bf16_1k): no block count, no separator.
_GFX90A_MATRIX = re.compile(r"v_mfma_(f32|i32|f64)_(\d+)x(\d+)x(\d+)(f32|f16|bf16|i8|f64)(?:_1k)?")


def canonical(inst: Inst) -> str:
    """The RDNA3-style mnemonic whose semantics an instruction of any supported architecture has (matrix ops: the
    gfx940 spelling, whose block count the emulator reads)."""
    if (m := _GFX90A_MATRIX.fullmatch(inst.mnemonic)) is not None:
        out, rows, cols, k, ab = m.groups()
        # blocks from the result's size: rows x cols values per block over 64 lanes, f64 taking two registers each
        regs = inst.operand_info["vdst"][0] // 32
        blocks = regs * 64 // (int(rows) * int(cols) * (2 if out == "f64" else 1))
        return f"v_mfma_{out}_{rows}x{cols}x{k}{f'_{blocks}b' if blocks > 1 else ''}_{ab}"
    return _canonical(inst.mnemonic)
