"""CDNA matrix cores: MFMA in every shape (single and multi-block, 4x4/16x16/32x32, f64), the 8/6/4-bit float forms
(gfx940 fp8/bf8 and gfx950 f8f6f4, scaled or not), SMFMAC (4:2 structured-sparse A) and the accumulation registers.

Register layouts are facts of the CDNA3 ISA's matrix tables (as AMD's matrix instruction calculator prints them), for
an MxNxK instruction with B blocks (wave64):
- A/B inputs: each lane holds L = K*M*B/64 consecutive k values of one row of A (column of B), packed from the low
  bits of its first register up (a bit stream for the 6-bit formats, register pairs for f64). Element (block b, row i,
  k) lives in lane b*M + (k // L)*M*B + i, element k % L.
- C/D: 32-bit results form 4-row strips (one row per register), 64-bit results 1-row strips (register pairs). With
  R = 64/N strips per register and P = max(1, 64*h/(M*N)) blocks per register (h the strip height), element
  (b, i, j) is in register b*(M*N//64) + (i // (h*R))*h + i % h, lane (b % P)*N + ((i // h) % R)*P*N + j.
"""

import re
from collections.abc import Callable

import numpy as np

from ..inst import Inst
from . import fp
from .errors import unsupported
from .names import canonical
from .operand_access import VGPR_BASE, constant_bits, vector_reader
from .wave_state import WaveState

Op = Callable[[WaveState], None]
U32, U64 = np.uint32, np.uint64
LANES = 64
NAME = re.compile(r"v_(?:(s)mfmac|mfma)_(?:scale_)?(f32|i32|f64)_(\d+)x(\d+)x(\d+)(?:_(\d+)b)?_(\w+)")
# Element formats: bits per element and a decoder from raw bits (uint64) to float64 / int64 values.
BITS = {"f32": 32, "xf32": 32, "f16": 16, "bf16": 16, "i8": 8, "fp8": 8, "bf8": 8, "fp6": 6, "bf6": 6, "fp4": 4, "f64": 64}
# gfx950 f8f6f4 forms: CBSZ (A) and BLGP (B) name the element format instead of broadcasting lanes.
F8F6F4_FORMATS = ("fp8", "bf8", "fp6", "bf6", "fp4")
DECODERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "f32": lambda raw: raw.astype(U32).view(np.float32).astype(np.float64),
    # xf32 keeps f32 operands in registers; the emulator multiplies them at full f32 precision (README: deviations).
    "xf32": lambda raw: raw.astype(U32).view(np.float32).astype(np.float64),
    "f16": lambda raw: raw.astype(np.uint16).view(np.float16).astype(np.float64),
    "bf16": lambda raw: fp.bf16_to_f32(raw).astype(np.float64),
    "i8": lambda raw: raw.astype(np.uint8).view(np.int8).astype(np.int64),
    "fp8": lambda raw: fp.FP8_VALUES[raw], "bf8": lambda raw: fp.BF8_VALUES[raw],
    "fp6": lambda raw: fp.FP6_VALUES[raw], "bf6": lambda raw: fp.BF6_VALUES[raw], "fp4": lambda raw: fp.FP4_VALUES[raw],
    "f64": lambda raw: raw.view(np.float64),
}


def input_layout(m: int, k: int, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """(lane, element) of A[b, i, k] (or B[b, k, j] with i = j) as (blocks, m, k) arrays, and the elements per lane."""
    per_lane = k * m * blocks // LANES
    b, i, kk = np.meshgrid(np.arange(blocks), np.arange(m), np.arange(k), indexing="ij")
    return b * m + (kk // per_lane) * m * blocks + i, kk % per_lane


def output_layout(m: int, n: int, blocks: int, wide: bool) -> tuple[np.ndarray, np.ndarray]:
    """(register, lane) of D[b, i, j] as (blocks, m, n) arrays; the register counts 64-bit pairs when `wide`."""
    height = 1 if wide else 4
    strips = LANES // n
    per_reg = max(1, LANES * height // (m * n))
    b, i, j = np.meshgrid(np.arange(blocks), np.arange(m), np.arange(n), indexing="ij")
    reg = b * (m * n // LANES) + (i // (height * strips)) * height + i % height
    lane = (b % per_reg) * n + ((i // height) % strips) * per_reg * n + j
    return reg, lane


def blgp_lanes(blgp: int) -> np.ndarray:
    """The lane each lane reads B from under a BLGP swizzle (0: none, 1/2: broadcast a 32-lane half, 3: rotate by 16,
    4..7: broadcast one 16-lane group)."""
    lanes = np.arange(LANES)
    if blgp == 1:
        return lanes % 32
    if blgp == 2:
        return lanes % 32 + 32
    if blgp == 3:
        return (lanes + 16) % LANES
    if blgp >= 4:
        return lanes % 16 + 16 * (blgp - 4)
    return lanes


def _elements(file: np.ndarray, reg: int, per_lane: int, bits: int) -> np.ndarray:
    """(64 lanes, per_lane) raw element bits (uint64) read as a little-endian bit stream from registers reg, reg+1, ..."""
    n_regs = -(-per_lane * bits // 32)
    words = np.zeros((n_regs + 1, LANES), U64)
    words[:n_regs] = file[reg:reg + n_regs]
    offset = np.arange(per_lane) * bits
    word, shift = offset // 32, (offset % 32).astype(U64)
    # Two adjacent words hold any element (6-bit elements straddle words; 64-bit ones are a pair).
    joined = words[word] | (words[word + 1] << U64(32))
    return ((joined >> shift[:, None]) & U64((1 << bits) - 1 if bits < 64 else 0xFFFFFFFFFFFFFFFF)).T


class Shape:
    """The parsed name of a matrix instruction: kind, output and input types, M/N/K and blocks."""

    def __init__(self, inst: Inst, pc: int):
        name = canonical(inst)
        match = NAME.fullmatch(name)
        if match is None:
            raise unsupported(inst, pc, "not a matrix multiply the emulator knows")
        sparse, self.out, m, n, k, blocks, types = match.groups()
        self.sparse = bool(sparse)
        self.scaled = "_scale_" in name
        self.m, self.n, self.k, self.blocks = int(m), int(n), int(k), int(blocks or 1)
        f = inst.fields
        if types == "f8f6f4":
            cbsz, blgp = f.get("cbsz", 0), f.get("blgp", 0)
            if cbsz >= len(F8F6F4_FORMATS) or blgp >= len(F8F6F4_FORMATS):
                raise unsupported(inst, pc, f"cbsz:{cbsz} blgp:{blgp} name no f8f6f4 element format")
            self.a_type, self.b_type = F8F6F4_FORMATS[cbsz], F8F6F4_FORMATS[blgp]
        else:
            parts = types.split("_")
            self.a_type, self.b_type = parts[0], parts[-1]
        if self.a_type not in BITS or self.b_type not in BITS:
            raise unsupported(inst, pc, f"{types} inputs are not emulated")


def compile_mfma(inst: Inst, pc: int) -> Op:
    """A closure executing one v_mfma_* / v_mfma_scale_* / v_smfmac_* instruction (D = A @ B + C per block)."""
    shape = Shape(inst, pc)
    f = inst.fields
    m, n, k, blocks = shape.m, shape.n, shape.k, shape.blocks
    wide = shape.out == "f64"
    is_int = shape.out == "i32"
    acc_ab, acc_cd = f.get("acc", 0), bool(f.get("acc_cd", 0))
    a_reg, b_reg, d_reg = f["src0"] - VGPR_BASE, f["src1"] - VGPR_BASE, f["vdst"]
    a_k = k // 2 if shape.sparse else k
    a_lane, a_elem = input_layout(m, a_k, blocks)
    b_lane, b_elem = input_layout(n, k, blocks)
    d_reg_of, d_lane = output_layout(m, n, blocks, wide)
    words = 2 if wide else 1
    n_regs = m * n * blocks // LANES * words
    a_per_lane, b_per_lane = a_k * m * blocks // LANES, k * n * blocks // LANES
    cbsz, abid, blgp = f.get("cbsz", 0), f.get("abid", 0), f.get("blgp", 0)
    f8f6f4 = canonical(inst).endswith("f8f6f4")
    negate = [1.0, 1.0, 1.0]
    if wide:
        # CDNA3 repurposes BLGP of the f64 forms as negate bits for A, B and C.
        negate = [-1.0 if blgp >> bit & 1 else 1.0 for bit in range(3)]
    elif not f8f6f4:
        if blocks > 1 and cbsz:
            # CBSZ/ABID broadcast A of block ABID (within each group of 2^CBSZ blocks) to the whole group.
            a_lane = a_lane[(np.arange(blocks) >> cbsz << cbsz) + abid]
        b_lane = blgp_lanes(blgp)[b_lane]
    c_code = f["src2"]
    c_const = None
    if not shape.sparse and c_code < VGPR_BASE:
        c_const = constant_bits(c_code, 64 if wide else 32, {"f32": "F32", "i32": "I32", "f64": "F64"}[shape.out], inst.literal)
        if c_const is None:
            raise unsupported(inst, pc, "C must be registers or an inline constant")
    sparse_index = _sparse_index(inst, shape, a_lane, a_elem, a_per_lane) if shape.sparse else None
    scales = _scale_readers(inst) if shape.scaled else None
    out_dtype = {"f32": np.float32, "i32": np.int32, "f64": np.float64}[shape.out]

    def matrix(st: WaveState, reg: int, in_agprs: bool, kind: str, per_lane: int, scale) -> np.ndarray:
        values = DECODERS[kind](_elements(st.a if in_agprs else st.v, reg, per_lane, BITS[kind]))
        if scale is not None:
            values = values * scale(st)[:, None]
        return values

    def read_c(st: WaveState) -> np.ndarray:
        """C as (blocks, m, n) values."""
        if c_const is not None:
            value = np.array(c_const, U64).astype(U64 if wide else U32).view(out_dtype)
            return np.full((blocks, m, n), value, np.int64 if is_int else np.float64)
        file = st.a if acc_cd else st.v
        base = d_reg if shape.sparse else c_code - VGPR_BASE
        block = file[base:base + n_regs].astype(U64)
        if wide:
            block = block[0::2] | (block[1::2] << U64(32))
            return block.view(np.float64)[d_reg_of, d_lane]
        return block.astype(U32).view(out_dtype)[d_reg_of, d_lane].astype(np.int64 if is_int else np.float64)

    def run(st: WaveState) -> None:
        scale_a, scale_b = scales if scales is not None else (None, None)
        a_vals = matrix(st, a_reg, bool(acc_ab & 1), shape.a_type, a_per_lane, scale_a)[a_lane, a_elem]
        if sparse_index is not None:
            a_vals = sparse_index(st, a_vals)
        b_vals = matrix(st, b_reg, bool(acc_ab & 2), shape.b_type, b_per_lane, scale_b)[b_lane, b_elem]
        product = np.matmul(a_vals * negate[0], np.swapaxes(b_vals * negate[1], 1, 2))  # (blocks, m, n)
        result = product + read_c(st) * negate[2]
        file = st.a if acc_cd else st.v
        if is_int:
            raw = result.astype(np.int64).astype(U64).astype(U32)
        elif wide:
            raw = result.view(U64)
        else:
            raw = result.astype(np.float32).view(U32)
        out = file[d_reg:d_reg + n_regs].copy()
        if wide:
            out[2 * d_reg_of, d_lane] = (raw & U64(0xFFFFFFFF)).astype(U32)
            out[2 * d_reg_of + 1, d_lane] = (raw >> U64(32)).astype(U32)
        else:
            out[d_reg_of, d_lane] = raw
        file[d_reg:d_reg + n_regs] = np.where(st.exec_mask, out, file[d_reg:d_reg + n_regs])
    return run


def _sparse_index(inst: Inst, shape: Shape, a_lane: np.ndarray, a_elem: np.ndarray, per_lane: int):
    """SMFMAC: expand the stored half of A to the dense (blocks, m, k) matrix through the compression index VGPR (src2).

    Each group of 4 dense k values stores 2; the index holds a 2-bit position per stored value, 4 bits per group, in the
    same lane as the values. ABID picks which index set of the register is used (when CBSZ is 0)."""
    f = inst.fields
    index_reg = f["src2"] - VGPR_BASE
    set_bits = (per_lane // 2) * 4
    set_offset = set_bits * f.get("abid", 0) if not f.get("cbsz", 0) else 0
    stored = np.arange(shape.k // 2)
    group, slot = stored // 2, stored % 2
    local_group = (a_elem // 2)  # group within the lane, for each (b, i, stored k)
    shift = (set_offset + local_group * 4 + 2 * (a_elem % 2)).astype(U32)
    dense_base = 4 * group

    def expand(st: WaveState, values: np.ndarray) -> np.ndarray:
        position = (st.v[index_reg][a_lane] >> shift) & U32(3)
        dense = np.zeros((shape.blocks, shape.m, shape.k), values.dtype)
        b, i = np.meshgrid(np.arange(shape.blocks), np.arange(shape.m), indexing="ij")
        # Stored values land in their group at the indexed position; the second of a pair wins on a clash.
        for s in (0, 1):
            cols = (dense_base + position)[:, :, slot == s]
            dense[b[..., None], i[..., None], cols] = values[:, :, slot == s]
        return dense
    return expand


def _scale_readers(inst: Inst) -> tuple[Callable, Callable]:
    """gfx950 scaled MFMA: per-lane E8M0 scales (2^(e-127), 0xFF is NaN) for A and B, one byte of scale_src0/1 each;
    OPSEL[i] | OPSEL_HI[i] << 1 picks the byte."""
    f = inst.fields
    opsel, opsel_hi = f.get("opsel", 0), f.get("opsel_hi", 0)

    def reader(field: str, bit: int) -> Callable[[WaveState], np.ndarray]:
        read = vector_reader(f[field], "U32", inst.literal)
        shift = U32(8 * ((opsel >> bit & 1) | (opsel_hi >> bit & 1) << 1))

        def scale(st: WaveState) -> np.ndarray:
            exponent = (np.broadcast_to(np.asarray(read(st), U32), (LANES,)) >> shift) & U32(0xFF)
            return np.where(exponent == 0xFF, np.nan, np.ldexp(1.0, exponent.astype(np.int64) - 127))
        return scale
    return reader("scale_src0", 0), reader("scale_src1", 1)


def compile_accvgpr(inst: Inst, pc: int) -> Op:
    """v_accvgpr_read / v_accvgpr_write / v_accvgpr_mov_b32: moves between VGPRs, AGPRs and scalar sources."""
    name, f = canonical(inst), inst.fields
    dst, src = f["vdst"], f["src0"]
    if name.startswith("v_accvgpr_read"):
        def run_read(st: WaveState) -> None:
            st.v[dst] = np.where(st.exec_mask, st.a[src - VGPR_BASE], st.v[dst])
        return run_read
    if name.startswith("v_accvgpr_mov"):
        def run_mov(st: WaveState) -> None:
            st.a[dst] = np.where(st.exec_mask, st.a[src - VGPR_BASE], st.a[dst])
        return run_mov
    read = vector_reader(src, "U32", inst.literal)

    def run_write(st: WaveState) -> None:
        st.a[dst] = np.where(st.exec_mask, read(st), st.a[dst])
    return run_write
