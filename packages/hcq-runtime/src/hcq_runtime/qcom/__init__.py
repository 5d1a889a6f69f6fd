"""The QCOM backend: Adreno 6xx CP command streams submitted through kgsl, and a mock kgsl that checks and runs them.

`QCOMDevice` drives `QCOM` (/dev/kgsl-3d0) and `MOCKQCOM` (`MockKGSL`: a mock driver whose command processor parses
the real packet stream and runs each dispatch's kernel, compiled from the same OpenCL C by the host C compiler); it is
an hcq2 `QueueDevice`, so `run_linear` batches its calls into linked submits. Kernels opt into the IMAGE path with
`uopir.ImageDType` PARAMs (`uopir.dtypes.imagef` / `imageh`): uopir lowers their accesses to texel reads and writes,
the renderer writes them as read_image / write_image, and their buffers are allocated with the image as the
allocation option (rows at the driver's pitch, `pitch(image)`).
"""

from . import image, kgsl, packets
from .cl_compiler import CLCompiler
from .device import TIMESTAMP_DIVIDER, ImageMemory, LinkedCommands, QCOMAllocator, QCOMDevice, QCOMProgram, Signal, open_kgsl, ticks_to_us
from .errors import GPUFaultError, KGSLError, MalformedPacketError, QCOMError, UnsupportedGPUError
from .image import ImageArg, image_nbytes, image_pitch, imagef, imageh, pitch
from .mock_compiler import MockQCOMCompiler, build_lib
from .mock_gpu import Dispatch, MockCP, StateLoad, check_image_descriptor
from .mock_kgsl import MockKGSL
from .program_lib import QCOMProgramInfo, parse_lib
from .queue import HostCopyQueue, Image, QCOMComputeQueue, layout_kernargs
from .renderer import QCOMRenderer

__all__ = [
    "image", "kgsl", "packets",
    "CLCompiler", "MockQCOMCompiler", "build_lib",
    "TIMESTAMP_DIVIDER", "ImageMemory", "LinkedCommands", "QCOMAllocator", "QCOMDevice", "QCOMProgram", "Signal", "open_kgsl", "ticks_to_us",
    "GPUFaultError", "KGSLError", "MalformedPacketError", "QCOMError", "UnsupportedGPUError",
    "ImageArg", "image_nbytes", "image_pitch", "imagef", "imageh", "pitch",
    "Dispatch", "MockCP", "StateLoad", "check_image_descriptor", "MockKGSL",
    "QCOMProgramInfo", "parse_lib", "HostCopyQueue", "Image", "QCOMComputeQueue", "layout_kernargs", "QCOMRenderer",
]
