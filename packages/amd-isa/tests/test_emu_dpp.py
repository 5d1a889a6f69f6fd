"""DPP16 and DPP8 in the emulator: each lane pattern against a per-lane Python reference, with invalid source lanes
(out of row, inactive) handled by bound_ctrl, and row/bank write masks."""

import numpy as np
import pytest
from amd_isa import assemble_insts
from amd_isa.emu import WaveState, run_program

N = 32


def run_vop(asm: str, inputs: dict[int, list[int]]) -> WaveState:
    state = WaveState(N)
    for reg, values in inputs.items():
        state.v[reg] = np.array(values, np.uint64).astype(np.uint32)
    return run_program(assemble_insts(asm, "rdna3"), N, state=state)


def _dpp_ref(kind: str, arg, lane: int) -> int | None:
    """Source lane for a DPP control (None: no valid source)."""
    row, i = lane // 16 * 16, lane % 16
    if kind == "quad_perm":
        return lane // 4 * 4 + arg[lane % 4]
    if kind == "row_shr":
        return row + i - arg if i - arg >= 0 else None
    if kind == "row_shl":
        return row + i + arg if i + arg < 16 else None
    if kind == "row_ror":
        return row + (i - arg) % 16
    if kind == "row_mirror":
        return row + 15 - i
    if kind == "row_half_mirror":
        return lane // 8 * 8 + 7 - lane % 8
    if kind == "row_share":
        return row + arg
    if kind == "row_xmask":
        return row + (i ^ arg)
    return lane // 8 * 8 + arg[lane % 8]


@pytest.mark.parametrize("kind,arg,text", [
    ("quad_perm", [1, 0, 3, 2], "quad_perm:[1,0,3,2]"), ("row_shr", 3, "row_shr:3"), ("row_shl", 1, "row_shl:1"),
    ("row_ror", 5, "row_ror:5"), ("row_mirror", None, "row_mirror"), ("row_half_mirror", None, "row_half_mirror"),
    ("row_share", 2, "row_share:2"), ("row_xmask", 6, "row_xmask:6"),
])
@pytest.mark.parametrize("bound_ctrl", [False, True])
def test_dpp16_lane_patterns(kind: str, arg, text: str, bound_ctrl: bool) -> None:
    src = [1000 + 7 * lane for lane in range(N)]
    old = [5] * N
    exec_mask = 0xFFFF7FFF  # lane 15 inactive: it is not written and is not a valid source
    asm = f"s_mov_b32 exec_lo, {exec_mask:#x}\nv_add_nc_u32_dpp v1, v0, v2 {text} row_mask:0xf bank_mask:0xf{' bound_ctrl:1' if bound_ctrl else ''}"
    st_ = run_vop(asm, {0: src, 1: old, 2: [1] * N})
    for lane in range(N):
        if not (exec_mask >> lane) & 1:
            assert int(st_.v[1, lane]) == 5
            continue
        source = _dpp_ref(kind, arg, lane)
        valid = source is not None and (exec_mask >> source) & 1
        if valid:
            assert int(st_.v[1, lane]) == src[source] + 1, (lane, source)
        else:
            assert int(st_.v[1, lane]) == (1 if bound_ctrl else 5), f"lane {lane}: invalid source reads 0 with bound_ctrl, else no write"


def test_dpp_row_and_bank_masks_and_dpp8() -> None:
    src = list(range(N))
    st_ = run_vop("v_mov_b32_dpp v1, v0 quad_perm:[0,1,2,3] row_mask:0x2 bank_mask:0x5\nv_mov_b32_e32 v2, v0 dpp8:[3,3,2,2,1,1,0,7]",
                  {0: src, 1: [99] * N})
    for lane in range(N):
        enabled = lane >= 16 and ((0x5 >> ((lane >> 2) & 3)) & 1)
        assert int(st_.v[1, lane]) == (lane if enabled else 99)
        assert int(st_.v[2, lane]) == _dpp_ref("dpp8", [3, 3, 2, 2, 1, 1, 0, 7], lane)

