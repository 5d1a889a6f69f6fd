"""One case per class of difference `benchmarks/llvm_mc_conformance.py` found between amd_isa and LLVM's own MC tests
(llvm/test/MC/AMDGPU, LLVM 21.1.8): the input line and the encoding LLVM's CHECK line gives for it, named by file."""

import pytest
from amd_isa import AsmError, DecodeError, assemble, decode_one

# (target, LLVM test file, input line, LLVM's encoding)
ASSEMBLE = [
    # integers with a leading zero are octal to LLVM's lexer (was: a ValueError from int('03', 0))
    ("gfx1200", "gfx12_asm_smem.s", "s_load_b32 s5, s[4:5], s0 offset:0x0 scope:03", "42 01 60 f4 00 00 00 00"),
    # accepted neighbours of the rules above (llvm-mc-22)
    ("gfx1200", "(llvm-mc-22)", "s_waitcnt lgkmcnt(3) expcnt(1)", "31 fc 89 bf"),
    ("gfx1100", "(llvm-mc-22)", "v_dual_add_f32 v255, vcc_lo, v2 :: v_dual_cndmask_b32 v6, vcc_lo, v3", "6a 04 12 c9 6a 06 06 ff"),
    ("gfx942", "(llvm-mc-22)", "v_dot2_u32_u16 v0, v1, v2, v3 op_sel:[0,0,0]", "00 40 a7 d3 01 05 0e 1c"),
    ("gfx90a", "(llvm-mc-22)", "v_dot2_u32_u16 v0, v1, v2, v3 op_sel:[1,0,0]", "00 48 a7 d3 01 05 0e 1c"),
    ("gfx1200", "(llvm-mc-22)", "s_prefetch_inst s[14:15], -0x800000, m0, 7", "c7 81 04 f4 00 00 80 fa"),
    ("gfx1200", "(llvm-mc-22)", "global_load_b32 v0, v[1:2], off scope:3", "7c 00 05 ee 00 00 0c 00 01 00 00 00"),  # a numeric scope
    # plain VGPRs as the VALU join encodes them directly (llvm-mc-22)
    ("gfx1100", "(llvm-mc-22)", "v_add_f64 v[0:1], v[1:2], v[2:3]", "00 00 27 d7 01 05 02 00"),
    ("gfx1100", "(llvm-mc-22)", "v_add_f16_e32 v1.h, v2.h, v127.h", "82 ff 03 65"),
    ("gfx1100", "(llvm-mc-22)", "v_add_f32_e64 v1, v2, v255", "01 00 03 d5 02 ff 03 00"),
    # mnemonic aliases (aliases.py): gfx10-era names on gfx11, renamed SALU ops on gfx12, gfx90a MFMA names on gfx942
    ("gfx1100", "gfx11_asm_sop2.s", "s_andn2_b32 s0, s1, s2", "01 02 00 91"),
    ("gfx1100", "gfx11_asm_vop2.s", "v_dot2c_f32_f16 v5, v1, v2", "01 05 0a 04"),
    ("gfx1100", "gfx11_asm_ds.s", "ds_read_b32 v5, v1", "00 00 d8 d8 01 00 00 05"),
    ("gfx1100", "gfx11_asm_vop3_dpp16_from_vopc-fake16.s", "v_cmp_tru_f16_e64_dpp s5, v1, v2 quad_perm:[3,2,1,0]",
     "05 00 0f d4 fa 04 02 00 01 1b 00 ff"),
    ("gfx1200", "gfx12_asm_sop2.s", "s_add_u32 s0, s1, s2", "01 02 00 80"),
    ("gfx942", "mai-gfx942.s", "v_mfma_f32_32x32x1f32 a[0:31], v0, v1, a[34:65] blgp:7", "00 80 c0 d3 00 03 8a e4"),
    # gfx90a's own matrix opcodes (was: unknown, or gfx940's opcode for the same name)
    ("gfx90a", "mai-gfx90a.s", "v_mfma_f32_16x16x2bf16 a[0:15], v0, v1, a[18:33]", "00 80 e9 d3 00 03 4a 04"),
    ("gfx90a", "(llvm-mc-19)", "v_mfma_f32_4x4x1f32 a[0:3], v0, v1, a[2:5]", "00 80 c2 d3 00 03 0a 04"),  # 128 bits: overlap allowed
    ("gfx1100", "(llvm-mc-22)", "v_add_nc_u32_e64 v5, v1, v2 clamp", "05 80 25 d5 01 05 02 00"),  # saturating integer add
    ("gfx90a", "(llvm-mc-19)", "v_mfma_f32_32x32x8bf16_1k a[0:15], v[0:1], v[2:3], a[0:15]", "00 80 e6 d3 00 05 02 04"),
    # gfx12 temporal hints are named per kind of access (was: only TH_LOAD_* names and TH_ATOMIC_RETURN)
    ("gfx1200", "gfx12_asm_vbuffer_mubuf.s", "buffer_atomic_pk_add_f16 v5, off, s[8:11], s3 offset:8388607 th:TH_ATOMIC_CASCADE_NT scope:SCOPE_DEV",
     "03 40 16 c4 05 10 e8 00 00 ff ff 7f"),
    # modifiers between comma-separated operands, and the split gfx9 format spelling on gfx12 / dfmt:, nfmt: on gfx9
    ("gfx1100", "gfx11_asm_mtbuf.s", "tbuffer_load_d16_format_x v4, off, s[8:11], s3, format:[BUF_FMT_8_UNORM] offset:4095",
     "ff 0f 0c e8 00 04 02 03"),
    ("gfx1200", "gfx12_asm_vbuffer_mtbuf.s",
     "tbuffer_load_d16_format_x v4, off, s[12:15], s3 format:[BUF_DATA_FORMAT_8, BUF_NUM_FORMAT_UNORM] offset:8388607",
     "03 00 22 c4 04 18 80 00 00 ff ff 7f"),
    ("gfx90a", "gfx90a_ldst_acc.s", "tbuffer_load_format_x a1, off, s[4:7],  dfmt:15, nfmt:2, s1", "00 00 78 e9 00 01 81 01"),
    # mixed-precision FMA: -x and |x| are the neg_lo/neg_hi bits (was: "packed instructions take neg_lo/neg_hi, not abs")
    ("gfx1100", "gfx11_asm_vop3p.s", "v_fma_mixlo_f16 v5, |ttmp15|, 0.5, -vcc_hi", "05 01 21 cc 7b e0 ad 81"),
    # gfx12 fp8/bf8 conversions spell op_sel bits as byte_sel:N (was: "does not take modifier(s) byte_sel")
    ("gfx1200", "gfx12_asm_vop3.s", "v_cvt_sr_fp8_f32 v1, v2, v3 byte_sel:2", "01 40 6b d7 02 07 02 00"),
    ("gfx1200", "gfx12_asm_vop3_from_vop1.s", "v_cvt_f32_bf8_e64 v1, s3 byte_sel:1", "01 10 ed d5 03 00 00 00"),
    # permlane op_sel has two entries; gfx942's stochastic-rounding fp8 conversions four
    ("gfx1200", "gfx12_asm_vop3.s", "v_permlane16_var_b32 v5, v1, v50, op_sel:[1,1]", "05 18 0f d7 01 65 02 00"),
    ("gfx942", "gfx942_asm_features.s", "v_cvt_sr_bf8_f32 v1, v2, v3 op_sel:[0,0,1,1]", "01 60 a5 d2 02 07 02 00"),
    # scalar ops keep a 16-bit operand's literal whole (was: truncated to 0x3456); a bf16 literal rounds to nearest even
    ("gfx1100", "gfx11_asm_sop2.s", "s_pack_ll_b32_b16 s0, 0xaf123456, s2", "ff 02 00 99 56 34 12 af"),
    ("gfx950", "gfx950_xdlops.s", "v_dot2c_f32_bf16_e32 v5, 10.1, v2", "ff 04 0a 2c 22 41 00 00"),
    # CDNA's DPP codes 0x150-0x15f are row_newbcast (was: row_share, which gfx9 does not have)
    ("gfx90a", "gfx90a-dpp64.txt", "v_ceil_f64_dpp v[0:1], v[2:3] row_newbcast:1 row_mask:0xf bank_mask:0xf", "fa 30 00 7e 02 51 01 ff"),
    # ray queries with addresses named one by one set dmask 0xf, unorm and r128 as the hardware wants (was: all zero)
    ("gfx1100", "gfx11_asm_mimg_features.s", "image_bvh_intersect_ray v[39:42], [v50, v46, v[20:22], v[40:42], v[47:49]], s[12:15]",
     "81 8f 64 f0 32 27 03 00 2e 14 28 2f"),
    # ... and the targets that have them take them
    ("gfx1150", "gfx1150_asm_salu_float.s", "s_add_f32 s5, s1, s2", "01 02 05 a0"),
    # gfx940+ f64 MFMAs: neg:[a,b,c] in the blgp bits
    ("gfx942", "mai-gfx942.s", "v_mfma_f64_4x4x4_4b_f64 a[0:1], v[0:1], a[2:3], a[2:3] neg:[1,0,0]", "00 80 ef d3 00 05 0a 34"),
    # SWMMAC's op_sel bits are index_key:N (was: "does not take modifier(s) index_key"); gfx11's 16-bit-result WMMA
    # takes op_sel:[0,0,1], the result's high halves
    ("gfx1200", "gfx12_asm_wmma_w32.s", "v_swmmac_f32_16x16x32_f16 v[12:19], v[0:3], v[4:11], v20 index_key:1", "0c 48 50 cc 00 09 52 1c"),
    ("gfx1100", "gfx11_asm_wmma.s", "v_wmma_f16_16x16x16_f16 v[16:23], v[0:7], v[8:15], v[16:23] op_sel:[0,0,1]", "10 60 42 cc 00 11 42 1c"),
    # gfx90a's images: the gfx9 MIMG encoding, AGPR data by bit 16, any address range (was: unknown instruction)
    ("gfx90a", "mimg-gfx90a.s", "image_load v[4:6], v[238:241], s[28:35] dmask:0x7 unorm", "00 17 00 f0 ee 04 07 00"),
    ("gfx90a", "gfx90a_ldst_acc.s", "image_sample a5, v[0:3], s[8:15], s[12:15] dmask:0x1", "00 01 81 f0 00 05 62 00"),
    ("gfx90a", "mimg-gfx90a.s", "image_load_mip v5, v[0:3], s[8:15]", "00 00 04 f0 00 05 02 00"),  # dmask left out: 0
    ("gfx90a", "(llvm-mc-19)", "image_load v5, v1, s[8:15] dmask:0x1 glc slc a16 lwe da d16", "00 e1 02 f2 01 05 02 80"),
    # CDNA's wave sync ops with a data register, AGPRs too (was: unknown DS opcode 153)
    ("gfx90a", "gfx90a_ldst_acc.s", "ds_gws_init a2 offset:65535 gds", "ff ff 33 db 02 00 00 00"),
    ("gfx950", "(llvm-mc-22)", "ds_gws_barrier v6 offset:8 gds", "08 00 3b d9 06 00 00 00"),
    # LLVM's short dim names and no<flag> spellings (was: "invalid literal for int()", "does not take modifier(s) noa16")
    ("gfx1100", "gfx11_asm_mimg_features.s", "image_load v0, v[2:3], s[0:7] dmask:0x1 dim:2D", "04 01 00 f0 02 00 00 00"),
    ("gfx1100", "gfx11_asm_mimg_features.s", "image_bvh_intersect_ray v[4:7], v[9:19], s[4:7] noa16", "80 8f 64 f0 09 04 01 00"),
    ("gfx942", "gfx942_asm_features.s", "global_load_dword v2, v[2:3], off nosc0", "00 80 50 dc 02 00 7f 02"),
    # gfx940+ scope the cache writeback / invalidate with sc0 sc1 (was: "does not take modifier(s) sc0")
    ("gfx942", "gfx942_asm_features.s", "buffer_wbl2 sc0 sc1", "00 c0 a0 e0 00 00 00 00"),
    # gfx950's bitop3 truth table sits in the neg/abs/omod bits (was: "does not take modifier(s) bitop3")
    ("gfx950", "gfx950_asm_vop3.s", "v_bitop3_b32 v5, 0.5, m0, 0.5 bitop3:101", "05 04 34 d2 f0 f8 c0 ab"),
    # gfx12's s_get_barrier_state writes an SGPR from a barrier id (was: "takes 0 operand(s)")
    ("gfx1200", "gfx12_asm_sop1.s", "s_get_barrier_state s3, -1", "c1 50 83 be"),
    ("gfx1200", "gfx12_asm_sop1.s", "s_sendmsg_rtn_b32 s0, sendmsg(MSG_RTN_GET_SE_AID_ID)", "87 4c 80 be"),
    ("gfx1200", "gfx12_asm_vopd_features.s", "v_dual_mov_b32 v2, v5 :: v_dual_mov_b32 v3, v1", "05 01 10 ca 01 01 02 02"),
    ("gfx1200", "(llvm-mc-22)", "v_add3_u32_e64_dpp v5, v1, s1, v0 dpp8:[7,6,5,4,3,2,1,0]", "05 00 55 d6 e9 02 00 04 01 77 39 05"),
    # gfx9 SDWA (was: only VGPRs and SGPRs as sources, no clamp/omod, dst_unused defaulting to UNUSED_PAD, the _sdwa
    # suffix alone ignored, VOPC writing only vcc): LLVM's and llvm-mc-15/19's bytes
    ("gfx90a", "(llvm-mc-19)", "v_add_f32_sdwa v1, v2, v3", "f9 06 02 02 02 16 06 06"),
    ("gfx90a", "(llvm-mc-19)", "v_add_f16_sdwa v5, ttmp15, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD",
     "f9 04 0a 3e 7b 06 86 06"),
    ("gfx90a", "(llvm-mc-19)", "v_add_f32_sdwa v5, v1, s2 clamp dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD",
     "f9 04 0a 02 01 26 06 86"),
    ("gfx942", "gfx942_asm_features.s", "v_cvt_f32_fp8 v1, 3 src0_sel:BYTE_1", "f9 a8 02 7e 83 06 81 00"),
    ("gfx942", "gfx942_asm_features.s", "v_cvt_pk_f32_bf8 v[2:3], s3 clamp mul:2 src0_sel:WORD_1", "f9 ae 04 7e 03 66 85 00"),
    ("gfx90a", "(llvm-mc-19)", "v_cmp_eq_f32_sdwa s[4:5], -v1, 0.5 src0_sel:WORD_1", "f9 e0 85 7c 01 84 15 86"),
    # gfx950's permlane swaps spell op_sel bits 0 and 1 as fi and bound_ctrl, in the e64 form (was: op_sel / DPP)
    ("gfx950", "gfx950_asm_features.s", "v_permlane16_swap_b32 v1, v2 bound_ctrl:0", "01 10 99 d1 02 01 00 00"),
    # a CDNA buffer load to LDS names no data register (was: vdata printed and required)
    ("gfx950", "gfx950.txt", "buffer_load_dwordx3 off, s[8:11], s3 lds", "00 00 59 e0 00 00 02 03"),
    # +0.0 is the inline constant 0 (was: "not an inline constant"); s_version's | with spaces is one operand
    ("gfx950", "gfx950_asm_features.s", "v_maximum3_f32 v1, 0.0, 1.0, v3", "01 00 a9 d2 80 e4 0d 04"),
    ("gfx1200", "gfx12_asm_sopk.s", "s_version UC_VERSION_GFX12 | UC_VERSION_W64_BIT | UC_VERSION_MDP_BIT", "09 a0 80 b0"),
    # image operand widths LLVM takes besides the exact one: 8 VGPRs for a 5-7 VGPR address, 8 SGPRs for an r128
    # resource (each a register-width check now refuses otherwise)
    ("gfx1100", "gfx11_asm_mimg_features.s", "image_sample_d v[64:66], v[32:39], s[4:11], s[100:103] dmask:0x7 dim:SQ_RSRC_IMG_2D",
     "04 07 70 f0 20 40 01 64"),
    ("gfx1200", "gfx12_asm_vimage.s", "image_load v0, v0, s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_1D r128", "10 00 40 d0 00 00 00 00 00 00 00 00"),
    ("gfx1200", "gfx12_asm_global_load_tr.s", "global_load_tr_b128 v[1:4], v0, s[0:1] offset:64", "00 c0 15 ee 01 00 00 00 00 40 00 00"),
]


# (target, LLVM test file, the bytes, LLVM's text for them)
DISASSEMBLE = [
    ("gfx1200", "(llvm-mc-22)", "f7 03 89 bf", "s_waitcnt vmcnt(0)"),  # gfx12's s_waitcnt names its counters (was: a number)
    # s_delay_alu fields with no name print as LLVM prints them (and, as for LLVM, that text does not assemble)
    ("gfx1100", "(llvm-mc-22)", "0c 00 87 bf", "s_delay_alu instid0(/* invalid instid value */)"),
    ("gfx1100", "(llvm-mc-22)", "61 00 87 bf", "s_delay_alu instid0(VALU_DEP_1) | instskip(/* invalid instskip value */)"),
    # a two-register address at v255: LLVM 22 prints v[255:256] (and its assembler, as ours, refuses the text: register
    # index is out of range; amd_isa.PRINTED_BUT_REFUSED)
    ("gfx1100", "(llvm-mc-22)", "00 00 00 e8 ff 00 c0 00", "tbuffer_load_format_x v0, v[255:256], s[0:3], s0 format:[BUF_FMT_INVALID] idxen offen"),
    # FLAT-segment offsets are unsigned on gfx9/gfx11 (was: offset:-1)
    ("gfx90a", "gfx90a_ldst_acc.txt", "ff 0f 40 dc 02 00 80 05", "flat_load_ubyte a5, v[2:3] offset:4095"),
    ("gfx1200", "gfx12_dasm_vbuffer_mtbuf.txt", "03 00 23 c4 04 e0 bc 16 00 ff ff 7f",
     "tbuffer_store_d16_format_x v4, off, ttmp[4:7], s3 format:[BUF_FMT_8_8_8_8_SSCALED] offset:8388607 th:TH_STORE_BYPASS scope:SCOPE_SYS"),
    # mixed-precision FMA sources print their modifiers (was: neg_lo:[0, 0, 1] neg_hi:[1, 0, 0])
    ("gfx1100", "gfx11_dasm_vop3p.txt", "05 01 20 cc 7b e0 ad 81", "v_fma_mix_f32 v5, |ttmp15|, 0.5, -vcc_hi"),
    # a16 packs coordinates and the clamp two to a VGPR but not the bias or compare (was v[1:5]); a16 before tfe
    ("gfx1100", "gfx11_dasm_mimg.txt", "0c 04 95 f1 01 05 02 0c",
     "image_gather4_c_b_cl v[5:8], v[1:4], s[8:15], s[12:15] dmask:0x4 dim:SQ_RSRC_IMG_CUBE a16"),
    ("gfx1100", "gfx11_dasm_mimg.txt", "14 04 bd f0 01 05 38 64",
     "image_gather4 v[5:9], v[1:2], s[96:103], s[100:103] dmask:0x4 dim:SQ_RSRC_IMG_2D_ARRAY a16 tfe"),
    # a 64-bit SGPR/TTMP operand with an odd code is the aligned pair (was: s[105:106], which no assembler takes)
    ("gfx1200", "(llvm-mc-22 --disassemble)", "55 77 e9 90", "s_xnor_b64 s[104:105], s[84:85], ttmp[10:11]"),
    ("gfx1200", "gfx12_dasm_vop3.txt", "01 20 6b d7 02 07 02 00", "v_cvt_sr_fp8_f32 v1, v2, v3 byte_sel:1"),
    ("gfx942", "gfx942_features.txt", "01 60 a5 d2 02 07 02 00", "v_cvt_sr_bf8_f32 v1, v2, v3 op_sel:[0,0,1,1]"),
    ("gfx90a", "gfx90a-dpp64.txt", "fa 30 00 7e 02 51 01 ff", "v_ceil_f64_dpp v[0:1], v[2:3] row_newbcast:1 row_mask:0xf bank_mask:0xf"),
    # lwe without tfe adds no data register (was v[254:256])
    ("gfx1100", "gfx11_dasm_mimg.txt", "98 73 31 f0 fe fe 5d 00",
     "image_atomic_add v[254:255], v[254:255], ttmp[8:15] dmask:0x3 dim:SQ_RSRC_IMG_2D_MSAA unorm glc slc dlc a16 lwe"),
    # and print as LLVM does: each address, no dmask/dim/r128 (was: [v50] ... dmask:0xf dim:SQ_RSRC_IMG_1D unorm r128)
    ("gfx1100", "gfx11_asm_mimg_features.s", "81 8f 64 f0 32 27 03 00 2e 14 28 2f",
     "image_bvh_intersect_ray v[39:42], [v50, v46, v[20:22], v[40:42], v[47:49]], s[12:15]"),
    ("gfx1200", "gfx12_asm_vimage_alias.s", "10 40 c6 d3 04 08 00 11 09 0a 0b 0e",
     "image_bvh_intersect_ray v[4:7], [v9, v10, v[11:13], v[14:16], v[17:19]], s[4:7]"),
    # a16 keeps gradients 32-bit (only the g16 opcodes pack them; was v[1:7]); the last NSA address holds the rest
    ("gfx1100", "gfx11_dasm_mimg.txt", "08 03 85 f0 01 05 02 0c",
     "image_sample_c_d v[5:6], v[1:9], s[8:15], s[12:15] dmask:0x3 dim:SQ_RSRC_IMG_3D a16"),
    ("gfx1100", "gfx11_dasm_mimg_features.txt", "05 08 70 f0 20 40 01 04 10 08 00 24",
     "image_sample_d v64, [v32, v16, v8, v0, v[36:37]], s[4:11], s[4:7] dmask:0x8 dim:SQ_RSRC_IMG_2D"),
    # LLVM 21's swizzle modes FFT and ROTATE (bits 15:13 = 7 / 6; was printed as a number)
    ("gfx1100", "gfx11_dasm_ds.txt", "ff ff d4 d8 01 00 00 ff", "ds_swizzle_b32 v255, v1 offset:swizzle(FFT,31)"),
    ("gfx1100", "gfx11_dasm_ds.txt", "e0 c7 d4 d8 01 00 00 05", "ds_swizzle_b32 v5, v1 offset:swizzle(ROTATE,1,31)"),
    # gfx11's wait_exp:0 prints, as in LLVM 19+
    ("gfx1100", "gfx11_dasm_vinterp.txt", "00 00 00 cd 01 05 0e 24", "v_interp_p10_f32 v0, -v1, v2, v3 wait_exp:0"),
    ("gfx90a", "gfx90a_features.txt", "00 00 a4 e0 00 00 00 00", "buffer_invl2"),  # gfx940 calls it buffer_inv
    # gfx90a names its matrix ops its own way (was: gfx940's v_mfma_f32_32x32x1_2b_f32)
    ("gfx90a", "gfx90a_mai.txt", "00 80 c0 d3 00 03 0a 04", "v_mfma_f32_32x32x1f32 a[0:31], v0, v1, a[2:33]"),
    ("gfx90a", "gfx90a_mai.txt", "00 93 e9 d3 00 03 0a e4", "v_mfma_f32_16x16x2bf16 a[0:15], v0, v1, a[2:17] cbsz:3 abid:2 blgp:7"),
    # gfx940's xf32 MFMAs are MFMA encodings (was: printed with no operands)
    ("gfx942", "gfx942_mai.txt", "00 80 be d3 02 09 0a 04", "v_mfma_f32_16x16x8_xf32 a[0:3], v[2:3], v[4:5], a[2:5]"),
    # a sparse MFMA's src2 is its index VGPR whatever acc_cd says (was: a1)
    ("gfx942", "gfx942_mai.txt", "0a 80 e2 d3 02 09 06 14", "v_smfmac_f32_16x16x32_f16 a[10:13], v[2:3], a[4:7], v1"),
    ("gfx942", "mai-gfx942.s", "00 80 ef d3 00 05 0a 34", "v_mfma_f64_4x4x4_4b_f64 a[0:1], v[0:1], a[2:3], a[2:3] neg:[1,0,0]"),
    ("gfx1200", "gfx12_dasm_wmma_w32.txt", "0c 48 50 cc 00 09 52 1c", "v_swmmac_f32_16x16x32_f16 v[12:19], v[0:3], v[4:11], v20 index_key:1"),
    ("gfx1200", "gfx12_dasm_wmma_w32.txt", "08 40 40 cc 00 09 ca 1b", "v_wmma_f32_16x16x16_f16 v[8:15], v[0:3], v[4:7], 1.0"),
    # gfx90a's images (was: no cdna encoding matches); one address VGPR named, as LLVM cannot tell how many
    ("gfx90a", "gfx90a_mimg.txt", "00 33 44 f0 c0 04 07 00", "image_atomic_cmpswap v[4:5], v192, s[28:35] dmask:0x3 unorm glc"),
    ("gfx90a", "gfx90a_ldst_acc.txt", "00 07 01 f0 02 06 02 00", "image_load a[6:8], v2, s[8:15] dmask:0x7"),
    ("gfx90a", "gfx90a_ldst_acc.txt", "00 00 37 db 02 00 00 00", "ds_gws_sema_br a2 gds"),
    ("gfx942", "gfx942_features.txt", "00 c0 a0 e0 00 00 00 00", "buffer_wbl2 sc0 sc1"),  # was: buffer_wbl2
    ("gfx950", "gfx950_dasm_vop3.txt", "05 04 34 d2 01 05 0e 30", "v_bitop3_b32 v5, v1, v2, s3 bitop3:0xa1"),  # was: -v1 ... |s3| mul:4
    ("gfx950", "gfx950_dasm_vop3.txt", "05 00 34 d2 7c e0 f1 a1", "v_bitop3_b32 v5, m0, 0.5, m0 bitop3:5"),
    ("gfx1200", "gfx12_dasm_sop1.txt", "c1 50 83 be", "s_get_barrier_state s3, -1"),
    # message ids: returning messages named in s_sendmsg too, 255 and gfx11's 135 unnamed, gfx12's 135 by LLVM's name,
    # a value beyond the id as a plain number (was: sendmsg(128, 0, 0), MSG_RTN_ILLEGAL_MSG, 0x1234)
    ("gfx1100", "gfx11_dasm_sopp.txt", "80 00 b6 bf", "s_sendmsg sendmsg(MSG_RTN_GET_DOORBELL)"),
    ("gfx1100", "gfx11_dasm_sop1.txt", "ff 4c 83 be", "s_sendmsg_rtn_b32 s3, sendmsg(255, 0, 0)"),
    ("gfx1200", "gfx12_dasm_sop1.txt", "87 4c 80 be", "s_sendmsg_rtn_b32 s0, sendmsg(MSG_RTN_GET_SE_AID_ID)"),
    ("gfx1200", "gfx12_dasm_sopp.txt", "34 12 b6 bf", "s_sendmsg 4660"),
    ("gfx1200", "gfx12_dasm_sopp.txt", "00 00 83 bf", "s_sleep 0"),  # was: 0x0
    ("gfx1100", "gfx11_dasm_sopk.txt", "1b f8 80 b8", "s_getreg_b32 s0, hwreg(HW_REG_PERF_SNAPSHOT_DATA)"),  # was: hwreg(27)
    # RDNA's f16/bf16 dot2 in DPP form has no op_sel on src0/src1: LLVM prints the word without those bits (was: [1,1,1,1])
    ("gfx1200", "gfx12_dasm_vop3_dpp16.txt", "00 78 66 d6 fa 04 0e 04 01 e4 04 00",
     "v_dot2_f16_f16_e64_dpp v0, v1, v2, v3 op_sel:[0,0,1,1] quad_perm:[0,1,2,3] row_mask:0x0 bank_mask:0x0 fi:1"),
    # gfx950's packed fp4 conversions name a src2 bit: four op_sel entries (was: three)
    ("gfx950", "gfx950_dasm_vop3.txt", "01 60 4c d2 02 07 02 00", "v_cvt_scalef32_pk_fp4_f16 v1, v2, v3 op_sel:[0,0,1,1]"),
    ("gfx942", "gfx942_features.txt", "f9 a8 02 7e 83 06 81 00", "v_cvt_f32_fp8_sdwa v1, 3 src0_sel:BYTE_1"),  # was: src_131 dst_sel:...
    ("gfx942", "gfx942_features.txt", "f9 aa 02 7e 03 66 81 00", "v_cvt_f32_bf8_sdwa v1, s3 clamp mul:2 src0_sel:BYTE_1"),
    ("gfx90a", "(llvm-mc-19)", "f9 e0 85 7c 01 84 15 86", "v_cmp_eq_f32_sdwa s[4:5], -v1, 0.5 src0_sel:WORD_1 src1_sel:DWORD"),  # was: vcc
    ("gfx950", "gfx950.txt", "01 18 9a d1 02 01 00 00", "v_permlane32_swap_b32_e64 v1, v2 bound_ctrl:1 fi:1"),
    ("gfx950", "gfx950.txt", "00 10 59 e0 00 00 02 65", "buffer_load_dwordx3 v0, s[8:11], s101 offen lds"),
    ("gfx1200", "gfx12_dasm_vimage.txt", "00 00 40 d0 00 00 70 00 00 00 00 00", "image_load v0, v0, s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_1D th:0x7"),
    ("gfx1200", "gfx12_dasm_sopp.txt", "34 12 83 bf", "s_sleep 0x1234"),  # beyond the inline range: hex
    # a scale load and an MFMA pair up only when the MFMA word has abid bit 0 set (was: always)
    ("gfx950", "gfx950_vop3px2.txt", "00 00 ac d3 14 2b 02 00 00 80 ad d3 00 11 02 04", "v_mfma_ld_scale_b32 v20, v21 op_sel_hi:[0,0]"),
    # a wider scalar range read from a code inside it is the 4-aligned range, as LLVM reads it (was: s[74:77])
    ("gfx1200", "(llvm-mc-22)", "82 52 02 f4 10 00 00 72", "s_buffer_load_b128 s[72:75], s[4:7], s57 offset:0x10"),
    ("gfx1200", "(llvm-mc-22)", "21 52 02 f4 10 00 00 72", "s_buffer_load_b128 s[72:75], s[64:67], s57 offset:0x10"),
    # gfx90a has GDS for the wave sync ops alone: LLVM does not print the bit elsewhere
    ("gfx90a", "(llvm-mc-19)", "4d 00 01 d8 3e b4 00 00", "ds_add_u32 v62, v180 offset:77"),
]

# (target, a line LLVM rejects, what our error says)
REJECT = [
    # the last lines LLVM's MC tests reject that we took (LLVM's message in the comment)
    ("gfx1100", "s_delay_alu", "too few operands"),  # gfx11_asm_err.s: too few operands for instruction
    ("gfx1100", "s_nop", "too few operands"),  # (llvm-mc-22) every SOPP with an immediate needs it
    ("gfx1200", "s_waitcnt", "too few operands"),  # (llvm-mc-22) gfx12 keeps gfx11's s_waitcnt with its counters
    ("gfx1100", "s_delay_alu instid0(1)", "expected a value name"),  # gfx11_asm_err.s
    ("gfx1100", "v_dual_add_f32 v255, vcc_lo, v2 :: v_dual_cndmask_b32 v6, s1, v3", "reads 3 scalar values"),  # constant bus
    ("gfx1200", "v_dual_add_f32 v255, vcc_lo, v2 :: v_dual_cndmask_b32 v6, s1, v3", "reads 3 scalar values"),
    ("gfx1100", "v_dual_cndmask_b32 v255, vcc_lo, v2 :: v_dual_mov_b32 v254, s1", "reads 3 scalar values"),  # (llvm-mc-22)
    ("gfx1100", "v_fmac_legacy_f32_dpp v255, v1, v2 quad_perm:[0,1,2,3] row_mask:0x0 bank_mask:0x0", "dpp variant of this instruction"),
    ("gfx1100", "v_swap_b32_dpp v1, v2 quad_perm:[0,1,2,3]", "dpp variant of this instruction is not supported"),  # (llvm-mc-22)
    ("gfx1200", "v_div_scale_f32_e64_dpp v94, s50, v18, v64, v34 row_half_mirror", "e64_dpp variant of this instruction"),
    ("gfx1200", "s_buffer_prefetch_data null, 100, s10, 7", "not null"),  # gfx12_asm_smem_err.s: invalid operand for instruction
    ("gfx1200", "s_prefetch_inst s[14:15], 0xffffff, m0, 7", "24-bit signed offset"),  # gfx12_err.s
    ("gfx1200", "s_buffer_prefetch_data s[4:7], -1, s10, 7", "23-bit unsigned offset"),  # (llvm-mc-22)
    ("gfx1200", "image_load v0, v0, s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_1D th:0x7", "expected an identifier"),  # gfx12_err.s
    ("gfx942", "v_dot2_u32_u16 v0, 1, v0, s2 op_sel:[0,1,0,1] op_sel_hi:[0,0,1,1]", "invalid op_sel operand"),  # gfx942_err.s
    ("gfx942", "v_dot2_u32_u16 v0, v1, v2, v3 op_sel_hi:[1,1,1]", "invalid op_sel operand"),  # (llvm-mc-22): any op_sel_hi
    # VGPR sources and destinations the VALU join encodes directly (no general operand path): the same limits as
    # LLVM's (llvm-mc-22): index range, width, gfx90a's even tuples, halves only where the encoding has them
    ("gfx1100", "v_add_f32_e64 v256, v1, v2", "register index is out of range"),
    ("gfx1100", "v_add_f32_e64 v1, v2, v[255:256]", "register index is out of range"),
    ("gfx1100", "v_add_f64 v[0:1], v1, v[2:3]", "64 bits wide"),
    ("gfx1100", "v_add_f32_e64 v1, v2, v[3:4]", "32 bits wide"),
    ("gfx90a", "v_add_f64 v[0:1], v[1:2], v[2:3]", "odd register"),
    ("gfx90a", "v_add_f64 v[1:2], v[2:3], v[4:5]", "odd register"),
    ("gfx1100", "v_add_f32_e32 v1, v2, v3.h", "16-bit half"),
    ("gfx1100", "v_add_f16_e32 v1, v2, v200", "reaches v0-v127"),
    ("gfx1100", "flat_load_b32 v1, v[3:4] offset:-1", "outside 0..4095"),  # LLVM: expected a 12-bit unsigned offset
    ("gfx90a", "global_load_dword v1, v[4:5], off offset:4096", "outside -4096..4095"),
    ("gfx90a", "v_mfma_f32_32x32x1_2b_f32 a[0:31], v0, v1, a[0:31]", "unknown"),  # gfx940's name; LLVM: not supported on this GPU
    ("gfx1200", "global_store_b32 v0, v1, s[0:1] th:TH_LOAD_NT", "use one of TH_STORE_"),  # a load's hint on a store
    # lane masks are one SGPR per 32 lanes: wave64 spellings in wave32 code and back (LLVM: invalid operand for instruction)
    ("gfx1100", "v_cmp_class_f16 vcc, v1, v2", "lane mask, 1 SGPR"),  # gfx11_asm_vopc-fake16.s W32-ERR
    ("gfx1100", "v_cmp_class_f16_e64 s[10:11], v1, 0.5", "lane mask, 1 SGPR"),  # gfx11_asm_vop3_from_vopc-fake16.s
    ("gfx1200", "v_add_co_ci_u32 v5, vcc, v1, v2, vcc", "lane mask, 1 SGPR"),  # gfx12_asm_vop2-fake16.s
    ("gfx90a", "v_cndmask_b32_e64 v1, v2, v3, s10", "lane mask, 2 SGPR"),
    ("gfx1100", "v_permlane16_b32 v5, v1, s2, s3 op_sel:[0,0,0,1]", "op_sel takes 2 entries"),  # gfx11_asm_vop3_err.s
    # instructions the family's tables list but the target lacks (LLVM: instruction not supported on this GPU)
    ("gfx1100", "s_add_f32 s5, s1, s2", "not an instruction of gfx1100"),  # gfx1150+ scalar float
    ("gfx942", "v_prng_b32 v5, v1", "not an instruction of gfx942"),  # gfx950 only
    ("gfx90a", "v_mov_b64 v[0:1], v[2:3]", "not an instruction of gfx90a"),  # gfx940+
    # a register range as wide as its operand (was: any width accepted, encoded from its first register; LLVM: invalid
    # operand for instruction): gfx11_asm_wmma.s's wave64 accumulators in wave32 code, gfx950_err.s, mai-err-gfx942.s
    ("gfx1100", "v_wmma_f32_16x16x16_f16 v[16:19], v[0:7], v[8:15], v[16:19]", r"vdst is 256 bits wide, 8 register\(s\) such as v\[16:23\]"),
    ("gfx950", "v_cvt_scalef32_pk_f16_fp8 v[20:25], v[10:25], v8 clamp", "vdst is 32 bits wide"),
    ("gfx942", "v_mfma_f32_32x32x4bf16 a[0:15], v0, v1, 0", "vdst is 1024 bits wide"),
    ("gfx1100", "v_add_f64 v0, v2, v4", r"vdst is 64 bits wide, 2 register\(s\) such as v\[0:1\]"),
    ("gfx1100", "v_mov_b32 v[0:1], v2", "vdst is 32 bits wide"),
    ("gfx1100", "s_mov_b64 s[0:2], s[2:3]", "sdst is 64 bits wide"),
    # VOP3P modifiers by source kind (gfx11/gfx12_asm_vop3p_err.s, gfx12_asm_wmma_w32.s; LLVM: not a valid operand,
    # invalid operand for instruction, invalid neg_lo/neg_hi operand, out of range index_key)
    ("gfx1100", "v_dot4_u32_u8 v0, v1, v2, v3 op_sel:[0,1]", "takes no op_sel/op_sel_hi"),  # 8-bit sources have no halves
    ("gfx1200", "v_dot4_f32_fp8_fp8 v0, v1, v2, v3 neg_lo:[1,0,0]", "neg_lo applies to src2 here"),
    ("gfx1200", "v_dot4_f32_fp8_fp8 v0, v1, v2, v3 clamp", "takes no clamp"),
    ("gfx1200", "v_wmma_i32_16x16x16_iu8 v[4:11], v[0:1], v[2:3], v[4:11] neg_hi:[1,0,0]", "neg_hi applies to none"),
    ("gfx1200", "v_wmma_f32_16x16x16_f16 v[8:15], v[0:3], v[4:7], v[8:15] clamp", "takes no clamp"),
    ("gfx1200", "v_wmma_f32_16x16x16_f16 v[8:15], 1.0, v[4:7], v[8:15]", "src0 is a matrix operand: a VGPR range"),
    ("gfx1200", "v_wmma_f32_16x16x16_f16 v[8:15], v[0:3], v[4:7], s[8:15]", "src2 is a VGPR range or an inline constant"),
    ("gfx1200", "v_swmmac_f32_16x16x32_f16 v[12:19], v[0:3], v[4:11], v20 index_key:2", "out of range 0..1"),
    ("gfx1200", "v_swmmac_i32_16x16x64_iu4 v[6:13], v[0:1], v[2:5], v14 index_key:1", "takes no index_key"),
    # gfx90a images: data as wide as dmask and d16 say; no tfe (its bit selects AGPRs); gfx940+ have no images
    ("gfx90a", "image_load v[0:1], v2, s[0:7] dmask:0x7", "image data size does not match dmask"),
    ("gfx90a", "image_load v[0:4], v2, s[0:7] dmask:0xf unorm tfe", "no tfe bit"),  # gfx90a_err.s
    ("gfx942", "image_load v[4:6], v[238:241], s[28:35] dmask:0x7 unorm", "unknown"),  # mimg-err-gfx942.s
    # CDNA wave sync data is an even register, and gds is written (gfx90a_err.s: vgpr must be even aligned; llvm-mc-19:
    # too few operands for instruction)
    ("gfx90a", "ds_gws_barrier a3 offset:4 gds", "even aligned"),
    ("gfx942", "ds_gws_sema_v", "write gds"),
    ("gfx90a", "global_load_dword v2, v[2:3], off sc0", "spells the sc0 bit glc"),  # gfx942_asm_features.s run on gfx90a
    ("gfx1100", "image_bvh_intersect_ray v[4:7], v[9:16], s[4:7] noa16", "address is 11 VGPR"),  # gfx11_asm_mimg_err.s
    ("gfx1100", "image_bvh_intersect_ray v[4:6], v[0:15], s[4:7]", "vdata is 4 VGPRs"),
    ("gfx1100", "v_dot2_f16_f16_e64_dpp v0, v1, v2, v3 op_sel:[1,1,0,0] quad_perm:[0,1,2,3] row_mask:0x0 bank_mask:0x0",
     "not available in DPP form"),  # gfx11_asm_vop3_dpp16-fake16.s
    # the constant bus: one scalar value per VALU instruction on gfx9/CDNA, two on gfx10+ (one for the 64-bit shifts);
    # implicit vcc counts, inline constants do not (LLVM: invalid operand (violates constant bus restrictions))
    ("gfx90a", "v_add_f32_e64 v5, s1, s2", "reads 2 scalar values"),
    ("gfx90a", "v_cndmask_b32 v5, s1, v2, vcc", "reads 2 scalar values"),
    ("gfx942", "v_add_f32_sdwa v5, vcc_lo, src_execz dst_sel:DWORD", "reads 2 scalar values"),
    ("gfx1100", "v_fma_f32 v5, s1, s2, s3", "reads 3 scalar values"),
    ("gfx1200", "v_lshlrev_b64 v[4:5], s1, s[2:3]", "allows 1 per instruction"),
    ("gfx950", "buffer_load_dword v5, off, s[8:11], s3 lds", "names no data register"),
    ("gfx942", "v_cvt_f32_fp8_sdwa v1, v3 dst_sel:DWORD src0_sel:BYTE_1", "no dst_sel"),
    ("gfx90a", "s_movrels_b32 s1, 5", "must be a scalar register"),
    ("gfx90a", "v_mfma_f32_32x32x2bf16 a[32:63], s47, v32, a[0:31]", "src0 must be a VGPR or AGPR range"),
    ("gfx90a", "v_mfma_f32_32x32x2bf16 a[32:63], v47, v32, s[0:31]", "src2 must be a VGPR or AGPR range or an inline constant"),
    # gfx10+ images name their dimension; gathers read one channel; null is no buffer resource or global saddr
    # (gfx11_asm_mimg_err.s: missing dim operand; gfx11_asm_mubuf_err.s, gfx11_flat_instructions_err.s)
    ("gfx1100", "image_atomic_add v5, v1, s[8:15] dmask:0x1 unorm glc", "missing dim operand"),
    ("gfx1100", "image_msaa_load v[1:4], v[5:7], s[8:15] dmask:0xf dim:SQ_RSRC_IMG_2D_MSAA", "only one bit must be set"),
    ("gfx1100", "buffer_atomic_add_u32 v5, v0, null, s3 idxen", "not null"),
    ("gfx1100", "global_atomic_add_u32 v0, v2, null", "saddr cannot be null"),
    # gfx90a+: VGPR and AGPR tuples start at even registers (LLVM: vgpr tuples must be 64 bit aligned)
    ("gfx90a", "v_add_f64 v[1:2], v[3:4], v[5:6]", "starts at an odd register"),
    ("gfx942", "global_load_dwordx2 v[1:2], v[2:3], off", "starts at an odd register"),
    # CDNA's 8/4-bit integer dots take no op_sel (gfx90a_err.s, LLVM 21/22); gfx950's scaled conversions and the other
    # new conversions take no clamp or output modifier (gfx950_err.s, llvm-mc-22)
    ("gfx90a", "v_dot4_i32_i8 v0, v1, v2, v3 op_sel:[1,0,0]", "takes no op_sel/op_sel_hi"),
    ("gfx950", "v_cvt_scalef32_pk_fp8_f16 v1, v2, v3 clamp", "takes no clamp or mul/div"),
    ("gfx950", "v_cvt_scalef32_pk32_f32_fp6 v[2:33], v[2:7], v6 mul:2", "takes no clamp or mul/div"),
    # gfx11+ have no src_vccz, src_execz, src_pops_exiting_wave_id or lds_direct sources (gfx11_asm_operands.s);
    # interpolation sources are VGPRs (gfx11_asm_vinterp_err-fake16.s); a global saddr is an SGPR pair
    ("gfx1100", "s_add_i32 s0, src_execz, s2", "not available on rdna3"),
    ("gfx1200", "v_readfirstlane_b32 s0, lds_direct", "not available on rdna4"),
    ("gfx1100", "v_interp_p10_f32 v0, s1, v2, v3", "src0 must be a VGPR"),
    ("gfx1100", "global_load_b32 v1, v[3:4], s0", "saddr is 2 SGPR"),
    # `_dpp`/`_sdwa` name the short forms: no promotion to VOP3 (gfx11_asm_vop2_fake16_err.s: v255 needs _e64_dpp)
    ("gfx1100", "v_add_f16_dpp v255, v1, v2 dpp8:[7,6,5,4,3,2,1,0]", "reaches v0-v127.*use _e64_dpp"),
    ("gfx1200", "v_add3_u32_dpp v5, v1, v2, v3 quad_perm:[0,1,2,3]", "its DPP form is v_add3_u32_e64_dpp"),
    # VOP3 DPP: no literal; src1 a VGPR on gfx11 (gfx12 takes SGPRs and inline constants, not in the mix ops); no DPP
    # form for ops with scalar-only sources (gfx11_asm_err.s, gfx12_err.s, llvm-mc-22)
    ("gfx1100", "v_add3_u32_e64_dpp v5, v1, s1, v0 dpp8:[7,6,5,4,3,2,1,0]", "src1 of this DPP form must be a VGPR"),
    ("gfx1200", "v_add3_u32_e64_dpp v5, v1, v2, 49812340 dpp8:[7,6,5,4,3,2,1,0]", "no literal"),
    ("gfx1200", "v_fma_mix_f32_e64_dpp v5, v1, s3, v4 quad_perm:[3,2,1,0]", "src1 of this DPP form must be a VGPR"),
    ("gfx1100", "v_permlane16_b32_e64_dpp v5, v1, s2, s3 quad_perm:[0,1,2,3]", "no DPP form"),
    ("gfx1100", "image_atomic_and v1, v[10:11], null dmask:0x1 dim:SQ_RSRC_IMG_2D", "not null"),  # gfx11_asm_mimg_err.s
    ("gfx1200", "s_buffer_load_b64 s4, null, s101", "not null"),  # gfx12_asm_smem_err.s
    # VOPD: X's and Y's first sources in different VGPR banks, two scalar values for the pair (gfx11_asm_vopd_err.s)
    ("gfx1100", "v_dual_mov_b32 v1, v2 :: v_dual_add_f32 v2, v6, v6", "src0 operands must use different VGPR banks"),
    # f8f6f4 MFMA matrices as wide as cbsz/blgp's element format (mai-gfx950-err.s: wrong register tuple size)
    ("gfx950", "v_mfma_f32_16x16x128_f8f6f4 v[0:3], v[4:11], v[12:19], v[0:3] cbsz:2 blgp:2", "src0 is 6 VGPRs for cbsz:2"),
    ("gfx1100", "v_dual_fmaak_f32 v122, s74, v161, 2.741 :: v_dual_and_b32 v247, s75, v98", "reads 3 scalar values"),
    # gfx11_asm_vopd_err.s: second sources in different banks (mod 4), third sources (fmac's accumulator, fmamk's addend)
    # of different parity
    ("gfx1100", "v_dual_add_f32 v1, v4, v0 :: v_dual_add_f32 v2, v5, v4", r"src1 operands must use different VGPR banks \(v0 and v4\)"),
    ("gfx1100", "v_dual_fmamk_f32 v6, v1, 0xaf123456, v3 :: v_dual_fmamk_f32 v5, v2, 0xaf123456, v5", "src2 operands must use different"),
    ("gfx1100", "v_dual_fmac_f32 v7, v1, v2 :: v_dual_fmamk_f32 v6, v2, 0xaf123456, v3", "src2 operands must use different"),
    ("gfx1200", "v_dual_add_f32 v255, s2, v2 :: v_dual_cndmask_b32 v6, s1, v3", "reads 3 scalar values"),
    # memory operands as wide as the instruction reads or writes there (was: any range taken, its first register encoded)
    ("gfx1200", "global_load_tr_b128 v[1:2], v0, s[0:1] offset:64", r"operand 1 takes 4 registers here \(such as v\[1:4\]\)"),
    ("gfx1100", "global_load_b128 v[1:2], v0, s[0:1]", "operand 1 takes 4 registers"),
    ("gfx1100", "s_load_b64 s[0:1], s[0:3], 0x0", "operand 2 takes 2 registers"),
    ("gfx1100", "image_sample v[5:6], v[1:3], s[8:15], s[12:15] dmask:0x3 dim:SQ_RSRC_IMG_1D", "operand 2 takes 1 register"),
    ("gfx1100", "image_sample v[5:6], v1, s[8:15], null dmask:0x3 dim:SQ_RSRC_IMG_1D", "sampler must be 4 SGPRs, not null"),
    ("gfx1100", "image_bvh_intersect_ray v[4:7], v[9:19], null", "resource must be 4 SGPRs, not null"),  # gfx11_asm_mimg_err.s
    ("gfx1100", "global_load_b32 v1, v3, exec_hi", "saddr is 2 SGPR"),  # gfx11_asm_flat_errs.s
    # gfx90a_err.s: one acc bit for data and destination; no lds_direct; GDS for the wave sync ops alone; f64 DPP
    ("gfx90a", "flat_atomic_add v2, v[2:3], a2 glc", "data and dst should be all VGPR or AGPR"),
    ("gfx90a", "ds_write2_b64 v1, a[4:5], v[2:3] offset1:255", "data and dst should be all VGPR or AGPR"),
    ("gfx90a", "v_add_f32 v5, v1, lds_direct", "not available on cdna"),
    ("gfx90a", "ds_read_b32 v0, v1 gds", "gds modifier is not supported"),
    ("gfx90a", "v_ceil_f64_dpp v[0:1], v[2:3] quad_perm:[1,1,1,1] row_mask:0xf bank_mask:0xf", "DP ALU dpp only supports row_newbcast"),
    ("gfx942", "v_mov_b64 v[2:3], v[4:5] row_shl:1", "DP ALU dpp only supports row_newbcast"),  # gfx942_err.s
    ("gfx90a", "v_cmp_eq_f32_dpp vcc, v1, v2 quad_perm:[0,2,1,1]", "dpp variant of this instruction is not supported"),  # llvm-mc-19
    ("gfx90a", "v_cvt_f32_f64_sdwa v1, v[2:3] src0_sel:DWORD", "sdwa variant of this instruction is not supported"),  # llvm-mc-19
    # RDNA has no DPP for ops with 64-bit operands (gfx11_unsupported_dpp.s; llvm-mc-22 on gfx1200 alike)
    ("gfx1100", "v_ceil_f64_dpp v[0:1], v[2:3] quad_perm:[1,1,1,1] row_mask:0xf bank_mask:0xf", "dpp variant of this instruction is not supported"),
    ("gfx1200", "v_cmp_eq_f64_e64_dpp s5, v[0:1], v[2:3] quad_perm:[1,1,1,1]", "dpp variant of this instruction is not supported"),
    # _e64 names the VOP3 encoding: VOP1-only ops have none (gfx11_unsupported_e64.s; was: the VOP1 encoding)
    ("gfx1100", "v_swap_b32_e64 v1, v2", "e64 variant of this instruction is not supported"),
    # neg/abs belong to float operands (and v_cndmask's values): llvm-mc-22 "not a valid operand" (was: encoded)
    ("gfx1100", "v_add_nc_u32_e64 v5, -v1, v2", "src0 takes no neg/abs"),
    ("gfx1100", "v_ldexp_f32 v5, v1, -v2", "src1 takes no neg/abs"),
    ("gfx1200", "v_permlane16_var_b32 v5, v1, -v2 op_sel:[0, 1]", "src1 takes no neg/abs"),  # gfx12_asm_vop3_err.s
    ("gfx942", "v_cvt_sr_fp8_f32 v1, v2, -v3", "src1 takes no neg/abs"),  # gfx942_err.s
    # gfx12_asm_vop3_err.s / gfx12_err.s: op_sel entries are bits, modifiers given once, destinations unmodified
    ("gfx1200", "v_permlane16_var_b32 v5, v1, v2 op_sel:[-1, 0]", "must be 0 or 1"),
    ("gfx1200", "image_load v0, v0, s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_1D th:TH_LOAD_HT scope:SCOPE_SE th:TH_LOAD_HT", "th is given twice"),
    ("gfx1200", "v_permlane16_var_b32 -v5, v1, v2 op_sel:[0, 1]", "the destination takes no neg/abs"),
    ("gfx1100", "ds_load_b32 -v1, v2", "takes no neg/abs"),
    ("gfx1100", "buffer_store_d16_hi_format_x v[1:2], off, s[12:15], s4 offset:4095 glc slc dlc tfe", "TFE modifier has no meaning"),
    # gfx11_asm_ldsdir_err.s / gfx11_asm_err.s: attr0..attr32; wait counters take a number (the bare word was read as 1)
    ("gfx1100", "lds_param_load v17, attr33.x", "out of bounds interpolation attribute number"),
    ("gfx1100", "lds_direct_load v15 wait_vdst", "wait_vdst takes a number"),
    ("gfx1100", "v_interp_p2_f32 v0, -v1, v2, v3 wait_exp", "wait_exp takes a number"),
    # gfx12_err.s: load/store hint 3 is BYPASS at system scope and LU / WB below it; TH_LOAD_WB, TH_STORE_LU are no names
    ("gfx1200", "image_store v0, v0, s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_1D th:TH_STORE_BYPASS scope:SCOPE_DEV", "scope and th combination"),
    ("gfx1200", "global_load_b32 v1, v0, s[0:1] th:TH_LOAD_LU scope:SCOPE_SYS", "scope and th combination"),
    ("gfx1200", "image_load v0, v0, s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_1D th:TH_LOAD_WB", "unknown th value"),
    ("gfx1200", "image_store v0, v0, s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_1D th:TH_STORE_LU", "unknown th value"),
    # MFMA accumulators (mai-err-gfx942.s, gfx90a_err_pos.s; llvm-mc-19): no blgp on gfx940+ f64 ops (its bits are neg),
    # no partial overlap with a result wider than 128 bits, one acc_cd bit for C and D (was: v[16:31] encoded as AGPRs)
    ("gfx942", "v_mfma_f64_16x16x4_f64 v[0:7], v[0:1], v[2:3], v[0:7] blgp:7", "blgp is not supported"),
    ("gfx90a", "v_mfma_f64_16x16x4f64 v[0:7], v[0:1], v[2:3], v[2:9]", "must not partially overlap with dst"),
    ("gfx90a", "v_mfma_f32_16x16x1f32 a[0:15], v0, v1, v[16:31]", "both VGPRs or both AGPRs"),
    # gfx942_asm_features.s on gfx90a: gfx940's instructions and hardware registers
    ("gfx90a", "v_fmamk_f32 v0, v2, 100.0, v3", "not an instruction of gfx90a"),
    ("gfx90a", "s_getreg_b32 s1, hwreg(HW_REG_XCC_ID)", "invalid hardware register"),
    # clamp and the output modifier where LLVM's profiles give them (modifier_rules, read off llvm-mc-22; gfx12_asm_vop3_err.s)
    ("gfx1200", "v_permlane16_var_b32 v5, v1, v2 clamp", "takes no clamp"),
    ("gfx1200", "v_permlane16_var_b32 v5, v1, v2 div:2", "takes no output modifier"),
    ("gfx1100", "v_and_b32_e64 v5, v1, v2 clamp", "takes no clamp"),
    ("gfx942", "v_cmp_eq_f32_e64 s[2:3], v2, v3 mul:2", "takes no output modifier"),
    # VOP3P has DPP forms for unpacked float results only (llvm-mc-22), the fp8/bf8 dots with VGPR sources alone
    # (gfx12_asm_vop3p_dpp16_err.s, gfx12_asm_vop3p_dpp8_err.s)
    ("gfx1200", "v_dot4_i32_iu8 v0, v1, v2, v3 row_shl:1", "dpp variant of this instruction is not supported"),
    ("gfx1100", "v_pk_add_f16 v0, v1, v2 row_shl:1", "dpp variant of this instruction is not supported"),
    ("gfx1200", "v_dot4_f32_bf8_fp8 v0, v1, v2, s0 row_shl:15", "src2 of this DPP form must be a VGPR"),
    # gfx11_asm_sopk_err.s: the counter waits' register is null (LLVM's disassembler prints others, as ours does)
    ("gfx1100", "s_waitcnt_vscnt s0, 0x1234", "src0 must be null"),
    # a 64-bit special register for a 32-bit operand (gfx12_err.s; llvm-mc-22 everywhere; was: encoded as exec_lo)
    ("gfx1200", "s_alloc_vgpr exec", "ssrc0 is 32 bits wide, got the 64-bit exec"),
    ("gfx942", "v_add_f32 v0, vcc, v1", "src0 is 32 bits wide, got the 64-bit vcc"),
    # scalar load offsets (llvm-mc-22): 21-bit signed, buffer loads 20-bit unsigned; gfx12 24 and 23 bits (was: masked)
    ("gfx1100", "s_load_b32 s5, s[4:5], 0x100000", "a 21-bit signed offset"),
    ("gfx942", "s_buffer_load_dword s5, s[4:7], -1", "a 20-bit unsigned offset for buffer ops"),
    ("gfx1200", "s_load_b32 s5, s[4:5], 0xffffff", "a 24-bit signed offset"),
    # mai-gfx950-err.s: the scale load takes op_sel only
    ("gfx950", "v_mfma_ld_scale_b32 v0, v0 clamp", "takes no clamp"),
    ("gfx950", "v_mfma_ld_scale_b32 v0, v0 neg_lo:[0,1]", "neg_lo applies to none of its sources"),
    # VGPR-only sources (gfx950_err.s: invalid operand for instruction)
    ("gfx950", "v_permlane16_swap_b32 v0, s0", "src0 must be a VGPR"),
    ("gfx950", "v_cvt_scalef32_pk32_f32_fp6 v[0:31], s[32:37], v6", "src0 must be a VGPR"),
    # scalar ranges start aligned: pairs even, wider ranges at a multiple of 4 (LLVM: invalid register alignment; was:
    # taken, and s_mov_b64 s[1:2] encoded as s[0:1])
    ("gfx1100", "s_mov_b64 s[1:2], s[4:5]", r"s\[1:2\] is misaligned: a range of 2 scalar registers must start at a multiple of 2"),
    ("gfx1100", "s_load_b128 s[2:5], s[4:5], 0x0", "must start at a multiple of 4"),
    ("gfx1100", "s_buffer_load_b32 s0, ttmp[2:5], 0x0", "must start at a multiple of 4"),
    ("gfx1100", "v_add_f64 v[0:1], s[1:2], v[2:3]", "misaligned"),
]

# (target, LLVM test file, bytes LLVM's disassembler calls invalid, what our DecodeError says). LLVM prints the operand
# cases with `/*Invalid register ...*/` or `/*Invalid immediate*/`; printed, any of these would be text our assembler
# refuses (was: decoded and printed, e.g. `op_sel:[1, 0, 0]` on a WMMA, `s[0:3]` as a matrix operand)
DECODE_REJECT = [
    ("gfx1100", "(llvm-mc-22)", "fa 04 0a 0c 01 e4 00 ff", "no DPP form"),  # v_fmac_dx9_zero_f32 (LLVM: invalid instruction encoding)
    ("gfx1200", "gfx12_dasm_wmma_w32.txt", "08 48 40 cc 00 09 22 1c", "op_sel bits"),  # WMMA sources are no 16-bit pairs
    ("gfx1200", "gfx12_dasm_wmma_w32.txt", "0c 50 50 cc 00 09 52 1c", r"index_key:2 \(it takes 0..1\)"),
    ("gfx1200", "gfx12_dasm_wmma_w32.txt", "08 40 40 cc 00 08 22 1c", "src0 code 0: a matrix operand is a VGPR range"),
    ("gfx1200", "gfx12_dasm_wmma_w32.txt", "08 40 40 cc f2 08 22 1c", "src0 code 242: a matrix operand"),  # 1.0 as A
    ("gfx1200", "gfx12_dasm_wmma_w32.txt", "08 40 40 cc 00 09 22 18", "src2 code 8: a matrix accumulator"),
    ("gfx1200", "gfx12_dasm_vop3p_err.txt", "00 c0 24 cc 01 05 0e 1c", "clamp"),  # v_dot4_f32_fp8_bf8
    ("gfx1200", "gfx12_dasm_vop3p_err.txt", "00 40 24 cc 01 05 0e 14", "op_sel_hi bits"),
    ("gfx90a", "(llvm-mc-19)", "00 00 3a d9 06 00 00 00", "gds bit is clear"),  # LLVM: invalid instruction encoding
    # an odd data register: LLVM prints it, but its assembler (and ours) refuses the text (vgpr must be even aligned)
    ("gfx942", "(llvm-mc-19)", "00 00 33 d9 01 00 00 00", "data register 1 is odd"),
    # words whose sources break the constant bus: LLVM prints them, but neither assembler takes the text
    ("gfx90a", "(llvm-mc-19)", "00 00 00 00", "reads 2 scalar values"),  # v_cndmask_b32_e32 v0, s0, v0, vcc
    ("gfx1100", "(llvm-mc-19)", "05 00 13 d6 01 04 0c 00", "reads 3 scalar values"),  # v_fma_f32 v5, s1, s2, s3
    ("gfx1100", "gfx11_dasm_sop1.txt", "cb 48 f5 be", "must be a scalar register"),  # s_setpc_b64 -11 (LLVM: invalid)
    # operand classes LLVM's disassembler checks (it marks them /*Invalid register, operand has ...*/): a VGPR as a lane
    # mask, an SGPR or constant as a matrix operand, a resource running past the SGPR file; a gfx11 FLAT offset of 4096
    # and up, which LLVM prints but does not assemble (was: printed, text our assembler refused)
    ("gfx1100", "(llvm-mc-19)", "06 51 21 d5 5a 77 7a 04", "lane mask"),  # v_sub_co_ci_u32_e64 ..., v30
    ("gfx90a", "(llvm-mc-19)", "20 80 e8 d3 2f 40 02 04", r"src0 \(code 47\) must be a VGPR or AGPR"),
    ("gfx90a", "(llvm-mc-19)", "20 80 e8 d3 2f 41 72 01", r"src2 \(code 92\) must be a VGPR, an AGPR or an inline constant"),
    ("gfx1100", "(llvm-mc-19)", "b7 2b b8 e9 a3 5c da b0", "past the 106 SGPRs"),  # tbuffer ... s[104:107]
    ("gfx1100", "(llvm-mc-19)", "a0 1f 58 dc 3e 00 7c 9e", "does not fit a FLAT offset"),  # LLVM prints offset:8096
    ("gfx90a", "(llvm-mc-22)", "01 00 80 d2 04 0d 02 00", "an odd register"),  # LLVM 22: v[1:2]/*Invalid register ... Align2*/
    ("gfx90a", "(llvm-mc-22)", "00 48 a8 d3 01 05 0e 1c", "no 16-bit halves"),  # v_dot4_i32_i8 with an op_sel bit
    ("gfx950", "(llvm-mc-22)", "01 00 40 d2 02 07 02 08", "no output modifier"),  # v_cvt_scalef32_pk_fp8_f16 mul:2
    ("gfx1100", "(llvm-mc-19)", "fc 02 00 81", "not available on rdna3"),  # LLVM prints src_execz, refuses to assemble it
    # LLVM prints these with a comment where text belongs, or decodes the word as another instruction
    ("gfx90a", "(llvm-mc-19)", "fa 30 00 7e 02 55 00 ff", "DP ALU dpp only supports row_newbcast"),  # v_ceil_f64 quad_perm
    ("gfx90a", "(llvm-mc-19)", "fe 02 02 7e", "not available on cdna"),  # v_mov_b32 v1, src_lds_direct
    ("gfx950", "(llvm-mc-22)", "20 9c 6a dc 2e 29 7c 00", "no 64-bit base address"),  # global_store_short ..., m0
    ("gfx1100", "(llvm-mc-22)", "00 00 52 dc 01 00 7e 05", "no 64-bit base address"),  # global_load_b32 ..., exec
    ("gfx90a", "(llvm-mc-19)", "20 9c 6a dc 2e 29 67 00", "no 64-bit base address"),  # ..., flat_scratch_hi
    ("gfx90a", "(llvm-mc-19)", "f9 e4 8d 08 9a 33 06 83", "sdwa variant of this instruction is not supported"),  # v_fmac_f64
    ("gfx1100", "(llvm-mc-22)", "05 01 1b d5 01 05 02 00", "set on integer or bit operands"),  # v_and_b32_e64 v5, |v1|, v2
    ("gfx1100", "(llvm-mc-22)", "05 80 1b d5 01 05 02 00", "has no clamp"),  # v_and_b32_e64 v5, v1, v2 with the clamp bit
    ("gfx1200", "(llvm-mc-22)", "96 2c 62 f4 10 00 aa 9c", "a buffer op's offset is 23-bit unsigned"),  # s_buffer_load_b64
    ("gfx950", "(llvm-mc-22)", "00 00 99 d1 01 00 00 00", r"src0 \(code 1\) must be a VGPR"),  # v_permlane16_swap_b32_e64 v0, s1
]


@pytest.mark.parametrize("target,source,data,message", DECODE_REJECT, ids=[f"{c[1]}:{c[2]}" for c in DECODE_REJECT])
def test_decoder_rejects_as_llvm(target, source, data, message):
    with pytest.raises(DecodeError, match=message):
        decode_one(bytes.fromhex(data), target)


@pytest.mark.parametrize("target,source,data,expected", DISASSEMBLE, ids=[f"{c[1]}:{c[2]}" for c in DISASSEMBLE])
def test_disassembles_as_llvm(target, source, data, expected):
    assert str(decode_one(bytes.fromhex(data), target)) == expected


@pytest.mark.parametrize("target,line,message", REJECT)
def test_rejects_as_llvm(target, line, message):
    with pytest.raises(AsmError, match=message):
        assemble(line, target)


@pytest.mark.parametrize("target,source,line,expected", ASSEMBLE, ids=[f"{c[1]}:{c[2]}" for c in ASSEMBLE])
def test_assembles_as_llvm(target, source, line, expected):
    assert assemble(line, target).hex(" ") == expected


@pytest.mark.parametrize("text", ["s_nop 08", "s_nop 0x", "s_nop 0b2"])
def test_malformed_numbers_are_assembler_errors(text):
    with pytest.raises(AsmError, match="line 1"):
        assemble(text, "gfx1100")
