"""The QCOM backend: Adreno 6xx CP command streams submitted through kgsl, and a mock kgsl that checks and runs them.

`QCOMDevice` drives `QCOM` (/dev/kgsl-3d0) and `MOCKQCOM` (`MockKGSL`: a mock driver whose command processor parses
the real packet stream and runs each dispatch's kernel, compiled from the same OpenCL C by the host C compiler); it is
an hcq2 `QueueDevice`, so `run_linear` batches its calls into linked submits.
"""

from . import kgsl, packets
from .cl_compiler import CLCompiler
from .device import TIMESTAMP_DIVIDER, LinkedCommands, QCOMAllocator, QCOMDevice, QCOMProgram, Signal, open_kgsl, ticks_to_us
from .errors import GPUFaultError, KGSLError, MalformedPacketError, QCOMError, UnsupportedGPUError
from .mock_compiler import MockQCOMCompiler, build_lib
from .mock_gpu import Dispatch, MockCP, StateLoad
from .mock_kgsl import MockKGSL
from .program import QCOMProgramInfo, parse_lib
from .queue import HostCopyQueue, Image, QCOMComputeQueue, layout_kernargs
from .renderer import QCOMRenderer

__all__ = [
    "kgsl", "packets",
    "CLCompiler", "MockQCOMCompiler", "build_lib",
    "TIMESTAMP_DIVIDER", "LinkedCommands", "QCOMAllocator", "QCOMDevice", "QCOMProgram", "Signal", "open_kgsl", "ticks_to_us",
    "GPUFaultError", "KGSLError", "MalformedPacketError", "QCOMError", "UnsupportedGPUError",
    "Dispatch", "MockCP", "StateLoad", "MockKGSL",
    "QCOMProgramInfo", "parse_lib", "HostCopyQueue", "Image", "QCOMComputeQueue", "layout_kernargs", "QCOMRenderer",
]
