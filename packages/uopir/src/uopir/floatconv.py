"""Exact conversions between Python floats and the narrow float formats: float16, bfloat16 and the four fp8 formats.

Every conversion rounds to nearest, ties to even, from the exact value of the Python float (a double), so constant
folding matches what hardware does for a single rounding step.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class Fp8Format:
    """The bit layout and special-value rules of one 8-bit float format."""

    name: str
    exp_bits: int
    mant_bits: int
    bias: int
    has_inf: bool  # e5m2 only: exponent all ones with a zero mantissa is +-inf
    fnuz: bool  # "finite, no negative zero": 0x80 is the only NaN, there is no -0 and no inf

    @property
    def max_code(self) -> int:
        """The code (without sign) of the largest finite value."""
        if self.fnuz:
            return 0x7F
        if self.has_inf:  # e5m2: the top exponent is reserved for inf/nan
            return ((1 << self.exp_bits) - 2) << self.mant_bits | ((1 << self.mant_bits) - 1)
        return 0x7E  # e4m3fn: only S.1111.111 is NaN, S.1111.110 = 448 is the largest finite

    @property
    def max_value(self) -> float:
        """The largest finite value."""
        return decode_fp8(self.max_code, self)


FP8_FORMATS: dict[str, Fp8Format] = {
    "float8_e4m3": Fp8Format("float8_e4m3", 4, 3, 7, has_inf=False, fnuz=False),
    "float8_e5m2": Fp8Format("float8_e5m2", 5, 2, 15, has_inf=True, fnuz=False),
    "float8_e4m3fnuz": Fp8Format("float8_e4m3fnuz", 4, 3, 8, has_inf=False, fnuz=True),
    "float8_e5m2fnuz": Fp8Format("float8_e5m2fnuz", 5, 2, 16, has_inf=False, fnuz=True),
}


def decode_fp8(code: int, fmt: Fp8Format) -> float:
    """The value of an fp8 code (0..255) in format `fmt`."""
    code &= 0xFF
    sign = -1.0 if code & 0x80 else 1.0
    if fmt.fnuz and code == 0x80:
        return math.nan
    exp_field = (code >> fmt.mant_bits) & ((1 << fmt.exp_bits) - 1)
    mant = code & ((1 << fmt.mant_bits) - 1)
    if not fmt.fnuz and exp_field == (1 << fmt.exp_bits) - 1:
        if fmt.has_inf:
            return sign * math.inf if mant == 0 else math.nan
        if mant == (1 << fmt.mant_bits) - 1:
            return math.nan
    if exp_field == 0:  # subnormal: no implicit leading one, exponent fixed at the minimum normal exponent
        return sign * math.ldexp(mant, 1 - fmt.bias - fmt.mant_bits)
    return sign * math.ldexp((1 << fmt.mant_bits) | mant, exp_field - fmt.bias - fmt.mant_bits)


def encode_fp8(x: float, fmt: Fp8Format) -> int:
    """The fp8 code nearest to `x` (ties to even); finite values past the range saturate to the largest finite value.

    NaN encodes as NaN; inf encodes as inf in e5m2 and as NaN in the formats without inf (matching jax/ml_dtypes
    for e4m3 and the fnuz convention that 0x80 is the only NaN).
    """
    negative = math.copysign(1.0, x) < 0
    sign = 0x80 if negative else 0
    if math.isnan(x):
        return 0x80 if fmt.fnuz else sign | 0x7F
    if math.isinf(x):
        if fmt.fnuz:
            return 0x80
        return sign | (0x7C if fmt.has_inf else 0x7F)
    a = abs(x)
    if a == 0.0:
        return 0 if fmt.fnuz else sign
    emin = 1 - fmt.bias  # exponent of the smallest normal
    exp = max(math.frexp(a)[1] - 1, emin)
    # scaling by a power of two is exact, and round() on a float rounds half to even
    q = round(math.ldexp(a, fmt.mant_bits - exp))
    if q == 1 << (fmt.mant_bits + 1):  # the mantissa rounded up into the next binade
        exp, q = exp + 1, q >> 1
    if q == 0:
        return 0 if fmt.fnuz else sign
    if q < 1 << fmt.mant_bits:  # still subnormal after rounding
        code = q
    else:
        code = (exp + fmt.bias) << fmt.mant_bits | (q - (1 << fmt.mant_bits))
    code = min(code, fmt.max_code)  # saturate: codes are ordered by magnitude, so anything past the top clamps
    return code | sign


def fp8_round(x: float, fmt: Fp8Format) -> float:
    """`x` rounded to the nearest value representable in `fmt`."""
    return decode_fp8(encode_fp8(x, fmt), fmt)


def float_to_fp16(x: float) -> float:
    """`x` rounded to the nearest float16 (ties to even); overflow gives a signed infinity."""
    try:
        return struct.unpack("<e", struct.pack("<e", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def float_to_bf16_bits(x: float) -> int:
    """The bfloat16 bit pattern nearest to `x` (ties to even, one rounding step from the double); overflow gives inf."""
    if math.isnan(x):
        return 0x7FC0 | (0x8000 if math.copysign(1.0, x) < 0 else 0)
    if math.isinf(x) or x == 0.0:
        return struct.unpack("<I", struct.pack("<f", x))[0] >> 16
    sign = 0x8000 if x < 0 else 0
    a = abs(x)
    emin = -126
    exp = max(math.frexp(a)[1] - 1, emin)
    q = round(math.ldexp(a, 7 - exp))
    if q == 1 << 8:
        exp, q = exp + 1, q >> 1
    if q < 1 << 7:
        return sign | q
    if exp > 127:
        return sign | 0x7F80
    return sign | (exp + 127) << 7 | (q - (1 << 7))


def bf16_bits_to_float(bits: int) -> float:
    """The value of a bfloat16 bit pattern."""
    return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]


def float_to_bf16(x: float) -> float:
    """`x` rounded to the nearest bfloat16 value."""
    return bf16_bits_to_float(float_to_bf16_bits(x))


def float_to_fp32(x: float) -> float:
    """`x` rounded to the nearest float32; overflow gives a signed infinity."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)
