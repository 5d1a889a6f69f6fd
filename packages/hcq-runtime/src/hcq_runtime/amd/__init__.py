"""The AMD backend's hardware-facing half: PM4 / SDMA command buffers with patches, the KFD driver interface (real
/dev/kfd and a mock), a mock GPU that executes the packet streams (kernels in the amd-isa emulator), and a device."""

from ..hcq2.cmdbuf import CommandBuffer, Patch, PatchKind, Sym, link, qword, runtime
from . import pm4, regs, sdma
from .device import AMDAllocator, AMDDevice, AMDProgram, Signal, open_driver
from .driver import Doorbell, Driver, GPUMemory, QueueDesc, QueueKind
from .errors import AMDError, GPUFaultError, KFDError, MalformedPacketError, PatchError, QueueHangError
from .kfd import KFDDriver
from .loader import LoadedImage, load_image
from .mock_gpu import MockGPU, TraceEvent
from .mock_kfd import MockKFD
from .queue import AMDComputeQueue, AMDCopyQueue, ProgramInfo

__all__ = [
    "pm4", "regs", "sdma",
    "CommandBuffer", "Patch", "PatchKind", "Sym", "link", "runtime", "qword",
    "AMDAllocator", "AMDDevice", "AMDProgram", "Signal", "open_driver",
    "Doorbell", "Driver", "GPUMemory", "QueueDesc", "QueueKind",
    "AMDError", "GPUFaultError", "KFDError", "MalformedPacketError", "PatchError", "QueueHangError",
    "KFDDriver", "LoadedImage", "load_image", "MockGPU", "MockKFD", "TraceEvent",
    "AMDComputeQueue", "AMDCopyQueue", "ProgramInfo",
]
