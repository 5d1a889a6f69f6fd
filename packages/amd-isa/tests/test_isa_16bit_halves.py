"""RDNA3 and RDNA4 16-bit operands of VOP1/VOP2/VOPC encodings are register halves (v0-v127, `.h` for the high half):
what the assembler emits for `v3.h` and for v128 and up must compute, in the emulator, what numpy says those operands mean."""

import numpy as np
import pytest
from amd_isa import assemble_insts, decode_one, rdna3, rdna4
from amd_isa.assembler import assemble_one
from amd_isa.emu import WaveState, run_program

LANES = 32


def _halves(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-512, 512, (2, LANES)).astype(np.float16) / np.float16(8))  # type: ignore[return-value]


def _pack(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.view(np.uint16).astype(np.uint32) | hi.view(np.uint16).astype(np.uint32) << 16


def _run(arch: str, asm: str, regs: dict[int, np.ndarray]) -> WaveState:
    state = WaveState(LANES, arch)
    for reg, value in regs.items():
        state.v[reg] = value
    return run_program(assemble_insts(asm, arch), LANES, arch, state=state)


def _lo(word: np.ndarray) -> np.ndarray:
    return (word & 0xFFFF).astype(np.uint16).view(np.float16)


def _hi(word: np.ndarray) -> np.ndarray:
    return (word >> 16).astype(np.uint16).view(np.float16)


ARCHS = pytest.mark.parametrize("arch", ["rdna3", "rdna4"])


@ARCHS
def test_high_halves_of_short_forms_compute_on_the_high_halves(arch):
    a_lo, a_hi = _halves(1)
    b_lo, b_hi = _halves(2)
    old = np.full(LANES, 0x12345678, np.uint32)
    st = _run(arch, "v_add_f16 v1.h, v2.l, v3.h\nv_mul_f16 v4, v2.h, v3\nv_sqrt_f16 v5.h, v5.h",
              {1: old, 2: _pack(a_lo, a_hi), 3: _pack(b_lo, b_hi), 4: old, 5: _pack(a_lo, np.abs(b_hi))})
    np.testing.assert_array_equal(_hi(st.v[1]), a_lo + b_hi)
    np.testing.assert_array_equal(st.v[1] & 0xFFFF, old & 0xFFFF)  # the low half is kept
    np.testing.assert_array_equal(_lo(st.v[4]), a_hi * b_lo)
    np.testing.assert_allclose(_hi(st.v[5]).astype(np.float32), np.sqrt(np.abs(b_hi).astype(np.float32)), rtol=1e-3)


@ARCHS
def test_v128_and_up_take_the_vop3_encoding_and_whole_registers(arch):
    a_lo, a_hi = _halves(3)
    b_lo, b_hi = _halves(4)
    inst = assemble_one(arch, "v_add_f16 v200, v2, v130")
    assert inst.fmt == "VOP3"
    st = _run(arch, "v_add_f16 v200, v2, v130\nv_cmp_lt_f16 vcc_lo, v130, v2 row_mirror",
              {2: _pack(a_lo, a_hi), 130: _pack(b_lo, b_hi)})
    np.testing.assert_array_equal(_lo(st.v[200]), a_lo + b_lo)
    mirrored = b_lo.reshape(-1, 16)[:, ::-1].reshape(-1)  # row_mirror reads src0 from lane 15 - i of each row
    want = sum(1 << lane for lane in range(LANES) if mirrored[lane] < a_lo[lane])
    assert int(st.s[106]) == want


@pytest.mark.parametrize(("module", "target"), [(rdna3, "gfx1100"), (rdna4, "gfx1201")])
def test_halves_print_build_and_repr_alike(module, target):
    inst = module.v_add_f16_e32(module.v[1].h, module.v[2], module.v[3].h)
    assert str(inst) == "v_add_f16_e32 v1.h, v2, v3.h"
    assert inst.to_bytes() == assemble_one(target, "v_add_f16 v1.h, v2.l, v3.h").to_bytes()
    assert str(decode_one(inst.to_bytes(), target)) == str(inst)
    assert repr(inst) == "v_add_f16_e32(v[1].h, v[2], v[3].h)"
