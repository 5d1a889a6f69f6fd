"""One-hot reductions collapsed into indexed reads.

Indexing by a tensor of integers (`x[idx]`, `gather`, an embedding) is built, as in tinygrad, from a one-hot: every
position r of the indexed axis is compared with the index and the matching value kept, then the axis is summed,

    REDUCE(ADD, WHERE(e == r, v(r), 0), r)        r in [0, n), e not reading r

which reads the whole axis for each index (a 32000-row embedding: 32000 rows compared and summed per token). At most one
r equals e, so the sum is v(e) when 0 <= e < n and 0 otherwise: the kernel reads the one row instead, its loads that
move with r gated by that range check (an index out of range reads nothing, as the comparison read nothing useful).

The sum of the zeros and v(e) is v(e) itself except for a -0.0, which the sum turned into 0.0 and the read keeps (numpy's
and PyTorch's indexing keep it too). Only an integer e qualifies (a float e equal to no integer matched nothing), only an
index range of a constant size, and only a comparison in a dtype that holds every r exactly.
"""

from __future__ import annotations

import math

from uopir.dtypes import dtypes
from uopir.ops import Ops
from uopir.rewrite import PatternMatcher, UPat
from uopir.uop import UOp


def _the_range(x: UOp) -> UOp | None:
    """The RANGE `x` is, directly or through casts to integers that each hold all of its values; else None."""
    casts: list[UOp] = []
    while x.op is Ops.CAST:
        casts.append(x)
        x = x.src[0]
    if x.op is not Ops.RANGE or x.src[0].op is not Ops.CONST or not isinstance(last := x.src[0].arg - 1, int):
        return None
    if any(not dtypes.is_int(c.dtype) or c.dtype is dtypes.bool or last > c.dtype.max for c in casts):
        return None
    return x


def _is_zero(c: UOp) -> bool:
    return c.op is Ops.CONST and not isinstance(c.arg, tuple) and c.arg == 0 and math.copysign(1.0, float(c.arg)) > 0


def _gate_reads(value: UOp, index: UOp, valid: UOp) -> UOp:
    """`value` with every INDEX whose address depends on `index` gated by `valid` too."""
    gated: dict[UOp, UOp] = {}
    for node in value.toposort():
        if node.op is Ops.INDEX and len(node.src) >= 2 and index in node.src[1].toposort():
            gate = valid if len(node.src) < 3 else node.src[2] & valid
            gated[node] = node.replace(src=(node.src[0], node.src[1], gate, *node.src[3:]))
    return value.substitute(gated) if gated else value


def collapse_onehot(red: UOp) -> UOp | None:
    """REDUCE(ADD, WHERE(e == r, v, 0), ..., r, ...) as WHERE(0 <= e < n, v with r := e, 0), reduced over the other
    ranges (see the module docstring); None when `red` is not of that form."""
    if red.arg is not Ops.ADD or (body := red.src[0]).op is not Ops.WHERE:
        return None
    cond, value, other = body.src
    if cond.op is not Ops.CMPEQ or not _is_zero(other):
        return None
    for a, b in (cond.src, cond.src[::-1]):
        r = _the_range(b)
        if r is None or r not in red.src[1:] or not dtypes.is_int(a.dtype) or a.dtype is dtypes.bool:
            continue
        size = r.src[0]
        if size.op is not Ops.CONST or not isinstance(size.arg, int) or r in a.toposort():
            continue
        # 0 <= e <= n - 1 (n itself may not fit e's dtype: an int8 index of a 128-row axis)
        valid = a.alu(Ops.CMPLT, a.const_like(0)).logical_not() & a.const_like(size.arg - 1).alu(Ops.CMPLT, a).logical_not()
        index = a.cast(r.dtype)
        picked = _gate_reads(value.substitute({r: index}), index, valid)
        out = valid.where(picked, other)
        rest = tuple(s for s in red.src[1:] if s is not r)
        return out.reduce(*rest, arg=Ops.ADD) if rest else out
    return None


pm_collapse_onehot = PatternMatcher([(UPat(Ops.REDUCE, name="red"), collapse_onehot)])
