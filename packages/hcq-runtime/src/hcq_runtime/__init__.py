"""Devices, buffers, allocators and compile caches; running a LINEAR of CALLs; the hcq2 command-queue engine."""

from .allocator import Allocator, LRUAllocator
from .buffer import Buffer, numpy_dtype
from .compiler import CCompiler, Compiler, cache_dir
from .cpu import CPUDevice, CPUProgram
from .device import Device, canonicalize
from .disk import DiskDevice
from .errors import AllocationError, CompileError, DeviceError, RuntimeErrorBase

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "Allocator",
    "AllocationError",
    "Buffer",
    "CCompiler",
    "CPUDevice",
    "CPUProgram",
    "CompileError",
    "Compiler",
    "Device",
    "DeviceError",
    "DiskDevice",
    "LRUAllocator",
    "RuntimeErrorBase",
    "cache_dir",
    "canonicalize",
    "numpy_dtype",
]
