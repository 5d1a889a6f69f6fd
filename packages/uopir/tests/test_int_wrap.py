"""Symbolic simplification of fixed-width integers: every rule must keep C/numpy wrap-around.

The oracle is numpy: each expression is evaluated on numpy scalars of the same dtype (which wrap), and the simplified
UOp, with its variables replaced by constants, must fold to the same value for every point of the variables' ranges.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uopir import Ops, UOp, dtypes

DTYPES = {dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.int32: np.int32, dtypes.uint32: np.uint32}
# ops with an int constant on the right: positive divisors only (FLOORDIV by a negative constant is not index math)
OPS = ("add", "sub", "mul", "mulc", "addc", "floordiv", "mod", "lt_c")


def exprs(dt):
    leaf = st.just(("var",))
    consts = st.integers(-300, 300) if not dtypes.is_unsigned(dt) else st.integers(0, 600)

    def extend(children):
        return st.one_of(
            st.tuples(st.sampled_from(["add", "sub", "mul"]), children, children),
            st.tuples(st.sampled_from(["addc", "mulc"]), children, consts),
            # divisors positive in the dtype itself (256 would wrap to 0 in int8, 200 to a negative)
            st.tuples(st.sampled_from(["floordiv", "mod"]), children, st.integers(1, min(300, dt.max))),
        )

    return st.recursive(leaf, extend, max_leaves=5)


def build(e, x):
    kind = e[0]
    if kind == "var":
        return x
    a = build(e[1], x)
    if kind in ("add", "sub", "mul"):
        return a.alu({"add": Ops.ADD, "sub": Ops.SUB, "mul": Ops.MUL}[kind], build(e[2], x))
    c = a.const_like(e[2])  # const_like wraps an out-of-range literal, as numpy's array(c).astype(dtype)
    return a.alu({"addc": Ops.ADD, "mulc": Ops.MUL, "floordiv": Ops.FLOORDIV, "mod": Ops.FLOORMOD}[kind], c)


def evaluate(e, v, npt):
    kind = e[0]
    if kind == "var":
        return npt(v)
    a = evaluate(e[1], v, npt)
    if kind in ("add", "sub", "mul"):
        b = evaluate(e[2], v, npt)
        return {"add": np.add, "sub": np.subtract, "mul": np.multiply}[kind](a, b)
    c = np.array(e[2]).astype(npt)
    return {"addc": np.add, "mulc": np.multiply, "floordiv": np.floor_divide, "mod": np.remainder}[kind](a, c)


def points(dt):
    lo, hi = dt.min, dt.max
    return sorted(p for p in {lo, lo + 1, -1, 0, 1, 2, 100, 127, 128, 255, 256, hi - 1, hi} if lo <= p <= hi)


def check(dt, e, cmp_const=None):
    npt = DTYPES[dt]
    x = UOp.variable("x", dt.min, dt.max, dt)
    u = build(e, x)
    if cmp_const is not None:
        u = u.alu(Ops.CMPLT, u.const_like(cmp_const))
    s = u.simplify()
    with np.errstate(all="ignore"):
        for v in points(dt):
            want = evaluate(e, v, npt)
            if cmp_const is not None:
                want = bool(want < np.array(cmp_const).astype(npt))
            got = s.substitute({x: x.const_like(v)}).simplify()
            assert got.op is Ops.CONST, f"{e} at x={v} did not fold: {got}"
            assert got.arg == want, f"{dt} {e} at x={v}: simplified {s} gives {got.arg}, numpy {want}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.data())
def test_simplify_keeps_wraparound(data):
    dt = data.draw(st.sampled_from(list(DTYPES)))
    check(dt, data.draw(exprs(dt)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.data())
def test_compare_folding_keeps_wraparound(data):
    dt = data.draw(st.sampled_from(list(DTYPES)))
    lo, hi = dt.min, dt.max
    check(dt, data.draw(exprs(dt)), data.draw(st.integers(lo, hi)))


def test_uint8_mul_then_div_is_not_cancelled():
    x = UOp.variable("x", 0, 255, dtypes.uint8)
    s = x.alu(Ops.MUL, x.const_like(2)).alu(Ops.FLOORDIV, x.const_like(2)).simplify()
    # 255 * 2 wraps to 254 in uint8, so the answer is 127, not x
    assert s.substitute({x: x.const_like(255)}).simplify().arg == 127


def test_int32_max_plus_one_is_not_greater():
    x = UOp.variable("x", dtypes.int32.min, dtypes.int32.max, dtypes.int32)
    s = x.const_like(dtypes.int32.max).alu(Ops.CMPLT, x.alu(Ops.ADD, x.const_like(1))).simplify()
    assert s.substitute({x: x.const_like(dtypes.int32.max)}).simplify().arg is False


def test_index_math_still_folds():
    # weakint index math never wraps: the div/mod rules must still fire there
    i = UOp.variable("i", 0, 31)
    j = UOp.variable("j", 0, 7)
    s = i.alu(Ops.MUL, i.const_like(8)).alu(Ops.ADD, j).alu(Ops.FLOORDIV, i.const_like(8)).simplify()
    assert s is i
    # and a narrow int whose proven range fits its dtype folds too
    k = UOp.variable("k", 0, 15, dtypes.int32)
    assert k.alu(Ops.MUL, k.const_like(4)).alu(Ops.FLOORDIV, k.const_like(4)).simplify() is k
