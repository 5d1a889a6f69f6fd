"""DPP (data-parallel primitives): a VALU op whose first source is read from another lane of the same row.

`compile_dpp` wraps the op compiled for the plain encoding: it swaps in a lane-permuted src0 and narrows the lanes the
result is written to (lanes whose source lane is invalid keep their value unless bound_ctrl reads it as 0, and
row_mask/bank_mask disable whole rows or banks).
"""

from collections.abc import Callable

import numpy as np

from ..inst import Inst
from .errors import unsupported
from .wave_state import DPP_ROW, WaveState

ROW = 16


def dpp16_sources(ctrl: int, n_lanes: int, arch: str = "rdna3") -> np.ndarray:
    """Source lane of each lane for a DPP16 control word; -1 marks a lane with no valid source. gfx9 (CDNA) has the
    whole-wave shifts and row broadcasts where gfx10+ has row_share / row_xmask. Raises ValueError for a reserved value."""
    lanes = np.arange(n_lanes)
    row_base, in_row = lanes & ~(ROW - 1), lanes & (ROW - 1)
    if ctrl <= 0xFF:
        return (lanes & ~3) | ((ctrl >> (2 * (lanes & 3))) & 3)
    kind, n = ctrl & 0x1F0, ctrl & 0xF
    if kind == 0x100 and n:
        src = in_row + n
        return np.where(src < ROW, row_base + src, -1)
    if kind == 0x110 and n:
        src = in_row - n
        return np.where(src >= 0, row_base + src, -1)
    if kind == 0x120 and n:
        return row_base + (in_row - n) % ROW
    if ctrl == 0x140:
        return row_base + (ROW - 1 - in_row)
    if ctrl == 0x141:
        return (lanes & ~7) | (7 - (lanes & 7))
    if arch == "cdna":
        return _gfx9_sources(ctrl, lanes, row_base)
    if kind == 0x150:
        return row_base + n
    if kind == 0x160:
        return row_base + (in_row ^ n)
    raise ValueError(f"DPP control {ctrl:#x} is reserved on gfx11/gfx12")


def _gfx9_sources(ctrl: int, lanes: np.ndarray, row_base: np.ndarray) -> np.ndarray:
    """gfx9 whole-wave DPP: wave_shl/rol (from the next lane), wave_shr/ror (from the previous one), row_bcast:15 (each
    row reads the last lane of the row before it) and row_bcast:31 (rows 2 and 3 read lane 31)."""
    n_lanes = lanes.size
    if ctrl == 0x130:
        return np.where(lanes + 1 < n_lanes, lanes + 1, -1)
    if ctrl == 0x134:
        return (lanes + 1) % n_lanes
    if ctrl == 0x138:
        return lanes - 1
    if ctrl == 0x13C:
        return (lanes - 1) % n_lanes
    if ctrl == 0x142:
        return np.where(row_base > 0, row_base - 1, -1)
    if ctrl == 0x143:
        return np.where(lanes >= 32, 31, -1)
    raise ValueError(f"DPP control {ctrl:#x} is reserved on gfx9")


def dpp8_sources(selects: list[int], n_lanes: int) -> np.ndarray:
    """Source lane of each lane for DPP8 lane selects (one 3-bit select per lane of a group of eight)."""
    lanes = np.arange(n_lanes)
    return (lanes & ~7) | np.array(selects)[lanes & 7]


def row_bank_mask(row_mask: int, bank_mask: int, n_lanes: int) -> np.ndarray:
    """Lanes whose row (16 lanes) and bank (4 lanes within a row) are enabled."""
    lanes = np.arange(n_lanes)
    return (((row_mask >> (lanes >> 4)) & 1) != 0) & (((bank_mask >> ((lanes >> 2) & 3)) & 1) != 0)


def compile_dpp(inst: Inst, pc: int, plain: Callable[[Inst], Callable[[WaveState], object]]) -> Callable[[WaveState], object]:
    """The closure of a DPP16/DPP8 instruction, built from `plain(inst_without_dpp)` for the same op."""
    f = dict(inst.fields)
    vsrc0 = f.pop("vsrc0")
    if inst.variant.startswith("DPP8"):
        sources = dpp8_sources([f.pop(f"lane_sel_{i}") for i in range(8)], 64)
        bound_zero, fetch_inactive = False, inst.fields.get("src0") == 234
        enabled = np.ones(64, bool)
    else:
        try:
            sources = dpp16_sources(f.pop("dpp"), 64, inst.arch.name)
        except ValueError as err:
            raise unsupported(inst, pc, str(err)) from None
        # gfx9 has no fetch-inactive bit.
        bound_zero, fetch_inactive = bool(f.pop("bc")), bool(f.pop("fi", 0))
        enabled = row_bank_mask(f.pop("row_mask"), f.pop("bank_mask"), 64)
    # Source modifiers of the DPP word act like VOP3 neg/abs on src0/src1.
    neg = f.pop("src0_neg", 0) | (f.pop("src1_neg", 0) << 1)
    abs_ = f.pop("src0_abs", 0) | (f.pop("src1_abs", 0) << 1)
    # The plain op reads src0 from the spare row past the VGPRs, where the closure stages the permuted values.
    f["src0"] = 256 + DPP_ROW
    if neg or abs_:
        f["neg"], f["abs"] = f.get("neg", 0) | neg, f.get("abs", 0) | abs_
    run_plain = plain(Inst(inst.arch, inst.fmt, inst.op, f, inst.literal, ""))

    def run(st: WaveState):
        n = st.n_lanes
        src = sources[:n]
        valid = (src >= 0) & enabled[:n]
        safe = np.where(src >= 0, src, 0)
        if not fetch_inactive:
            valid &= st.exec_mask[safe]
        permuted = st.v[vsrc0][safe]
        write_mask = st.exec_mask & enabled[:n]
        if bound_zero:
            permuted = np.where(valid, permuted, 0).astype(np.uint32)
        else:
            write_mask &= valid
        st.v[DPP_ROW] = permuted
        saved = (st.exec_mask, st.exec_full)
        st.exec_mask, st.exec_full = write_mask, bool(write_mask.all())
        try:
            return run_plain(st)
        finally:
            st.exec_mask, st.exec_full = saved
    return run
