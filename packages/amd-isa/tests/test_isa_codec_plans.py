"""The decoder and printer work from plans derived once per table and opcode: a plan made while decoding for one
target must not leak into another target sharing the family's tables (availability, register and cache-bit
spellings), whichever decodes first."""

import pytest
from amd_isa import DecodeError, assemble, decode_one


@pytest.mark.parametrize("order", [("gfx950", "gfx942"), ("gfx942", "gfx950")])
def test_availability_stays_per_target_whichever_target_decodes_first(order):
    word = assemble("v_prng_b32 v1, v2", "gfx950")  # gfx950 only: gfx942's decoder refuses it, as LLVM's does
    for target in order:
        if target == "gfx950":
            assert str(decode_one(word, target)) == "v_prng_b32_e32 v1, v2"
        else:
            with pytest.raises(DecodeError, match="not an instruction of gfx942"):
                decode_one(word, target)


@pytest.mark.parametrize("order", [("gfx90a", "gfx942"), ("gfx942", "gfx90a")])
def test_spellings_stay_per_target_whichever_target_prints_first(order):
    # gfx90a names gfx940's sc0/sc1/nt cache bits glc/scc/slc and has its own tables
    texts = {"gfx942": "global_load_dword v1, v[2:3], off sc0 nt", "gfx90a": "global_load_dword v1, v[2:3], off glc slc"}
    words = {target: assemble(text, target) for target, text in texts.items()}
    assert words["gfx942"] == words["gfx90a"]
    for target in order:
        assert str(decode_one(words[target], target)) == texts[target]


def test_a_decoded_instruction_prints_the_same_twice():
    # the second print reads the plan and the shared register objects the first one made
    word = assemble("v_add_f32_e64 v1, -v2, |s3| clamp mul:2", "gfx1100")
    inst = decode_one(word, "gfx1100")
    assert str(inst) == str(decode_one(word, "gfx1100")) == "v_add_f32_e64 v1, -v2, |s3| clamp mul:2"
