"""Text forms of a trace: one line per packet, JSON-ready dicts, and the per-instruction table.

By default the packets that carry no information a reader looks for (padding, clock ticks, register writes and
events: the seed's noise set) are hidden; `show_all=True` shows them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from . import packets as P

# Hidden unless asked for; RDNA4 variants are hidden with their RDNA3 name.
NOISE: frozenset[str] = frozenset({
    "NOP", "TS_DELTA_SHORT", "TS_WAVE_STATE", "TS_DELTA_OR_MARK", "TS_DELTA_S5_W2", "TS_DELTA_S5_W3", "TS_DELTA_S8_W3", "REG", "EVENT",
    "CDNA_MISC", "CDNA_REG_CS", "CDNA_REG_CS_PRIV", "CDNA_REG",
})  # fmt: skip

# Field shown for the clock packets only: elsewhere `delta` is bookkeeping already folded into `time`.
_SHOW_DELTA = frozenset({"TS_DELTA_OR_MARK", "TS_DELTA_OR_MARK_RDNA4"})


def is_noise(packet: P.Packet) -> bool:
    """True for packets hidden by default (the seed's noise set)."""
    return packet.name.removesuffix("_RDNA4") in NOISE


def _fields(packet: P.Packet) -> list[tuple[str, str]]:
    shown = [(f.name, packet.field_text(f.name)) for f in packet.FIELDS if f.name != "delta" or packet.name in _SHOW_DELTA]
    if isinstance(packet, P.WAVESTART | P.WAVESTART_RDNA4 | P.WAVEEND | P.WAVEEND_RDNA4):
        shown.append(("cu", str(packet.cu)))
    return shown


def _pairs(items: Iterable[P.Packet | tuple[P.Packet, Any]]) -> Iterator[tuple[P.Packet, Any]]:
    for item in items:
        yield (item, None) if isinstance(item, P.Packet) else item


def format_packet(packet: P.Packet, info: Any = None) -> str:
    """One line: time, packet name, fields, and the mapped instruction (an InstructionInfo) when given."""
    fields = " ".join(f"{name}={text}" for name, text in _fields(packet))
    line = f"{packet.time:>10}  {packet.name:<22} {fields}"
    if info is not None:
        line += f"  pc=0x{info.pc:x} {info.inst}"
    return line.rstrip()


def packet_lines(items: Iterable[P.Packet | tuple[P.Packet, Any]], show_all: bool = False) -> Iterator[str]:
    """Lines for packets or (packet, InstructionInfo | None) pairs, noise hidden unless `show_all`."""
    for packet, info in _pairs(items):
        if show_all or not is_noise(packet):
            yield format_packet(packet, info)


def print_packets(items: Iterable[P.Packet | tuple[P.Packet, Any]], show_all: bool = False, file: TextIO | None = None) -> None:
    """Print `packet_lines` (to stdout by default)."""
    for line in packet_lines(items, show_all):
        print(line, file=file)


def packet_record(packet: P.Packet, info: Any = None) -> dict[str, Any]:
    """A JSON-ready dict: time, type, every field as an int, and pc / inst when the packet maps to an instruction."""
    record: dict[str, Any] = {"time": packet.time, "type": packet.name, **packet.values()}
    if info is not None:
        record.update(pc=info.pc, wave=info.wave, inst=str(info.inst))
    return record


@dataclass(frozen=True)
class InstRow:
    """One instruction issue, as in rocprof's table: Duration is the cycles until the same wave's next issue (None
    for its last); Stall is None because an SQTT stream alone does not separate stall from issue cycles."""

    time: int
    pc: int
    inst: str
    type: str
    duration: int | None
    stall: int | None = None


INST_COLUMNS = ("Timestamp", "PC", "Instruction", "Type", "Duration", "Stall")


def _issue_type(packet: P.Packet) -> str:
    if "op" in packet.field_map:
        return packet.field_text("op")
    return {"VALUINST": "VALU", "CDNA_ISSUE": "ISSUE"}.get(packet.name, packet.name.removesuffix("_RDNA4").removeprefix("CDNA_"))


def inst_rows(mapped: Iterable[tuple[P.Packet, Any]]) -> list[InstRow]:
    """Rows of the instruction table from `map_insts` output, in trace order."""
    issues = [(packet, info) for packet, info in mapped if info is not None]
    next_time: dict[int, int] = {}
    durations: list[int | None] = []
    for packet, info in reversed(issues):
        following = next_time.get(info.wave)
        durations.append(None if following is None else following - packet.time)
        next_time[info.wave] = packet.time
    durations.reverse()
    return [InstRow(p.time, info.pc, str(info.inst), _issue_type(p), d) for (p, info), d in zip(issues, durations)]


def format_inst_table(rows: Iterable[InstRow]) -> str:
    """The instruction table as aligned plain text (the CLI draws it with rich when rich is installed)."""
    cells = [INST_COLUMNS] + [_row_cells(r) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(INST_COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _row_cells(row: InstRow) -> tuple[str, ...]:
    optional = ("" if value is None else str(value) for value in (row.duration, row.stall))
    return (str(row.time), f"0x{row.pc:x}", row.inst, row.type, *optional)
