"""Every ALU opcode of the RDNA3, RDNA4 and CDNA tables either runs on random register contents without a Python-level
failure, or is one of the few the emulator reports as unsupported (so a broken semantic function, or an op silently
dropped from the tables, fails here). Values are checked by the per-instruction reference tests in the other test_emu
files."""

import numpy as np
import pytest
from amd_isa import sample_corpus
from amd_isa.arch import get_arch
from amd_isa.emu import EmulatorError, Memory, WaveState, run_program
from amd_isa.emu.errors import UnsupportedInstructionError
from amd_isa.inst import Inst

FORMATS = ("SOP1", "SOP2", "SOPC", "SOPK", "VOP1", "VOP2", "VOP3", "VOP3SD", "VOPC", "VOP3P")
# Control flow is exercised by the scalar tests; these need targets or other setup.
SKIP = ("s_setpc", "s_swappc", "s_rfe", "s_call", "s_getpc", "s_subvector_loop")
# Opcodes (by name prefix, per architecture) the emulator reports as unsupported; see the README's list.
RARE = ("v_mullit_f32", "v_qsad_pk_u16_u8", "v_mqsad_")
EXPECTED_UNSUPPORTED = {
    "rdna3": RARE,
    "rdna4": (*RARE, "s_barrier_signal_isfirst", "s_get_barrier_state"),
    "cdna": (*RARE, "s_cbranch_g_fork", "s_cbranch_i_fork", "s_cbranch_join", "s_set_gpr_idx_", "s_setvskip",
             "v_cvt_scalef32_sr_", "v_cvt_sr_f16_f32", "v_cvt_sr_bf16_f32", "v_mfma_ld_scale_b32", "v_screen_partition_4se_b32"),
}
SCALAR_TYPES = ("SREG", "SSRC", "SSRC_LANESEL", "SSRC_NOLIT")


def _instruction(arch, fmt: str, opcode: int) -> Inst:
    info = {entry[0]: entry for entry in arch.ops[fmt][opcode][1]}
    fields: dict[str, int] = {}
    for name in arch.formats[fmt]["fields"]:
        if name == "op":
            continue
        if name in ("src0", "src1", "src2"):
            scalar = name in info and info[name][2] in SCALAR_TYPES
            fields[name] = {"src0": 1, "src1": 2, "src2": 4}[name] + (0 if scalar else 256)
        else:
            fields[name] = {"ssrc0": 1, "ssrc1": 2, "vsrc1": 2, "vdst": 20, "sdst": 30, "simm16": 5, "opsel_hi": 3, "opsel_hi2": 1}.get(name, 0)
    return Inst(arch, fmt, opcode, fields, None)


@pytest.mark.parametrize("arch_name", ["rdna3", "rdna4", "cdna"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_alu_opcode_runs_or_is_reported_unsupported(arch_name: str, fmt: str) -> None:
    arch = get_arch(arch_name)
    if fmt not in arch.ops:
        pytest.skip(f"{arch_name} has no {fmt} encoding")
    n_lanes = arch.wave
    rng = np.random.default_rng(0)
    unsupported = set()
    for opcode, (name, _) in arch.ops[fmt].items():
        if name.startswith(SKIP) or "wmma" in name:
            continue
        state = WaveState(n_lanes, arch_name)
        state.v[:] = rng.integers(0, 2**32, state.v.shape, dtype=np.uint64).astype(np.uint32)
        for reg in range(100):
            state.s[reg] = int(rng.integers(0, 2**32))
        try:
            run_program([_instruction(arch, fmt, opcode)], n_lanes, arch_name, state=state)
        except UnsupportedInstructionError as err:
            assert name.removesuffix("_e32").removesuffix("_e64") in str(err), "the error names the instruction"
            unsupported.add(name)
    unexpected = {name for name in unsupported if not name.startswith(EXPECTED_UNSUPPORTED[arch_name])}
    assert not unexpected, f"newly unsupported: {sorted(unexpected)}"


MEMORY_FORMATS = ("DS", "FLAT", "GLOBAL", "SCRATCH", "VFLAT", "VGLOBAL", "VSCRATCH", "MUBUF", "MTBUF", "VBUFFER", "SMEM", "MIMG", "VIMAGE")
# Memory opcodes the emulator reports as unsupported (graphics, GWS/GDS and the rare forms the README lists).
MEMORY_UNSUPPORTED = ("ds_gws_", "ds_ordered_count", "ds_add_gs_reg", "ds_sub_gs_reg", "ds_bvh_", "ds_wrap_", "ds_read_b64_tr",
                      "ds_read_b96_tr", "global_load_lds_addtid", "global_load_tr", "global_load_block",
                      "global_store_block", "scratch_load_block", "scratch_store_block", "global_atomic_ordered_add", "buffer_load_lds_format",
                      "s_scratch_", "image_sample", "image_gather", "image_get_lod", "image_msaa", "image_atomic", "image_bvh", "image_load_pck",
                      "image_store_pck", "image_load_mip_pck", "image_store_mip_pck")


@pytest.mark.parametrize("arch_name", ["rdna3", "rdna4", "cdna"])
def test_every_memory_opcode_runs_or_is_reported_unsupported(arch_name: str) -> None:
    """Sampled memory instructions (with unmapped memory, so most of them fault) never fail with a Python error, and only
    the listed ones are unsupported."""
    n_lanes = get_arch(arch_name).wave
    unexpected = set()
    for inst in sample_corpus(arch_name, variants=2, seed=1):
        if inst.fmt not in MEMORY_FORMATS:
            continue
        try:
            run_program([inst], n_lanes, arch_name, memory=Memory())
        except UnsupportedInstructionError as err:
            # A typed instruction naming a packed or invalid format is refused for its format, not for what it is.
            if not inst.mnemonic.startswith(MEMORY_UNSUPPORTED) and "data format" not in str(err):
                unexpected.add(inst.mnemonic)
        except EmulatorError:
            pass  # a fault on the empty memory, or a descriptor the emulator refuses: the instruction ran
    assert not unexpected, f"newly unsupported: {sorted(unexpected)}"
