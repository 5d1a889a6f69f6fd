"""gfx950 (CDNA4), which LLVM 15 does not know: encodings checked by hand against public LLVM MC test expectations.

Each expected byte string is copied from llvm/test/MC/AMDGPU/gfx950_*.s (llvm-project).
"""

import pytest
from amd_isa import assemble_one, decode_one

GFX950_FACTS = [
    ("ds_read_b64_tr_b4 v[0:1], v1", "0000c0d901000000"),
    ("ds_read_b64_tr_b4 v[2:3], v3 offset:64", "4000c0d903000002"),
    ("ds_read_b64_tr_b8 v[0:1], v1", "0000c4d901000000"),
    ("v_mfma_f32_16x16x32_f16 v[0:3], v[0:3], v[0:3], v[0:3]", "0000d4d300010204"),
    ("global_load_lds_dwordx3 v[2:3], off", "0080f8dd02007f00"),
    ("global_load_lds_dwordx3 v[2:3], off sc0 nt sc1", "0080fbdf02007f00"),
    ("v_cvt_pk_bf16_f32 v5, v1, v2", "050068d201050200"),
    ("v_cvt_pk_bf16_f32 v5, v255, v255", "050068d2ffff0300"),
    ("v_prng_b32_e32 v5, v1", "01b10a7e"),
    ("v_prng_b32_e32 v5, s101", "65b00a7e"),
]


@pytest.mark.parametrize("text, expected", GFX950_FACTS)
def test_gfx950_encoding_matches_llvm_test_expectation(text, expected):
    assert assemble_one("gfx950", text).to_bytes().hex() == expected
    assert str(decode_one(bytes.fromhex(expected), "gfx950")) == text
