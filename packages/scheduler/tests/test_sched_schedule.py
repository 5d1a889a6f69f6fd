"""Scheduling: fusion decided by kernel counts, the schedule cache, device copies, and error types and messages."""

import numpy as np
import pytest
from hcq_runtime import counters
from uop_scheduler import Tensor, clear_schedule_cache
from uop_scheduler.realizer import schedule_for
from uop_scheduler.schedule import cached_schedules, row_fusion, walk_graph


def kernels_for(t: Tensor) -> int:
    counters.reset()
    t.realize()
    return counters.kernels


def test_elementwise_chain_fuses_into_its_reduce():
    a, b = Tensor.ones(16, 16), Tensor.ones(16, 16).contiguous().realize()
    assert kernels_for((a + b).sum()) == 1
    assert kernels_for(((a * 2 + b).exp() - 1).sum(1)) == 1


def test_reduce_feeds_elementwise_in_one_kernel():
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    t = x.sum(1) * 2 + 1
    assert kernels_for(t) == 1
    np.testing.assert_allclose(t.numpy(), np.arange(12).reshape(3, 4).sum(1) * 2 + 1)


def test_softmax_is_at_most_three_kernels():
    x = Tensor(np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32))
    assert kernels_for(x.softmax(-1)) <= 3
    assert kernels_for(x.log_softmax(-1)) <= 3


def test_matmul_is_one_kernel():
    a, b = Tensor.ones(8, 4).contiguous().realize(), Tensor.ones(4, 8).contiguous().realize()
    assert kernels_for(a @ b) == 1


def test_reduce_into_reduce_materializes():
    x = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    t = (x.sum(2) * x.sum(2)).sum()  # the inner sum is read by another reduce: one kernel for it, one for the outer
    assert kernels_for(t) == 2
    inner = np.arange(24, dtype=np.float32).reshape(2, 3, 4).sum(2)
    assert t.item() == (inner * inner).sum()


def test_contiguous_forces_a_buffer():
    x = Tensor.ones(4, 4)
    assert kernels_for((x + 1).contiguous() * 2) == 2


def test_schedule_cache_reuses_plan_for_new_buffers():
    clear_schedule_cache()
    rng = np.random.default_rng(0)
    graphs = []
    for _ in range(2):
        a, b = Tensor(rng.standard_normal((4, 4)).astype(np.float32)), Tensor(rng.standard_normal(4).astype(np.float32))
        graphs.append(((a * b).sum(0) + 1, a.numpy(), b.numpy()))
    plans = [schedule_for(walk_graph((t.uop,), set(), "CPU"), (t.uop,), "CPU") for t, _, _ in graphs]
    assert plans[0] is plans[1] and cached_schedules() == [plans[0]]
    for t, a, b in graphs:
        np.testing.assert_allclose(t.numpy(), (a * b).sum(0) + 1, rtol=1e-6)
    counters.reset()
    a2 = Tensor(rng.standard_normal((4, 4)).astype(np.float32))
    b2 = Tensor(rng.standard_normal(4).astype(np.float32))
    ((a2 * b2).sum(0) + 1).realize()
    assert counters.compiles == 0  # the same structure: no new kernel source


def test_different_structure_misses_cache():
    clear_schedule_cache()
    a = Tensor.ones(4).contiguous().realize()
    w1 = walk_graph(((a + 1).uop,), set(), "CPU")
    w2 = walk_graph(((a * 1).uop,), set(), "CPU")
    assert w1.key != w2.key


def test_value_semantics_across_realize_order():
    a = Tensor([1.0, 2.0, 3.0])
    b = a * 2
    c = b + a
    b.realize()
    np.testing.assert_allclose(c.numpy(), [3.0, 6.0, 9.0])
    np.testing.assert_allclose(b.numpy(), [2.0, 4.0, 6.0])


def test_realize_several_at_once():
    x = Tensor([1.0, 2.0])
    a, b = x + 1, x * 3
    counters.reset()
    a.realize(b)
    assert counters.kernels == 2
    assert a.tolist() == [2.0, 3.0] and b.tolist() == [3.0, 6.0]


def test_copy_between_devices_is_a_copy_call():
    x = Tensor([1.0, 2.0]) + 1
    counters.reset()
    y = x.to("CPU:1").realize()
    assert counters.copies == 1 and y.tolist() == [2.0, 3.0]


# ---- errors ----
def test_broadcast_error_names_shapes():
    with pytest.raises(IndexError, match=r"\(2, 3\).*\(4,\)"):
        Tensor.ones(2, 3) + Tensor.ones(4)


def test_reshape_errors():
    with pytest.raises(ValueError, match=r"size mismatch.*\(2, 3\).*\(4, 2\)"):
        Tensor.ones(2, 3).reshape(4, 2)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        Tensor.ones(2, 3).reshape(-1, -1)
    with pytest.raises(ValueError, match="size mismatch"):
        Tensor.ones(2, 3).reshape(4, -1)


def test_index_errors():
    with pytest.raises(IndexError, match="index=3 is out of bounds with size=3"):
        Tensor.ones(2, 3)[0, 3]
    with pytest.raises(IndexError, match=r"too many indices \(3\) for 2D"):
        Tensor.ones(2, 3)[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        Tensor.ones(2, 3)[..., ...]
    with pytest.raises(IndexError, match=r"dim=2 out of range"):
        Tensor.ones(2, 3).sum(2)
    with pytest.raises(IndexError):
        Tensor.ones(2, 3)[1.5]


def test_matmul_and_dtype_errors():
    with pytest.raises(RuntimeError, match=r"cannot dot \(2, 3\) and \(2, 3\)"):
        Tensor.ones(2, 3) @ Tensor.ones(2, 3)
    with pytest.raises(RuntimeError, match="float32"):
        Tensor.ones(2) ^ Tensor.ones(2)
    with pytest.raises(TypeError):
        Tensor({"a": 1})
    with pytest.raises(ValueError):
        Tensor([[1, 2], [3]])
    with pytest.raises(RuntimeError, match="different devices"):
        Tensor.ones(2) + Tensor.ones(2, device="CPU:1")


def test_long_elementwise_chain_is_one_kernel():
    # the scheduler lowers iteratively; 100 steps stay inside the C renderer's one-expression nesting limit (256)
    x = Tensor([1.0, 2.0])
    ref = np.array([1.0, 2.0], np.float32)
    for _ in range(100):
        x, ref = x * 0.5 + 1, ref * np.float32(0.5) + np.float32(1)
    assert kernels_for(x) == 1
    np.testing.assert_allclose(x.numpy(), ref, rtol=1e-6)


def test_concatenated_matmuls_are_computed_once_each():
    from hcq_runtime import counters

    rng = np.random.default_rng(0)
    x, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((1, 64), (64, 32), (64, 16)))
    out = (Tensor(x) @ Tensor(w1)).cat(Tensor(x) @ Tensor(w2), dim=1)
    counters.reset()
    np.testing.assert_allclose(out.numpy(), np.concatenate([x @ w1, x @ w2], 1), rtol=1e-4, atol=1e-5)
    assert counters.kernels == 3  # each product in its own kernel, then the concatenation (not every product per element)


def test_kernels_equal_but_for_their_buffers_are_lowered_once(monkeypatch):
    from uop_scheduler import rangeify, schedule
    monkeypatch.setattr(schedule, "_LOWERED", {})  # the same graphs ran under the other scheduler's parametrization
    lowered = []
    real = rangeify.KernelLowering.kernel
    monkeypatch.setattr(rangeify.KernelLowering, "kernel", lambda self, node, body: lowered.append(node) or real(self, node, body))
    xs = [Tensor(np.arange(6, dtype=np.float32) + i) for i in range(4)]
    ys = [x * 2.71828 + 0.57721 for x in xs]  # constants no other test uses: a structure not lowered before
    Tensor.realize(*ys)
    assert len(lowered) == 1
    for i, y in enumerate(ys):
        np.testing.assert_allclose(y.numpy(), (np.arange(6) + i) * 2.71828 + 0.57721, rtol=1e-6)


def test_a_kernel_reading_one_buffer_twice_is_not_taken_for_one_reading_two():
    a = Tensor(np.arange(4, dtype=np.float32))
    b = Tensor(np.arange(4, dtype=np.float32) + 10)
    same, other = a * a + 3.14159, a * b + 3.14159
    Tensor.realize(same, other)
    np.testing.assert_allclose(same.numpy(), np.arange(4) ** 2 + 3.14159, rtol=1e-6)
    np.testing.assert_allclose(other.numpy(), np.arange(4) * (np.arange(4) + 10) + 3.14159, rtol=1e-6)


def test_a_jit_capture_does_not_fill_the_plan_cache():
    # a captured graph is replayed, never scheduled again: keeping its plan (and a key holding a tuple per node) only
    # costs memory (#26); an eager graph of the same structure still uses the cache
    from uop_scheduler import TinyJit

    def step(a: Tensor, b: Tensor) -> Tensor:
        return ((a * b).sum(0) + 1).realize()

    rng = np.random.default_rng(1)
    for warmup in (0, 1):  # captured at the first call (as llm-bench does), and after one eager call
        clear_schedule_cache()
        jitted = TinyJit(step, warmup=warmup)
        for i in range(3):
            a, b = (Tensor(rng.standard_normal((4, 4)).astype(np.float32)).realize() for _ in range(2))
            if i == warmup:
                plans = len(cached_schedules())
            out = jitted(a, b)
            np.testing.assert_allclose(out.numpy(), (a.numpy() * b.numpy()).sum(0) + 1, rtol=1e-5, atol=1e-6)
        assert len(cached_schedules()) == plans


def test_a_costly_value_read_through_an_expand_is_computed_once():
    # attention's softmax weights are broadcast over the head dimension into the second matmul: fused, every one of
    # the 64 output columns would compute exp again; realized, the matmul reads them from a buffer (one more kernel)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 64, 64)).astype(np.float32) for _ in range(3))
    out = (Tensor(q) @ Tensor(k).transpose(-1, -2)).softmax(-1) @ Tensor(v)
    # scores, the weights (with their rows' max and sum, unless row fusion is off: see test_sched_row_fusion.py), the matmul
    assert kernels_for(out) == (3 if row_fusion("CPU") else 5)
    s = q.astype(np.float64) @ k.transpose(0, 2, 1)
    e = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), (e / e.sum(-1, keepdims=True)) @ v, rtol=1e-5, atol=1e-5)
    # an expand of a cheap value (a scaled input) stays fused: the matmul multiplies again instead of reading a buffer;
    # so does a costly one the expand repeats only a little (a small log_softmax: its log of the row sums)
    assert kernels_for((Tensor(q) * 2) @ Tensor(v).transpose(-1, -2)) == 1
    assert kernels_for(Tensor(q[0, :8, :32]).log_softmax(-1)) <= 3


def test_a_value_with_enough_work_per_element_read_through_an_expand_is_computed_once():
    # no transcendental op, but loads, a mask, a select and a division per element, broadcast over 8 channels (as a
    # convolution's upstream gradient is over its input channels and window): computed once into a buffer. The CNN
    # step's weight-gradient kernels took 9.6 ms per step with this value recomputed in them, 3.8 ms without
    rng = np.random.default_rng(5)
    a, b, c = (rng.standard_normal((16, 16, 11, 11)).astype(np.float32) for _ in range(3))
    w = rng.standard_normal((8, 16)).astype(np.float32)
    ta, tb, tc, tw = (Tensor(x).realize() for x in (a, b, c, w))
    g = (ta > 0).where(tb / (tc * tc + 1), 0.0)
    out = (g.reshape(16, 1, 16, 11, 11) * tw.reshape(1, 8, 16, 1, 1)).sum(2)
    assert kernels_for(out) == 2
    ref = np.where(a > 0, b / (c.astype(np.float64) ** 2 + 1), 0)
    np.testing.assert_allclose(out.numpy(), np.einsum("bchw,oc->bohw", ref, w), rtol=1e-5, atol=1e-5)
    # a view between the expand and the value (the pooling's padding and crop) does not hide it
    padded = g.pad(((0, 0), (0, 0), (0, 1), (0, 1)))[:, :, 1:, 1:]
    assert kernels_for((padded.reshape(16, 1, 16, 11, 11) * tw.reshape(1, 8, 16, 1, 1)).sum(2)) == 2
    # the same broadcast of a value as cheap as the buffer read that would replace it stays fused
    assert kernels_for(((ta * 2).reshape(16, 1, 16, 11, 11) * tw.reshape(1, 8, 16, 1, 1)).sum(2)) == 1


def test_a_padded_convolution_reads_its_input_from_a_padded_buffer():
    # on a CPU the padding fused into the convolution gates every load and keeps its lane loop from being vector
    # loads; the padded input gets a buffer of its own (one small copy kernel), then the convolution reads it ungated
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 3, 8, 16)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    out = Tensor(x).conv2d(Tensor(w), padding=1)
    assert kernels_for(out) == 2
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((2, 4, 8, 16))
    for ky in range(3):
        for kx in range(3):
            ref += np.einsum("bchw,oc->bohw", xp[:, :, ky : ky + 8, kx : kx + 16], w[:, :, ky, kx])
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)
    assert kernels_for(Tensor(x).conv2d(Tensor(w))) == 1  # no padding: one kernel, as before


def _plan_of(*ts: Tensor):
    roots = tuple(t.uop for t in ts)
    return schedule_for(walk_graph(roots, set(), "CPU"), roots, "CPU")


def _deep_chain(x: Tensor, ws: list[Tensor]) -> Tensor:
    for w in ws:  # every layer's output gets a buffer of its own (as a model's residual stream does)
        x = (x + (x @ w).relu()).contiguous()
    return x


def test_scratch_buffers_are_shared_across_layers():
    rng = np.random.default_rng(1)
    xs, ws = rng.standard_normal((4, 16)).astype(np.float32), [rng.standard_normal((16, 16)).astype(np.float32) * 0.3 for _ in range(12)]
    out = _deep_chain(Tensor(xs), [Tensor(w) for w in ws])
    plan = _plan_of(out)
    assert len(plan.linear.src) >= 12
    # the layer outputs (and any matmul kernel's result) that nothing reads after the schedule live a layer or two each:
    # a few buffers take turns, where without sharing every step had its own
    assert len(plan.new_buffers) <= 4
    want = xs.astype(np.float64)
    for w in ws:
        want = want + np.maximum(want @ w, 0)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_shared_scratch_never_holds_a_value_still_read():
    # a layer output read again many layers later (a skip connection) keeps its buffer until that read
    rng = np.random.default_rng(2)
    xs, ws = rng.standard_normal((3, 8)).astype(np.float32), [rng.standard_normal((8, 8)).astype(np.float32) * 0.3 for _ in range(8)]
    x = Tensor(xs)
    skips = []
    for w in [Tensor(w) for w in ws]:
        x = (x @ w).tanh().contiguous()
        skips.append(x)
    out = (x + skips[0] * 2 + skips[3] * 3).contiguous() * 1
    want = xs.astype(np.float64)
    wants = []
    for w in ws:
        want = np.tanh(want @ w)
        wants.append(want)
    np.testing.assert_allclose(out.numpy(), want + wants[0] * 2 + wants[3] * 3, rtol=1e-5, atol=1e-5)


def test_shared_scratch_keeps_every_realized_target():
    # targets realized together, written versions and kept copies leave the schedule: none is shared with scratch
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((4, 4)).astype(np.float32)
    x = Tensor(xs)
    a = (x * 2).contiguous()
    b = (a.exp() + 1).contiguous()
    c = (b * a).contiguous().sum(0)
    state = Tensor(np.zeros((4, 4), np.float32)).contiguous().realize()
    state.assign(state + (b - a).contiguous())
    Tensor.realize(a, b, c, state)
    na = xs * 2
    nb = np.exp(na) + 1
    np.testing.assert_allclose(a.numpy(), na, rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), nb, rtol=1e-6)
    np.testing.assert_allclose(c.numpy(), (nb * na).sum(0), rtol=1e-5)
    np.testing.assert_allclose(state.numpy(), nb - na, rtol=1e-5)


def _walk_by_definition(targets, leaves, device):
    """walk_graph as its docstring defines it: UOp.toposort with a gate, then each node's key entry in that order."""
    from uop_scheduler.call_values import is_value_call
    from uop_scheduler.schedule import MARKED_OPS, _arg_key
    from uopir import Ops, UOp

    sink, stops, inlined = UOp.sink(*targets), set(), set()

    def gate(n):
        if n.op in (Ops.BUFFER, Ops.BIND):
            return False
        if n in leaves:
            stops.add(n)
            return False
        if n.op is Ops.CALL and is_value_call(n):
            inlined.add(n.src[0])
        return n is sink or n.op is not Ops.SINK or n in inlined

    nodes = [n for n in sink.toposort(gate=gate) if n is not sink]
    at = {n: i for i, n in enumerate(nodes)}
    key, inputs = [device], []
    for n in nodes:
        if n.op is Ops.SINK:
            key.append(("body", n))
        elif n.op is Ops.BIND:
            key.append((n.op, n.dtype, n.src[0].arg))
        elif n.op is Ops.BUFFER and n.arg.unbound:
            key.append(("out", n.dtype, n.shape, n.device))
        elif n.op is Ops.BUFFER or n in stops:
            inputs.append(n)
            key.append(("in", n.dtype, n.shape, n.device))
        else:
            arg = _arg_key(n.arg) if type(n.arg) in (float, str) else n.arg
            key.append((n.op, n.dtype, arg, tuple(at[s] for s in n.src)))
    key.append(tuple(at[t] for t in targets))
    return nodes, inputs, tuple(key), [n for n in nodes if n.op in MARKED_OPS]


def test_the_one_pass_walk_equals_its_definition():
    # graphs with shared nodes, realized leaves, a value call's body (walked), a hand-written kernel's body (opaque), a
    # pending write and a bound variable
    from uop_scheduler import Variable, function
    from uop_scheduler.realizer import done
    from uopir import AxisType, UOp

    rng = np.random.default_rng(3)
    q, k = (Tensor(rng.standard_normal((2, 8, 4)).astype(np.float32)) for _ in range(2))
    scores = (q @ k.transpose(-1, -2) / 2).softmax(-1)
    realized = (q + 1).realize()

    @function(allow_implicit=True)
    def mlp(x: Tensor) -> Tensor:
        return (x * 2 + realized).relu().sum(-1)

    def scale(out: UOp, x: UOp) -> UOp:
        i = UOp.range(out.dtype.size, 0, AxisType.LOOP)
        return UOp.sink(out.index(i).store(x.index(i).load() * 3).end(i))

    w = Tensor.zeros(4).contiguous().realize()
    w.assign(w + 1)
    res, _ = Tensor.zeros(8).contiguous().realize().custom_kernel(Tensor.ones(8).contiguous().realize(), fxn=scale)
    v = Variable("n", 1, 8).bind(5)
    graphs = [(scores.uop,), (mlp(q).uop, scores.uop, (realized.sum(-1, keepdim=True) * scores).uop), (res.uop, w.uop),
              (Tensor.arange(8)[:v].uop,), ((q + 1).uop, realized.uop)]
    for targets in graphs:
        for leaves in (set(), done):
            walk = walk_graph(targets, leaves, "CPU")
            assert (walk.nodes, walk.inputs, walk.key, walk.marked) == _walk_by_definition(targets, leaves, "CPU")


def test_device_searches_sharing_a_memo_answer_as_one_search_each():
    # every node of graphs with device-less constants (a gradient's seed), copies to another device and shared parts,
    # asked in several orders with one memo per order: each answer is the definition's (the node's own device, else the
    # first buffer or copy on one device that a depth-first search meets, not going below a copy)
    import random

    from uop_scheduler.schedule import device_below, device_below_in
    from uopir import Ops, UOp

    def by_definition(n):
        if isinstance(n.device, str):
            return n.device
        found = n.find_below(lambda m: m.op in (Ops.BUFFER, Ops.PARAM, Ops.COPY) and isinstance(m.device, str),
                             gate=lambda m: m.op is not Ops.COPY)
        return None if found is None else found.device

    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    y = (x * 2).exp().sum(1).relu()
    (y * Tensor.ones(3)).sum().backward()
    on_other = (x.to("CPU:1") + Tensor.full((3, 4), 2.0, device="CPU:1")).sum()
    consts = Tensor.ones(4, 4) * 3 + Tensor.arange(4)
    graph = UOp.sink(x.grad.uop, y.uop, on_other.uop, consts.uop)
    nodes = list(graph.toposort())
    for seed in range(4):
        order = nodes[:] if seed == 0 else random.Random(seed).sample(nodes, len(nodes))
        if seed == 1:
            order.reverse()
        memo: dict = {}
        for n in order:
            assert device_below_in(n, memo) == by_definition(n), n.op
    assert all(device_below(n) == by_definition(n) for n in nodes)
    assert {by_definition(n) for n in nodes} >= {None, "CPU", "CPU:1"}
