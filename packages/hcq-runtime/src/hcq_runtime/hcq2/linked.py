"""`LinkedBatch`: an encoded batch placed in device memory with its link-time patches written.

Linking copies each queue's data (kernel arguments) and commands into one piece of host-visible device memory,
writes the link-time patches there once (owned buffer addresses, program addresses, the data address, device state
such as signal addresses and scratch). Eager batches link into the device's wrapping runtime pool and run once: Python
writes their few run-time words (timelines, variables) and calls each device's `submit_commands`. JIT captures link
into memory of their own that lives as long as they do, and compile their run-time half into a `Submitter`: a replay
is the fence wait, the timeline bases and one native call that patches and submits every queue.

A profiled batch's queues also own a timestamp area after their commands ("stamps"); `profile()` waits for the run
and reads it.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..buffer import Buffer
from .cmdbuf import Patch, PatchKind
from .encode import EncodedBatch
from .pool import ALIGN
from .profile import ProfileEvent
from .submitter import PartSpec, Submitter


class LinkedBatch:
    """An encoded batch linked to concrete buffers; `run(values)` patches and submits it.

    `sources` maps run-time names to their index in the values vector; `refs` is everything the linked commands
    address (owned buffers, programs, device state, the command memory) and therefore keep alive. `persistent`
    batches (JIT captures) own their memory and compile their submit; the others carve from the runtime pool."""

    def __init__(self, encoded: EncodedBatch, owned: Sequence[Buffer], sources: Mapping[str, int], *, persistent: bool):
        self.encoded = encoded
        self.refs: list[Any] = [*owned, *encoded.programs]
        self.parts: list[PartSpec] = []
        patches: list[tuple[int, Patch]] = []  # (host address of the patched buffer, run-time patch)
        self.timelines = {name: sources[f"timeline:{name}"] for name in encoded.points}
        self._last: dict[str, int] = {}
        self._stamps: list[np.ndarray] = []  # per queue: its timestamp slots (uint64 host view)
        #: whether the batch records device timestamps (it was encoded while profiling)
        self.profiled = any(queue.timed for queue in encoded.queues)
        for queue in encoded.queues:
            dev = encoded.devices[queue.device]
            data_len = -(-len(queue.data) // ALIGN) * ALIGN
            stamps_at = data_len + -(-len(queue.cmds) // 8) * 8
            total = stamps_at + 8 * queue.stamps
            if persistent:
                memory = dev.alloc_memory(total)
                weakref.finalize(self, dev.free_memory, memory).atexit = False  # at exit the driver goes with the process
            else:
                memory = dev.rt_pool.carve(total)
            view = memory.view
            view[:len(queue.data)] = np.frombuffer(bytes(queue.data.data), np.uint8)
            view[data_len:data_len + len(queue.cmds)] = np.frombuffer(bytes(queue.cmds.data), np.uint8)
            view[stamps_at:total] = 0
            self._stamps.append(view[stamps_at:total].view(np.uint64))
            names = queue.data.names(PatchKind.LINK) | queue.cmds.names(PatchKind.LINK)
            state, keep = dev.link_state({n for n in names if n not in ("data", "stamps") and not n.startswith(("buf:", "prog:"))})
            self.refs += keep
            values = {"data": memory.va, "stamps": memory.va + stamps_at, **state}
            for name in names:
                kind, _, index = name.partition(":")
                if kind == "buf":
                    values[name] = owned[int(index)].address
                elif kind == "prog":
                    values[name] = dev.program_address(encoded.programs[int(index)])
            queue.data.link(values, into=view[:data_len])
            queue.cmds.link(values, into=view[data_len:data_len + len(queue.cmds)])
            host = view.ctypes.data
            patches += [(host, p) for p in queue.data.patches if p.kind is PatchKind.RUNTIME]
            patches += [(host + data_len, p) for p in queue.cmds.patches if p.kind is PatchKind.RUNTIME]
            self.parts.append(PartSpec(dev, queue.kind, memory, data_len, len(queue.cmds)))
        #: patches and submits every run: compiled for replays, from Python for an eager batch (which runs once)
        self.submit: Submitter | PythonSubmit = Submitter(patches, self.parts, sources) if persistent else \
            PythonSubmit(encoded, self.parts, sources)

    @property
    def command_bytes(self) -> int:
        """Bytes of commands and kernel arguments the batch submits."""
        return sum(part.offset + part.nbytes for part in self.parts)

    def profile(self) -> list[ProfileEvent]:
        """Wait for the last run and return its kernels and copies with their device times (none unless `profiled`)."""
        self._wait_last_run()
        events = []
        for queue, stamps in zip(self.encoded.queues, self._stamps, strict=True):
            divider = self.encoded.devices[queue.device].timestamp_divider
            events += [ProfileEvent(queue.device, t.name, int(stamps[t.start]) / divider, int(stamps[t.end]) / divider) for t in queue.timed]
        order = {name: i for i, name in enumerate(self.encoded.points)}
        return sorted(events, key=lambda e: (order[e.device], e.start_us))  # each device's in the order its clock saw them

    def _wait_last_run(self) -> None:
        """Block until every device has passed the last timeline point of the previous run."""
        for name, end in self._last.items():
            dev = self.encoded.devices[name]
            dev.wait(dev.timeline, end)

    def run(self, values: np.ndarray) -> int:
        """Patch the run-time words from `values` (the timeline entries are filled here) and submit every queue; return
        how many words were patched.

        The previous run of these same commands must be done before they are patched again: that wait is the fence.
        A run that fails before its first submit (a value that does not fit, a refused ioctl) leaves the timelines as
        they were."""
        self._wait_last_run()
        devices = self.encoded.devices
        before = {name: devices[name].timeline_value for name in self.encoded.points}
        last = dict(self._last)
        for name, points in self.encoded.points.items():
            values[self.timelines[name]] = before[name]
            devices[name].timeline_value = before[name] + points
            self._last[name] = before[name] + points - 1
        try:
            return self.submit(values)
        except Exception:
            if not self.submit.submitted:  # nothing reached a queue: the run did not happen
                for name, value in before.items():
                    devices[name].timeline_value = value
                self._last = last
            raise


class PythonSubmit:
    """The run of an eager batch: its few run-time words (variables, timelines) written with `CommandBuffer.patch`,
    then each device's `submit_commands`. Same interface as `Submitter`."""

    def __init__(self, encoded: EncodedBatch, parts: Sequence[PartSpec], sources: Mapping[str, int]):
        self.encoded, self.parts, self.sources = encoded, parts, sources
        #: parts the last call submitted
        self.submitted = 0

    def __call__(self, values: np.ndarray) -> int:
        named = {name: int(values[index]) for name, index in self.sources.items()}
        self.submitted = written = 0
        for queue, part in zip(self.encoded.queues, self.parts, strict=True):
            view = part.memory.view
            written += queue.data.patch(named, into=view[:part.offset])
            written += queue.cmds.patch(named, into=view[part.offset:part.offset + part.nbytes])
            part.device.submit_commands(part.kind, part.memory, part.offset, part.nbytes)
            self.submitted += 1
        return written
