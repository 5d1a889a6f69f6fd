"""Transcendental functions built from simple ALU ops, for renderers that lack them.

float32 (and float16, computed in float32) only: EXP2 by range reduction to [-0.5, 0.5] and a degree-7 polynomial,
scaled by two exact powers of two (so gradual underflow and overflow to inf come out right); LOG2 from the exponent
bits and an atanh series on [sqrt(1/2), sqrt(2)), with denormals pre-scaled; SIN by Cody-Waite reduction by pi/2 (three
constants; accurate while |x| < 1e4) and the quadrant's sin or cos polynomial; POW through EXP2 and LOG2 with C's rules
for zero, negative bases and integer exponents. Errors stay within a few float32 ulps over the reduced ranges.
"""

from __future__ import annotations

import math

from uopir.dtypes import dtypes
from uopir.ops import Ops
from uopir.rewrite import PatternMatcher, UPat, graph_rewrite
from uopir.uop import UOp

from .kernel import CodegenError

_INV_LN2 = 1 / math.log(2)
# pi/2 as three float32 parts: k * first part is exact for |k| < 2**15
_PIO2 = (1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8)


def _f32(x: UOp) -> UOp:
    if x.dtype == dtypes.float64:
        raise CodegenError(f"no float64 decomposition of {x.op!r}: the renderer must support it natively")
    return x if x.dtype == dtypes.float32 else x.cast(dtypes.float32)


def _horner(x: UOp, coefficients: list[float]) -> UOp:
    """c0 + x*(c1 + x*(c2 + ...))"""
    acc = x.const_like(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        acc = acc * x + c
    return acc


def _round(x: UOp) -> UOp:
    return (x + (x < 0.0).where(-0.5, 0.5)).alu(Ops.TRUNC)


def _pow2(k: UOp) -> UOp:
    """2**k as float32 for int32 k in [-126, 127], built from its exponent bits."""
    return ((k + 127) << 23).bitcast(dtypes.float32)


def xexp2(x: UOp) -> UOp:
    v = _f32(x)
    clamped = (v < -151.0).where(-151.0, (v > 129.0).where(129.0, v))
    n = _round(clamped)
    f = clamped - n
    poly = _horner(f, [math.log(2) ** k / math.factorial(k) for k in range(8)])
    ni = n.cast(dtypes.int32)
    half = ni.cdiv(2)
    result = poly * _pow2(half) * _pow2(ni - half)
    return v.ne(v).where(v, result).cast(x.dtype)


def xlog2(x: UOp) -> UOp:
    v = _f32(x)
    tiny = v < 2.0**-126
    scaled = tiny.where(v * 2.0**64, v)
    bits = scaled.bitcast(dtypes.uint32)
    exponent = ((bits >> 23) & 0xFF).cast(dtypes.int32) - 127
    mantissa = ((bits & 0x7FFFFF) | 0x3F800000).bitcast(dtypes.float32)
    big = mantissa > math.sqrt(2)
    mantissa = big.where(mantissa * 0.5, mantissa)
    exponent = big.where(exponent + 1, exponent)
    t = (mantissa - 1.0) / (mantissa + 1.0)
    series = t * _horner(t * t, [2.0, 2 / 3, 2 / 5, 2 / 7, 2 / 9, 2 / 11])
    result = exponent.cast(dtypes.float32) - tiny.where(64.0, 0.0) + series * _INV_LN2
    result = v.eq(math.inf).where(math.inf, v.eq(0.0).where(-math.inf, (v < 0.0).where(math.nan, result)))
    return v.ne(v).where(v, result).cast(x.dtype)


def xsin(x: UOp) -> UOp:
    v = _f32(x)
    k = _round(v * (2 / math.pi))
    r = ((v - k * _PIO2[0]) - k * _PIO2[1]) - k * _PIO2[2]
    quadrant = k.cast(dtypes.int32) & 3
    r2 = r * r
    s = r + r * r2 * _horner(r2, [-1 / 6, 1 / 120, -1 / 5040, 1 / 362880])
    c = 1.0 + r2 * _horner(r2, [-1 / 2, 1 / 24, -1 / 720, 1 / 40320])
    result = quadrant.eq(0).where(s, quadrant.eq(1).where(c, quadrant.eq(2).where(-s, -c)))
    # inf - inf and nan - nan are nan: sin of both is nan
    return (v - v).ne(0.0).where(math.nan, result).cast(x.dtype)


def xpow(a: UOp, b: UOp) -> UOp:
    base, exp = _f32(a), _f32(b)
    magnitude = xexp2(exp * xlog2(base * (base < 0.0).where(-1.0, 1.0)))
    whole = exp.alu(Ops.TRUNC)
    is_int = whole.eq(exp)
    odd = is_int & ((whole * 0.5).alu(Ops.TRUNC) * 2.0).ne(whole)
    negative = is_int.where(odd.where(-magnitude, magnitude), math.nan)
    result = exp.eq(0.0).where(1.0, (base < 0.0).where(negative, magnitude))
    return result.cast(a.dtype)


_DECOMPOSITIONS = {Ops.EXP2: xexp2, Ops.LOG2: xlog2, Ops.SIN: xsin}


def _decompose(ctx: frozenset[Ops], x: UOp) -> UOp | None:
    if x.op in ctx or not dtypes.is_float(x.dtype):
        return None
    if x.op is Ops.POW:
        return xpow(x.src[0], x.src[1])
    return _DECOMPOSITIONS[x.op](x.src[0])


pm_decompose_transcendentals = PatternMatcher([
    (UPat((Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW), name="x"), _decompose),
])


def decompose(ast: UOp, supported: frozenset[Ops]) -> UOp:
    """`ast` with the transcendental ops that `supported` lacks built from simpler ones."""
    if {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW} <= supported:
        return ast
    return graph_rewrite(ast, pm_decompose_transcendentals, ctx=supported, name="decompose transcendentals")
