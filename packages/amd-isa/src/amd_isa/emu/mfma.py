"""CDNA matrix cores: MFMA (16x16xK shapes) and the accumulation registers (AGPRs) they can read and write.

Layout of v_mfma_*_16x16xK (wave64, a fact of the CDNA ISA): lane l works on row-or-column l%16 and on the k block
l//16 of A and B (K/4 consecutive k values, packed into its registers); D/C register r of lane l is element
(row 4*(l//16) + r, column l%16).
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
MN, GROUP = LANES % 16, LANES // 16


def compile_mfma(inst: Inst, pc: int) -> Op:
    """A closure executing one v_mfma_{f32,i32}_16x16xK_{f32,f16,bf16,i8} instruction."""
    name, f = canonical(inst), inst.fields
    match = re.fullmatch(r"v_mfma_(f32|i32)_16x16x(\d+)_(f32|f16|bf16|i8)", name)
    if match is None:
        raise unsupported(inst, pc, "only the 16x16xK MFMA forms with f32/f16/bf16/i8 inputs are emulated")
    out_type, k_total, in_type = match.group(1), int(match.group(2)), match.group(3)
    per_reg = {"f32": 1, "f16": 2, "bf16": 2, "i8": 4}[in_type]
    bits = 32 // per_reg
    k_lane = k_total // 4
    acc_ab = f.get("acc", 0)
    acc_cd = bool(f.get("acc_cd", 0))
    a_reg, b_reg, c_code, d_reg = f["src0"] - VGPR_BASE, f["src1"] - VGPR_BASE, f["src2"], f["vdst"]
    c_const = None if c_code >= VGPR_BASE else constant_bits(c_code, 32, "F32" if out_type == "f32" else "I32", inst.literal)
    kl = np.arange(k_lane)

    def operand(st: WaveState, reg: int, in_agprs: bool) -> np.ndarray:
        """(16, K) matrix of A rows or B columns gathered from the 64 lanes."""
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
        matrix = np.zeros((16, k_total), values.dtype)
        for group in range(4):
            matrix[:, group * k_lane:(group + 1) * k_lane] = values[group * 16:(group + 1) * 16]
        return matrix

    def run(st: WaveState) -> None:
        product = operand(st, a_reg, bool(acc_ab & 1)) @ operand(st, b_reg, bool(acc_ab & 2)).T  # (16 rows, 16 cols)
        # Lane l, register r holds element (4*(l//16) + r, l%16).
        rows = (GROUP[None, :] * 4 + np.arange(4)[:, None])  # (4 regs, 64 lanes)
        d = product[rows, MN[None, :]]
        if c_const is not None:
            c = np.full((4, 64), np.uint32(c_const).view(np.float32 if out_type == "f32" else np.int32), np.float64)
        else:
            c_file = st.a if acc_cd else st.v
            block = c_file[c_code - VGPR_BASE:c_code - VGPR_BASE + 4]
            c = block.view(np.float32 if out_type == "f32" else np.int32).astype(np.float64 if out_type == "f32" else np.int64)
        result = d + c
        out = result.astype(np.float32).view(U32) if out_type == "f32" else result.astype(np.int64).astype(np.uint64).astype(U32)
        d_file = st.a if acc_cd else st.v
        d_file[d_reg:d_reg + 4] = np.where(st.exec_mask, out, d_file[d_reg:d_reg + 4])
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
