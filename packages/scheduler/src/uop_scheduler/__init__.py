"""The lazy Tensor and its scheduler: tensor graphs become fused kernels run by hcq_runtime."""

from hcq_runtime import Device
from uopir import dtypes

from . import helpers, nn
from .context import Context
from .errors import (
    ArgumentError,
    BroadcastError,
    DTypeOverflowError,
    GradientError,
    SchedulerError,
    ShapeError,
    TensorIndexError,
    TensorRuntimeError,
    TensorTypeError,
    TensorWriteError,
)
from .function import FunctionError, function
from .jit import JitError, TinyJit
from .multi import ShardedTensor
from .schedule import Schedule, clear_schedule_cache
from .symbolic_sizes import Variable
from .tensor import Tensor

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "Tensor",
    "TinyJit",
    "Variable",
    "function",
    "FunctionError",
    "nn",
    "helpers",
    "JitError",
    "GradientError",
    "ShardedTensor",
    "dtypes",
    "Device",
    "Context",
    "Schedule",
    "clear_schedule_cache",
    "SchedulerError",
    "ShapeError",
    "BroadcastError",
    "TensorIndexError",
    "TensorTypeError",
    "TensorWriteError",
    "TensorRuntimeError",
    "ArgumentError",
    "DTypeOverflowError",
]
