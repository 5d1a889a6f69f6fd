"""RDNA wave32 matrix instructions: WMMA (dense 16x16xK) and RDNA4 SWMMAC (A 4:2 structured-sparse).

Register layouts are facts of the RDNA3 / RDNA4 ISA guides, as AMD's matrix instruction calculator prints them. For an
A/B operand, (row-or-column i, k) -> (lane, register, element within the register); for C/D, (m, n) -> (lane, register,
16-bit half):
- RDNA3: lane i holds row i (lanes 16-31 repeat it); k runs through the registers from the low bits up. C/D (m, n) is in
  lane n + 16*(m%2), register m//2; 16-bit results use one half of each register (OPSEL[2] picks it).
- RDNA4: lanes 0-15 and 16-31 take turns holding chunks of k: chunks of K/4 elements for 16-bit types, K/2 for 8- and
  4-bit types. C/D (m, n) is in lane n + 16*(m//8), register m%8 (16-bit results: two rows per register).
- SWMMAC stores the 2 nonzero values of each group of 4 k of A, laid out as the dense A of a K/2 instruction; the index
  VGPR (src2) holds their 2-bit positions, 4 bits per group, in the lane that holds the group's values, with INDEX_KEY
  (OPSEL[0]) selecting which set of the register is used. C is the destination itself.
"""

from collections.abc import Callable

import numpy as np

from ..inst import Inst
from . import fp
from .errors import unsupported
from .names import canonical
from .operand_access import VGPR_BASE, constant_bits
from .wave_state import WaveState

Op = Callable[[WaveState], None]
U16, U32, F16, F32 = np.uint16, np.uint32, np.float16, np.float32
BITS = {"f16": 16, "bf16": 16, "iu8": 8, "fp8": 8, "bf8": 8, "iu4": 4}
SUPPORTED = {"rdna3": ("f16", "bf16", "iu8", "iu4"), "rdna4": ("f16", "bf16", "iu8", "iu4", "fp8", "bf8")}


def ab_layout(arch: str, bits: int, k_total: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lane, register, element) of A[i][k] / B[k][i] as (16, k_total) arrays."""
    per_reg = 32 // bits
    i, k = np.meshgrid(np.arange(16), np.arange(k_total), indexing="ij")
    if arch == "rdna3":
        lane, elem = i, k
    else:
        chunk = k_total // 4 if bits == 16 else k_total // 2
        lane = i + 16 * ((k // chunk) % 2)
        elem = k % chunk + chunk * (k // (2 * chunk))
    return lane, elem // per_reg, elem % per_reg


def dc_layout(arch: str, half_out: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lane, register, 16-bit half) of C/D[m][n] as (16, 16) arrays."""
    m, n = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    if arch == "rdna3":
        return n + 16 * (m & 1), m >> 1, np.zeros((16, 16), int)
    lane, reg = n + 16 * (m >> 3), m & 7
    if half_out:
        return lane, reg // 2, reg % 2
    return lane, reg, np.zeros((16, 16), int)


class Form:
    """A WMMA/SWMMAC name parsed: output and input types, K, sparsity."""

    def __init__(self, inst: Inst, pc: int):
        name = canonical(inst)
        parts = name.split("_")  # v, wmma|swmmac, <out>, 16x16x<K>, <in> (8-bit float forms: <A type>, <B type>)
        self.sparse = parts[1] == "swmmac"
        self.out, self.b_type = parts[2], parts[-1]
        self.a_type = parts[-2] if self.b_type in ("fp8", "bf8") else self.b_type
        self.k = int(parts[3].split("x")[2])
        arch = inst.arch.name
        if arch not in SUPPORTED or self.a_type not in SUPPORTED[arch] or self.b_type not in SUPPORTED[arch] or parts[3][:6] != "16x16x":
            raise unsupported(inst, pc, "this WMMA form is not emulated")


def compile_wmma(inst: Inst, pc: int) -> Op:
    """WMMA / SWMMAC, wave32: D(16x16) = A(16xK) @ B(Kx16) + C, C either VGPRs or an inline constant (then the constant
    fills C whatever the VGPRs hold; SWMMAC accumulates into D)."""
    form = Form(inst, pc)
    f = inst.fields
    arch = inst.arch.name
    a_reg, b_reg, d_reg = f["src0"] - VGPR_BASE, f["src1"] - VGPR_BASE, f["vdst"]
    c_code = d_reg + VGPR_BASE if form.sparse else f["src2"]
    opsel, neg, clamp = f.get("opsel", 0), f.get("neg", 0), f.get("clmp", 0)
    signed_a, signed_b = bool(neg & 1), bool(neg & 2)
    out = form.out
    half_out = out in ("f16", "bf16")
    # RDNA3 16-bit results go to one half of each register (OPSEL[2] picks the high half).
    hi_half = bool(opsel & 4) and arch == "rdna3"
    c_dfmt = {"f32": "F32", "f16": "F16", "bf16": "BF16", "i32": "I32"}[out]
    c_const = None if c_code >= VGPR_BASE else constant_bits(c_code, 16 if half_out else 32, c_dfmt, inst.literal)
    a_k = form.k // 2 if form.sparse else form.k
    a_layout = ab_layout(arch, BITS[form.a_type], a_k)
    b_layout = ab_layout(arch, BITS[form.b_type], form.k)
    dc_lane, dc_reg, dc_part = dc_layout(arch, half_out)
    dc_shift = (dc_part * 16 + (16 if hi_half else 0)).astype(np.uint32)
    expand = _sparse_expand(f["src2"] - VGPR_BASE, a_layout[0], a_k, BITS[form.a_type], opsel & 1) if form.sparse else None

    def matrix(st: WaveState, reg: int, layout, kind: str, signed: bool) -> np.ndarray:
        """(16 rows of A or columns of B, k) as float64 or int64."""
        lane, reg_of, elem = layout
        bits = BITS[kind]
        raw = (st.v[reg + reg_of, lane] >> (elem * bits).astype(U32)) & U32((1 << bits) - 1)
        if kind in ("fp8", "bf8"):
            return (fp.FP8_VALUES if kind == "fp8" else fp.BF8_VALUES)[raw]
        if kind == "f16":
            return raw.astype(U16).view(F16).astype(np.float64)
        if kind == "bf16":
            return fp.bf16_to_f32(raw).astype(np.float64)
        values = raw.astype(np.int64)
        return np.where(values >= 1 << (bits - 1), values - (1 << bits), values) if signed else values

    def from_bits(raw: np.ndarray) -> np.ndarray:
        if out == "f32":
            return raw.astype(U32).view(F32).astype(np.float64)
        if out == "i32":
            return raw.astype(U32).view(np.int32).astype(np.int64)
        halves = (raw & U32(0xFFFF)).astype(U16)
        return (halves.view(F16) if out == "f16" else fp.bf16_to_f32(halves)).astype(np.float64)

    def read_c(st: WaveState) -> np.ndarray:
        if c_const is not None:
            return from_bits(np.full((16, 16), c_const, U32))
        raw = st.v[c_code - VGPR_BASE + dc_reg, dc_lane]
        return from_bits(raw >> dc_shift if half_out else raw)

    def run(st: WaveState) -> None:
        a = matrix(st, a_reg, a_layout, form.a_type, signed_a)
        if expand is not None:
            a = expand(st, a)
        d = a @ matrix(st, b_reg, b_layout, form.b_type, signed_b).T + read_c(st)
        if out == "i32":
            d = np.clip(d, -(1 << 31), (1 << 31) - 1) if clamp else d
            bits_out = d.astype(np.int64).astype(np.uint64).astype(U32)
        elif out == "f32":
            bits_out = d.astype(F32).view(U32)
        else:
            halves = d.astype(F16).view(U16) if out == "f16" else fp.f32_to_bf16(d.astype(F32))
            if arch == "rdna4":
                # Both halves of each register are results: assemble whole registers, then write them.
                block = np.zeros((4, 32), U32)
                np.bitwise_or.at(block, (dc_reg, dc_lane), halves.astype(U32) << dc_shift)
                st.v[d_reg:d_reg + 4] = np.where(st.exec_mask, block, st.v[d_reg:d_reg + 4])
                return
            old = st.v[d_reg + dc_reg, dc_lane]
            bits_out = (old & ~(U32(0xFFFF) << dc_shift)) | (halves.astype(U32) << dc_shift)
        active = st.exec_mask[dc_lane]
        st.v[d_reg + dc_reg[active], dc_lane[active]] = bits_out[active]
    return run


def _sparse_expand(index_reg: int, a_lane: np.ndarray, stored: int, bits: int, index_key: int):
    """SWMMAC: the dense (16, 2*stored) A from its stored values and the compression index register."""
    i, s = np.meshgrid(np.arange(16), np.arange(stored), indexing="ij")
    # Elements of a lane's data in order: its groups of 4 dense k hold 2 stored values each.
    chunk = stored // 4 if bits == 16 else stored // 2
    local = s % chunk + chunk * (s // (2 * chunk))
    groups_per_lane = stored // 2 // 2
    shift = (index_key * 4 * groups_per_lane + 4 * (local // 2) + 2 * (s % 2)).astype(np.uint64)
    dense_k = 4 * (s // 2)

    def expand(st: WaveState, values: np.ndarray) -> np.ndarray:
        words = st.v[index_reg].astype(np.uint64) | (st.v[index_reg + 1].astype(np.uint64) << np.uint64(32))
        position = ((words[a_lane] >> shift) & np.uint64(3)).astype(np.int64)
        dense = np.zeros((16, 2 * stored), values.dtype)
        # The second value of a pair wins if both name the same position.
        for slot in (0, 1):
            keep = s % 2 == slot
            dense[i[keep], (dense_k + position)[keep]] = values[keep]
        return dense
    return expand
