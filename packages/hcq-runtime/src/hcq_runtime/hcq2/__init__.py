"""hcq2: the command-queue engine. Calls on queue devices are batched into one submit per (device, queue), encoded
once into command buffers with patches, linked once, and replayed with only run-time patches written.

Generic pieces live here (`CommandBuffer` and `Sym` patches, `HWQueue` / `QueueDevice` interfaces, dependency tracking,
the runtime pool, staging, the compiled `Submitter` of linked batches, the engine); backends (`hcq_runtime.amd`,
`hcq_runtime.qcom`) implement the interfaces."""

from . import staging
from .cmdbuf import CommandBuffer, Patch, PatchKind, Sym, Word, link, qword, runtime
from .deps import DepsTracker
from .encode import EncodedBatch, enqueue_target
from .engine import QUEUE_RUNNER, QueueRunner, QueueSteps, compile_cache, copy_host, run_calls, uses_queue_devices
from .errors import HCQError, PatchError
from .hwqueue import COMPUTE, COPY, HWQueue, QueueDevice, QueueKind
from .linked import LinkedBatch
from .memory import GPUMemory
from .pool import RuntimePool
from .profile import ProfileEvent, profiling
from .submitter import SubmitCode, Submitter

__all__ = [
    "staging", "CommandBuffer", "Patch", "PatchKind", "Sym", "Word", "link", "qword", "runtime", "DepsTracker", "EncodedBatch",
    "enqueue_target", "QUEUE_RUNNER", "QueueRunner", "QueueSteps", "compile_cache", "copy_host", "run_calls", "uses_queue_devices",
    "HCQError", "PatchError", "COMPUTE", "COPY", "HWQueue", "QueueDevice", "QueueKind", "LinkedBatch", "GPUMemory", "RuntimePool",
    "Submitter", "SubmitCode",
    "ProfileEvent", "profiling",
]
