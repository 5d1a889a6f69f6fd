"""The driver interface the AMD backend talks to: the KFD operations it uses, as methods of one object.

`MockKFD` (a numpy-backed address space and a mock GPU) and `KFDDriver` (the real /dev/kfd) implement it, so the
device code is the same on both. Memory is handed out as `GPUMemory` (a GPU virtual address, a size, and a host
view when the memory is host-visible); queues as `QueueDesc` (ring, read/write pointers, doorbell).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..hcq2.hwqueue import QueueKind
from ..hcq2.memory import GPUMemory
from . import regs

#: the KFD queue type (KFD_IOC_QUEUE_TYPE_*) of each queue kind: COPY queues are SDMA queues
KFD_QUEUE_TYPE = {QueueKind.COMPUTE: 0, QueueKind.COPY: 1}


class Doorbell:
    """Where the host writes a queue's new write pointer to wake the engine: a 64-bit word at host `address` (an MMIO
    page of the GPU, or the mock's doorbell page), which compiled submitters store into directly."""

    address: int

    def ring(self, value: int) -> None:
        """Write `value` (the queue's write pointer, in the queue's units) to the doorbell."""
        raise NotImplementedError


@dataclass
class QueueDesc:
    """A hardware queue: its ring (uint32 view), read and write pointers (uint64 views of one element), doorbell.

    Pointers count dwords on compute (PM4) queues and bytes on SDMA queues, as the engines do."""

    queue_id: int
    kind: QueueKind
    ring: np.ndarray
    read_ptr: np.ndarray
    write_ptr: np.ndarray
    doorbell: Doorbell
    memory: tuple[GPUMemory, ...] = ()  # the driver-side buffers the queue needs (EOP, context save), freed with it


class Driver:
    """The KFD operations the backend uses. Each method states its contract; implementations raise KFDError."""

    #: gfx target as (major, minor, stepping), e.g. (11, 0, 0) for gfx1100
    target: tuple[int, int, int]

    def version(self) -> tuple[int, int]:
        """The KFD ioctl interface version (major, minor)."""
        raise NotImplementedError

    def acquire_vm(self) -> None:
        """Bind this process's GPU virtual address space (once, before allocating)."""
        raise NotImplementedError

    def alloc(self, size: int, *, host_visible: bool = True, uncached: bool = False) -> GPUMemory:
        """Allocate and map `size` bytes (rounded up to a page) of GPU memory; `host_visible` gives it a host view."""
        raise NotImplementedError

    def free(self, mem: GPUMemory) -> None:
        """Unmap and free an allocation made by `alloc`; later GPU accesses to it fault."""
        raise NotImplementedError

    def create_queue(self, kind: QueueKind, ring: GPUMemory, pointers: GPUMemory) -> QueueDesc:
        """Create a hardware queue over `ring`; its read pointer lives at `pointers.va`, its write pointer 8 bytes on."""
        raise NotImplementedError

    def destroy_queue(self, queue: QueueDesc) -> None:
        """Destroy a queue made by `create_queue` (its ring is the caller's to free)."""
        raise NotImplementedError

    def create_event(self) -> tuple[int, int]:
        """A signal event: (event id, GPU address of its mailbox slot). A queue signals it by writing the id there
        with an interrupt."""
        raise NotImplementedError

    def wait_event(self, event_id: int, timeout_ms: int) -> bool:
        """Sleep until the event fires or `timeout_ms` passes; True if it fired."""
        raise NotImplementedError

    def poll(self) -> None:
        """Let the device make progress while the host spins on a signal (the real GPU runs by itself: no-op)."""

    def queue_state(self, queue: QueueDesc) -> str:
        """A one-line description of where a queue stands (for hang reports)."""
        return f"queue {queue.queue_id} ({queue.kind.name}) read {int(queue.read_ptr[0])} of {int(queue.write_ptr[0])}"

    def close(self) -> None:
        """Release the driver (queues and memory of this process)."""

    def describe(self) -> dict[str, Any]:
        """Properties worth printing: target, driver kind."""
        return {"target": regs.target_name(self.target), "driver": type(self).__name__}
