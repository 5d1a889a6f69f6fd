"""Round trips over random machine words (issue #29 item 4): every word the disassembler decodes prints text our
assembler takes, and that text is a fixed point (print -> assemble -> print gives it back; assemble again gives the same
bytes). Only a non-canonical word may come back as other bytes or other text, and then the first trip reaches the fixed
point: bits the instruction ignores (an unused operand field, the high half of a 16-bit literal) that no printed form
carries, or a literal dword holding an inline constant (printed 0x0, assembled as the inline 0), as in LLVM.
`benchmarks/isa_roundtrip_fuzz.py` runs the same check over many more words and reports each kind of failure."""

import pytest
from amd_isa import PRINTED_BUT_REFUSED, AmdIsaError, AsmError, assemble, decode_one
from hypothesis import given, settings
from hypothesis import strategies as st

TARGETS = ["gfx1100", "gfx1200", "gfx90a", "gfx942", "gfx950"]
# Text LLVM prints for some words but rejects when assembling, and so do we (amd_isa.inst.PRINTED_BUT_REFUSED):
# reserved export targets (printed invalid_target_N), MFMAs whose accumulator input partly overlaps a result wider than
# 128 bits (LLVM's own disassembler tests print 256 such words), interpolation attributes past attr32 (18 there).
# Words LLVM prints with SGPR ranges past the register file, gfx11 FLAT offsets of 4096 and up, an operand of the wrong
# register class or sources breaking the constant bus no longer decode.
LLVM_REJECTS_TOO = PRINTED_BUT_REFUSED


@pytest.mark.parametrize("target", TARGETS)
@settings(max_examples=400, derandomize=True, deadline=None)
@given(word=st.binary(min_size=16, max_size=16))
def test_decoded_words_print_text_that_is_a_fixed_point(target, word):
    try:
        inst = decode_one(word, target)
    except AmdIsaError:
        return  # not an instruction of this target
    text = str(inst)
    try:
        code = assemble(text, target)
    except AsmError as e:
        assert any(reason in str(e) for reason in LLVM_REJECTS_TOO), f"{word.hex(' ')}: {text!r} does not assemble: {e}"
        return
    again = decode_one(code, target)
    if code == inst.to_bytes():
        assert str(again) == text, f"{word.hex(' ')}: {text!r} -> {str(again)!r}"
    fixed = str(again)  # after one trip a non-canonical word's text is canonical
    assert assemble(fixed, target) == code, f"{word.hex(' ')}: {fixed!r} is not a fixed point"
    assert str(decode_one(assemble(fixed, target), target)) == fixed
