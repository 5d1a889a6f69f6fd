"""Calls in tensor graphs: call_with_outputs at any output position, @function, Tensor.call, grad_fxn (the seed's cases)."""

from __future__ import annotations

import numpy as np
import pytest
from uop_scheduler import FunctionError, Tensor, dtypes, function
from uopir import UOp


def test_intersperse_output_before_input():
    x = Tensor.arange(3, dtype=dtypes.int32).realize()
    val = UOp.param(1, x.dtype, x.shape, x.device).reshape(x.shape) * 2
    outs = UOp.call_with_outputs((val,), x.uop, name="t", output_pos=(0,))
    np.testing.assert_equal((Tensor(outs[0], device=x.device) + 1).numpy(), [1, 3, 5])


def test_outputs_at_any_position_and_their_gradients():
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True).realize()
    y = Tensor([4.0, 5.0, 6.0], requires_grad=True).realize()
    p1, p3 = UOp.param(1, x.dtype, x.shape, x.device), UOp.param(3, y.dtype, y.shape, y.device)
    outs = UOp.call_with_outputs((p1.reshape(x.shape) * 2, p3.reshape(y.shape) + p1.reshape(y.shape)), x.uop, y.uop, output_pos=(0, 2))
    np.testing.assert_equal(Tensor(outs[0]).numpy(), [2, 4, 6])
    np.testing.assert_equal(Tensor(outs[1]).numpy(), [5, 7, 9])
    (Tensor(outs[0]).sum() + Tensor(outs[1]).sum()).backward()
    np.testing.assert_equal(x.grad.numpy(), [3, 3, 3])
    np.testing.assert_equal(y.grad.numpy(), [1, 1, 1])


def test_squared_output_gradient():
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True).realize()
    p1 = UOp.param(1, dtypes.float32, x.shape, x.device)
    outs = UOp.call_with_outputs((p1.reshape(x.shape) * p1.reshape(x.shape),), x.uop, name="t", output_pos=(0,))
    Tensor(outs[0], device=x.device).sum().backward()
    np.testing.assert_equal(x.grad.numpy(), [2, 4, 6])


@pytest.mark.parametrize("shape, region", [((16,), (slice(4, 12),)), ((4, 8), (slice(1, 3), slice(2, 6)))])
def test_precompiled_output_assigned_into_a_slice(shape, region):
    @function(precompile=True)
    def f(x: Tensor) -> Tensor:
        return x * 2 + 1

    inner = tuple(s.stop - s.start for s in region)
    a = Tensor.arange(int(np.prod(inner))).reshape(inner).float().realize()
    big = Tensor.zeros(*shape)
    big[region].assign(f(a)).realize()
    ref = np.zeros(shape, np.float32)
    ref[region] = np.arange(np.prod(inner)).reshape(inner) * 2 + 1
    np.testing.assert_equal(big.numpy(), ref)


def test_precompiled_output_assigned_to_a_whole_buffer():
    @function(precompile=True)
    def f(x: Tensor) -> Tensor:
        return x * 2 + 1

    cache = Tensor.zeros(8).contiguous().realize()
    cache.assign(f(Tensor.arange(8).float().realize())).realize()
    np.testing.assert_equal(cache.numpy(), np.arange(8) * 2 + 1)


def test_function_traces_once_per_signature_and_returns_tuples():
    traced = []

    @function
    def f(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        traced.append(a.shape)
        return a * b, a - b

    rng = np.random.default_rng(0)
    for shape in [(3,), (3,), (2, 2), (3,)]:
        an, bn = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
        p, m = f(Tensor(an), Tensor(bn))
        np.testing.assert_allclose(p.numpy(), an * bn, rtol=1e-6)
        np.testing.assert_allclose(m.numpy(), an - bn, rtol=1e-6)
    assert traced == [(3,), (2, 2)]


def test_function_gradient_flows_through_the_body():
    @function
    def f(x: Tensor, w: Tensor) -> Tensor:
        return (x @ w).relu()

    rng = np.random.default_rng(1)
    xn, wn = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 2)).astype(np.float32)
    w = Tensor(wn, requires_grad=True)
    f(Tensor(xn), w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), xn.T @ ((xn @ wn) > 0).astype(np.float32), rtol=1e-5)


def test_implicit_buffers_are_refused_unless_allowed():
    weight = Tensor(np.ones(3, np.float32)).realize()

    def body(x: Tensor) -> Tensor:
        return x * weight

    with pytest.raises(FunctionError, match=r"1 implicit buffer.*dtype=dtypes.float32, size=3, device=CPU"):
        function(body)(Tensor(np.ones(3, np.float32)))
    np.testing.assert_equal(function(allow_implicit=True)(body)(Tensor(np.full(3, 2, np.float32))).numpy(), [2, 2, 2])


def test_grad_fxn_replaces_the_body_gradient():
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True).realize()
    body = UOp.param(0, dtypes.float32, (3,), x.device) * 3
    # grad_fxn gets the gradient of each output, then the call, and claims d/dx = 10, not 3
    x.call(fxn=body, grad_fxn=lambda grad, call: (grad * 10,)).sum().backward()
    np.testing.assert_equal(x.grad.numpy(), [10, 10, 10])
    np.testing.assert_equal(x.call(fxn=body).numpy(), [3, 6, 9])


@pytest.mark.parametrize("precompile", [False, True])
def test_backward_is_one_call_named_after_the_function(precompile):
    @function(precompile=precompile, precompile_backward=precompile)
    def f(x: Tensor, w: Tensor) -> Tensor:
        return (x * w).exp()

    rng = np.random.default_rng(2)
    xn, wn = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
    f(x, w).sum().backward()
    calls = [u for u in UOp.sink(x.grad.uop, w.grad.uop).toposort() if u.op.name == "CALL"]
    backward = [c for c in calls if c.arg.name == "f_backward"]
    assert len(backward) == 1 and backward[0].arg.precompile is precompile
    np.testing.assert_allclose(w.grad.numpy(), xn * np.exp(xn * wn), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), wn * np.exp(xn * wn), rtol=1e-5)


def _scale_kernel(out: UOp, x: UOp) -> UOp:
    """out[i] = x[i] * 3 + out[i], written by hand over a loop range."""
    from uopir import AxisType

    n = out.dtype.size
    i = UOp.range(n, 0, AxisType.LOOP)
    value = x.index(i).load() * 3 + out.index(i).load()
    return UOp.sink(out.index(i).store(value).end(i))


def test_custom_kernel_runs_in_place_and_keeps_readers_of_the_old_value():
    out = Tensor(np.ones(8, np.float32)).realize()
    x = Tensor(np.arange(8, dtype=np.float32)).realize()
    before = out * 10  # built before the kernel: keeps the old value
    res, x_after = out.custom_kernel(x, fxn=_scale_kernel)
    np.testing.assert_equal(res.numpy(), np.arange(8) * 3 + 1)
    np.testing.assert_equal(x_after.numpy(), np.arange(8))
    np.testing.assert_equal(before.numpy(), np.full(8, 10))


def test_custom_kernel_gradient_comes_from_grad_fxn():
    x = Tensor(np.arange(4, dtype=np.float32), requires_grad=True).realize()
    out = Tensor.zeros(4).contiguous().realize()

    def grad_fxn(gradient, call):  # d(out)/d(x) = 3
        return None, gradient * 3

    res, _ = out.custom_kernel(x, fxn=_scale_kernel, grad_fxn=grad_fxn)
    (res * Tensor(np.arange(4, dtype=np.float32))).sum().backward()
    np.testing.assert_equal(x.grad.numpy(), np.arange(4) * 3)


def test_function_on_a_method_binds_the_instance_and_reads_its_state():
    class Layer:
        def __init__(self):
            self.w = Tensor([10.0, 20.0, 30.0])

        @function
        def __call__(self, x: Tensor) -> Tensor:
            return x * 2 + self.w

    layer = Layer()
    np.testing.assert_equal(layer(Tensor([1.0, 2.0, 3.0])).numpy(), [12, 24, 36])
    assert Layer.__call__.name.endswith("Layer.__call__")
    layer.w = Tensor([0.0, 0.0, 1.0])  # another instance state: a new trace
    np.testing.assert_equal(layer(Tensor([1.0, 2.0, 3.0])).numpy(), [2, 4, 7])


def test_function_on_a_callable_instance():
    class Scale:
        def __init__(self, k: float):
            self.k = k

        def __call__(self, x: Tensor) -> Tensor:
            return x * self.k

    f = function(Scale(3.0))
    assert f.name.endswith("Scale")
    np.testing.assert_equal(f(Tensor([1.0, 2.0])).numpy(), [3, 6])
    with pytest.raises(FunctionError, match="implicit"):  # a free function still must be given its buffers
        w = Tensor([1.0, 1.0])
        function(lambda x: x + w)(Tensor([1.0, 2.0]))


# ---- tensors a function reads without being given them ----

def test_a_closed_over_weight_gets_its_gradient():
    w = Tensor([1.0, 2.0, 3.0]).realize()

    @function(allow_implicit=True)
    def f(x):
        return x * w

    x = Tensor([4.0, 5.0, 6.0])
    f(x).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [4.0, 5.0, 6.0])
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 2.0, 3.0])


def test_a_methods_state_gets_its_gradient_and_new_values_are_seen():
    class Scale:
        def __init__(self):
            self.w = Tensor([2.0, 3.0]).realize()

        @function
        def __call__(self, x):
            return x * self.w

    m = Scale()
    x = Tensor([1.0, 1.0])
    m(x).sum().backward()
    np.testing.assert_allclose(m.w.grad.numpy(), [1.0, 1.0])
    m.w.assign(Tensor([5.0, 7.0])).realize()
    np.testing.assert_allclose(m(Tensor([1.0, 2.0])).numpy(), [5.0, 14.0])


def test_a_closed_over_tensor_given_a_new_value_is_read_at_each_call():
    w = Tensor([1.0, 2.0]).realize()

    @function(allow_implicit=True)
    def f(x):
        return x + w

    np.testing.assert_allclose(f(Tensor([1.0, 1.0])).numpy(), [2.0, 3.0])
    w.assign(Tensor([10.0, 20.0])).realize()
    np.testing.assert_allclose(f(Tensor([1.0, 1.0])).numpy(), [11.0, 21.0])


def test_closed_over_values_not_computed_yet_are_inputs_of_the_call():
    # tinygrad takes a closed-over value still to be computed (a pending write, an unrealized contiguous) as an input
    # computed before the call; only a buffer read as it is counts as implicit
    b = Tensor([10, 20, 30]).realize()
    a = Tensor([1, 2, 3])
    a += 1
    c = Tensor([2, 2, 2]).contiguous()

    @function
    def f(x):
        return a + x + c

    np.testing.assert_equal(f(b).numpy(), [14, 25, 36])
    a += 1  # a new pending value of the same tensor: the next call passes it
    np.testing.assert_equal(f(b).numpy(), [15, 26, 37])
    np.testing.assert_equal(a.numpy(), [3, 4, 5])


def test_grad_fxn_gets_one_gradient_per_output_as_tinygrad_passes_them():
    def grad_fxn(d_out0, d_out1, call):  # f(u1, u2) = (u1 + 1, u2 * 3): d/du1 = d_out0, d/du2 = 3 * d_out1
        return d_out0, d_out1 * 3

    x, y = Tensor.ones(3).contiguous(), Tensor.ones(3).contiguous()

    @function(grad_fxn=grad_fxn)
    def f(u1, u2):
        return u1 + 1, u2 * 3

    t1, t2 = f(x, y)
    (t1 + 2 * t2).sum().backward()
    np.testing.assert_equal(x.grad.numpy(), [1, 1, 1])
    np.testing.assert_equal(y.grad.numpy(), [6, 6, 6])
    x.grad = y.grad = None
    t1, _ = f(x, y)  # an output nothing uses gets zeros
    t1.sum().backward()
    np.testing.assert_equal(x.grad.numpy(), [1, 1, 1])
    np.testing.assert_equal(y.grad.numpy(), [0, 0, 0])


def _addmulsub_kernel(c: UOp, d: UOp, e: UOp, a: UOp, b: UOp) -> UOp:
    """tinygrad's element form: ptr[i] reads where used as a value, stores grouped under one loop, a named SINK."""
    from uopir import KernelInfo

    c, d, e, a, b = c.flatten(), d.flatten(), e.flatten(), a.flatten(), b.flatten()
    i = UOp.range(c.numel(), 0)
    stores = UOp.group(c[i].store(a[i] + b[i]), d[i].store(a[i] * b[i]), e[i].store(a[i] - b[i]))
    return stores.end(i).sink(arg=KernelInfo(name="addmulsub")).simplify()


def test_custom_kernel_in_tinygrads_element_form_with_three_outputs_and_their_gradients():
    rng = np.random.default_rng(5)
    an, bn, wn = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(3))

    def grad_fxn(gc, gd, ge, call):  # one gradient per written tensor, then the call over the tensors
        _c, _d, _e, a, b = call.src[1:]
        ga = (Tensor(gc) + Tensor(gd) * Tensor(b) + Tensor(ge)).uop
        gb = (Tensor(gc) + Tensor(gd) * Tensor(a) - Tensor(ge)).uop
        return None, None, None, ga, gb

    a, b = Tensor(an).realize(), Tensor(bn).realize()
    c, d, e, _, _ = Tensor.custom_kernel(Tensor.empty(4, 4), Tensor.empty(4, 4), Tensor.empty(4, 4), a, b,
                                         fxn=_addmulsub_kernel, grad_fxn=grad_fxn)
    ((c * d) + e * Tensor(wn)).sum().backward()  # e's gradient is w, d's is c, c's is d
    np.testing.assert_allclose(c.numpy(), an + bn, rtol=1e-6)
    np.testing.assert_allclose(d.numpy(), an * bn, rtol=1e-6)
    np.testing.assert_allclose(e.numpy(), an - bn, rtol=1e-6)
    gc, gd, ge = an * bn, an + bn, wn
    np.testing.assert_allclose(a.grad.numpy(), gc + gd * bn + ge, rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), gc + gd * an - ge, rtol=1e-5)


def test_nested_functions_forward_and_backward():
    # the outer call's inlining substituted its own arguments for the inner call's parameters of the same slot
    wn = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    w = Tensor(wn).contiguous().realize()

    @function(allow_implicit=True)
    def inner(x):
        return x + w

    @function(allow_implicit=True)
    def outer(a, b):
        return inner(a.reshape(1, 2) + b.reshape(1, 2))

    an, bn = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)
    a, b = Tensor(an), Tensor(bn)
    out = outer(a, b)
    out.sum().backward()
    np.testing.assert_allclose(out.numpy(), (an + bn).reshape(1, 2) + wn)
    np.testing.assert_allclose(a.grad.numpy(), [2, 2])
    np.testing.assert_allclose(b.grad.numpy(), [2, 2])
    np.testing.assert_allclose(w.grad.numpy(), np.ones((2, 2)))


@pytest.mark.parametrize("through_view", [False, True])
def test_a_method_writing_its_state_writes_it_at_every_call(through_view):
    """tinygrad's test_view_assign_explicit_buffer: a method's state is passed as arguments after the explicit ones,
    so its writes are outputs of the call written back each time (they were refused with FunctionError)."""

    class State:
        def __init__(self):
            self.buf = Tensor.zeros(2, 4).contiguous().realize()
            self.steps = Tensor([0]).realize()
            self.first_row = self.buf[0]  # a view of the state made before: it sees the writes

        @function(allow_implicit=False)
        def __call__(self, x):
            if through_view:
                self.buf[:, 0:2].assign(x)
            else:
                self.buf.assign(self.buf + x.sum())
            return self.buf * 1

        @function
        def count(self, x):
            self.steps += 1
            return x * 2

    s, expected = State(), np.zeros((2, 4), np.float32)
    for i in range(3):
        x = np.array([[5.0, 6.0], [7.0, 8.0]], np.float32) + i
        if through_view:
            expected[:, 0:2] = x
        else:
            expected += x.sum()
        np.testing.assert_equal(s(Tensor(x)).numpy(), expected)
        np.testing.assert_equal(s.buf.numpy(), expected)
        np.testing.assert_equal(s.first_row.numpy(), expected[0])
        np.testing.assert_equal(s.count(Tensor([1.0])).numpy(), [2.0])
        np.testing.assert_equal(s.steps.numpy(), [i + 1])
    assert len(State.__call__.traces) == 1  # the state's new values are new inputs, not new traces


def test_a_write_to_a_closed_over_tensor_is_refused_and_undone():
    buf = Tensor.zeros(2, 4).contiguous().realize()

    @function
    def f(x):
        buf.assign(buf + x.sum())  # not an argument nor a method's state: it would run once, at the trace
        return buf * 1

    with pytest.raises(FunctionError, match=r"wrote 1 tensor\(s\) it was not given \(shape=\(2, 4\).*pass the state as an argument"):
        f(Tensor([1.0]))
    np.testing.assert_equal(buf.numpy(), np.zeros((2, 4)))  # left as it was, and still usable


def _scale_into(out: UOp, x: UOp) -> UOp:
    """out[i] = x[i] * 3: writes `out` only."""
    from uopir import AxisType

    i = UOp.range(out.dtype.size, 0, AxisType.LOOP)
    return UOp.sink(out.index(i).store(x.index(i).load() * 3).end(i))


def test_custom_kernel_reads_its_inputs_without_copying_them():
    # the kernel writes only `out`: `x` keeps its buffer, so a reader of x built before the kernel needs no preserved
    # copy of it (a kernel run in place over a weight used to copy the weight on every call)
    from hcq_runtime import counters

    x = Tensor(np.arange(8, dtype=np.float32)).realize()
    before = x * 10
    counters.reset()
    res, x_after = Tensor.empty(8).realize().custom_kernel(x, fxn=_scale_into)
    assert x_after is x
    res.realize(before)
    assert counters.kernels == 2  # the custom kernel and x * 10: no copy of x (nor of the unreferenced output)
    np.testing.assert_equal(res.numpy(), np.arange(8) * 3)
    np.testing.assert_equal(before.numpy(), np.arange(8) * 10)
    np.testing.assert_equal(x.numpy(), np.arange(8))


def _sum_into(out: UOp, a: UOp, b: UOp) -> UOp:
    """out[i] = a[i] + b[i]."""
    from uopir import AxisType

    i = UOp.range(out.dtype.size, 0, AxisType.LOOP)
    return UOp.sink(out.index(i).store(a.index(i).load() + b.index(i).load()).end(i))


def test_custom_kernel_arguments_sharing_a_value_compute_it_once():
    from hcq_runtime import counters

    x = Tensor(np.arange(8, dtype=np.float32)).realize()
    shared = (x * 2 + 1).contiguous()  # both arguments read it: realized together, it is one kernel, not one each
    counters.reset()
    res, _, _ = Tensor.empty(8).realize().custom_kernel(shared.exp(), shared.sqrt(), fxn=_sum_into)
    assert counters.kernels == 3  # `shared` once, then exp and sqrt
    res.realize()
    np.testing.assert_allclose(res.numpy(), np.exp(np.arange(8) * 2 + 1) + np.sqrt(np.arange(8) * 2 + 1), rtol=1e-6)


def test_a_graph_with_call_outputs_is_walked_once(monkeypatch):
    # the walk keeps the call (its output buffers hold nothing: they are keyed by shape, not identity) and the passes
    # inline it on a schedule-cache miss, instead of realize inlining and walking the graph again
    from uop_scheduler import clear_schedule_cache, realizer

    walks = []
    walk = realizer.walk_graph
    monkeypatch.setattr(realizer, "walk_graph", lambda *a, **k: walks.append(1) or walk(*a, **k))
    clear_schedule_cache()
    for k in range(3):
        x = Tensor(np.arange(4, dtype=np.float32) + k).realize()
        p = UOp.param(1, x.dtype, x.shape, x.device)
        (out,) = UOp.call_with_outputs((p.reshape(x.shape) * 3,), x.uop, output_pos=(0,))
        t = (Tensor(out, device=x.device) + 1).contiguous()
        t.realize()
        np.testing.assert_equal(t.numpy(), (np.arange(4) + k) * 3 + 1)
    assert len(walks) == 3


# what a body captures with allow_implicit, as each kind of tensor: a list's buffer, a realized copy, a value not computed
# yet (b00e2af's single walk stopped at call bodies, so a captured buffer was never made an input: "cannot lower
# Ops.BUFFER inside a kernel")
CAPTURED = {
    "from a list": lambda: Tensor([7, 8, 9]),
    "realized": lambda: Tensor([7, 8, 9]).contiguous().realize(),
    "not computed yet": lambda: Tensor([3, 4, 4]) + Tensor([4, 4, 5]),
}


@pytest.mark.parametrize("kind", CAPTURED)
def test_a_captured_tensor_of_any_kind_is_read_by_the_inlined_body(kind):
    captured = CAPTURED[kind]()
    f = function(allow_implicit=True)(lambda a, b: a + b + captured)
    np.testing.assert_equal(f(Tensor([1, 2, 3]), Tensor([4, 5, 6])).numpy(), [12, 15, 18])
    np.testing.assert_equal(f(Tensor([1, 1, 1]), captured).numpy(), [15, 17, 19])  # also passed as an argument


def test_two_functions_capturing_different_buffers_realize_together():
    first, second = Tensor([7, 8, 9]), Tensor([7, 8, 10])
    f = function(allow_implicit=True)(lambda a, b: a + b + first)
    g = function(allow_implicit=True)(lambda a, b: a + b + second)
    a, b = Tensor([1, 2, 3]), Tensor([4, 5, 6])
    c, d = f(a, b), g(a, b)
    c.realize(d)
    np.testing.assert_equal(c.numpy(), [12, 15, 18])
    np.testing.assert_equal(d.numpy(), [12, 15, 19])


def test_a_captured_table_indexed_by_a_bound_variable_argument():
    table = Tensor([10, 20, 30, 40]).contiguous().realize()
    f = function(allow_implicit=True)(lambda x, pos: x + table[pos])
    pos = UOp.variable("pos", 0, 3)
    for value in (0, 3):
        np.testing.assert_equal(f(Tensor([1, 2, 3]), pos.bind(value)).numpy(), np.array([1, 2, 3]) + 10 * (value + 1))


@pytest.mark.parametrize("first", ["writer", "call"])
def test_a_captured_version_overwritten_later_keeps_its_value_for_the_call(first):
    # found by the write fuzzer with calls (seed 27): the call's output looked like a buffer version to live_reads, so
    # the version its body captured was not kept when a later write overwrote it in place
    base = Tensor.full((3, 4), 3, dtype=dtypes.int32)
    captured = base.maximum(base)
    captured += base.contiguous()  # 6
    base.realize()
    out = function(allow_implicit=True)(lambda a: a + captured)(base)  # 3 + 6
    captured.assign(out * 2)  # 18, in place
    reads = {"writer": captured, "call": out}
    order = [reads[first], reads["call" if first == "writer" else "writer"]]
    values = [t.numpy() for t in order]
    expected = {"writer": np.full((3, 4), 18), "call": np.full((3, 4), 9)}
    np.testing.assert_equal(values[0], expected[first])
    np.testing.assert_equal(values[1], expected["call" if first == "writer" else "writer"])


def test_a_body_capturing_a_written_version_reads_it_as_an_input():
    # found by the write fuzzer with calls (seeds 2 and 126): inlining the calls of a schedule also inlined the call
    # inside a realized version the body captured (a write of a call's output), so that input was not the same node any
    # more and its write ran again on an unparameterised buffer (IndexError / "cannot lower Ops.BUFFER")
    x = Tensor(np.array([1, 9, -2, 7], np.float32))
    square = function(lambda a, b: a * b)(x, x)
    x[...] = square
    copy = x.clone()
    diff = function(allow_implicit=True)(lambda a: a - x)(copy)
    np.testing.assert_equal([x.numpy(), square.numpy(), copy.numpy()], [[1, 81, 4, 49]] * 3)
    np.testing.assert_equal(diff.numpy(), [0, 0, 0, 0])

    base = Tensor(np.array([5, 3, -1, 6], np.int32)).realize()
    doubled = function(precompile=True)(lambda a: a * 2 + 1)(base)
    doubled += doubled
    zero = function(allow_implicit=True)(lambda a: a - doubled)(doubled)
    np.testing.assert_equal([base.numpy(), doubled.numpy()], [[5, 3, -1, 6], [22, 14, -2, 26]])
    np.testing.assert_equal(zero.numpy(), [0, 0, 0, 0])


def test_a_write_reading_its_old_version_through_a_calls_realized_argument():
    # found by the write fuzzer with calls (seed 2160): the call's argument, realized after the call was made, is an
    # input of its own shape (2, 2, 3) holding the written buffer (12,); the write read it from the copy of the old
    # version taken without that shape, so only its first index counted
    x = np.array([3, 3, 8, -2, 8, 6, 9, 0, 8, 3, -2, 6], np.float32).reshape((2, 2, 3))
    t = Tensor(x) * 1
    doubled = function(lambda a, b: a + b)(t, t)
    t.realize()
    t += doubled
    np.testing.assert_equal(t.numpy(), 3 * x)
    np.testing.assert_equal(doubled.numpy(), 2 * x)


def test_a_captured_pending_write_reading_a_call_output_is_an_input_of_the_call():
    # found by the write fuzzer with calls and jits (seed 1910): a closed-over tensor with a pending write whose value
    # reads another call's output was not taken as an input computed before the call (the PARAMs inside that call's body
    # looked like the trace's placeholders), so lifting the captured t3 rewrote a copy of the write into the body, which
    # ran again when t7 was read
    t0 = Tensor(np.array([8, -1, 8, 4, -4, -1, 4, 9, 5, 8, -4, 7], np.float32).reshape((3, 4))).contiguous()
    t1 = t0.detach()
    t0[...] = 2.0
    t3 = (t1.clone() * 2 - t0.clone()).realize()
    t4 = function(allow_implicit=True)(lambda a: a + t3)(t3)
    t0 += t4
    t7 = function(allow_implicit=True)(lambda a: a + t0)(t3)
    np.testing.assert_equal([t0.numpy(), t1.numpy(), t3.numpy(), t4.numpy()], [np.full((3, 4), v) for v in (6, 6, 2, 4)])
    np.testing.assert_equal(t7.numpy(), np.full((3, 4), 8))
