"""Validity-mask simplification: drop clauses of a boolean AND that the other clauses already imply.

Only a boolean AND is a validity mask; an integer AND is a bitwise op and is never touched (the seed's fix).
"""

from __future__ import annotations

import math

from uopir.dtypes import dtypes
from uopir.ops import Ops
from uopir.rewrite import PatternMatcher, UPat, graph_rewrite
from uopir.symbolic import symbolic
from uopir.uop import UOp

_VARLIKE = (Ops.DEFINE_VAR, Ops.RANGE, Ops.SPECIAL)


def _split_and(x: UOp) -> list[UOp]:
    out, stack = [], [x]
    while stack:
        n = stack.pop()
        if n.op is Ops.AND and n.dtype is dtypes.bool:
            stack.extend(reversed(n.src))
        else:
            out.append(n)
    return out


def parse_clause(c: UOp) -> tuple[UOp, float, float] | None:
    """(expr, lo, hi) when clause `c` bounds one integer expression: x<k, k<x, not(x<k), not(k<x)."""
    negated = c.op is Ops.CMPNE and c.src[1].op is Ops.CONST and c.src[1].arg is True and c.src[0].op is Ops.CMPLT
    lt = c.src[0] if negated else c
    if lt.op is not Ops.CMPLT or not dtypes.is_int(lt.src[0].dtype):
        return None
    a, b = lt.src
    if b.op is Ops.CONST and a.op is not Ops.CONST:
        return (a, b.arg, math.inf) if negated else (a, -math.inf, b.arg - 1)
    if a.op is Ops.CONST and b.op is not Ops.CONST:
        return (b, -math.inf, a.arg) if negated else (b, a.arg + 1, math.inf)
    return None


def simplify_valid(valid: UOp) -> UOp | None:
    """`valid` (a boolean AND of clauses) without the clauses the others imply; None when nothing drops."""
    clauses = list(dict.fromkeys(_split_and(valid)))
    parsed = {c: parse_clause(c) for c in clauses}
    kept: list[UOp] = []
    for i, c in enumerate(clauses):
        others = [o for o in kept + clauses[i + 1:] if o is not c]
        subs: dict[UOp, UOp] = {}
        bounds: dict[UOp, list] = {}
        for o in others:
            if (p := parsed[o]) is None or p[0].op not in _VARLIKE:
                continue
            lo_hi = bounds.setdefault(p[0], [p[0].vmin, p[0].vmax])
            lo_hi[0], lo_hi[1] = max(lo_hi[0], p[1]), min(lo_hi[1], p[2])
        for j, (expr, (lo, hi)) in enumerate(bounds.items()):
            if lo > hi:  # the other clauses contradict each other: the whole mask is false
                return valid.const_like(False)
            subs[expr] = UOp.variable(f"__valid{j}", int(lo), int(hi), expr.dtype)
        implied = c.substitute(subs).simplify() if subs else c.simplify()
        if implied.op is Ops.CONST:
            if not implied.arg:
                return valid.const_like(False)
            continue  # implied by the others: drop it
        kept.append(c)
    if len(kept) == len(_split_and(valid)):
        return None
    ret = kept[0] if kept else valid.const_like(True)
    for c in kept[1:]:
        ret = ret.alu(Ops.AND, c)
    return ret


pm_simplify_valid = PatternMatcher([
    # only a boolean AND is a validity mask
    (UPat(Ops.AND, dtypes.bool, name="valid"), simplify_valid),
])


def simplify_valid_idx(sink: UOp) -> UOp:
    """`sink` rewritten with the symbolic rules plus validity-mask simplification."""
    return graph_rewrite(sink, symbolic + pm_simplify_valid, name="simplify_valid_idx")
