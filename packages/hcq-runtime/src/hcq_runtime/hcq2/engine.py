"""The hcq2 engine: the queue runner. Calls on queue devices run as batches, eagerly or linked once for replays.

The queue runner (`QueueRunner`, see `hcq_runtime.runner`) gets runs of calls on devices with hardware queues, and of
copies between such a device and any other memory. Within a run, consecutive enqueueable calls
(`encode.enqueue_target`) are one batch, submitted as one command buffer per (device, queue); a copy between a queue
device and host memory goes through the staging ring (`staging`), one between two queue devices through the host.

- `run` (eager): each batch is described, encoded (cached by its structural key in `compile_cache`: new buffers of the
  same shapes reuse the encoding), linked into the device's runtime pool with every address baked in, and run.
- `link` (JIT): the batches are linked once into memory of their own, the given input buffers read through the inputs
  table; `QueueSteps(inputs, var_vals)` then writes the inputs table and the variables into the values vector and calls
  each batch's compiled `Submitter`, which patches and submits. No encoding, no pool.

Profiled batches (see `profile`) are waited for after each run: their kernels and copies are appended to each
device's `profile_events()` and, with `DEBUG>=2`, printed one line each with its device time.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from uopir import Ops, UOp

from ..buffer import Buffer, check_copy
from ..buffer_registry import bind_buffer, buffer_for, strip_after
from ..debug import counters, debug_level
from ..errors import DeviceError
from ..runner import LinkedPart, Runner
from . import staging
from .encode import Described, EncodedBatch, describe, encode, encode_launch, enqueue_target, queue_device
from .errors import HCQError
from .hwqueue import QueueDevice
from .linked import LinkedBatch
from .profile import print_events

#: structural batch key -> encoded batch (the "compile cache": a hit only links)
compile_cache: dict[tuple, EncodedBatch] = {}


def is_queue_call(call: UOp) -> bool:
    """Whether `call` is enqueued on a queue device (else it is a host step)."""
    return enqueue_target(call) is not None


def uses_queue_devices(linear: UOp) -> bool:
    """Whether any call of `linear` touches a queue device (so the queue runner runs part of it)."""
    for call in linear.src:
        for arg in strip_after(call).src[1:]:
            node = strip_after(arg)
            if node.op is Ops.BUFFER and any(queue_device(d) is not None for d in to_tuple(node.arg.device)):
                return True
    return False


def to_tuple(device: str | tuple[str, ...]) -> tuple[str, ...]:
    return device if isinstance(device, tuple) else (device,)


def copy_host(dest: Buffer, src: Buffer) -> None:
    """A copy the queues cannot do alone: staged when exactly one side is a queue device, else through the host."""
    check_copy(dest, src)
    dst_dev, src_dev = queue_device(dest.device), queue_device(src.device)
    if dst_dev is not None and src_dev is None:
        staging.copy_in(dst_dev, dest.ensure_allocated().address, memoryview(src.as_bytes()))
    elif src_dev is not None and dst_dev is None:
        out = bytearray(src.nbytes)
        staging.copy_out(src_dev, memoryview(out), src.ensure_allocated().address)
        dest.copyin(out)
    else:
        dest.copy_from(src)


def _host_copy(call: UOp) -> UOp:
    """`call`, which the queues cannot enqueue: it must be a copy (a host kernel belongs to the host runner)."""
    call = strip_after(call)
    if call.src[0].op is not Ops.COPY:
        raise HCQError(f"the queue runner got a call it cannot enqueue: {call.src[0].op.name} on the host")
    return call


def _host_step(call: UOp) -> None:
    """A copy the queues cannot make alone (see `copy_host`)."""
    call = _host_copy(call)
    copy_host(buffer_for(call.src[1]), buffer_for(call.src[2]))
    counters.copies += 1


def _steps(calls: Sequence[UOp]) -> list[tuple[bool, list[UOp]]]:
    """Calls grouped: runs of enqueueable calls (batches) and host copies."""
    return [(queued, list(group)) for queued, group in itertools.groupby(calls, key=is_queue_call)]


def _encoded(calls: Sequence[UOp], inputs: Mapping[UOp, int]) -> tuple[EncodedBatch, Described]:
    described = describe(calls, inputs)
    if (encoded := compile_cache.get(described.key)) is None:
        encoded = compile_cache[described.key] = encode(described)
    return encoded, described


def _sources(n_inputs: int, variables: Sequence[str], devices: Sequence[str]) -> dict[str, int]:
    names = [f"input:{i}" for i in range(n_inputs)] + [f"var:{v}" for v in variables] + [f"timeline:{d}" for d in devices]
    return {name: i for i, name in enumerate(names)}


def run_calls(calls: Sequence[UOp], var_vals: Mapping[str, int] | None = None) -> None:
    """Run calls eagerly: batches through the queues (linked into the runtime pool), host copies staged."""
    values_in = dict(var_vals or {})
    for queued, group in _steps(calls):
        if not queued:
            for call in group:
                _host_step(call)
            continue
        encoded, described = _encoded(group, {})
        sources = _sources(0, encoded.variables, list(encoded.points))
        linked = LinkedBatch(encoded, described.owned, sources, persistent=False)
        start = time.perf_counter()
        linked.run(_values_vector(sources, {**described.bound, **values_in}))
        _record(linked)
        counters.kernels += encoded.n_kernels
        counters.copies += encoded.n_copies
        counters.ops += encoded.n_ops
        counters.mem += encoded.n_mem
        counters.seconds += time.perf_counter() - start


def launch_program(dev: QueueDevice, program: Any, addresses: Sequence[int], values: Sequence[int], global_size: tuple[int, int, int],
                   local_size: tuple[int, int, int], *, wait: bool = True) -> None:
    """Run one loaded program on a queue device now, over raw device addresses: a batch of one call (`encode_launch`),
    linked into the runtime pool and submitted like any eager batch; with `wait`, return once it has finished. What a
    queue device's `program.launch(...)` does."""
    encoded = encode_launch(dev, program, addresses, values, global_size, local_size)
    sources = _sources(0, (), [dev.name])
    linked = LinkedBatch(encoded, [], sources, persistent=False)
    start = time.perf_counter()
    linked.run(np.zeros(len(sources), np.uint64))
    _record(linked)
    counters.kernels += 1
    counters.seconds += time.perf_counter() - start
    if wait:
        dev.synchronize()


def _record(batch: LinkedBatch) -> None:
    """After a run of a profiled batch: wait for it, keep its events on their devices, print them at DEBUG>=2."""
    if not batch.profiled:
        return
    events = batch.profile()
    for event in events:
        batch.encoded.devices[event.device].profile_events().append(event)
    if debug_level() >= 2:
        print_events(events)


def _values_vector(sources: Mapping[str, int], var_vals: Mapping[str, int]) -> np.ndarray:
    """The values vector of an eager batch: only variables (its addresses are baked in; timelines are filled by run)."""
    values = np.zeros(len(sources), np.uint64)
    for name, index in sources.items():
        if name.startswith("var:"):
            if name[4:] not in var_vals:
                raise DeviceError(f"variable {name[4:]} is unbound (no value): bind it or pass it in var_vals")
            values[index] = var_vals[name[4:]] & ((1 << 64) - 1)
    return values


class QueueSteps(LinkedPart):
    """A run of the queue runner's calls linked for replays: its batches linked into memory of their own (see the module
    docstring), host copies between them staged at each run."""

    def __init__(self, calls: Sequence[UOp], inputs: Sequence[UOp]):
        self.n_inputs = len(inputs)
        input_index = {strip_after(u): i for i, u in enumerate(inputs)}
        # host copies read inputs through stand-in BUFFERs bound to each run's input buffers
        self._standins = [UOp.new_buffer(u.arg.device, u.arg.size, u.arg.dtype) for u in map(strip_after, inputs)]
        standin_map = dict(zip(map(strip_after, inputs), self._standins, strict=True))
        self.steps: list[tuple[bool, Any]] = []
        self._batches: list[LinkedBatch] = []
        bound: dict[str, int] = {}
        variables: dict[str, None] = {}
        encoded_steps = []
        for queued, group in _steps(calls):
            if queued:
                encoded, described = _encoded(group, input_index)
                bound.update(described.bound)
                variables.update(dict.fromkeys(encoded.variables))
                encoded_steps.append((encoded, described))
            else:
                group = [_host_copy(c) for c in group]
                encoded_steps.append(([c.substitute(standin_map) if standin_map else c for c in group], None))
        devices = list(dict.fromkeys(d for enc, desc in encoded_steps if desc is not None for d in enc.points))
        self.variables = tuple(variables)
        self._bound = bound
        self._sources = _sources(self.n_inputs, self.variables, devices)
        for item, described in encoded_steps:
            if described is None:
                self.steps.append((False, item))
                continue
            batch = LinkedBatch(item, described.owned, self._sources, persistent=True)
            self._batches.append(batch)
            self.steps.append((True, batch))
        self._values = np.zeros(len(self._sources), np.uint64)
        self.n_kernels = sum(b.encoded.n_kernels for b in self._batches)
        self.n_ops = sum(b.encoded.n_ops for b in self._batches)
        self.n_mem = sum(b.encoded.n_mem for b in self._batches)
        self.n_copies = sum(b.encoded.n_copies for b in self._batches) + sum(len(group) for queued, group in self.steps if not queued)

    @property
    def batches(self) -> list[LinkedBatch]:
        return self._batches

    @property
    def owned_buffers(self) -> list[Buffer]:
        return [r for r in self.refs if isinstance(r, Buffer)]

    @property
    def refs(self) -> list[Any]:
        return [r for b in self._batches for r in b.refs]

    @property
    def runtime_sources(self) -> tuple[str, ...]:
        return tuple(self._sources)

    @property
    def submits(self) -> int:
        return sum(len(b.parts) for b in self._batches)

    def __call__(self, inputs: Sequence[Buffer], var_vals: Mapping[str, int]) -> None:
        values = self._values
        for i, buf in enumerate(inputs):
            values[i] = buf.ensure_allocated().address
        given = {**self._bound, **var_vals}
        for i, name in enumerate(self.variables):
            if name not in given:
                raise DeviceError(f"variable {name} is unbound (no value): pass it in var_vals")
            values[self.n_inputs + i] = given[name] & ((1 << 64) - 1)
        for standin, buf in zip(self._standins, inputs, strict=True):
            bind_buffer(standin, buf)
        self.patches_written = 0
        for queued, step in self.steps:
            if queued:
                self.patches_written += step.run(values)
                _record(step)
            else:
                for call in step:
                    _host_step(call)


class QueueRunner(Runner):
    """Runs the calls of queue devices (see the module docstring)."""

    def run(self, calls: Sequence[UOp], var_vals: Mapping[str, int]) -> None:
        run_calls(calls, var_vals)

    def link(self, calls: Sequence[UOp], inputs: Sequence[UOp]) -> QueueSteps:
        return QueueSteps(calls, inputs)


QUEUE_RUNNER = QueueRunner()

__all__ = ["compile_cache", "launch_program", "run_calls", "QueueRunner", "QueueSteps", "QUEUE_RUNNER", "copy_host", "is_queue_call",
           "uses_queue_devices"]
