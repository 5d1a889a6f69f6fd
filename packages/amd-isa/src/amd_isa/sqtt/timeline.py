"""Chrome trace-event export of instruction issues, for Perfetto (ui.perfetto.dev) or chrome://tracing.

One process per trace (shader engine), one thread row per SIMD and wave, one slice per instruction issue. Time
is in shader clock cycles written as the viewer's microseconds. A slice lasts the architectural issue interval:
4 cycles on gfx9 (CDNA), 1 elsewhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from ..outputs import write_output
from . import packets as P
from .layouts import layout_of


def issue_cycles(target: str) -> int:
    """Cycles an instruction issue occupies: 4 on gfx9 / CDNA, 1 on RDNA."""
    return 4 if layout_of(target) == "cdna" else 1


def trace_events(mapped: Iterable[tuple[P.Packet, Any]], target: str, pid: int = 0, process_name: str = "SQTT") -> list[dict[str, Any]]:
    """Trace events for one trace's `map_insts` output: a slice per issue, plus process and row name metadata."""
    width = issue_cycles(target)
    rows: dict[tuple[int, int], int] = {}
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": process_name}}]
    for packet, info in mapped:
        if info is None:
            continue
        simd = getattr(packet, "simd", 0)
        key = (simd, info.wave)
        if key not in rows:
            rows[key] = tid = len(rows) + 1
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": f"SIMD:{simd} WAVE:{info.wave}"}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": simd * 64 + info.wave}})
        text = str(info.inst)
        events.append({
            "ph": "X", "name": text.split(" ")[0], "cat": packet.name, "pid": pid, "tid": rows[key], "ts": packet.time, "dur": width,
            "args": {"inst": text, "pc": f"0x{info.pc:x}", "packet": packet.name},
        })  # fmt: skip
    return events


def write_timeline(path: str | os.PathLike[str], events: list[dict[str, Any]]) -> None:
    """Write trace events as a Chrome trace JSON file, atomically (no half-written file on error); `-`: standard output."""
    document = {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"time_unit": "shader clock cycles"}}
    write_output(path, json.dumps(document).encode())
