"""Bad input: random or truncated bytes decode to instructions or a DecodeError; bad assembly names its line."""

import pytest
from amd_isa import AsmError, DecodeError, assemble, decode, decode_one
from amd_isa.rdna3 import s, s_mov_b32, v, v_add_f32_e32
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.mark.parametrize("arch", ["rdna3", "rdna4", "cdna"])
@settings(max_examples=300, derandomize=True, deadline=None)
@given(data=st.binary(min_size=0, max_size=64))
def test_random_bytes_decode_or_raise_decode_error(arch, data):
    try:
        insts = decode(data, arch)
    except DecodeError:
        return
    assert sum(inst.size() for inst in insts) == len(data)
    for inst in insts:
        str(inst)
        repr(inst)


def test_truncated_literal_is_a_decode_error():
    blob = s_mov_b32(s[0], 0x12345678).to_bytes()
    assert len(blob) == 8
    with pytest.raises(DecodeError, match="literal"):
        decode_one(blob[:4], "rdna3")
    with pytest.raises(DecodeError, match="truncated"):
        decode(blob[:6], "rdna3")
    assert decode_one(v_add_f32_e32(v[0], 1.0, v[1]).to_bytes(), "gfx1100").size() == 4


@pytest.mark.parametrize(
    "source, where",
    [
        ("s_mov_b32 s0, 1\nv_bogus v0, v1\n", "line 2"),
        ("s_mov_b32 s0\n", "line 1"),
        ("s_nop 0\ns_branch nowhere\n", "line 2: undefined label"),
        ("v_add_f32 v0, v1, v2 glc\n", "line 1"),
        ("s_mov_b32 s0, s[1:\n", "line 1"),
    ],
)
def test_bad_assembly_names_the_line(source, where):
    with pytest.raises(AsmError, match=where):
        assemble(source, "gfx1100")


def test_labels_and_branches():
    code = assemble("start:\n  s_nop 0\nloop: s_sub_u32 s0, s0, 1\n  s_cbranch_scc1 loop\n  s_branch start\n  s_endpgm\n", "gfx1100")
    insts = decode(code, "gfx1100")
    assert [i.simm16 for i in insts if i.mnemonic.startswith(("s_branch", "s_cbranch"))] == [-2, -4]
