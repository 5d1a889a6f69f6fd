"""One runner per kind of device: which runner a call goes to, runs and links split between runners, lanes, copies."""

import numpy as np
import pytest
from hcq_runtime import AMDCompiler, CompileError, DeviceError, buffer_for, lane_buffers, link_linear, run_linear, runner_for
from hcq_runtime.hcq2 import QUEUE_RUNNER, HCQError, QueueSteps
from hcq_runtime.host import HOST_RUNNER, HostBatch
from kernel_asts import call, lane_kernel, linear, scale_add
from uopir import Ops, UOp, dtypes

N = 16
COPY = UOp(Ops.COPY, dtypes.void)


def new(device: str = "CPU", data: np.ndarray | None = None, n: int = N) -> UOp:
    buf = UOp.new_buffer(device, n, dtypes.float32)
    if data is not None:
        buffer_for(buf).copyin(data)
    return buf


def needs_amd_toolchain() -> None:
    try:
        AMDCompiler("gfx1100")
    except CompileError:
        pytest.skip("clang-15 and ld.lld-15 are needed to build AMD kernels")


def test_each_call_goes_to_its_device_kinds_runner():
    cpu, other, gpu = new(), new("CPU:1"), new("MOCKAMD")
    assert runner_for(call(scale_add(N, 1.0), cpu, cpu, cpu)) is HOST_RUNNER
    assert runner_for(call(scale_add(N, 1.0), gpu, gpu, gpu)) is QUEUE_RUNNER
    assert runner_for(call(COPY, other, cpu)) is HOST_RUNNER  # both memories are the host's
    assert runner_for(call(COPY, gpu, cpu)) is QUEUE_RUNNER  # staged by the queue runner, either way
    assert runner_for(call(COPY, cpu, gpu)) is QUEUE_RUNNER


def test_the_queue_runner_refuses_host_kernels():
    cpu = new(data=np.ones(N, np.float32))
    with pytest.raises(HCQError, match="cannot enqueue"):
        QUEUE_RUNNER.run([call(scale_add(N, 1.0), cpu, cpu, cpu)], {})


def test_copies_need_equal_sizes_run_or_linked():
    small, big = new(data=np.ones(N, np.float32)), new(n=2 * N)
    lin = linear(call(COPY, big, small))
    with pytest.raises(DeviceError, match=f"copy of {4 * N} bytes into a buffer of {8 * N} bytes"):
        run_linear(lin)
    with pytest.raises(DeviceError, match=f"copy of {4 * N} bytes into a buffer of {8 * N} bytes"):
        link_linear(lin)


def test_lanes_of_host_devices_run_and_link_with_their_index_as_a_constant(rng):
    devices = ("CPU", "CPU:1")
    a, out = UOp.new_buffer(devices, N, dtypes.float32), UOp.new_buffer(devices, N, dtypes.float32)
    data = [rng.standard_normal(N, dtype=np.float32) for _ in devices]
    for lane, x in zip(lane_buffers(a), data):
        buffer_for(lane).copyin(x)
    lin = linear(call(lane_kernel(N), out, a))
    run_linear(lin)
    for index, (lane, x) in enumerate(zip(lane_buffers(out), data)):
        np.testing.assert_array_equal(buffer_for(lane).numpy(), x * 2 + index)
        buffer_for(lane).copyin(np.zeros(N, np.float32))
    linked = link_linear(lin)
    assert [type(p) for p in linked.parts] == [HostBatch] and linked.variables == () and linked.n_kernels == 2
    linked([])
    for index, (lane, x) in enumerate(zip(lane_buffers(out), data)):
        np.testing.assert_array_equal(buffer_for(lane).numpy(), x * 2 + index)
    with pytest.raises(DeviceError, match="multi-device buffer .* cannot be a linked input"):
        link_linear(lin, [a])


def test_a_linear_across_host_and_queue_devices_links_one_part_per_run_of_a_runners_calls(rng):
    needs_amd_toolchain()
    x_in, ones = new(), new(data=np.ones(N, np.float32))
    host_tmp, gpu_a, gpu_ones, gpu_b, back, out = new(), new("MOCKAMD"), new("MOCKAMD"), new("MOCKAMD"), new(), new()
    lin = linear(
        call(scale_add(N, 2.0), host_tmp, x_in, ones),  # host: 2x + 1
        call(COPY, gpu_a, host_tmp),  # staged in
        call(COPY, gpu_ones, ones),
        call(scale_add(N, 3.0), gpu_b, gpu_a, gpu_ones),  # queue: 3(2x + 1) + 1
        call(COPY, back, gpu_b),  # staged out
        call(scale_add(N, 0.5), out, back, x_in),  # host: half that + x
    )
    linked = link_linear(lin, [x_in, out])
    assert [type(p) for p in linked.parts] == [HostBatch, QueueSteps, HostBatch]
    assert linked.n_kernels == 3 and linked.n_copies == 3 and linked.submits == 1
    for _ in range(2):
        x = rng.standard_normal(N, dtype=np.float32)
        result = buffer_for(new())
        linked([buffer_for(new(data=x)), result])
        np.testing.assert_allclose(result.numpy(), 0.5 * (3 * (2 * x + 1) + 1) + x, rtol=1e-6)
    buffer_for(x_in).copyin(x)
    run_linear(lin)
    np.testing.assert_allclose(buffer_for(out).numpy(), 0.5 * (3 * (2 * x + 1) + 1) + x, rtol=1e-6)
