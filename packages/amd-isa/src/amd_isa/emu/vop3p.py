"""Compiling VOP3P (packed 16-bit math, dot products, mixed-precision FMA; WMMA and MFMA in their own modules) and VOPD
dual-issue instructions."""

from collections.abc import Callable

import numpy as np

from ..inst import Inst
from . import fp
from .errors import unsupported
from .mfma import compile_accvgpr, compile_mfma
from .names import canonical, canonical_name
from .operand_access import VGPR_BASE, constant_bits, vector_reader, vector_writer
from .valu_ops import FLOAT_OPS, INT_OPS
from .vector import semantic
from .wave_state import VCC_LO, WaveState
from .wmma import compile_wmma

Op = Callable[[WaveState], None]
U16, U32, F16, F32 = np.uint16, np.uint32, np.float16, np.float32

# Packed ops: name -> (half dtype, fn over halves).
PACKED: dict[str, tuple[type, Callable]] = {
    "v_pk_add_f16": (F16, FLOAT_OPS["add"]), "v_pk_mul_f16": (F16, FLOAT_OPS["mul"]), "v_pk_fma_f16": (F16, FLOAT_OPS["fma"]),
    "v_pk_min_f16": (F16, FLOAT_OPS["min"]), "v_pk_max_f16": (F16, FLOAT_OPS["max"]),
    "v_pk_min_num_f16": (F16, FLOAT_OPS["min"]), "v_pk_max_num_f16": (F16, FLOAT_OPS["max"]),
    "v_pk_minimum_f16": (F16, fp.minimum), "v_pk_maximum_f16": (F16, fp.maximum),
    "v_pk_minimum3_f16": (F16, FLOAT_OPS["minimum3"]), "v_pk_maximum3_f16": (F16, FLOAT_OPS["maximum3"]),
    "v_pk_add_u16": (U16, lambda a, b: a + b), "v_pk_sub_u16": (U16, lambda a, b: a - b), "v_pk_add_i16": (np.int16, lambda a, b: a + b),
    "v_pk_sub_i16": (np.int16, lambda a, b: a - b), "v_pk_mul_lo_u16": (U16, lambda a, b: a * b),
    "v_pk_mad_u16": (U16, lambda a, b, c: a * b + c), "v_pk_mad_i16": (np.int16, lambda a, b, c: a * b + c),
    "v_pk_min_u16": (U16, np.minimum), "v_pk_max_u16": (U16, np.maximum), "v_pk_min_i16": (np.int16, np.minimum),
    "v_pk_max_i16": (np.int16, np.maximum),
    "v_pk_lshlrev_b16": (U16, lambda s, x: x << (s & U16(15))), "v_pk_lshrrev_b16": (U16, lambda s, x: x >> (s & U16(15))),
    "v_pk_ashrrev_i16": (np.int16, lambda s, x: x >> (s & np.int16(15))),
}


def _raw_reader(inst: Inst, field: str, half_fmt: str) -> Callable[[WaveState], object]:
    """A source as raw 32 bits; an inline constant fills both 16-bit halves of a packed operand."""
    code = inst.fields[field]
    if code < VGPR_BASE and code != 255:
        const = constant_bits(code, 16, half_fmt, inst.literal)
        if const is not None:
            value = U32(const | (const << 16))
            return lambda st: value
    return vector_reader(code, "U32", inst.literal)


def _half(raw, hi: bool, dtype: type, neg: bool):
    bits = ((np.asarray(raw, U32) >> U32(16)) if hi else np.asarray(raw, U32)).astype(U16)
    value = bits.view(dtype) if dtype is not U16 else bits
    return -value if neg and dtype is F16 else value


def _sel_bits(inst: Inst) -> tuple[int, int, int, int]:
    f = inst.fields
    opsel_hi = (f.get("opsel_hi", 3) & 3) | (f.get("opsel_hi2", 1) << 2)
    return f.get("opsel", 0), opsel_hi, f.get("neg", 0), f.get("neg_hi", 0)


def compile_vop3p(inst: Inst, pc: int) -> Op:
    """A closure executing one VOP3P instruction."""
    name = canonical(inst)
    if name.startswith(("v_wmma_", "v_swmmac_")):
        return compile_wmma(inst, pc)
    if name.startswith(("v_mfma_", "v_smfmac_")):
        return compile_mfma(inst, pc)
    if name.startswith("v_accvgpr_"):
        return compile_accvgpr(inst, pc)
    if name in PACKED:
        return _compile_packed(inst, name)
    if name in PACKED_F32:
        return _compile_packed_f32(inst, name)
    if name.startswith("v_dot"):
        return _compile_dot(inst, pc, name)
    if name.startswith("v_fma_mix"):
        return _compile_fma_mix(inst, name)
    raise unsupported(inst, pc)


def _compile_packed(inst: Inst, name: str) -> Op:
    dtype, fn = PACKED[name]
    half_fmt = "F16" if dtype is F16 else "I16"
    fields = [f for f in ("src0", "src1", "src2") if f in inst.operand_info]
    readers = [_raw_reader(inst, f, half_fmt) for f in fields]
    opsel, opsel_hi, neg, neg_hi = _sel_bits(inst)
    clamp = inst.fields.get("clmp", 0)
    write = vector_writer(inst.fields["vdst"], "U32")

    def run(st: WaveState) -> None:
        raws = [r(st) for r in readers]
        lo = fn(*(_half(raw, bool(opsel >> i & 1), dtype, bool(neg >> i & 1)) for i, raw in enumerate(raws)))
        hi = fn(*(_half(raw, bool(opsel_hi >> i & 1), dtype, bool(neg_hi >> i & 1)) for i, raw in enumerate(raws)))
        if clamp and dtype is F16:
            lo, hi = (np.where(np.isnan(x), F16(0), np.clip(x, F16(0), F16(1))) for x in (lo, hi))
        lo_bits = np.asarray(lo, dtype).view(U16).astype(U32)
        hi_bits = np.asarray(hi, dtype).view(U16).astype(U32)
        write(st, lo_bits | (hi_bits << U32(16)))
    return run


# gfx90a+ packed 32-bit ops on register pairs: name -> fn over f32 (or raw uint32 for the move) halves.
PACKED_F32: dict[str, Callable] = {
    "v_pk_add_f32": FLOAT_OPS["add"], "v_pk_mul_f32": FLOAT_OPS["mul"], "v_pk_fma_f32": lambda a, b, c: fp.fma(a, b, c, F32),
    "v_pk_mov_b32": None,
}


def _pair_reader(inst: Inst, field: str) -> Callable[[WaveState], tuple]:
    """A 64-bit packed source as its (low, high) dwords; an inline constant or literal fills both."""
    code = inst.fields[field]
    if code >= VGPR_BASE:
        reg = code - VGPR_BASE
        return lambda st: (st.v[reg], st.v[reg + 1])
    read = vector_reader(code, "U32", inst.literal)
    if code < 128:
        read_hi = vector_reader(code + 1, "U32", inst.literal)
        return lambda st: (read(st), read_hi(st))
    return lambda st: (read(st), read(st))


def _compile_packed_f32(inst: Inst, name: str) -> Op:
    """v_pk_{add,mul,fma}_f32 and v_pk_mov_b32: each result dword takes, per source, the dword OPSEL (low result) or
    OPSEL_HI (high result) selects, with NEG / NEG_HI; v_pk_mov_b32 takes the low result from src0 and the high from
    src1."""
    fn = PACKED_F32[name]
    fields = [f for f in ("src0", "src1", "src2") if f in inst.operand_info]
    readers = [_pair_reader(inst, f) for f in fields]
    opsel, opsel_hi, neg, neg_hi = _sel_bits(inst)
    dst = inst.fields["vdst"]
    write_lo, write_hi = vector_writer(dst, "U32"), vector_writer(dst + 1, "U32")

    def pick(pair: tuple, hi: bool, negate: bool):
        value = np.asarray(pair[int(hi)], U32).view(F32)
        return -value if negate else value

    if fn is None:
        def run_mov(st: WaveState) -> None:
            src0, src1 = readers[0](st), readers[1](st)
            lo, hi = src0[opsel & 1], src1[opsel >> 1 & 1]
            write_lo(st, lo)
            write_hi(st, hi)
        return run_mov

    def run(st: WaveState) -> None:
        pairs = [r(st) for r in readers]
        lo = fn(*(pick(p, bool(opsel >> i & 1), bool(neg >> i & 1)) for i, p in enumerate(pairs)))
        hi = fn(*(pick(p, bool(opsel_hi >> i & 1), bool(neg_hi >> i & 1)) for i, p in enumerate(pairs)))
        write_lo(st, np.asarray(lo, F32).view(U32))
        write_hi(st, np.asarray(hi, F32).view(U32))
    return run


def _compile_dot(inst: Inst, pc: int, name: str) -> Op:
    fields = inst.fields
    opsel, opsel_hi, neg, neg_hi = _sel_bits(inst)
    dst_fmt = inst.operand_info["vdst"][2]
    clamp = fields.get("clmp", 0)
    if name in ("v_dot2_f32_f16", "v_dot2_f32_bf16", "v_dot2_f16_f16", "v_dot2_bf16_bf16"):
        bf16 = "bf16" in name.split("_")[-1]
        half_fmt = "BF16" if bf16 else "F16"
        r0, r1 = _raw_reader(inst, "src0", half_fmt), _raw_reader(inst, "src1", half_fmt)
        r2 = vector_reader(fields["src2"], inst.operand_info["src2"][2], inst.literal)
        write = vector_writer(fields["vdst"], dst_fmt)

        def as_f32(raw, hi: bool, negate: bool):
            bits = ((np.asarray(raw, U32) >> U32(16)) if hi else np.asarray(raw, U32)) & U32(0xFFFF)
            value = fp.bf16_to_f32(bits) if bf16 else bits.astype(U16).view(F16).astype(F32)
            return -value if negate else value

        def run_fdot(st: WaveState) -> None:
            a, b, c = r0(st), r1(st), r2(st)
            c = fp.bf16_to_f32(np.asarray(c, U32) & U32(0xFFFF)) if dst_fmt == "BF16" else c
            lo = as_f32(a, bool(opsel & 1), bool(neg & 1)).astype(np.float64) * as_f32(b, bool(opsel & 2), bool(neg & 2))
            hi = as_f32(a, bool(opsel_hi & 1), bool(neg_hi & 1)).astype(np.float64) * as_f32(b, bool(opsel_hi & 2), bool(neg_hi & 2))
            total = lo + hi + np.asarray(c, np.float64)
            write(st, fp.f32_to_bf16(total.astype(F32)) if dst_fmt == "BF16" else total)
        return run_fdot
    # Integer dots: dot4 on bytes, dot8 on nibbles; for the IU forms NEG[0]/NEG[1] mark A/B as signed.
    width = 8 if "dot4" in name else 4
    count = 32 // width
    signed_a = "iu" in name and bool(neg & 1)
    signed_b = "iu" in name and bool(neg & 2)
    r0, r1 = vector_reader(fields["src0"], "U32", inst.literal), vector_reader(fields["src1"], "U32", inst.literal)
    r2 = vector_reader(fields["src2"], "I32" if "i32" in name else "U32", inst.literal)
    write = vector_writer(fields["vdst"], dst_fmt)
    lo, hi = (-(1 << 31), (1 << 31) - 1) if "i32" in name else (0, 0xFFFFFFFF)

    def elements(raw, signed: bool) -> np.ndarray:
        raw = np.asarray(raw, np.int64)
        parts = np.stack([(raw >> (width * i)) & ((1 << width) - 1) for i in range(count)])
        return np.where(parts >> (width - 1), parts - (1 << width), parts) if signed else parts

    def run_idot(st: WaveState) -> None:
        total = (elements(r0(st), signed_a) * elements(r1(st), signed_b)).sum(axis=0) + np.asarray(r2(st), np.int64)
        write(st, np.clip(total, lo, hi) if clamp else total)
    return run_idot


def _compile_fma_mix(inst: Inst, name: str) -> Op:
    fields = inst.fields
    opsel, opsel_hi, neg, neg_hi = _sel_bits(inst)
    readers = [vector_reader(fields[f], "U32", inst.literal) for f in ("src0", "src1", "src2")]

    def operand(st: WaveState, i: int):
        raw = np.asarray(readers[i](st), U32)
        if opsel_hi >> i & 1:
            value = ((raw >> U32(16)) if opsel >> i & 1 else raw & U32(0xFFFF)).astype(U16).view(F16).astype(F32)
        else:
            value = raw.view(F32)
        # For the mix ops NEG_HI is the abs modifier.
        if neg_hi >> i & 1:
            value = np.abs(value)
        return -value if neg >> i & 1 else value

    if name == "v_fma_mix_f32":
        write = vector_writer(fields["vdst"], "F32")

        def run_f32(st: WaveState) -> None:
            write(st, fp.fma(operand(st, 0), operand(st, 1), operand(st, 2), F32))
        return run_f32
    write16 = vector_writer(fields["vdst"], "F16", hi=name.endswith("hi_f16"))

    def run_f16(st: WaveState) -> None:
        write16(st, fp.fma(operand(st, 0), operand(st, 1), operand(st, 2), F16))
    return run_f16


# --- VOPD ---------------------------------------------------------------------------------------------------------------
def _vopd_half(inst: Inst, side: str, opcode: int) -> tuple[list, Callable, Callable]:
    raw_name, info = inst.arch.ops["VOPD"][opcode]
    name = canonical_name(raw_name)
    f = inst.fields
    dst = f[f"vdst{side}"]
    if side == "y":
        dst = (dst << 1) | ((f["vdstx"] & 1) ^ 1)
    base = "v_" + name[len("v_dual_"):]
    src0 = f[f"src{side}0"]
    vsrc1 = f[f"vsrc{side}1"] + VGPR_BASE
    src_fmt = next((e[3] for e in info if e[0].startswith("src")), "F32")
    dst_fmt = next((e[3] for e in info if e[0].startswith("vdst")), "F32")
    r0 = vector_reader(src0, src_fmt, inst.literal)
    r1 = vector_reader(vsrc1, src_fmt, inst.literal)
    write = vector_writer(dst, dst_fmt)
    if base == "v_mov_b32":
        return [r0], (lambda a: a), write
    if base == "v_cndmask_b32":
        return [r0, r1, lambda st: st.mask_of(st.read_mask(VCC_LO))], (lambda a, b, m: np.where(m, b, a)), write
    if base in ("v_fmac_f32", "v_dot2acc_f32_f16", "v_dot2acc_f32_bf16"):
        acc = vector_reader(dst + VGPR_BASE, "F32", None)
        if base == "v_fmac_f32":
            return [r0, r1, acc], FLOAT_OPS["fmac"], write
        bf16 = base.endswith("bf16")
        raw0, raw1 = vector_reader(src0, "U32", inst.literal), vector_reader(vsrc1, "U32", inst.literal)

        def dot2(a, b, c):
            conv = fp.bf16_to_f32 if bf16 else (lambda x: x.astype(U16).view(F16).astype(F32))
            lo = conv(np.asarray(a, U32) & U32(0xFFFF)).astype(np.float64) * conv(np.asarray(b, U32) & U32(0xFFFF))
            hi = conv(np.asarray(a, U32) >> U32(16)).astype(np.float64) * conv(np.asarray(b, U32) >> U32(16))
            return lo + hi + c
        return [raw0, raw1, acc], dot2, write
    if base in ("v_fmaak_f32", "v_fmamk_f32"):
        k = vector_reader(255, "F32", inst.literal)
        readers = [r0, r1, k] if base == "v_fmaak_f32" else [r0, k, r1]
        return readers, FLOAT_OPS["fma"], write
    fn = semantic(base) or INT_OPS.get(base)
    if fn is None:
        raise unsupported(inst, 0, f"VOPD {name}")
    return [r0, r1], fn, write


def compile_vopd(inst: Inst, pc: int) -> Op:
    """A closure executing a VOPD pair: both halves read their sources before either writes."""
    x_readers, x_fn, x_write = _vopd_half(inst, "x", inst.op)
    y_readers, y_fn, y_write = _vopd_half(inst, "y", inst.fields["opy"])

    def run(st: WaveState) -> None:
        x = x_fn(*(r(st) for r in x_readers))
        y = y_fn(*(r(st) for r in y_readers))
        x_write(st, x)
        y_write(st, y)
    return run
