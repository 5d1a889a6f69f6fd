"""The mock KFD and GPU: malformed packets, waits and signals across queues, hangs, SDMA copies, faults, and the gfx9 (CDNA)
packet forms a CDNA target expects."""

import numpy as np
import pytest
from hcq_runtime.amd import (
    AMDComputeQueue,
    AMDCopyQueue,
    AMDDevice,
    AMDError,
    CommandBuffer,
    GPUFaultError,
    KFDError,
    MalformedPacketError,
    MockKFD,
    QueueHangError,
    QueueKind,
    open_driver,
    pm4,
    sdma,
)
from hcq_runtime.hcq2 import COMPUTE, staging
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.fixture
def dev():
    device = AMDDevice("MOCKAMD", ring_size=0x1000)
    yield device
    device.close()


def raw(words):
    cmd = CommandBuffer()
    cmd.emit(words)
    return cmd


def submit(dev, cmd, kind):
    """Put a command buffer's words on the `kind` queue now, as they are: the hcq2 interface's `run_queue`."""
    queue = dev.hw_queue(kind)
    queue.cmd.emit(cmd.words)
    dev.run_queue(kind, queue)


def copy(dev, dst, src, nbytes, wait=True):
    """One device copy after all earlier work, on the COPY queue (the staging ring's own primitive)."""
    done = staging.queue_copy(dev, dst, src, nbytes)
    if wait:
        dev.wait(dev.timeline, done)


def bind(dev, cmd):
    """`cmd`'s words in device memory, to be run by reference (INDIRECT_BUFFER): `submit_commands` of the hcq2 interface."""
    memory = dev.alloc_memory(len(cmd.data))
    memory.view[:len(cmd.data)] = np.frombuffer(bytes(cmd.data), np.uint8)
    return memory, len(cmd.data)


def host_buffer(dev, data: np.ndarray):
    mem = dev.allocator.alloc(data.nbytes)
    dev.allocator.copyin(mem, memoryview(np.ascontiguousarray(data)).cast("B"))
    return mem


def read(dev, mem, dtype, count):
    out = np.zeros(count, dtype)
    dev.allocator.copyout(memoryview(out).cast("B"), mem)
    return out


@pytest.mark.parametrize(("words", "message"), [
    ([2 << 30], "type-2 packet"),
    ([pm4.header(0x99, 1), 0], "unknown PM4 opcode 0x99"),
    ([pm4.header(0x15, 4), 1, 1], "DISPATCH_DIRECT at .*stream ends"),
    ([pm4.header(0x49, 3), 0, 0, 0], "RELEASE_MEM at .*7 body dwords, this one has 3"),
    ([pm4.header(0x76, 1), 0x20C], "SET_SH_REG at .*at least one value"),
    ([*pm4.dispatch_direct((1, 1, 1))], "DISPATCH_DIRECT at .*COMPUTE_PGM_HI was never set"),
    ([pm4.header(0x3F, 3), 0x1000, 0, 4], "INDIRECT_BUFFER at .*VALID bit"),
])
def test_compute_queue_rejects_malformed_packets(dev, words, message):
    with pytest.raises(MalformedPacketError, match=message):
        submit(dev, raw(words), QueueKind.COMPUTE)


@pytest.mark.parametrize(("words", "message"), [
    ([3], "SDMA opcode 3"),
    ([1 | 4 << 8, 0, 0, 0, 0, 0, 0], "COPY at .*sub-op 4"),
    ([5, 0, 0], "FENCE at .*doorbell ends the stream"),
    ([8 | 5 << 28, 0, 0, 0, 0, 0], "POLL_REGMEM at .*register polls"),
])
def test_sdma_queue_rejects_malformed_packets(dev, words, message):
    with pytest.raises(MalformedPacketError, match=message):
        submit(dev, raw(words), QueueKind.COPY)


def test_sdma_copy_is_bit_exact(dev, rng):
    for nbytes in (1, 3, 4096, 12345):
        src = rng.integers(0, 256, nbytes, dtype=np.uint8)
        a, b = host_buffer(dev, src), dev.allocator.alloc(nbytes + 64)
        copy(dev, b.va + 17, a.va, nbytes)
        got = read(dev, b, np.uint8, nbytes + 64)
        assert (got[17:17 + nbytes] == src).all() and not got[:17].any() and not got[17 + nbytes:].any()


def test_sdma_ring_wraps_with_nop_padding(dev, rng):
    data = rng.integers(0, 256, 256, dtype=np.uint8)
    a, b = host_buffer(dev, data), dev.allocator.alloc(256)
    for _ in range(200):  # 200 submits of 18 dwords wrap a 1024-dword ring several times
        copy(dev, b.va, a.va, 256, wait=False)
    dev.synchronize()
    assert (read(dev, b, np.uint8, 256) == data).all()
    assert dev.copy_queue.put > 4 * len(dev.copy_queue.desc.ring)


def test_compute_waits_for_a_signal_the_copy_queue_sets(dev):
    gate, done = dev.new_signal(), dev.new_signal()
    q = CommandBuffer()
    q.emit(pm4.wait_reg_mem(gate.address, 5))
    q.emit(pm4.release_mem(done.address, 42, 1))
    submit(dev, q, QueueKind.COMPUTE)
    assert done.value == 0, "the compute queue must stall on the gate"
    assert "stalled at WAIT_REG_MEM" in dev.driver.queue_state(dev.compute.desc)
    submit(dev, AMDCopyQueue().signal(gate.address, 4).cmd, QueueKind.COPY)
    assert done.value == 0, "4 is below the awaited 5"
    submit(dev, AMDCopyQueue().signal(gate.address, 5).cmd, QueueKind.COPY)
    assert done.value == 42


def test_host_written_signal_unblocks_a_queue(dev):
    gate, done = dev.new_signal(), dev.new_signal()
    q = AMDCopyQueue().wait(gate.address, 1).signal(done.address, 7)
    submit(dev, q.cmd, QueueKind.COPY)
    assert done.value == 0
    gate.value = 1
    dev.wait(done, 7, timeout_ms=1000)
    assert done.value == 7


def test_hung_queue_gives_a_clear_error(dev):
    never = dev.new_signal()
    q = CommandBuffer()
    q.emit(pm4.wait_reg_mem(never.address, 1))
    q.emit(pm4.release_mem(dev.timeline.address, dev.next_timeline(), 1))
    submit(dev, q, QueueKind.COMPUTE)
    with pytest.raises(QueueHangError, match=r"waited 20 ms .*COMPUTE queue .*stalled at WAIT_REG_MEM"):
        dev.synchronize(timeout_ms=20)


def test_timestamps_are_monotonic(dev):
    first, second = dev.new_signal(), dev.new_signal()
    submit(dev, AMDCopyQueue().timestamp(first.timestamp_address).cmd, QueueKind.COPY)
    q = CommandBuffer()
    q.emit(pm4.release_mem(second.timestamp_address, 0, 3))
    submit(dev, q, QueueKind.COMPUTE)
    assert 0 < first.timestamp <= second.timestamp


def test_unmapped_and_freed_memory_fault(dev):
    src = dev.allocator.alloc(64)
    with pytest.raises(GPUFaultError, match="not mapped"):
        submit(dev, raw(sdma.copy(0xDEAD_0000, src.va, 64)), QueueKind.COPY)
    kfd = MockKFD()
    kfd.acquire_vm()
    mem = kfd.alloc(100)
    assert mem.size == 0x1000
    kfd.free(mem)
    with pytest.raises(KFDError, match="not mapped"):
        kfd.bytes_at(mem.va, 4)
    with pytest.raises(KFDError, match="double free"):
        kfd.free(mem)


def test_mock_kfd_needs_acquire_vm_first():
    with pytest.raises(KFDError, match="acquire_vm"):
        MockKFD().alloc(16)


def test_indirect_buffers_do_not_nest(dev):
    inner, inner_bytes = bind(dev, raw(pm4.nop()))
    outer, outer_bytes = bind(dev, raw(pm4.indirect_buffer(inner.va, inner_bytes // 4)))
    with pytest.raises(MalformedPacketError, match="INDIRECT_BUFFER at .*IB .*do not nest"):
        dev.submit_commands(COMPUTE, outer, 0, outer_bytes)


def test_indirect_buffer_runs_its_packets(dev):
    done = dev.new_signal()
    memory, nbytes = bind(dev, raw([*pm4.nop(3), *pm4.release_mem(done.address, 77, 1)]))
    dev.submit_commands(COMPUTE, memory, 0, nbytes)
    assert done.value == 77


def test_a_broken_queue_stops_and_says_why(dev):
    with pytest.raises(MalformedPacketError):
        submit(dev, raw([pm4.header(0x99, 1), 0]), QueueKind.COMPUTE)
    with pytest.raises(GPUFaultError, match="stopped after an earlier error .*unknown PM4 opcode 0x99"):
        submit(dev, raw(pm4.nop()), QueueKind.COMPUTE)
    done = dev.new_signal()
    submit(dev, AMDCopyQueue().signal(done.address, 3).cmd, QueueKind.COPY)  # the other queue still works
    assert done.value == 3


# the compare functions of WAIT_REG_MEM / POLL_REGMEM (pm4_nv.h PACKET3_WAIT_REG_MEM__FUNCTION__*), restated as an oracle
ORACLE = {0: lambda v, r: True, 1: lambda v, r: v < r, 2: lambda v, r: v <= r, 3: lambda v, r: v == r, 4: lambda v, r: v != r,
          5: lambda v, r: v >= r, 6: lambda v, r: v > r}


@settings(max_examples=40, derandomize=True)
@given(st.sampled_from(sorted(ORACLE)), st.integers(0, 0xFFFFFFFF), st.integers(0, 0xFFFFFFFF), st.sampled_from([0xFFFFFFFF, 0xFF, 0xF0F0]),
       st.sampled_from([QueueKind.COMPUTE, QueueKind.COPY]))
def test_waits_pass_exactly_when_the_compare_holds(function, value, reference, mask, kind):
    device = AMDDevice("MOCKAMD", ring_size=0x1000)
    gate, done = device.new_signal(value), device.new_signal()
    if kind is QueueKind.COMPUTE:
        words = [*pm4.wait_reg_mem(gate.address, reference, mask=mask, function=function), *pm4.release_mem(done.address, 1, 1)]
    else:
        words = [*sdma.poll_regmem(gate.address, reference, mask=mask, function=function), *sdma.fence(done.address, 1)]
    submit(device, raw(words), kind)
    assert done.value == int(ORACLE[function](value & mask, reference))


def test_interrupts_fire_kfd_events(dev):
    kfd = dev.driver
    event, mailbox = kfd.create_event()
    assert not kfd.wait_event(event, timeout_ms=0)
    submit(dev, raw(pm4.release_mem(mailbox, event, 1, int_sel=2, ctxid=event)), QueueKind.COMPUTE)
    assert kfd.wait_event(event, timeout_ms=0) and not kfd.wait_event(event, timeout_ms=0)  # fired once, then auto-reset
    assert int(kfd.bytes_at(mailbox, 4).view(np.uint32)[0]) == event
    submit(dev, raw(sdma.trap(event)), QueueKind.COPY)
    assert kfd.wait_event(event, timeout_ms=0)


# gfx9 (CDNA) packet forms, restated from pm4_soc15.h / gfx_v9_0.c and sdma_4_0_0: ACQUIRE_MEM has 6 body dwords
# (CP_COHER_CNTL first), RELEASE_MEM flushes with EOP TC action bits, DISPATCH_INITIATOR has no CS_W32_EN, FENCE no MTYPE
GFX9_ACQUIRE = [pm4.header(0x58, 6), 1 << 29 | 1 << 27 | 1 << 22, 0xFFFFFFFF, 0xFFFFFF, 0, 0, 0xA]
GFX10_ACQUIRE = [pm4.header(0x58, 7), 0, 0xFFFFFFFF, 0xFFFFFF, 0, 0, 0xA, 0x3F1]


@pytest.fixture
def cdna():
    device = AMDDevice("MOCKAMD:gfx940", ring_size=0x1000)
    yield device
    device.close()


def test_cdna_queue_runs_the_gfx9_forms(cdna):
    done, copied = cdna.new_signal(), cdna.new_signal()
    queue = AMDComputeQueue(cdna.target)
    queue.cmd.emit(queue.memory_barrier())
    queue.timestamp(done.timestamp_address).signal(done.address, 9)
    words = queue.cmd.words
    assert words[:2] == GFX9_ACQUIRE[:2] and words[6] == 0xA  # header, CP_COHER_CNTL (I, K, TCL1 caches), poll interval
    submit(cdna, queue.cmd, QueueKind.COMPUTE)
    submit(cdna, AMDCopyQueue(cdna.target).wait(done.address, 9).signal(copied.address, 4).cmd, QueueKind.COPY)
    assert (done.value, copied.value) == (9, 4) and done.timestamp > 0


@pytest.mark.parametrize(("words", "kind", "message"), [
    (GFX10_ACQUIRE, QueueKind.COMPUTE, "ACQUIRE_MEM at .*a gfx9 ACQUIRE_MEM has 6 body dwords, this one has 7"),
    (pm4.release_mem(0x1000, 1, 1, cache_flush=True), QueueKind.COMPUTE, "RELEASE_MEM at .*gfx10\\+ GCR controls"),
    (pm4.dispatch_direct((1, 1, 1), wave32=True), QueueKind.COMPUTE, "DISPATCH_DIRECT at .*CS_W32_EN .* reserved on gfx9"),
    (sdma.fence(0x1000, 1), QueueKind.COPY, "FENCE at .*no MTYPE"),
])
def test_cdna_queue_rejects_gfx10_forms(cdna, words, kind, message):
    with pytest.raises(MalformedPacketError, match=message):
        submit(cdna, raw(words), kind)


def test_rdna_queue_rejects_the_gfx9_acquire(dev):
    with pytest.raises(MalformedPacketError, match="a gfx10\\+ ACQUIRE_MEM has 7 body dwords, this one has 6"):
        submit(dev, raw(GFX9_ACQUIRE), QueueKind.COMPUTE)


@pytest.mark.parametrize(("name", "target"), [("MOCKAMD:gfx90a", (9, 0, 10)), ("MOCKAMD:gfx940:1", (9, 4, 0)), ("MOCKAMD:3", (11, 0, 0)),
                                              ("mockamd:GFX1201", (12, 0, 1))])
def test_mock_device_names_pick_the_target(name, target):
    assert open_driver(name).target == target


def test_mockamd_arch_sets_the_default_target(monkeypatch):
    monkeypatch.setenv("MOCKAMD_ARCH", "gfx90a")
    assert open_driver("MOCKAMD").target == (9, 0, 10) and open_driver("MOCKAMD:gfx1100").target == (11, 0, 0)


@pytest.mark.parametrize(("name", "message"), [("MOCKAMD:gfx1030", "cannot run gfx1030: .*gfx90a"), ("MOCKAMD:gfxzz", "not a gfx target name"),
                                               ("MOCKAMD:gfx803", "cannot run gfx803")])
def test_mock_refuses_targets_it_cannot_run(name, message):
    with pytest.raises(AMDError, match=message):
        open_driver(name)
