"""Symbolic simplification: a value-preservation property (the oracle for every rule) plus targeted cases."""

import pytest
import uopir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uopir import Ops, UOp, dtypes, graph_rewrite, pm_lower_floor_ops, simplify_valid, simplify_valid_idx, ssimplify, sym_infer

VARS = {"x": (-8, 8), "y": (0, 15), "z": (1, 4), "u": (0, 3), "b": (0, 1)}
DIVISORS = [c for c in range(-7, 8) if c != 0]
CONST_RHS = ("floordiv", "mod", "cdiv", "cmod", "shl", "shr")

# expression trees as tuples, evaluated by the test's own interpreter (Python ints, floor division)
leaf = st.one_of(st.sampled_from([("var", n) for n in VARS]), st.integers(-20, 20).map(lambda c: ("const", c)))


def extend(children):
    return st.one_of(
        st.tuples(st.just("add"), children, children),
        st.tuples(st.just("sub"), children, children),
        st.tuples(st.just("mul"), children, st.integers(-6, 6).map(lambda c: ("const", c))),
        st.tuples(st.just("mul"), children, children),
        st.tuples(st.just("floordiv"), children, st.sampled_from(DIVISORS)),
        st.tuples(st.just("mod"), children, st.sampled_from(DIVISORS)),
        st.tuples(st.just("cdiv"), children, st.sampled_from(DIVISORS)),
        st.tuples(st.just("cmod"), children, st.sampled_from(DIVISORS)),
        st.tuples(st.just("band"), children, children),
        st.tuples(st.just("bor"), children, children),
        st.tuples(st.just("shl"), children, st.integers(0, 3)),
        st.tuples(st.just("shr"), children, st.integers(0, 3)),
        st.tuples(st.just("divz"), children),
        st.tuples(st.just("modz"), children),
        st.tuples(st.just("max"), children, children),
        st.tuples(st.just("min"), children, children),
        st.tuples(st.just("where"), st.tuples(st.sampled_from(["lt", "ne", "eq", "ge"]), children, children), children, children),
    )


int_exprs = st.recursive(leaf, extend, max_leaves=10)
bool_exprs = st.tuples(st.sampled_from(["lt", "ne", "eq", "ge", "and_lt"]), int_exprs, int_exprs)


def evaluate(e, env):
    kind = e[0]
    if kind == "var":
        return env[e[1]]
    if kind == "const":
        return e[1]
    if kind in ("lt", "ne", "eq", "ge", "and_lt"):
        a, b = evaluate(e[1], env), evaluate(e[2], env)
        return {"lt": a < b, "ne": a != b, "eq": a == b, "ge": a >= b, "and_lt": a < b and a < 3}[kind]
    if kind == "where":
        return evaluate(e[2], env) if evaluate(e[1], env) else evaluate(e[3], env)
    a = evaluate(e[1], env)
    if kind == "divz":
        return a // env["z"]
    if kind == "modz":
        return a % env["z"]
    b = (e[2] if isinstance(e[2], int) else e[2][1]) if kind in CONST_RHS else evaluate(e[2], env)
    # C division truncates toward zero and its remainder takes the dividend's sign
    cdiv = abs(a) // abs(b) * (1 if (a >= 0) == (b > 0) else -1) if kind in ("cdiv", "cmod") else 0
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "floordiv": lambda: a // b, "mod": lambda: a % b,
            "max": lambda: max(a, b), "min": lambda: min(a, b), "cdiv": lambda: cdiv, "cmod": lambda: a - cdiv * b,
            "band": lambda: a & b, "bor": lambda: a | b, "shl": lambda: a << b, "shr": lambda: a >> b}[kind]()


def build(e, vs):
    kind = e[0]
    if kind == "var":
        return vs[e[1]]
    if kind == "const":
        return UOp.const(e[1])
    if kind in ("lt", "ne", "eq", "ge", "and_lt"):
        a, b = build(e[1], vs), build(e[2], vs)
        return {"lt": lambda: a < b, "ne": lambda: a.ne(b), "eq": lambda: a.eq(b), "ge": lambda: a >= b,
                "and_lt": lambda: (a < b) & (a < 3)}[kind]()
    if kind == "where":
        return build(e[1], vs).where(build(e[2], vs), build(e[3], vs))
    a = build(e[1], vs)
    if kind == "divz":
        return a // vs["z"]
    if kind == "modz":
        return a % vs["z"]
    if kind in CONST_RHS:
        c = e[2] if isinstance(e[2], int) else e[2][1]
        return {"floordiv": lambda: a // c, "mod": lambda: a % c, "cdiv": lambda: a.cdiv(c), "cmod": lambda: a.cmod(c),
                "shl": lambda: a << c, "shr": lambda: a >> c}[kind]()
    b = build(e[2], vs)
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "max": lambda: a.maximum(b), "min": lambda: a.minimum(b),
            "band": lambda: a & b, "bor": lambda: a | b}[kind]()


assignments = st.fixed_dictionaries({n: st.integers(lo, hi) for n, (lo, hi) in VARS.items()})


def check_preserves_value(expr, envs):
    vs = {n: UOp.variable(n, lo, hi) for n, (lo, hi) in VARS.items()}
    u = build(expr, vs)
    s = u.simplify()
    for env in envs:
        want = evaluate(expr, env)
        assert u.sym_infer(env) == want  # the graph is built right
        got = s.sym_infer(env) if s.op is not Ops.CONST else s.arg
        assert got == want, f"{u.render(simplify=False)} simplified to {s.render(simplify=False)}: {got} != {want} at {env}"
        assert s.vmin <= want <= s.vmax and u.vmin <= want <= u.vmax  # value ranges are sound


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=int_exprs, envs=st.lists(assignments, min_size=1, max_size=6))
def test_simplify_preserves_value_int(expr, envs):
    check_preserves_value(expr, envs)


@settings(max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=bool_exprs, envs=st.lists(assignments, min_size=1, max_size=6))
def test_simplify_preserves_value_bool(expr, envs):
    check_preserves_value(expr, envs)


@settings(max_examples=100, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=int_exprs)
def test_pyrender_rebuilds_the_same_graph(expr):
    vs = {n: UOp.variable(n, lo, hi) for n, (lo, hi) in VARS.items()}
    u = build(expr, vs)
    for g in (u, u.simplify()):
        ns = vars(uopir).copy()
        exec(g.pyrender(), ns)
        assert ns["ast"] is g


# index math proper: linear combinations of variables, then nested floor div/mod by positive constants
# strides and divisors are mostly commensurate, as in real views, so the div/mod rules get exercised
STRIDES = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, -1, -2, -4, 5]
linear = st.tuples(st.lists(st.tuples(st.sampled_from(STRIDES), st.sampled_from(list(VARS))), min_size=1, max_size=4), st.integers(-30, 30))


def linear_expr(terms_const):
    terms, const = terms_const
    e = ("const", const)
    for coef, name in terms:
        e = ("add", e, ("mul", ("var", name), ("const", coef)))
    return e


index_exprs = st.recursive(linear.map(linear_expr), lambda inner: st.one_of(
    st.tuples(st.sampled_from(["floordiv", "mod"]), inner, st.sampled_from([2, 3, 4, 6, 8, 12, 16, 32, 5, 7])),
    st.tuples(st.just("add"), inner, linear.map(linear_expr)),
    st.tuples(st.just("mul"), inner, st.integers(1, 8).map(lambda c: ("const", c))),
), max_leaves=4)


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=index_exprs, envs=st.lists(assignments, min_size=1, max_size=6))
def test_simplify_preserves_value_index_math(expr, envs):
    check_preserves_value(expr, envs)


def row_major_strides(shape):
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


@st.composite
def views(draw):
    """A reshape of a permuted buffer: output index variables and the source offset (an expression tree)."""
    dims = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    order = draw(st.permutations(range(len(dims))))
    total = 1
    for d in dims:
        total *= d
    new_shape, rest = [], total
    while rest > 1 and len(new_shape) < 3:
        f = draw(st.sampled_from([k for k in range(1, rest + 1) if rest % k == 0]))
        new_shape.append(f)
        rest //= f
    new_shape.append(rest)
    outs = {f"o{j}": (0, n - 1) for j, n in enumerate(new_shape)}
    flat = ("const", 0)
    for j, st_ in enumerate(row_major_strides(new_shape)):
        flat = ("add", flat, ("mul", ("var", f"o{j}"), ("const", st_)))
    pdims = [dims[i] for i in order]
    src_strides = row_major_strides(dims)
    offset = ("const", draw(st.integers(-3, 3)))
    for k, pst in enumerate(row_major_strides(pdims)):
        idx = ("mod", ("floordiv", flat, pst), pdims[k]) if pdims[k] > 1 else ("const", 0)
        offset = ("add", offset, ("mul", idx, ("const", src_strides[order[k]])))
    return outs, offset


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(view=views(), data=st.data())
def test_simplify_preserves_value_views(view, data):
    ranges, expr = view
    vs = {n: UOp.variable(n, lo, hi) for n, (lo, hi) in ranges.items()}
    u = build(expr, vs)
    s = u.simplify()
    for _ in range(4):
        env = {n: data.draw(st.integers(lo, hi)) for n, (lo, hi) in ranges.items()}
        want = evaluate(expr, env)
        assert u.sym_infer(env) == want
        assert (s.sym_infer(env) if s.op is not Ops.CONST else s.arg) == want, f"{u.render(simplify=False)} -> {s.render(simplify=False)}"
        assert s.vmin <= want <= s.vmax


def test_simplify_is_idempotent_on_index_math():
    x, y = UOp.variable("x", 0, 10), UOp.variable("y", 0, 3)
    s = ((x * 4 + y) // 4 + (x * 4 + y) % 4).simplify()
    assert s.simplify() is s


# ---- targeted cases: each states the mathematically expected result ----
x = UOp.variable("x", 0, 10)
y = UOp.variable("y", 0, 3)
n = UOp.variable("n", -5, 5)
w = UOp.variable("w", 0, 1)


@pytest.mark.parametrize("expr,want", [
    ((x * 4 + y) % 4, y),
    ((x * 4 + y) // 4, x),
    (x + 1 - x, UOp.const(1)),
    (x % 4 + (x // 4) * 4, x),
    (x // 2 // 3, x // 6),
    (x * 3 + x * 2, x * 5),
    ((x + 2) * 3, x * 3 + 6),
    (y // 4, UOp.const(0)),
    (y % 4, y),
    (x - x, UOp.const(0)),
    (x * 0, UOp.const(0)),
    (x * 1 + 0, x),
    ((x // 4) % 3 * 4 + x % 4, x % 12),
    ((x * 16 + y * 2 + w) % 16, y * 2 + w),
    ((x * 16 + y * 2 + w) // 16, x),
    ((x * 16 + y * 2 + w + 20) % 16, y * 2 + w + 4),
    ((x * 16 + y * 2 + w + 20) // 16, x + 1),
    ((x * 6 + 4) // 4, (x * 3 + 2) // 2),
    ((x * 6 + 4) % 4, ((x * 3 + 2) % 2) * 2),
])
def test_known_simplifications(expr, want):
    assert expr.simplify() is want.simplify(), f"{expr.render()} != {want.render()}"


def test_comparison_folding():
    assert (x < 11).simplify().arg is True
    assert (x < 0).simplify().arg is False
    assert (x * 4 + 2 < 10).simplify() is (x < 2).simplify()
    assert (x + 3 < 5).simplify() is (x < 2).simplify()
    assert (x // 4 < 2).simplify() is (x < 8).simplify()
    assert n.maximum(x).simplify().op is Ops.MAX  # the ranges overlap: either side can win
    assert (n - 6).maximum(x).simplify() is x  # n - 6 <= -1 < 0 <= x
    assert (y.maximum(x + 4)).simplify() is (x + 4).simplify()
    # validity-mask shapes: a sum of non-negative terms below 1, and A*m + B < d with B in [0, m)
    assert (x * 2 + y < 1).simplify() is (x + y < 1).simplify()
    assert (x * 4 + y < 8).simplify() is (x < 2).simplify()
    assert (x * 4 + y < 7).simplify().op is Ops.CMPLT and (x * 4 + y < 7).simplify() is not (x < 2).simplify()


def test_sym_infer_and_bind():
    s = UOp.variable("s", 1, 8)
    expr = s * 3 + 1
    assert expr.sym_infer({"s": 4}) == 13 and sym_infer(expr, {s: 2}) == 7 and sym_infer(5, {}) == 5
    b = s.bind(5)
    assert b.unbind() == (s, 5) and (b * 2).sym_infer({}) == 10
    assert ssimplify(UOp.const(3) + 4) == 7
    with pytest.raises(ValueError):
        s.bind(9)


def test_bitwise_and_is_not_a_valid():
    # the seed's fix: an int AND is bitwise, never a validity mask, and renders unchanged
    r0 = UOp.range(16, 0)
    out = simplify_valid_idx(UOp.sink((r0 & UOp.const(12, dtypes.int)) & r0)).src[0]
    assert out.render(simplify=False) == "((int)(r0)&12&(int)(r0))"


def test_valid_simplification_drops_implied_clauses():
    r = UOp.range(16, 0)
    valid = (r < 10) & (r < 12) & (r >= 2)
    got = simplify_valid(valid)
    assert got is not None and got is ((r < 10) & (r >= 2))
    assert simplify_valid((r < 3) & (r >= 5)).arg is False
    assert simplify_valid((r < 10) & (r >= 2)) is None


def test_c_division_forms():
    # C division of a non-negative value is the floor form (which the rules understand); lowering turns it back
    q = x.cdiv(4)
    assert q.simplify() is (x // 4).simplify()
    assert x.cmod(16).simplify() is x
    assert n.cdiv(2).simplify().op is Ops.CDIV  # n may be negative: trunc != floor, nothing to rewrite
    lowered = graph_rewrite((x * 4 + y) // 3, pm_lower_floor_ops)
    assert lowered.op is Ops.CDIV and lowered.sym_infer({"x": 7, "y": 2}) == (7 * 4 + 2) // 3
    assert graph_rewrite(n // 3, pm_lower_floor_ops).op is Ops.FLOORDIV
    assert n.cdiv(2).sym_infer({"n": -5}) == -2 and n.cmod(2).sym_infer({"n": -5}) == -1


def test_division_by_a_multiple_of_a_shared_factor():
    # (a*f + r) // (f*k) == a // k and % == (a % k)*f + r when 0 <= r < f: a merged (heads x head_dim) index, or a
    # vector lane inside a block, divided by a multiple of its inner size loses the inner part
    a, lane = UOp.variable("a", 0, 11), UOp.variable("lane", 0, 31)
    assert ((a * 32 + lane) // 192).simplify() is (a // 6).simplify()
    assert ((a * 32 + lane) % 192).simplify() is ((a % 6) * 32 + lane).simplify()
    assert ((a * 32 + lane + 5) // 64).simplify().op is Ops.FLOORDIV  # lane + 5 may reach 32: no shared factor splits off


@pytest.mark.parametrize("f,k,lo,hi,const", [(4, 3, -5, 7, 0), (8, 2, 0, 9, 3), (6, 4, -3, 3, -7), (3, 5, -2, 11, 2)])
def test_shared_factor_divmod_exhaustive(f, k, lo, hi, const):
    """Every value of x*f + y*2f + r + const (r spanning less than f with the constant) divided and reduced by f*k,
    against Python's integers."""
    xv, yv = UOp.variable("x", lo, hi), UOp.variable("y", -2, 3)
    rv = UOp.variable("r", 0, f - 1 - const % f)
    c = f * k
    expr = xv * f + yv * (2 * f) + rv + const
    for op in ("div", "mod"):
        s = (expr // c if op == "div" else expr % c).simplify()
        for xi in range(lo, hi + 1):
            for yi in range(-2, 4):
                for ri in range(rv.vmin, rv.vmax + 1):
                    value = xi * f + yi * 2 * f + ri + const
                    want = value // c if op == "div" else value % c
                    env = {"x": xi, "y": yi, "r": ri}
                    assert (s.sym_infer(env) if s.op is not Ops.CONST else s.arg) == want, f"{s.render()} at {env}"


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float32, dtypes.float64])
def test_division_by_a_power_of_two_becomes_a_multiplication_by_its_exact_reciprocal(dt):
    x = UOp.variable("x", 0, 10).cast(dt)
    for c, r in ((8.0, 0.125), (-0.5, -2.0), (1.0, 1.0), (2.0**-10, 2.0**10)):
        out = graph_rewrite(x / UOp.const(c, dt), pm_lower_floor_ops)
        assert out.op is Ops.MUL and out.src[1].op is Ops.CONST and out.src[1].arg == r and out.src[1].dtype is dt, (c, out)
    exp_bits, _ = dtypes.finfo(dt)
    bias = (1 << (exp_bits - 1)) - 1
    # a divisor that is no power of two, or whose reciprocal is subnormal or out of range, or not finite: kept a division
    for c in (3.0, 0.1, 2.0**bias, float("inf"), float("nan"), 0.0, -0.0):
        out = graph_rewrite(x / UOp.const(c, dt), pm_lower_floor_ops)
        assert out.op is Ops.FDIV, (c, out)


def test_transcendentals_use_fused_multiply_adds_where_the_renderer_has_them():
    from uopir.codegen.decompose import decompose

    v = UOp.variable("x", 0, 10).cast(dtypes.float32)
    for op in (Ops.EXP2, Ops.LOG2, Ops.SIN):
        node = UOp(op, dtypes.float32, (v,))
        with_fma = decompose(node, frozenset({Ops.MULACC}))
        without = decompose(node, frozenset())
        assert any(u.op is Ops.MULACC for u in with_fma.toposort()), op
        assert not any(u.op is Ops.MULACC for u in without.toposort()), op
