"""dtypes: interning, vectors/pointers, the promotion lattice, and exact narrow-float conversions against oracles."""

import math
import struct
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uopir import AddrSpace, DType, DTypeError, PtrDType, dtypes, least_upper_dtype, to_dtype, truncate
from uopir.dtypes import can_lossless_cast, fp8_to_bits, strong_dtype
from uopir.floatconv import FP8_FORMATS, decode_fp8, float_to_bf16_bits

# ---- independent fp8 oracle: (exponent bits, mantissa bits, bias, kind) straight from the OCP / fnuz specs ----
SPEC = {
    dtypes.fp8e4m3: (4, 3, 7, "fn"),  # no inf, S.1111.111 is NaN
    dtypes.fp8e5m2: (5, 2, 15, "ieee"),  # IEEE-like: inf and NaNs in the top exponent
    dtypes.fp8e4m3fnuz: (4, 3, 8, "fnuz"),  # 0x80 is the only NaN, no -0, no inf
    dtypes.fp8e5m2fnuz: (5, 2, 16, "fnuz"),
}


def oracle_value(code: int, dt) -> Fraction | str:
    """Exact value of an fp8 code as a Fraction, or 'nan' / '+inf' / '-inf'."""
    e_bits, m_bits, bias, kind = SPEC[dt]
    s, e, m = code >> 7, (code >> m_bits) & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
    if kind == "fnuz" and code == 0x80:
        return "nan"
    if kind == "fn" and e == (1 << e_bits) - 1 and m == (1 << m_bits) - 1:
        return "nan"
    if kind == "ieee" and e == (1 << e_bits) - 1:
        return "nan" if m else ("-inf" if s else "+inf")
    frac = Fraction(m, 1 << m_bits) + (1 if e else 0)
    value = frac * Fraction(2) ** ((e if e else 1) - bias)
    return -value if s else value


def finite_codes(dt) -> dict[int, Fraction]:
    return {c: v for c in range(256) if isinstance(v := oracle_value(c, dt), Fraction)}


@pytest.mark.parametrize("dt", dtypes.fp8s)
def test_fp8_decode_matches_spec_for_all_256_codes(dt):
    fmt = FP8_FORMATS[dt.name]
    for code in range(256):
        want, got = oracle_value(code, dt), decode_fp8(code, fmt)
        if want == "nan":
            assert math.isnan(got), hex(code)
        elif isinstance(want, str):
            assert got == (math.inf if want == "+inf" else -math.inf)
        else:
            assert Fraction(got) == want, hex(code)
            if want == 0:
                assert math.copysign(1, got) == (-1 if code & 0x80 else 1)


@pytest.mark.parametrize("dt", dtypes.fp8s)
def test_fp8_max_values(dt):
    # facts: e4m3 448, e5m2 57344, e4m3fnuz 240, e5m2fnuz 57344
    want = {dtypes.fp8e4m3: 448, dtypes.fp8e5m2: 57344, dtypes.fp8e4m3fnuz: 240, dtypes.fp8e5m2fnuz: 57344}[dt]
    assert max(finite_codes(dt).values()) == want
    assert truncate(dt, 1e9) == want and truncate(dt, -1e9) == -want


def oracle_encode(x: float, dt) -> int:
    """Nearest finite code after clamping to the largest magnitude (saturation), ties to the even code."""
    kind = SPEC[dt][3]
    codes = finite_codes(dt)
    top = max(codes.values())
    target = max(-top, min(top, Fraction(x)))
    best = min(abs(v - target) for v in codes.values())
    near = [c for c, v in codes.items() if abs(v - target) == best]
    if any(codes[c] == 0 for c in near):  # zero wins a tie against the smallest subnormal (whose code is odd)
        return 0 if kind == "fnuz" or math.copysign(1, x) > 0 else 0x80
    return min(near, key=lambda c: c % 2)


fp8_inputs = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, min_value=-70000, max_value=70000),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e-3, max_value=1e-3),
)


@pytest.mark.parametrize("dt", dtypes.fp8s)
@settings(max_examples=300, derandomize=True, deadline=None)
@given(x=fp8_inputs)
def test_fp8_encode_rounds_to_nearest_even(dt, x):
    assert fp8_to_bits(x, dt) == oracle_encode(x, dt)


@pytest.mark.parametrize("dt", dtypes.fp8s)
def test_fp8_encode_exact_midpoints_and_codes(dt):
    codes = finite_codes(dt)
    values = sorted(set(codes.values()))
    for v in values:  # every representable value round-trips
        assert fp8_to_bits(float(v), dt) == oracle_encode(float(v), dt)
    for lo, hi in zip(values, values[1:]):  # every midpoint is a tie: must pick the even code
        mid = (lo + hi) / 2
        assert fp8_to_bits(float(mid), dt) == oracle_encode(float(mid), dt), float(mid)


def test_fp8_specials():
    assert fp8_to_bits(math.nan, dtypes.fp8e4m3) == 0x7F
    assert fp8_to_bits(math.inf, dtypes.fp8e4m3) == 0x7F and fp8_to_bits(-math.inf, dtypes.fp8e4m3) == 0xFF
    assert fp8_to_bits(math.inf, dtypes.fp8e5m2) == 0x7C and fp8_to_bits(-math.inf, dtypes.fp8e5m2) == 0xFC
    for dt in dtypes.fp8_fnuz:
        assert fp8_to_bits(math.nan, dt) == 0x80 and fp8_to_bits(-math.inf, dt) == 0x80
        assert fp8_to_bits(-0.0, dt) == 0x00
    assert fp8_to_bits(-0.0, dtypes.fp8e4m3) == 0x80


def bf16_oracle(x: float) -> int:
    """Round the exact double to bf16 via float32 bit patterns: truncate to 16 bits and compare remainders exactly."""
    # candidates: the two bf16 values bracketing x, found from the float32 that truncates toward zero
    f = Fraction(x)
    sign = 0x8000 if math.copysign(1, x) < 0 else 0
    a = abs(f)
    # enumerate by magnitude: bf16 magnitudes are monotone in their 15-bit code
    lo, hi = 0, 0x7F80
    while hi - lo > 1:  # binary search the largest code whose value <= a
        mid = (lo + hi) // 2
        if Fraction(struct.unpack("<f", struct.pack("<I", mid << 16))[0]) <= a:
            lo = mid
        else:
            hi = mid
    vlo = Fraction(struct.unpack("<f", struct.pack("<I", lo << 16))[0])
    vhi = Fraction(struct.unpack("<f", struct.pack("<I", hi << 16))[0]) if hi < 0x7F80 else Fraction(2) ** 128
    if a - vlo < vhi - a or (a - vlo == vhi - a and lo % 2 == 0):
        return sign | lo
    return sign | hi


@settings(max_examples=400, derandomize=True, deadline=None)
@given(x=st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_bf16_rounds_to_nearest_even(x):
    assert float_to_bf16_bits(x) == bf16_oracle(x)


def test_bf16_ties_and_specials():
    one = 1.0
    ulp = 2.0**-7
    assert float_to_bf16_bits(one + ulp / 2) == 0x3F80  # tie to even (1.0)
    assert float_to_bf16_bits(one + 3 * ulp / 2) == 0x3F82  # tie to even (1 + 2 ulp)
    assert float_to_bf16_bits(math.inf) == 0x7F80 and float_to_bf16_bits(-math.inf) == 0xFF80
    assert float_to_bf16_bits(math.nan) & 0x7F80 == 0x7F80 and float_to_bf16_bits(math.nan) & 0x7F
    assert float_to_bf16_bits(3.5e38) == 0x7F80  # overflow rounds to inf


@settings(max_examples=300, derandomize=True, deadline=None)
@given(x=st.floats(allow_nan=False, width=64))
def test_float16_matches_numpy(x):
    with np.errstate(over="ignore"):
        want = float(np.float64(x).astype(np.float16))
    assert truncate(dtypes.float16, x) == want


@settings(max_examples=200, derandomize=True, deadline=None)
@given(x=st.integers(min_value=-(2**70), max_value=2**70))
def test_int_truncation_wraps_like_numpy(x):
    for dt, npdt in ((dtypes.int8, np.int8), (dtypes.uint16, np.uint16), (dtypes.int32, np.int32), (dtypes.uint64, np.uint64)):
        assert truncate(dt, x) == int(np.array(x % 2**64, dtype=np.uint64).astype(npdt))


def test_interning_vectors_pointers():
    assert DType(14, 32, "float", "f", 1) is dtypes.float32
    assert dtypes.float.vec(4) is dtypes.float32.vec(4) and dtypes.float.vec(4).scalar() is dtypes.float
    assert dtypes.float.vec(4).itemsize == 16 and dtypes.half.itemsize == 2 and dtypes.bool.itemsize == 1
    p = dtypes.int.ptr(16, AddrSpace.LOCAL)
    assert isinstance(p, PtrDType) and p.base is dtypes.int and p.size == 16 and p.addrspace is AddrSpace.LOCAL
    assert p is dtypes.int32.ptr(16, AddrSpace.LOCAL) and p is not dtypes.int.ptr(16)
    assert p.vec(4).scalar() is p
    with pytest.raises(DTypeError):
        dtypes.float.vec(4).vec(2)
    with pytest.raises(DTypeError):
        to_dtype("float128")
    assert to_dtype("half") is dtypes.float16 and repr(dtypes.float) == "dtypes.float32"


def test_struct_format_and_limits():
    for dt in (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64):
        info = np.iinfo(np.dtype(dt.fmt))
        assert (dt.min, dt.max) == (int(info.min), int(info.max))
        assert struct.calcsize(dt.fmt) == dt.itemsize
    assert dtypes.float32.fmt == "f" and dtypes.float16.fmt == "e" and dtypes.bfloat16.fmt is None
    assert dtypes.is_float(dtypes.bfloat16) and dtypes.is_int(dtypes.uint8) and dtypes.is_unsigned(dtypes.uint8)
    assert not dtypes.is_int(dtypes.bool) and not dtypes.is_unsigned(dtypes.int8) and dtypes.is_float(dtypes.half.vec(2))
    assert dtypes.finfo(dtypes.bfloat16) == (8, 7)


# promotion facts from JAX's type promotion table (the lattice tinygrad follows), checked pairwise
PROMOTIONS = [
    ((dtypes.int8, dtypes.uint8), dtypes.int16),
    ((dtypes.int16, dtypes.uint16), dtypes.int32),
    ((dtypes.int32, dtypes.uint32), dtypes.int64),
    ((dtypes.uint8, dtypes.uint32), dtypes.uint32),
    ((dtypes.bool, dtypes.int8), dtypes.int8),
    ((dtypes.float16, dtypes.bfloat16), dtypes.float32),
    ((dtypes.float16, dtypes.int64), dtypes.float16),
    ((dtypes.float32, dtypes.float64), dtypes.float64),
    ((dtypes.fp8e4m3, dtypes.fp8e5m2), dtypes.float16),
    ((dtypes.weakint, dtypes.uint8), dtypes.uint8),
    ((dtypes.weakfloat, dtypes.int32), dtypes.weakfloat),
    ((dtypes.weakfloat, dtypes.bfloat16), dtypes.bfloat16),
    ((dtypes.bool, dtypes.weakint), dtypes.weakint),
]


@pytest.mark.parametrize("pair,want", PROMOTIONS)
def test_least_upper_dtype(pair, want):
    assert least_upper_dtype(*pair) is want and least_upper_dtype(*reversed(pair)) is want


def test_lattice_is_a_join():
    # the join is an upper bound and is below every other common upper bound; fp8 pairs are the one exception in the
    # lattice (both float16 and bfloat16 bound them, and the smaller priority wins), so they are left out
    lattice = [dt for dt in dtypes.all if dt not in dtypes.fp8s]
    for a in lattice:
        for b in lattice:
            j = least_upper_dtype(a, b)
            assert least_upper_dtype(a, j) is j and least_upper_dtype(b, j) is j
            for c in lattice:
                if least_upper_dtype(a, c) is c and least_upper_dtype(b, c) is c:
                    assert least_upper_dtype(j, c) is c


def test_weak_and_lossless():
    assert dtypes.from_py(3) is dtypes.weakint and dtypes.from_py(3.0) is dtypes.weakfloat and dtypes.from_py(True) is dtypes.bool
    assert strong_dtype(dtypes.weakfloat) is dtypes.float32 and dtypes.from_py([1, 2.0]) is dtypes.float32
    assert can_lossless_cast(dtypes.uint8, dtypes.float16) and not can_lossless_cast(dtypes.int32, dtypes.float32)
