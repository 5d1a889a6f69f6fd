"""`MockKFD`: the KFD driver interface over a host (numpy) address space, with a `MockGPU` behind the doorbells.

Every allocation is a numpy array placed at a fresh page-aligned GPU virtual address (addresses are never reused,
so a GPU access after `free` faults instead of reading someone else's data).

Doorbells are 64-bit words of a doorbell page in host memory, one per queue, as the real KFD maps them. A doorbell
rung from Python (`Doorbell.ring`) stores there and runs the mock GPU until no queue can make progress, so the submit
has finished, or stalled on a wait, when it returns. A compiled submitter only stores, as it would into the GPU's MMIO
page; the mock GPU picks the new write pointer up the next time it runs: when the host waits on a signal (`poll`),
waits for room in a ring, or rings a doorbell from Python.
"""

from __future__ import annotations

import bisect
import itertools

import numpy as np
from amd_isa import TARGETS

from . import regs
from .driver import Doorbell, Driver, GPUMemory, QueueDesc, QueueKind
from .errors import KFDError
from .mock_gpu import MockGPU

PAGE = 0x1000
VA_BASE = 0x2_0000_0000
KFD_VERSION = (1, 17)
EVENT_PAGE_SLOTS = 256
DOORBELL_SLOTS = PAGE // 8


class _MockDoorbell(Doorbell):
    def __init__(self, gpu: MockGPU, queue_id: int, word: np.ndarray):
        self.gpu, self.queue_id, self.word, self.address = gpu, queue_id, word, word.ctypes.data

    @property
    def value(self) -> int:
        """The last write pointer stored into the doorbell."""
        return int(self.word[0])

    def ring(self, value: int) -> None:
        self.word[0] = value
        self.gpu.doorbell(self.queue_id)


class MockKFD(Driver):
    """A KFD driver whose GPU is the `MockGPU` (PM4 and SDMA executed in Python, kernels in the amd-isa emulator).

    `target` is any gfx9 (CDNA: gfx90a, gfx94x, gfx950), gfx11 or gfx12 target the emulator knows; the mock GPU then
    expects that generation's packet forms and runs kernels in that architecture's mode."""

    def __init__(self, target: tuple[int, int, int] = (11, 0, 0)):
        name = regs.target_name(target)
        if target[0] not in regs.COMPUTE_REGS or name not in TARGETS:
            known = ", ".join(t for t in TARGETS if regs.parse_target(t)[0] in regs.COMPUTE_REGS)
            raise KFDError(f"the mock GPU cannot run {name}: it runs the targets the amd-isa emulator knows ({known})")
        self.target = target
        self.vm_acquired = False
        self._next_va = VA_BASE
        self._handles = itertools.count(1)
        self._bases: list[int] = []  # sorted allocation bases, for address lookups
        self._allocs: dict[int, GPUMemory] = {}  # base -> allocation
        self._queue_ids = itertools.count(1)
        self.queues: dict[int, QueueDesc] = {}
        #: the doorbell page: queue `i` rings word `i`
        self.doorbells = np.zeros(DOORBELL_SLOTS, np.uint64)
        #: bumped by every alloc and free (the mock GPU remaps its emulator memory when it changes)
        self.generation = 0
        self.gpu = MockGPU(self)
        self._event_page: GPUMemory | None = None
        self._event_ids = itertools.count(1)
        self.events: dict[int, bool] = {}

    # -- memory ---------------------------------------------------------------------------------------------

    def version(self) -> tuple[int, int]:
        return KFD_VERSION

    def acquire_vm(self) -> None:
        self.vm_acquired = True

    def alloc(self, size: int, *, host_visible: bool = True, uncached: bool = False) -> GPUMemory:
        if not self.vm_acquired:
            raise KFDError("allocating GPU memory before acquire_vm: call acquire_vm() first")
        if size <= 0:
            raise KFDError(f"cannot allocate {size} bytes of GPU memory")
        size = -(-size // PAGE) * PAGE
        va = self._next_va
        self._next_va += size + PAGE  # a guard page between allocations catches overruns
        mem = GPUMemory(va, size, next(self._handles), np.zeros(size, np.uint8))
        bisect.insort(self._bases, va)
        self._allocs[va] = mem
        self.generation += 1
        return mem

    def free(self, mem: GPUMemory) -> None:
        live = self._allocs.get(mem.va)
        if live is None or live.handle != mem.handle:
            raise KFDError(f"free of {mem.va:#x}, which is not an allocation of this driver (double free?)")
        del self._allocs[mem.va]
        self._bases.remove(mem.va)
        self.generation += 1
        self.gpu.memory_freed(mem.va, mem.size)

    def allocations(self) -> list[GPUMemory]:
        """Every live allocation (the mock GPU maps them into the emulator's address space)."""
        return [self._allocs[base] for base in self._bases]

    def lookup(self, address: int, nbytes: int) -> tuple[GPUMemory, int]:
        """The allocation holding [address, address + nbytes) and the offset into it; KFDError if none does."""
        i = bisect.bisect_right(self._bases, address) - 1
        if i >= 0:
            mem = self._allocs[self._bases[i]]
            if address + nbytes <= mem.va + mem.size:
                return mem, address - mem.va
        raise KFDError(f"GPU memory fault: {nbytes} bytes at {address:#x} are not mapped")

    def bytes_at(self, address: int, nbytes: int) -> np.ndarray:
        """A writable uint8 view of GPU memory (within one allocation)."""
        mem, start = self.lookup(address, nbytes)
        assert mem.view is not None
        return mem.view[start:start + nbytes]

    # -- queues ---------------------------------------------------------------------------------------------

    def create_queue(self, kind: QueueKind, ring: GPUMemory, pointers: GPUMemory) -> QueueDesc:
        if ring.view is None or pointers.view is None or pointers.size < 16:
            raise KFDError("a queue needs a host-visible ring and 16 bytes of host-visible read/write pointers")
        if ring.size & (ring.size - 1):
            raise KFDError(f"a ring is a power of two bytes, not {ring.size}")
        queue_id = next(self._queue_ids)
        if queue_id >= DOORBELL_SLOTS:
            raise KFDError(f"the mock KFD's doorbell page has {DOORBELL_SLOTS} slots and all were handed out; open a new device")
        words = pointers.view[:16].view(np.uint64)
        doorbell = _MockDoorbell(self.gpu, queue_id, self.doorbells[queue_id:queue_id + 1])
        desc = QueueDesc(queue_id, kind, ring.view.view(np.uint32), words[0:1], words[1:2], doorbell)
        desc.read_ptr[0] = desc.write_ptr[0] = 0
        self.queues[queue_id] = desc
        self.gpu.add_queue(desc)
        return desc

    def destroy_queue(self, queue: QueueDesc) -> None:
        if self.queues.pop(queue.queue_id, None) is None:
            raise KFDError(f"queue {queue.queue_id} does not exist (destroyed twice?)")
        self.gpu.remove_queue(queue.queue_id)

    # -- events ---------------------------------------------------------------------------------------------

    def create_event(self) -> tuple[int, int]:
        if self._event_page is None:
            self._event_page = self.alloc(EVENT_PAGE_SLOTS * 8, uncached=True)
        event_id = next(self._event_ids)
        if event_id >= EVENT_PAGE_SLOTS:
            raise KFDError(f"the mock KFD has {EVENT_PAGE_SLOTS} event slots; destroy events you no longer use")
        self.events[event_id] = False
        return event_id, self._event_page.va + 8 * event_id

    def fire_event(self, event_id: int) -> None:
        """An interrupt carrying `event_id` arrived (the GPU calls this)."""
        if event_id in self.events:
            self.events[event_id] = True

    def wait_event(self, event_id: int, timeout_ms: int) -> bool:
        if event_id not in self.events:
            raise KFDError(f"no event {event_id}; create it with create_event()")
        self.gpu.run()
        fired, self.events[event_id] = self.events[event_id], False  # auto-reset, as the backend's events are
        return fired

    def poll(self) -> None:
        self.gpu.run()

    def queue_state(self, queue: QueueDesc) -> str:
        return self.gpu.queue_state(queue.queue_id)
