"""End to end on MOCKAMD: OpenCL kernels built by clang-15 for gfx1100 (and the CDNA targets gfx90a, gfx940), dispatched
through the PM4 ring and run in the amd-isa emulator by the mock GPU; results compared with numpy."""

import dataclasses
import struct

import numpy as np
import pytest
from amd_isa import CodeObject
from hcq_runtime import AMDCompiler, CompileError
from hcq_runtime.amd import (
    AMDComputeQueue,
    AMDCopyQueue,
    AMDDevice,
    AMDError,
    CommandBuffer,
    GPUFaultError,
    PatchKind,
    link,
    runtime,
)
from hcq_runtime.hcq2 import COMPUTE, COPY

try:
    COMPILER = AMDCompiler("gfx1100")
except CompileError:
    COMPILER = None
pytestmark = pytest.mark.skipif(COMPILER is None, reason="clang-15 and ld.lld-15 are needed to build AMD kernels")

VECTOR_ADD = """
__kernel void vector_add(__global const float *a, __global const float *b, __global float *c, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  if (i < n) c[i] = a[i] + b[i];
}
"""
# reads its workgroup size through the dispatch packet pointer, so the dispatch must set that user SGPR up
FILL_2D = """
__kernel void fill2d(__global int *out, int width) {
  int x = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  int y = __builtin_amdgcn_workgroup_id_y() * __builtin_amdgcn_workgroup_size_y() + __builtin_amdgcn_workitem_id_y();
  out[y * width + x] = y * 1000 + x + __builtin_amdgcn_workgroup_size_x() * 1000000;
}
"""


@pytest.fixture(scope="module")
def dev():
    device = AMDDevice("MOCKAMD")
    yield device
    device.close()


def upload(dev, array):
    mem = dev.allocator.alloc(array.nbytes)
    dev.allocator.copyin(mem, memoryview(np.ascontiguousarray(array)).cast("B"))
    return mem


def download(dev, mem, dtype, count):
    out = np.zeros(count, dtype)
    dev.allocator.copyout(memoryview(out).cast("B"), mem)
    return out


def kernarg_memory(dev, data, size):
    """Kernel arguments (zero-padded to `size`) in memory of their own."""
    memory = dev.alloc_memory(max(size, len(data)))
    memory.view[:max(size, len(data))] = 0
    memory.view[:len(data)] = np.frombuffer(data, np.uint8)
    return memory


def test_vector_add(dev, rng):
    prg = dev.program("vector_add", COMPILER.compile(VECTOR_ADD))
    n = 1000  # not a multiple of the workgroup: the last group is partly masked by the kernel's bounds check
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    ma, mb, mc = upload(dev, a), upload(dev, b), upload(dev, np.full(n, -1, np.float32))
    before = dev.driver.gpu.dispatches
    prg.launch([ma.va, mb.va, mc.va], [n], (16, 1, 1), (64, 1, 1))
    assert dev.driver.gpu.dispatches == before + 1
    np.testing.assert_array_equal(download(dev, mc, np.float32, n), a + b)


def test_2d_dispatch_through_the_dispatch_packet(dev):
    prg = dev.program(None, COMPILER.compile(FILL_2D))
    assert "dispatch_ptr" in prg.info.user_sgprs
    width, height = 64, 6
    out = upload(dev, np.zeros(width * height, np.int32))
    prg.launch([out.va], [width], (2, 3, 1), (32, 2, 1))
    y, x = np.mgrid[0:height, 0:width]
    np.testing.assert_array_equal(download(dev, out, np.int32, width * height).reshape(height, width), y * 1000 + x + 32 * 1000000)


def test_encoded_once_linked_once_patched_per_run(dev, rng):
    """One command buffer: the program address is a link patch written once; kernargs and timeline values are runtime
    patches written before each of three runs with new inputs."""
    prg = dev.program("vector_add", COMPILER.compile(VECTOR_ADD))
    info = dataclasses.replace(prg.info, address=link("prog:vector_add"))
    queue = AMDComputeQueue(dev.target).wait(dev.timeline.address, runtime("wait")).exec(info, runtime("kernargs"), (4, 1, 1), (64, 1, 1))
    queue.signal(dev.timeline.address, runtime("signal"))
    cmd = queue.cmd
    assert cmd.names(PatchKind.LINK) == {"prog:vector_add"}
    assert cmd.link({"prog:vector_add": prg.info.address}) == 1
    n = 256
    for _ in range(3):
        a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        ma, mb, mc = upload(dev, a), upload(dev, b), dev.allocator.alloc(4 * n)
        kernargs = kernarg_memory(dev, struct.pack("<QQQi", ma.va, mb.va, mc.va, n), prg.info.kernarg_size)
        value = dev.next_timeline()
        assert cmd.patch({"kernargs": kernargs.va, "wait": value - 1, "signal": value}) == 3
        dev.run_queue(COMPUTE, queue)
        dev.synchronize()
        np.testing.assert_array_equal(download(dev, mc, np.float32, n), a + b)
        for mem in (ma, mb, mc):
            dev.allocator.free(mem, 4 * n)
    assert cmd.patches_written == 1 + 3 * 3


def test_compute_then_copy_ordered_by_the_timeline(dev, rng):
    prg = dev.program("vector_add", COMPILER.compile(VECTOR_ADD))
    n = 512
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    ma, mb, mc, md = upload(dev, a), upload(dev, b), dev.allocator.alloc(4 * n), dev.allocator.alloc(4 * n)
    # the copy is submitted first but waits on the timeline value the dispatch signals
    target = dev.timeline_value
    dev.run_queue(COPY, AMDCopyQueue().wait(dev.timeline.address, target).copy(md.va, mc.va, 4 * n))
    assert not download(dev, md, np.float32, n).any(), "the copy must wait for the dispatch"
    prg.launch([ma.va, mb.va, mc.va], [n], (8, 1, 1), (64, 1, 1), wait=False)
    dev.synchronize()
    copied = download(dev, md, np.uint32, n)
    np.testing.assert_array_equal(copied, (a + b).view(np.uint32))


def test_bound_command_buffer_replays_through_an_indirect_buffer(dev, rng):
    """The commands live in GPU memory and are patched there; each run is one INDIRECT_BUFFER packet in the ring. The
    IB first waits on a gate the host opens later, so the mock GPU must stall inside the IB and resume there."""
    prg = dev.program("vector_add", COMPILER.compile(VECTOR_ADD))
    gate = dev.new_signal()
    info = dataclasses.replace(prg.info, address=link("prog"))
    queue = AMDComputeQueue(dev.target).wait(gate.address, runtime("gate")).exec(info, runtime("kernargs"), (2, 1, 1), (64, 1, 1))
    queue.signal(dev.timeline.address, runtime("signal"))
    bound = dev.alloc_memory(len(queue.cmd))
    words = bound.view[:len(queue.cmd)]
    words[:] = np.frombuffer(bytes(queue.cmd.data), np.uint8)
    assert queue.cmd.link({"prog": prg.info.address}, into=words) == 1
    n = 128
    for run in range(1, 4):
        a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        ma, mb, mc = upload(dev, a), upload(dev, b), dev.allocator.alloc(4 * n)
        kernargs = kernarg_memory(dev, struct.pack("<QQQi", ma.va, mb.va, mc.va, n), prg.info.kernarg_size)
        value = dev.next_timeline()
        queue.cmd.patch({"gate": run, "kernargs": kernargs.va, "signal": value}, into=words)
        dispatched = dev.driver.gpu.dispatches
        dev.submit_commands(COMPUTE, bound, 0, len(queue.cmd))
        assert dev.timeline.value < value and dev.driver.gpu.dispatches == dispatched, "the IB must stall on the closed gate"
        gate.value = run
        dev.synchronize()
        np.testing.assert_array_equal(download(dev, mc, np.float32, n), a + b)


def test_dispatching_freed_code_faults():
    device = AMDDevice("MOCKAMD", ring_size=0x1000)
    prg = device.program("vector_add", COMPILER.compile(VECTOR_ADD))
    out = upload(device, np.zeros(64, np.float32))
    prg.launch([out.va, out.va, out.va], [64], (1, 1, 1), (64, 1, 1))
    device.driver.free(prg.image)
    with pytest.raises(GPUFaultError, match="COMPUTE_PGM .*not mapped"):
        prg.launch([out.va, out.va, out.va], [64], (1, 1, 1), (64, 1, 1))


# a dynamically indexed private array: clang places it in scratch (the private segment)
PRIVATE_ARRAY = """
__kernel void shuffle(__global float *out, __global const int *idx) {
  float tmp[64];
  int lane = __builtin_amdgcn_workitem_id_x();
  for (int i = 0; i < 64; i++) tmp[(i * 7) & 63] = (float)(i * lane);
  out[lane] = tmp[idx[lane] & 63];
}
"""


def run_encoded(dev, prg, addresses, values, groups, local):
    """Encode one dispatch with encode_kernel, link it into its own memory, patch the signal value and run it."""
    queue, data = dev.hw_queue(COMPUTE), CommandBuffer()
    dev.encode_kernel(queue, data, prg, link("prog", 8), addresses, values, groups, local)
    queue.signal(dev.timeline.address, runtime("done"))
    state, keep = dev.link_state(queue.cmd.names(PatchKind.LINK) - {"prog", "data"})
    data_len = -(-len(data) // 256) * 256
    memory = dev.alloc_memory(data_len + len(queue.cmd))
    memory.view[:len(data)] = np.frombuffer(bytes(data.data), np.uint8)
    memory.view[data_len:data_len + len(queue.cmd)] = np.frombuffer(bytes(queue.cmd.data), np.uint8)
    data.link({"data": memory.va}, into=memory.view[:data_len])
    queue.cmd.link({**state, "prog": prg.info.address, "data": memory.va}, into=memory.view[data_len:])
    queue.cmd.patch({"done": dev.next_timeline()}, into=memory.view[data_len:])
    dev.submit_commands(COMPUTE, memory, data_len, len(queue.cmd))
    dev.synchronize()
    return state, keep


def test_a_kernel_with_scratch_runs_from_linked_commands(dev):
    """encode_kernel sets up scratch for every dispatch (descriptor, base, TMPRING_SIZE) as link patches; a kernel with a
    private segment runs from commands linked once, with the scratch area among the linked state."""
    prg = dev.program("shuffle", COMPILER.compile(PRIVATE_ARRAY))
    assert prg.private_segment_size > 0
    idx = np.random.default_rng(3).integers(0, 64, 64, dtype=np.int32)
    out, mi = dev.allocator.alloc(256), upload(dev, idx)
    state, keep = run_encoded(dev, prg, [out.va, mi.va], [], (1, 1, 1), (64, 1, 1))
    assert keep == [dev.scratch] and state["scratch"] == dev.scratch.va
    expected = np.zeros((64, 64), np.float32)
    for i in range(64):
        expected[:, (i * 7) & 63] = i * np.arange(64)
    np.testing.assert_array_equal(download(dev, out, np.float32, 64), expected[np.arange(64), idx & 63])


def test_encoded_dispatch_packet_points_at_the_linked_kernargs(dev):
    """A kernel reading its sizes through the dispatch pointer gets a packet in the linked data, after its arguments."""
    prg = dev.program(None, COMPILER.compile(FILL_2D))
    width, height = 64, 6
    out = upload(dev, np.zeros(width * height, np.int32))
    run_encoded(dev, prg, [out.va], [width], (2, 3, 1), (32, 2, 1))
    y, x = np.mgrid[0:height, 0:width]
    np.testing.assert_array_equal(download(dev, out, np.int32, width * height).reshape(height, width), y * 1000 + x + 32 * 1000000)


# CDNA (gfx9) targets clang-15 builds for: gfx90a (MI200) and gfx940 (MI300; clang-15 has no gfx941/gfx942/gfx950)
CDNA = ("gfx90a", "gfx940")


@pytest.fixture(scope="module", params=CDNA)
def cdna(request):
    device = AMDDevice(f"MOCKAMD:{request.param}")
    yield device
    device.close()


def test_cdna_kernels_are_wave64_with_gfx9_descriptors(cdna, rng):
    binary = AMDCompiler(cdna.arch).compile(VECTOR_ADD)
    assert CodeObject.from_bytes(binary).target == cdna.arch
    prg = cdna.program("vector_add", binary)
    assert not prg.info.wave32, "gfx9 has no wave32: the descriptor leaves ENABLE_WAVE32 clear"
    n = 200  # four wave64 workgroups, the last one partly masked
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    ma, mb, mc = upload(cdna, a), upload(cdna, b), upload(cdna, np.full(n, -1, np.float32))
    before = cdna.driver.gpu.dispatches
    prg.launch([ma.va, mb.va, mc.va], [n], (4, 1, 1), (64, 1, 1))
    assert cdna.driver.gpu.dispatches == before + 1
    np.testing.assert_array_equal(download(cdna, mc, np.float32, n), a + b)


def test_cdna_scratch_and_dispatch_packet_from_linked_commands(cdna):
    prg = cdna.program("shuffle", AMDCompiler(cdna.arch).compile(PRIVATE_ARRAY))
    assert prg.private_segment_size > 0
    idx = np.random.default_rng(4).integers(0, 64, 64, dtype=np.int32)
    out, mi = cdna.allocator.alloc(256), upload(cdna, idx)
    run_encoded(cdna, prg, [out.va, mi.va], [], (1, 1, 1), (64, 1, 1))
    expected = np.zeros((64, 64), np.float32)
    for i in range(64):
        expected[:, (i * 7) & 63] = i * np.arange(64)
    np.testing.assert_array_equal(download(cdna, out, np.float32, 64), expected[np.arange(64), idx & 63])
    fill = cdna.program(None, AMDCompiler(cdna.arch).compile(FILL_2D))
    width, height = 64, 4
    grid = upload(cdna, np.zeros(width * height, np.int32))
    run_encoded(cdna, fill, [grid.va], [width], (1, 2, 1), (64, 2, 1))
    y, x = np.mgrid[0:height, 0:width]
    np.testing.assert_array_equal(download(cdna, grid, np.int32, width * height).reshape(height, width), y * 1000 + x + 64 * 1000000)


def test_a_code_object_for_another_target_is_refused(cdna):
    with pytest.raises(AMDError, match=f"built for gfx1100.*{cdna.arch}"):
        cdna.program("vector_add", COMPILER.compile(VECTOR_ADD))
