"""Value ranges (vmin, vmax) of UOps, computed from the ranges of their srcs.

These bounds drive the symbolic rules (div/mod folding, comparison folding), so each one must be sound: the true
value of the node always lies within [vmin, vmax].
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from uopir.dtypes import ConstType, DType, PtrDType, dtypes
from uopir.ops import Ops

if TYPE_CHECKING:
    from uopir.uop import UOp

Bounds = tuple[ConstType, ConstType]


def dtype_bounds(dt: DType) -> Bounds:
    """The full range of a dtype (void and pointers get an unbounded int range)."""
    if dt.scalar() is dtypes.void or isinstance(dt, PtrDType):
        return -math.inf, math.inf
    return dt.min, dt.max


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _clamp(dt: DType, lo: ConstType, hi: ConstType) -> Bounds:
    # a fixed-width int that can leave its range wraps: all we know then is the dtype's range
    if dtypes.is_int(dt) and dt.scalar() is not dtypes.weakint and (lo < dt.min or hi > dt.max):
        return dt.min, dt.max
    return lo, hi


def compute_bounds(u: UOp) -> Bounds:
    """[vmin, vmax] of `u`; the srcs' bounds must already be available as `s.vmin`/`s.vmax`."""
    op, dt = u.op, u.dtype
    if dt.count > 1 or (not dtypes.is_int(dt) and not dtypes.is_bool(dt)):
        if op is Ops.CONST and isinstance(u.arg, (int, float)):
            return u.arg, u.arg
        return dtype_bounds(dt)
    if op is Ops.CONST:
        return u.arg, u.arg
    if op is Ops.DEFINE_VAR:
        return u.arg[1], u.arg[2]
    if op is Ops.PARAM and u.arg.vmin_vmax is not None:
        return u.arg.vmin_vmax
    if op in (Ops.RANGE, Ops.SPECIAL):
        end = u.src[0]
        return 0, max(0, end.vmax - 1)
    if op in (Ops.BIND, Ops.AFTER, Ops.CONTIGUOUS, Ops.DETACH) and u.src:
        return u.src[0].vmin, u.src[0].vmax
    if not u.src:
        return dtype_bounds(dt)
    s0 = u.src[0]
    a0, a1 = s0.vmin, s0.vmax
    if op is Ops.CAST:
        if dtypes.is_bool(dt):
            if a0 == a1:
                return bool(a0), bool(a1)
            return (False, True) if a0 <= 0 <= a1 else (True, True)
        if dtypes.is_int(dt) and not dtypes.is_float(s0.dtype):
            lo, hi = int(a0), int(a1)
            if dt.scalar() is dtypes.weakint or (dt.min <= lo and hi <= dt.max):
                return lo, hi
        return dtype_bounds(dt)
    if op is Ops.NEG:
        return _clamp(dt, -a1, -a0)
    if len(u.src) < 2:
        return dtype_bounds(dt)
    s1 = u.src[1]
    b0, b1 = s1.vmin, s1.vmax
    if op is Ops.ADD:
        return _clamp(dt, a0 + b0, a1 + b1)
    if op is Ops.SUB:
        return _clamp(dt, a0 - b1, a1 - b0)
    if op is Ops.MUL:
        if dtypes.is_bool(dt):
            return a0 and b0, a1 and b1
        corners = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
        return _clamp(dt, min(corners), max(corners))
    if op is Ops.MAX:
        return max(a0, b0), max(a1, b1)
    if op in (Ops.FLOORDIV, Ops.CDIV):
        if b0 > 0 or b1 < 0:  # floor and trunc division are monotone in each argument when the divisor keeps its sign
            fn = (lambda x, y: x // y) if op is Ops.FLOORDIV else _cdiv
            corners = (fn(a0, b0), fn(a0, b1), fn(a1, b0), fn(a1, b1))
            return _clamp(dt, min(corners), max(corners))
        return dtype_bounds(dt)
    if op is Ops.FLOORMOD:
        if b0 > 0:
            if b0 == b1 and a0 // b0 == a1 // b0:  # the dividend stays in one period
                return a0 % b0, a1 % b0
            if 0 <= a0 and a1 < b0:
                return a0, a1
            return 0, b1 - 1
        if b1 < 0:
            return b0 + 1, 0
        return dtype_bounds(dt)
    if op is Ops.CMOD:
        if b0 > 0 or b1 < 0:
            m = max(abs(b0), abs(b1)) - 1
            if a0 >= 0:
                return (a0, a1) if a1 < min(abs(b0), abs(b1)) else (0, min(a1, m))
            if a1 <= 0:
                return (a0, a1) if -a0 < min(abs(b0), abs(b1)) else (max(a0, -m), 0)
            return max(a0, -m), min(a1, m)
        return dtype_bounds(dt)
    if op is Ops.CMPLT:
        return a1 < b0, a0 < b1
    if op in (Ops.CMPNE, Ops.CMPEQ):
        if a0 == a1 == b0 == b1:
            return (False, False) if op is Ops.CMPNE else (True, True)
        if a1 < b0 or b1 < a0:
            return (True, True) if op is Ops.CMPNE else (False, False)
        return False, True
    if op is Ops.AND:
        if dtypes.is_bool(dt):
            return a0 and b0, a1 and b1
        if a0 >= 0 and b0 >= 0:  # and of non-negatives cannot exceed either side
            return 0, min(a1, b1)
        return dtype_bounds(dt)
    if op is Ops.OR:
        if dtypes.is_bool(dt):
            return a0 or b0, a1 or b1
        if a0 >= 0 and b0 >= 0:
            return max(a0, b0), (1 << max(int(a1), int(b1)).bit_length()) - 1
        return dtype_bounds(dt)
    if op is Ops.XOR:
        if dtypes.is_bool(dt):
            if a0 == a1 and b0 == b1:
                return a0 != b0, a0 != b0
            return False, True
        if a0 >= 0 and b0 >= 0:
            return 0, (1 << max(int(a1), int(b1)).bit_length()) - 1
        return dtype_bounds(dt)
    if op is Ops.SHL and b0 == b1 and b0 >= 0:
        return _clamp(dt, a0 << b0, a1 << b0)
    if op is Ops.SHR and b0 == b1 and b0 >= 0:
        return a0 >> b0, a1 >> b0
    if op is Ops.WHERE:
        c0, c1 = u.src[1], u.src[2]
        if a0:  # the condition is always true
            return c0.vmin, c0.vmax
        if not a1:  # always false
            return c1.vmin, c1.vmax
        return min(c0.vmin, c1.vmin), max(c0.vmax, c1.vmax)
    return dtype_bounds(dt)
