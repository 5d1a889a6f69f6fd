"""The interface the hcq2 engine drives: `HWQueue` (one hardware queue's command encoder) and `QueueDevice` (a device
with queues, signals, a timeline and memory the host can see).

A backend implements both (AMD: PM4 compute and SDMA copy queues; QCOM: the CP ring). The engine never looks at
packets: it asks a queue to encode commands whose addresses and values may be `Sym`s, and asks the device to link,
patch and submit the resulting command buffers.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Protocol

import numpy as np

from ..compiled import CompiledDevice
from .cmdbuf import CommandBuffer, Sym, Word
from .errors import HCQError
from .pool import RuntimePool
from .profile import ProfileEvent
from .submitter import SubmitCode


class QueueKind(StrEnum):
    """The kinds of hardware queue: programs go to COMPUTE, copies between buffers of one device to COPY (an AMD SDMA
    engine; QCOM has no copy queue). The one vocabulary of the engine, the backends and their drivers; members are
    their names as strings, so they key dicts and name patches ("signal:COMPUTE") as plain strings do."""

    COMPUTE = "COMPUTE"
    COPY = "COPY"


COMPUTE, COPY = QueueKind.COMPUTE, QueueKind.COPY


class Memory(Protocol):
    """Host-visible device memory: the address programs and queues use, its size, and a uint8 host view."""

    va: int
    size: int
    view: np.ndarray | None


class SignalLike(Protocol):
    """A value in host-visible memory that queues write when work completes and wait on."""

    address: int
    value: int


class HWQueue:
    """Commands for one hardware queue, encoded into `cmd`. Every address and value may be a `Sym` (a patch)."""

    def __init__(self) -> None:
        self.cmd = CommandBuffer()

    def wait(self, signal_address: int | Sym, value: Word) -> HWQueue:
        """Stall the queue until the 32-bit value at `signal_address` is >= `value`."""
        raise NotImplementedError

    def signal(self, signal_address: int | Sym, value: Word) -> HWQueue:
        """Once prior commands of this queue are done (their writes visible), write `value` at `signal_address`."""
        raise NotImplementedError

    def copy(self, dst: int | Sym, src: int | Sym, nbytes: int) -> HWQueue:
        """Copy `nbytes` between device addresses (copy queues only)."""
        raise NotImplementedError

    def timestamp(self, address: int | Sym) -> HWQueue:
        """Once prior commands are done, write the device clock (64 bits, `QueueDevice.timestamp_divider` ticks a
        microsecond) at `address` (8-byte aligned)."""
        raise NotImplementedError


class QueueDevice(CompiledDevice):
    """A `CompiledDevice` whose work goes through hardware queues; what the hcq2 engine needs from it.

    `timeline` is a signal only this device's batches advance; `timeline_value` is the value the next submit signals
    (so everything submitted is done once `timeline.value >= timeline_value - 1`)."""

    timeline: SignalLike
    timeline_value: int
    has_copy_queue: bool = True
    #: bytes of the runtime pool eager batches carve their command buffers and arguments from
    rt_nbytes: int = 4 << 20
    #: ticks of the clock `HWQueue.timestamp` writes per microsecond
    timestamp_divider: float = 1.0

    @functools.cached_property
    def rt_pool(self) -> RuntimePool:
        """The runtime pool eager batches carve from (made on first use)."""
        return RuntimePool(self)

    @functools.cached_property
    def _profile_events(self) -> list[ProfileEvent]:
        return []

    def profile_events(self) -> list[ProfileEvent]:
        """The kernels and copies of profiled batches (`PROFILE=1` or `DEBUG>=2` when they were encoded) in the order
        they ran, with their device times; the list itself, so `clear()` starts over."""
        return self._profile_events

    def hw_queue(self, kind: str) -> HWQueue:
        """A fresh encoder for a queue of `kind` (COMPUTE or COPY)."""
        raise NotImplementedError

    def queue_signal(self, kind: str) -> SignalLike:
        """The signal the `kind` queue writes at the points other queues wait for."""
        raise NotImplementedError

    def encode_kernel(self, queue: HWQueue, data: CommandBuffer, program: Any, address: Word, addresses: Sequence[Word],
                      values: Sequence[Word], global_size: tuple[int, int, int], local_size: tuple[int, int, int]) -> None:
        """Encode a launch of `program`, whose code starts at `address` (a link-time "prog:N" patch), over `global_size`
        workgroups of `local_size` items into `queue`. Its arguments go into `data`, whose device address is the link
        value "data" (so a kernarg pointer is `link("data") + offset`); `addresses` and `values` follow the program's
        globals and variables order."""
        raise NotImplementedError

    def program_address(self, program: Any) -> int:
        """The address a dispatch of `program` (as returned by `program(name, binary)`) starts at."""
        raise NotImplementedError

    def link_state(self, names: set[str]) -> tuple[dict[str, int], list[Any]]:
        """Link-time values of device state named in a command buffer (signal addresses, scratch), and the objects
        (memory) that must live as long as a command buffer addressing them."""
        raise NotImplementedError

    def alloc_memory(self, nbytes: int) -> Memory:
        """Persistent host-visible device memory (linked command buffers of JIT captures)."""
        raise NotImplementedError

    def free_memory(self, memory: Memory) -> None:
        """Release memory from `alloc_memory` (its commands must have finished)."""
        raise NotImplementedError

    def run_queue(self, kind: str, queue: HWQueue) -> None:
        """Submit a queue encoded with plain values (no patches) once, as it is."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait until everything submitted to the device has finished."""
        raise NotImplementedError

    def submit_commands(self, kind: str, memory: Memory, offset: int, nbytes: int) -> None:
        """Run the (linked, patched) commands at `memory` + `offset` on the `kind` queue and ring its doorbell."""
        raise NotImplementedError

    def submit_code(self, kind: str, memory: Memory, offset: int, nbytes: int, code: SubmitCode) -> None:
        """Emit into `code` the C statements of `submit_commands` for these commands (the compiled submitter's part).

        Every address and device variable goes through `code.const`, so the C depends only on the shape of the submit;
        a full ring ends the call with `code.stop("NO_ROOM")`, a refused submit with `code.stop("FAILED")` (errno in
        `detail[1]`)."""
        raise NotImplementedError

    def make_room(self, kind: str) -> None:
        """Wait until the `kind` queue's ring has room again (the compiled submitter found it full)."""
        raise NotImplementedError

    def submit_error(self, kind: str, errno: int) -> Exception:
        """The error to raise for a compiled submit the `kind` queue refused with `errno`."""
        return HCQError(f"{self.name}: the compiled submit to the {kind} queue failed: {os.strerror(errno)}")

    def wait(self, signal: SignalLike, value: int, timeout_ms: int = 30_000) -> None:
        """Block until `signal.value >= value`; raise the backend's hang error after `timeout_ms`."""
        raise NotImplementedError
