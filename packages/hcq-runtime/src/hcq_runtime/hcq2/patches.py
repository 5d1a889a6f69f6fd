"""`RuntimePatches`: the run-time patches of a linked command buffer as arrays, written with a few numpy operations.

Every run-time value is one entry of a values vector (the inputs table, then the variables, then one timeline base
per device); a patch reads its entry, adds a constant, shifts, and lands as one or two dwords in device memory. A run
therefore costs the same few vector operations however many kernels the commands hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .cmdbuf import Patch
from .errors import PatchError

_MASK64 = (1 << 64) - 1


class RuntimePatches:
    """The run-time patches of one command buffer placed at byte `base` of `view` (a uint8 host view).

    `sources` maps each run-time name ("input:0", "var:n", "timeline:AMD") to its index in the values vector."""

    def __init__(self, view: np.ndarray, patches: Sequence[tuple[int, Patch]], sources: Mapping[str, int]):
        if unknown := sorted({p.what for _, p in patches} - sources.keys()):
            raise PatchError(f"no run-time source for {', '.join(map(repr, unknown))}: link the commands with every input and variable")
        self.words = view[:len(view) // 4 * 4].view(np.uint32)
        offsets = [base + p.offset for base, p in patches]
        if any(offset % 4 for offset in offsets):
            raise PatchError("run-time patches must be dword aligned")
        self.index = np.array([offset // 4 for offset in offsets], np.int64)
        self.source = np.array([sources[p.what] for _, p in patches], np.int64)
        self.add = np.array([p.sym.add & _MASK64 for _, p in patches], np.uint64)
        self.shift = np.array([p.sym.shift for _, p in patches], np.uint64)
        wide = np.array([p.sym.width == 8 for _, p in patches], bool)
        self.narrow, self.wide = np.nonzero(~wide)[0], np.nonzero(wide)[0]
        self.wide_high = self.index[self.wide] + 1

    def __len__(self) -> int:
        return len(self.index)

    def apply(self, values: np.ndarray) -> int:
        """Write every patch from `values` (uint64, indexed by source); returns how many were written."""
        if not len(self.index):
            return 0
        v = (values[self.source] + self.add) >> self.shift  # uint64 arithmetic wraps, so negative adds work
        narrow = v[self.narrow]
        if (narrow >> np.uint64(32)).any():
            raise PatchError(f"a run-time value {int(narrow.max()):#x} does not fit its 32-bit command word")
        self.words[self.index[self.narrow]] = narrow.astype(np.uint32)
        wide = v[self.wide]
        self.words[self.index[self.wide]] = (wide & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        self.words[self.wide_high] = (wide >> np.uint64(32)).astype(np.uint32)
        return len(self.index)
