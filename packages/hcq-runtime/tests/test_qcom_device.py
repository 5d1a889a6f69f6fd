"""MOCKQCOM end to end: kernels rendered as OpenCL C, compiled by the host C compiler through the shim, dispatched as
real Adreno 6xx CP streams through the mock kgsl, results against numpy; the device state, the stack, the constant
upload bounds and the mock's rejection of malformed packets."""

import time

import numpy as np
import pytest
from hcq_runtime import Device, buffer_for, link_linear, run_linear
from hcq_runtime.hcq2 import COMPUTE, runtime, staging
from hcq_runtime.qcom import GPUFaultError, MalformedPacketError, MockKGSL, QCOMComputeQueue, QCOMDevice, ticks_to_us
from hypothesis import given, settings
from hypothesis import strategies as st
from uopir import AxisType, Ops, UOp, dtypes

AXPB = """__kernel void axpb(__global float *restrict out, __global float *restrict x, long n, long b) {
  long i = get_global_id(0);
  if (i < n) out[i] = x[i] * 2.0f + (float)b;
}"""


def run(ast: UOp, out_size: int, *inputs: np.ndarray) -> np.ndarray:
    bufs = [UOp.new_buffer("MOCKQCOM", out_size, dtypes.float32)] + [UOp.new_buffer("MOCKQCOM", x.size, dtypes.float32) for x in inputs]
    for buf, x in zip(bufs[1:], inputs):
        buffer_for(buf).copyin(x)
    run_linear(UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (ast, *bufs)),)))
    return buffer_for(bufs[0]).numpy()


def test_kernels_on_mockqcom_match_numpy():
    rng = np.random.default_rng(0)
    n, m, k = 8, 32, 16
    out, a, b = (UOp.param(s, dtypes.float32.ptr(size)) for s, size in ((0, n * m), (1, n * k), (2, k * m)))
    i, j, r = UOp.range(n, 0), UOp.range(m, 1), UOp.range(k, 2, AxisType.REDUCE)
    matmul = UOp.sink(out.index(i * m + j).store((a.index(i * k + r).load() * b.index(r * m + j).load()).reduce(r)).end(i, j))
    x, y = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((k, m), dtype=np.float32)
    np.testing.assert_allclose(run(matmul, n * m, x.ravel(), y.ravel()).reshape(n, m), x @ y, rtol=1e-5, atol=1e-5)
    # a long reduction feeding few outputs is grouped across a work-group: local memory and barriers
    rows, cols = 4, 512
    out2, a2 = UOp.param(0, dtypes.float32.ptr(rows)), UOp.param(1, dtypes.float32.ptr(rows * cols))
    i2, r2 = UOp.range(rows, 0), UOp.range(cols, 1, AxisType.REDUCE)
    grouped = UOp.sink(out2.index(i2).store(a2.index(i2 * cols + r2).load().reduce(r2, arg=Ops.MAX)).end(i2))
    z = rng.standard_normal((rows, cols), dtype=np.float32)
    np.testing.assert_array_equal(run(grouped, rows, z.ravel()), z.max(1))


def test_copies_between_cpu_and_mockqcom_are_bit_exact(monkeypatch):
    monkeypatch.setattr(staging, "STAGING_SIZE", 256)  # 2 slots of 128 bytes: a 4000-byte copy rotates them many times
    data = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    cpu, gpu, back = UOp.new_buffer("CPU", 1000, dtypes.float32), UOp.new_buffer("MOCKQCOM", 1000, dtypes.float32), \
        UOp.new_buffer("CPU", 1000, dtypes.float32)
    buffer_for(cpu).copyin(data)
    copy = UOp(Ops.COPY, dtypes.float32, (), "MOCKQCOM")
    run_linear(UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (copy, gpu, cpu)), UOp(Ops.CALL, dtypes.void, (copy, back, gpu)))))
    np.testing.assert_array_equal(buffer_for(back).numpy(), data)


def test_the_engine_batches_calls_into_one_submit_and_links_device_state():
    # two dependent kernels and a variable: one GPU_COMMAND per run, the stack and dummy page kept by the linked steps
    n = 64
    out, a = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float32.ptr(n))
    i = UOp.range(n, 0)
    double = UOp.sink(out.index(i).store(a.index(i).load() * 2.0).end(i))
    var = UOp.variable("k", 1, 100)
    shift = UOp.sink(out.index(i).store(a.index(i).load() + var.cast(dtypes.float32)).end(i))
    x, tmp, y = (UOp.new_buffer("MOCKQCOM", n, dtypes.float32) for _ in range(3))
    calls = (UOp(Ops.CALL, dtypes.void, (double, tmp, x)), UOp(Ops.CALL, dtypes.void, (shift, y, tmp, var.bind(3))))
    linear = UOp(Ops.LINEAR, dtypes.void, calls)
    dev = Device["MOCKQCOM"]
    data = np.arange(n, dtype=np.float32)
    buffer_for(x).copyin(data)
    before = dev.file.calls.count("GPU_COMMAND")
    run_linear(linear)
    assert dev.file.calls.count("GPU_COMMAND") == before + 1
    np.testing.assert_array_equal(buffer_for(y).numpy(), data * 2 + 3)
    linked = link_linear(linear, inputs=[x, y])
    assert any(r is dev._stack for r in linked.refs) and any(r is dev.dummy for r in linked.refs)
    for k in (5, 7):
        fresh_in, fresh_out = UOp.new_buffer("MOCKQCOM", n, dtypes.float32), UOp.new_buffer("MOCKQCOM", n, dtypes.float32)
        buffer_for(fresh_in).copyin(data + k)
        linked([buffer_for(fresh_in), buffer_for(fresh_out)], {"k": k})
        np.testing.assert_array_equal(buffer_for(fresh_out).numpy(), (data + k) * 2 + k)


@pytest.fixture
def dev():
    return QCOMDevice("MOCKQCOM", MockKGSL())


def alloc(dev, data: np.ndarray):
    mem = dev.allocator.alloc(data.nbytes)
    dev.allocator.copyin(mem, memoryview(data).cast("B"))
    return mem


def read(dev, mem, dtype, count):
    out = np.empty(count, dtype)
    dev.allocator.copyout(memoryview(out).cast("B"), mem)
    return out


def test_scalar_arguments_and_the_launch_ioctls():
    dev = QCOMDevice("MOCKQCOM", MockKGSL(asynchronous=True))  # the mock GPU runs only when the host waits
    prog = dev.program("axpb", dev.compiler.compile(AXPB))
    x = np.arange(100, dtype=np.float32)
    out, xs = alloc(dev, np.zeros(100, np.float32)), alloc(dev, x)
    before = len(dev.file.calls)
    prog.launch([out.va, xs.va], [90, -5], (4, 1, 1), (32, 1, 1))
    # the first launch allocates the runtime pool, the dummy page and the stack; every launch is a GPU_COMMAND and a wait
    assert dev.file.calls[before:] == ["GPUOBJ_ALLOC"] * 3 + ["GPU_COMMAND", "DEVICE_WAITTIMESTAMP_CTXTID"]
    prog.launch([out.va, xs.va], [90, -5], (4, 1, 1), (32, 1, 1), wait=False)
    assert dev.file.calls[before + 5:] == ["GPU_COMMAND"] and dev.file.pending
    # reading the result waits for the GPU first
    np.testing.assert_array_equal(read(dev, out, np.float32, 100), np.where(np.arange(100) < 90, x * 2 - 5, 0))
    # the constant upload covers exactly the program's kernargs, which end where the linked submit ends
    dispatch = dev.file.cp.dispatches[-1]
    assert dispatch.consts.units * 16 == prog.info.kernargs_size == 2048  # 2048 bytes of arguments, no descriptors
    assert (dispatch.groups, dispatch.local) == ((4, 1, 1), (32, 1, 1))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 300), st.integers(-1000, 1000), st.sampled_from([1, 7, 32, 64, 128]), st.integers(0, 3))
def test_launch_sizes_and_scalars_against_numpy(n, b, local, extra_groups):
    dev = Device["MOCKQCOM"]
    prog = dev.program("axpb", dev.compiler.compile(AXPB))
    groups = -(-n // local) + extra_groups  # more work-items than elements: the kernel's bounds check must hold
    x = np.linspace(-3, 3, groups * local, dtype=np.float32)
    out, xs = alloc(dev, np.full(groups * local, 7, np.float32)), alloc(dev, x)
    prog.launch([out.va, xs.va], [n, b], (groups, 1, 1), (local, 1, 1))
    expected = np.where(np.arange(groups * local) < n, x * 2 + np.float32(b), 7)
    np.testing.assert_array_equal(read(dev, out, np.float32, groups * local), expected)


def test_the_constant_upload_never_reads_past_the_kernargs(link_queue):
    # a one-page runtime pool: the submit (IB + kernargs) fills its start, so a load of the whole 256-vec4 constant file
    # (the seed's bug) would read past the pool's end
    dev = QCOMDevice("MOCKQCOM", MockKGSL(), rt_nbytes=0x1000)
    prog = dev.program("axpb", dev.compiler.compile(AXPB))
    out, xs = alloc(dev, np.zeros(32, np.float32)), alloc(dev, np.ones(32, np.float32))
    prog.launch([out.va, xs.va], [32, 1], (1, 1, 1), (32, 1, 1))
    np.testing.assert_array_equal(read(dev, out, np.float32, 32), np.full(32, 3, np.float32))
    queue = QCOMComputeQueue().exec(prog.info, prog.image.va, [out.va, xs.va], [32, 1], (1, 1, 1), (32, 1, 1))
    linked = link_queue(dev, queue)
    words = linked.words()
    (at,) = [i for i, w in enumerate(words) if w >> 28 == 7 and (w >> 16) & 0x7F == 0x34 and (words[i + 1] >> 14) & 3 == 1]
    words[at + 1] = (words[at + 1] & 0x3FFFFF) | 256 << 22  # num_unit = 1024 // 4, as before the fix
    with pytest.raises(GPUFaultError, match="CP_LOAD_STATE6_FRAG .* reads 256 units of 16 bytes"):
        linked.submit()


def test_device_state_is_kept_as_references_of_the_linked_commands(dev, link_queue):
    prog = dev.program("axpb", dev.compiler.compile(AXPB))
    out, xs = alloc(dev, np.zeros(32, np.float32)), alloc(dev, np.ones(32, np.float32))
    queue = QCOMComputeQueue().exec(prog.info, prog.image.va, [out.va, xs.va], [32, 0], (1, 1, 1), (32, 1, 1))
    linked = link_queue(dev, queue.signal(dev.timeline.address, runtime("timeline")))
    assert any(r is dev._stack for r in linked.refs) and any(r is dev.dummy for r in linked.refs)
    for _ in range(3):  # the linked commands replay with only the timeline value patched
        linked.submit({"timeline": dev.next_timeline()})
        dev.synchronize()
    np.testing.assert_array_equal(read(dev, out, np.float32, 32), np.full(32, 2, np.float32))
    assert len(dev.file.cp.dispatches) == 3 and all(d.stack_address == dev._stack.va for d in dev.file.cp.dispatches)


def stack_bytes(pvtmem: int) -> int:
    """The seed's stack size for `pvtmem` bytes of private memory per work-item: 4 * SP_CS_PVT_MEM_STACK_OFFSET."""
    per_item = -(-pvtmem // 512) * 512
    power2 = 1 << (per_item - 1).bit_length() if per_item > 1 else 1
    return -(-(power2 * 128 * 16) // 0x1000) * 0x1000 * 4


def test_a_program_with_private_memory_grows_the_stack(dev):
    small = dev.program("axpb", dev.compiler.compile(AXPB))
    out, xs = alloc(dev, np.zeros(64, np.float32)), alloc(dev, np.arange(64, dtype=np.float32))
    small.launch([out.va, xs.va], [64, 0], (2, 1, 1), (32, 1, 1))
    assert dev._stack.size == stack_bytes(0) and dev.file.cp.dispatches[-1].stack_bytes == stack_bytes(0)
    deep_src = """__kernel void deep(__global float *restrict out, __global float *restrict x) {
  float scratch[3000];
  long i = get_global_id(0);
  for (int k = 0; k < 3000; k++) scratch[k] = x[i] + k;
  out[i] = scratch[2999] + scratch[(int)x[i]];
}"""
    deep = dev.program("deep", dev.compiler.compile(deep_src))
    assert deep.info.pvtmem == 3000 * 4
    deep.launch([out.va, xs.va], [], (2, 1, 1), (32, 1, 1))
    x = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(read(dev, out, np.float32, 64), x + 2999 + x + x)
    assert dev._stack.size == stack_bytes(3000 * 4) > stack_bytes(0)
    assert dev.file.cp.dispatches[-1].stack_bytes == stack_bytes(3000 * 4)
    small.launch([out.va, xs.va], [64, 0], (2, 1, 1), (32, 1, 1))  # a shallower program does not shrink it
    assert dev._stack.size == stack_bytes(3000 * 4)


def test_timestamps_signals_and_waits(dev):
    prog = dev.program("axpb", dev.compiler.compile(AXPB))
    out, xs, stamps = alloc(dev, np.zeros(32, np.float32)), alloc(dev, np.ones(32, np.float32)), alloc(dev, np.zeros(2, np.uint64))
    signal = alloc(dev, np.zeros(1, np.uint32))
    queue = QCOMComputeQueue().timestamp(stamps.va).exec(prog.info, prog.image.va, [out.va, xs.va], [32, 0], (1, 1, 1), (32, 1, 1))
    queue.timestamp(stamps.va + 8).signal(signal.va, 7).wait(signal.va, 7).memory_barrier()
    start = time.perf_counter()
    dev.run_queue(COMPUTE, queue)
    elapsed_us = (time.perf_counter() - start) * 1e6
    t0, t1 = read(dev, stamps, np.uint64, 2)
    assert 0 < ticks_to_us(int(t1) - int(t0)) <= elapsed_us
    assert read(dev, signal, np.uint32, 1)[0] == 7
    with pytest.raises(GPUFaultError, match="waits for 8 .* would hang"):
        dev.run_queue(COMPUTE, QCOMComputeQueue().wait(signal.va, 8))


def corrupt(dev, link_queue, edit):
    """Submit a one-dispatch queue after `edit(words)` changed its linked IB."""
    prog = dev.program("axpb", dev.compiler.compile(AXPB))
    out, xs = alloc(dev, np.zeros(32, np.float32)), alloc(dev, np.ones(32, np.float32))
    linked = link_queue(dev, QCOMComputeQueue().exec(prog.info, prog.image.va, [out.va, xs.va], [32, 0], (1, 1, 1), (32, 1, 1)))
    edit(linked.words())
    linked.submit()


def test_a_buffer_outside_gpu_memory_faults_instead_of_crashing(dev):
    prog = dev.program("axpb", dev.compiler.compile(AXPB))
    out = alloc(dev, np.zeros(32, np.float32))
    with pytest.raises(GPUFaultError, match="buffer argument at constant byte 80 points at 0x1000"):
        prog.launch([out.va, 0x1000], [32, 0], (1, 1, 1), (32, 1, 1))


def test_malformed_packets_are_rejected_with_their_name(dev, link_queue):
    def flip_parity(words):
        words[0] ^= 1 << 23  # the opcode parity bit of the first packet (CP_SET_MARKER)
    with pytest.raises(MalformedPacketError, match="type-7 packet at dword 0 .* parity"):
        corrupt(dev, link_queue, flip_parity)

    def unknown_opcode(words):
        words[0] = 0x70000000 | 0x48 << 16 | 1 << 15 | 1 << 23  # CP_ME_INIT, empty body
    with pytest.raises(MalformedPacketError, match="opcode 0x48 at dword 0"):
        corrupt(dev, link_queue, unknown_opcode)

    def foreign_register(words):
        words[2] = (int(words[2]) & ~(0x3FFFF << 8 | 1 << 27) & 0xFFFFFFFF) | 0x8800 << 8 | (1 - bin(0x8800).count("1") % 2) << 27
    with pytest.raises(MalformedPacketError, match="outside the A6xx compute state"):
        corrupt(dev, link_queue, foreign_register)

    def not_a_header(words):
        words[0] = 0x12345678
    with pytest.raises(MalformedPacketError, match="dword 0 .* not a type-4 or type-7 packet header"):
        corrupt(dev, link_queue, not_a_header)

    def wrong_size(words):  # CP_SET_MARKER with 2 body dwords (swallowing the next header)
        words[0] = 0x70000000 | 2 | 0 << 15 | 0x65 << 16 | (1 - bin(0x65).count("1") % 2) << 23
    with pytest.raises(MalformedPacketError, match="CP_SET_MARKER at dword 0 .* has 2 body dwords"):
        corrupt(dev, link_queue, wrong_size)


def test_mockqcom_renders_portable_opencl():
    renderer = Device["MOCKQCOM"].renderer
    assert renderer.device == "QCOM" and renderer.special("gidx1") == "((long)get_group_id(1))"
    assert "amdgcn" not in renderer.barrier()
