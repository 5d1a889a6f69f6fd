"""Running a LINEAR of CALLs: one runner per kind of device, behind the small interface defined here.

Every call belongs to the runner of its device's kind (`runner_for`):
- the host runner (`hcq_runtime.host`) launches the kernels of devices the host calls directly (CPU) and makes copies
  between memories the host reads and writes (CPU, DISK);
- the queue runner (`hcq_runtime.hcq2.engine`) enqueues the kernels and copies of devices with hardware queues (AMD,
  QCOM and their mocks) as batches, one submit per device and queue, and stages copies between them and host memory.

`defer_linear(linear, var_vals)` queues a LINEAR instead: its new kernels start compiling in the background, and the
queue runs (`settle_deferred`) before anything else runs and before the host touches a buffer's memory (a TinyJit
capture of a model's step realizes layer by layer, a kernel or two new in each realize: compiled one realize at a
time, the compiles of a cold start ran one after another, and none while the capture built its graphs).

`run_linear(linear, var_vals)` splits multi-device calls into one call per lane, compiles the LINEAR's new kernels in
parallel, then hands each run of consecutive calls of one runner to it (`Runner.run`). `link_linear(linear, inputs)`
has each runner link its runs once (`Runner.link` -> a `LinkedPart`); the parts in order are a `Linked` program,
replayed with new input buffers and variable values and nothing else done in Python per call.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from uopir import Ops, UOp

from .buffer import Buffer, deferred_work, settle_deferred
from .buffer_registry import buffer_for, device_for_call, strip_after
from .device import Device
from .errors import DeviceError
from .kernel_cache import compile_calls, start_compiles
from .lanes import split_lanes


class LinkedPart:
    """A run of one runner's calls linked for replays: `part(inputs, var_vals)` runs it with a replay's input buffers
    (all of the `Linked` program's inputs, in order) and variable values."""

    #: the variables the part reads at every run, by name
    variables: tuple[str, ...] = ()
    n_kernels: int = 0
    n_copies: int = 0
    #: estimated arithmetic ops and buffer bytes of the part's kernels (their `ProgramInfo.ops` / `mem`)
    n_ops: int = 0
    n_mem: int = 0
    #: queue submits per run
    submits: int = 0
    #: run-time words the last run patched into linked commands
    patches_written: int = 0

    @property
    def owned_buffers(self) -> list[Buffer]:
        """The buffers whose addresses are baked into the part (kept alive as long as it is)."""
        return []

    @property
    def refs(self) -> list[Any]:
        """Everything the linked part addresses (owned buffers, programs, device state, command memory)."""
        return list(self.owned_buffers)

    @property
    def runtime_sources(self) -> tuple[str, ...]:
        """What a run writes before patching linked commands (queue parts: inputs, variables, timelines)."""
        return ()

    @property
    def batches(self) -> list[Any]:
        """The linked command batches of a queue part."""
        return []

    def __call__(self, inputs: Sequence[Buffer], var_vals: Mapping[str, int]) -> None:
        raise NotImplementedError


class Runner:
    """What runs the calls of one kind of device: eagerly (`run`), or linked once for replays (`link`)."""

    #: whether the runner's memories are the host's own (a copy between such a memory and another runner's belongs to the
    #: other runner)
    host: bool = False

    def run(self, calls: Sequence[UOp], var_vals: Mapping[str, int]) -> None:
        """Run `calls` (this runner's, single-device, kernels already compiled where they could be) in order."""
        raise NotImplementedError

    def link(self, calls: Sequence[UOp], inputs: Sequence[UOp]) -> LinkedPart:
        """Link `calls` for replays; `inputs` are the BUFFERs whose storage each replay passes (in that order)."""
        raise NotImplementedError


_runners: dict[str, Runner] = {}


def runner_of(device: str) -> Runner:
    """The runner of the calls on `device`: the queue runner for devices with hardware queues, else the host runner."""
    if (runner := _runners.get(device)) is None:
        from .hcq2.engine import QUEUE_RUNNER  # noqa: PLC0415 (the runners import this interface)
        from .hcq2.hwqueue import QueueDevice  # noqa: PLC0415
        from .host import HOST_RUNNER  # noqa: PLC0415

        runner = _runners[device] = QUEUE_RUNNER if isinstance(Device[device], QueueDevice) else HOST_RUNNER
    return runner


def runner_for(call: UOp) -> Runner:
    """The runner of a CALL: its kernel's device's, or for a copy the queue runner when either side has queues."""
    call = strip_after(call)
    args = call.src[1:]
    if call.src[0].op is Ops.COPY and len(args) == 2:
        dest, src = runner_of(buffer_for(args[0]).device), runner_of(buffer_for(args[1]).device)
        return src if dest.host else dest
    return runner_of(device_for_call(args))


def _lanes(linear: UOp, what: str) -> list[UOp]:
    if linear.op is not Ops.LINEAR:
        raise DeviceError(f"{what} takes a LINEAR of CALLs, got {linear.op.name}")
    return [lane for call in linear.src for lane in split_lanes(call)]


def run_linear(linear: UOp, var_vals: Mapping[str, int] | None = None) -> None:
    """Run every CALL of `linear` in order, each run of consecutive calls of one runner by that runner (see
    `hcq_runtime.host` and `hcq_runtime.hcq2.engine` for what each does with them). Deferred LINEARs run first."""
    if deferred_work:
        settle_deferred()
    calls = _lanes(linear, "run_linear")
    compile_calls(calls)
    _run_calls(calls, var_vals)


def _run_calls(calls: list[UOp], var_vals: Mapping[str, int] | None) -> None:
    values = dict(var_vals or {})
    for runner, group in itertools.groupby(calls, key=runner_for):
        runner.run(list(group), values)


def defer_linear(linear: UOp, var_vals: Mapping[str, int] | None = None) -> None:
    """Queue `linear` to run later, in order with every LINEAR queued or run after it: when anything runs or the host
    reads or writes a buffer's memory, or at `settle_deferred()`. Its new kernels start compiling now, in the
    background, one compile per core. The caller keeps the buffers' meaning fixed until then (a queued LINEAR runs
    with the memory its BUFFERs are bound to when it runs)."""
    deferred_work.append((calls := _lanes(linear, "defer_linear"), dict(var_vals or {})))
    start_compiles(calls)  # compiled while the caller goes on (the queue waits for them when it runs)


def run_deferred() -> None:
    """Run the queued LINEARs in order (`settle_deferred`), their new kernels compiled first. They are taken off the
    queue before anything runs: a failing call drops the calls queued after it, as a LINEAR stops at its failing call."""
    work = deferred_work[:]
    deferred_work.clear()
    compile_calls([call for calls, _ in work for call in calls])
    for calls, values in work:
        _run_calls(calls, values)



class Linked:
    """A LINEAR linked for replays: `linked(input_buffers, {"var": value})` runs it with new inputs (in the order given
    to `link_linear`) and variable values. Its parts are the runners' linked runs, called in order."""

    def __init__(self, parts: Sequence[LinkedPart], n_inputs: int):
        self.parts = tuple(parts)
        self.n_inputs = n_inputs
        self.variables = tuple(dict.fromkeys(v for p in self.parts for v in p.variables))
        self.n_kernels = sum(p.n_kernels for p in self.parts)
        self.n_copies = sum(p.n_copies for p in self.parts)
        self.n_ops = sum(p.n_ops for p in self.parts)
        self.n_mem = sum(p.n_mem for p in self.parts)

    @property
    def owned_buffers(self) -> list[Buffer]:
        """The buffers whose addresses are baked into the linked program (kept alive as long as it is)."""
        return [b for p in self.parts for b in p.owned_buffers]

    @property
    def refs(self) -> list[Any]:
        """Everything the linked program addresses: owned buffers, programs, device state, command memory."""
        return [r for p in self.parts for r in p.refs]

    @property
    def submits(self) -> int:
        """Queue submits per run."""
        return sum(p.submits for p in self.parts)

    @property
    def patches_written(self) -> int:
        """Run-time words the last run patched into linked commands."""
        return sum(p.patches_written for p in self.parts)

    @property
    def runtime_sources(self) -> tuple[str, ...]:
        """What a run writes before patching linked commands: the inputs table, the variables, one timeline per device."""
        return tuple(dict.fromkeys(s for p in self.parts for s in p.runtime_sources))

    @property
    def batches(self) -> list[Any]:
        """The linked command batches, in run order."""
        return [b for p in self.parts for b in p.batches]

    def __call__(self, inputs: Sequence[Buffer], var_vals: Mapping[str, int] | None = None) -> None:
        if len(inputs) != self.n_inputs:
            raise DeviceError(f"this linked program takes {self.n_inputs} input buffers, got {len(inputs)}")
        if deferred_work:
            settle_deferred()
        values = var_vals or {}
        for part in self.parts:
            part(inputs, values)


def link_linear(linear: UOp, inputs: Sequence[UOp] = ()) -> Linked:
    """Link `linear` for replays: `linked(input_buffers, {"var": value})`.

    `inputs` are the BUFFER UOps whose storage changes between runs; every other buffer is owned by the linked program.
    Each run of consecutive calls of one runner is linked by that runner: CPU calls into one native batch program,
    calls on queue devices into command batches submitted once per device and queue per replay."""
    calls = _lanes(linear, "link_linear")
    if multi := [u for u in map(strip_after, inputs) if not isinstance(u.arg.device, str)]:
        raise DeviceError(f"a multi-device buffer on {multi[0].arg.device} cannot be a linked input: pass its lane buffers instead")
    compile_calls(calls)
    parts = [runner.link(list(group), inputs) for runner, group in itertools.groupby(calls, key=runner_for)]
    return Linked(parts, len(inputs))
