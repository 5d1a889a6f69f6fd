"""Batch timestamps on MOCKAMD and MOCKQCOM: with PROFILE=1 (or DEBUG=2) every kernel and copy of a batch is timed by
the device clock, which the mocks advance by the work they emulate. Results against numpy; device times against the
mocks' clocks and cost constants; encodings against a packet walk of the command words."""

import re

import numpy as np
import pytest
from hcq_runtime import AMDCompiler, CompileError, Device, buffer_for, compile_body, link_linear, run_linear
from hcq_runtime.amd import mock_gpu as amd_mock
from hcq_runtime.amd import regs
from hcq_runtime.hcq2 import COMPUTE
from hcq_runtime.hcq2.encode import describe, encode
from hcq_runtime.qcom import mock_gpu as qcom_mock
from hcq_runtime.qcom import packets as pk
from kernel_asts import call, scale_add
from uopir import Ops, UOp, dtypes

try:
    AMDCompiler("gfx1100")
except CompileError:
    pytest.skip("clang-15 and ld.lld-15 are needed to build AMD kernels", allow_module_level=True)

SMALL, BIG = 32, 2048
DEVICES = ["MOCKAMD", "MOCKQCOM"]




def new(device: str, data: np.ndarray | None = None, n: int = BIG) -> UOp:
    buf = UOp.new_buffer(device, n, dtypes.float32)
    if data is not None:
        buffer_for(buf).copyin(data)
    return buf


def two_kernels(device: str, first: int = SMALL, second: int = BIG):
    """tmp = 2a + 1 over the first `first` items, then out = 3 tmp + a over `second`; returns the LINEAR, a and out."""
    # tmp starts at zero: the second kernel reads all of it, the first writes only `first` items
    a, ones = new(device, np.arange(BIG, dtype=np.float32)), new(device, np.ones(BIG, np.float32))
    tmp, out = new(device, np.zeros(BIG, np.float32)), new(device)
    calls = (call(scale_add(first, 2.0), tmp, a, ones), call(scale_add(second, 3.0), out, tmp, a))
    return UOp(Ops.LINEAR, dtypes.void, calls), a, out


def names(device: str, lin: UOp) -> list[str]:
    return [compile_body(c.src[0], device).info.function_name for c in lin.src]


def work_ns(device: str) -> float:
    """Nanoseconds of work the device's mock clock has counted so far."""
    dev = Device[device]
    return dev.driver.gpu.clock * 10 if device == "MOCKAMD" else dev.file.cp.elapsed_ns


def min_dispatch_us(device: str) -> float:
    """The least device time a dispatch takes: the mock's launch cost (less a tick of QCOM's truncated counter)."""
    if device == "MOCKAMD":
        return amd_mock.DISPATCH_TICKS / 100
    return (qcom_mock.DISPATCH_NS * qcom_mock.TICKS_PER_NS - 1) / 19.2


@pytest.fixture
def profile(monkeypatch):
    monkeypatch.setenv("PROFILE", "1")
    monkeypatch.delenv("DEBUG", raising=False)


@pytest.mark.parametrize("device", DEVICES)
def test_eager_batch_times_each_kernel_in_order(device, profile):
    lin, _, out = two_kernels(device)
    events = Device[device].profile_events()
    before, clock = len(events), work_ns(device)
    run_linear(lin)
    x = np.arange(BIG, dtype=np.float32)
    tmp = np.concatenate([2 * x[:SMALL] + 1, np.zeros(BIG - SMALL, np.float32)])
    np.testing.assert_array_equal(buffer_for(out).numpy(), 3 * tmp + x)
    got = events[before:]
    assert [e.name for e in got] == names(device, lin) and {e.device for e in got} == {device}
    assert all(e.start_us < e.end_us and e.duration_us >= min_dispatch_us(device) for e in got)
    assert got[0].end_us <= got[1].start_us
    assert sum(e.duration_us for e in got) <= (work_ns(device) - clock) / 1000 + 1 / 19.2  # within the batch's work


@pytest.mark.parametrize("device", DEVICES)
def test_a_kernel_with_more_work_takes_longer(device, profile):
    for first, second in ((SMALL, BIG), (BIG, SMALL)):  # either order: the time follows the work, not the position
        run_linear(two_kernels(device, first, second)[0])
        one, two = Device[device].profile_events()[-2:]
        assert (one.duration_us < two.duration_us) == (first < second)


@pytest.mark.parametrize("device", DEVICES)
def test_jit_replays_record_events_every_call(device, profile):
    lin, a, out = two_kernels(device, SMALL, SMALL)
    linked = link_linear(lin, [a, out])
    events = Device[device].profile_events()
    before = len(events)
    x = np.ones(BIG, np.float32)
    for _ in range(3):
        result = buffer_for(new(device)).ensure_allocated()
        linked([buffer_for(new(device, x)), result])
        np.testing.assert_array_equal(result.numpy()[:SMALL], 3 * (2 * x[:SMALL] + 1) + x[:SMALL])
    got = events[before:]
    assert [e.name for e in got] == names(device, lin) * 3
    assert all(e.start_us < e.end_us for e in got)
    assert all(prev.end_us <= nxt.start_us for prev, nxt in zip(got, got[1:]))


def test_copies_on_the_copy_queue_are_timed(profile):
    lin, _, out = two_kernels("MOCKAMD", SMALL, SMALL)
    moved = new("MOCKAMD")
    copy = call(UOp(Ops.COPY, dtypes.float32, (), "MOCKAMD"), moved, out)
    run_linear(UOp(Ops.LINEAR, dtypes.void, (*lin.src, copy)))
    got = Device["MOCKAMD"].profile_events()[-3:]
    assert [e.name for e in got] == [*names("MOCKAMD", lin), f"copy {BIG * 4} bytes"]
    assert got[1].end_us <= got[2].start_us  # the copy reads the second kernel's output
    assert got[2].duration_us >= BIG * 4 / amd_mock.COPY_BYTES_PER_TICK / 100
    np.testing.assert_array_equal(buffer_for(moved).numpy(), buffer_for(out).numpy())


LINE = re.compile(r"^\*\*\* (\S+) +(\d+\.\d) us on (\S+)$", re.M)


@pytest.mark.parametrize("device", DEVICES)
def test_debug2_prints_a_line_per_kernel(device, monkeypatch, capsys):
    monkeypatch.delenv("PROFILE", raising=False)
    monkeypatch.setenv("DEBUG", "2")
    lin, a, out = two_kernels(device)
    events = Device[device].profile_events()
    linked = link_linear(lin, [a, out])
    for run in (lambda: run_linear(lin), lambda: linked([buffer_for(a), buffer_for(out)])):  # eager, then a replay
        run()
        lines = LINE.findall(capsys.readouterr().out)
        assert lines == [(e.name, f"{e.duration_us:.1f}", device) for e in events[-2:]]
        assert [name for name, _, _ in lines] == names(device, lin)


def timestamp_packets(device: str, words: list[int]) -> int:
    """How many timestamp packets a command stream holds, walking it packet by packet: RELEASE_MEM of the GPU clock
    (PM4, AMD), CP_REG_TO_MEM (QCOM)."""
    found, at = 0, 0
    release_mem = next(op for op, name in regs.PM4_OPCODES.items() if name == "RELEASE_MEM")
    while at < len(words):
        head = words[at]
        if device == "MOCKAMD":
            opcode, count = (head >> regs.PM4_OPCODE_SHIFT) & 0xFF, ((head >> regs.PM4_COUNT_SHIFT) & regs.PM4_COUNT_MASK) + 1
            found += opcode == release_mem and (words[at + 2] >> regs.RELEASE_DATA_SEL_SHIFT) & 7 == regs.DATA_SEL_GPU_CLOCK
        elif head >> 28 == pk.TYPE7:
            opcode, count = (head >> 16) & 0x7F, head & pk.PKT7_MAX_COUNT
            found += opcode == pk.CP_REG_TO_MEM
        else:
            count = head & pk.PKT4_MAX_COUNT
        at += 1 + count
    return found


@pytest.mark.parametrize("device", DEVICES)
def test_without_profiling_nothing_is_encoded(device, monkeypatch):
    monkeypatch.delenv("PROFILE", raising=False)
    monkeypatch.delenv("DEBUG", raising=False)
    lin, _, _ = two_kernels(device)
    plain, timed = describe(lin.src, {}), describe(lin.src, {}, profile=True)
    assert not plain.profile and plain.key != timed.key
    plain_queue, timed_queue = encode(plain).queues[0], encode(timed).queues[0]
    assert (plain_queue.stamps, plain_queue.timed) == (0, [])
    assert timestamp_packets(device, plain_queue.cmds.words) == 0
    assert timestamp_packets(device, timed_queue.cmds.words) == timed_queue.stamps == 3  # before, between, after
    stamp_bytes = len(Device[device].hw_queue(COMPUTE).timestamp(0).cmd)
    assert len(timed_queue.cmds) - len(plain_queue.cmds) == 3 * stamp_bytes
    events = Device[device].profile_events()
    before = len(events)
    run_linear(lin)
    assert len(events) == before


def test_profiling_a_cdna_target_times_kernels_and_traces_them_in_the_cdna_layout(profile):
    # under PROFILE=1 a CDNA device times its kernels and records each dispatch's SQTT trace in the CDNA layout
    from amd_isa import sqtt

    device = "MOCKAMD:gfx940"
    lin, _, out = two_kernels(device)
    run_linear(lin)
    x = np.arange(BIG, dtype=np.float32)
    np.testing.assert_array_equal(buffer_for(out).numpy()[:SMALL], 3 * (2 * x[:SMALL] + 1) + x[:SMALL])
    assert [e.name for e in Device[device].profile_events()[-2:]] == names(device, lin)
    traces = Device[device].profile_traces()
    assert [t.name for t in traces[-2:]] == names(device, lin)
    for trace in traces[-2:]:
        kinds = [p.name for p in sqtt.decode(trace.sqtt, "gfx940")]
        assert kinds[0] == "LAYOUT_HEADER" and "CDNA_WAVESTART" in kinds and "CDNA_ISSUE" in kinds and "CDNA_WAVEEND" in kinds


def test_traces_follow_profile_when_each_kernel_is_dispatched(monkeypatch):
    # a GPU opened before PROFILE was set traces once it is set, and stops when it is unset (it had read PROFILE
    # only when opened, so whether a test saw traces depended on which test opened the device first)
    device = "MOCKAMD:gfx940"
    monkeypatch.delenv("DEBUG", raising=False)
    monkeypatch.delenv("PROFILE", raising=False)
    lin, _, _ = two_kernels(device)
    run_linear(lin)
    gpu = Device[device].driver.gpu
    before = len(gpu.traces)
    run_linear(lin)
    assert len(gpu.traces) == before
    monkeypatch.setenv("PROFILE", "1")
    run_linear(lin)
    assert [t.name for t in Device[device].profile_traces()[-2:]][0].startswith(names(device, lin)[0])
    assert len(gpu.traces) == before + 2
