"""Agreement with llvm-mc-15 on a corpus covering every opcode: bytes of both assemblers, and our text for LLVM's bytes."""

import re

import pytest
from amd_isa import decode_one
from amd_isa.assembler import assemble_one
from amd_isa.sampling import sample_corpus

# LLVM prints branch offsets unsigned (s_branch 65535); we print them signed (s_branch -1), as the issue asks.
_BRANCH = re.compile(r"^(s_branch|s_cbranch_\w+|(?:s_cbranch_\w+|s_call_b64|s_subvector_loop_\w+) [^,]+,) (\d+)$")


def normalize(text: str) -> str:
    """Whitespace-insensitive text with branch offsets as signed numbers."""
    text = " ".join(text.split())
    # LLVM 15 prints the implicit VCC of 16-bit VOPC DPP forms twice (v_cmp_f_f16 vcc_lo, vcc_lo, v1, v2 row_shl:1 ...).
    text = re.sub(r"^(v_cmpx?_\w+) (vcc_lo|vcc), \2, ", r"\1 \2, ", text)
    if (match := _BRANCH.match(text)) is not None:
        value = int(match.group(2))
        text = f"{match.group(1)} {value - 0x10000 if value >= 0x8000 else value}"
    return text


def agreement(llvm_mc, target: str, variants: int) -> tuple[int, int, int, list[str]]:
    """(accepted by LLVM, byte matches, text matches, examples of disagreements) over the sample corpus."""
    lines = [str(inst) for inst in sample_corpus(target, variants)]
    result = llvm_mc.assemble(lines, target)
    accepted = [(line, entry[1]) for line, entry in zip(lines, result.lines, strict=True) if entry is not None]
    # The text oracle is LLVM's disassembler on LLVM's own bytes (its -show-encoding echo keeps the source spelling).
    llvm_texts = llvm_mc.disassemble([blob for _, blob in accepted], target)
    assert len(llvm_texts) == len(accepted)
    same_bytes = same_text = 0
    misses = []
    for (line, llvm_bytes), llvm_text in zip(accepted, llvm_texts, strict=True):
        ours = assemble_one(target, line).to_bytes()
        same_bytes += ours == llvm_bytes
        if ours != llvm_bytes and len(misses) < 20:
            misses.append(f"bytes: {line} -> ours {ours.hex()} llvm {llvm_bytes.hex()}")
        text = normalize(str(decode_one(llvm_bytes, target)))
        same_text += text == normalize(llvm_text)
        if text != normalize(llvm_text) and len(misses) < 20:
            misses.append(f"text: ours {text!r} llvm {llvm_text!r}")
    return result.accepted, same_bytes, same_text, misses


@pytest.mark.parametrize("target", ["gfx1100", "gfx90a", "gfx940"])
def test_every_opcode_agrees_with_llvm_mc(llvm_mc, target):
    # Five variants per opcode: plain VGPRs, scalar/constant sources, modifiers and literals, DPP16, DPP8 (SDWA on gfx9).
    accepted, same_bytes, same_text, misses = agreement(llvm_mc, target, 5)
    print(f"{target}: llvm accepted {accepted}; bytes agree {same_bytes / accepted:.2%}; text agrees {same_text / accepted:.2%}")
    assert accepted > 5000
    # Known residue: LLVM 15 encodes/prints dlc on gfx11 buffer atomics inconsistently, prints gfx11 MTBUF formats
    # symbolically, and its gfx940 disassembler decodes MFMA with the gfx908 names and AGPR operands.
    assert same_bytes / accepted > 0.99, "\n".join(misses)
    assert same_text / accepted > 0.98, "\n".join(misses)


HAND_WRITTEN = """\
v_add_f64 v[0:1], 0x40490000, v[2:3]
v_add_f64 v[0:1], 0.15915494309189532, v[2:3]
v_add_f32 v0, 0.15915494, v1
v_add_f16 v0, 1.5, v1
v_mov_b32 v0, -5
v_mov_b32 v0, 1234
s_mov_b32 s0, -1234
s_mov_b64 s[0:1], 0xffffffff
s_load_b32 s0, s[0:1], s2 offset:0x10
s_load_b32 s0, s[0:1], -0x10
s_load_b128 s[4:7], s[0:1], 0x0
global_load_b32 v0, v[0:1], off offset:-16
global_store_b32 v0, v1, s[0:1] offset:16 glc slc dlc
global_atomic_add_u32 v0, v[1:2], v2, off glc
scratch_load_b32 v0, off, s0
v_cmp_eq_f32 vcc_lo, v0, v1
v_cmp_eq_f32_e64 s0, v0, v1
v_cmpx_eq_f32 v0, v1
v_cmpx_eq_f32_e64 v0, v1
v_add_co_ci_u32 v0, vcc_lo, v1, v2, vcc_lo
v_add_co_ci_u32_e64 v0, s2, v1, v2, s3
v_cndmask_b32 v0, v1, v2, vcc_lo
v_fmaak_f32 v0, v1, v2, 0x40000000
v_fmamk_f32 v0, v1, 0x40000000, v2
v_add_f32_e64 v0, -v1, |v2| clamp mul:2
v_pk_add_f16 v0, v1, v2 op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[1,0]
v_fma_f16 v0, v1, v2, v3 op_sel:[1,0,1,1]
v_fma_mix_f32 v0, v1, v2, v3 op_sel_hi:[1,1,0]
v_wmma_f16_16x16x16_f16 v[0:7], v[16:23], v[24:31], 0
v_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]
v_dual_mov_b32 v0, v1 :: v_dual_add_f32 v3, v3, v4
v_dual_fmaak_f32 v0, v1, v2, 0x3f800000 :: v_dual_mov_b32 v5, v6
v_mov_b32_dpp v0, v1 quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf
v_mov_b32 v0, v1 dpp8:[7,6,5,4,3,2,1,0]
v_add_f32_e64_dpp v0, v1, v2 row_shl:1 row_mask:0xf bank_mask:0xf
s_waitcnt vmcnt(0) lgkmcnt(0)
s_waitcnt_depctr depctr_va_vdst(0)
s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_1)
s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)
s_getreg_b32 s0, hwreg(HW_REG_MODE)
s_setreg_b32 hwreg(HW_REG_MODE, 0, 4), s0
s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 0x3
ds_load_b32 v0, v1 offset:16
ds_store_2addr_b32 v0, v1, v2 offset0:1 offset1:2
buffer_load_b32 v0, v1, s[0:3], 0 offen offset:16
tbuffer_load_format_x v1, off, s[4:7], s3 format:[BUF_FMT_32_FLOAT] offset:8
ds_swizzle_b32 v1, v2 offset:swizzle(BITMASK_PERM,"ii11p")
image_sample v[0:3], v[0:1], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D
image_sample v[0:3], [v4, v6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D
image_bvh_intersect_ray v[4:7], v[9:16], s[4:7] a16
image_msaa_load v[1:4], v[5:7], s[8:15] dmask:0x1 dim:SQ_RSRC_IMG_2D_MSAA
exp mrt0 v1, off, v2, off row_en
exp pos0 v1, v2, v3, v4 done
s_clause 0x3
s_endpgm
s_nop 0
"""


def test_hand_written_gfx1100_matches_llvm_exactly(llvm_mc):
    lines = HAND_WRITTEN.splitlines()
    result = llvm_mc.assemble(lines, "gfx1100")
    assert all(entry is not None for entry in result.lines)
    blobs = [entry[1] for entry in result.lines if entry is not None]
    for line, llvm_bytes, llvm_text in zip(lines, blobs, llvm_mc.disassemble(blobs, "gfx1100"), strict=True):
        assert assemble_one("gfx1100", line).to_bytes() == llvm_bytes, line
        assert normalize(str(decode_one(llvm_bytes, "gfx1100"))) == normalize(llvm_text), line
