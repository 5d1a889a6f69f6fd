"""What the runtime reports: counters of what ran, and the `DEBUG` level that makes it print."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass
class Counters:
    """What `run_linear` did since the last `reset()`: kernels launched, copies, seconds spent, compiles, and the
    estimated arithmetic ops and buffer bytes of the kernels launched (`ops`, `mem`: see uopir's codegen.estimates;
    they include TinyJit replays, which `kernels` leaves out: it counts launches a realize schedules);
    and `mem_used`, the bytes of device memory buffers hold now (allocations not yet freed; `reset()` leaves it)."""

    kernels: int = 0
    copies: int = 0
    seconds: float = 0.0
    compiles: int = 0
    ops: int = 0
    mem: int = 0
    mem_used: int = 0

    def reset(self) -> None:
        self.kernels, self.copies, self.seconds, self.compiles, self.ops, self.mem = 0, 0, 0.0, 0, 0, 0


counters = Counters()


def debug_level() -> int:
    return int(os.environ.get("DEBUG", "0") or 0)
