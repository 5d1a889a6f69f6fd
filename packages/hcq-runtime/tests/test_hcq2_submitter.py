"""The compiled submitter: replays of linked batches patch and submit from one native call, on MOCKAMD (ring writes
and doorbell stores the mock GPU picks up) and MOCKQCOM (ioctl through a C function pointer into the mock kgsl).
Results against numpy; patches against `CommandBuffer.patch` (struct.pack)."""

import ctypes

import numpy as np
import pytest
from hcq_runtime import AMDCompiler, CompileError, Device, buffer_for, link_linear
from hcq_runtime.amd import AMDDevice
from hcq_runtime.hcq2 import CommandBuffer, PatchError, Submitter, runtime
from hcq_runtime.qcom import KGSLError, MockKGSL, QCOMDevice
from kernel_asts import call, scale_add
from uopir import Ops, UOp, dtypes

N = 64




def copy(dst: UOp, src: UOp) -> UOp:
    return call(UOp(Ops.COPY, dst.arg.dtype, (), dst.arg.device), dst, src)


def new(device: str, data: np.ndarray | None = None) -> UOp:
    buf = UOp.new_buffer(device, N, dtypes.float32)
    if data is not None:
        buffer_for(buf).copyin(data)
    return buf


def step(device: str, with_copy: bool = False):
    """out = 3 * (2a + 1) + a through an owned temporary (and, `with_copy`, a device copy on the COPY queue); inputs a, out."""
    a, ones, tmp, out = new(device), new(device, np.ones(N, np.float32)), new(device), new(device)
    calls = [call(scale_add(N, 2.0), tmp, a, ones)]
    if with_copy:
        moved = new(device)
        calls += [copy(moved, tmp)]
        tmp = moved
    calls += [call(scale_add(N, 3.0), out, tmp, a)]
    return link_linear(UOp(Ops.LINEAR, dtypes.void, tuple(calls)), [a, out]), a


def expected(x: np.ndarray) -> np.ndarray:
    return 3 * (2 * x + 1) + x


@pytest.fixture
def python_submits(monkeypatch):
    """How many submits went through the Python `submit_commands` of any queue device."""
    counts = {"n": 0}
    for cls in (AMDDevice, QCOMDevice):
        original = cls.submit_commands

        def counted(self, *args, original=original):
            counts["n"] += 1
            return original(self, *args)

        monkeypatch.setattr(cls, "submit_commands", counted)
    return counts


@pytest.fixture(scope="module")
def amd():
    try:
        AMDCompiler("gfx1100")
    except CompileError:
        pytest.skip("clang-15 and ld.lld-15 are needed to build AMD kernels")
    return Device["MOCKAMD"]


@pytest.fixture(scope="module")
def small_rings(amd):
    """A MOCKAMD device whose rings hold 1024 dwords, so replays wrap them quickly (one for the module: the engine's
    encode cache holds programs loaded on it)."""
    dev = AMDDevice("MOCKAMD:15", ring_size=0x1000)
    Device._opened["MOCKAMD:15"] = dev
    yield dev
    del Device._opened["MOCKAMD:15"]


def test_a_mockamd_replay_is_one_compiled_call_whose_doorbell_the_mock_gpu_picks_up(amd, python_submits, rng):
    linked, a = step("MOCKAMD")
    x, out = (buffer_for(new("MOCKAMD", v)) for v in (rng.standard_normal(N, dtype=np.float32), None))
    gpu, queue = amd.driver.gpu, amd.compute.desc
    for _ in range(3):
        amd.synchronize()
        dispatches, put = gpu.dispatches, queue.write_ptr[0]
        linked([x, out])
        assert queue.write_ptr[0] == put + 4, "one INDIRECT_BUFFER packet on the ring"
        assert amd.driver.doorbells[queue.queue_id] == queue.write_ptr[0], "the doorbell holds the new write pointer"
        assert gpu.dispatches == dispatches, "a store into the doorbell page runs nothing until the host waits"
        np.testing.assert_allclose(out.numpy(), expected(x.numpy()), rtol=1e-6)
        assert gpu.dispatches == dispatches + 2
    assert python_submits["n"] == 0


def test_a_mockqcom_replay_issues_the_ioctl_from_compiled_code(python_submits, rng):
    dev = Device["MOCKQCOM"]
    linked, _ = step("MOCKQCOM")
    for _ in range(3):
        x, out = (buffer_for(new("MOCKQCOM", v)) for v in (rng.standard_normal(N, dtype=np.float32), None))
        before = dev.file.calls.count("GPU_COMMAND")
        linked([x, out])
        assert dev.file.calls.count("GPU_COMMAND") == before + 1
        assert dev.last_timestamp == dev.file.contexts[dev.ctx], "the compiled code keeps the timestamp kgsl returned"
        np.testing.assert_allclose(out.numpy(), expected(x.numpy()), rtol=1e-6)
    assert python_submits["n"] == 0


def test_rings_wrap_over_many_replays(small_rings, rng):
    linked, _ = step(small_rings.name, with_copy=True)
    x = rng.standard_normal(N, dtype=np.float32)
    a, out = buffer_for(new(small_rings.name, x)), buffer_for(new(small_rings.name))
    queues = (small_rings.compute, small_rings.copy_queue)
    start = [q.put for q in queues]
    for i in range(300):
        if i % 100 == 0:
            out.copyin(np.zeros(N, np.float32))
        linked([a, out])
        if i % 100 == 99:
            np.testing.assert_allclose(out.numpy(), expected(x), rtol=1e-6)
    ring = len(small_rings.compute.desc.ring)
    assert queues[0].put - start[0] > ring and (queues[1].put - start[1]) // 4 > ring, "both rings wrapped"
    np.testing.assert_allclose(out.numpy(), expected(x), rtol=1e-6)


def test_a_full_ring_makes_room_and_resumes_at_the_part_that_did_not_fit(small_rings, rng, monkeypatch):
    steps = [step(small_rings.name, with_copy=True)[0] for _ in range(48)]
    rooms = []
    original = AMDDevice.make_room
    monkeypatch.setattr(AMDDevice, "make_room", lambda self, kind: (rooms.append(kind), original(self, kind)))
    xs = [rng.standard_normal(N, dtype=np.float32) for _ in steps]
    outs = [buffer_for(new(small_rings.name)) for _ in steps]
    ins = [buffer_for(new(small_rings.name, x)) for x in xs]
    for linked, a, out in zip(steps, ins, outs):
        linked([a, out])  # no waits in between: the mock GPU runs nothing until a ring is full
    assert "COPY" in rooms
    for x, out in zip(xs, outs):
        np.testing.assert_allclose(out.numpy(), expected(x), rtol=1e-6)


def test_a_refused_ioctl_raises_the_mock_kgsl_error_and_leaves_the_device_usable(monkeypatch):
    dev = Device["MOCKQCOM"]
    x, out = buffer_for(new("MOCKQCOM", np.ones(N, np.float32))), buffer_for(new("MOCKQCOM"))
    with monkeypatch.context() as patched:
        patched.setattr(dev, "ctx", 0)  # the context id is a device variable the submitter takes at link
        broken, _ = step("MOCKQCOM")
    timeline = dev.timeline_value
    with pytest.raises(KGSLError, match="GPU_COMMAND: context 0 does not exist"):
        broken([x, out])
    assert dev.timeline_value == timeline, "nothing was submitted: the timeline stays"
    step("MOCKQCOM")[0]([x, out])
    np.testing.assert_allclose(out.numpy(), expected(x.numpy()), rtol=1e-6)


def test_the_real_ioctl_path_is_the_same_code_with_libc(monkeypatch):
    """libc's ioctl in place of the mock's callback: the generated call reaches the kernel, which refuses the mock's fd."""
    libc_ioctl = ctypes.cast(ctypes.CDLL(None).ioctl, ctypes.c_void_p).value
    monkeypatch.setattr(MockKGSL, "ioctl_address", property(lambda self: libc_ioctl))
    linked, _ = step("MOCKQCOM")
    x, out = buffer_for(new("MOCKQCOM", np.ones(N, np.float32))), buffer_for(new("MOCKQCOM"))
    with pytest.raises(KGSLError, match="GPU_COMMAND failed: Bad file descriptor"):
        linked([x, out])
    Device["MOCKQCOM"].synchronize()  # the failed run took no timeline value


def test_compiled_patches_write_what_commandbuffer_patch_writes(rng):
    cmd = CommandBuffer()
    names = [f"s{i}" for i in range(3)]
    for i in range(24):
        width, shift = (4, 8) if i % 3 == 0 else (8, 0) if i % 3 == 1 else (4, 0)
        add = int(rng.integers(-(1 << 12), 1 << 12))
        cmd.emit([int(rng.integers(0, 1 << 32)), (runtime(names[i % 3], width) + add) >> shift])
    values = {"s0": 0xAB_0000_1234, "s1": (1 << 63) + 77, "s2": 0x7000_0000}
    oracle = CommandBuffer()
    oracle.data, oracle.patches = bytearray(cmd.data), cmd.patches
    oracle.patch(values)
    memory = np.zeros(len(cmd.data) + 8, np.uint8)
    memory[4:4 + len(cmd.data)] = np.frombuffer(bytes(cmd.data), np.uint8)
    submitter = Submitter([(memory.ctypes.data + 4, p) for p in cmd.patches], [], {name: i for i, name in enumerate(names)})
    assert submitter(np.array([values[n] for n in names], np.uint64)) == 24
    assert bytes(memory[4:4 + len(cmd.data)]) == bytes(oracle.data)


def test_a_value_that_does_not_fit_its_32_bit_word_is_a_patch_error():
    cmd = CommandBuffer()
    cmd.emit([runtime("timeline:X"), runtime("input:0", 8)])
    memory = np.zeros(len(cmd.data), np.uint8)
    with pytest.raises(PatchError, match="'input:0'"):
        Submitter([(memory.ctypes.data, p) for p in cmd.patches], [], {"timeline:X": 0})
    submitter = Submitter([(memory.ctypes.data, p) for p in cmd.patches], [], {"timeline:X": 0, "input:0": 1})
    with pytest.raises(PatchError, match=r"'timeline:X' = 0x100000000 does not fit the 32-bit command word at byte 0"):
        submitter(np.array([1 << 32, 5], np.uint64))
    assert submitter(np.array([7, 1 << 40], np.uint64)) == 2
    assert list(memory.view(np.uint32)) == [7, 0, 1 << 8]
