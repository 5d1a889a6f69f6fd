"""Bad input: random or truncated bytes decode to instructions or a DecodeError; bad assembly names its line."""

from functools import cache

import pytest
from amd_isa import AsmError, DecodeError, assemble, decode, decode_one, iter_decode, sample_corpus
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


@cache
def corpus_bytes(arch: str) -> list[bytes]:
    """Valid encodings of every opcode of the family `arch` belongs to (one variant each)."""
    family = {"gfx90a": "cdna", "gfx1151": "rdna3"}.get(arch, arch)
    return [inst.to_bytes() for inst in sample_corpus(family, 2, 0)]


def check_decodes_or_raises(data: bytes, arch: str) -> None:
    """Either a DecodeError or instructions that cover every byte, print, repr and re-encode to their size."""
    try:
        insts = decode(data, arch)
    except DecodeError:
        return
    assert sum(inst.size() for inst in insts) == len(data)
    assert all(len(inst.to_bytes()) == inst.size() for inst in insts)
    for inst in insts:
        str(inst)
        repr(inst)


# Random bytes rarely form a plausible encoding; flipping bits of valid ones reaches every format's deeper fields
# (operand kinds, literals, DPP/SDWA words, register ranges running past the file) and truncation cuts them short.
@pytest.mark.parametrize("arch", ["rdna3", "rdna4", "cdna", "gfx90a", "gfx1151"])
@settings(max_examples=400, derandomize=True, deadline=None)
@given(data=st.data())
def test_mutated_encodings_decode_or_raise_decode_error(arch, data):
    blob = bytearray(data.draw(st.sampled_from(corpus_bytes(arch))))
    for bit in data.draw(st.lists(st.integers(0, len(blob) * 8 - 1), min_size=1, max_size=4)):
        blob[bit // 8] ^= 1 << bit % 8
    cut = data.draw(st.integers(0, len(blob)))
    check_decodes_or_raises(bytes(blob[:cut]), arch)
    check_decodes_or_raises(bytes(blob), arch)


@pytest.mark.parametrize("arch", ["rdna3", "rdna4", "cdna"])
@settings(max_examples=100, derandomize=True, deadline=None)
@given(data=st.binary(min_size=0, max_size=40), offset=st.integers(0, 44))
def test_decode_one_and_iter_decode_at_any_offset(arch, data, offset):
    try:
        inst = decode_one(data, arch, offset)
        assert offset + inst.size() <= len(data)
    except DecodeError:
        pass
    try:
        assert sum(inst.size() for inst in iter_decode(data, arch)) == len(data)
    except DecodeError:
        pass


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
        # the assembler parses every line before it builds any: the first bad line is still the one named
        ("s_mov_b32 s0, v[0:1]\ns_mov_b32 s0, s[1:\n", "line 1"),
        ("s_mov_b32 s0, 1\ns_mov_b32 s0, s[1:\nv_bogus v0\n", "line 2"),
        # a label is known to be missing only once every line is read: a bad line after it is named first
        ("x:\ns_branch x\ns_branch y\ns_mov_b32 s0, v[0:1]\n", "line 4"),
        ("x:\ns_branch x\ns_branch y\ns_mov_b32 s0, s1\n", "line 3: undefined label"),
    ],
)
def test_bad_assembly_names_the_line(source, where):
    with pytest.raises(AsmError, match=where):
        assemble(source, "gfx1100")


def test_labels_and_branches():
    code = assemble("start:\n  s_nop 0\nloop: s_sub_u32 s0, s0, 1\n  s_cbranch_scc1 loop\n  s_branch start\n  s_endpgm\n", "gfx1100")
    insts = decode(code, "gfx1100")
    assert [i.simm16 for i in insts if i.mnemonic.startswith(("s_branch", "s_cbranch"))] == [-2, -4]


def test_branch_offsets_count_literals_and_trailing_labels():
    # offsets in dwords from the next instruction, as llvm-mc-15 encodes them (BFA00003, BFA0FFFA): s_mov_b32 with a
    # literal takes two dwords, a VOP3 two; `end:` stands after the last instruction
    code = assemble("top: s_mov_b32 s0, 0x12345678\n s_branch end\n v_add_f32_e64 v0, v1, v2\n s_branch top\nend:\n", "gfx1100")
    insts = decode(code, "gfx1100")
    assert [i.simm16 for i in insts if i.mnemonic == "s_branch"] == [3, -6]
