import numpy as np
import pytest
from hcq_runtime import AllocationError, Buffer, Device, numpy_dtype


def test_copyin_copyout_round_trip(f32, rng):
    data = rng.standard_normal(1000).astype(np.float32)
    buf = Buffer("CPU", 1000, f32)
    assert not buf.is_allocated  # lazy
    buf.copyin(data)
    assert buf.is_allocated
    np.testing.assert_array_equal(buf.numpy(), data)
    assert buf.address % 64 == 0


@pytest.mark.parametrize("device", ["CPU", "MOCKAMD"])
def test_copyin_of_a_strided_array_copies_it_in_order(f32, rng, device):
    """A transposed or sliced array is copied in row-major order of its own shape (straight into host-addressed
    memory on the CPU, through a contiguous copy elsewhere); a view of a buffer is written only in its range."""
    data = rng.standard_normal((6, 5)).astype(np.float32)
    for strided in (data.T, data[::2, 1:], data[:, ::-1].T[1:4]):
        buf = Buffer(device, strided.size, f32).copyin(strided)
        np.testing.assert_array_equal(buf.numpy(), strided.reshape(-1))
    base = Buffer("CPU", 10, f32).copyin(np.zeros(10, np.float32))
    base.view(4, f32, offset=8).copyin(data[:2, :2].T)
    np.testing.assert_array_equal(base.numpy(), [0, 0, *data[:2, :2].T.reshape(-1), 0, 0, 0, 0])


def test_copyin_size_mismatch_is_an_error(f32):
    with pytest.raises(AllocationError, match="copyin of 8 bytes into a buffer of 16 bytes"):
        Buffer("CPU", 4, f32).copyin(b"\0" * 8)


def test_view_shares_memory_at_offset(f32):
    base = Buffer("CPU", 8, f32).copyin(np.arange(8, dtype=np.float32))
    view = base.view(3, f32, offset=8)
    np.testing.assert_array_equal(view.numpy(), [2, 3, 4])
    view.copyin(np.array([-1, -2, -3], dtype=np.float32))
    np.testing.assert_array_equal(base.numpy(), [0, 1, -1, -2, -3, 5, 6, 7])
    assert view.address == base.address + 8
    with pytest.raises(AllocationError, match="does not fit"):
        base.view(4, f32, offset=20)


def test_numpy_of_a_type_numpy_lacks_is_raw_bits(bf16):
    buf = Buffer("CPU", 2, bf16).copyin(np.array([0x3F80, 0xC000], dtype=np.uint16))
    assert numpy_dtype(bf16) == np.uint16
    np.testing.assert_array_equal(buf.numpy(), [0x3F80, 0xC000])


def test_freed_memory_is_reused_by_the_lru_allocator(f32):
    dev = Device["CPU:3"]
    dev.allocator.free_cache()
    first = Buffer("CPU:3", 123, f32).ensure_allocated()
    address = first.address
    del first
    assert Buffer("CPU:3", 123, f32).ensure_allocated().address == address
    assert Buffer("CPU:3", 124, f32).ensure_allocated().address != address


def test_cpu_devices_have_separate_allocations(f32):
    assert Device["CPU"] is not Device["CPU:1"]
    assert Device["CPU:0"] is Device["CPU"]
    a = Buffer("CPU:1", 4, f32).copyin(np.ones(4, np.float32))
    b = Buffer("CPU:2", 4, f32).copyin(np.zeros(4, np.float32))
    assert a.allocator is not b.allocator
    np.testing.assert_array_equal(a.numpy(), 1)


def test_disk_buffer_persists_to_the_file(tmp_path, f32):
    path = tmp_path / "weights.bin"
    data = np.arange(16, dtype=np.float32)
    Buffer(f"DISK:{path}", 16, f32).copyin(data)
    Device[f"DISK:{path}"].synchronize()
    np.testing.assert_array_equal(np.fromfile(path, dtype=np.float32), data)
    view = Buffer(f"DISK:{path}", 16, f32).view(4, f32, offset=16)
    np.testing.assert_array_equal(view.numpy(), [4, 5, 6, 7])


def test_fresh_buffers_are_poisoned_in_debug_mode(monkeypatch):
    from uopir import dtypes

    monkeypatch.setenv("UOP_POISON", "1")
    assert np.isnan(Buffer("CPU", 4, dtypes.float32).ensure_allocated().numpy()).all()
    assert (Buffer("CPU", 3, dtypes.int32).ensure_allocated().numpy() == np.int32(-1515870811)).all()  # 0xA5A5A5A5
    assert np.isnan(Buffer("CPU", 2, dtypes.float16).ensure_allocated().numpy()).all()
    monkeypatch.setenv("UOP_POISON", "0")
    monkeypatch.setenv("DEBUG", "1")
    from hcq_runtime.buffer import poison_enabled

    assert not poison_enabled()
    monkeypatch.delenv("UOP_POISON")
    assert poison_enabled()
    monkeypatch.setenv("DEBUG", "0")
    assert not poison_enabled()


def test_mem_used_counts_allocated_device_memory(f32, tmp_path):
    import gc

    from hcq_runtime import counters

    start = counters.mem_used
    buf = Buffer("CPU", 1000, f32)
    assert counters.mem_used == start  # lazy: nothing allocated yet
    buf.ensure_allocated()
    view = buf.view(10, f32, offset=40)
    view.ensure_allocated()
    assert counters.mem_used == start + 4000  # a view shares its base's memory
    counters.reset()  # resets what ran, not what is held
    assert counters.mem_used == start + 4000
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(64))
    Buffer(f"DISK:{path}", 16, f32).ensure_allocated()  # a file's mapping is no device memory
    assert counters.mem_used == start + 4000
    del buf, view
    gc.collect()
    assert counters.mem_used == start
