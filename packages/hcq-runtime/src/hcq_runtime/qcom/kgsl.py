"""The kgsl driver interface (`/dev/kgsl-3d0`): ioctl numbers, argument structs and flags as the kernel's msm_kgsl.h
defines them, and the file the device talks to.

The device code packs ioctl arguments and calls `KGSLFile.ioctl`; `DevKGSL` passes them to the kernel, `MockKGSL`
(mock_kgsl.py) interprets them. So everything above the ioctl edge is the same code on a phone and in CI.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ffi import IOC_READ, IOC_WRITE, cstruct, ioctl_number
from .errors import KGSLError

DEVICE_PATH = "/dev/kgsl-3d0"
PAGE = 0x1000
KGSL_IOC_TYPE = 0x09

# drawctxt flags
CONTEXT_NO_GMEM_ALLOC, CONTEXT_PREAMBLE, CONTEXT_NO_FAULT_TOLERANCE, CONTEXT_PWR_CONSTRAINT = 0x2, 0x10, 0x200, 0x800
CONTEXT_PRIORITY_SHIFT, CONTEXT_PRIORITY_MASK = 12, 0xF000
CONTEXT_PREEMPT_STYLE_SHIFT, CONTEXT_PREEMPT_STYLE_MASK, CONTEXT_PREEMPT_STYLE_FINEGRAIN = 25, 0x0E000000, 0x2
# memory flags
MEMFLAGS_USE_CPU_MAP = 0x10000000
MEMALIGN_SHIFT, MEMALIGN_MASK = 16, 0x00FF0000
CACHEMODE_SHIFT, CACHEMODE_MASK, CACHEMODE_UNCACHED = 26, 0x0C000000, 1
# command lists, properties, timestamps
CMDLIST_IB = 0x1
PROP_DEVICE_INFO, PROP_PWR_CONSTRAINT = 0x1, 0x12
TIMESTAMP_CONSUMED, TIMESTAMP_RETIRED, TIMESTAMP_QUEUED = 1, 2, 3
CONSTRAINT_PWRLEVEL, CONSTRAINT_PWR_MAX = 1, 1


def field(value: int, shift: int, mask: int) -> int:
    """`value` placed in a flags field (the kernel's `(v << X_SHIFT) & X_MASK`)."""
    return (value << shift) & mask


class DevInfo(ctypes.Structure):
    """struct kgsl_devinfo."""

    _fields_ = [("device_id", ctypes.c_uint32), ("chip_id", ctypes.c_uint32), ("mmu_enabled", ctypes.c_uint32),
                ("gmem_gpubaseaddr", ctypes.c_uint64), ("gpu_id", ctypes.c_uint32), ("gmem_sizebytes", ctypes.c_uint64)]


class GetProperty(ctypes.Structure):
    """struct kgsl_device_getproperty (also the SETPROPERTY argument)."""

    _fields_ = [("type", ctypes.c_uint32), ("value", ctypes.c_uint64), ("sizebytes", ctypes.c_uint64)]


class PwrConstraint(ctypes.Structure):
    """struct kgsl_device_constraint with its pwrlevel payload pointer."""

    _fields_ = [("type", ctypes.c_uint32), ("context_id", ctypes.c_uint32), ("data", ctypes.c_uint64), ("size", ctypes.c_uint64)]


class WaitTimestamp(ctypes.Structure):
    """struct kgsl_device_waittimestamp_ctxtid."""

    _fields_ = [("context_id", ctypes.c_uint32), ("timestamp", ctypes.c_uint32), ("timeout", ctypes.c_uint32)]


class DrawctxtCreate(ctypes.Structure):
    """struct kgsl_drawctxt_create."""

    _fields_ = [("flags", ctypes.c_uint32), ("drawctxt_id", ctypes.c_uint32)]


class DrawctxtDestroy(ctypes.Structure):
    """struct kgsl_drawctxt_destroy."""

    _fields_ = [("drawctxt_id", ctypes.c_uint32)]


class ReadTimestamp(ctypes.Structure):
    """struct kgsl_cmdstream_readtimestamp_ctxtid."""

    _fields_ = [("context_id", ctypes.c_uint32), ("type", ctypes.c_uint32), ("timestamp", ctypes.c_uint32)]


class GPUObjAlloc(ctypes.Structure):
    """struct kgsl_gpuobj_alloc."""

    _fields_ = [("size", ctypes.c_uint64), ("flags", ctypes.c_uint64), ("va_len", ctypes.c_uint64), ("mmapsize", ctypes.c_uint64),
                ("id", ctypes.c_uint32), ("metadata_len", ctypes.c_uint32), ("metadata", ctypes.c_uint64)]


class GPUObjFree(ctypes.Structure):
    """struct kgsl_gpuobj_free."""

    _fields_ = [("flags", ctypes.c_uint64), ("priv", ctypes.c_uint64), ("id", ctypes.c_uint32), ("type", ctypes.c_uint32),
                ("len", ctypes.c_uint32)]


class CommandObject(ctypes.Structure):
    """struct kgsl_command_object: one IB (`gpuaddr`, `size` bytes) of a GPU command."""

    _fields_ = [("offset", ctypes.c_uint64), ("gpuaddr", ctypes.c_uint64), ("size", ctypes.c_uint64), ("flags", ctypes.c_uint32),
                ("id", ctypes.c_uint32)]


class GPUCommand(ctypes.Structure):
    """struct kgsl_gpu_command: a submit of `numcmds` command objects at user address `cmdlist`."""

    _fields_ = [("flags", ctypes.c_uint64), ("cmdlist", ctypes.c_uint64), ("cmdsize", ctypes.c_uint32), ("numcmds", ctypes.c_uint32),
                ("objlist", ctypes.c_uint64), ("objsize", ctypes.c_uint32), ("numobjs", ctypes.c_uint32),
                ("synclist", ctypes.c_uint64), ("syncsize", ctypes.c_uint32), ("numsyncs", ctypes.c_uint32),
                ("context_id", ctypes.c_uint32), ("timestamp", ctypes.c_uint32)]


def kgsl_ioctl(direction: int, nr: int, struct_t: type[ctypes.Structure]) -> int:
    """The request number of kgsl ioctl `nr` (type 0x09)."""
    return ioctl_number(direction, KGSL_IOC_TYPE, nr, struct_t)


_RW = IOC_READ | IOC_WRITE
#: name -> (ioctl number, argument struct)
IOCTLS: dict[str, tuple[int, type[ctypes.Structure]]] = {
    name: (kgsl_ioctl(direction, nr, struct_t), struct_t) for name, direction, nr, struct_t in (
        ("DEVICE_GETPROPERTY", _RW, 0x02, GetProperty),
        ("DEVICE_WAITTIMESTAMP_CTXTID", IOC_WRITE, 0x07, WaitTimestamp),
        ("DRAWCTXT_CREATE", _RW, 0x13, DrawctxtCreate),
        ("DRAWCTXT_DESTROY", IOC_WRITE, 0x14, DrawctxtDestroy),
        ("CMDSTREAM_READTIMESTAMP_CTXTID", _RW, 0x16, ReadTimestamp),
        ("SETPROPERTY", IOC_WRITE, 0x32, GetProperty),
        ("GPUOBJ_ALLOC", _RW, 0x45, GPUObjAlloc),
        ("GPUOBJ_FREE", IOC_WRITE, 0x46, GPUObjFree),
        ("GPU_COMMAND", _RW, 0x4A, GPUCommand),
    )
}
IOCTL_NAMES = {number: name for name, (number, _) in IOCTLS.items()}


@dataclass
class Mapping:
    """A CPU mapping of a GPU object: its address (also the GPU address, kgsl's USE_CPU_MAP) and a uint8 view."""

    address: int
    view: np.ndarray
    keepalive: Any = None  # what owns the mapping (an mmap object, the mock's array)


#: the C signature compiled submitters call ioctl through: int ioctl(int fd, unsigned long request, void *arg)
IOCTL_PROTOTYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)


class KGSLFile:
    """An open kgsl device file. Each method states its contract; implementations raise KGSLError.

    `fd` and `ioctl_address` are what compiled submitters use: they call the C function at `ioctl_address` as
    `ioctl(fd, request, &arg)` and hand a failure's errno to `ioctl_error`."""

    fd: int

    def ioctl(self, request: int, arg: ctypes.Structure) -> None:
        """Issue ioctl `request` with `arg` (read and updated in place, as the kernel does)."""
        raise NotImplementedError

    @property
    def ioctl_address(self) -> int:
        """The address of a C function with the signature of `IOCTL_PROTOTYPE` that issues ioctls on `fd`."""
        raise NotImplementedError

    def ioctl_error(self, request: int, errno: int) -> Exception:
        """The error for ioctl `request` that a compiled submitter saw fail with `errno`."""
        return KGSLError(f"kgsl ioctl {IOCTL_NAMES.get(request, hex(request))} failed: {os.strerror(errno)}")

    def mmap(self, size: int, offset: int) -> Mapping:
        """Map `size` bytes of the GPU object at mmap `offset` (its id times the page size) read-write, shared."""
        raise NotImplementedError

    def munmap(self, mapping: Mapping) -> None:
        """Undo `mmap`."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the file (the kernel frees the process's contexts and objects)."""


def call(file: KGSLFile, name: str, **fields: int) -> Any:
    """Issue the kgsl ioctl `name` (a key of IOCTLS) with an argument struct built from `fields`; return the struct."""
    number, struct_t = IOCTLS[name]
    arg = struct_t.from_buffer_copy(cstruct(struct_t, **fields))  # cstruct refuses values that do not fit their field
    file.ioctl(number, arg)
    return arg


class DevKGSL(KGSLFile):
    """The real /dev/kgsl-3d0."""

    def __init__(self, path: str = DEVICE_PATH):
        try:
            self.fd = os.open(path, os.O_RDWR)
        except OSError as e:
            raise KGSLError(f"cannot open {path} ({e.strerror}): QCOM needs an Adreno GPU with the kgsl driver; use MOCKQCOM elsewhere") from None

    @property
    def ioctl_address(self) -> int:
        return ctypes.cast(ctypes.CDLL(None).ioctl, ctypes.c_void_p).value or 0

    def ioctl(self, request: int, arg: ctypes.Structure) -> None:
        try:
            fcntl.ioctl(self.fd, request, arg, True)  # the kernel writes its results back into `arg`
        except OSError as e:
            raise KGSLError(f"kgsl ioctl {IOCTL_NAMES.get(request, hex(request))} failed: {e.strerror}") from None

    def mmap(self, size: int, offset: int) -> Mapping:
        try:
            mapped = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)
        except OSError as e:
            raise KGSLError(f"mmap of {size} bytes at offset {offset:#x} of {DEVICE_PATH} failed: {e.strerror}") from None
        view = np.frombuffer(mapped, np.uint8)
        return Mapping(view.ctypes.data, view, mapped)

    def munmap(self, mapping: Mapping) -> None:
        mapping.view = np.zeros(0, np.uint8)  # drop the buffer export first: an exported mmap cannot close
        mapping.keepalive.close()

    def close(self) -> None:
        os.close(self.fd)
