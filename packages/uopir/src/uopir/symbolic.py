"""Symbolic algebra for integer index math, as rewrite rules.

Layers, from cheap to full: `pm_fold_constants` (evaluate constant ALU, decide nodes whose value range is one point),
`pm_identities` (x+0, x*1, where on a constant, ...), `pm_canonical` (sum-of-terms normal form: terms combined,
sorted, constants last), `pm_divmod` (floor div/mod from value ranges), `pm_compare` (comparison folding), combined in
`symbolic`. Index math uses Python floor semantics (FLOORDIV/FLOORMOD); every rule holds for negative values too.

Integers of a fixed width wrap around (C/numpy); only `weakint` index math is exact. ADD and MUL wrap as a ring, so
the canonical form (reassociating, combining terms, distributing constants) holds whatever wraps. Division, modulo
and comparisons do not: a rule that reasons about them through the terms of a sum first checks that the sum is
exact, i.e. the range of sum(coef*term) + const, computed from the terms' (sound) ranges, fits the dtype, and it
only builds constants that fit (see `exact_sum`).

Rules reach nodes only through their methods, so this module does not import the UOp class.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from uopir.dtypes import ConstType, DType, dtypes, truncate
from uopir.errors import DTypeError
from uopir.interp import exec_alu
from uopir.ops import GroupOp, Ops
from uopir.rewrite import PatternMatcher, UPat

if TYPE_CHECKING:
    from uopir.uop import UOp

_INT_OR_BOOL = (*dtypes.ints, dtypes.weakint, dtypes.bool)
_INTS = (*dtypes.ints, dtypes.weakint)


def _is_int(u: UOp) -> bool:
    return dtypes.is_int(u.dtype) and u.dtype.count == 1


# ---------------- wrap-around ----------------


def fits(dt: DType, lo: ConstType, hi: ConstType) -> bool:
    """Whether [lo, hi] lies in the range of int dtype `dt` (weakint is unbounded)."""
    return dt.scalar() is dtypes.weakint or (dt.min <= lo and hi <= dt.max)


def exact_terms(dt: DType, coefs: dict[UOp, int] | list[tuple[UOp, int]], const: int) -> bool:
    """Whether sum(coef*term) + const in `dt` equals its exact integer value for every value of the terms: the
    range computed from the terms' ranges fits the dtype (intermediate wraps cancel out, as ADD and MUL are a ring)."""
    if dt.scalar() is dtypes.weakint:
        return True
    lo = hi = const
    for term, c in (coefs.items() if isinstance(coefs, dict) else coefs):
        a, b = c * term.vmin, c * term.vmax
        lo, hi = lo + min(a, b), hi + max(a, b)
    return fits(dt, lo, hi)


def exact_sum(x: UOp) -> bool:
    """Whether the int sum of terms `x` never wraps (see `exact_terms`)."""
    coefs, const = split_terms(x)
    return exact_terms(x.dtype, coefs, const)


# ---------------- constant folding ----------------


def fold_const_alu(x: UOp) -> UOp | None:
    """An ALU node of constants becomes its value."""
    v = exec_alu(x.op, x.dtype, tuple(s.arg for s in x.src))
    return None if v is None else x.const_like(v)


def fold_const_cast(x: UOp, c: UOp) -> UOp | None:
    """CAST of a constant becomes the converted constant."""
    if x.dtype.count != 1:
        return None
    try:
        return x.const_like(truncate(x.dtype, c.arg))
    except DTypeError:  # nan/inf to an int has no value to fold to
        return None


def fold_by_range(x: UOp) -> UOp | None:
    """An integer/bool node whose value range is a single point is that constant."""
    if x.dtype.count != 1 or not (dtypes.is_int(x.dtype) or dtypes.is_bool(x.dtype)):
        return None
    lo, hi = x._min_max
    return x.const_like(lo) if lo == hi else None


pm_fold_constants = PatternMatcher([
    (UPat(GroupOp.ALU, name="x", src=UPat(Ops.CONST)), fold_const_alu),
    (UPat(Ops.CAST, name="x", src=(UPat.cvar("c"),)), fold_const_cast),
    (UPat(GroupOp.ALU, dtype=_INT_OR_BOOL, name="x"), fold_by_range),
])


# ---------------- identities ----------------


pm_identities = PatternMatcher([
    (UPat.var("x") + UPat.const(None, 0), lambda x: x if _is_int(x) else None),
    (UPat.var("x") * UPat.const(None, 1), lambda x: x),
    (UPat.var("x", _INTS) * UPat.const(None, 0), lambda x: x.const_like(0)),
    (UPat(Ops.FLOORDIV, src=(UPat.var("x"), UPat.const(_INTS, 1))), lambda x: x),
    (UPat(Ops.FLOORMOD, src=(UPat.var("x"), UPat.const(_INTS, 1))), lambda x: x.const_like(0)),
    (UPat(Ops.CDIV, src=(UPat.var("x"), UPat.const(_INTS, 1))), lambda x: x),
    # f(x, x) == x for the idempotent ops (and/or/max): only the exact same node, never looser "validity" reasoning
    (UPat(GroupOp.Idempotent, src=(UPat.var("x"), UPat.var("x"))), lambda x: x),
    (UPat(Ops.XOR, src=(UPat.var("x", _INTS), UPat.var("x"))), lambda x: x.const_like(0)),
    (UPat(Ops.CMPLT, src=(UPat.var("x", _INTS), UPat.var("x"))), lambda x: x.const_like(False, dtypes.bool)),
    (UPat(Ops.CMPNE, src=(UPat.var("x", _INT_OR_BOOL), UPat.var("x"))), lambda x: x.const_like(False, dtypes.bool)),
    (UPat(Ops.CMPEQ, src=(UPat.var("x", _INT_OR_BOOL), UPat.var("x"))), lambda x: x.const_like(True, dtypes.bool)),
    # boolean algebra with constants
    (UPat(Ops.AND, src=[UPat.var("x", dtypes.bool), UPat.const(dtypes.bool, True)]), lambda x: x),
    (UPat(Ops.AND, src=[UPat.var("x", dtypes.bool), UPat.const(dtypes.bool, False)]), lambda x: x.const_like(False)),
    (UPat(Ops.OR, src=[UPat.var("x", dtypes.bool), UPat.const(dtypes.bool, False)]), lambda x: x),
    (UPat(Ops.OR, src=[UPat.var("x", dtypes.bool), UPat.const(dtypes.bool, True)]), lambda x: x.const_like(True)),
    (UPat(Ops.CMPNE, src=(UPat.var("x", dtypes.bool), UPat.const(dtypes.bool, False))), lambda x: x),
    # not(not(x)) == x
    (UPat(Ops.CMPNE, src=(UPat(Ops.CMPNE, src=(UPat.var("x", dtypes.bool), UPat.const(dtypes.bool, True))), UPat.const(dtypes.bool, True))),
     lambda x: x),
    # where on a known condition, or with equal branches
    (UPat(Ops.WHERE, src=(UPat.cvar("c"), UPat.var("a"), UPat.var("b"))), lambda c, a, b: a if c.arg else b),
    (UPat(Ops.WHERE, src=(UPat.var(), UPat.var("a"), UPat.var("a"))), lambda a: a),
    (UPat(Ops.WHERE, src=(UPat.var("c"), UPat.const(dtypes.bool, True), UPat.const(dtypes.bool, False))), lambda c: c),
    # max decided by ranges
    (UPat(Ops.MAX, src=(UPat.var("a"), UPat.var("b"))), lambda a, b: a if a.vmin >= b.vmax else b if b.vmin >= a.vmax else None),
])


# ---------------- canonical sum-of-terms form ----------------


def _order(u: UOp) -> tuple:
    # variables and ranges sort by name so printed expressions read naturally; anything else by content hash
    if u.op is Ops.DEFINE_VAR:
        return (0, u.arg[0], b"")
    if u.op is Ops.RANGE:
        return (0, f"r{u.arg[0]:08d}", b"")
    return (u.op.value, "", u.key)


def split_terms(x: UOp) -> tuple[dict[UOp, int], int]:
    """An integer ADD chain as {term: coefficient} (in chain order) and the constant part."""
    coefs: dict[UOp, int] = {}
    const = 0
    stack = [x]
    while stack:
        n = stack.pop()
        if n.op is Ops.ADD:
            stack.append(n.src[1])
            stack.append(n.src[0])
            continue
        if n.op is Ops.CONST:
            const += n.arg
            continue
        if n.op is Ops.MUL and n.src[1].op is Ops.CONST:
            base, c = n.src[0], n.src[1].arg
        else:
            base, c = n, 1
        coefs[base] = coefs.get(base, 0) + c
    return coefs, const


def build_sum(like: UOp, coefs: dict[UOp, int] | list[tuple[UOp, int]], const: int) -> UOp:
    """Rebuild a canonical sum: nonzero terms sorted, left-associated, the constant last."""
    items = sorted(((b, c) for b, c in (coefs.items() if isinstance(coefs, dict) else coefs) if c != 0), key=lambda bc: _order(bc[0]))
    ret: UOp | None = None
    for base, c in items:
        term = base if c == 1 else base.alu(Ops.MUL, base.const_like(c))
        ret = term if ret is None else ret.alu(Ops.ADD, term)
    if ret is None:
        return like.const_like(const)
    return ret if const == 0 else ret.alu(Ops.ADD, ret.const_like(const))


def _combine_mods(coefs: dict[UOp, int]) -> bool:
    """x%c*k + (x//c)*(c*k) -> x*k and (x//a)%b*(a*k) + x%a*k -> x%(a*b)*k, in place; True if anything combined."""
    changed = False
    for m in [t for t in coefs if t.op is Ops.FLOORMOD and t.src[1].op is Ops.CONST and t.src[1].arg > 0]:
        if m not in coefs:
            continue
        k, x, c = coefs[m], m.src[0], m.src[1]
        div = x.alu(Ops.FLOORDIV, c)
        if coefs.get(div) == k * c.arg:
            del coefs[m], coefs[div]
            coefs[x] = coefs.get(x, 0) + k
            changed = True
            continue
        for outer in [t for t in coefs if t.op is Ops.FLOORMOD and t.src[0] is div and t.src[1].op is Ops.CONST and t.src[1].arg > 0]:
            if coefs.get(outer) == k * c.arg and fits(x.dtype, 0, c.arg * outer.src[1].arg):
                merged = x.alu(Ops.FLOORMOD, c.const_like(c.arg * outer.src[1].arg))
                del coefs[m], coefs[outer]
                coefs[merged] = coefs.get(merged, 0) + k
                changed = True
                break
    return changed


def canonical_add(x: UOp) -> UOp | None:
    """Flatten an integer ADD chain, combine like terms, sort them, put the constant last."""
    coefs, const = split_terms(x)
    _combine_mods(coefs)
    ret = build_sum(x, coefs, const)
    return None if ret is x else ret


def canonical_mul(x: UOp, a: UOp, b: UOp) -> UOp | None:
    """Constants go right, constant factors merge, and an integer sum times a constant distributes."""
    if a.op is Ops.CONST and b.op is not Ops.CONST:
        return b.alu(Ops.MUL, a)
    if b.op is not Ops.CONST or not _is_int(x):
        return None
    if a.op is Ops.MUL and a.src[1].op is Ops.CONST:
        return a.src[0].alu(Ops.MUL, b.const_like(a.src[1].arg * b.arg))
    if a.op is Ops.ADD:
        coefs, const = split_terms(a)
        return build_sum(x, [(t, c * b.arg) for t, c in coefs.items()], const * b.arg)
    return None


def commute_const(x: UOp) -> UOp | None:
    """In a commutative op a constant goes right (so rules only look for it there)."""
    a, b = x.src
    if a.op is Ops.CONST and b.op is not Ops.CONST:
        return x.replace(src=(b, a))
    return None


pm_canonical = PatternMatcher([
    (UPat(Ops.ADD, _INTS, name="x"), canonical_add),
    (UPat(Ops.MUL, name="x", src=(UPat.var("a"), UPat.var("b"))), canonical_mul),
    (UPat(GroupOp.Commutative - {Ops.ADD, Ops.MUL}, name="x", src=(UPat(), UPat())), commute_const),
])


# ---------------- division and modulo ----------------


def fold_divmod(d: UOp, x: UOp, y: UOp) -> UOp | None:
    """x // c and x % c (c > 0, floor semantics) simplified from the terms of x and their value ranges."""
    c = y.arg
    if not isinstance(c, int) or c <= 0 or not _is_int(d):
        return None
    is_div = d.op is Ops.FLOORDIV
    q0, q1 = x.vmin // c, x.vmax // c
    if q0 == q1:  # x stays within one period
        if is_div:
            return d.const_like(q0)
        coefs, const = split_terms(x)
        return build_sum(x, coefs, const - q0 * c)
    if x.op is Ops.FLOORDIV and x.src[1].op is Ops.CONST and x.src[1].arg > 0 and is_div and fits(d.dtype, 0, x.src[1].arg * c):
        return x.src[0].alu(Ops.FLOORDIV, y.const_like(x.src[1].arg * c))
    if x.op is Ops.FLOORMOD and x.src[1].op is Ops.CONST and x.src[1].arg > 0 and x.src[1].arg % c == 0:
        if not is_div:
            return x.src[0].alu(Ops.FLOORMOD, y)
        return x.src[0].alu(Ops.FLOORDIV, y).alu(Ops.FLOORMOD, y.const_like(x.src[1].arg // c))
    coefs, const = split_terms(x)
    if not exact_terms(x.dtype, coefs, const):
        return None  # x wraps: its terms say nothing about its quotient
    # common factor: (g*S + k) // (g*c') == (S + k//g) // c' and (g*S + k) % (g*c') == ((S + k//g) % c')*g + k%g
    g = math.gcd(c, *coefs.values())
    if g > 1:
        inner = build_sum(x, [(t, v // g) for t, v in coefs.items()], const // g)
        cg = c // g
        if is_div:
            return inner if cg == 1 else inner.alu(Ops.FLOORDIV, y.const_like(cg))
        mod = inner.const_like(0) if cg == 1 else inner.alu(Ops.FLOORMOD, y.const_like(cg)).alu(Ops.MUL, y.const_like(g))
        return mod if const % g == 0 else mod.alu(Ops.ADD, y.const_like(const % g))
    # split x = c*W + R with R = sum((coef % c) * term) + const % c: x // c = W + R // c, x % c = R % c
    whole = [(t, v // c) for t, v in coefs.items() if v // c != 0]
    rest = [(t, v % c) for t, v in coefs.items() if v % c != 0]
    if not exact_terms(x.dtype, rest, const % c):
        return None
    rem = build_sum(x, rest, const % c)
    r0, r1 = rem.vmin // c, rem.vmax // c
    if r0 == r1:
        if is_div:
            return build_sum(x, whole, const // c + r0)
        return build_sum(x, rest, const % c - r0 * c)
    if whole or const // c != 0 or rem is not x:
        if is_div:
            return build_sum(x, [*whole, (rem.alu(Ops.FLOORDIV, y), 1)], const // c)
        return None if rem is x else rem.alu(Ops.FLOORMOD, y)
    return _divmod_by_factor(x, coefs, const, c, is_div)


def _divmod_by_factor(x: UOp, coefs: dict[UOp, int], const: int, c: int, is_div: bool) -> UOp | None:
    """x = f*S + R with f a factor of c that some terms' coefficients share and 0 <= R < f (the rest of the terms):
    x // c == S // (c//f) and x % c == (S % (c//f))*f + R. E.g. (a*32 + lane) // 192 == a // 6 for lane in [0, 32)."""
    for f in sorted({math.gcd(v, c) for v in coefs.values()} - {1, c}, reverse=True):
        rest_terms = [(t, v) for t, v in coefs.items() if v % f != 0]
        if not exact_terms(x.dtype, rest_terms, const % f):
            continue
        rest = build_sum(x, rest_terms, const % f)
        if rest.vmin < 0 or rest.vmax >= f:
            continue
        k = c // f
        scaled = build_sum(x, [(t, v // f) for t, v in coefs.items() if v % f == 0], const // f)
        if is_div:
            return scaled.alu(Ops.FLOORDIV, scaled.const_like(k))
        return scaled.alu(Ops.FLOORMOD, scaled.const_like(k)).alu(Ops.MUL, scaled.const_like(f)).alu(Ops.ADD, rest)
    return None


def mod_in_range(x: UOp, y: UOp) -> UOp | None:
    """x % y is x when 0 <= x < y."""
    return x if _is_int(x) and x.vmin >= 0 and y.vmin > 0 and x.vmax < y.vmin else None


def trunc_to_floor(d: UOp, x: UOp, y: UOp) -> UOp | None:
    """C division/modulo of a non-negative value by a positive one equals the floor form, which the rules understand."""
    if _is_int(d) and x.vmin >= 0 and y.vmin > 0:
        return x.alu(Ops.FLOORDIV if d.op is Ops.CDIV else Ops.FLOORMOD, y)
    return None


pm_divmod = PatternMatcher([
    (UPat((Ops.FLOORDIV, Ops.FLOORMOD), name="d", src=(UPat.var("x"), UPat.cvar("y"))), fold_divmod),
    (UPat(Ops.FLOORMOD, src=(UPat.var("x"), UPat.var("y"))), mod_in_range),
    (UPat((Ops.CDIV, Ops.CMOD), name="d", src=(UPat.var("x"), UPat.var("y"))), trunc_to_floor),
])


# ---------------- comparisons ----------------


def fold_lt(x: UOp, c: UOp) -> UOp | None:
    """Integer x < c: move the constant of x across, divide by the common factor, undo a division."""
    if not _is_int(x) or not isinstance(c.arg, int):
        return None
    if x.op is Ops.FLOORDIV and x.src[1].op is Ops.CONST and x.src[1].arg > 0:
        # x//d < c  <=>  x < c*d
        bound = c.arg * x.src[1].arg
        return x.src[0].alu(Ops.CMPLT, c.const_like(bound)) if fits(x.dtype, bound, bound) else None
    if x.op not in (Ops.ADD, Ops.MUL):
        return None
    coefs, const = split_terms(x)
    if not exact_terms(x.dtype, coefs, const):
        return None  # x wraps: moving terms across would change the answer
    g = math.gcd(*coefs.values()) if coefs else 1
    if const == 0 and g == 1:
        return _split_lt(x, coefs, c)
    # S + k < c  <=>  S < c - k ; g*S' < t  <=>  S' < ceil(t/g)
    bound = -((-(c.arg - const)) // g)
    lhs_terms = [(t, v // g) for t, v in coefs.items()]
    if not fits(x.dtype, bound, bound) or not exact_terms(x.dtype, lhs_terms, 0):
        return None
    return build_sum(x, lhs_terms, 0).alu(Ops.CMPLT, c.const_like(bound))


def _split_lt(x: UOp, coefs: dict[UOp, int], c: UOp) -> UOp | None:
    """Comparisons of sums of non-negative terms, the shape validity masks take.

    A*m + B < d with 0 <= B < m and d % m == 0  <=>  A < d/m; and a sum of non-negative terms with positive
    coefficients is < 1 exactly when every term is 0, whatever the coefficients.
    """
    if len(coefs) < 2 or any(t.vmin < 0 for t in coefs):
        return None
    d = c.arg
    if d == 1 and all(v > 0 for v in coefs.values()) and any(v != 1 for v in coefs.values()):
        ones = [(t, 1) for t in coefs]
        return build_sum(x, ones, 0).alu(Ops.CMPLT, c) if exact_terms(x.dtype, ones, 0) else None
    for m in sorted({v for v in coefs.values() if v > 1}, reverse=True):
        if d % m:
            continue
        whole = [(t, v // m) for t, v in coefs.items() if v % m == 0]
        rest = [(t, v) for t, v in coefs.items() if v % m != 0]
        if not rest:
            continue
        if not exact_terms(x.dtype, rest, 0) or not exact_terms(x.dtype, whole, 0):
            continue
        rem = build_sum(x, rest, 0)
        if rem.vmin >= 0 and rem.vmax < m:
            return build_sum(x, whole, 0).alu(Ops.CMPLT, c.const_like(d // m))
    return None


def fold_gt(c: UOp, x: UOp) -> UOp | None:
    """Integer c < x: move the constant of x across and divide by the common factor (floor(c/g) < S')."""
    if not _is_int(x) or not isinstance(c.arg, int) or x.op not in (Ops.ADD, Ops.MUL):
        return None
    coefs, const = split_terms(x)
    g = math.gcd(*coefs.values()) if coefs else 1
    if const == 0 and g == 1:
        return None
    bound = (c.arg - const) // g
    rhs_terms = [(t, v // g) for t, v in coefs.items()]
    if not exact_terms(x.dtype, coefs, const) or not exact_terms(x.dtype, rhs_terms, 0) or not fits(x.dtype, bound, bound):
        return None
    return c.const_like(bound).alu(Ops.CMPLT, build_sum(x, rhs_terms, 0))


pm_compare = PatternMatcher([
    (UPat(Ops.CMPLT, src=(UPat.var("x"), UPat.cvar("c"))), fold_lt),
    (UPat(Ops.CMPLT, src=(UPat.cvar("c"), UPat.var("x"))), fold_gt),
])


symbolic_simple = pm_fold_constants + pm_identities
symbolic = pm_fold_constants + pm_identities + pm_canonical + pm_divmod + pm_compare


def lower_floor_ops(d: UOp, x: UOp, y: UOp) -> UOp | None:
    """FLOORDIV/FLOORMOD of a non-negative value by a positive one is the C form (CDIV/CMOD) renderers emit."""
    if _is_int(d) and x.vmin >= 0 and y.vmin > 0:
        return x.alu(Ops.CDIV if d.op is Ops.FLOORDIV else Ops.CMOD, y)
    return None


def exact_reciprocal(d: UOp, x: UOp, c: UOp) -> UOp | None:
    """x / c as x * (1 / c) when c is a power of two whose reciprocal is a normal number of the dtype: both round the same
    real number, so the result is the same bit for bit (NaN, inf, zeros and subnormal results included), and C
    compilers keep a vector division by a constant a division (`x / 8` in a softmax's scale took a vdivps per 8 lanes)."""
    v = c.arg
    if type(v) is not float or not dtypes.is_float(d.dtype) or d.dtype.scalar() in dtypes.weaks or not math.isfinite(v) or v == 0:
        return None
    if abs(math.frexp(v)[0]) != 0.5:  # not a power of two
        return None
    exp_bits, _ = dtypes.finfo(d.dtype)
    r = 1.0 / v
    bias = (1 << (exp_bits - 1)) - 1
    if not 2.0 ** (1 - bias) <= abs(r) <= 2.0 ** bias or truncate(d.dtype.scalar(), r) != r:
        return None
    return x.alu(Ops.MUL, c.const_like(r))


pm_lower_floor_ops = PatternMatcher([
    (UPat((Ops.FLOORDIV, Ops.FLOORMOD), name="d", src=(UPat.var("x"), UPat.var("y"))), lower_floor_ops),
    (UPat(Ops.FDIV, name="d", src=(UPat.var("x"), UPat.cvar("c"))), exact_reciprocal),
])
