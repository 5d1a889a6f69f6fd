"""VALU semantics as data: op name (without _e32/_e64) -> a numpy function of the source values.

Sources arrive in the data types the opcode tables give them (F32 as float32, U32 as uint32, I32 as int32, ...); the
result is cast to the destination type by the writer, so integer results wrap and float results round once.
Ops that need the wave (lane ids, masks) are in `LANE_OPS` and take the `WaveState` first.
"""

import numpy as np

from . import fp

U8, U16, U32, U64 = np.uint8, np.uint16, np.uint32, np.uint64
I16, I32, I64, F16, F32, F64 = np.int16, np.int32, np.int64, np.float16, np.float32, np.float64
TWO_PI = 2.0 * np.pi


def _u(x, dtype=U32):
    return np.asarray(x).astype(dtype, copy=False)


def _z64(x):
    """A 32-bit operand zero-extended to uint64 (signed I32 sources must not sign-extend into the high bits)."""
    return np.asarray(x).astype(U32).astype(U64)


def _sh(x, bits: int):
    """A shift amount: the low log2(bits) bits of the operand, as in every VALU shift."""
    return _u(x) & U32(bits - 1)


def _sext(x, width: int):
    """Sign-extend the low `width` bits of a uint32 value to int32 (width 0..32)."""
    x = _u(x, I64) & ((1 << width) - 1) if width else np.zeros_like(_u(x, I64))
    return np.where(x >= (1 << (width - 1)) if width else False, x - (1 << width), x)


def _bfe_u(x, off, width):
    off, width = _u(off) & U32(31), _u(width) & U32(31)
    mask = (U64(1) << width.astype(U64)) - U64(1)
    return ((_z64(x) >> off.astype(U64)) & mask).astype(U32)


def _bfe_i(x, off, width):
    width = _u(width) & U32(31)
    raw = _bfe_u(x, off, width).astype(I64)
    sign = np.where(width > 0, I64(1) << (width.astype(I64) - 1), 0)
    return np.where((width > 0) & ((raw & sign) != 0), raw - (sign << 1), raw).astype(I32)


def _clz(x):
    x = _z64(x)
    out = np.full(x.shape, -1, I32)
    nz = x != 0
    out[nz] = 31 - np.floor(np.log2(x[nz].astype(F64))).astype(I32)
    return out


def _ctz(x):
    x = _z64(x)
    out = np.full(x.shape, -1, I32)
    nz = x != 0
    low = x[nz] & (~x[nz] + U64(1))
    out[nz] = np.round(np.log2(low.astype(F64))).astype(I32)
    return out


def _cls(x):
    x = _u(x)
    flipped = np.where(x >> U32(31), ~x, x)
    out = _clz(flipped)
    return np.where(out < 0, -1, out)


def _brev(x):
    x = _u(x)
    bits = np.unpackbits(np.atleast_1d(x).view(U8).reshape(-1, 4), axis=1, bitorder="little")
    return bits.dot(U64(1) << np.arange(31, -1, -1, dtype=U64)).astype(U32)


def _popcount(x):
    x = np.atleast_1d(_u(x))
    return np.unpackbits(x.view(U8).reshape(-1, 4), axis=1).sum(axis=1).astype(U32)


def _mul24(a, b, signed: bool):
    if signed:
        return _sext(a, 24) * _sext(b, 24)
    return (_u(a, I64) & 0xFFFFFF) * (_u(b, I64) & 0xFFFFFF)


def _perm(s0, s1, sel):
    """V_PERM_B32: each result byte picks a byte of {s0, s1} (0..7), a sign fill (8..11), 0x00 (12) or 0xff (13..)."""
    both = (_z64(s0) << U64(32)) | _z64(s1)
    sel = np.atleast_1d(_u(sel))
    both = np.broadcast_to(both, sel.shape)
    out = np.zeros(sel.shape, U32)
    for i in range(4):
        s = (sel >> U32(8 * i)) & U32(0xFF)
        byte = ((both >> (np.minimum(s, 7).astype(U64) * U64(8))) & U64(0xFF)).astype(U32)
        sign_bit = np.array([15, 31, 47, 63], U64)[np.clip(s.astype(np.int64) - 8, 0, 3)]
        sign = np.where((both >> sign_bit) & U64(1), U32(0xFF), U32(0))
        value = np.where(s < 8, byte, np.where(s < 12, sign, np.where(s == 12, U32(0), U32(0xFF))))
        out |= value.astype(U32) << U32(8 * i)
    return out


def _absdiff(x, y):
    return np.where(x > y, x - y, y - x)


def _sad_u8(a, b, c):
    diff = np.zeros(np.broadcast(a, b).shape, U32)
    for i in range(4):
        x, y = (_u(a) >> U32(8 * i)) & U32(0xFF), (_u(b) >> U32(8 * i)) & U32(0xFF)
        diff = diff + _absdiff(x, y)
    return diff + _u(c)


def _ldexp(x, e):
    return np.ldexp(x, np.clip(_u(e, I64), -2000, 2000).astype(I32))


def _frexp_mant(x):
    mant, _ = np.frexp(x)
    return np.where(np.isfinite(x), mant, x)


def _frexp_exp(x):
    _, exp = np.frexp(x)
    return np.where(np.isfinite(x), exp, 0)


def _cvt_off_f32_i4(x):
    return (_sext(_u(x) & U32(0xF), 4) / 16.0).astype(F32)


def _norm(x, lo: int, scale: int, dtype: type):
    """Clamp to [lo, 1], scale and round to nearest even (the *_norm_* conversions); NaN becomes 0."""
    return fp.to_int(np.rint(np.clip(np.asarray(x, F64), lo, 1) * scale), -scale - 1 if lo else 0, scale, dtype)


def _f16_halves(x) -> tuple[np.ndarray, np.ndarray]:
    raw = _u(x)
    return (raw & U32(0xFFFF)).astype(U16).view(F16).astype(F64), (raw >> U32(16)).astype(U16).view(F16).astype(F64)


def _bf16_halves(x) -> tuple[np.ndarray, np.ndarray]:
    raw = _u(x)
    return fp.bf16_to_f32(raw & U32(0xFFFF)).astype(F64), fp.bf16_to_f32(raw >> U32(16)).astype(F64)


def _dot2_f16(a, b, c):
    (alo, ahi), (blo, bhi) = _f16_halves(a), _f16_halves(b)
    return alo * blo + ahi * bhi + np.asarray(c, F64)


def _dot2_bf16(a, b, c):
    (alo, ahi), (blo, bhi) = _bf16_halves(a), _bf16_halves(b)
    return fp.f32_to_bf16((alo * blo + ahi * bhi + fp.bf16_to_f32(c)).astype(F32))


def _cube_major(x, y, z) -> tuple[np.ndarray, np.ndarray]:
    """Whether z, else y, is the major axis of a cube-map coordinate (ties go to z, then y)."""
    z_major = (np.abs(z) >= np.abs(x)) & (np.abs(z) >= np.abs(y))
    return z_major, ~z_major & (np.abs(y) >= np.abs(x))


def _cubeid(x, y, z):
    z_major, y_major = _cube_major(x, y, z)
    face = np.where(z_major, np.where(z < 0, 5, 4), np.where(y_major, np.where(y < 0, 3, 2), np.where(x < 0, 1, 0)))
    return face.astype(np.asarray(x).dtype)


def _cubesc(x, y, z):
    z_major, y_major = _cube_major(x, y, z)
    return np.where(z_major, np.where(z < 0, -x, x), np.where(y_major, x, np.where(x < 0, z, -z)))


def _cubetc(x, y, z):
    z_major, y_major = _cube_major(x, y, z)
    return np.where(z_major, -y, np.where(y_major, np.where(y < 0, -z, z), -y))


def _cubema(x, y, z):
    z_major, y_major = _cube_major(x, y, z)
    return np.where(z_major, z, np.where(y_major, y, x)) * 2


def _min_f(a, b):
    return np.fmin(a, b)


def _max_f(a, b):
    return np.fmax(a, b)


def _mul_dx9(a, b):
    return np.where((a == 0) | (b == 0), np.zeros((), a.dtype if hasattr(a, "dtype") else F32), a * b)


def _pack_halves(lo, hi):
    return _u(np.asarray(lo).view(U16) if np.asarray(lo).dtype == F16 else lo, U32) | (
        _u(np.asarray(hi).view(U16) if np.asarray(hi).dtype == F16 else hi, U32) << U32(16))


# Float ops: f32 and f16 share semantics; the numpy dtype of the sources decides the precision.
FLOAT_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "subrev": lambda a, b: b - a, "mul": lambda a, b: a * b,
    "min": _min_f, "max": _max_f, "mul_dx9_zero": _mul_dx9,
    "fma": fp.fma_wide, "fmac": fp.fma_wide, "fmaak": fp.fma_wide, "fmamk": fp.fma_wide,
    # gfx9 MAD/MAC are unfused: the product rounds to the operand precision before the add.
    "mad": lambda a, b, c: a * b + c, "mac": lambda a, b, c: a * b + c, "madak": lambda a, b, c: a * b + c,
    "madmk": lambda a, b, c: a * b + c,
    "fma_dx9_zero": lambda a, b, c: np.where((a == 0) | (b == 0), c, fp.fma(a, b, c, F32)),
    "fmac_dx9_zero": lambda a, b, c: np.where((a == 0) | (b == 0), c, fp.fma(a, b, c, F32)),
    "min3": lambda a, b, c: np.fmin(np.fmin(a, b), c), "max3": lambda a, b, c: np.fmax(np.fmax(a, b), c), "med3": fp.med3,
    "maxmin": lambda a, b, c: np.fmin(np.fmax(a, b), c), "minmax": lambda a, b, c: np.fmax(np.fmin(a, b), c),
    "trunc": np.trunc, "ceil": np.ceil, "floor": np.floor, "rndne": np.rint, "fract": fp.fract,
    "sqrt": np.sqrt, "rcp": lambda x: np.divide(np.ones((), np.asarray(x).dtype), x), "rcp_iflag": lambda x: np.divide(F32(1), x),
    "rsq": lambda x: np.divide(np.ones((), np.asarray(x).dtype), np.sqrt(x)),
    "exp": np.exp2, "log": np.log2,
    "sin": lambda x: np.sin(np.asarray(x, F64) * TWO_PI).astype(np.asarray(x).dtype),
    "cos": lambda x: np.cos(np.asarray(x, F64) * TWO_PI).astype(np.asarray(x).dtype),
    "ldexp": _ldexp, "frexp_mant": _frexp_mant,
    # RDNA4 spells the IEEE maxNum/minNum ops *_num; maximum/minimum propagate NaN.
    "max_num": _max_f, "min_num": _min_f, "maximum": fp.maximum, "minimum": fp.minimum,
    "max3_num": lambda a, b, c: np.fmax(np.fmax(a, b), c), "min3_num": lambda a, b, c: np.fmin(np.fmin(a, b), c), "med3_num": fp.med3,
    "maxmin_num": lambda a, b, c: np.fmin(np.fmax(a, b), c), "minmax_num": lambda a, b, c: np.fmax(np.fmin(a, b), c),
    "div_fixup": fp.div_fixup, "div_fmas": fp.fma_wide,
    # Cube-map coordinates (AMD's pseudocode): face id, S and T on the face, and twice the major axis.
    "cubeid": _cubeid, "cubesc": _cubesc, "cubetc": _cubetc, "cubema": _cubema, "trig_preop": fp.trig_preop,
    # IEEE 754-2019 minimum/maximum: a NaN operand gives NaN (RDNA4).
    "maximum3": lambda a, b, c: fp.maximum(fp.maximum(a, b), c), "minimum3": lambda a, b, c: fp.minimum(fp.minimum(a, b), c),
    "maximumminimum": lambda a, b, c: fp.minimum(fp.maximum(a, b), c), "minimummaximum": lambda a, b, c: fp.maximum(fp.minimum(a, b), c),
}
FLOAT_SUFFIXES = ("_f32", "_f16", "_f64")

INT_OPS = {
    "v_add_nc_u32": lambda a, b: a + b, "v_sub_nc_u32": lambda a, b: a - b, "v_subrev_nc_u32": lambda a, b: b - a,
    "v_add_nc_i32": lambda a, b: _u(a, I64) + b, "v_sub_nc_i32": lambda a, b: _u(a, I64) - b,
    "v_add_nc_u16": lambda a, b: a + b, "v_sub_nc_u16": lambda a, b: a - b, "v_subrev_nc_u16": lambda a, b: b - a,
    "v_add_nc_i16": lambda a, b: a + b,
    "v_sub_nc_i16": lambda a, b: a - b, "v_mul_lo_u16": lambda a, b: a * b,
    "v_min_i32": np.minimum, "v_max_i32": np.maximum, "v_min_u32": np.minimum, "v_max_u32": np.maximum,
    "v_min_i16": np.minimum, "v_max_i16": np.maximum, "v_min_u16": np.minimum, "v_max_u16": np.maximum,
    "v_min3_i32": lambda a, b, c: np.minimum(np.minimum(a, b), c), "v_min3_u32": lambda a, b, c: np.minimum(np.minimum(a, b), c),
    "v_max3_i32": lambda a, b, c: np.maximum(np.maximum(a, b), c), "v_max3_u32": lambda a, b, c: np.maximum(np.maximum(a, b), c),
    "v_min3_i16": lambda a, b, c: np.minimum(np.minimum(a, b), c), "v_min3_u16": lambda a, b, c: np.minimum(np.minimum(a, b), c),
    "v_max3_i16": lambda a, b, c: np.maximum(np.maximum(a, b), c), "v_max3_u16": lambda a, b, c: np.maximum(np.maximum(a, b), c),
    "v_med3_i32": lambda a, b, c: np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c)),
    "v_med3_u32": lambda a, b, c: np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c)),
    "v_med3_i16": lambda a, b, c: np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c)),
    "v_med3_u16": lambda a, b, c: np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c)),
    "v_maxmin_i32": lambda a, b, c: np.minimum(np.maximum(a, b), c), "v_minmax_i32": lambda a, b, c: np.maximum(np.minimum(a, b), c),
    "v_maxmin_u32": lambda a, b, c: np.minimum(np.maximum(a, b), c), "v_minmax_u32": lambda a, b, c: np.maximum(np.minimum(a, b), c),
    "v_lshlrev_b32": lambda s, x: np.left_shift(x, s & 31, dtype=U32), "v_lshrrev_b32": lambda s, x: np.right_shift(x, s & 31, dtype=U32),
    "v_ashrrev_i32": lambda s, x: np.right_shift(x, s & 31),
    "v_lshlrev_b16": lambda s, x: _u(x, U16) << (_u(s, U16) & U16(15)), "v_lshrrev_b16": lambda s, x: _u(x, U16) >> (_u(s, U16) & U16(15)),
    "v_ashrrev_i16": lambda s, x: np.asarray(x).view(I16) >> (_u(s, I16) & I16(15)) if np.ndim(x) else I16(x) >> (I16(s) & I16(15)),
    "v_lshlrev_b64": lambda s, x: _u(x, U64) << (_u(s, U64) & U64(63)), "v_lshrrev_b64": lambda s, x: _u(x, U64) >> (_u(s, U64) & U64(63)),
    "v_lshl_add_u64": lambda a, s, c: (_u(a, U64) << (_u(s, U64) & U64(63))) + _u(c, U64),
    "v_ashrrev_i64": lambda s, x: _u(x, I64) >> (_u(s, I64) & I64(63)),
    "v_and_b32": lambda a, b: a & b, "v_or_b32": lambda a, b: a | b, "v_xor_b32": lambda a, b: a ^ b, "v_xnor_b32": lambda a, b: ~(a ^ b),
    "v_and_b16": lambda a, b: a & b, "v_or_b16": lambda a, b: a | b, "v_xor_b16": lambda a, b: a ^ b, "v_not_b16": lambda a: ~a,
    "v_not_b32": lambda a: ~_u(a), "v_bfrev_b32": _brev, "v_clz_i32_u32": _clz, "v_ctz_i32_b32": _ctz, "v_cls_i32": _cls,
    "v_mul_lo_u32": lambda a, b: _z64(a) * _z64(b), "v_mul_hi_u32": lambda a, b: (_z64(a) * _z64(b)) >> U64(32),
    "v_mul_hi_i32": lambda a, b: (_u(a, I64) * _u(b, I64)) >> I64(32),
    "v_mul_i32_i24": lambda a, b: _mul24(a, b, True), "v_mul_u32_u24": lambda a, b: _mul24(a, b, False),
    "v_mul_hi_i32_i24": lambda a, b: _mul24(a, b, True) >> 32, "v_mul_hi_u32_u24": lambda a, b: _mul24(a, b, False) >> 32,
    "v_mad_i32_i24": lambda a, b, c: _mul24(a, b, True) + _u(c, I64), "v_mad_u32_u24": lambda a, b, c: _mul24(a, b, False) + _u(c, I64),
    "v_mad_u32_u16": lambda a, b, c: _u(a, U32) * _u(b, U32) + c, "v_mad_i32_i16": lambda a, b, c: _u(a, I32) * _u(b, I32) + c,
    "v_mad_u16": lambda a, b, c: a * b + c, "v_mad_i16": lambda a, b, c: a * b + c,
    "v_bfe_u32": _bfe_u, "v_bfe_i32": _bfe_i, "v_bfi_b32": lambda a, b, c: (_u(a) & b) | (~_u(a) & c),
    "v_bfm_b32": lambda w, o: ((U64(1) << (_z64(w) & U64(31))) - U64(1)) << (_z64(o) & U64(31)),
    "v_alignbit_b32": lambda a, b, c: ((_z64(a) << U64(32)) | _z64(b)) >> (_z64(c) & U64(31)),
    "v_alignbyte_b32": lambda a, b, c: ((_z64(a) << U64(32)) | _z64(b)) >> ((_z64(c) & U64(3)) * U64(8)),
    "v_add3_u32": lambda a, b, c: _z64(a) + b + c, "v_xad_u32": lambda a, b, c: (_u(a) ^ b) + c,
    "v_lshl_add_u32": lambda a, s, c: (_u(a) << _sh(s, 32)) + c, "v_add_lshl_u32": lambda a, b, s: (_u(a) + b) << _sh(s, 32),
    "v_lshl_or_b32": lambda a, s, c: (_u(a) << _sh(s, 32)) | c, "v_and_or_b32": lambda a, b, c: (_u(a) & b) | c,
    "v_or3_b32": lambda a, b, c: _u(a) | b | c, "v_xor3_b32": lambda a, b, c: _u(a) ^ b ^ c,
    "v_perm_b32": _perm, "v_sad_u8": _sad_u8, "v_msad_u8": _sad_u8,
    "v_sad_u32": lambda a, b, c: np.where(_u(a) > b, _u(a) - b, _u(b) - a) + c,
    "v_sad_u16": lambda a, b, c: _absdiff(_u(a) & U32(0xFFFF), _u(b) & U32(0xFFFF)) + _absdiff(_u(a) >> U32(16), _u(b) >> U32(16)) + c,
    "v_lerp_u8": lambda a, b, c: sum(((((_u(a) >> U32(8 * i)) & U32(255)) + ((_u(b) >> U32(8 * i)) & U32(255))
                                       + ((_u(c) >> U32(8 * i)) & U32(1))) >> U32(1)) << U32(8 * i) for i in range(4)),
    "v_bcnt_u32_b32": lambda a, b: _popcount(a) + b,
    "v_mov_b32": lambda a: a, "v_mov_b16": lambda a: a, "v_mov_b64": lambda a: a,
    "v_cvt_f32_i32": lambda a: np.asarray(a, F64).astype(F32), "v_cvt_f32_u32": lambda a: np.asarray(a, F64).astype(F32),
    "v_cvt_u32_f32": lambda a: fp.to_int(a, 0, 0xFFFFFFFF, U32), "v_cvt_i32_f32": lambda a: fp.to_int(a, -(1 << 31), (1 << 31) - 1, I32),
    "v_cvt_u32_f64": lambda a: fp.to_int(a, 0, 0xFFFFFFFF, U32), "v_cvt_i32_f64": lambda a: fp.to_int(a, -(1 << 31), (1 << 31) - 1, I32),
    "v_cvt_f64_i32": lambda a: np.asarray(a, F64), "v_cvt_f64_u32": lambda a: np.asarray(a, F64),
    "v_cvt_f32_f64": lambda a: np.asarray(a, F64).astype(F32), "v_cvt_f64_f32": lambda a: np.asarray(a, F64),
    "v_cvt_f16_f32": lambda a: np.asarray(a, F32).astype(F16), "v_cvt_f32_f16": lambda a: np.asarray(a, F32),
    "v_cvt_f32_bf16": lambda a: fp.bf16_to_f32(_u(a) & U32(0xFFFF)),
    "v_prng_b32": lambda a: (_u(a) << U32(1)) ^ np.where(_u(a) >> U32(31), U32(197), U32(0)),
    "v_cvt_pk_f16_f32": lambda a, b: _pack_halves(np.asarray(a, F32).astype(F16), np.asarray(b, F32).astype(F16)),
    "v_cvt_pk_bf16_f32": lambda a, b: _pack_halves(fp.f32_to_bf16(a), fp.f32_to_bf16(b)),
    "v_cvt_f16_u16": lambda a: np.asarray(a, F32).astype(F16), "v_cvt_f16_i16": lambda a: np.asarray(a, F32).astype(F16),
    "v_cvt_u16_f16": lambda a: fp.to_int(a, 0, 0xFFFF, U16), "v_cvt_i16_f16": lambda a: fp.to_int(a, -(1 << 15), (1 << 15) - 1, I16),
    "v_cvt_i32_i16": lambda a: _u(a, I32), "v_cvt_u32_u16": lambda a: _u(a, U32),
    "v_cvt_floor_i32_f32": lambda a: fp.to_int(np.floor(a), -(1 << 31), (1 << 31) - 1, I32),
    "v_cvt_nearest_i32_f32": lambda a: fp.to_int(np.floor(np.asarray(a, F64) + 0.5), -(1 << 31), (1 << 31) - 1, I32),
    **{f"v_cvt_f32_ubyte{i}": (lambda shift: lambda a: ((_u(a) >> U32(shift)) & U32(255)).astype(F32))(8 * i) for i in range(4)},
    "v_cvt_off_f32_i4": _cvt_off_f32_i4,
    "v_cvt_pk_rtz_f16_f32": lambda a, b: _pack_halves(fp.f32_to_f16_rtz(a), fp.f32_to_f16_rtz(b)),
    "v_pack_b32_f16": _pack_halves,
    "v_cvt_pk_u16_u32": lambda a, b: (_u(np.minimum(a, 0xFFFF))) | (_u(np.minimum(b, 0xFFFF)) << U32(16)),
    "v_cvt_pk_i16_i32": lambda a, b: (np.clip(a, -32768, 32767).astype(I32).astype(U32) & U32(0xFFFF))
                                     | ((np.clip(b, -32768, 32767).astype(I32).astype(U32) & U32(0xFFFF)) << U32(16)),
    "v_cvt_pk_i16_f32": lambda a, b: _pack_halves(fp.to_int(a, -32768, 32767, I16).view(U16), fp.to_int(b, -32768, 32767, I16).view(U16)),
    "v_cvt_pk_u16_f32": lambda a, b: _pack_halves(fp.to_int(a, 0, 65535, U16), fp.to_int(b, 0, 65535, U16)),
    "v_sat_pk_u8_i16": lambda a: (np.clip(_u(a, U32).astype(U16).view(I16), 0, 255).astype(U32)
                                  | (np.clip((_u(a, U32) >> U32(16)).astype(U16).view(I16), 0, 255).astype(U32) << U32(8))),
    "v_cvt_norm_i16_f16": lambda a: _norm(a, -1, 32767, I16), "v_cvt_norm_u16_f16": lambda a: _norm(a, 0, 65535, U16),
    "v_dot2_f16_f16": _dot2_f16, "v_dot2_bf16_bf16": _dot2_bf16,
    "v_sad_hi_u8": lambda a, b, c: (_sad_u8(a, b, 0) << U32(16)) + _u(c),
    "v_frexp_exp_i32_f32": _frexp_exp, "v_frexp_exp_i32_f64": _frexp_exp, "v_frexp_exp_i16_f16": _frexp_exp,
    # Scale in f64: a narrower source type would round the scaled value (32767 is not an f16).
    "v_cvt_pk_norm_i16_f32": lambda a, b: _pack_halves(_norm(a, -1, 32767, I16).view(U16), _norm(b, -1, 32767, I16).view(U16)),
    "v_cvt_pk_norm_u16_f32": lambda a, b: _pack_halves(_norm(a, 0, 65535, U16), _norm(b, 0, 65535, U16)),
    "v_cvt_pk_u8_f32": lambda a, sel, old: (_u(old) & ~(U32(0xFF) << ((_u(sel) & U32(3)) * U32(8))))
                                           | (fp.to_int(np.rint(a), 0, 255, U32) << ((_u(sel) & U32(3)) * U32(8))),
}
# The f16-source packed normalisations share the f32 ones: the clamp and scale do not depend on the source width.
INT_OPS["v_cvt_pk_norm_i16_f16"] = INT_OPS["v_cvt_pk_norm_i16_f32"]
INT_OPS["v_cvt_pk_norm_u16_f16"] = INT_OPS["v_cvt_pk_norm_u16_f32"]
