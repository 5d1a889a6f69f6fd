"""`LinkedBatch`: an encoded batch placed in device memory with its link-time patches written.

Linking copies each queue's data (kernel arguments) and commands into one piece of host-visible device memory,
writes the link-time patches there once (owned buffer addresses, program addresses, the data address, device state
such as signal addresses and scratch) and turns the run-time patches into a `RuntimePatches`. Eager batches link into
the device's wrapping runtime pool; JIT captures link into memory of their own that lives as long as they do.
A run then writes only the run-time patches and submits: an INDIRECT_BUFFER (or a ring copy) per queue.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..buffer import Buffer
from ..device import Device
from .cmdbuf import PatchKind
from .encode import EncodedBatch
from .patches import RuntimePatches
from .pool import ALIGN


@dataclass
class _Part:
    device: Any
    kind: str
    memory: Any
    offset: int
    nbytes: int


class LinkedBatch:
    """An encoded batch linked to concrete buffers; `run(values)` patches and submits it.

    `sources` maps run-time names to their index in the values vector; `refs` is everything the linked commands
    address (owned buffers, programs, device state, the command memory) and therefore keep alive."""

    def __init__(self, encoded: EncodedBatch, owned: Sequence[Buffer], sources: Mapping[str, int], *, persistent: bool):
        self.encoded = encoded
        self.refs: list[Any] = [*owned, *encoded.programs]
        self.parts: list[_Part] = []
        self.plans: list[RuntimePatches] = []
        self.timelines = {name: sources[f"timeline:{name}"] for name in encoded.points}
        self._last: dict[str, int] = {}
        for queue in encoded.queues:
            dev = Device[queue.device]
            data_len = -(-len(queue.data) // ALIGN) * ALIGN
            total = data_len + len(queue.cmds)
            if persistent:
                memory = dev.alloc_memory(total)
                weakref.finalize(self, dev.free_memory, memory).atexit = False  # at exit the driver goes with the process
            else:
                memory = dev.rt_pool.carve(total)
            view = memory.view
            view[:len(queue.data)] = np.frombuffer(bytes(queue.data.data), np.uint8)
            view[data_len:total] = np.frombuffer(bytes(queue.cmds.data), np.uint8)
            names = queue.data.names(PatchKind.LINK) | queue.cmds.names(PatchKind.LINK)
            state, keep = dev.link_state({n for n in names if n != "data" and not n.startswith(("buf:", "prog:"))})
            self.refs += keep
            values = {"data": memory.va, **state}
            for name in names:
                kind, _, index = name.partition(":")
                if kind == "buf":
                    values[name] = owned[int(index)].address
                elif kind == "prog":
                    values[name] = dev.program_address(encoded.programs[int(index)])
            queue.data.link(values, into=view[:data_len])
            queue.cmds.link(values, into=view[data_len:total])
            rt = [(0, p) for p in queue.data.patches if p.kind is PatchKind.RUNTIME]
            rt += [(data_len, p) for p in queue.cmds.patches if p.kind is PatchKind.RUNTIME]
            self.plans.append(RuntimePatches(view, rt, sources))
            self.parts.append(_Part(dev, queue.kind, memory, data_len, len(queue.cmds)))

    @property
    def runtime_patches(self) -> int:
        """How many command words a run patches."""
        return sum(len(plan) for plan in self.plans)

    @property
    def command_bytes(self) -> int:
        """Bytes of commands and kernel arguments the batch submits."""
        return sum(part.offset + part.nbytes for part in self.parts)

    def run(self, values: np.ndarray) -> int:
        """Patch the run-time words from `values` (the timeline entries are filled here) and submit every queue.

        The previous run of these same commands must be done before they are patched again: that wait is the fence."""
        for name, end in self._last.items():
            dev = Device[name]
            dev.wait(dev.timeline, end)
        for name, points in self.encoded.points.items():
            dev = Device[name]
            base = dev.timeline_value
            values[self.timelines[name]] = base
            dev.timeline_value = base + points
            self._last[name] = base + points - 1
        written = sum(plan.apply(values) for plan in self.plans)
        for part in self.parts:
            part.device.submit_commands(part.kind, part.memory, part.offset, part.nbytes)
        return written
