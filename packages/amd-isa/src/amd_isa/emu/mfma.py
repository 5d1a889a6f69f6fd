"""CDNA matrix cores: MFMA (single-block 16x16xK and 32x32xK shapes) and the accumulation registers (AGPRs).

Layout of a single-block v_mfma_*_MxMxK (wave64, M = 16 or 32, a fact of the CDNA ISA's dependent-layout tables):
G = 64/M lane groups; lane l works on row (A) / column (B) l%M and on the k block l//M, whose K/G consecutive k
values are packed into its registers from the low bits up. D/C register r of lane l is element
(row 4*G*(r//4) + 4*(l//M) + r%4, column l%M): 4 registers for 16x16, 16 for 32x32.
"""

import re
from collections.abc import Callable

import numpy as np

from ..inst import Inst
from . import fp
from .errors import unsupported
from .names import canonical
from .operands import VGPR_BASE, constant_bits, vector_reader
from .state import WaveState

Op = Callable[[WaveState], None]
U32 = np.uint32
LANES = np.arange(64)
PER_REG = {"f32": 1, "f16": 2, "bf16": 2, "i8": 4}


def mfma_layout(m: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of D/C: element [r, l] is the matrix position register r of lane l holds, for an MxM block."""
    groups = 64 // m
    regs = np.arange(m * m // 64)[:, None]
    rows = 4 * groups * (regs // 4) + 4 * (LANES[None, :] // m) + regs % 4
    return rows, np.broadcast_to(LANES % m, rows.shape)


def compile_mfma(inst: Inst, pc: int) -> Op:
    """A closure executing one single-block v_mfma_{f32,i32}_{16x16,32x32}xK_{f32,f16,bf16,i8} instruction."""
    name, f = canonical(inst), inst.fields
    match = re.fullmatch(r"v_mfma_(f32|i32)_(16|32)x\2x(\d+)_(f32|f16|bf16|i8)", name)
    if match is None:
        raise unsupported(inst, pc, "only the single-block 16x16xK and 32x32xK MFMA forms with f32/f16/bf16/i8 inputs are emulated")
    out_type, m, k_total, in_type = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
    per_reg = PER_REG[in_type]
    bits = 32 // per_reg
    groups = 64 // m
    k_lane = k_total // groups
    n_regs = m * m // 64
    rows, cols = mfma_layout(m)
    acc_ab = f.get("acc", 0)
    acc_cd = bool(f.get("acc_cd", 0))
    a_reg, b_reg, c_code, d_reg = f["src0"] - VGPR_BASE, f["src1"] - VGPR_BASE, f["src2"], f["vdst"]
    c_const = None if c_code >= VGPR_BASE else constant_bits(c_code, 32, "F32" if out_type == "f32" else "I32", inst.literal)
    kl = np.arange(k_lane)

    def operand(st: WaveState, reg: int, in_agprs: bool) -> np.ndarray:
        """(M, K) matrix of A rows or B columns gathered from the 64 lanes."""
        file = st.a if in_agprs else st.v
        raw = file[reg + kl[None, :] // per_reg, LANES[:, None]]  # (64 lanes, k_lane)
        parts = (raw >> (kl[None, :] % per_reg * bits).astype(U32)) & U32((1 << bits) - 1)
        if in_type == "f32":
            values = parts.astype(U32).view(np.float32).astype(np.float64)
        elif in_type == "f16":
            values = parts.astype(np.uint16).view(np.float16).astype(np.float64)
        elif in_type == "bf16":
            values = fp.bf16_to_f32(parts).astype(np.float64)
        else:
            values = parts.astype(np.int64)
            values = np.where(values >= 128, values - 256, values)
        # Lane group g holds k values g*k_lane ... for rows 0..M-1: (G, M, k_lane) -> (M, G*k_lane).
        return values.reshape(groups, m, k_lane).transpose(1, 0, 2).reshape(m, k_total)

    def run(st: WaveState) -> None:
        product = operand(st, a_reg, bool(acc_ab & 1)) @ operand(st, b_reg, bool(acc_ab & 2)).T  # (M rows, M cols)
        d = product[rows, cols]
        if c_const is not None:
            c = np.full((n_regs, 64), np.uint32(c_const).view(np.float32 if out_type == "f32" else np.int32), np.float64)
        else:
            c_file = st.a if acc_cd else st.v
            block = c_file[c_code - VGPR_BASE:c_code - VGPR_BASE + n_regs]
            c = block.view(np.float32 if out_type == "f32" else np.int32).astype(np.float64 if out_type == "f32" else np.int64)
        result = d + c
        out = result.astype(np.float32).view(U32) if out_type == "f32" else result.astype(np.int64).astype(np.uint64).astype(U32)
        d_file = st.a if acc_cd else st.v
        d_file[d_reg:d_reg + n_regs] = np.where(st.exec_mask, out, d_file[d_reg:d_reg + n_regs])
    return run


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
