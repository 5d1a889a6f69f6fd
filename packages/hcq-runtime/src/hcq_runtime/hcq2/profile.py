"""Device timestamps of batches: when profiling is on (`PROFILE=1`, or `DEBUG>=2`), each batch's queues write the
device clock before and after every kernel and copy into a timestamp area the batch owns, and the engine turns them
into `ProfileEvent`s once the batch is done.

Profiling is decided when a batch is encoded (it is part of the encode cache key): a JIT capture keeps the choice it
was captured with. Without it nothing extra is encoded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..debug import debug_level


def profiling() -> bool:
    """Whether batches encoded now record device timestamps: `PROFILE` set (not 0), or `DEBUG>=2`."""
    return os.environ.get("PROFILE", "0") not in ("", "0") or debug_level() >= 2


@dataclass(frozen=True)
class ProfileEvent:
    """One kernel or copy of a batch as the device timed it: microseconds of the device's clock (`start_us`, `end_us`
    are comparable between events of one device, not across devices)."""

    device: str
    name: str
    start_us: float
    end_us: float

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us


@dataclass(frozen=True)
class Timed:
    """A command of an encoded queue whose time is recorded: its name and the timestamp slots before and after it."""

    name: str
    start: int
    end: int


def print_events(events: list[ProfileEvent]) -> None:
    """The `DEBUG=2` lines of timed commands, formatted as the host's per-call lines."""
    for event in events:
        print(f"*** {event.name:<40s} {event.duration_us:10.1f} us on {event.device}")
