"""Exception types of hcq_runtime."""


class RuntimeErrorBase(RuntimeError):
    """Base class of every error hcq_runtime raises on purpose."""


class DeviceError(RuntimeErrorBase):
    """A device name is unknown, unavailable, or was used in a way it does not support."""


class CompileError(RuntimeErrorBase):
    """The device compiler rejected a program; the message names the offending source line."""


class AllocationError(RuntimeErrorBase):
    """A buffer could not be allocated, or was used after being freed."""
