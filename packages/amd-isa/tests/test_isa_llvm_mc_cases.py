"""One case per class of difference `benchmarks/llvm_mc_conformance.py` found between amd_isa and LLVM's own MC tests
(llvm/test/MC/AMDGPU, LLVM 21.1.8): the input line and the encoding LLVM's CHECK line gives for it, named by file."""

import pytest
from amd_isa import AsmError, assemble

# (target, LLVM test file, input line, LLVM's encoding)
ASSEMBLE = [
    # integers with a leading zero are octal to LLVM's lexer (was: a ValueError from int('03', 0))
    ("gfx1200", "gfx12_asm_smem.s", "s_load_b32 s5, s[4:5], s0 offset:0x0 scope:03", "42 01 60 f4 00 00 00 00"),
]


@pytest.mark.parametrize("target,source,line,expected", ASSEMBLE, ids=[f"{c[1]}:{c[2]}" for c in ASSEMBLE])
def test_assembles_as_llvm(target, source, line, expected):
    assert assemble(line, target).hex(" ") == expected


@pytest.mark.parametrize("text", ["s_nop 08", "s_nop 0x", "s_nop 0b2"])
def test_malformed_numbers_are_assembler_errors(text):
    with pytest.raises(AsmError, match="line 1"):
        assemble(text, "gfx1100")
