"""SDWA (sub-dword addressing, gfx9/CDNA): a VOP1/VOP2/VOPC op whose sources are a byte or word of their register,
zero- or sign-extended, and whose result goes to a byte, word or the whole of the destination.

`compile_sdwa` wraps the op compiled for the plain encoding: the closure stages the selected sources in spare rows past
the register file, runs the plain op on them (its result lands in another spare row), then places the result's low
bits at DST_SEL, filling the other bits as DST_UNUSED says: zeros (PAD), the result's sign above it (SEXT, zeros below),
or the old destination bits (PRESERVE). A VOPC with SD set writes its mask to SDST instead of VCC.
"""

from collections.abc import Callable

import numpy as np

from ..inst import Inst
from .errors import unsupported
from .operand_access import VGPR_BASE, scalar_reader
from .wave_state import SDWA_DST_ROW, SDWA_SRC0_ROW, SDWA_SRC1_ROW, VCC_LO, WaveState

U32 = np.uint32
# SEL values: BYTE_0..3, WORD_0..1, DWORD -> (bit offset, width).
SELECTS = {0: (0, 8), 1: (8, 8), 2: (16, 8), 3: (24, 8), 4: (0, 16), 5: (16, 16), 6: (0, 32)}
PAD, SEXT, PRESERVE = 0, 1, 2


def select(raw: np.ndarray, sel: int, sext: bool) -> np.ndarray:
    """The SEL part of 32-bit values, zero- or sign-extended to 32 bits."""
    shift, width = SELECTS[sel]
    part = (raw.astype(np.int64) >> shift) & ((1 << width) - 1)
    if sext and width < 32:
        part = np.where(part >> (width - 1), part - (1 << width), part)
    return (part & 0xFFFFFFFF).astype(U32)


def place(result: np.ndarray, old: np.ndarray, sel: int, unused: int) -> np.ndarray:
    """The destination after writing `result`'s low bits at SEL, the other bits as DST_UNUSED says."""
    shift, width = SELECTS[sel]
    if width == 32:
        return result
    mask = ((1 << width) - 1) << shift
    field = (result.astype(np.int64) << shift) & mask
    if unused == PRESERVE:
        return ((old.astype(np.int64) & ~mask) | field).astype(U32)
    if unused == SEXT:
        negative = (field >> (shift + width - 1)) & 1
        above = (0xFFFFFFFF << (shift + width)) & 0xFFFFFFFF
        field = np.where(negative == 1, field | above, field)
    return (field & 0xFFFFFFFF).astype(U32)


def _source(inst: Inst, reg: int, is_scalar: bool, sel: int, sext: bool) -> Callable[[WaveState], np.ndarray]:
    """A reader of one SDWA source (VGPR, or a scalar register / inline constant when the S bit is set), selected."""
    if is_scalar:
        read = scalar_reader(reg, 32, "B32", inst.literal)
        return lambda st: select(np.full(st.n_lanes, read(st), U32), sel, sext)
    return lambda st: select(st.v[reg], sel, sext)


def compile_sdwa(inst: Inst, pc: int, plain: Callable[[Inst], Callable[[WaveState], object]]) -> Callable[[WaveState], object]:
    """The closure of an SDWA instruction, built from `plain(inst_without_sdwa)` for the same op."""
    if inst.fmt not in ("VOP1", "VOP2", "VOPC"):
        raise unsupported(inst, pc, f"SDWA on {inst.fmt}")
    f = dict(inst.fields)
    sources = [_source(inst, f.pop("vsrc0"), bool(f.pop("s0", 0)), f.pop("src0_sel", 6), bool(f.pop("src0_sext", 0)))]
    src1 = _source(inst, f.get("vsrc1", 0), bool(f.pop("s1", 0)), f.pop("src1_sel", 6), bool(f.pop("src1_sext", 0)))
    f["src0"] = VGPR_BASE + SDWA_SRC0_ROW
    if "vsrc1" in f:
        # VSRC1 names a VGPR, or with S1 set a scalar operand code.
        sources.append(src1)
        f["vsrc1"] = SDWA_SRC1_ROW
    # Source modifiers of the SDWA word act like VOP3 neg/abs on src0/src1.
    f["neg"] = f.pop("src0_neg", 0) | (f.pop("src1_neg", 0) << 1)
    f["abs"] = f.pop("src0_abs", 0) | (f.pop("src1_abs", 0) << 1)
    rows = (SDWA_SRC0_ROW, SDWA_SRC1_ROW)[:len(sources)]
    if inst.fmt == "VOPC":
        return _compile_vopc(inst, f, sources, rows, plain)
    vdst, dst_sel, dst_unused = f["vdst"], f.pop("dst_sel", 6), f.pop("dst_unused", PAD)
    f["vdst"] = SDWA_DST_ROW
    run_plain = plain(Inst(inst.arch, inst.fmt, inst.op, f, inst.literal, ""))

    def run(st: WaveState):
        for row, source in zip(rows, sources, strict=True):
            st.v[row] = source(st)
        # MAC ops accumulate into their destination: stage it too.
        st.v[SDWA_DST_ROW] = st.v[vdst]
        status = run_plain(st)
        placed = place(st.v[SDWA_DST_ROW], st.v[vdst], dst_sel, dst_unused)
        st.v[vdst] = np.where(st.exec_mask, placed, st.v[vdst])
        return status
    return run


def _compile_vopc(inst: Inst, f: dict, sources: list, rows: tuple, plain: Callable) -> Callable[[WaveState], object]:
    """VOPC SDWA: SD set sends the compare mask to SDST (an SGPR pair, or VCC) instead of VCC."""
    to_sdst, sdst = bool(f.pop("sd", 0)), f.pop("sdst", VCC_LO)
    run_plain = plain(Inst(inst.arch, inst.fmt, inst.op, f, inst.literal, ""))
    redirect = to_sdst and sdst != VCC_LO

    def run(st: WaveState):
        for row, source in zip(rows, sources, strict=True):
            st.v[row] = source(st)
        saved_vcc = st.read_mask(VCC_LO)
        status = run_plain(st)
        if redirect:
            result = st.read_mask(VCC_LO)
            st.write_mask(VCC_LO, saved_vcc)
            st.write_mask(sdst, result)
        return status
    return run
