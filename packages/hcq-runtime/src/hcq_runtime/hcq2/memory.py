"""GPU memory as queue devices hand it out: a GPU virtual address, a size, a driver handle and a host view."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class GPUMemory:
    """An allocation in the GPU's virtual address space: `va`, `size`, the driver's `handle`, and `view` (uint8
    numpy array over the host mapping) when the memory is host-visible."""

    va: int
    size: int
    handle: int
    view: np.ndarray | None = None

    def offset(self, start: int, nbytes: int) -> GPUMemory:
        """The `nbytes` at `start` inside this allocation, sharing its memory and handle."""
        if start < 0 or start + nbytes > self.size:
            raise ValueError(f"{nbytes} bytes at {start} do not fit an allocation of {self.size} bytes")
        view = None if self.view is None else self.view[start:start + nbytes]
        return GPUMemory(self.va + start, nbytes, self.handle, view)
