"""Transcendental functions built from simple ALU ops, for renderers that lack them.

float64 in float64, smaller floats in float32 (the polynomial lengths follow the format): EXP2 by range reduction to
[-0.5, 0.5] and a Taylor polynomial, scaled by two exact powers of two (so gradual underflow and overflow to inf come
out right); LOG2 from the exponent bits and an atanh series on [sqrt(1/2), sqrt(2)), with denormals pre-scaled; SIN by
Cody-Waite reduction by pi/2 (three constants; accurate while |x| < 1e4 in float32, 1e6 in float64) and the quadrant's
sin or cos polynomial; POW through EXP2 and LOG2 with C's rules for zero, negative bases and integer exponents. Errors
stay within a few ulps of the format over the reduced ranges.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from uopir.dtypes import DType, dtypes
from uopir.ops import Ops
from uopir.rewrite import PatternMatcher, UPat, graph_rewrite
from uopir.uop import UOp

_INV_LN2 = 1 / math.log(2)


@dataclass(frozen=True)
class _Float:
    """What the decompositions need to know about a float format: its bit layout and how many polynomial terms give
    full precision."""

    ft: DType
    it: DType
    ut: DType
    mantissa_bits: int
    bias: int
    exp_terms: int
    log_terms: int
    trig_terms: int
    pio2: tuple[float, float, float]  # pi/2 in three parts; k * first part is exact for the k that occur


_F32 = _Float(dtypes.float32, dtypes.int32, dtypes.uint32, 23, 127, 8, 6, 4, (1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8))
_F64 = _Float(dtypes.float64, dtypes.int64, dtypes.uint64, 52, 1023, 14, 12, 8,
              (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624879595063154e-21))


def _format(x: UOp) -> tuple[UOp, _Float]:
    """`x` in the format it is computed in (float64 stays float64, smaller floats go through float32)."""
    if x.dtype == dtypes.float64:
        return x, _F64
    return (x if x.dtype == dtypes.float32 else x.cast(dtypes.float32)), _F32


def _horner(x: UOp, coefficients: list[float], fused: bool = False) -> UOp:
    """c0 + x*(c1 + x*(c2 + ...)); `fused`: each step one MULACC (a fused multiply-add: one rounding instead of two, and
    half the instructions of the polynomial, where the renderer has it)."""
    acc = x.const_like(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        acc = acc.alu(Ops.MULACC, x, x.const_like(c)) if fused else acc * x + c
    return acc


def _round(x: UOp) -> UOp:
    # constants of x's dtype: a select of two Python floats would be a weak (double) value cast to x's dtype, which
    # keeps the C renderer from writing the select as vector code
    return (x + (x < 0.0).where(x.const_like(-0.5), x.const_like(0.5))).alu(Ops.TRUNC)


def _bits_of(value: float, f: _Float) -> int:
    """The bits of `value` in the format `f`, as a signed integer."""
    return int.from_bytes(struct.pack("<f" if f.ft == dtypes.float32 else "<d", value), "little", signed=True)


def _pow2(k: UOp, f: _Float) -> UOp:
    """2**k for integer k in the normal exponent range of `f`, built from its exponent bits."""
    return ((k + f.bias) << f.mantissa_bits).bitcast(f.ft)


def xexp2(x: UOp, fused: bool = False) -> UOp:
    v, f = _format(x)
    lo, hi = -(f.bias + f.mantissa_bits + 1.0), f.bias + 2.0  # beyond these the result is 0 or inf
    clamped = (v < lo).where(lo, (v > hi).where(hi, v))
    # rounded to the nearest integer (ties to even) by adding 1.5 * 2**mantissa_bits and taking it away again: the sum's
    # last place is 1, and its low mantissa bits are the integer (|clamped| < 2**(mantissa_bits - 1)). Four ops where
    # a select, a truncation and a conversion took about fourteen in vector code (exp is most of a softmax kernel)
    magic = 1.5 * 2.0**f.mantissa_bits
    shifted = clamped + magic
    n = shifted - magic
    frac = clamped - n
    poly = _horner(frac, [math.log(2) ** k / math.factorial(k) for k in range(f.exp_terms)], fused)
    ni = shifted.bitcast(f.it) - _bits_of(magic, f)
    half = ni.cdiv(2)
    # NaN needs no select of its own: it passes the clamp (both comparisons are false), so the polynomial is NaN and
    # so is its product with whatever the exponent bits made of it
    return (poly * _pow2(half, f) * _pow2(ni - half, f)).cast(x.dtype)


def xlog2(x: UOp, fused: bool = False) -> UOp:
    v, f = _format(x)
    tiny = v < 2.0 ** (1 - f.bias)
    scaled = tiny.where(v * 2.0**64, v)
    bits = scaled.bitcast(f.ut)
    exponent = ((bits >> f.mantissa_bits) & (2 * f.bias + 1)).cast(f.it) - f.bias
    one = f.bias << f.mantissa_bits  # the bits of 1.0
    mantissa = ((bits & ((1 << f.mantissa_bits) - 1)) | one).bitcast(f.ft)
    big = mantissa > math.sqrt(2)
    mantissa = big.where(mantissa * 0.5, mantissa)
    exponent = big.where(exponent + 1, exponent)
    t = (mantissa - 1.0) / (mantissa + 1.0)
    series = t * _horner(t * t, [2.0 / (2 * k + 1) for k in range(f.log_terms)], fused)
    result = exponent.cast(f.ft) - tiny.where(v.const_like(64.0), v.const_like(0.0)) + series * _INV_LN2
    result = v.eq(math.inf).where(math.inf, v.eq(0.0).where(-math.inf, (v < 0.0).where(math.nan, result)))
    return v.ne(v).where(v, result).cast(x.dtype)


def xsin(x: UOp, fused: bool = False) -> UOp:
    v, f = _format(x)
    k = _round(v * (2 / math.pi))
    r = ((v - k * f.pio2[0]) - k * f.pio2[1]) - k * f.pio2[2]
    quadrant = k.cast(f.it) & 3
    r2 = r * r
    s = r + r * r2 * _horner(r2, [(-1) ** (j + 1) / math.factorial(2 * j + 3) for j in range(f.trig_terms)], fused)
    c = 1.0 + r2 * _horner(r2, [(-1) ** (j + 1) / math.factorial(2 * j + 2) for j in range(f.trig_terms)], fused)
    result = quadrant.eq(0).where(s, quadrant.eq(1).where(c, quadrant.eq(2).where(-s, -c)))
    # inf - inf and nan - nan are nan: sin of both is nan
    return (v - v).ne(0.0).where(math.nan, result).cast(x.dtype)


def xpow(a: UOp, b: UOp, fused: bool = False) -> UOp:
    (base, _), (exp, _) = _format(a), _format(b)
    magnitude = xexp2(exp * xlog2(base * (base < 0.0).where(base.const_like(-1.0), base.const_like(1.0)), fused), fused)
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
    fused = Ops.MULACC in ctx
    if x.op is Ops.POW:
        return xpow(x.src[0], x.src[1], fused)
    return _DECOMPOSITIONS[x.op](x.src[0], fused)


pm_decompose_transcendentals = PatternMatcher([
    (UPat((Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW), name="x"), _decompose),
])


def decompose(ast: UOp, supported: frozenset[Ops]) -> UOp:
    """`ast` with the transcendental ops that `supported` lacks built from simpler ones."""
    if {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW} <= supported:
        return ast
    return graph_rewrite(ast, pm_decompose_transcendentals, ctx=supported, name="decompose transcendentals")
