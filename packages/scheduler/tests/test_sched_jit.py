"""TinyJit: eager call, capture, replay as one native call with new inputs and fresh outputs."""

import gc
import weakref

import numpy as np
import pytest
from hcq_runtime import CCompiler, counters
from uop_scheduler import JitError, Tensor, TinyJit
from uopir import AxisType, Ops, UOp


def chain(x: Tensor, n: int) -> Tensor:
    for _ in range(n):
        x = (x * 1.5 + 1).contiguous()  # contiguous: one kernel per step
    return x


def chain_reference(x: np.ndarray, n: int) -> np.ndarray:
    for _ in range(n):
        x = (x * np.float32(1.5) + np.float32(1)).astype(np.float32)
    return x


def test_eager_then_capture_then_replay_with_new_inputs():
    @TinyJit
    def f(a: Tensor, b: Tensor) -> Tensor:
        return (a @ b).relu() + a.sum()

    rng = np.random.default_rng(0)
    compiles = None
    for call in range(6):
        a, b = rng.standard_normal((8, 8), dtype=np.float32), rng.standard_normal((8, 8), dtype=np.float32)
        kernels_before = counters.kernels
        out = f(Tensor(a), Tensor(b))
        np.testing.assert_allclose(out.numpy(), np.maximum(a @ b, 0) + a.sum(), rtol=1e-4, atol=1e-4)
        if call == 2:
            compiles = CCompiler.invocations
        if call >= 2:  # replays: no kernel goes through run_linear, nothing is compiled
            assert counters.kernels == kernels_before
            assert CCompiler.invocations == compiles
    assert f.cnt == 6


def test_a_capture_whose_kernels_are_compiled_compiles_nothing():
    """Linking a capture writes a table of steps for a precompiled runner: a new capture of kernels compiled before
    invokes no C compiler (a batch program with the buffer addresses written in was compiled at every capture)."""

    def f(a: Tensor) -> Tensor:
        return chain(a, 5).sum()

    x = np.arange(16, dtype=np.float32)
    first = TinyJit(f)
    for _ in range(3):
        first(Tensor(x)).numpy()
    compiles = CCompiler.invocations
    second = TinyJit(f, warmup=0)  # the same kernels over new buffers: captured and linked anew
    for _ in range(3):
        np.testing.assert_allclose(second(Tensor(x)).numpy(), chain_reference(x, 5).sum(), rtol=1e-5)
    assert second.captured is not None and second.captured.linked.n_kernels >= 5
    assert CCompiler.invocations == compiles


@pytest.mark.parametrize("warmup", [0, 2])
def test_warmup_sets_how_many_calls_run_before_the_capture(warmup):
    state = Tensor.zeros(4).contiguous().realize()

    def f(a: Tensor) -> Tensor:
        state.assign(state + a)  # state the step advances: every call counts once, eager, captured or replayed
        return state * 2

    jf = TinyJit(f, warmup=warmup)
    total = np.zeros(4, np.float32)
    for call in range(5):
        a = np.full(4, call + 1, np.float32)
        total += a
        kernels_before = counters.kernels
        np.testing.assert_allclose(jf(Tensor(a)).numpy(), total * 2)
        assert (jf.captured is not None) == (call >= warmup)
        if call > warmup:  # replays run no kernel through the scheduler
            assert counters.kernels == kernels_before
    np.testing.assert_allclose(state.numpy(), total)
    with pytest.raises(ValueError, match="warmup"):
        TinyJit(f, warmup=-1)


def test_a_hundred_kernels_replay_as_one_call():
    @TinyJit
    def f(x: Tensor) -> Tensor:
        return chain(x, 100)

    for call in range(4):
        x = np.full(16, call, dtype=np.float32)
        np.testing.assert_allclose(f(Tensor(x)).numpy(), chain_reference(x, 100), rtol=1e-5)
    assert f.captured is not None and f.captured.linked.n_kernels == 100


def test_outputs_are_fresh_each_call():
    @TinyJit
    def f(x: Tensor) -> tuple[Tensor, Tensor]:
        return x + 1, x * 2

    outs = [f(Tensor(np.full(4, i, dtype=np.float32))) for i in range(5)]
    for i, (plus, times) in enumerate(outs):
        np.testing.assert_array_equal(plus.numpy(), i + 1)
        np.testing.assert_array_equal(times.numpy(), i * 2)


def test_changed_inputs_are_refused_and_reset_recaptures():
    @TinyJit
    def f(x: Tensor) -> Tensor:
        return x * 3

    for _ in range(3):
        f(Tensor(np.ones(4, dtype=np.float32)))
    with pytest.raises(JitError, match=r"TinyJit inputs changed: captured with .*\(4,\).*called with .*\(5,\)"):
        f(Tensor(np.ones(5, dtype=np.float32)))
    with pytest.raises(JitError, match="inputs changed"):
        f(Tensor(np.ones(4, dtype=np.int32)))
    f.reset()
    assert f.cnt == 0 and f.captured is None
    for _ in range(3):
        np.testing.assert_array_equal(f(Tensor(np.ones(5, dtype=np.float32))).numpy(), 3)


def test_intermediate_buffers_are_freed_with_the_jit():
    @TinyJit
    def f(x: Tensor) -> Tensor:
        return chain(x, 3)

    for _ in range(3):
        f(Tensor(np.zeros(8, dtype=np.float32)))
    owned = [weakref.ref(b) for b in f.captured.linked.owned_buffers]
    assert owned, "the linked step owns its intermediate buffers"
    del f
    gc.collect()
    assert all(ref() is None for ref in owned)


def test_increment_of_an_input_replays_in_place():
    @TinyJit
    def step(x):
        x += 1
        return x

    x = Tensor([0.0]).realize()
    for _ in range(5):
        ret = step(x)
    assert x.item() == 5 and ret.item() == 5
    y = Tensor([10.0]).realize()  # a new input: the write lands in it, not in x
    step(y)
    assert (y.item(), x.item()) == (11, 5)


def test_batchnorm_statistics_update_on_every_replay():
    from uop_scheduler import Context
    from uop_scheduler.nn import BatchNorm

    bn = BatchNorm(3)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(4)]

    @TinyJit
    def fwd(x):
        return bn(x)

    with Context(TRAINING=1):
        for x in xs:
            fwd(Tensor(x)).numpy()
    assert bn.num_batches_tracked.item() == 4
    mean = np.zeros(3, np.float32)
    for x in xs:
        mean = 0.9 * mean + 0.1 * x.mean(0)
    np.testing.assert_allclose(bn.running_mean.numpy(), mean, rtol=1e-5, atol=1e-6)


def test_symbolic_input_binds_per_call_without_recompiling():
    from uop_scheduler import Variable

    @TinyJit
    def f(a):
        return (a + 1).sum().contiguous().realize()

    rng = np.random.default_rng(0)
    an = rng.random((3, 10)).astype(np.float32)
    a = Tensor(an).realize()
    compiles = []
    for i in range(1, 8):
        if i == 4:
            counters.reset()
        vi = Variable("i", 1, 10).bind(i)
        np.testing.assert_allclose(f(a[:, :vi]).item(), (an[:, :i] + 1).sum(), rtol=1e-5)
        compiles.append(counters.compiles)
    assert compiles[-1] == 0  # replays with new values compile nothing


def test_symbolic_output_shape_follows_the_call():
    from uop_scheduler import Variable

    @TinyJit
    def f(a):
        return a * 2

    a = Tensor(np.arange(12, dtype=np.float32).reshape(2, 6)).realize()
    for i in (2, 3, 5, 4):
        out = f(a[:, :Variable("n", 1, 6).bind(i)])
        np.testing.assert_array_equal(out.numpy(), np.arange(12, dtype=np.float32).reshape(2, 6)[:, :i] * 2)


def test_debug_2_reports_each_replay(monkeypatch, capsys):
    @TinyJit
    def f(x):
        return (x * 2 + 1).contiguous() * 3

    for _ in range(2):
        f(Tensor(np.ones(4, np.float32)))
    monkeypatch.setenv("DEBUG", "2")
    f(Tensor(np.ones(4, np.float32)))
    assert "*** jit f replay 1: 2 kernels" in capsys.readouterr().out


def test_keyword_arguments_bind_by_name_after_capture():
    @TinyJit
    def f(first, second):
        return (first - second).realize()

    for i in range(4):
        a, b = Tensor([10.0 * i]), Tensor([1.0])
        np.testing.assert_array_equal(f(second=b, first=a).numpy(), [10.0 * i - 1])
        np.testing.assert_array_equal(f(a, second=b).numpy(), [10.0 * i - 1])


def test_tensors_inside_lists_and_dicts_are_inputs_of_every_replay():
    @TinyJit
    def f(a, arr, named):
        return (a + arr[0] * named["k"]).realize()

    for i in range(5):
        got = f(Tensor(np.ones(3, np.float32)), [Tensor(np.full(3, i, np.float32)).realize()], {"k": Tensor(np.full(3, 2.0, np.float32))})
        np.testing.assert_array_equal(got.numpy(), np.full(3, 1 + 2 * i, np.float32))


def test_changed_argument_structure_and_duplicate_inputs_raise_jit_error():
    @TinyJit
    def f(a, arr):
        return (a + arr[0]).realize()

    for _ in range(3):
        f(Tensor([1.0]), [Tensor([2.0])])
    with pytest.raises(JitError, match="changed place"):
        f(Tensor([1.0]), [Tensor([2.0]), Tensor([3.0])])
    t = Tensor([1.0])
    with pytest.raises(JitError, match="same tensor twice"):
        f(t, [t])


def test_random_numbers_in_a_jitted_function_follow_the_eager_sequence():
    def draws(jit: bool) -> list[np.ndarray]:
        Tensor.manual_seed(3)

        def f(x):
            return (x + Tensor.rand(3) + Tensor.randn(2, 2).sum() + x.dropout(0.5)).realize()

        fn = TinyJit(f) if jit else f
        out = [fn(Tensor.ones(3).contiguous()).numpy() for _ in range(5)]
        out.append(Tensor.rand(2).numpy())  # eager draws after the jitted ones continue the same sequence
        return out

    from uop_scheduler import Context

    with Context(TRAINING=1):
        eager, jitted = draws(False), draws(True)
    for got, want in zip(jitted, eager, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not np.allclose(jitted[3], jitted[4])


def test_host_read_inside_a_captured_step_raises_jit_error():
    @TinyJit
    def f(x):
        return (x * x.sum().item()).realize()

    f(Tensor([1.0, 1.0]))  # the eager call is fine
    with pytest.raises(JitError, match="read a tensor's value on the host"):
        f(Tensor([2.0, 2.0]))


def test_dict_outputs_replay():
    @TinyJit
    def f(a, b):
        return {"sum": (a + b).realize(), "diff": (a - b).realize()}

    for i in range(4):
        out = f(Tensor([float(i)]), Tensor([1.0]))
        assert list(out) == ["sum", "diff"]
        np.testing.assert_array_equal(out["sum"].numpy(), [i + 1.0])
        np.testing.assert_array_equal(out["diff"].numpy(), [i - 1.0])


def test_guards_raise_jit_error():
    @TinyJit
    def non_tensor(a, i):
        return (a + 1).realize(), i

    with pytest.raises(JitError, match="beside its tensors"):
        for i in range(3):
            non_tensor(Tensor([1.0]), i)

    @TinyJit
    def nothing(a):
        return None

    with pytest.raises(JitError, match="ran no kernels"):
        for _ in range(3):
            nothing(Tensor([1.0]))

    @TinyJit
    def inner(t):
        return t + 1

    @TinyJit
    def outer(t):
        return (inner(t) * 3).realize()

    np.testing.assert_array_equal(outer(Tensor([1.0])).numpy(), [6.0])  # the eager call is fine
    with pytest.raises(JitError, match="inside another TinyJit"):
        outer(Tensor([1.0]))


def test_a_replay_with_an_input_viewed_differently_is_a_jit_error():
    # the kernels address an input's buffer as the captured view did: a transposed or shifted input replayed the
    # captured layout and returned wrong numbers
    @TinyJit
    def f(x):
        return (x * 2).realize()

    base = np.arange(40, dtype=np.float32).reshape(4, 10)
    for _ in range(3):
        np.testing.assert_array_equal(f(Tensor(base[:, :4].copy()).realize()).numpy(), base[:, :4] * 2)
    t = Tensor(base).realize()
    with pytest.raises(JitError, match=r"input x is a view \(.*\) of its buffer, captured as a whole buffer"):
        f(t[:, 1:5])
    with pytest.raises(JitError, match="captured as a whole buffer"):
        f(Tensor(base[:4, :4].copy()).realize().T)
    np.testing.assert_array_equal(f(t[:, 2:6].contiguous()).numpy(), base[:, 2:6] * 2)


def test_inputs_viewed_the_same_way_replay_on_each_call_s_buffer():
    @TinyJit
    def f(x):
        return (x + 1).realize()

    for i in range(5):
        base = np.arange(40, dtype=np.float32).reshape(4, 10) * (i + 1)
        t = Tensor(base).realize()
        np.testing.assert_array_equal(f(t[:, 3:7].permute(1, 0)).numpy(), base[:, 3:7].T + 1)
    with pytest.raises(JitError, match="shrink"):
        f(Tensor(base).realize()[:, 4:8].permute(1, 0))  # the same view at another offset


def test_a_view_with_a_bound_variable_replays_for_each_value():
    from uop_scheduler import Variable

    @TinyJit
    def f(x):
        return (x * 3).sum().realize()

    base = np.arange(30, dtype=np.float32).reshape(3, 10)
    t = Tensor(base).realize()
    for i in range(1, 8):
        np.testing.assert_allclose(f(t[:, :Variable("i", 1, 10).bind(i)]).numpy(), (base[:, :i] * 3).sum())


def test_prune_skips_the_kernels_that_do_not_depend_on_the_inputs():
    weights = Tensor.rand(16).realize()

    def w2(x):
        return (weights * 2).contiguous() + x

    for prune, kernels in ((False, 2), (True, 1)):
        jitted = TinyJit(w2, prune=prune)
        for _ in range(4):
            a = Tensor.rand(16).realize()
            np.testing.assert_allclose(jitted(a).numpy(), weights.numpy() * 2 + a.numpy(), rtol=1e-6)
        assert len(jitted.captured.linear.src) == kernels


def test_prune_keeps_a_reset_that_a_later_kernel_accumulates_into():
    # the zero-fill reads no input, but the kernel after it adds into the same buffer: dropping it would accumulate
    # over replays
    acc = Tensor.zeros(4).contiguous().realize()

    @TinyJit
    def plain(x):
        acc.assign(Tensor.zeros(4))
        acc.assign(acc + x)
        return (acc * 1).realize()

    pruned = TinyJit(plain.fn, prune=True)
    for i in range(5):
        x = np.full(4, i + 1, np.float32)
        np.testing.assert_array_equal(pruned(Tensor(x)).numpy(), x)
        np.testing.assert_array_equal(acc.numpy(), x)


def test_prune_keeps_random_numbers_flowing():
    Tensor.manual_seed(5)
    eager = [(Tensor.rand(4) + i).numpy() for i in range(5)]
    Tensor.manual_seed(5)
    jitted = TinyJit(lambda x: (Tensor.rand(4) + x).realize(), prune=True)
    for i, want in enumerate(eager):
        np.testing.assert_array_equal(jitted(Tensor(np.full(4, i, np.float32))).numpy(), want)


def test_a_returned_state_tensor_is_that_state_on_every_replay():
    # the step writes a tensor made before the capture and returns it: replays returned a fresh, partly unwritten buffer
    # and the state itself stopped changing after the capture
    w = Tensor([1.0, 2.0, 3.0]).realize()
    mids = []

    @TinyJit
    def step(x: Tensor):
        mid = w * 10  # read before the write, in the step
        w.assign(w + x)
        return (mid + 0).realize(), w.realize()

    want = np.array([1.0, 2.0, 3.0])
    for i in range(5):
        mid, ret = step(Tensor([float(i)] * 3))
        np.testing.assert_array_equal(mid.numpy(), want * 10)
        want = want + i
        assert ret is w
        mids.append(mid)
        np.testing.assert_array_equal(w.numpy(), want)
    assert len({id(m) for m in mids}) == len(mids)


@pytest.mark.parametrize("read_every", [1, 2])
def test_a_gradient_left_unrealized_by_the_step_is_read_lazily_as_the_latest_replays(read_every):
    w = Tensor([1.0, 2.0], requires_grad=True).realize()

    @TinyJit
    def step(x: Tensor) -> Tensor:
        w.grad = None
        loss = (w * x * x).sum()
        loss.backward()  # w.grad = x * x, left unrealized: it reads the call's input
        return loss.realize()

    for i in range(6):
        x = np.array([i, i + 1.0], np.float32)
        loss = step(Tensor(x))
        assert loss.item() == pytest.approx(float((np.array([1.0, 2.0]) * x * x).sum()))
        if i % read_every == 0 or i == 5:
            np.testing.assert_array_equal(w.grad.numpy(), x * x)


@pytest.mark.parametrize("per_layer", [True, False])
@pytest.mark.parametrize("prune", [False, True])
def test_a_capture_shares_scratch_memory_across_its_realizes(prune, per_layer):
    # a step realized layer by layer (as llm-bench's forward is): each layer's scratch buffers are free once its
    # schedule has run, so the capture reuses their memory for the next layer's instead of owning every layer's
    from hcq_runtime import buffer_for

    rng = np.random.default_rng(7)
    ws = [rng.standard_normal((16, 16)).astype(np.float32) * 0.3 for _ in range(6)]
    weights = [Tensor(w).realize() for w in ws]
    scale = Tensor(np.float32([2.0])).realize()

    def step(x: Tensor) -> Tensor:
        for w in weights:
            w2 = (w * scale).contiguous()  # input-independent: pruned replays keep the capture's value
            x = (x + (x @ w2).relu()).contiguous()
            if per_layer:
                x = x.realize()
        return x * 1

    def reference(x: np.ndarray) -> np.ndarray:
        x = x.astype(np.float64)
        for w in ws:
            x = x + np.maximum(x @ (w * 2.0), 0)
        return x

    jitted = TinyJit(step, prune=prune)
    for _ in range(4):
        xs = rng.standard_normal((4, 16)).astype(np.float32)
        np.testing.assert_allclose(jitted(Tensor(xs)).numpy(), reference(xs), rtol=1e-4, atol=1e-4)
    storages = {id(buffer_for(b)) for call in jitted.captured.linear.src for b in call.src[1:] if b.op is Ops.BUFFER}
    # six weights, the scale, the input, six layer outputs and the output, plus scratch: shared by the layers now
    # (27 storages when each layer's schedule kept its own, 20 with prune=True, whose replay drops the weight scaling)
    assert len(storages) <= 6 + 1 + 1 + (6 if per_layer else 0) + 1 + 4


def _distinct_storage(jitted: TinyJit) -> int:
    return len({id(b) for b in jitted.captured.linked.owned_buffers})


def test_a_capture_shares_the_memory_of_intermediates_whose_lives_do_not_overlap():
    # each realize gives its output a buffer of its own (as hand-written kernels' outputs are): a captured 30-layer
    # prompt held every layer's; now values whose lives in the replay do not overlap take turns in the same memory
    @TinyJit
    def f(x: Tensor) -> Tensor:
        for _ in range(8):
            x = (x * 1.5 + 1).contiguous().realize()
        return x

    rng = np.random.default_rng(3)
    for _ in range(4):
        x = rng.standard_normal(256).astype(np.float32)
        np.testing.assert_allclose(f(Tensor(x)).numpy(), chain_reference(x, 8), rtol=1e-6)
    # 7 intermediates: each is read by the call after the one writing it, so two buffers alternate
    assert _distinct_storage(f) == 2


def _write_first_half(out: UOp, x: UOp) -> UOp:
    """out[i] = x[i] for the first half of out: a kernel that writes out (without reading it) but not all of it."""
    i = UOp.range(out.dtype.size // 2, 0, AxisType.LOOP)
    return UOp.sink(out.index(i).store(x.index(i).load()).end(i))


def test_a_pruned_capture_with_a_half_rewritten_fill_replays_correctly():
    # zeros filled, then half rewritten by a kernel that writes without reading, then read whole: were later values of
    # the step given their memory (or the fill dropped as constant while the rewrite stays), a replay would read
    # leftovers as the zeros. Pruning keeps the fill (it writes what a staying call writes), so the zeros' first call
    # in the replay is the fill, which writes all of them.
    def step(x: Tensor) -> Tensor:
        z = Tensor.zeros(16).contiguous().realize()
        z = z.custom_kernel(x, fxn=_write_first_half)[0]
        y = (z + 1).contiguous().realize()
        t = (y * 3).contiguous().realize()
        return (t - x).contiguous().realize()

    g = TinyJit(step, prune=True)
    rng = np.random.default_rng(4)
    for _ in range(5):
        x = rng.standard_normal(16).astype(np.float32)
        z = np.concatenate([x[:8], np.zeros(8, np.float32)])
        np.testing.assert_allclose(g(Tensor(x)).numpy(), (z + 1) * 3 - x, rtol=1e-6)


def test_a_capture_plans_each_graph_structure_once(monkeypatch):
    """Inside a capture, graphs of one structure over different buffers (a model's layers) share one plan: built once,
    kept for the capture only (the schedule cache does not keep captured plans)."""
    from uop_scheduler import schedule, schedule_rewrites

    built = []
    passes = schedule_rewrites.schedule_rewrites
    monkeypatch.setattr(schedule_rewrites, "schedule_rewrites", lambda *a, **k: built.append(1) or passes(*a, **k))
    rng = np.random.default_rng(3)
    weights = [rng.standard_normal((24, 24)).astype(np.float32) / 5 for _ in range(6)]
    ws = [Tensor(w).realize() for w in weights]

    def layers(x: Tensor) -> Tensor:
        for w in ws:
            x = (x @ w).relu().realize()
        return x

    jitted = TinyJit(layers, warmup=0)
    cached = len(schedule.cached_schedules())
    for _ in range(3):
        x = rng.standard_normal((5, 24)).astype(np.float32)
        want = x
        for w in weights:
            want = np.maximum(want @ w, 0)
        np.testing.assert_allclose(jitted(Tensor(x)).numpy(), want, rtol=1e-5, atol=1e-5)
    assert len(built) <= 2  # the layers' graph (and at most one more for the first layer's input)
    assert len(schedule.cached_schedules()) == cached


def test_two_inputs_in_one_buffer_are_refused_like_one_tensor_twice():
    # found by the write fuzzer with TinyJit calls: f(x.contiguous(), x.contiguous()) passes two tensor objects over one
    # buffer; the capture recorded kernels reading it once, and replays with two distinct inputs read the wrong one
    f = TinyJit(lambda a, b: a * 2 - b)
    x = Tensor(np.arange(6, dtype=np.float32)).realize()
    with pytest.raises(JitError, match="same buffer"):
        f(x.contiguous(), x.contiguous())
    with pytest.raises(JitError, match="same buffer"):
        f(x[:3], x[3:])  # views of one buffer
    for k in range(4):  # distinct buffers still capture and replay
        a, b = Tensor(np.full(6, k, np.float32)).realize(), Tensor(np.arange(6, dtype=np.float32)).realize()
        np.testing.assert_equal(f(a, b).numpy(), 2 * k - np.arange(6))


def test_free_intermediates_lets_go_of_the_steps_internal_memory():
    from uop_scheduler.helpers import GlobalCounters

    ext = Tensor(np.arange(1000, dtype=np.float32))
    state = Tensor(np.zeros(1000, np.float32)).realize()

    @TinyJit
    def step(x: Tensor) -> Tensor:
        t1 = (x * 2).contiguous().realize()
        t2 = (t1 + ext).contiguous().realize()
        state.assign(state + 1).realize()
        return (t2 * state).sum().realize()

    def ref(i: int, calls: int) -> float:
        return float(((np.full(1000, i, np.float32) * 2 + np.arange(1000)) * calls).sum())

    for i in range(4):
        np.testing.assert_allclose(step(Tensor(np.full(1000, i, np.float32))).item(), ref(i, i + 1), rtol=1e-6)
    before = GlobalCounters.mem_used
    step.captured.free_intermediates()
    freed = before - GlobalCounters.mem_used
    assert freed >= 2 * 4000  # t1 and t2 at least; the state (a live tensor's buffer) stays
    np.testing.assert_array_equal(state.numpy(), np.full(1000, 4, np.float32))
    for i in range(4, 7):  # the next replays allocate and link again, with the same values
        np.testing.assert_allclose(step(Tensor(np.full(1000, i, np.float32))).item(), ref(i, i + 1), rtol=1e-6)
    step.captured.free_intermediates()
    step.captured.free_intermediates()  # twice is once
    np.testing.assert_allclose(step(Tensor(np.full(1000, 9, np.float32))).item(), ref(9, 8), rtol=1e-6)


def test_a_capture_compiles_the_kernels_of_all_its_realizes_together(monkeypatch):
    # a model's step realizes layer by layer, a new kernel or two in each realize: the capture queues what it records
    # and runs it when it ends, so the kernels of every realize compile in one go (in parallel), not one realize at a time
    from hcq_runtime import runner
    batches: list[int] = []
    real_compile_calls = runner.compile_calls
    monkeypatch.setattr(runner, "compile_calls", lambda calls: batches.append(len(calls)) or real_compile_calls(calls))
    rng = np.random.default_rng(5)
    x_np, w_np = rng.standard_normal((4, 7), dtype=np.float32), rng.standard_normal((7, 7), dtype=np.float32)
    w = Tensor(w_np).realize()

    def body(x: Tensor) -> Tensor:
        h = (x @ w).relu().realize()  # kernels of three shapes, one realize each
        h = (h * 0.731 + 0.25).realize()
        return (h.exp2() - 1.125).sum(1).realize()

    # the first call captures (with a warm-up call, that call runs eagerly and compiles realize by realize)
    step = TinyJit(body, warmup=0)

    def expected(x):
        h = np.maximum(x @ w_np, 0) * np.float32(0.731) + np.float32(0.25)
        return (np.exp2(h) - 1.125).sum(1)

    batches.clear()
    out = step(Tensor(x_np))
    assert batches and max(batches) >= 3, batches  # one compile of the three realizes' calls
    np.testing.assert_allclose(out.numpy(), expected(x_np), rtol=1e-5, atol=1e-5)
    for _ in range(3):
        x_np = rng.standard_normal((4, 7), dtype=np.float32)
        np.testing.assert_allclose(step(Tensor(x_np)).numpy(), expected(x_np), rtol=1e-5, atol=1e-5)


def test_a_capture_does_not_wake_the_launch_threads_for_the_kernels_it_queues(monkeypatch):
    # an eager realize wakes the CPU's launch threads while it looks its schedule up (its kernels run next); a capture
    # queues its kernels, so waking them at each of its realizes cost a wake-up and a core spinning for nothing
    from hcq_runtime import Device
    dev = Device["CPU"]
    if not hasattr(dev, "expect_work"):
        pytest.skip("the CPU device has no launch threads to wake")
    wakes: list[int] = []
    monkeypatch.setattr(type(dev), "expect_work", lambda self: wakes.append(1))
    w = Tensor(np.arange(6, dtype=np.float32)).realize()

    def body(x: Tensor) -> Tensor:
        h = (x * w).realize()
        return (h + 1).realize()

    step = TinyJit(body, warmup=0)
    out = step(Tensor(np.ones(6, np.float32)))  # the capture: two realizes, no wake
    assert wakes == []
    np.testing.assert_array_equal(out.numpy(), np.arange(6, dtype=np.float32) + 1)
    body(Tensor(np.ones(6, np.float32)))  # eager: a wake per realize
    assert len(wakes) == 2


def test_a_capture_that_fails_still_makes_the_writes_queued_before_the_failure():
    w = Tensor(np.zeros(5, np.float32)).realize()

    def body(x: Tensor) -> Tensor:
        w.assign(w + x).realize()  # queued (the capture runs it at its end), made as if run eagerly
        raise ValueError("the step fails after its write")

    step = TinyJit(body, warmup=0)

    with pytest.raises(ValueError, match="the step fails after its write"):
        step(Tensor(np.arange(5, dtype=np.float32)))
    np.testing.assert_array_equal(w.numpy(), np.arange(5, dtype=np.float32))
