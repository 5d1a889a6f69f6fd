"""`Buffer`: a typed array of `size` elements on one device, allocated lazily, freed when unreferenced."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .debug import counters
from .device import Device, canonicalize
from .errors import AllocationError, DeviceError

_UNSIGNED_BY_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

#: LINEARs queued by `hcq_runtime.defer_linear`, not run yet; `settle_deferred` runs them
deferred_work: list[Any] = []


def settle_deferred() -> None:
    """Run the deferred LINEARs (`hcq_runtime.defer_linear`), if any: every host access to a buffer's memory (a copy in
    or out, its address handed out) first lets the calls queued before it run, so the host sees memory as if they had
    run when they were queued."""
    if deferred_work:
        from .runner import run_deferred  # (the runner imports this module)

        run_deferred()


def poison_enabled() -> bool:
    """Whether fresh allocations are filled with a poison pattern (`UOP_POISON=1`, or `DEBUG` >= 1), so a read of memory
    nothing wrote shows up as NaN (floats) or 0xA5A5... (integers) instead of whatever the allocator left there."""
    flag = os.environ.get("UOP_POISON")
    if flag is not None:
        return flag not in ("", "0")
    try:
        return int(os.environ.get("DEBUG", "0") or 0) >= 1
    except ValueError:
        return False


def poison_pattern(dtype: Any, nbytes: int) -> bytes:
    """`nbytes` of poison for `dtype` (any object with `fmt` and `name`, as buffers take): all ones for floats (a NaN in
    the IEEE-style formats, bf16 and fp8 e4m3/e5m2 included), 0xA5 bytes otherwise."""
    is_float = getattr(dtype, "fmt", None) in ("e", "f", "d") or "float" in str(getattr(dtype, "name", dtype)) or "fp8" in str(dtype)
    return (b"\xff" if is_float else b"\xa5") * nbytes


def numpy_dtype(dtype: Any) -> np.dtype:
    """The numpy dtype holding `dtype`'s elements; types numpy lacks (bf16, fp8) come back as raw unsigned bits."""
    fmt = getattr(dtype, "fmt", None)
    if fmt:
        return np.dtype(fmt)
    return np.dtype(_UNSIGNED_BY_SIZE[dtype.itemsize])


def check_copy(dest: Buffer, src: Buffer) -> None:
    """Refuse a copy between buffers of different sizes (every copy, eager, staged or linked, moves whole buffers)."""
    if dest.nbytes != src.nbytes:
        raise DeviceError(f"copy of {src.nbytes} bytes into a buffer of {dest.nbytes} bytes")


class Buffer:
    """`size` elements of `dtype` on `device`.

    A buffer made with `base=` is a view: it shares the base's memory starting `offset` bytes in. Memory is
    allocated on first use (`ensure_allocated`, `copyin`, ...) and returned to the device's allocator when
    the last reference to the base goes away."""

    __slots__ = ("device", "size", "dtype", "options", "offset", "_base", "_opaque", "_address", "external", "__weakref__")

    def __init__(self, device: str, size: int, dtype: Any, *, base: Buffer | None = None, offset: int = 0, options: Any = None):
        if size < 0:
            raise AllocationError(f"a buffer cannot have {size} elements")
        self.device, self.size, self.dtype, self.options = canonicalize(device), size, dtype, options
        self.offset, self._base, self._opaque = offset, None, None
        self._address: int | None = None  # the memory's address, once asked (it does not move while the buffer lives)
        self.external = False  # memory owned by someone else (`from_address`): never freed or reused here
        if base is not None:
            if base._base is not None:
                raise AllocationError("a view must be made from a base buffer, not from another view")
            if offset < 0 or offset + self.nbytes > base.nbytes:
                raise AllocationError(f"view of {self.nbytes} bytes at offset {offset} does not fit in a buffer of {base.nbytes} bytes")
            self._base = base

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def base(self) -> Buffer:
        return self if self._base is None else self._base

    @property
    def allocator(self) -> Any:
        return Device[self.device].allocator

    @property
    def is_allocated(self) -> bool:
        return self.base._opaque is not None

    def ensure_allocated(self) -> Buffer:
        """Allocate the memory if it is not allocated yet; returns self."""
        # (the allocator and the size looked up once: every realize allocates its new buffers through here)
        base = self if self._base is None else self._base
        if base._opaque is None:
            allocator, nbytes = Device[base.device].allocator, base.size * base.dtype.itemsize
            base._opaque = allocator.alloc(max(nbytes, 1), base.options)
            if allocator.fresh_memory:  # (a file's mapping is no device memory)
                counters.mem_used += nbytes
                if poison_enabled():
                    allocator.poison(base._opaque, memoryview(poison_pattern(base.dtype, max(nbytes, 1))))
        if base is not self and self._opaque is None:
            self._opaque = self.allocator.offset(base._opaque, self.offset, self.nbytes)
        return self

    @property
    def opaque(self) -> Any:
        """The device handle of this buffer's memory (allocating it first)."""
        self.ensure_allocated()
        return self._opaque

    @property
    def address(self) -> int:
        if deferred_work:  # (the runners' own launches ask it with nothing queued)
            settle_deferred()
        if (address := self._address) is None:  # asked of every input of every linked run: remembered
            address = self._address = Device[self.device].allocator.address(self.ensure_allocated()._opaque)
        return address

    @staticmethod
    def from_address(device: str, size: int, dtype: Any, address: int) -> Buffer:
        """A buffer over memory the caller owns at `address` (no copy); it must stay valid while the buffer lives, and
        changes to it are seen by every later read."""
        buf = Buffer(device, size, dtype)
        buf._opaque = buf.allocator.from_address(address, max(buf.nbytes, 1))
        buf.external = True
        return buf

    def view(self, size: int, dtype: Any, offset: int) -> Buffer:
        """A buffer of `size` `dtype`s starting `offset` bytes into this buffer's memory."""
        return Buffer(self.device, size, dtype, base=self.base, offset=self.offset + offset)

    def copyin(self, data: Any) -> Buffer:
        """Copy host data (bytes, memoryview or numpy array of exactly `nbytes` bytes) into the buffer. A strided numpy
        array is copied straight into memory the host addresses (CPU), without a contiguous copy of it first."""
        if deferred_work:
            settle_deferred()
        if isinstance(data, np.ndarray) and not data.flags.c_contiguous and data.nbytes == self.nbytes and self.nbytes:
            view = self.allocator.host_view(self.opaque, self.nbytes)
            if view is not None:
                np.copyto(view.view(data.dtype).reshape(data.shape), data, casting="no")
                return self
        mv = memoryview(np.ascontiguousarray(data)).cast("B") if isinstance(data, np.ndarray) else memoryview(data).cast("B")
        if mv.nbytes != self.nbytes:
            raise AllocationError(f"copyin of {mv.nbytes} bytes into a buffer of {self.nbytes} bytes")
        if self.nbytes:
            self.allocator.copyin(self.opaque, mv)
        return self

    def poison(self) -> Buffer:
        """Fill the buffer with the debug pattern (`poison_pattern`) fresh memory gets in debug mode, so a kernel reading
        it before anything wrote it shows: for memory reused on purpose (a schedule's kept scratch buffers)."""
        return self.copyin(poison_pattern(self.dtype, self.nbytes))

    def copy_from(self, src: Buffer) -> Buffer:
        """Copy `src`'s bytes (the same number) into this buffer through host memory: the host's copy between any two
        devices' buffers."""
        check_copy(self, src)
        return self.copyin(src.as_bytes())

    def as_bytes(self) -> bytearray:
        """A host copy of the buffer's bytes."""
        if deferred_work:
            settle_deferred()
        out = bytearray(self.nbytes)
        if self.nbytes:
            self.allocator.copyout(memoryview(out), self.opaque)
        return out

    def numpy(self) -> np.ndarray:
        """A host copy of the contents as a 1-D numpy array (bf16 and fp8 come back as their raw bits)."""
        # copied into an uninitialized array: the bytearray of as_bytes is zero-filled first (a decode step's logits,
        # 196 KB, took 65 us to read with it)
        if deferred_work:
            settle_deferred()
        out = np.empty(self.nbytes // numpy_dtype(self.dtype).itemsize, dtype=numpy_dtype(self.dtype))
        if self.nbytes:
            self.allocator.copyout(memoryview(out).cast("B"), self.opaque)
        return out

    def __del__(self) -> None:
        if self._base is None and self._opaque is not None and not self.external:
            try:
                allocator, nbytes = Device[self.device].allocator, self.size * self.dtype.itemsize
                allocator.free(self._opaque, max(nbytes, 1), self.options)
                if allocator.fresh_memory:
                    counters.mem_used -= nbytes
            except Exception:  # at interpreter shutdown the device or its allocator may already be gone
                pass

    def __repr__(self) -> str:
        where = f" offset={self.offset}" if self._base is not None else ""
        return f"<Buffer {self.device} {self.size} x {self.dtype}{where}{'' if self.is_allocated else ' unallocated'}>"
