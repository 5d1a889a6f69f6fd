"""The LLVM MC-test runner (`benchmarks/llvm_mc_conformance.py`): how it reads RUN lines and CHECK placement, on small
files written here; and, where the corpus has been fetched, that no line of it crashes our assembler or disassembler."""

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "llvm_mc_conformance.py"
_spec = importlib.util.spec_from_file_location("llvm_mc_conformance", _PATH)
mc = importlib.util.module_from_spec(_spec)
sys.modules["llvm_mc_conformance"] = mc
_spec.loader.exec_module(mc)

ASM_AFTER = """\
// RUN: llvm-mc -triple=amdgcn -mcpu=gfx1100 -mattr=+wavefrontsize32 -show-encoding %s | FileCheck --check-prefixes=GFX11,W32 %s
// RUN: llvm-mc -triple=amdgcn -mcpu=gfx1100 -mattr=+wavefrontsize64 -show-encoding %s | FileCheck --check-prefixes=GFX11,W64 %s
// RUN: not llvm-mc -triple=amdgcn -mcpu=gfx1100 -mattr=+wavefrontsize32 -filetype=null %s 2>&1 | FileCheck --check-prefix=W32-ERR %s

v_add_f32 v1, v2, v3
// GFX11: v_add_f32_e32 v1, v2, v3 ; encoding: [0x02,0x07,0x02,0x06]

v_cmp_eq_f32 vcc, v1, v2
// W64: v_cmp_eq_f32_e32 vcc, v1, v2 ; encoding: [0x01,0x05,0x24,0x7c]
// W32-ERR: :[[@LINE-2]]:1: error: invalid operand for instruction
"""

DASM_BEFORE = """\
# RUN: llvm-mc -triple=amdgcn -mcpu=gfx90a -disassemble -show-encoding < %s | FileCheck -check-prefix=GFX90A %s

# GFX90A: v_add_f32_e32 v1, v2, v3 ; encoding: [0x02,0x07,0x02,0x02]
0x02,0x07,0x02,0x02

# GFX90A: s_nop 0
0x00,0x00,0x80,0xbf
"""


def test_run_lines_make_configurations():
    configs = mc.parse_configs(ASM_AFTER)
    w32 = configs[("gfx1100", frozenset())]  # +wavefrontsize32 restates RDNA's default
    assert w32.output_prefixes == ["GFX11", "W32"] and w32.error_prefixes == ["W32-ERR"] and w32.modelled
    w64 = configs[("gfx1100", frozenset({"+wavefrontsize64"}))]
    assert not w64.modelled


def test_checks_after_their_line_and_line_references():
    configs = mc.parse_configs(ASM_AFTER)
    prefixes = {p for c in configs.values() for p in c.output_prefixes + c.error_prefixes}
    add, cmp = mc.parse_cases(ASM_AFTER, prefixes, disassembler=False)
    assert add.text == "v_add_f32 v1, v2, v3" and list(add.checks) == ["GFX11"]
    assert set(cmp.checks) == {"W64", "W32-ERR"}
    w32 = configs[("gfx1100", frozenset())]
    assert mc.check_asm(add, w32).kind == "agree"
    # LLVM rejects the wave64 spelling in wave32: our answer is whatever it is, but the expectation is a rejection
    assert mc.check_asm(cmp, w32).expected == "error"


def test_checks_before_their_line():
    configs = mc.parse_configs(DASM_BEFORE)
    config = configs[("gfx90a", frozenset())]
    assert config.disassemble
    add, nop = mc.parse_cases(DASM_BEFORE, set(config.output_prefixes), disassembler=True)
    assert add.checks["GFX90A"][0].startswith("v_add_f32_e32") and nop.checks["GFX90A"] == ["s_nop 0"]
    assert mc.check_disasm(add, config).kind == "agree" and mc.check_disasm(nop, config).kind == "agree"


DASM_BRACKETED = """\
# RUN: not llvm-mc -disassemble -triple=amdgcn -mcpu=gfx1200 -show-encoding %s | FileCheck --check-prefix=GFX12 %s
# RUN: not llvm-mc -disassemble -triple=amdgcn -mcpu=gfx1200 -show-encoding %s 2>&1 | FileCheck --check-prefix=GFX12-ERR %s

[0x08,0x40,0x40,0xcc,0x00,0x09,0x22,0x1c]
# GFX12: v_wmma_f32_16x16x16_f16 v[8:15], v[0:3], v[4:7], v[8:15] ; encoding: [0x08,0x40,0x40,0xcc,0x00,0x09,0x22,0x1c]

[0x08,0x48,0x40,0xcc,0x00,0x09,0x22,0x1c] # op_sel:[1,0,0]
# GFX12-ERR: warning: invalid instruction encoding

[0x08,0x40,0x40,0xcc,0x00,0x08,0x22,0x1c]
# GFX12: v_wmma_f32_16x16x16_f16 v[8:15], s[0:3]/*Invalid register, operand has 'VReg_128' register class*/, v[4:7], v[8:15]
"""


def test_bracketed_disassembler_inputs_and_invalid_operands():
    # newer files write the input bytes in brackets (these were skipped: gfx12_dasm_wmma_w32.txt counted 0 lines); a
    # word LLVM prints with an operand marked invalid is one LLVM rejects
    config = mc.parse_configs(DASM_BRACKETED)[("gfx1200", frozenset())]
    valid, bad_bits, bad_operand = mc.parse_cases(DASM_BRACKETED, set(config.output_prefixes + config.error_prefixes), disassembler=True)
    assert valid.text == "0x08,0x40,0x40,0xcc,0x00,0x09,0x22,0x1c"
    assert mc.check_disasm(valid, config).kind == "agree"
    for case in (bad_bits, bad_operand):
        outcome = mc.check_disasm(case, config)
        assert outcome.llvm_rejects and outcome.kind == "agree", outcome


def test_fetch_failure_is_one_error_line(tmp_path, capsys):
    assert mc.main(["run", "--cache", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no LLVM MC tests under") and err.count("\n") == 1


def _corpus():
    try:
        return mc.corpus_dir(mc.DEFAULT_CACHE)
    except mc.ConformanceError:
        return None


@pytest.mark.skipif(_corpus() is None, reason="LLVM MC tests not fetched (benchmarks/llvm_mc_conformance.py fetch)")
def test_no_corpus_line_crashes():
    crashes = [(r.path, o.line, o.got) for path in mc.select_files(_corpus(), []) for r in mc.run_file(path) for o in r.outcomes if o.kind == "crash"]
    assert crashes == []
