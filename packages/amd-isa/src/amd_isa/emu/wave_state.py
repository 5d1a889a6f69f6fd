"""`WaveState`: the architectural state of one wave — SGPRs, VGPRs as a numpy (register, lane) array, SCC, EXEC, VCC, PC."""

import numpy as np

from ..arch import Arch, get_arch

# Scalar operand codes shared by RDNA and CDNA (the 8-bit SGPR field); SGPRs, VCC, TTMPs, M0 and EXEC all live in `s`.
VCC_LO, EXEC_LO = 106, 126
N_SCALAR_CODES = 128
N_VGPRS = 256
# Rows past the architectural VGPRs stage operands: the lane-permuted source of a DPP instruction (see `dpp`), and
# the selected sources and the unplaced result of an SDWA instruction (see `sdwa`).
DPP_ROW = N_VGPRS
SDWA_SRC0_ROW, SDWA_SRC1_ROW, SDWA_DST_ROW = N_VGPRS + 1, N_VGPRS + 2, N_VGPRS + 3
N_ROWS = N_VGPRS + 4


class WaveState:
    """One wave: `s` holds every scalar register code (0..127: SGPRs, VCC, TTMP, M0, EXEC), `v` is (vgpr, lane) uint32.

    `vgpr[lane][reg]` and `sgpr[i]` read like the hardware register files; `vcc`, `exec`, `scc` and `pc` are integers.
    The float/int/16-bit views (`vf`, `vi`, `v16`, `vh`, `vi16`) alias `v`, so a VALU op writes its result through the
    view of its data type without any conversion of the raw bits.
    """

    def __init__(self, n_lanes: int = 32, arch: str | Arch = "rdna3"):
        self.arch = arch if isinstance(arch, Arch) else get_arch(arch)
        # CDNA's accumulation registers (AGPRs), the second register file MFMA reads and writes.
        n_agprs = N_VGPRS if self.arch.name == "cdna" else 0
        self.n_lanes = n_lanes
        self.s = [0] * N_SCALAR_CODES
        self.scc = 0
        self.v = np.zeros((N_ROWS, n_lanes), np.uint32)
        self.a = np.zeros((n_agprs, n_lanes), np.uint32)
        self.vf = self.v.view(np.float32)
        self.vi = self.v.view(np.int32)
        self.v16 = self.v.view(np.uint16)
        self.vh = self.v.view(np.float16)
        self.vi16 = self.v.view(np.int16)
        self.lanes = np.arange(n_lanes)
        self.lane_bits = np.uint64(1) << self.lanes.astype(np.uint64)
        self.full_mask = (1 << n_lanes) - 1
        self._mask_cache: dict[int, np.ndarray] = {}
        self._mask_word = np.uint32 if n_lanes == 32 else np.uint64
        self.exec_mask = np.ones(n_lanes, bool)
        self.exec_full = True
        self.exec_value = self.full_mask
        self.pc = 0
        self.steps = 0
        self.lds: np.ndarray = np.zeros(0, np.uint8)
        self.lds32: np.ndarray = np.zeros(0, np.uint32)
        self.scratch: np.ndarray = np.zeros((n_lanes, 0), np.uint8)
        self.memory = None
        self.trace_slot = 0
        self.set_exec(self.full_mask)

    def attach_lds(self, lds: np.ndarray) -> None:
        """Use `lds` (uint8, shared by the waves of a workgroup) as this wave's LDS; `lds32` is its dword view."""
        self.lds = lds
        self.lds32 = lds[: lds.size // 4 * 4].view(np.uint32)

    # --- masks -------------------------------------------------------------------------------------------------
    def set_exec(self, value: int) -> None:
        """Write EXEC (both halves) and refresh the boolean lane mask VALU writes use."""
        value &= self.full_mask
        self.s[EXEC_LO] = value & 0xFFFFFFFF
        self.s[EXEC_LO + 1] = value >> 32
        self._refresh_exec()

    def _refresh_exec(self) -> None:
        value = (self.s[EXEC_LO] | (self.s[EXEC_LO + 1] << 32)) & self.full_mask
        self.exec_value = value
        self.exec_full = value == self.full_mask
        self.exec_mask = self.mask_of(value)

    def mask_of(self, value: int) -> np.ndarray:
        """An integer lane mask as a boolean array over lanes (cached: loops reuse a few VCC/EXEC values)."""
        mask = self._mask_cache.get(value)
        if mask is None:
            if len(self._mask_cache) > 256:
                self._mask_cache.clear()
            mask = self._mask_cache[value] = (np.uint64(value & self.full_mask) & self.lane_bits) != 0
            mask.flags.writeable = False
        return mask

    def int_of(self, mask: np.ndarray) -> int:
        """A boolean lane array as an integer lane mask."""
        return int(np.packbits(mask, bitorder="little").view(self._mask_word)[0])

    def read_mask(self, code: int) -> int:
        """A lane mask held in a scalar register pair (one register in wave32)."""
        if self.n_lanes == 32:
            return self.s[code]
        return self.s[code] | (self.s[code + 1] << 32)

    def write_mask(self, code: int, value: int) -> None:
        """Write a lane mask to a scalar register (pair in wave64); EXEC writes refresh the lane mask."""
        if code == EXEC_LO:
            self.set_exec(value)
            return
        if code == self.arch.null_code and self.arch.name != "cdna":
            return
        self.s[code] = value & 0xFFFFFFFF
        if self.n_lanes == 64:
            self.s[code + 1] = (value >> 32) & 0xFFFFFFFF

    def write_s(self, code: int, value: int) -> None:
        """Write one 32-bit scalar register code (EXEC halves refresh the lane mask, NULL discards)."""
        self.s[code] = value & 0xFFFFFFFF
        if code in (EXEC_LO, EXEC_LO + 1):
            self._refresh_exec()
        elif code == self.arch.null_code and self.arch.name != "cdna":
            self.s[code] = 0

    # --- public views ------------------------------------------------------------------------------------------
    @property
    def vgpr(self) -> np.ndarray:
        """VGPRs indexed [lane][reg] (a view: writes go to the wave)."""
        return self.v[:N_VGPRS].T

    @property
    def agpr(self) -> np.ndarray:
        """CDNA accumulation registers indexed [lane][reg]."""
        return self.a.T

    @property
    def sgpr(self) -> list[int]:
        """Scalar registers by operand code: 0..105 SGPRs, 106/107 VCC, 108.. TTMP, 124/125 NULL/M0 (RDNA), 126/127 EXEC."""
        return self.s

    @property
    def vcc(self) -> int:
        """VCC as an integer lane mask."""
        return self.read_mask(VCC_LO)

    @property
    def exec(self) -> int:
        """EXEC as an integer lane mask."""
        return self.exec_value

    @property
    def m0(self) -> int:
        """The M0 register."""
        return self.s[124 if self.arch.name == "cdna" else 125]
