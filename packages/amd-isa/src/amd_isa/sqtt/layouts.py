"""Trace layouts: which packet types a stream may hold and how a packet's first byte selects its type.

The seed decoder's rule: among the types of a layout, the one whose match covers the most bits wins; a byte no type
matches is a NOP. A stream starts as RDNA3; a LAYOUT_HEADER with layout 4 switches it to RDNA4, and one with any
layout other than 3 or 4 switches it to CDNA (CDNA streams begin with such a header).
"""

from __future__ import annotations

import numpy as np

from . import packets as P
from .errors import SqttArchError

_RDNA3_TYPES: tuple[type[P.Packet], ...] = (
    P.VALUINST, P.VMEMEXEC, P.ALUEXEC, P.IMMEDIATE, P.IMMEDIATE_MASK, P.WAVERDY, P.TS_DELTA_S8_W3, P.WAVEEND, P.WAVESTART,
    P.TS_DELTA_S5_W2, P.WAVEALLOC, P.TS_DELTA_S5_W3, P.PERF, P.UTILCTR, P.TS_DELTA_SHORT, P.NOP, P.TS_WAVE_STATE, P.EVENT,
    P.EVENT_BIG, P.REG, P.SNAPSHOT, P.TS_DELTA_OR_MARK, P.LAYOUT_HEADER, P.INST,
)  # fmt: skip

_RDNA4_REPLACES: dict[type[P.Packet], type[P.Packet]] = {
    P.WAVEEND: P.WAVEEND_RDNA4, P.WAVESTART: P.WAVESTART_RDNA4, P.TS_DELTA_S5_W2: P.TS_DELTA_S5_W2_RDNA4, P.WAVEALLOC: P.WAVEALLOC_RDNA4,
    P.TS_DELTA_S5_W3: P.TS_DELTA_S5_W3_RDNA4, P.PERF: P.PERF_RDNA4, P.TS_DELTA_OR_MARK: P.TS_DELTA_OR_MARK_RDNA4, P.INST: P.INST_RDNA4,
}  # fmt: skip

_CDNA_TYPES: tuple[type[P.Packet], ...] = (
    P.CDNA_MISC, P.CDNA_TIMESTAMP, P.CDNA_REG, P.CDNA_WAVESTART, P.CDNA_WAVEALLOC, P.CDNA_REG_CS, P.CDNA_WAVEEND, P.CDNA_EVENT,
    P.CDNA_EVENT_CS, P.CDNA_EVENT_GFX1, P.CDNA_INST, P.CDNA_INST_PC, P.CDNA_USERDATA, P.CDNA_ISSUE, P.CDNA_PERF, P.CDNA_REG_CS_PRIV,
    P.LAYOUT_HEADER,
)  # fmt: skip

LAYOUT_TYPES: dict[str, tuple[type[P.Packet], ...]] = {
    "rdna3": _RDNA3_TYPES,
    "rdna4": tuple(_RDNA4_REPLACES.get(t, t) for t in _RDNA3_TYPES),
    "cdna": _CDNA_TYPES,
}
LAYOUTS: tuple[str, ...] = tuple(LAYOUT_TYPES)

# Every packet class, indexed: the decoder works on these indices and numpy tables over them.
ALL_TYPES: tuple[type[P.Packet], ...] = tuple(dict.fromkeys(t for types in LAYOUT_TYPES.values() for t in types))
TYPE_INDEX: dict[type[P.Packet], int] = {t: i for i, t in enumerate(ALL_TYPES)}
PACKET_TYPES: dict[str, type[P.Packet]] = {t.name: t for t in ALL_TYPES}


def _classify_table(types: tuple[type[P.Packet], ...], fallback: type[P.Packet]) -> np.ndarray:
    """first byte -> index into ALL_TYPES, most specific match first."""
    by_specificity = sorted(types, key=lambda t: -t.MATCH[1])
    table = np.empty(256, dtype=np.int16)
    for byte in range(256):
        chosen = next((t for t in by_specificity if byte & ((1 << t.MATCH[1]) - 1) == t.MATCH[0]), fallback)
        table[byte] = TYPE_INDEX[chosen]
    return table


CLASSIFY: dict[str, np.ndarray] = {
    "rdna3": _classify_table(LAYOUT_TYPES["rdna3"], P.NOP),
    "rdna4": _classify_table(LAYOUT_TYPES["rdna4"], P.NOP),
    "cdna": _classify_table(LAYOUT_TYPES["cdna"], P.LAYOUT_HEADER),
}


def classify(first_byte: int, layout: str) -> type[P.Packet]:
    """The packet type that a packet starting with `first_byte` has in `layout`."""
    return ALL_TYPES[int(CLASSIFY[layout][first_byte & 0xFF])]


def layout_after_header(layout_field: int, current: str) -> str:
    """The layout a stream continues in after a LAYOUT_HEADER whose `layout` field is `layout_field`."""
    if layout_field == 4:
        return "rdna4"
    if layout_field != 3:
        return "cdna"
    return current


_FAMILY_OF_ARCH = {"rdna3": "rdna3", "rdna4": "rdna4", "cdna": "cdna", "cdna3": "cdna", "cdna4": "cdna"}


def layout_of(arch: str) -> str:
    """The trace layout of an architecture: 'rdna3' / 'rdna4' / 'cdna', or a target such as 'gfx1100', 'gfx1201', 'gfx950'."""
    name = arch.strip().lower()
    if name in _FAMILY_OF_ARCH:
        return _FAMILY_OF_ARCH[name]
    if name.startswith("gfx"):
        base = name[3:].split(":")[0]
        if base.startswith("11"):
            return "rdna3"
        if base.startswith("12"):
            return "rdna4"
        if len(base) == 3 and base.startswith("9"):
            return "cdna"
    raise SqttArchError(f"unknown architecture {arch!r} for SQTT; use rdna3, rdna4, cdna or a target like gfx1100, gfx1200, gfx950")
