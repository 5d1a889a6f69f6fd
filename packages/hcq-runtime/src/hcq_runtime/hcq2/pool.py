"""`RuntimePool`: one device allocation that eager batches carve their command buffers and arguments from.

Carving bumps a pointer; when a request does not fit the rest of the pool, the device is synchronized (everything
carved earlier is done with) and carving starts again at the front. JIT captures never carve: their linked command
buffers are allocated for them and live as long as they do, so wrapping can never reach them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import HCQError

ALIGN = 256


@dataclass
class Carved:
    """A piece of the pool: its device address, size and host view."""

    va: int
    size: int
    view: np.ndarray


class RuntimePool:
    """A wrapping bump allocator over `device.rt_nbytes` bytes; `size` may be lowered (tests shrink it to force wraps)."""

    def __init__(self, device: Any):
        self.device = device
        self.memory = device.alloc_memory(device.rt_nbytes)
        self.size = device.rt_nbytes
        self.ptr = 0
        #: carves and wraps so far (tests and the benchmark read them)
        self.carves = 0
        self.wraps = 0

    def carve(self, nbytes: int) -> Carved:
        """`nbytes` of pool memory no queued work still uses."""
        need = -(-max(nbytes, 1) // ALIGN) * ALIGN
        if need > self.size:
            raise HCQError(f"{self.device.name}: {nbytes} bytes of commands exceed the runtime pool of {self.size}; raise rt_nbytes")
        if self.ptr + need > self.size:
            self.device.synchronize()
            self.ptr = 0
            self.wraps += 1
        start, self.ptr = self.ptr, self.ptr + need
        self.carves += 1
        view = self.memory.view
        assert view is not None
        return Carved(self.memory.va + start, need, view[start:start + need])

