"""Every cast and bitcast the CPU renderer supports, against references computed independently in the test.

bfloat16 and the fp8 formats are checked against tables built here from each format's definition (all codes decoded
with ldexp, rounding by nearest-neighbour search with ties to the even code), not against the code under test.
"""

import math

import numpy as np
import pytest
from hcq_runtime import buffer_for, run_linear
from uopir import Ops, UOp, dtypes

NATIVE = {
    dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.uint16: np.uint16,
    dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64, dtypes.uint64: np.uint64,
    dtypes.float16: np.float16, dtypes.float32: np.float32, dtypes.float64: np.float64,
}
# (exponent bits, mantissa bits, bias, fnuz, has_inf, saturates)
SMALL = {
    dtypes.bfloat16: (8, 7, 127, False, True, False),
    dtypes.fp8e4m3: (4, 3, 7, False, False, True),
    dtypes.fp8e5m2: (5, 2, 15, False, True, True),
    dtypes.fp8e4m3fnuz: (4, 3, 8, True, False, True),
    dtypes.fp8e5m2fnuz: (5, 2, 16, True, False, True),
}


def decode_table(dt) -> np.ndarray:
    """The value of every code of a small float format, from its definition."""
    ebits, mbits, bias, fnuz, has_inf, _ = SMALL[dt]
    width = 1 + ebits + mbits
    values = np.empty(1 << width, dtype=np.float64)
    for code in range(1 << width):
        sign = -1.0 if code >> (width - 1) else 1.0
        exp, mant = (code >> mbits) & ((1 << ebits) - 1), code & ((1 << mbits) - 1)
        if fnuz and code == 1 << (width - 1):
            values[code] = math.nan
        elif not fnuz and exp == (1 << ebits) - 1 and (has_inf or mant == (1 << mbits) - 1):
            values[code] = (sign * math.inf if mant == 0 else math.nan) if has_inf else math.nan
        elif exp == 0:
            values[code] = sign * math.ldexp(mant, 1 - bias - mbits)
        else:
            values[code] = sign * math.ldexp(mant + (1 << mbits), exp - bias - mbits)
    return values


def nearest_code(dt, x: float) -> int:
    """Round x to the format by searching the finite codes: nearest value, ties to the even code, then overflow rules."""
    table = decode_table(dt)
    ebits, mbits, bias, fnuz, has_inf, saturates = SMALL[dt]
    finite = [(v, c) for c, v in enumerate(table) if math.isfinite(v) and not (v == 0 and math.copysign(1, v) < 0)]
    largest = max(v for v, _ in finite)
    if math.isinf(x) and has_inf:
        return next(c for c, v in enumerate(table) if v == x)
    if abs(x) > largest:
        # past the largest finite value: what does plain round-to-nearest give?  (halfway to the next binade step)
        step = math.ldexp(1, math.frexp(largest)[1] - 1 - mbits)
        if saturates or abs(x) < largest + step / 2:
            code = next(c for v, c in finite if v == math.copysign(largest, x))
        else:
            code = next(c for c, v in enumerate(table) if v == math.copysign(math.inf, x))
        return code
    best = min(finite, key=lambda vc: (abs(vc[0] - x), vc[1] & 1))
    code = best[1]
    if best[0] == 0 and math.copysign(1, x) < 0 and not fnuz:
        code |= 1 << (ebits + mbits)  # -0 keeps its sign where the format has one
    return code


def run_multi(srcs: np.ndarray, src_dt, dsts: list, fn) -> list[np.ndarray]:
    """One kernel: out_k[i] = fn(in[i], dsts[k]) for every k; returns the outputs as numpy arrays (raw bits for small floats)."""
    n = srcs.size
    inp = UOp.param(len(dsts), src_dt.ptr(n))
    i = UOp.range(n, 0)
    x = inp.index(i).load()
    stores = [UOp.param(k, dt.ptr(n)).index(i).store(fn(x, dt)).end(i) for k, dt in enumerate(dsts)]
    buffers = [UOp.new_buffer("CPU", n, dt) for dt in dsts] + [UOp.new_buffer("CPU", n, src_dt)]
    buffer_for(buffers[-1]).copyin(srcs)
    call = UOp(Ops.CALL, dtypes.void, (UOp.sink(*stores), *buffers))
    run_linear(UOp(Ops.LINEAR, dtypes.void, (call,)))
    return [buffer_for(b).numpy() for b in buffers[:-1]]


def source_values(src_dt) -> np.ndarray:
    """Inputs whose casts are defined for every target: small magnitudes, fractions, negatives, zeros."""
    if src_dt == dtypes.bool:
        return np.array([0, 1, 1, 0], dtype=np.bool_)
    if dtypes.is_float(src_dt):
        return np.array([0.0, -0.0, 1.0, 2.5, 3.5, 7.75, 100.0, 126.9, 0.1, 1e-3], dtype=NATIVE[src_dt])
    return np.array([0, 1, 2, 3, 7, 100, 127, 55, 9, 64], dtype=NATIVE[src_dt])


@pytest.mark.parametrize("src_dt", list(NATIVE), ids=str)
def test_casts_between_native_dtypes(src_dt):
    values = source_values(src_dt)
    dsts = list(NATIVE)
    outs = run_multi(values, src_dt, dsts, lambda x, dt: x.cast(dt))
    for dt, out in zip(dsts, outs):
        np.testing.assert_array_equal(out, values.astype(NATIVE[dt]), err_msg=f"cast {src_dt} -> {dt}")


def test_integer_casts_wrap_like_numpy():
    values = np.array([-1, -129, 300, 65537, -2**31, 2**31 - 1, -7, 12345678], dtype=np.int64)
    dsts = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.uint64, dtypes.float32, dtypes.float64]
    outs = run_multi(values, dtypes.int64, dsts, lambda x, dt: x.cast(dt))
    for dt, out in zip(dsts, outs):
        np.testing.assert_array_equal(out, values.astype(NATIVE[dt]), err_msg=f"cast int64 -> {dt}")


def test_float_casts_of_nan_inf_and_rounding():
    values = np.array([np.nan, np.inf, -np.inf, 65519.0, 1 + 2**-11, 1 + 3 * 2**-11, 1e-8, -0.0, 3.4e38], dtype=np.float64)
    outs = run_multi(values, dtypes.float64, [dtypes.float16, dtypes.float32, dtypes.bool], lambda x, dt: x.cast(dt))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(outs[0], values.astype(np.float16))
        np.testing.assert_array_equal(outs[1], values.astype(np.float32))
    np.testing.assert_array_equal(outs[2], values.astype(np.bool_))


SMALL_INPUTS = np.array([0.0, -0.0, 1.0, -1.5, 0.3, 3.14159, 17.0, 1e-3, 2e-6, 300.0, 448.0, 464.0, 500.0, 57344.0, 61440.0, 1e6,
                         -1e6, 1 / 3, 2.0**-9 * 1.5, np.inf, -np.inf, 3e38, 3.4e38], dtype=np.float32)


@pytest.mark.parametrize("dt", list(SMALL), ids=str)
def test_float_to_small_float_rounds_to_nearest_even(dt):
    storage = dtypes.uint16 if dt.itemsize == 2 else dtypes.uint8
    bits = run_multi(SMALL_INPUTS, dtypes.float32, [storage], lambda x, d: x.cast(dt).bitcast(d))[0]
    expected = [nearest_code(dt, float(x)) if not np.isinf(x) or SMALL[dt][4] else None for x in SMALL_INPUTS]
    table = decode_table(dt)
    for x, got, want in zip(SMALL_INPUTS, bits, expected):
        if want is None:  # infinity in a format without one becomes NaN
            assert math.isnan(table[got]), f"{dt}: {x} -> code {got:#x}, expected a NaN code"
        else:
            assert got == want, f"{dt}: {x} -> code {got:#x} ({table[got]}), expected {want:#x} ({table[want]})"


@pytest.mark.parametrize("dt", list(SMALL), ids=str)
def test_small_float_codes_decode_and_round_trip(dt):
    table = decode_table(dt)
    storage = dtypes.uint16 if dt.itemsize == 2 else dtypes.uint8
    codes = np.arange(len(table), dtype=np.uint16 if dt.itemsize == 2 else np.uint8)
    as_float, round_trip = run_multi(codes, storage, [dtypes.float32, storage],
                                     lambda x, d: x.bitcast(dt).cast(dtypes.float32) if d == dtypes.float32 else x.bitcast(dt).bitcast(storage))
    np.testing.assert_array_equal(as_float, table.astype(np.float32))
    finite = np.isfinite(table) | np.isinf(table)
    np.testing.assert_array_equal(round_trip[finite], codes[finite])


def test_arithmetic_in_bfloat16_rounds_after_every_op():
    a = np.array([1.0, 1.0078125, 3.0, 1e-3], dtype=np.float32)  # all exact in bf16
    out = run_multi(a, dtypes.float32, [dtypes.float32], lambda x, d: ((x.cast(dtypes.bfloat16) * 3 + 1) * 7).cast(d))[0]
    bf16 = decode_table(dtypes.bfloat16)

    def round_bf16(v: float) -> float:
        return bf16[nearest_code(dtypes.bfloat16, v)]

    # (x*3+1)*7 rounds three times: after the multiply, the add and the second multiply
    expected = [round_bf16(round_bf16(round_bf16(round_bf16(float(v)) * 3) + 1) * 7) for v in a]
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.float32))


BITCAST_PAIRS = [(dtypes.float32, dtypes.int32), (dtypes.float32, dtypes.uint32), (dtypes.int32, dtypes.float32), (dtypes.float64, dtypes.int64),
                 (dtypes.int64, dtypes.float64), (dtypes.uint64, dtypes.int64), (dtypes.float16, dtypes.int16), (dtypes.uint16, dtypes.float16),
                 (dtypes.int8, dtypes.uint8), (dtypes.uint32, dtypes.int32)]


@pytest.mark.parametrize("src_dt, dst_dt", BITCAST_PAIRS, ids=str)
def test_bitcasts_match_numpy_views(src_dt, dst_dt):
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, size=16 * src_dt.itemsize, dtype=np.uint8)
    values = raw.view(NATIVE[src_dt])
    out = run_multi(values, src_dt, [dst_dt], lambda x, d: x.bitcast(d))[0]
    np.testing.assert_array_equal(out.view(np.uint8), raw)
