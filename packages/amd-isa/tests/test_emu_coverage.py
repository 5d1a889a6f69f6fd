"""Every RDNA3 ALU opcode of the tables either runs on random register contents without a Python-level failure, or is
one of the few the emulator reports as unsupported (so a broken semantic function, or an op silently dropped from the
tables, fails here). Values are checked by the per-instruction reference tests in the other test_emu files."""

import numpy as np
import pytest
from amd_isa.arch import get_arch
from amd_isa.emu import WaveState, run_program
from amd_isa.emu.errors import UnsupportedInstructionError
from amd_isa.inst import Inst

ARCH = get_arch("rdna3")
FORMATS = ("SOP1", "SOP2", "SOPC", "SOPK", "VOP1", "VOP2", "VOP3", "VOP3SD", "VOPC", "VOP3P")
# Control flow is exercised by the scalar tests; these need targets or other setup.
SKIP = ("s_setpc", "s_swappc", "s_rfe", "s_call", "s_getpc", "s_subvector_loop")
EXPECTED_UNSUPPORTED = {
    "v_swap_b16_e32", "v_swaprel_b32_e32", "v_cubeid_f32", "v_cubesc_f32", "v_cubetc_f32", "v_cubema_f32", "v_mullit_f32",
    "v_qsad_pk_u16_u8", "v_mqsad_pk_u16_u8", "v_mqsad_u32_u8", "v_trig_preop_f64",
}
SCALAR_TYPES = ("SREG", "SSRC", "SSRC_LANESEL", "SSRC_NOLIT")


def _instruction(fmt: str, opcode: int) -> Inst:
    info = {entry[0]: entry for entry in ARCH.ops[fmt][opcode][1]}
    fields: dict[str, int] = {}
    for name in ARCH.formats[fmt]["fields"]:
        if name == "op":
            continue
        if name in ("src0", "src1", "src2"):
            scalar = name in info and info[name][2] in SCALAR_TYPES
            fields[name] = {"src0": 1, "src1": 2, "src2": 4}[name] + (0 if scalar else 256)
        else:
            fields[name] = {"ssrc0": 1, "ssrc1": 2, "vsrc1": 2, "vdst": 20, "sdst": 30, "simm16": 5, "opsel_hi": 3, "opsel_hi2": 1}.get(name, 0)
    return Inst(ARCH, fmt, opcode, fields, None)


CASES = [(fmt, opcode, name) for fmt in FORMATS for opcode, (name, _) in ARCH.ops[fmt].items()
         if not name.startswith(SKIP) and "wmma" not in name]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_alu_opcode_runs_or_is_reported_unsupported(fmt: str) -> None:
    rng = np.random.default_rng(0)
    unsupported = set()
    for case_fmt, opcode, name in CASES:
        if case_fmt != fmt:
            continue
        state = WaveState(32)
        state.v[:] = rng.integers(0, 2**32, state.v.shape, dtype=np.uint64).astype(np.uint32)
        for reg in range(100):
            state.s[reg] = int(rng.integers(0, 2**32))
        try:
            run_program([_instruction(fmt, opcode)], state=state)
        except UnsupportedInstructionError as err:
            assert name.removesuffix("_e32").removesuffix("_e64") in str(err), "the error names the instruction"
            unsupported.add(name)
    assert unsupported <= EXPECTED_UNSUPPORTED, f"newly unsupported: {sorted(unsupported - EXPECTED_UNSUPPORTED)}"
