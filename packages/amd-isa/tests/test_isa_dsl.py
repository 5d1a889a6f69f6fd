"""The instruction DSL: builders named by LLVM mnemonics, register files, modifiers and clear errors."""

import pytest
from amd_isa import EncodeError, UnknownArchError, arch_of, decode_one
from amd_isa.cdna import a, v_mfma_f32_32x32x8_f16
from amd_isa.rdna3 import (
    EXEC_LO,
    OFF,
    VCC_LO,
    global_load_b32,
    s,
    s_endpgm,
    s_mov_b32,
    s_waitcnt,
    v,
    v_add_f32_e64,
    v_dual_mov_b32,
    v_mov_b32_e32,
    v_wmma_f16_16x16x16_f16,
)


def test_seed_examples_build_and_print_llvm_syntax():
    assert str(s_mov_b32(s[0], 0x3C003C00)) == "s_mov_b32 s0, 0x3c003c00"
    wmma = v_wmma_f16_16x16x16_f16(v[0:7], v[16:23], v[24:31], 0)
    assert str(wmma) == "v_wmma_f16_16x16x16_f16 v[0:7], v[16:23], v[24:31], 0"
    # LLVM's encoding of the same line (llvm-mc-15 -mcpu=gfx1100 -show-encoding), a fact from the reference assembler.
    assert wmma.to_bytes() == bytes([0x00, 0x40, 0x42, 0xCC, 0x10, 0x31, 0x02, 0x1A])
    assert v_mov_b32_e32(v[0], s[0]).to_bytes() == bytes([0x00, 0x02, 0x00, 0x7E])


def test_slices_are_inclusive_and_checked():
    assert v[0:7].count == 8
    assert s[4:5].index == 4
    with pytest.raises(EncodeError):
        v[250:260]
    with pytest.raises(EncodeError):
        v[3:]


def test_modifiers_and_special_operands():
    inst = v_add_f32_e64(v[0], -v[1], abs(v[2]), clamp=True, mul=2)
    assert str(inst) == "v_add_f32_e64 v0, -v1, |v2| clamp mul:2"
    assert str(global_load_b32(v[1], v[2:3], OFF, offset=-16)) == "global_load_b32 v1, v[2:3], off offset:-16"
    assert str(s_mov_b32(EXEC_LO, VCC_LO)) == "s_mov_b32 exec_lo, vcc_lo"
    assert str(s_waitcnt(0)) == "s_waitcnt vmcnt(0) expcnt(0) lgkmcnt(0)"
    assert str(s_endpgm()) == "s_endpgm"
    pair = v_dual_mov_b32(v[0], v[1], "v_dual_mov_b32", v[3], v[4])
    assert str(pair) == "v_dual_mov_b32 v0, v1 :: v_dual_mov_b32 v3, v4"


def test_cdna_accumulation_registers():
    inst = v_mfma_f32_32x32x8_f16(a[0:15], v[0:1], v[2:3], a[0:15], cbsz=1, abid=1, blgp=1)
    # llvm-mc-15 -mcpu=gfx940 encodes this line as 00 89 cc d3 00 05 02 24.
    assert inst.to_bytes() == bytes.fromhex("0089ccd300050224")
    assert str(decode_one(inst.to_bytes(), "gfx940")) == "v_mfma_f32_32x32x8_f16 a[0:15], v[0:1], v[2:3], a[0:15] cbsz:1 abid:1 blgp:1"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: s_mov_b32(s[0]), "takes 2 operand"),
        (lambda: s_mov_b32(s[0], 1, glc=True), "modifier"),
        (lambda: v_add_f32_e64(v[0], v[1], v[2], mul=3), "output modifier"),
        (lambda: v_dual_mov_b32(v[0], v[1], "v_dual_mov_b32", v[2], v[3]), "parity"),
        (lambda: s_mov_b32(v[0], 1), "scalar register"),
    ],
)
def test_bad_operands_raise_encode_errors(make, message):
    with pytest.raises(EncodeError, match=message):
        make()


def test_arch_names():
    assert arch_of("gfx1100") == "rdna3"
    assert arch_of("gfx1201") == "rdna4"
    assert arch_of("gfx90a") == arch_of("gfx942") == arch_of("gfx950") == "cdna"
    with pytest.raises(UnknownArchError):
        arch_of("gfx9999")
