"""The real /dev/kfd driver's ABI facts (ioctl numbers, struct layouts of kfd_ioctl.h) and its behaviour without a GPU."""

import ctypes
from pathlib import Path

import pytest
from hcq_runtime.amd import AMDDevice, KFDError, open_driver
from hcq_runtime.amd.kfd import IOCTLS, CreateEvent, CreateQueue, EventData, MapMemory, WaitEvents


def linux_ioc(direction: str, nr: int, size: int) -> int:
    """asm-generic/ioctl.h: dir in bits 31:30 (write 1, read 2), size 29:16, type 15:8 ('K'), nr 7:0."""
    bits = {"": 0, "w": 1, "r": 2, "rw": 3}[direction]
    return (bits << 30) | (size << 16) | (0x4B << 8) | nr


@pytest.mark.parametrize(("name", "direction", "nr", "size"), [
    ("GET_VERSION", "r", 0x01, 8),
    ("CREATE_QUEUE", "rw", 0x02, 96),
    ("DESTROY_QUEUE", "rw", 0x03, 8),
    ("CREATE_EVENT", "rw", 0x08, 32),
    ("WAIT_EVENTS", "rw", 0x0C, 24),
    ("ACQUIRE_VM", "w", 0x15, 8),
    ("ALLOC_MEMORY_OF_GPU", "rw", 0x16, 40),
    ("FREE_MEMORY_OF_GPU", "w", 0x17, 8),
    ("MAP_MEMORY_TO_GPU", "rw", 0x18, 24),
    ("UNMAP_MEMORY_FROM_GPU", "rw", 0x19, 24),
    ("RUNTIME_ENABLE", "rw", 0x25, 16),
])
def test_ioctl_numbers(name, direction, nr, size):
    number, struct_t = IOCTLS[name]
    assert ctypes.sizeof(struct_t) == size
    assert number == linux_ioc(direction, nr, size)


def test_get_version_number_is_the_well_known_one():
    assert IOCTLS["GET_VERSION"][0] == 0x80084B01


def test_struct_field_offsets():
    assert CreateQueue.doorbell_offset.offset == 24 and CreateQueue.queue_id.offset == 52 and CreateQueue.eop_buffer_address.offset == 56
    assert CreateQueue.ctx_save_restore_size.offset == 80 and CreateQueue.sdma_engine_id.offset == 88
    assert CreateEvent.event_id.offset == 24 and CreateEvent.event_slot_index.offset == 28
    assert WaitEvents.wait_result.offset == 20 and MapMemory.n_success.offset == 20
    assert ctypes.sizeof(EventData) == 48 and EventData.event_id.offset == 40


@pytest.mark.skipif(Path("/dev/kfd").exists(), reason="this machine has a KFD device")
def test_no_gpu_gives_a_clear_error():
    with pytest.raises(KFDError, match="MOCKAMD"):
        open_driver("AMD")
    with pytest.raises(KFDError, match="MOCKAMD"):
        AMDDevice("AMD:1")


def test_unknown_device_name():
    with pytest.raises(Exception, match="not an AMD device name"):
        open_driver("NV")
