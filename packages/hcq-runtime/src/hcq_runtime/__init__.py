"""Devices, buffers, allocators and compile caches; running a LINEAR of CALLs; the hcq2 command-queue engine and linked
native batches; the AMD backend."""

from . import amd, hcq2
from .allocator import Allocator, LRUAllocator
from .batch import LinkedLinear, link_linear, run_linear
from .buffer import Buffer, numpy_dtype
from .compiled import CompiledDevice
from .compiler import AMDCompiler, CCompiler, Compiler, amd_toolchain, cache_dir
from .cpu import CPUDevice, CPUProgram
from .device import Device, canonicalize
from .disk import DiskDevice
from .errors import AllocationError, CompileError, DeviceError, RuntimeErrorBase
from .ffi import FFIError, ccall, cstruct
from .hcq2 import LinkedSteps, ProfileEvent
from .realize import CompiledKernel, Counters, bind_buffer, buffer_for, call_buffers, compile_body, counters, run_call

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "amd",
    "hcq2",
    "FFIError",
    "ccall",
    "cstruct",
    "AMDCompiler",
    "amd_toolchain",
    "Allocator",
    "AllocationError",
    "Buffer",
    "CCompiler",
    "CPUDevice",
    "CPUProgram",
    "CompileError",
    "CompiledDevice",
    "Compiler",
    "Device",
    "DeviceError",
    "DiskDevice",
    "LRUAllocator",
    "LinkedLinear",
    "LinkedSteps",
    "ProfileEvent",
    "RuntimeErrorBase",
    "CompiledKernel",
    "Counters",
    "bind_buffer",
    "buffer_for",
    "call_buffers",
    "cache_dir",
    "compile_body",
    "counters",
    "run_call",
    "run_linear",
    "canonicalize",
    "link_linear",
    "numpy_dtype",
]
