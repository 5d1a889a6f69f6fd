"""Devices, buffers, allocators and compile caches; running a LINEAR of CALLs; the hcq2 command-queue engine and linked
native batches; the AMD backend."""

from . import hcq2
from .allocator import Allocator, LRUAllocator
from .buffer import Buffer, numpy_dtype, poison_enabled, settle_deferred
from .buffer_registry import bind_buffer, bound_buffer, buffer_for
from .compiled import CompiledDevice
from .compiler import AMDCompiler, CCompiler, Compiler, amd_toolchain, cache_dir, find_c_compiler, installed_clangs, precompiled_header_flags
from .cpu import CPUDevice, CPUProgram, binary_program, c_program
from .debug import Counters, counters, debug_level
from .device import Device, canonicalize
from .disk import DiskDevice
from .errors import AllocationError, CompileError, DeviceError, RuntimeErrorBase
from .ffi import FFIError, ccall, cstruct
from .hcq2 import ProfileEvent, uses_queue_devices
from .host import prepare_cpu, runner_ready
from .kernel_cache import CompiledKernel, call_buffers, compile_body
from .lanes import LANE_VARIABLE, lane_buffers, split_lanes
from .runner import Linked, LinkedPart, Runner, defer_linear, link_linear, run_linear, runner_for

__version__ = "0.1.0"


def __getattr__(name: str):
    # the AMD backend (and the ISA tables its mock GPU loads) is imported when first used: a CPU run does not pay for it
    if name == "amd":
        import importlib

        return importlib.import_module(".amd", __name__)
    if name == "router_mfma_program":  # the MoE router's MFMA kernel (hcq_runtime.amd.router_mfma_program), built by amd-isa
        from .amd.router_mfma_program import router_mfma_program

        return router_mfma_program
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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
    "precompiled_header_flags",
    "CPUDevice",
    "CPUProgram",
    "c_program",
    "binary_program",
    "router_mfma_program",
    "CompileError",
    "CompiledDevice",
    "Compiler",
    "Device",
    "DeviceError",
    "DiskDevice",
    "LRUAllocator",
    "Linked",
    "LinkedPart",
    "Runner",
    "runner_for",
    "LANE_VARIABLE",
    "lane_buffers",
    "split_lanes",
    "ProfileEvent",
    "RuntimeErrorBase",
    "CompiledKernel",
    "Counters",
    "bind_buffer",
    "bound_buffer",
    "buffer_for",
    "call_buffers",
    "cache_dir",
    "find_c_compiler",
    "installed_clangs",
    "compile_body",
    "counters",
    "debug_level",
    "uses_queue_devices",
    "run_linear",
    "defer_linear",
    "settle_deferred",
    "prepare_cpu",
    "runner_ready",
    "canonicalize",
    "link_linear",
    "numpy_dtype",
    "poison_enabled",
]
