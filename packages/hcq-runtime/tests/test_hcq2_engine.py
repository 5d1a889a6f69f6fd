"""The hcq2 engine on MOCKAMD: the seed's invariants (test/device/test_hcq2.py) against numpy.

Eager runs carve from the runtime pool and bake every address; JIT links own their memory and patch only inputs,
variables and timelines; the encode cache is keyed structurally; staged copies are bit-exact; dependencies between
the compute and copy queues of one batch are honoured."""

import numpy as np
import pytest
from hcq_runtime import AMDCompiler, CompileError, Device, buffer_for, hcq2, lane_buffers, link_linear, run_linear
from hcq_runtime.amd import QueueHangError
from hcq_runtime.hcq2 import COMPUTE, COPY, PatchKind
from kernel_asts import call, lane_kernel, linear, prefix, scale_add
from uopir import Ops, UOp, dtypes

try:
    AMDCompiler("gfx1100")
except CompileError:
    pytest.skip("clang-15 and ld.lld-15 are needed to build AMD kernels", allow_module_level=True)

DEV = "MOCKAMD"
N = 64






def new(data: np.ndarray | None = None, n: int = N, device: str = DEV, dtype=dtypes.float32) -> UOp:
    buf = UOp.new_buffer(device, n, dtype)
    if data is not None:
        buffer_for(buf).copyin(data)
    return buf


def copy(dst: UOp, src: UOp) -> UOp:
    return call(UOp(Ops.COPY, dst.arg.dtype, (), dst.arg.device), dst, src)


def runtime_names(linked) -> set[str]:
    return {p.what for b in linked.batches for q in b.encoded.queues for cb in (q.cmds, q.data) for p in cb.patches if p.kind is PatchKind.RUNTIME}


@pytest.fixture
def dev():
    return Device[DEV]


def jitted_step():
    """A two-kernel step out = 3 * (2a + b) + a with an owned temporary; inputs a and out."""
    a, b, tmp, out = new(), new(np.ones(N, np.float32)), new(), new()
    lin = linear(call(scale_add(N, 2.0), tmp, a, b), call(scale_add(N, 3.0), out, tmp, a))
    return lin, a, out


def replay(linked, x: np.ndarray) -> np.ndarray:
    out = buffer_for(new()).ensure_allocated()
    linked([buffer_for(new(x)), out])
    return out.numpy()


def test_jit_replay_carves_no_runtime_buffers_and_eager_does(dev, rng):
    lin, a, out = jitted_step()
    linked = link_linear(lin, [a, out])
    assert linked.submits == 1, "two kernels on one device are one COMPUTE submit"
    carves = dev.rt_pool.carves
    for _ in range(3):
        x = rng.standard_normal(N, dtype=np.float32)
        np.testing.assert_allclose(replay(linked, x), 3 * (2 * x + 1) + x, rtol=1e-6)
    assert dev.rt_pool.carves == carves
    run_linear(linear(call(scale_add(N, 2.0), new(), new(np.ones(N, np.float32)), new(np.ones(N, np.float32)))))
    assert dev.rt_pool.carves > carves


def test_eager_work_wrapping_a_shrunken_pool_never_corrupts_the_jit(dev, rng, monkeypatch):
    lin, a, out = jitted_step()
    linked = link_linear(lin, [a, out])
    monkeypatch.setattr(dev.rt_pool, "size", 1 << 12)
    x = rng.standard_normal(N, dtype=np.float32)
    wraps = dev.rt_pool.wraps
    src = new(np.arange(N, dtype=np.float32))
    for i in range(24):
        dst = new()
        run_linear(linear(call(scale_add(N, float(i % 3)), dst, src, src)))
        np.testing.assert_array_equal(buffer_for(dst).numpy(), np.arange(N, dtype=np.float32) * (i % 3 + 1))
        np.testing.assert_allclose(replay(linked, x), 3 * (2 * x + 1) + x, rtol=1e-6)
    assert dev.rt_pool.wraps > wraps


def test_new_inputs_every_call_never_grow_the_compile_cache(rng):
    lin, a, out = jitted_step()
    linked = link_linear(lin, [a, out])
    replay(linked, np.zeros(N, np.float32))
    before = len(hcq2.compile_cache)
    for _ in range(4):
        x = rng.standard_normal(N, dtype=np.float32)
        np.testing.assert_allclose(replay(linked, x), 3 * (2 * x + 1) + x, rtol=1e-6)
    assert len(hcq2.compile_cache) == before


def relowers(lin: UOp) -> int:
    before = len(hcq2.compile_cache)
    run_linear(lin)
    return len(hcq2.compile_cache) - before


def test_eager_encodes_again_only_for_a_new_kernel_or_shape():
    a, b = new(np.ones(N, np.float32)), new(np.ones(N, np.float32))
    relowers(linear(call(scale_add(N, 2.0), new(), a, b)))
    assert relowers(linear(call(scale_add(N, 2.0), new(), a, b))) == 0  # new output buffer: linked, not encoded
    assert relowers(linear(call(scale_add(N, 2.0), new(), new(), new()))) == 0
    assert relowers(linear(call(scale_add(N, 5.0), new(), a, b))) == 1  # a new kernel
    assert relowers(linear(call(scale_add(N, 5.0), new(), a, b))) == 0
    assert relowers(linear(call(scale_add(32, 5.0), new(n=32), new(n=32), new(n=32)))) == 1  # a new shape


def test_jitted_symbolic_length(rng):
    x, out = new(), new()
    linked = link_linear(linear(call(prefix(N), out, x)), [x, out])
    assert linked.variables == ("len",)
    for length in (1, 17, 40, N):
        data = rng.standard_normal(N, dtype=np.float32)
        result = buffer_for(new()).ensure_allocated()
        linked([buffer_for(new(data)), result], {"len": length})
        np.testing.assert_array_equal(result.numpy(), np.where(np.arange(N) < length, data, -1))


@pytest.mark.parametrize("npdt, dtype", [(np.uint8, dtypes.uint8), (np.float32, dtypes.float32)])
def test_staged_copy_through_a_two_slot_ring_is_bit_exact(monkeypatch, npdt, dtype):
    size = 1 << 16
    monkeypatch.setattr(hcq2.staging, "STAGING_SIZE", size)
    monkeypatch.setattr(hcq2.staging, "STAGING_SLOTS", 2)
    n = (size // 2 // np.dtype(npdt).itemsize) * 9 + 7  # nine rotations of a two-slot ring, plus a short tail
    data = np.random.default_rng(42).integers(0, 256, n * np.dtype(npdt).itemsize, dtype=np.uint8).view(npdt)
    host, gpu, back = new(data, n, "CPU", dtype), new(None, n, DEV, dtype), new(None, n, "CPU", dtype)
    dev = Device[DEV]
    before = dev.timeline_value
    run_linear(linear(copy(gpu, host), copy(back, gpu)))
    assert dev.timeline_value - before == 2 * 10, "each way is ten staged chunks, one device copy each"
    np.testing.assert_array_equal(buffer_for(back).numpy().view(np.uint8), data.view(np.uint8))


def test_runtime_patches_read_only_inputs_variables_and_timelines():
    lin, a, out = jitted_step()
    jit = link_linear(lin, [a, out])
    names = runtime_names(jit)
    assert {n.split(":")[0] for n in names} <= {"input", "var", "timeline"}
    assert any(n.startswith("input:") for n in names), "the JIT patches its input addresses in"
    link_names = {p.what for b in jit.batches for q in b.encoded.queues for p in q.cmds.patches + q.data.patches if p.kind is PatchKind.LINK}
    assert {"prog:0", "prog:1", "buf:0", "scratch"} <= link_names, "owned buffers, programs and device state are link-time"
    eager = link_linear(lin)  # no inputs: what an eager run encodes
    assert not any(n.startswith("input:") for n in runtime_names(eager)), "eager bakes its addresses in"


def chain(n_kernels: int):
    a, out = new(), new()
    bufs = [a] + [new() for _ in range(n_kernels - 1)] + [out]
    calls = [call(scale_add(N, 1.5 if i % 2 else 0.5), bufs[i + 1], bufs[i], bufs[i]) for i in range(n_kernels)]
    return link_linear(linear(*calls), [a, out])


def test_per_run_work_does_not_grow_with_the_kernel_count():
    short, long = chain(2), chain(12)
    assert long.n_kernels == 12 and long.submits == short.submits == 1
    for linked in (short, long):
        replay(linked, np.ones(N, np.float32))
    assert long.patches_written == short.patches_written, "programs and owned buffers ride inside the linked command words"
    assert long.runtime_sources == short.runtime_sources == ("input:0", "input:1", f"timeline:{DEV}")


def test_scratch_is_kept_alive_as_a_reference_of_the_linked_commands(dev):
    lin, a, out = jitted_step()
    linked = link_linear(lin, [a, out])
    assert any(ref is dev.scratch for ref in linked.refs)


def test_a_batch_across_compute_and_copy_waits_where_the_data_flows(dev, rng):
    x = rng.standard_normal(N, dtype=np.float32)
    a, b, c, d = new(x), new(), new(), new()
    ones = new(np.ones(N, np.float32))
    lin = linear(call(scale_add(N, 2.0), b, a, ones),  # b = 2a + 1       (COMPUTE)
                 copy(c, b),                           # c = b            (COPY, waits for the kernel)
                 call(scale_add(N, 3.0), d, c, a))     # d = 3c + a       (COMPUTE, waits for the copy)
    submits = dev.timeline_value
    run_linear(lin)
    np.testing.assert_allclose(buffer_for(d).numpy(), 3 * (2 * x + 1) + x, rtol=1e-6)
    linked = link_linear(lin, [a, d])
    assert linked.submits == 2 and {q.kind for q in linked.batches[0].encoded.queues} == {COMPUTE, COPY}
    assert dev.timeline_value > submits
    y = rng.standard_normal(N, dtype=np.float32)
    np.testing.assert_allclose(replay(linked, y), 3 * (2 * y + 1) + y, rtol=1e-6)


def test_calls_on_two_devices_split_into_one_submit_per_device(rng):
    x0, x1 = rng.standard_normal(N, dtype=np.float32), rng.standard_normal(N, dtype=np.float32)
    other = "MOCKAMD:1"
    a0, o0 = new(x0), new()
    a1, o1 = new(x1, device=other), new(device=other)
    lin = linear(call(scale_add(N, 2.0), o0, a0, a0), call(scale_add(N, 2.0), o1, a1, a1))
    run_linear(lin)
    np.testing.assert_array_equal(buffer_for(o0).numpy(), 3 * x0)
    np.testing.assert_array_equal(buffer_for(o1).numpy(), 3 * x1)
    linked = link_linear(lin, [a0, a1])
    assert linked.submits == 2 and {q.device for q in linked.batches[0].encoded.queues} == {DEV, other}


def test_a_linked_step_with_host_copies_stages_each_run_through_its_inputs(rng):
    """CPU input -> MOCKAMD -> kernel -> CPU output: the copies are host steps (staged), the kernel one submit; the CPU
    buffers change every run."""
    host_in, host_out = new(n=N, device="CPU"), new(n=N, device="CPU")
    gpu_in, gpu_out = new(), new()
    lin = linear(copy(gpu_in, host_in), call(scale_add(N, 2.0), gpu_out, gpu_in, gpu_in), copy(host_out, gpu_out))
    linked = link_linear(lin, [host_in, host_out])
    assert linked.submits == 1 and linked.n_kernels == 1
    for _ in range(3):
        x = rng.standard_normal(N, dtype=np.float32)
        src, dst = buffer_for(new(x, device="CPU")), buffer_for(new(device="CPU")).ensure_allocated()
        linked([src, dst])
        np.testing.assert_array_equal(dst.numpy(), 3 * x)


def test_a_batch_stuck_behind_lost_work_reports_a_hang():
    name = "MOCKAMD:5"  # a device of its own: its compute queue stays stalled
    dev = Device[name]
    dev.timeline_value += 3  # work the timeline expects but that was never submitted
    run_linear(linear(call(scale_add(N, 2.0), new(device=name), new(device=name), new(device=name))))
    with pytest.raises(QueueHangError, match=r"waited 20 ms .*COMPUTE queue .*stalled at WAIT_REG_MEM"):
        dev.synchronize(timeout_ms=20)


def test_a_call_on_a_device_tuple_runs_one_lane_per_device(rng):
    devices = (DEV, "MOCKAMD:1")
    a, out = UOp.new_buffer(devices, N, dtypes.float32), UOp.new_buffer(devices, N, dtypes.float32)
    data = [rng.standard_normal(N, dtype=np.float32) for _ in devices]
    for lane, x in zip(lane_buffers(a), data):
        buffer_for(lane).copyin(x)
    lin = linear(call(lane_kernel(N), out, a))
    run_linear(lin)
    for index, (lane, x) in enumerate(zip(lane_buffers(out), data)):
        assert buffer_for(lane).device == devices[index]
        np.testing.assert_array_equal(buffer_for(lane).numpy(), x * 2 + index)
    linked = link_linear(lin)
    assert linked.submits == 2 and linked.variables == (), "each lane's _device_num is a constant of its commands"
    for lane in lane_buffers(out):
        buffer_for(lane).copyin(np.zeros(N, np.float32))
    linked([])
    for index, (lane, x) in enumerate(zip(lane_buffers(out), data)):
        np.testing.assert_array_equal(buffer_for(lane).numpy(), x * 2 + index)
