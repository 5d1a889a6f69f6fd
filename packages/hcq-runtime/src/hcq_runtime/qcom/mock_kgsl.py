"""`MockKGSL`: a mock /dev/kgsl-3d0. It checks every ioctl the way the kernel driver would (known request, argument
struct, live context and object ids, mapped IBs), hands out GPU objects as host memory whose CPU address is also
their GPU address (kgsl's USE_CPU_MAP), and runs each GPU_COMMAND's IBs on a `MockCP`: before the ioctl returns, or,
when `asynchronous`, only once someone waits for (or reads) a timestamp, as a GPU running behind the host would.

Compiled submitters reach the mock through a C function pointer (`ioctl_address`, a ctypes callback with the
signature of libc's ioctl): their ioctl lands in the same Python handler. An exception cannot cross the C frames, so
the callback keeps it and returns -1; `ioctl_error` hands it back to the caller once the compiled code has returned.
"""

from __future__ import annotations

import bisect
import ctypes
import itertools
from dataclasses import dataclass

import numpy as np

from . import kgsl
from .errors import GPUFaultError, KGSLError
from .mock_gpu import MockCP

#: Adreno 630 (Snapdragon 845): chip id 6.3.0.1
DEFAULT_CHIP_ID = 0x06030001
#: the mock's file descriptor: never a real one (an ioctl on it through libc fails with EBADF)
MOCK_FD = -1


@dataclass
class MockObject:
    """A GPU object: its id, flags and host memory; `mapping` once mmapped."""

    id: int
    size: int
    flags: int
    memory: np.ndarray
    mapping: kgsl.Mapping | None = None


class MockKGSL(kgsl.KGSLFile):
    """The kgsl ioctls the QCOM backend uses, over host memory, with a `MockCP` behind GPU_COMMAND.

    `calls` lists every ioctl by name, in order (tests check the sequence); `cp` is the command processor."""

    def __init__(self, chip_id: int = DEFAULT_CHIP_ID, *, asynchronous: bool = False):
        self.chip_id, self.asynchronous = chip_id, asynchronous
        self.pending: list[tuple[int, int]] = []  # IBs submitted and not yet run (asynchronous mode)
        self.calls: list[str] = []
        self.objects: dict[int, MockObject] = {}
        self._ids = itertools.count(1)
        self._bases: list[int] = []  # sorted mapped addresses
        self._mapped: dict[int, MockObject] = {}
        self.contexts: dict[int, int] = {}  # context id -> last issued timestamp
        self._context_ids = itertools.count(1)
        self.cp = MockCP(self.bytes_at)
        self.closed = False
        self.fd = MOCK_FD
        self._c_ioctl = kgsl.IOCTL_PROTOTYPE(self._ioctl_from_c)
        self._c_failure: Exception | None = None

    # -- memory as the GPU sees it -------------------------------------------------------------------------

    def bytes_at(self, address: int, nbytes: int) -> np.ndarray:
        """A writable view of `nbytes` of GPU memory at `address` (inside one mapped object); GPUFaultError if not."""
        i = bisect.bisect_right(self._bases, address) - 1
        if i >= 0 and nbytes >= 0:
            obj = self._mapped[self._bases[i]]
            start = address - self._bases[i]
            if start + nbytes <= obj.size:
                return obj.memory[start:start + nbytes]
        raise GPUFaultError(f"GPU memory fault: {nbytes} bytes at {address:#x} are not inside one mapped GPU object")

    # -- the file -------------------------------------------------------------------------------------------

    def ioctl(self, request: int, arg: ctypes.Structure) -> None:
        if self.closed:
            raise KGSLError("ioctl on a closed kgsl file")
        name = kgsl.IOCTL_NAMES.get(request)
        if name is None:
            raise KGSLError(f"unknown kgsl ioctl {request:#x}")
        if not isinstance(arg, kgsl.IOCTLS[name][1]):
            raise KGSLError(f"{name} takes a {kgsl.IOCTLS[name][1].__name__}, not a {type(arg).__name__}")
        self.calls.append(name)
        getattr(self, f"_{name.lower()}")(arg)

    @property
    def ioctl_address(self) -> int:
        return ctypes.cast(self._c_ioctl, ctypes.c_void_p).value or 0

    def _ioctl_from_c(self, fd: int, request: int, address: int) -> int:
        try:
            if fd != self.fd:
                raise KGSLError(f"ioctl on file descriptor {fd}, which is not the mock kgsl file ({self.fd})")
            name = kgsl.IOCTL_NAMES.get(request)
            if name is None:
                raise KGSLError(f"unknown kgsl ioctl {request:#x}")
            self.ioctl(request, kgsl.IOCTLS[name][1].from_address(address))
            return 0
        except Exception as e:  # noqa: BLE001 -- kept for ioctl_error: an exception cannot unwind through C
            self._c_failure = e
            return -1

    def ioctl_error(self, request: int, errno: int) -> Exception:
        failure, self._c_failure = self._c_failure, None
        return failure if failure is not None else super().ioctl_error(request, errno)

    def mmap(self, size: int, offset: int) -> kgsl.Mapping:
        obj = self.objects.get(offset // kgsl.PAGE)
        if offset % kgsl.PAGE or obj is None:
            raise KGSLError(f"mmap at offset {offset:#x}: no GPU object has that id (offset = id * page size)")
        if obj.mapping is not None or size > obj.size:
            raise KGSLError(f"mmap of {size} bytes of GPU object {obj.id} ({obj.size} bytes, {'already' if obj.mapping else 'not'} mapped)")
        obj.mapping = kgsl.Mapping(obj.memory.ctypes.data, obj.memory[:size], obj.memory)
        bisect.insort(self._bases, obj.mapping.address)
        self._mapped[obj.mapping.address] = obj
        return obj.mapping

    def munmap(self, mapping: kgsl.Mapping) -> None:
        obj = self._mapped.pop(mapping.address, None)
        if obj is None:
            raise KGSLError(f"munmap of {mapping.address:#x}, which is not mapped")
        self._bases.remove(mapping.address)
        obj.mapping = None

    def close(self) -> None:
        self.closed = True

    # -- ioctls ---------------------------------------------------------------------------------------------

    def _context(self, context_id: int, name: str) -> None:
        if context_id not in self.contexts:
            raise KGSLError(f"{name}: context {context_id} does not exist; create one with DRAWCTXT_CREATE first")

    def _device_getproperty(self, arg: kgsl.GetProperty) -> None:
        if arg.type != kgsl.PROP_DEVICE_INFO or arg.sizebytes != ctypes.sizeof(kgsl.DevInfo):
            raise KGSLError(f"DEVICE_GETPROPERTY of property {arg.type:#x} with {arg.sizebytes} bytes: the mock knows DEVICE_INFO "
                            f"({ctypes.sizeof(kgsl.DevInfo)} bytes)")
        info = kgsl.DevInfo(device_id=1, chip_id=self.chip_id, mmu_enabled=1, gpu_id=self.chip_id >> 24 & 0xFF)
        ctypes.memmove(arg.value, ctypes.addressof(info), ctypes.sizeof(info))

    def _setproperty(self, arg: kgsl.GetProperty) -> None:
        if arg.type != kgsl.PROP_PWR_CONSTRAINT or arg.sizebytes != ctypes.sizeof(kgsl.PwrConstraint):
            raise KGSLError(f"SETPROPERTY of property {arg.type:#x} with {arg.sizebytes} bytes: the mock knows PWR_CONSTRAINT")
        self._context(kgsl.PwrConstraint.from_address(arg.value).context_id, "SETPROPERTY")

    def _drawctxt_create(self, arg: kgsl.DrawctxtCreate) -> None:
        if not arg.flags & kgsl.CONTEXT_PREAMBLE:
            raise KGSLError("DRAWCTXT_CREATE without CONTEXT_PREAMBLE: a compute context must not depend on GMEM state")
        arg.drawctxt_id = next(self._context_ids)
        self.contexts[arg.drawctxt_id] = 0

    def _drawctxt_destroy(self, arg: kgsl.DrawctxtDestroy) -> None:
        self._context(arg.drawctxt_id, "DRAWCTXT_DESTROY")
        del self.contexts[arg.drawctxt_id]

    def _gpuobj_alloc(self, arg: kgsl.GPUObjAlloc) -> None:
        if arg.size == 0 or arg.size % kgsl.PAGE or arg.mmapsize != arg.size:
            raise KGSLError(f"GPUOBJ_ALLOC of {arg.size} bytes (mmapsize {arg.mmapsize}): sizes are whole pages and mmapsize == size")
        if not arg.flags & kgsl.MEMFLAGS_USE_CPU_MAP:
            raise KGSLError("GPUOBJ_ALLOC without MEMFLAGS_USE_CPU_MAP: the backend needs the GPU address to be the CPU mapping's")
        raw = np.zeros(arg.size + kgsl.PAGE, np.uint8)
        start = -raw.ctypes.data % kgsl.PAGE
        arg.id = next(self._ids)
        self.objects[arg.id] = MockObject(arg.id, int(arg.size), int(arg.flags), raw[start:start + arg.size])

    def _gpuobj_free(self, arg: kgsl.GPUObjFree) -> None:
        obj = self.objects.pop(arg.id, None)
        if obj is None:
            raise KGSLError(f"GPUOBJ_FREE of object {arg.id}, which does not exist (freed twice?)")
        if obj.mapping is not None:
            self.munmap(obj.mapping)

    def _gpu_command(self, arg: kgsl.GPUCommand) -> None:
        self._context(arg.context_id, "GPU_COMMAND")
        if arg.numcmds == 0 or arg.cmdsize != ctypes.sizeof(kgsl.CommandObject) or arg.numobjs or arg.numsyncs:
            raise KGSLError(f"GPU_COMMAND with {arg.numcmds} command objects of {arg.cmdsize} bytes, {arg.numobjs} objects, "
                            f"{arg.numsyncs} syncs: the mock takes IB command objects of {ctypes.sizeof(kgsl.CommandObject)} bytes only")
        commands = (kgsl.CommandObject * arg.numcmds).from_address(arg.cmdlist)
        for command in commands:
            if not command.flags & kgsl.CMDLIST_IB:
                raise KGSLError(f"GPU_COMMAND: command object flags {command.flags:#x} are not CMDLIST_IB")
            self.pending.append((command.gpuaddr, command.size))
        if not self.asynchronous:
            self.retire()
        self.contexts[arg.context_id] += 1
        arg.timestamp = self.contexts[arg.context_id]

    def retire(self) -> None:
        """Run every submitted IB (the mock GPU catches up)."""
        while self.pending:
            self.cp.execute(*self.pending.pop(0))

    def _cmdstream_readtimestamp_ctxtid(self, arg: kgsl.ReadTimestamp) -> None:
        self._context(arg.context_id, "CMDSTREAM_READTIMESTAMP_CTXTID")
        if arg.type not in (kgsl.TIMESTAMP_CONSUMED, kgsl.TIMESTAMP_RETIRED, kgsl.TIMESTAMP_QUEUED):
            raise KGSLError(f"CMDSTREAM_READTIMESTAMP_CTXTID of unknown timestamp type {arg.type}")
        self.retire()
        arg.timestamp = self.contexts[arg.context_id]

    def _device_waittimestamp_ctxtid(self, arg: kgsl.WaitTimestamp) -> None:
        self._context(arg.context_id, "DEVICE_WAITTIMESTAMP_CTXTID")
        if arg.timestamp > self.contexts[arg.context_id]:
            raise KGSLError(f"DEVICE_WAITTIMESTAMP_CTXTID for timestamp {arg.timestamp}, but only {self.contexts[arg.context_id]} were issued: "
                            "it would wait forever")
        self.retire()
