"""The scheduler's passes (schedule_rewrites.py): random programs against numpy, its cache keyed by the parameterised
graph's structure, the LINEAR over PARAM slots it makes, and writes ordered by buffer versions."""

import numpy as np
from hcq_runtime import counters
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor, clear_schedule_cache
from uop_scheduler.realizer import done
from uop_scheduler.schedule import schedule_cache, walk_graph
from uop_scheduler.schedule_rewrites import parameterise, schedule_rewrites
from uopir import Ops

RNG = np.random.default_rng(3)


def _t(*shape: int) -> Tensor:
    return Tensor(RNG.standard_normal(shape).astype(np.float32)).realize()


_UNARY = ["exp", "relu", "neg", "sqrt", "sum0", "sum1", "max1", "T", "flip0", "pad", "shrink", "contiguous", "expand"]


def _apply(t, op: str, other, xp):
    """One op of a random program, on a Tensor (xp None) or a numpy array (xp numpy)."""
    if op == "sqrt":  # of a value kept away from 0, where float32 rounding is not amplified
        return (t * t + 1).sqrt() if xp is None else np.sqrt(t * t + 1)
    if op in ("sum0", "sum1"):
        axis = int(op[3])
        return t.sum(axis, keepdim=True).expand(t.shape) if xp is None else np.broadcast_to(t.sum(axis, keepdims=True), t.shape)
    if op == "max1":
        return t - t.max(1, keepdim=True) if xp is None else t - t.max(1, keepdims=True)
    if op == "T":
        return t.T if xp is None else t.T
    if op == "flip0":
        return t.flip(0) if xp is None else t[::-1]
    if op == "pad":
        return t.pad(((1, 0), (0, 1)))[:t.shape[0], 1:] if xp is None else np.pad(t, ((1, 0), (0, 1)))[:t.shape[0], 1:]
    if op == "shrink":
        return t[1:].pad(((0, 1), (0, 0))) if xp is None else np.pad(t[1:], ((0, 1), (0, 0)))
    if op == "expand":
        return t[:, :1].expand(t.shape) * other if xp is None else np.broadcast_to(t[:, :1], t.shape) * other
    if op == "contiguous":
        return t.contiguous() if xp is None else t
    if op == "exp":
        return t.exp() if xp is None else np.exp(t)
    if op == "relu":
        return t.relu() if xp is None else np.maximum(t, 0)
    return -t


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_UNARY), st.sampled_from(["+", "*", "none"])), min_size=1, max_size=6),
       st.integers(0, 2**31 - 1))
def test_random_programs_match_numpy(ops, seed):
    # fusion, buffers and kernel order over random chains of elementwise, reduce and movement ops (values kept small)
    rng = np.random.default_rng(seed)
    an, bn = (rng.uniform(-1, 1, (4, 4)).astype(np.float32) for _ in range(2))
    t, want = Tensor(an).realize(), an.astype(np.float64)
    b = Tensor(bn).realize()
    for op, binop in ops:
        t, want = _apply(t, op, b, None), _apply(want, op, bn.astype(np.float64), np)
        if binop != "none":
            t, want = (t + b, want + bn) if binop == "+" else (t * b, want * bn)
        t, want = t.tanh(), np.tanh(want)  # keeps values in range for exp
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-4, atol=1e-5)


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
    for g in graphs:
        g.realize()
    assert len(schedule_cache) == 1


def test_the_passes_make_a_linear_over_param_slots():
    t = (_t(8, 16) @ _t(16, 4)).relu().sum()
    walk = walk_graph((t.uop,), done, "CPU")
    sched = schedule_rewrites(parameterise((t.uop,), walk.inputs, ["CPU", "CPU"]), "CPU")
    assert sched.linear.op is Ops.LINEAR and sched.n_inputs == 2
    for call in sched.linear.src:
        assert call.op is Ops.CALL and call.src[0].op is Ops.SINK and all(a.op is Ops.PARAM for a in call.src[1:])
    slots = {a.arg.slot for call in sched.linear.src for a in call.src[1:]}
    assert slots >= {0, 1} and sched.outputs[0].arg.slot in slots


def test_writes_are_ordered_by_buffer_versions():
    a = _t(6)
    before = a.numpy().copy()
    t = a * 3  # reads the version the write replaces: runs first
    a += 1
    a.realize()
    b = _t(6)
    b_before = b.numpy().copy()
    b.assign(b.flip(0))  # reads the version it overwrites elsewhere: from a copy
    b.realize()
    np.testing.assert_allclose(a.numpy(), before + 1, rtol=1e-6)
    np.testing.assert_allclose(t.numpy(), before * 3, rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), b_before[::-1], rtol=1e-6)


def test_an_empty_write_runs_no_kernel():
    # (the write fuzzer's seed 1: a store kernel over an empty view wrote one element)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    t0 = Tensor(x)
    t2 = t0[-4, 1:3:3]
    t2[1:0:1] = 3.0
    counters.reset()
    t0.realize()
    assert counters.kernels == 0  # ordered as a write, run as nothing
    np.testing.assert_array_equal(t0.numpy(), x)


def test_in_place_kernels_are_writes_too():
    from uopir import AxisType, UOp

    def add_one(out: UOp) -> UOp:
        i = UOp.range(out.dtype.size, 0, AxisType.LOOP)
        return UOp.sink(out.index(i).store(out.index(i).load() + 1).end(i))

    out = Tensor(np.ones(8, np.float32)).realize()
    before = out * 10  # reads the version the kernel overwrites: kept for it
    (res,) = out.custom_kernel(fxn=add_one)
    np.testing.assert_equal(res.numpy(), np.full(8, 2))
    np.testing.assert_equal(before.numpy(), np.full(8, 10))
