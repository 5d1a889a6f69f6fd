"""Exception types of the hcq2 engine."""

from ..errors import DeviceError


class HCQError(DeviceError):
    """Base class of the hcq2 engine's errors."""


class PatchError(HCQError):
    """A command buffer was patched without a value it needs, or with one that does not fit."""
