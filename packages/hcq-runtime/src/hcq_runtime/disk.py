"""`DISK:<path>`: a file-backed device. Buffers are windows of the file mapped into memory."""

from __future__ import annotations

import mmap
import os
from typing import Any

import numpy as np

from .allocator import Allocator
from .errors import AllocationError, DeviceError


class DiskMemory:
    """A window of `nbytes` at `offset` in the device's mapping."""

    __slots__ = ("device", "offset", "nbytes")

    def __init__(self, device: DiskDevice, offset: int, nbytes: int):
        self.device, self.offset, self.nbytes = device, offset, nbytes

    def view(self) -> memoryview:
        return memoryview(self.device.mapping)[self.offset : self.offset + self.nbytes]


class DiskAllocator(Allocator[DiskMemory]):
    """Every allocation starts at byte 0 of the file; the file grows to fit the largest one."""

    fresh_memory = False  # the file's bytes are the buffer's contents

    def __init__(self, device: DiskDevice):
        self.device = device

    def alloc(self, nbytes: int, options: Any = None) -> DiskMemory:
        self.device.ensure_size(nbytes)
        return DiskMemory(self.device, 0, nbytes)

    def free(self, opaque: DiskMemory, nbytes: int, options: Any = None) -> None:
        """The bytes stay in the file: that is the point of a disk buffer."""

    def copyin(self, dest: DiskMemory, src: memoryview) -> None:
        dest.view()[: src.nbytes] = src

    def copyout(self, dest: memoryview, src: DiskMemory) -> None:
        dest[:] = src.view()[: dest.nbytes]

    def offset(self, opaque: DiskMemory, offset: int, nbytes: int) -> DiskMemory:
        if offset + nbytes > opaque.nbytes:
            raise AllocationError(f"disk view [{offset}, {offset + nbytes}) is outside a buffer of {opaque.nbytes} bytes")
        return DiskMemory(opaque.device, opaque.offset + offset, nbytes)

    def address(self, opaque: DiskMemory) -> int:
        """Host address of the window (only valid while the file stays mapped at its current size)."""
        array = np.frombuffer(self.device.mapping, dtype=np.uint8)
        return array.ctypes.data + opaque.offset


class DiskDevice:
    """`DISK:/path/to/file`; the file is created when missing and grown as buffers need."""

    def __init__(self, name: str):
        self._fd: int | None = None  # first: __del__ runs even when the name is refused below
        path = name.partition(":")[2]
        if not path:
            raise DeviceError("a disk device needs a path: use DISK:/path/to/file")
        self.name, self.path = name, path
        self.allocator = DiskAllocator(self)
        self.mapping: mmap.mmap | None = None

    def ensure_size(self, nbytes: int) -> None:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise DeviceError(f"cannot open disk device {self.path}: {e.strerror}") from None
        if os.fstat(self._fd).st_size < nbytes:
            os.ftruncate(self._fd, nbytes)
        size = os.fstat(self._fd).st_size
        if self.mapping is None or len(self.mapping) < size:
            self.mapping = mmap.mmap(self._fd, size)

    def synchronize(self) -> None:
        if self.mapping is not None:
            self.mapping.flush()

    def __del__(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
