"""Exception types of the QCOM backend."""

from ..errors import DeviceError


class QCOMError(DeviceError):
    """Base class of the QCOM backend's errors."""


class UnsupportedGPUError(QCOMError):
    """The GPU is not an Adreno 6xx (the only generation whose CP packets this backend encodes)."""


class KGSLError(QCOMError):
    """The kgsl driver (real or mock) refused an ioctl or an mmap."""


class MalformedPacketError(QCOMError):
    """The (mock) CP met a packet it cannot execute; the message names the packet and its dword offset in the IB."""


class GPUFaultError(QCOMError):
    """Work on the (mock) GPU touched unmapped memory, waited forever, or a kernel failed."""
