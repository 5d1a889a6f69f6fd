"""Floating-point helpers the VALU semantics share: conversions with the hardware's rounding and saturation rules."""

import numpy as np

F32, F64, U32, I32, U64 = np.float32, np.float64, np.uint32, np.int32, np.uint64


def fma(a, b, c, dtype: type = np.float32):
    """a*b+c rounded once to `dtype` for f16/f32: the product of two f32 is exact in f64 (a second rounding of the sum
    in f64 can differ from a true fused result only in rare halfway cases, documented in the README)."""
    return (np.asarray(a, F64) * np.asarray(b, F64) + np.asarray(c, F64)).astype(dtype)


def fma_wide(a, b, c):
    """a*b+c in f64, for the writer to round once to the destination precision (f16/f32: the product is exact in f64)."""
    return np.multiply(a, b, dtype=F64) + c


def to_int(x, lo: int, hi: int, dtype: type):
    """Float to integer as V_CVT_*: truncate toward zero, saturate to [lo, hi], NaN becomes 0."""
    x = np.asarray(x, F64)
    out = np.trunc(np.nan_to_num(x, nan=0.0, posinf=hi, neginf=lo))
    return np.clip(out, lo, hi).astype(dtype)


def f32_to_f16_rtz(x) -> np.ndarray:
    """f32 to f16 rounding toward zero (V_CVT_PK_RTZ_F16_F32): round to nearest, then step back one ulp if that
    rounding moved away from zero (this also turns an overflow to infinity into the largest finite half)."""
    x = np.asarray(x, F32)
    rounded = x.astype(np.float16)
    bits = rounded.view(np.uint16).copy()
    away = np.abs(rounded.astype(F32)) > np.abs(x)
    bits[away] -= 1
    return bits.view(np.float16)


def bf16_to_f32(bits) -> np.ndarray:
    """bf16 bit patterns (uint16) as float32 values."""
    return (np.asarray(bits, np.uint32) << np.uint32(16)).view(F32)


def _minifloat_table(exp_bits: int, man_bits: int, specials: str) -> np.ndarray:
    """Values of every code of a sign/exponent/mantissa float narrower than 16 bits, as float64. `specials` says what the
    top exponent holds: "ieee" (infinities and NaNs, OCP E5M2 "bf8"), "nan" (only all-ones is NaN, OCP E4M3 "fp8") or
    "none" (all finite: the OCP MX E2M3 "fp6", E3M2 "bf6" and E2M1 "fp4" formats)."""
    bias = (1 << (exp_bits - 1)) - 1
    codes = np.arange(1 << (1 + exp_bits + man_bits))
    exponent, mantissa = (codes >> man_bits) & ((1 << exp_bits) - 1), codes & ((1 << man_bits) - 1)
    fraction = mantissa / (1 << man_bits)
    magnitude = np.where(exponent == 0, fraction * 2.0 ** (1 - bias), (1 + fraction) * 2.0 ** (exponent - bias))
    top = (1 << exp_bits) - 1
    if specials == "ieee":
        magnitude = np.where(exponent == top, np.where(mantissa == 0, np.inf, np.nan), magnitude)
    elif specials == "nan":
        magnitude = np.where((exponent == top) & (mantissa == (1 << man_bits) - 1), np.nan, magnitude)
    return np.where(codes >> (exp_bits + man_bits), -magnitude, magnitude)


# RDNA4 (gfx12) WMMA and gfx950 MFMA read OCP fp8/bf8 (gfx940-942 use the FNUZ variants instead; README: deviations).
FP8_VALUES, BF8_VALUES = _minifloat_table(4, 3, "nan"), _minifloat_table(5, 2, "ieee")
FP6_VALUES, BF6_VALUES, FP4_VALUES = _minifloat_table(2, 3, "none"), _minifloat_table(3, 2, "none"), _minifloat_table(2, 1, "none")


def f32_to_bf16(x) -> np.ndarray:
    """float32 values as bf16 bit patterns, rounded to nearest even (NaN stays a quiet NaN)."""
    bits = np.asarray(x, F32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = np.isnan(np.asarray(x, F32))
    return np.where(nan, (bits >> np.uint32(16)) | np.uint32(0x40), rounded).astype(np.uint16)


def fract(x):
    """x - floor(x) in the operand's precision (V_FRACT_*)."""
    x = np.asarray(x)
    return x - np.floor(x)


def minimum(a, b):
    """IEEE 754-2019 minimum: NaN if either operand is NaN, and -0 below +0."""
    return np.where(a == b, np.where(np.signbit(a), a, b), np.minimum(a, b))


def maximum(a, b):
    """IEEE 754-2019 maximum: NaN if either operand is NaN, and +0 above -0."""
    return np.where(a == b, np.where(np.signbit(a), b, a), np.maximum(a, b))


def med3(a, b, c):
    """Median of three floats; with a NaN operand the hardware returns min3 (IEEE mode)."""
    anynan = np.isnan(a) | np.isnan(b) | np.isnan(c)
    med = np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))
    return np.where(anynan, np.fmin(np.fmin(a, b), c), med)


def classify(x, mask) -> np.ndarray:
    """V_CMP_CLASS: is x in any class whose bit is set in `mask` (0 sNaN, 1 qNaN, 2 -inf, 3 -normal, 4 -denormal,
    5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf)."""
    x = np.asarray(x)
    info = np.finfo(x.dtype)
    mask = np.asarray(mask, np.uint32)
    neg = np.signbit(x)
    mag = np.abs(x)
    nan = np.isnan(x)
    raw = x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])
    quiet_bit = {2: 1 << 9, 4: 1 << 22, 8: 1 << 51}[x.dtype.itemsize]
    quiet = (raw & raw.dtype.type(quiet_bit)) != 0
    inf = np.isinf(x)
    zero = mag == 0
    denorm = (mag < info.tiny) & ~zero
    normal = ~nan & ~inf & ~zero & ~denorm
    classes = [nan & ~quiet, nan & quiet, inf & neg, normal & neg, denorm & neg, zero & neg, zero & ~neg, denorm & ~neg,
               normal & ~neg, inf & ~neg]
    out = np.zeros(x.shape, bool)
    for bit, cls in enumerate(classes):
        out |= cls & (((mask >> np.uint32(bit)) & np.uint32(1)) != 0)
    return out


def div_fixup(quotient, den, num):
    """V_DIV_FIXUP: special cases of num/den (NaN, zero and infinite operands); otherwise the quotient with the sign of
    num/den."""
    q, d, n = np.asarray(quotient), np.asarray(den), np.asarray(num)
    sign_neg = np.signbit(d) ^ np.signbit(n)
    inf = np.where(sign_neg, -np.inf, np.inf).astype(q.dtype)
    zero = np.where(sign_neg, -0.0, 0.0).astype(q.dtype)
    out = np.where(sign_neg, -np.abs(q), np.abs(q))
    out = np.where((np.abs(d) == np.inf) | (n == 0), zero, out)
    out = np.where((d == 0) | (np.abs(n) == np.inf), inf, out)
    out = np.where(((d == 0) & (n == 0)) | ((np.abs(d) == np.inf) & (np.abs(n) == np.inf)), np.nan, out)
    out = np.where(np.isnan(d), d, out)
    return np.where(np.isnan(n), n, out).astype(q.dtype)


def _two_over_pi_bits(bits: int) -> int:
    """floor(2/pi * 2^bits), from pi by Machin's formula in exact integer arithmetic (guard bits absorb the error)."""
    guard = 64
    one = 1 << (bits + guard)

    def arctan_inverse(n: int) -> int:
        total, term, k, n2 = 0, one // n, 1, n * n
        while term:
            total += term // k if (k // 2) % 2 == 0 else -(term // k)
            term //= n2
            k += 2
        return total
    pi = 4 * (4 * arctan_inverse(5) - arctan_inverse(239))
    return ((2 * one * one) // pi) >> guard


# The 1201 fraction bits of 2/pi that V_TRIG_PREOP_F64 reads (b_1200 is the bit worth 2^-1).
TWO_OVER_PI = _two_over_pi_bits(1201)


def trig_preop(x, segment) -> np.ndarray:
    """V_TRIG_PREOP_F64: 53 bits of 2/pi starting `shift` bits below the binary point, as a double scaled by
    2^(-53 - shift), with shift = 53 * S1[4:0] plus how far S0's exponent exceeds 1077 (AMD's pseudocode; results of
    exponents >= 1968 are scaled up by 2^128)."""
    x, segment = np.broadcast_arrays(np.asarray(x, F64), np.asarray(segment, U32))
    out = np.empty(x.shape, F64)
    for i, (value, seg) in enumerate(zip(x.reshape(-1).tolist(), segment.reshape(-1).tolist(), strict=True)):
        exponent = (int(np.float64(value).view(U64)) >> 52) & 0x7FF
        shift = (seg & 31) * 53 + max(exponent - 1077, 0)
        down = 1201 - 53 - shift
        chunk = (TWO_OVER_PI >> down if down >= 0 else TWO_OVER_PI << -down) & ((1 << 53) - 1)
        out.reshape(-1)[i] = np.ldexp(float(chunk), -53 - shift + (128 if exponent >= 1968 else 0))
    return out
