"""Exception types of the AMD backend."""

from ..errors import DeviceError
from ..hcq2.errors import PatchError

__all__ = ["AMDError", "GPUFaultError", "KFDError", "MalformedPacketError", "PatchError", "QueueHangError"]


class AMDError(DeviceError):
    """Base class of the AMD backend's errors."""


class MalformedPacketError(AMDError):
    """The (mock) GPU met a PM4 or SDMA packet it cannot execute; the message names the packet and its ring offset."""


class QueueHangError(AMDError):
    """A signal did not reach its value in time: a queue is stuck (the message says which and at what packet)."""


class KFDError(AMDError):
    """The KFD driver (real or mock) refused a request."""


class GPUFaultError(AMDError):
    """Work on the (mock) GPU faulted: an unmapped address, or a kernel the emulator cannot run."""
