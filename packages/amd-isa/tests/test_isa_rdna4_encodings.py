"""RDNA4 (gfx12), which LLVM 15 does not know: encodings checked by hand against public LLVM MC test expectations.

Each expected byte string is copied from llvm/test/MC/AMDGPU/gfx12_asm_*.s (llvm-project).
"""

import pytest
from amd_isa import assemble_one, decode_one

GFX12_FACTS = [
    ("s_cvt_f32_i32 s5, 0xaf123456", "ff6485be563412af"),
    ("s_cvt_f32_u32 s5, m0", "7d6585be"),
    ("s_ceil_f32 s5, ttmp11", "776085be"),
    ("s_trunc_f32 s5, -4.0", "f76285be"),
    ("s_cvt_f32_i32 s105, s1", "0164e9be"),
    ("s_floor_f16 s5, 0xfe0b", "ff6c85be0bfe0000"),
    ("s_rndne_f32 s5, 0.5", "f06385be"),
    ("flat_atomic_add_u32 v[0:1], v2 offset:64", "7c400dec0000000100400000"),
    ("flat_atomic_add_u32 v1, v[0:1], v2 offset:-64 th:TH_ATOMIC_RETURN", "7c400dec0100100100c0ffff"),
    ("flat_atomic_add_u32 v[3:4], v5", "7c400dec0000800203000000"),
    ("flat_atomic_cmpswap_b64 v[1:2], v[3:4], v[5:8] offset:2047 th:TH_ATOMIC_RETURN", "7c8010ec0100900203ff0700"),
    ("flat_atomic_add_f32 v1, v[0:1], v2 offset:-8000000 th:TH_ATOMIC_RETURN", "7c8015ec010010010000ee85"),
    ("flat_atomic_max_i64 v[0:1], v[2:3] offset:-64", "7cc011ec0000000100c0ffff"),
    ("tbuffer_load_d16_format_x v255, off, s[8:11], s3 offset:8388607", "030022c4ff10800000ffff7f"),
    ("tbuffer_load_d16_format_x v4, off, s[12:15], m0 format:[BUF_FMT_8_SNORM] offset:8388607", "7d0022c40418000100ffff7f"),
    ("tbuffer_load_d16_format_x v4, off, s[8:11], s61 format:[BUF_FMT_8_USCALED] offset:8388607", "3d0022c40410800100ffff7f"),
    ("tbuffer_load_d16_format_x v4, v1, s[8:11], s3 format:[BUF_FMT_8_USCALED] offen offset:52", "030022c4041080410134000" + "0"),
    ("buffer_load_d16_format_x v5, off, s[8:11], s3 offset:8388607 th:TH_LOAD_NT_HT scope:SCOPE_DEV", "030002c40510e80000ffff7f"),
    ("buffer_load_d16_format_x v5, off, s[8:11], s3 offset:8388607 th:TH_LOAD_BYPASS scope:SCOPE_SYS", "030002c40510bc0000ffff7f"),
    ("image_gather4 v[64:67], [v32, v33], s[4:11], s[4:7] dmask:0x1 dim:SQ_RSRC_IMG_2D", "01c04be44008000220210000"),
    ("image_gather4 v[64:67], v32, s[4:11], s[4:7] dmask:0x1 dim:SQ_RSRC_IMG_2D a16", "41c04be44008000220000000"),
    ("image_gather4 v[0:3], [v4, v5], s[0:7], s[100:103] dmask:0x8 dim:SQ_RSRC_IMG_2D unorm", "01e00be60000003204050000"),
    ("image_gather4 v[12:15], [v16, v17], s[16:23], s[92:95] dmask:0x2 dim:SQ_RSRC_IMG_2D scope:SCOPE_SE", "01c08be40c20042e10110000"),
    ("image_gather4 v[18:21], [v22, v23], s[24:31], s[88:91] dmask:0x4 dim:SQ_RSRC_IMG_2D th:TH_LOAD_NT_HT", "01c00be51230602c16170000"),
    ("image_gather4 v[18:21], [v22, v23], s[24:31], s[88:91] dmask:0x4 dim:SQ_RSRC_IMG_2D th:TH_LOAD_LU", "01c00be51230302c16170000"),
    ("image_gather4 v[28:29], [v33, v34], s[40:47], s[80:83] dmask:0x1 dim:SQ_RSRC_IMG_2D d16", "21c04be41c50002821220000"),
    ("image_gather4_b_cl v[64:67], [v32, v33, v34, v[35:36]], s[4:11], s[4:7] dmask:0x2 dim:SQ_RSRC_IMG_CUBE",
     "034098e44008000220212223"),
]


@pytest.mark.parametrize("text, expected", GFX12_FACTS)
def test_gfx12_encoding_matches_llvm_test_expectation(text, expected):
    inst = assemble_one("gfx1200", text)
    assert inst.to_bytes().hex() == expected
    assert str(decode_one(bytes.fromhex(expected), "gfx1200")) == text
