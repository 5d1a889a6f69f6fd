"""link_linear: a LINEAR of calls replayed as one native call, with inputs and variables patched per run."""

import numpy as np
import pytest
from hcq_runtime import AMDCompiler, CCompiler, CompileError, DeviceError, buffer_for, counters, link_linear, run_linear
from hcq_runtime.hcq2 import QueueSteps
from hcq_runtime.host import HostBatch
from kernel_asts import call, prefix, scale_add
from uopir import Ops, UOp, dtypes


def test_chain_of_kernels_replays_with_new_inputs_and_variables():
    n = 64
    x_in, y_in = UOp.new_buffer("CPU", n, dtypes.float32), UOp.new_buffer("CPU", n, dtypes.float32)
    tmp, out = UOp.new_buffer("CPU", n, dtypes.float32), UOp.new_buffer("CPU", n, dtypes.float32)
    linear = UOp(Ops.LINEAR, dtypes.void, (
        call(scale_add(n, 2.0), tmp, x_in, y_in),  # tmp = 2x + y
        call(scale_add(n, 3.0), out, tmp, x_in),  # out = 3 tmp + x
        call(prefix(n), tmp, out),  # tmp = out[:len], -1 after
    ))
    linked = link_linear(linear, inputs=[x_in, y_in])
    assert linked.variables == ("len",) and linked.n_kernels == 3
    rng = np.random.default_rng(3)
    compiles = CCompiler.invocations
    kernels_before = counters.kernels
    for length in (1, 17, 64):
        x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        xb, yb = buffer_for(UOp.new_buffer("CPU", n, dtypes.float32)).copyin(x), buffer_for(UOp.new_buffer("CPU", n, dtypes.float32)).copyin(y)
        linked([xb, yb], {"len": length})
        expected_out = 3 * (2 * x + y) + x
        np.testing.assert_allclose(buffer_for(out).numpy(), expected_out, rtol=1e-6)
        np.testing.assert_allclose(buffer_for(tmp).numpy(), np.where(np.arange(n) < length, expected_out, -1), rtol=1e-6)
    assert CCompiler.invocations == compiles  # replays never compile
    assert counters.kernels == kernels_before  # and never go through the per-call Python path


def test_linked_result_equals_run_linear():
    n = 32
    a, b, out = (UOp.new_buffer("CPU", n, dtypes.float32) for _ in range(3))
    buffer_for(a).copyin(np.arange(n, dtype=np.float32))
    buffer_for(b).copyin(np.ones(n, dtype=np.float32))
    linear = UOp(Ops.LINEAR, dtypes.void, (call(scale_add(n, 0.5), out, a, b),))
    run_linear(linear)
    eager = buffer_for(out).numpy().copy()
    buffer_for(out).copyin(np.zeros(n, dtype=np.float32))
    link_linear(linear)([])
    np.testing.assert_array_equal(buffer_for(out).numpy(), eager)


def test_a_batch_linked_while_profiling_times_each_step(monkeypatch, capsys):
    # PROFILE=1 (or DEBUG>=2) when linking: each run records the host clock after every step; profile() gives the last
    # run's steps by name in order, and DEBUG=2 prints them after each run as eager launches are printed
    n = 64
    x_in, tmp, out = (UOp.new_buffer("CPU", n, dtypes.float32) for _ in range(3))
    linear = UOp(Ops.LINEAR, dtypes.void, (call(scale_add(n, 2.0), tmp, x_in, x_in), call(scale_add(n, 3.0), out, tmp, x_in)))
    plain = link_linear(linear, inputs=[x_in]).parts[0]
    assert isinstance(plain, HostBatch) and not plain.profiled and plain.profile() == []
    monkeypatch.setenv("PROFILE", "1")
    linked = link_linear(linear, inputs=[x_in])
    batch = linked.parts[0]
    assert isinstance(batch, HostBatch) and batch.profiled and batch.profile() == []  # not run yet
    x = np.arange(n, dtype=np.float32)
    linked([buffer_for(UOp.new_buffer("CPU", n, dtypes.float32)).copyin(x)], {})
    np.testing.assert_allclose(buffer_for(out).numpy(), 3 * (2 * x + x) + x)
    events = batch.profile()
    assert len(events) == 2 and all(e.device == "CPU" and e.duration_us >= 0 for e in events)
    assert events[0].end_us == events[1].start_us  # consecutive stamps of one clock
    assert all(isinstance(e.name, str) and e.name for e in events)  # the kernels' function names
    assert capsys.readouterr().out == ""  # PROFILE alone prints nothing
    monkeypatch.setenv("DEBUG", "2")
    linked([buffer_for(UOp.new_buffer("CPU", n, dtypes.float32)).copyin(x)], {})
    printed = [line for line in capsys.readouterr().out.splitlines() if line.endswith("(linked)")]
    assert [line.split()[1] for line in printed] == [e.name for e in batch.profile()]


def test_linked_program_checks_its_arguments():
    n = 8
    a, out = UOp.new_buffer("CPU", n, dtypes.float32), UOp.new_buffer("CPU", n, dtypes.float32)
    linked = link_linear(UOp(Ops.LINEAR, dtypes.void, (call(prefix(n), out, a),)), inputs=[a])
    with pytest.raises(DeviceError, match="takes 1 input buffers, got 0"):
        linked([])
    with pytest.raises(DeviceError, match="variable len is unbound"):
        linked([buffer_for(UOp.new_buffer("CPU", n, dtypes.float32))])


def test_link_linear_picks_the_native_cpu_batch_or_the_hcq2_engine():
    n = 8
    cpu = [UOp.new_buffer("CPU", n, dtypes.float32) for _ in range(3)]
    linked = link_linear(UOp(Ops.LINEAR, dtypes.void, (call(scale_add(n, 2.0), *cpu),)), [cpu[1]])
    assert [type(p) for p in linked.parts] == [HostBatch]
    try:
        AMDCompiler("gfx1100")
    except CompileError:
        pytest.skip("clang-15 and ld.lld-15 are needed to build AMD kernels")
    gpu = [UOp.new_buffer("MOCKAMD", n, dtypes.float32) for _ in range(3)]
    linked = link_linear(UOp(Ops.LINEAR, dtypes.void, (call(scale_add(n, 2.0), *gpu),)), [gpu[0], gpu[1]])
    assert [type(p) for p in linked.parts] == [QueueSteps] and linked.submits == 1
    x = np.arange(n, dtype=np.float32)
    buffer_for(gpu[2]).copyin(np.ones(n, np.float32))
    src, out = buffer_for(UOp.new_buffer("MOCKAMD", n, dtypes.float32)).copyin(x), buffer_for(UOp.new_buffer("MOCKAMD", n, dtypes.float32))
    linked([out.ensure_allocated(), src])
    np.testing.assert_array_equal(out.numpy(), x * 2 + 1)


def test_run_linear_compiles_a_linears_new_kernels_together_before_running_them(monkeypatch):
    from hcq_runtime import kernel_cache
    handed: list[int] = []
    real_start = kernel_cache.start_compiles
    monkeypatch.setattr(kernel_cache, "start_compiles", lambda calls, least=1: handed.append(len(found := real_start(calls, least))) or found)
    monkeypatch.setattr(kernel_cache.os, "cpu_count", lambda: 2)
    n = 16
    a, b, tmp, out = (UOp.new_buffer("CPU", n, dtypes.float32) for _ in range(4))
    buffer_for(a).copyin(np.arange(n, dtype=np.float32))
    buffer_for(b).copyin(np.ones(n, dtype=np.float32))
    # scales no other test uses: kernels this process has not compiled
    linear = UOp(Ops.LINEAR, dtypes.void, (call(scale_add(n, 1.2345), tmp, a, b), call(scale_add(n, 5.4321), out, tmp, a)))
    run_linear(linear)
    assert handed == [2]  # both kernels handed to the compile threads (one per core) and waited for before the first runs
    assert not kernel_cache._inflight and len(kernel_cache._workers) >= 2
    np.testing.assert_allclose(buffer_for(out).numpy(), 5.4321 * (1.2345 * np.arange(n) + 1) + np.arange(n), rtol=1e-6)


def test_deferred_linears_compile_together_and_run_in_order_before_the_host_touches_memory(monkeypatch):
    from hcq_runtime import defer_linear, runner, settle_deferred
    from hcq_runtime.buffer import deferred_work
    compiled: list[int] = []
    real_compile_calls = runner.compile_calls
    monkeypatch.setattr(runner, "compile_calls", lambda calls: compiled.append(len(calls)) or real_compile_calls(calls))
    n = 16
    a, b, tmp, out = (UOp.new_buffer("CPU", n, dtypes.float32) for _ in range(4))
    x = np.arange(n, dtype=np.float32)
    buffer_for(a).copyin(x)
    buffer_for(b).copyin(np.ones(n, dtype=np.float32))
    buffer_for(out).copyin(np.zeros(n, dtype=np.float32))
    # two LINEARs of one call each, the second reading what the first writes
    defer_linear(UOp(Ops.LINEAR, dtypes.void, (call(scale_add(n, 1.5), tmp, a, b),)))
    defer_linear(UOp(Ops.LINEAR, dtypes.void, (call(scale_add(n, 2.5), out, tmp, a),)))
    assert compiled == [] and len(deferred_work) == 2  # nothing ran yet
    # a host write into a buffer the queue reads lets the queue run first: it reads the value from before the write
    buffer_for(a).copyin(np.full(n, 100, np.float32))
    assert compiled == [2] and not deferred_work  # both LINEARs' kernels compiled in one go
    np.testing.assert_allclose(buffer_for(out).numpy(), 2.5 * (1.5 * x + 1) + x, rtol=1e-6)
    # a host read, and run_linear, run what is queued first
    defer_linear(UOp(Ops.LINEAR, dtypes.void, (call(scale_add(n, 2.0), out, a, a),)))
    np.testing.assert_array_equal(buffer_for(out).numpy(), np.full(n, 300, np.float32))
    defer_linear(UOp(Ops.LINEAR, dtypes.void, (call(scale_add(n, 1.0), tmp, a, a),)))
    run_linear(UOp(Ops.LINEAR, dtypes.void, (call(scale_add(n, 1.0), out, tmp, tmp),)))
    np.testing.assert_array_equal(buffer_for(out).numpy(), np.full(n, 400, np.float32))
    settle_deferred()  # nothing queued: nothing to do
    assert not deferred_work


def test_a_deferred_call_that_fails_raises_where_the_queue_runs_and_leaves_nothing_queued():
    from hcq_runtime import defer_linear
    from hcq_runtime.buffer import deferred_work
    n = 8
    a, on_disk = UOp.new_buffer("CPU", n, dtypes.float32), UOp.new_buffer("DISK:/dev/null", n, dtypes.float32)
    defer_linear(UOp(Ops.LINEAR, dtypes.void, (call(scale_add(n, 1.0), a, on_disk, on_disk),)))
    with pytest.raises(DeviceError, match="reads or writes buffers on DISK"):
        buffer_for(a).numpy()
    assert not deferred_work


def test_a_kernel_the_compile_threads_have_in_hand_is_waited_for_not_compiled_again(monkeypatch):
    from hcq_runtime import compile_body, kernel_cache
    monkeypatch.setattr(kernel_cache.os, "cpu_count", lambda: 2)
    n = 16
    a, out = UOp.new_buffer("CPU", n, dtypes.float32), UOp.new_buffer("CPU", n, dtypes.float32)
    kernel = call(scale_add(n, 7.6543), out, a, a)  # a scale no other test uses
    before = counters.compiles  # (compiles asked of the compiler, disk cache hits included)
    assert [key for key, _ in kernel_cache.start_compiles([kernel])] == [(kernel.src[0].key, "CPU")]
    assert kernel_cache.start_compiles([kernel]) != []  # asked again while in hand: the same compile, not a second
    compiled = compile_body(kernel.src[0], "CPU")
    assert counters.compiles == before + 1 and not kernel_cache._inflight
    assert compile_body(kernel.src[0], "CPU") is compiled


def test_a_kernel_that_fails_to_compile_in_the_threads_raises_at_its_launch(monkeypatch):
    from hcq_runtime import compile_body, kernel_cache
    monkeypatch.setattr(kernel_cache.os, "cpu_count", lambda: 2)

    def refuse(self, src):
        raise CompileError("line 1: the compiler refused it")

    monkeypatch.setattr(CCompiler, "compile", refuse)
    n = 16
    a, out = UOp.new_buffer("CPU", n, dtypes.float32), UOp.new_buffer("CPU", n, dtypes.float32)
    kernel = call(scale_add(n, 3.2109), out, a, a)  # a scale no other test uses
    assert kernel_cache.start_compiles([kernel])
    with pytest.raises(CompileError, match="the compiler refused it"):
        compile_body(kernel.src[0], "CPU")
    assert not kernel_cache._inflight and (kernel.src[0].key, "CPU") not in kernel_cache._kernels
