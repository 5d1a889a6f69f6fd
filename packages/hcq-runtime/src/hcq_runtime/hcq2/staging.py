"""Copies between a queue device and host memory it cannot address, staged through a ring of staging slots.

The staging area is `STAGING_SIZE` bytes of host-visible device memory split into `STAGING_SLOTS` slots (module
settings, so tests can shrink them). A copy in fills a slot from the host and queues a device copy out of it; a slot is
refilled only once the copy that last read it has signalled. A copy out queues device copies into up to
`STAGING_SLOTS` slots ahead and drains them to the host in order. Either way the bytes arrive exactly as sent.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .hwqueue import COPY, Memory

STAGING_SIZE, STAGING_SLOTS = 4 << 20, 2

_areas: dict[str, Any] = {}


def _area(device: Any) -> tuple[Memory, int]:
    """The device's staging memory (reallocated when STAGING_SIZE changed) and the size of one slot."""
    slot = STAGING_SIZE // STAGING_SLOTS
    memory = _areas.get(device.name)
    if memory is None or memory.size < STAGING_SIZE:
        memory = _areas[device.name] = device.alloc_memory(STAGING_SIZE)
    return memory, slot


def queue_copy(device: Any, dst: int, src: int, nbytes: int) -> int:
    """Queue one device copy after all earlier work; returns the timeline value that says it is done."""
    value = device.timeline_value
    device.timeline_value += 1
    queue = device.hw_queue(COPY).wait(device.timeline.address, value - 1).copy(dst, src, nbytes).signal(device.timeline.address, value)
    device.run_queue(COPY, queue)
    return value


def copy_in(device: Any, dst: int, data: memoryview) -> None:
    """Copy host bytes `data` to device address `dst` through the staging slots."""
    memory, slot = _area(device)
    view = memory.view
    assert view is not None
    done = [0] * STAGING_SLOTS
    for chunk, start in enumerate(range(0, data.nbytes, slot)):
        index, nbytes = chunk % STAGING_SLOTS, min(slot, data.nbytes - start)
        device.wait(device.timeline, done[index])  # the copy that last read this slot has finished
        view[index * slot:index * slot + nbytes] = data[start:start + nbytes]
        done[index] = queue_copy(device, dst + start, memory.va + index * slot, nbytes)


def copy_out(device: Any, out: memoryview, src: int) -> None:
    """Copy `out.nbytes` bytes from device address `src` into host memory `out` through the staging slots."""
    memory, slot = _area(device)
    view = memory.view
    assert view is not None
    pending: deque[tuple[int, int, int, int]] = deque()

    def drain() -> None:
        value, index, start, nbytes = pending.popleft()
        device.wait(device.timeline, value)
        out[start:start + nbytes] = view[index * slot:index * slot + nbytes]

    for chunk, start in enumerate(range(0, out.nbytes, slot)):
        if len(pending) == STAGING_SLOTS:
            drain()
        index, nbytes = chunk % STAGING_SLOTS, min(slot, out.nbytes - start)
        pending.append((queue_copy(device, memory.va + index * slot, src + start, nbytes), index, start, nbytes))
    while pending:
        drain()
