"""UPat / PatternMatcher / graph_rewrite: pattern forms, indexing by op, fixed points, traversal modes."""

import pytest
from uopir import Ops, PatternMatcher, RewriteError, UOp, UPat, dtypes, graph_rewrite

x = UOp.variable("x", 0, 9)
y = UOp.variable("y", 0, 9)


def matches(pat, u):
    return pat.match(u, {})


def test_upat_forms():
    add = x + y
    assert matches(UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("b"))), add) == [{"a": x, "b": y}]
    # list: any order of the srcs
    perms = matches(UPat(Ops.ADD, src=[UPat.var("a"), UPat(Ops.DEFINE_VAR, arg=("y", 0, 9), name="b")]), add)
    assert perms == [{"a": x, "b": y}]
    # single pattern: every src matches it
    assert matches(UPat(Ops.ADD, src=UPat(Ops.DEFINE_VAR)), add) and not matches(UPat(Ops.ADD, src=UPat(Ops.CONST)), add)
    # names must bind consistently
    assert not matches(UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("a"))), add)
    assert matches(UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("a"))), x + x)
    # allow_any_len only constrains a prefix
    st = UOp.sink(x, y, x + 1)
    assert not matches(UPat(Ops.SINK, src=(UPat.var("a"),)), st)
    assert matches(UPat(Ops.SINK, src=(UPat.var("a"),), allow_any_len=True), st) == [{"a": x}]
    # op sets, dtypes and args
    assert matches(UPat((Ops.ADD, Ops.MUL), dtype=dtypes.weakint), x * 2)
    assert not matches(UPat(Ops.MUL, dtype=dtypes.float), x * 2)
    assert matches(UPat.cvar("c", dtypes.weakint), UOp.const(3)) and matches(UPat.const(None, 3), UOp.const(3))
    assert matches(UPat.any(UPat(Ops.MUL, name="m"), UPat(Ops.ADD, name="m")), x + 1) == [{"m": x + 1}]


def test_early_reject_skips_rules_without_needed_src_ops():
    calls = []

    def spy(a):
        calls.append(a)
        return None

    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("a"), UPat(Ops.CONST))), spy)])
    assert pm.rewrite(x + y) is None and calls == []  # no CONST among the srcs: the rule is never tried
    pm.rewrite(x + 1)
    assert calls == [x]
    custom = PatternMatcher([(UPat(Ops.MUL, name="a", custom_early_reject={Ops.RANGE}), spy)])
    custom.rewrite(x * 2)
    assert calls == [x]
    # rules are indexed by op: a MUL rule is never looked at for an ADD
    assert Ops.ADD not in custom.pdict


def test_fixed_point_rewriting():
    # x+c -> x+(c-1) until c is 0, then x+0 -> x: needs many passes over the same node
    pm = PatternMatcher([
        (UPat(Ops.ADD, src=(UPat.var("a"), UPat.cvar("c"))), lambda a, c: a + (c.arg - 1) if c.arg > 0 else a),
    ])
    assert graph_rewrite(x + 5, pm) is x
    assert graph_rewrite(UOp.sink(x + 3, y + 2), pm) is UOp.sink(x, y)


def test_bottom_up_and_walk():
    seen = []
    pm = PatternMatcher([(UPat(Ops.MUL, name="m"), lambda m: seen.append(m.src[0]) or m.src[0])])
    g = (x * 2) * 3
    assert graph_rewrite(g, pm) is x
    seen.clear()
    assert graph_rewrite(g, pm, bottom_up=True) is x
    assert seen[0] is x * 2  # bottom-up rewrites the outer node before its srcs
    # walk: each node rewritten once, results are not rewritten again
    bump = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda v: v + 1)])
    assert graph_rewrite(x * 2, bump, walk=True) is (x + 1) * 2
    # without walk, a node inside its own replacement is left alone, so x -> x+1 still terminates
    assert graph_rewrite(x, bump) is x + 1
    assert graph_rewrite(x, bump, bottom_up=True) is x + 1


def test_ctx_is_passed():
    pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda ctx, v: ctx.get(v))])
    assert graph_rewrite(x + y, pm, ctx={x: y}) is y + y


def test_enter_calls():
    body = UOp.sink(UOp.param(0, dtypes.weakint, ()).store(x))
    call = body.call(x)
    pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, arg=("x", 0, 9)), lambda: y)])
    assert graph_rewrite(call, pm).src == (body, y)
    assert graph_rewrite(call, pm, enter_calls=True).src[0] is UOp.sink(UOp.param(0, dtypes.weakint, ()).store(y))


def test_100k_chain_rewrite_is_iterative():
    node = x
    for i in range(100_000):
        node = node * 1 if i % 2 else node + 0
    pm = PatternMatcher([
        (UPat(Ops.MUL, src=(UPat.var("a"), UPat.const(None, 1))), lambda a: a),
        (UPat(Ops.ADD, src=(UPat.var("a"), UPat.const(None, 0))), lambda a: a),
    ])
    assert graph_rewrite(node, pm) is x
    assert graph_rewrite(node, pm, bottom_up=True) is x


def test_rule_errors_name_the_rule():
    pm = PatternMatcher([(UPat(Ops.ADD, name="a"), lambda a: 1 // 0)])
    with pytest.raises(RewriteError, match="ZeroDivisionError"):
        graph_rewrite(x + 1, pm)
