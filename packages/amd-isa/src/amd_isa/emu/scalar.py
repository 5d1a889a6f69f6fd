"""Compiling scalar instructions (SOP1, SOP2, SOPC, SOPK, SOPP, SMEM) into closures over the wave state.

Scalar values are Python ints of raw bits; the semantic tables below map op names to small functions. A closure returns
None to fall through, or the index of the next instruction for a taken branch (see `program`).
"""

from collections.abc import Callable

import numpy as np

from ..inst import Inst
from . import fp
from .errors import EmulatorError, unsupported
from .fp import f32_to_f16_rtz
from .names import canonical
from .operand_access import scalar_reader
from .wave_state import WaveState

M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
END, BARRIER = -1, -2
Op = Callable[[WaveState], int | None]


def _s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x & 0x80000000 else x


def _s64(x: int) -> int:
    x &= M64
    return x - (1 << 64) if x >> 63 else x


def _sext(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def _f32(x: int) -> float:
    return float(np.uint32(x & M32).view(np.float32))


def _bits32(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def _f16(x: int) -> float:
    return float(np.uint16(x & 0xFFFF).view(np.float16))


def _bits16(x: float) -> int:
    return int(np.float16(x).view(np.uint16))


def _ctz(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return (x & -x).bit_length() - 1 if x else -1


def _clz(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return bits - x.bit_length() if x else -1


def _cls(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    if x >> (bits - 1):
        x = ~x & ((1 << bits) - 1)
    return bits - x.bit_length() if x else -1


def _brev(x: int, bits: int) -> int:
    return int(f"{x & ((1 << bits) - 1):0{bits}b}"[::-1], 2)


def _bfe(x: int, sel: int, bits: int, signed: bool) -> int:
    off, width = sel & (bits - 1), (sel >> 16) & 0x7F
    width = min(width, bits)
    value = (x >> off) & ((1 << width) - 1)
    return _sext(value, width) if signed and width else value


def _quadmask(x: int, bits: int) -> int:
    return sum(1 << i for i in range(bits // 4) if (x >> (4 * i)) & 0xF)


def _wqm(x: int, bits: int) -> int:
    return sum(0xF << (4 * i) for i in range(bits // 4) if (x >> (4 * i)) & 0xF)


def _lshl_add(shift: int) -> Callable[[int, int, int], tuple[int, int | None]]:
    # SCC is the unsigned overflow of the 32-bit result (the shift or the add carrying out of bit 31).
    return lambda a, b, c: ((a << shift) + b, int(((a << shift) & M32) + b > M32 or a >> (32 - shift) != 0))


# SOP2: name -> fn(a, b, scc) -> (result, new scc or None to keep). Widths come from the suffix.
SOP2: dict[str, Callable[[int, int, int], tuple[int, int | None]]] = {
    "s_add_u32": lambda a, b, c: (a + b, int(a + b > M32)), "s_sub_u32": lambda a, b, c: (a - b, int(b > a)),
    "s_add_i32": lambda a, b, c: (a + b, int(not -(1 << 31) <= _s32(a) + _s32(b) < (1 << 31))),
    "s_sub_i32": lambda a, b, c: (a - b, int(not -(1 << 31) <= _s32(a) - _s32(b) < (1 << 31))),
    "s_addc_u32": lambda a, b, c: (a + b + c, int(a + b + c > M32)), "s_subb_u32": lambda a, b, c: (a - b - c, int(b + c > a)),
    "s_absdiff_i32": lambda a, b, c: (abs(_s32(a) - _s32(b)), int(_s32(a) != _s32(b))),
    "s_lshl_b32": lambda a, b, c: ((a << (b & 31)) & M32, int((a << (b & 31)) & M32 != 0)),
    "s_lshl_b64": lambda a, b, c: ((a << (b & 63)) & M64, int((a << (b & 63)) & M64 != 0)),
    "s_lshr_b32": lambda a, b, c: (a >> (b & 31), int(a >> (b & 31) != 0)), "s_lshr_b64": lambda a, b, c: (a >> (b & 63), int(a >> (b & 63) != 0)),
    "s_ashr_i32": lambda a, b, c: (_s32(a) >> (b & 31), int(_s32(a) >> (b & 31) != 0)),
    "s_ashr_i64": lambda a, b, c: (_s64(a) >> (b & 63), int(_s64(a) >> (b & 63) != 0)),
    **{f"s_lshl{n}_add_u32": _lshl_add(n) for n in (1, 2, 3, 4)},
    "s_min_i32": lambda a, b, c: (a if _s32(a) < _s32(b) else b, int(_s32(a) < _s32(b))),
    "s_min_u32": lambda a, b, c: (min(a, b), int(a < b)),
    "s_max_i32": lambda a, b, c: (a if _s32(a) > _s32(b) else b, int(_s32(a) > _s32(b))),
    "s_max_u32": lambda a, b, c: (max(a, b), int(a > b)),
    "s_mul_i32": lambda a, b, c: (a * b, None), "s_mul_hi_u32": lambda a, b, c: ((a * b) >> 32, None),
    "s_mul_hi_i32": lambda a, b, c: ((_s32(a) * _s32(b)) >> 32, None),
    "s_bfe_u32": lambda a, b, c: (_bfe(a, b, 32, False), int(_bfe(a, b, 32, False) != 0)),
    "s_bfe_i32": lambda a, b, c: (_bfe(a, b, 32, True), int(_bfe(a, b, 32, True) != 0)),
    "s_bfe_u64": lambda a, b, c: (_bfe(a, b, 64, False), int(_bfe(a, b, 64, False) != 0)),
    "s_bfe_i64": lambda a, b, c: (_bfe(a, b, 64, True), int(_bfe(a, b, 64, True) != 0)),
    "s_bfm_b32": lambda a, b, c: (((1 << (a & 31)) - 1) << (b & 31), None),
    "s_bfm_b64": lambda a, b, c: (((1 << (a & 63)) - 1) << (b & 63), None),
    "s_cselect_b32": lambda a, b, c: (a if c else b, None), "s_cselect_b64": lambda a, b, c: (a if c else b, None),
    "s_pack_ll_b32_b16": lambda a, b, c: ((a & 0xFFFF) | ((b & 0xFFFF) << 16), None),
    "s_pack_lh_b32_b16": lambda a, b, c: ((a & 0xFFFF) | (b & 0xFFFF0000), None),
    "s_pack_hh_b32_b16": lambda a, b, c: ((a >> 16) | (b & 0xFFFF0000), None),
    "s_pack_hl_b32_b16": lambda a, b, c: ((a >> 16) | ((b & 0xFFFF) << 16), None),
    "s_add_f32": lambda a, b, c: (_bits32(np.float32(_f32(a)) + np.float32(_f32(b))), None),
    "s_sub_f32": lambda a, b, c: (_bits32(np.float32(_f32(a)) - np.float32(_f32(b))), None),
    "s_mul_f32": lambda a, b, c: (_bits32(np.float32(_f32(a)) * np.float32(_f32(b))), None),
    "s_min_f32": lambda a, b, c: (_bits32(np.fmin(np.float32(_f32(a)), np.float32(_f32(b)))), None),
    "s_max_f32": lambda a, b, c: (_bits32(np.fmax(np.float32(_f32(a)), np.float32(_f32(b)))), None),
    "s_add_f16": lambda a, b, c: (_bits16(np.float16(_f16(a)) + np.float16(_f16(b))), None),
    "s_sub_f16": lambda a, b, c: (_bits16(np.float16(_f16(a)) - np.float16(_f16(b))), None),
    "s_mul_f16": lambda a, b, c: (_bits16(np.float16(_f16(a)) * np.float16(_f16(b))), None),
    "s_min_f16": lambda a, b, c: (_bits16(np.fmin(np.float16(_f16(a)), np.float16(_f16(b)))), None),
    "s_max_f16": lambda a, b, c: (_bits16(np.fmax(np.float16(_f16(a)), np.float16(_f16(b)))), None),
    # RDNA4: IEEE 754-2019 minimum/maximum (a NaN operand gives NaN), and 64-bit adds and multiplies that keep SCC.
    "s_minimum_f32": lambda a, b, c: (_bits32(fp.minimum(np.float32(_f32(a)), np.float32(_f32(b)))), None),
    "s_maximum_f32": lambda a, b, c: (_bits32(fp.maximum(np.float32(_f32(a)), np.float32(_f32(b)))), None),
    "s_minimum_f16": lambda a, b, c: (_bits16(fp.minimum(np.float16(_f16(a)), np.float16(_f16(b)))), None),
    "s_maximum_f16": lambda a, b, c: (_bits16(fp.maximum(np.float16(_f16(a)), np.float16(_f16(b)))), None),
    "s_add_nc_u64": lambda a, b, c: ((a + b) & M64, None), "s_sub_nc_u64": lambda a, b, c: ((a - b) & M64, None),
    "s_mul_u64": lambda a, b, c: ((a * b) & M64, None),
}
for _op, _fn in (("and", lambda a, b: a & b), ("or", lambda a, b: a | b), ("xor", lambda a, b: a ^ b),
                 ("nand", lambda a, b: ~(a & b)), ("nor", lambda a, b: ~(a | b)), ("xnor", lambda a, b: ~(a ^ b)),
                 ("and_not1", lambda a, b: a & ~b), ("or_not1", lambda a, b: a | ~b)):
    for _bits, _mask in ((32, M32), (64, M64)):
        SOP2[f"s_{_op}_b{_bits}"] = (lambda fn, mask: lambda a, b, c: (fn(a, b) & mask, int(fn(a, b) & mask != 0)))(_fn, _mask)

# SOP1: name -> fn(a, dest_old, scc) -> (result, new scc or None).
SOP1: dict[str, Callable[[int, int, int], tuple[int, int | None]]] = {
    "s_mov_b32": lambda a, d, c: (a, None), "s_mov_b64": lambda a, d, c: (a, None),
    "s_cmov_b32": lambda a, d, c: (a if c else d, None), "s_cmov_b64": lambda a, d, c: (a if c else d, None),
    "s_not_b32": lambda a, d, c: (~a & M32, int(~a & M32 != 0)), "s_not_b64": lambda a, d, c: (~a & M64, int(~a & M64 != 0)),
    "s_brev_b32": lambda a, d, c: (_brev(a, 32), None), "s_brev_b64": lambda a, d, c: (_brev(a, 64), None),
    "s_ctz_i32_b32": lambda a, d, c: (_ctz(a, 32), None), "s_ctz_i32_b64": lambda a, d, c: (_ctz(a, 64), None),
    "s_ff0_i32_b32": lambda a, d, c: (_ctz(~a & M32, 32), None), "s_ff0_i32_b64": lambda a, d, c: (_ctz(~a & M64, 64), None),
    "s_clz_i32_u32": lambda a, d, c: (_clz(a, 32), None), "s_clz_i32_u64": lambda a, d, c: (_clz(a, 64), None),
    "s_cls_i32": lambda a, d, c: (_cls(a, 32), None), "s_cls_i32_i64": lambda a, d, c: (_cls(a, 64), None),
    "s_sext_i32_i8": lambda a, d, c: (_sext(a, 8), None), "s_sext_i32_i16": lambda a, d, c: (_sext(a, 16), None),
    "s_bitset0_b32": lambda a, d, c: (d & ~(1 << (a & 31)), None), "s_bitset0_b64": lambda a, d, c: (d & ~(1 << (a & 63)), None),
    "s_bitset1_b32": lambda a, d, c: (d | (1 << (a & 31)), None), "s_bitset1_b64": lambda a, d, c: (d | (1 << (a & 63)), None),
    "s_bitreplicate_b64_b32": lambda a, d, c: (sum(3 << (2 * i) for i in range(32) if a >> i & 1), None),
    "s_abs_i32": lambda a, d, c: (abs(_s32(a)), int(abs(_s32(a)) & M32 != 0)),
    "s_bcnt0_i32_b32": lambda a, d, c: (32 - a.bit_count(), int(32 - a.bit_count() != 0)),
    "s_bcnt0_i32_b64": lambda a, d, c: (64 - a.bit_count(), int(64 - a.bit_count() != 0)),
    "s_bcnt1_i32_b32": lambda a, d, c: (a.bit_count(), int(a != 0)), "s_bcnt1_i32_b64": lambda a, d, c: (a.bit_count(), int(a != 0)),
    "s_quadmask_b32": lambda a, d, c: (_quadmask(a, 32), int(_quadmask(a, 32) != 0)),
    "s_quadmask_b64": lambda a, d, c: (_quadmask(a, 64), int(_quadmask(a, 64) != 0)),
    "s_wqm_b32": lambda a, d, c: (_wqm(a, 32), int(_wqm(a, 32) != 0)), "s_wqm_b64": lambda a, d, c: (_wqm(a, 64), int(_wqm(a, 64) != 0)),
    "s_ceil_f32": lambda a, d, c: (_bits32(np.ceil(np.float32(_f32(a)))), None),
    "s_floor_f32": lambda a, d, c: (_bits32(np.floor(np.float32(_f32(a)))), None),
    "s_trunc_f32": lambda a, d, c: (_bits32(np.trunc(np.float32(_f32(a)))), None),
    "s_rndne_f32": lambda a, d, c: (_bits32(np.rint(np.float32(_f32(a)))), None),
    "s_cvt_f32_i32": lambda a, d, c: (_bits32(np.float32(_s32(a))), None), "s_cvt_f32_u32": lambda a, d, c: (_bits32(np.float32(a)), None),
    "s_cvt_i32_f32": lambda a, d, c: (_cvt_int(_f32(a), -(1 << 31), (1 << 31) - 1), None),
    "s_cvt_u32_f32": lambda a, d, c: (_cvt_int(_f32(a), 0, M32), None),
    "s_cvt_f16_f32": lambda a, d, c: (_bits16(np.float32(_f32(a))), None), "s_cvt_f32_f16": lambda a, d, c: (_bits32(_f16(a)), None),
    "s_cvt_hi_f32_f16": lambda a, d, c: (_bits32(_f16(a >> 16)), None),
    "s_ceil_f16": lambda a, d, c: (_bits16(np.ceil(np.float16(_f16(a)))), None),
    "s_floor_f16": lambda a, d, c: (_bits16(np.floor(np.float16(_f16(a)))), None),
    "s_trunc_f16": lambda a, d, c: (_bits16(np.trunc(np.float16(_f16(a)))), None),
    "s_rndne_f16": lambda a, d, c: (_bits16(np.rint(np.float16(_f16(a)))), None),
    "s_sendmsg_rtn_b32": lambda a, d, c: (0, None), "s_sendmsg_rtn_b64": lambda a, d, c: (0, None),
}

# Saveexec family: name -> (new exec from (src, exec), dest gets old exec (saveexec) or new exec (wrexec)).
SAVEEXEC: dict[str, Callable[[int, int], int]] = {
    "and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e, "nand": lambda s, e: ~(s & e),
    "nor": lambda s, e: ~(s | e), "xnor": lambda s, e: ~(s ^ e), "and_not0": lambda s, e: ~s & e, "or_not0": lambda s, e: ~s | e,
    "and_not1": lambda s, e: s & ~e, "or_not1": lambda s, e: s | ~e,
}

SOPC: dict[str, Callable[[int, int], bool]] = {
    "s_cmp_eq_i32": lambda a, b: a == b, "s_cmp_lg_i32": lambda a, b: a != b, "s_cmp_eq_u32": lambda a, b: a == b,
    "s_cmp_lg_u32": lambda a, b: a != b, "s_cmp_eq_u64": lambda a, b: a == b, "s_cmp_lg_u64": lambda a, b: a != b,
    "s_cmp_gt_i32": lambda a, b: _s32(a) > _s32(b), "s_cmp_ge_i32": lambda a, b: _s32(a) >= _s32(b),
    "s_cmp_lt_i32": lambda a, b: _s32(a) < _s32(b), "s_cmp_le_i32": lambda a, b: _s32(a) <= _s32(b),
    "s_cmp_gt_u32": lambda a, b: a > b, "s_cmp_ge_u32": lambda a, b: a >= b, "s_cmp_lt_u32": lambda a, b: a < b,
    "s_cmp_le_u32": lambda a, b: a <= b,
    "s_bitcmp0_b32": lambda a, b: not a >> (b & 31) & 1, "s_bitcmp1_b32": lambda a, b: bool(a >> (b & 31) & 1),
    "s_bitcmp0_b64": lambda a, b: not a >> (b & 63) & 1, "s_bitcmp1_b64": lambda a, b: bool(a >> (b & 63) & 1),
}
_FCMP: dict[str, Callable[[float, float], bool]] = {
    "lt": lambda a, b: a < b, "eq": lambda a, b: a == b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
    "lg": lambda a, b: a < b or a > b, "ge": lambda a, b: a >= b, "o": lambda a, b: a == a and b == b,
    "u": lambda a, b: a != a or b != b, "nge": lambda a, b: not a >= b, "nlg": lambda a, b: not (a < b or a > b),
    "ngt": lambda a, b: not a > b, "nle": lambda a, b: not a <= b, "neq": lambda a, b: not a == b, "nlt": lambda a, b: not a < b,
}
for _cond, _cmp in _FCMP.items():
    SOPC[f"s_cmp_{_cond}_f32"] = (lambda cmp: lambda a, b: cmp(_f32(a), _f32(b)))(_cmp)
    SOPC[f"s_cmp_{_cond}_f16"] = (lambda cmp: lambda a, b: cmp(_f16(a), _f16(b)))(_cmp)


def _cvt_int(x: float, lo: int, hi: int) -> int:
    if x != x:
        return 0
    return max(lo, min(hi, int(x) if abs(x) != float("inf") else (hi if x > 0 else lo))) & M32


def _dest_writer(code: int, bits: int) -> Callable[[WaveState, int], None]:
    """A writer of a scalar result to register `code` (a pair for 64-bit results)."""
    if bits == 64:
        def write64(st: WaveState, value: int) -> None:
            st.write_s(code, value & M32)
            st.write_s(code + 1, (value >> 32) & M32)
        return write64
    return lambda st, value: st.write_s(code, value & M32)


def _reader(inst: Inst, field: str):
    bits, _, dfmt = inst.operand_info[field]
    return scalar_reader(inst.fields[field], bits, dfmt, inst.literal)


def compile_sop2(inst: Inst, pc: int) -> Op:
    """A closure executing one SOP2 instruction."""
    name = canonical(inst)
    if name in ("s_fmac_f32", "s_fmaak_f32", "s_fmamk_f32", "s_fmac_f16", "s_cvt_pk_rtz_f16_f32"):
        return _compile_sop2_float(inst, pc, name)
    fn = SOP2.get(name)
    if fn is None:
        raise unsupported(inst, pc)
    ra, rb = _reader(inst, "ssrc0"), _reader(inst, "ssrc1")
    write = _dest_writer(inst.fields["sdst"], inst.operand_info["sdst"][0])

    def run(st: WaveState) -> None:
        value, scc = fn(ra(st), rb(st), st.scc)
        write(st, value)
        if scc is not None:
            st.scc = scc
    return run


def _compile_sop2_float(inst: Inst, pc: int, name: str) -> Op:
    ra, rb = _reader(inst, "ssrc0"), _reader(inst, "ssrc1")
    dst = inst.fields["sdst"]
    lit = inst.literal or 0

    def run(st: WaveState) -> None:
        a, b, d = ra(st), rb(st), st.s[dst]
        if name == "s_cvt_pk_rtz_f16_f32":
            lo, hi = f32_to_f16_rtz(np.array([_f32(a), _f32(b)], np.float32)).view(np.uint16).tolist()
            st.write_s(dst, lo | hi << 16)
            return
        if name == "s_fmac_f16":
            st.write_s(dst, _bits16(np.float16(np.float64(_f16(a)) * _f16(b) + _f16(d))))
            return
        x, y, z = {"s_fmac_f32": (a, b, d), "s_fmaak_f32": (a, b, lit), "s_fmamk_f32": (a, lit, b)}[name]
        st.write_s(dst, _bits32(np.float32(np.float64(_f32(x)) * _f32(y) + _f32(z))))
    return run


def compile_sop1(inst: Inst, pc: int, index_of: Callable[[int], int]) -> Op:
    """A closure executing one SOP1 instruction (PC writes return the target instruction index)."""
    name = canonical(inst)
    info, fields = inst.operand_info, inst.fields
    sdst = fields.get("sdst")
    if name in ("s_getpc_b64", "s_setpc_b64", "s_swappc_b64", "s_rfe_b64"):
        return _compile_pc_op(inst, pc, name, index_of)
    if "saveexec" in name or "wrexec" in name:
        return _compile_saveexec(inst, pc, name)
    if name.startswith("s_movrel"):
        return _compile_movrel(inst, pc, name)
    if name == "s_barrier":
        # RDNA4 signals the workgroup barrier with s_barrier_signal (SOP1) and waits with s_barrier_wait (a no-op here).
        return lambda st: BARRIER
    if name in ("s_barrier_init", "s_barrier_join", "s_sleep_var"):
        return lambda st: None
    if name == "s_alloc_vgpr":
        def run_alloc(st: WaveState) -> None:
            # Dynamic VGPR allocation always succeeds: the emulator's register file is full size.
            st.scc = 1
        return run_alloc
    fn = SOP1.get(name)
    if fn is None:
        raise unsupported(inst, pc)
    ra = _reader(inst, "ssrc0")
    bits = info["sdst"][0] if "sdst" in info else 32
    write = _dest_writer(sdst, bits)
    wide = bits == 64

    def run(st: WaveState) -> None:
        old = (st.s[sdst] | (st.s[sdst + 1] << 32)) if wide else st.s[sdst]
        value, scc = fn(ra(st), old, st.scc)
        write(st, value)
        if scc is not None:
            st.scc = scc
    return run


def _compile_saveexec(inst: Inst, pc: int, name: str) -> Op:
    op = name[2:].rsplit("_", 2)[0]
    fn = SAVEEXEC[op]
    wrexec = "wrexec" in name
    ra = _reader(inst, "ssrc0")
    sdst = inst.fields["sdst"]

    def run(st: WaveState) -> None:
        old = st.exec_value
        new = fn(ra(st), old) & st.full_mask
        st.set_exec(new)
        st.write_mask(sdst, new if wrexec else old)
        st.scc = int(new != 0)
    return run


def _compile_movrel(inst: Inst, pc: int, name: str) -> Op:
    wide = name.endswith("b64")
    src, dst = inst.fields["ssrc0"], inst.fields["sdst"]
    count = 2 if wide else 1

    def run(st: WaveState) -> None:
        m0 = st.m0
        s = src + (m0 if name != "s_movreld_b32" and name != "s_movreld_b64" else 0)
        d = dst + (m0 if name.startswith("s_movreld") or name == "s_movrelsd_2_b32" else 0)
        values = [st.s[s + i] for i in range(count)]
        for i, value in enumerate(values):
            st.write_s(d + i, value)
    return run


def _compile_pc_op(inst: Inst, pc: int, name: str, index_of: Callable[[int], int]) -> Op:
    sdst = inst.fields.get("sdst")
    next_pc = pc + inst.size()
    if name == "s_getpc_b64":
        def run_getpc(st: WaveState) -> None:
            st.write_s(sdst, next_pc & M32)
            st.write_s(sdst + 1, next_pc >> 32)
        return run_getpc
    ra = _reader(inst, "ssrc0")

    def run_jump(st: WaveState) -> int:
        # A PC write jumps: the target is the next instruction, with no increment after the write.
        target = ra(st) & 0xFFFFFFFFFFFF
        if name == "s_swappc_b64":
            st.write_s(sdst, next_pc & M32)
            st.write_s(sdst + 1, next_pc >> 32)
        return index_of(target)
    return run_jump


def compile_sopc(inst: Inst, pc: int) -> Op:
    """A closure executing one SOPC compare (writes SCC)."""
    fn = SOPC.get(canonical(inst))
    if fn is None:
        raise unsupported(inst, pc)
    ra, rb = _reader(inst, "ssrc0"), _reader(inst, "ssrc1")

    def run(st: WaveState) -> None:
        st.scc = int(fn(ra(st), rb(st)))
    return run


def compile_sopk(inst: Inst, pc: int, index_of: Callable[[int], int]) -> Op:
    """A closure executing one SOPK instruction (16-bit immediate forms, s_call, s_getreg/s_setreg, s_waitcnt_*)."""
    name, fields = canonical(inst), inst.fields
    imm = fields["simm16"] & 0xFFFF
    simm = _sext(imm, 16)
    sdst = fields.get("sdst", 0)
    if name == "s_movk_i32":
        return lambda st: st.write_s(sdst, simm)
    if name == "s_cmovk_i32":
        return lambda st: st.write_s(sdst, simm) if st.scc else None
    if name.startswith("s_cmpk_"):
        cond = name.split("_")[2]
        signed = name.endswith("i32")
        fn = SOPC[f"s_cmp_{cond}_{'i32' if signed else 'u32'}"]
        k = simm & M32 if signed else imm

        def run_cmp(st: WaveState) -> None:
            st.scc = int(fn(st.s[sdst], k))
        return run_cmp
    if name == "s_addk_i32":
        def run_addk(st: WaveState) -> None:
            total = _s32(st.s[sdst]) + simm
            st.scc = int(not -(1 << 31) <= total < (1 << 31))
            st.write_s(sdst, total)
        return run_addk
    if name == "s_mulk_i32":
        return lambda st: st.write_s(sdst, _s32(st.s[sdst]) * simm)
    if name == "s_call_b64":
        next_pc = pc + 4
        target = pc + 4 + simm * 4

        def run_call(st: WaveState) -> int:
            st.write_s(sdst, next_pc & M32)
            st.write_s(sdst + 1, next_pc >> 32)
            return index_of(target)
        return run_call
    if name == "s_getreg_b32":
        # Hardware registers (mode, status, ids) are not modelled: reads return 0 (documented).
        return lambda st: st.write_s(sdst, 0)
    if name in ("s_setreg_b32", "s_setreg_imm32_b32", "s_version") or name.startswith("s_waitcnt"):
        return lambda st: None
    raise unsupported(inst, pc)


SOPP_NOPS = ("s_nop", "s_waitcnt", "s_delay_alu", "s_clause", "s_sendmsg", "s_sendmsghalt", "s_setprio", "s_sleep", "s_icache_inv",
             "s_waitcnt_depctr", "s_set_inst_prefetch_distance", "s_wait_idle", "s_wait_event", "s_ttracedata", "s_ttracedata_imm",
             "s_incperflevel", "s_decperflevel", "s_round_mode", "s_denorm_mode", "s_setkill", "s_wakeup", "s_barrier_leave",
             "s_set_valu_coexec_mode",
             # Branches on the debugger's status bits: no debugger is attached, so they are never taken.
             "s_cbranch_cdbgsys", "s_cbranch_cdbguser", "s_cbranch_cdbgsys_or_user", "s_cbranch_cdbgsys_and_user")
BRANCHES: dict[str, Callable[[WaveState], bool]] = {
    "s_branch": lambda st: True, "s_cbranch_scc0": lambda st: st.scc == 0, "s_cbranch_scc1": lambda st: st.scc != 0,
    "s_cbranch_vccz": lambda st: st.vcc == 0, "s_cbranch_vccnz": lambda st: st.vcc != 0,
    "s_cbranch_execz": lambda st: st.exec_value == 0, "s_cbranch_execnz": lambda st: st.exec_value != 0,
}


def compile_sopp(inst: Inst, pc: int, index_of: Callable[[int], int]) -> Op:
    """A closure executing one SOPP instruction: branches return the target index, s_endpgm/s_barrier their codes."""
    name = canonical(inst)
    if name in SOPP_NOPS or name.startswith("s_wait") or name == "s_barrier_wait":
        # Counter waits and dependency hints (s_waitcnt, RDNA4's s_wait_*): instructions complete in order here.
        return lambda st: None
    if name in ("s_endpgm", "s_endpgm_saved", "s_endpgm_ordered_ps_done"):
        return lambda st: END
    if name == "s_barrier":
        return lambda st: BARRIER
    if name in BRANCHES:
        cond = BRANCHES[name]
        target = index_of(pc + 4 + _sext(inst.fields["simm16"], 16) * 4)
        if name == "s_branch":
            return lambda st: target
        return lambda st: target if cond(st) else None
    if name in ("s_code_end", "s_trap", "s_sethalt"):
        def run_stop(st: WaveState) -> None:
            raise EmulatorError(f"wave reached {name} at pc {pc:#x}; the program has no s_endpgm on this path")
        return run_stop
    raise unsupported(inst, pc)

