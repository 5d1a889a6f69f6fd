"""The graph-rewrite scheduler (schedule_rewrites.py, `SCHEDULER=rewrite`) against the plan scheduler it is replacing:
the same kernels, buffers and order for the same graph (fixed programs and hypothesis-drawn ones), its cache keyed by
the parameterised graph, the LINEAR over PARAM slots its passes make, and the switch."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import ArgumentError, Context, Tensor, clear_schedule_cache
from uop_scheduler.realize import _input_buffer, done, plan_for
from uop_scheduler.schedule import _plan_cache, cached_plan, rewrite_cache, walk_graph
from uop_scheduler.schedule_rewrites import parameterise, rewrite_plan, schedule_rewrites
from uopir import Ops

RNG = np.random.default_rng(3)


def _t(*shape: int) -> Tensor:
    return Tensor(RNG.standard_normal(shape).astype(np.float32)).realize()


def _both_plans(*ts: Tensor):
    roots = tuple(t.uop for t in ts)
    walk = walk_graph(roots, done, "CPU")
    old = cached_plan(walk, roots, "CPU", store=False)[0]
    new = rewrite_plan(walk, roots, [_input_buffer(n).arg.device for n in walk.inputs], "CPU", store=False)
    return old, new


def _assert_same(old, new):
    assert new.steps == old.steps  # the same kernel ASTs (hash-consed: identical objects) over the same buffers
    assert (new.n_inputs, new.new_buffers, new.outputs, new.scratch) == (old.n_inputs, old.new_buffers, old.outputs, old.scratch)


PROGRAMS = {
    "matmul relu": lambda: (_t(8, 16) @ _t(16, 4)).relu(),
    "softmax": lambda: _t(4, 32).softmax(-1),
    "reduce into reduce": lambda: (_t(2, 3, 4).sum(2) * _t(2, 3)).sum(),
    "conv pool": lambda: _t(1, 2, 8, 8).conv2d(_t(3, 2, 3, 3)).relu().max_pool2d(),
    "attention": lambda: Tensor.scaled_dot_product_attention(_t(1, 2, 8, 4), _t(1, 2, 8, 4), _t(1, 2, 8, 4)),
    "copies between devices": lambda: (_t(16).to("CPU:1") * 3).to("CPU"),
    "constants": lambda: Tensor.ones(4, 4).contiguous() * 2,
    "pad": lambda: _t(3, 4).pad(((1, 1), (0, 2))).exp().sum(0),
    "empty": lambda: _t(0, 3) + 1,
    "cat of matmuls": lambda: (_t(1, 8) @ _t(8, 4)).cat(_t(1, 8) @ _t(8, 2), dim=1),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_same_plan_as_the_plan_scheduler(name):
    _assert_same(*_both_plans(PROGRAMS[name]()))


def test_same_plan_for_several_targets_and_a_realized_one():
    a = _t(4, 4)
    x = (a * 2).contiguous()
    _assert_same(*_both_plans(x.sum(0), x.max(1), a))


def test_same_plan_with_a_symbolic_shape():
    from uop_scheduler import Variable

    base = _t(8, 5)
    n = Variable("n", 1, 8).bind(3)
    _assert_same(*_both_plans(base[:n].exp().sum(1)))


_UNARY = ["exp", "relu", "neg", "sqrt_abs", "sum0", "sum1", "max1", "T", "flip0", "pad", "shrink", "contiguous", "expand"]


def _apply(t: Tensor, op: str, other: Tensor) -> Tensor:
    if op == "sqrt_abs":
        return t.abs().sqrt()
    if op in ("sum0", "sum1", "max1"):
        r = getattr(t, op[:3])(int(op[3]), keepdim=True)
        return r.expand(t.shape) if op != "max1" else t - r
    if op == "T":
        return t.T.T if t.shape[0] != t.shape[1] else t.T
    if op == "flip0":
        return t.flip(0)
    if op == "pad":
        return t.pad(((1, 0), (0, 1)))[:t.shape[0], 1:]
    if op == "shrink":
        return t[1:].pad(((0, 1), (0, 0)))
    if op == "expand":
        return t[:, :1].expand(t.shape) * other
    return getattr(t, op)()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_UNARY), st.sampled_from(["+", "*", "none"])), min_size=1, max_size=6))
def test_random_programs_get_the_same_plan(ops):
    a, b = _t(4, 4), _t(4, 4)
    t = a
    for op, binop in ops:
        t = _apply(t, op, b)
        t = t + b if binop == "+" else t * b if binop == "*" else t
    _assert_same(*_both_plans(t))


def test_the_cache_key_stands_for_the_parameterised_graph():
    # equal walk keys <=> the same parameterised graph (hash-consed: one UOp), over graphs of one structure and of others
    clear_schedule_cache()
    graphs = [(_t(3, 4) * _t(4)).sum(0) for _ in range(2)] + [(_t(3, 4) + _t(4)).sum(0), (_t(3, 4) * _t(4)).sum(1), (_t(4, 4) * _t(4)).sum(0)]
    walks = [walk_graph((g.uop,), done, "CPU") for g in graphs]
    sinks = [parameterise((g.uop,), w.inputs, ["CPU"] * len(w.inputs)).sink for g, w in zip(graphs, walks)]
    for i in range(len(graphs)):
        for j in range(len(graphs)):
            assert (walks[i].key == walks[j].key) == (sinks[i] is sinks[j]), (i, j)
    assert sinks[0] is sinks[1]
    graphs = graphs[:2]
    with Context(SCHEDULER="rewrite"):
        for g in graphs:
            g.realize()
    assert len(rewrite_cache) == 1 and not _plan_cache


def test_the_passes_make_a_linear_over_param_slots():
    t = (_t(8, 16) @ _t(16, 4)).relu().sum()
    walk = walk_graph((t.uop,), done, "CPU")
    sched = schedule_rewrites(parameterise((t.uop,), walk.inputs, ["CPU", "CPU"]), "CPU")
    assert sched.linear.op is Ops.LINEAR and sched.n_inputs == 2
    for call in sched.linear.src:
        assert call.op is Ops.CALL and call.src[0].op is Ops.SINK and all(a.op is Ops.PARAM for a in call.src[1:])
    slots = {a.arg.slot for call in sched.linear.src for a in call.src[1:]}
    assert slots >= {0, 1} and sched.outputs[0].arg.slot in slots


def test_the_switch():
    with pytest.raises(ArgumentError, match="unknown scheduler 'fast': use one of plan, rewrite"):
        with Context(SCHEDULER="fast"):
            (_t(3) + 1).realize()
    clear_schedule_cache()
    a = _t(4)
    t = a * 5
    walk = walk_graph((t.uop,), done, "CPU")
    plan_for(walk, (t.uop,), "CPU", scheduler="rewrite")
    assert len(rewrite_cache) == 1 and not _plan_cache
    np.testing.assert_allclose(t.numpy(), a.numpy() * 5, rtol=1e-6)


def test_writes_are_ordered_by_the_rewrite_scheduler():
    clear_schedule_cache()
    with Context(SCHEDULER="rewrite"):
        a = _t(6)
        before = a.numpy().copy()
        t = a * 3  # reads the version the write replaces: runs first
        a += 1
        a.realize()
        b = _t(6)
        b_before = b.numpy().copy()
        b.assign(b.flip(0))  # reads the version it overwrites elsewhere: from a copy
        b.realize()
    assert len(rewrite_cache) == 2 and not _plan_cache
    np.testing.assert_allclose(a.numpy(), before + 1, rtol=1e-6)
    np.testing.assert_allclose(t.numpy(), before * 3, rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), b_before[::-1], rtol=1e-6)


def test_an_empty_write_runs_no_kernel():
    # (the write fuzzer's seed 1: a store kernel over an empty view wrote one element)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    with Context(SCHEDULER="rewrite"):
        t0 = Tensor(x)
        t2 = t0[-4, 1:3:3]
        t2[1:0:1] = 3.0
        np.testing.assert_array_equal(t0.numpy(), x)


def test_in_place_kernels_are_ordered_by_the_rewrite_scheduler():
    from uopir import AxisType, UOp

    def add_one(out: UOp) -> UOp:
        i = UOp.range(out.dtype.size, 0, AxisType.LOOP)
        return UOp.sink(out.index(i).store(out.index(i).load() + 1).end(i))

    clear_schedule_cache()
    with Context(SCHEDULER="rewrite"):
        out = Tensor(np.ones(8, np.float32)).realize()
        before = out * 10  # reads the version the kernel overwrites: kept for it
        (res,) = out.custom_kernel(fxn=add_one)
        np.testing.assert_equal(res.numpy(), np.full(8, 2))
        np.testing.assert_equal(before.numpy(), np.full(8, 10))
    assert rewrite_cache and not _plan_cache
