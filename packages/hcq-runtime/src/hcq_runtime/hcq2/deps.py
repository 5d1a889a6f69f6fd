"""`DepsTracker`: which earlier work a new access has to wait for, by byte ranges per buffer.

Work on one queue runs in order (a FIFO), so it never waits for its own queue; across queues a write conflicts with
every overlapping access and a read with every overlapping write. Waits are reported as one (latest) point per other
queue, which is all a queue needs: a signal covers everything its queue did before it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass


@dataclass(frozen=True)
class Access:
    """Bytes [start, end) of one buffer, read or written by work item `point` on `queue`."""

    start: int
    end: int
    write: bool
    queue: Hashable
    point: int


class DepsTracker:
    """Records accesses per buffer and answers, for a new one, the latest conflicting point on each other queue."""

    def __init__(self) -> None:
        self._accesses: dict[Hashable, list[Access]] = {}

    def access(self, buffer: Hashable, start: int, end: int, write: bool, queue: Hashable, point: int) -> dict[Hashable, int]:
        """Record an access and return {other queue: latest point it must have finished} for the conflicts."""
        waits: dict[Hashable, int] = {}
        seen = self._accesses.setdefault(buffer, [])
        for prior in seen:
            if prior.queue == queue or not (write or prior.write) or prior.end <= start or end <= prior.start:
                continue
            waits[prior.queue] = max(waits.get(prior.queue, -1), prior.point)
        seen.append(Access(start, end, write, queue, point))
        return waits
