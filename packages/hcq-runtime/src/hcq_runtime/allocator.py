"""Allocators own device memory. The LRU layer keeps freed allocations for reuse, keyed by size and options."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Generic, TypeVar

from .errors import AllocationError, DeviceError

Opaque = TypeVar("Opaque")


class Allocator(Generic[Opaque]):
    """The memory interface of a device. `Opaque` is whatever handle the device uses for an allocation."""

    #: whether an allocation is new memory (poisoned in debug mode, see `buffer.poison_enabled`); False where it maps
    #: contents that exist already (a file)
    fresh_memory = True

    def alloc(self, nbytes: int, options: Any = None) -> Opaque:
        """Allocate `nbytes` (> 0) bytes; raise AllocationError when the device is out of memory."""
        raise NotImplementedError

    def free(self, opaque: Opaque, nbytes: int, options: Any = None) -> None:
        """Release an allocation made by `alloc` with the same size and options."""
        raise NotImplementedError

    def copyin(self, dest: Opaque, src: memoryview) -> None:
        """Copy host bytes into the start of `dest`."""
        raise NotImplementedError

    def copyout(self, dest: memoryview, src: Opaque) -> None:
        """Copy the start of `src` into host bytes."""
        raise NotImplementedError

    def host_view(self, opaque: Opaque, nbytes: int) -> Any:
        """A writable numpy uint8 array over the first `nbytes` of `opaque` when the host addresses it directly (so a
        strided host array is copied in without a contiguous copy first), else None."""
        return None

    def poison(self, opaque: Opaque, pattern: memoryview) -> None:
        """Fill an allocation `alloc` just returned with the debug pattern (`buffer.poison_pattern`)."""
        self.copyin(opaque, pattern)

    def offset(self, opaque: Opaque, offset: int, nbytes: int) -> Opaque:
        """A handle for the `nbytes` at `offset` inside `opaque`, sharing its memory."""
        raise NotImplementedError

    def address(self, opaque: Opaque) -> int:
        """The address a program on this device uses for `opaque`."""
        raise NotImplementedError

    def from_address(self, address: int, nbytes: int) -> Opaque:
        """A handle for `nbytes` of memory this allocator did not allocate, starting at `address` (never freed here)."""
        raise DeviceError(f"{type(self).__name__} cannot use memory it did not allocate")


class LRUAllocator(Allocator[Opaque]):
    """Keeps freed allocations and hands them out again for the same (size, options)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[int, Any], list[Opaque]] = defaultdict(list)
        self._last_reused: Opaque | None = None  # what the latest `alloc` took from the cache (see `poison`)

    def _alloc(self, nbytes: int, options: Any) -> Opaque:
        raise NotImplementedError

    def _free(self, opaque: Opaque, nbytes: int, options: Any) -> None:
        """Really release the memory (the default lets the garbage collector do it)."""

    def alloc(self, nbytes: int, options: Any = None) -> Opaque:
        if nbytes <= 0:
            raise AllocationError(f"cannot allocate {nbytes} bytes: the size must be positive")
        if cached := self.cache.get((nbytes, options)):
            self._last_reused = cached.pop()
            return self._last_reused
        self._last_reused = None
        try:
            return self._alloc(nbytes, options)
        except MemoryError:
            self.free_cache()
            return self._alloc(nbytes, options)

    def free(self, opaque: Opaque, nbytes: int, options: Any = None) -> None:
        self.cache[(nbytes, options)].append(opaque)

    def _write_new(self, opaque: Opaque, src: memoryview) -> None:
        """Write host bytes into memory no queued work uses yet (a device may skip waiting for its queues)."""
        self.copyin(opaque, src)

    def poison(self, opaque: Opaque, pattern: memoryview) -> None:
        # memory handed out again from the cache may still be read by queued work of its previous owner: copyin
        # waits for it; memory new from the device is in no queue's use, so the pattern is written without waiting
        # (a device whose queues are stalled can still allocate)
        (self.copyin if opaque is self._last_reused else self._write_new)(opaque, pattern)

    def free_cache(self) -> None:
        """Release every cached allocation."""
        for (nbytes, options), handles in self.cache.items():
            for opaque in handles:
                self._free(opaque, nbytes, options)
        self.cache.clear()
