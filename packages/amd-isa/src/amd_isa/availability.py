"""Instructions a target lacks although its family's tables list them: the RDNA3 tables are RDNA3.5's (gfx1150 adds
scalar floating point), the CDNA tables CDNA4's (gfx950) with gfx940's additions over gfx90a. The assembler refuses
them for that target, as LLVM does ("instruction not supported on this GPU"); a family name (rdna3, cdna) takes them
all. Table names (with their _e32/_e64 suffix), read off llvm-mc-22 assembling every opcode of our sample corpus for each
target (gfx940/gfx941: gfx942's, which LLVM 22 no longer tells apart). True16-only spellings are not counted as missing.
"""

from functools import cache

# not on gfx1100-gfx1103 nor gfx1150/gfx1151
_GFX11 = frozenset((
    "flat_atomic_csub_u32",
))

# gfx1150/gfx1151 only: scalar floating point
_GFX1150_PLUS = frozenset((
    "s_add_f16", "s_add_f32", "s_ceil_f16", "s_ceil_f32", "s_cmp_eq_f16", "s_cmp_eq_f32", "s_cmp_ge_f16", "s_cmp_ge_f32", "s_cmp_gt_f16",
    "s_cmp_gt_f32", "s_cmp_le_f16", "s_cmp_le_f32", "s_cmp_lg_f16", "s_cmp_lg_f32", "s_cmp_lt_f16", "s_cmp_lt_f32", "s_cmp_neq_f16",
    "s_cmp_neq_f32", "s_cmp_nge_f16", "s_cmp_nge_f32", "s_cmp_ngt_f16", "s_cmp_ngt_f32", "s_cmp_nle_f16", "s_cmp_nle_f32", "s_cmp_nlg_f16",
    "s_cmp_nlg_f32", "s_cmp_nlt_f16", "s_cmp_nlt_f32", "s_cmp_o_f16", "s_cmp_o_f32", "s_cmp_u_f16", "s_cmp_u_f32", "s_cvt_f16_f32", "s_cvt_f32_f16",
    "s_cvt_f32_i32", "s_cvt_f32_u32", "s_cvt_hi_f32_f16", "s_cvt_i32_f32", "s_cvt_pk_rtz_f16_f32", "s_cvt_u32_f32", "s_floor_f16", "s_floor_f32",
    "s_fmaak_f32", "s_fmac_f16", "s_fmac_f32", "s_fmamk_f32", "s_max_f16", "s_max_f32", "s_min_f16", "s_min_f32", "s_mul_f16", "s_mul_f32",
    "s_rndne_f16", "s_rndne_f32", "s_sub_f16", "s_sub_f32", "s_trunc_f16", "s_trunc_f32",
))

# gfx950 only
_GFX950_ONLY = frozenset((
    "buffer_atomic_pk_add_bf16", "ds_read_b64_tr_b16", "ds_read_b64_tr_b4", "ds_read_b64_tr_b8", "ds_read_b96_tr_b6", "global_load_lds_dwordx3",
    "global_load_lds_dwordx4", "v_ashr_pk_i8_i32", "v_ashr_pk_u8_i32", "v_bitop3_b16", "v_bitop3_b32", "v_cvt_f32_bf16_e32", "v_cvt_f32_bf16_e64",
    "v_cvt_pk_bf16_f32", "v_cvt_pk_f16_f32", "v_cvt_scalef32_2xpk16_bf6_f32", "v_cvt_scalef32_2xpk16_fp6_f32", "v_cvt_scalef32_f16_bf8",
    "v_cvt_scalef32_f16_fp8", "v_cvt_scalef32_f32_bf8", "v_cvt_scalef32_f32_fp8", "v_cvt_scalef32_pk32_bf16_bf6", "v_cvt_scalef32_pk32_bf16_fp6",
    "v_cvt_scalef32_pk32_bf6_bf16", "v_cvt_scalef32_pk32_bf6_f16", "v_cvt_scalef32_pk32_f16_bf6", "v_cvt_scalef32_pk32_f16_fp6",
    "v_cvt_scalef32_pk32_f32_bf6", "v_cvt_scalef32_pk32_f32_fp6", "v_cvt_scalef32_pk32_fp6_bf16", "v_cvt_scalef32_pk32_fp6_f16",
    "v_cvt_scalef32_pk_bf16_bf8", "v_cvt_scalef32_pk_bf16_fp4", "v_cvt_scalef32_pk_bf16_fp8", "v_cvt_scalef32_pk_bf8_bf16",
    "v_cvt_scalef32_pk_bf8_f16", "v_cvt_scalef32_pk_bf8_f32", "v_cvt_scalef32_pk_f16_bf8", "v_cvt_scalef32_pk_f16_fp4", "v_cvt_scalef32_pk_f16_fp8",
    "v_cvt_scalef32_pk_f32_bf8", "v_cvt_scalef32_pk_f32_fp4", "v_cvt_scalef32_pk_f32_fp8", "v_cvt_scalef32_pk_fp4_bf16",
    "v_cvt_scalef32_pk_fp4_f16", "v_cvt_scalef32_pk_fp4_f32", "v_cvt_scalef32_pk_fp8_bf16", "v_cvt_scalef32_pk_fp8_f16",
    "v_cvt_scalef32_pk_fp8_f32", "v_cvt_scalef32_sr_bf8_bf16", "v_cvt_scalef32_sr_bf8_f16", "v_cvt_scalef32_sr_bf8_f32",
    "v_cvt_scalef32_sr_fp8_bf16", "v_cvt_scalef32_sr_fp8_f16", "v_cvt_scalef32_sr_fp8_f32", "v_cvt_scalef32_sr_pk32_bf6_bf16",
    "v_cvt_scalef32_sr_pk32_bf6_f16", "v_cvt_scalef32_sr_pk32_bf6_f32", "v_cvt_scalef32_sr_pk32_fp6_bf16", "v_cvt_scalef32_sr_pk32_fp6_f16",
    "v_cvt_scalef32_sr_pk32_fp6_f32", "v_cvt_scalef32_sr_pk_fp4_bf16", "v_cvt_scalef32_sr_pk_fp4_f16", "v_cvt_scalef32_sr_pk_fp4_f32",
    "v_cvt_sr_bf16_f32", "v_cvt_sr_f16_f32", "v_dot2_f32_bf16", "v_dot2c_f32_bf16_e32", "v_dot2c_f32_bf16_e64", "v_mad_mix_f32", "v_mad_mixhi_f16",
    "v_mad_mixlo_f16", "v_maximum3_f32", "v_mfma_f32_16x16x128_f8f6f4", "v_mfma_f32_16x16x32_bf16", "v_mfma_f32_16x16x32_f16",
    "v_mfma_f32_32x32x16_bf16", "v_mfma_f32_32x32x16_f16", "v_mfma_f32_32x32x64_f8f6f4", "v_mfma_i32_16x16x64_i8", "v_mfma_i32_32x32x32_i8",
    "v_mfma_ld_scale_b32", "v_mfma_scale_f32_16x16x128_f8f6f4", "v_mfma_scale_f32_32x32x64_f8f6f4", "v_minimum3_f32", "v_permlane16_swap_b32_e32",
    "v_permlane16_swap_b32_e64", "v_permlane32_swap_b32_e32", "v_permlane32_swap_b32_e64", "v_pk_maximum3_f16", "v_pk_minimum3_f16",
    "v_prng_b32_e32", "v_prng_b32_e64", "v_smfmac_f32_16x16x128_bf8_bf8", "v_smfmac_f32_16x16x128_bf8_fp8", "v_smfmac_f32_16x16x128_fp8_bf8",
    "v_smfmac_f32_16x16x128_fp8_fp8", "v_smfmac_f32_16x16x64_bf16", "v_smfmac_f32_16x16x64_f16", "v_smfmac_f32_32x32x32_bf16",
    "v_smfmac_f32_32x32x32_f16", "v_smfmac_f32_32x32x64_bf8_bf8", "v_smfmac_f32_32x32x64_bf8_fp8", "v_smfmac_f32_32x32x64_fp8_bf8",
    "v_smfmac_f32_32x32x64_fp8_fp8", "v_smfmac_i32_16x16x128_i8", "v_smfmac_i32_32x32x64_i8",
))

# gfx940 and later: not on gfx90a
_GFX940_PLUS = frozenset((
    "buffer_inv", "ds_pk_add_bf16", "ds_pk_add_f16", "ds_pk_add_rtn_bf16", "ds_pk_add_rtn_f16", "flat_atomic_add_f32", "flat_atomic_pk_add_bf16",
    "flat_atomic_pk_add_f16", "global_atomic_pk_add_bf16", "global_load_lds_dword", "global_load_lds_sbyte", "global_load_lds_sshort",
    "global_load_lds_ubyte", "global_load_lds_ushort", "scratch_load_lds_dword", "scratch_load_lds_sbyte", "scratch_load_lds_sshort",
    "scratch_load_lds_ubyte", "scratch_load_lds_ushort", "v_cvt_f32_bf8_e32", "v_cvt_f32_bf8_e64", "v_cvt_f32_fp8_e32", "v_cvt_f32_fp8_e64",
    "v_cvt_pk_bf8_f32", "v_cvt_pk_f32_bf8_e32", "v_cvt_pk_f32_bf8_e64", "v_cvt_pk_f32_fp8_e32", "v_cvt_pk_f32_fp8_e64", "v_cvt_pk_fp8_f32",
    "v_cvt_sr_bf8_f32", "v_cvt_sr_fp8_f32", "v_fmaak_f32", "v_fmaak_f32_e32", "v_fmamk_f32", "v_fmamk_f32_e32", "v_lshl_add_u64",
    "v_mov_b64_e32", "v_mov_b64_e64",
))

# gone on gfx950: v_mad_mix*, the xf32 MFMAs
_BEFORE_GFX950 = frozenset((
    "v_mad_mix_f32", "v_mad_mixhi_f16", "v_mad_mixlo_f16", "v_mfma_f32_16x16x8_xf32", "v_mfma_f32_32x32x4_xf32",
))


MISSING: dict[str, frozenset[str]] = {
    **{t: _GFX11 | _GFX1150_PLUS for t in ("gfx1100", "gfx1101", "gfx1102", "gfx1103")},
    **{t: _GFX11 for t in ("gfx1150", "gfx1151")},
    "gfx90a": _GFX950_ONLY | _GFX940_PLUS,
    **{t: _GFX950_ONLY for t in ("gfx940", "gfx941", "gfx942")},
    "gfx950": _BEFORE_GFX950,
}


@cache
def missing_on(target: str) -> frozenset[str]:
    """Table names of the instructions `target` does not have (empty for family names and unknown targets)."""
    return MISSING.get(target.lower().split(":")[0], frozenset())
