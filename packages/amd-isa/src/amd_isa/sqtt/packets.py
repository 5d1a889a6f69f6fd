"""SQTT packet types: one class per packet layout, with its match bits, size in nibbles and fields.

A packet is a little-endian run of 4-bit nibbles. Its low bits select the type (the most specific match wins,
see `layouts.py`); the type fixes the size, and the fields are bit ranges of the packet's raw value. Layouts and
names follow the seed decoder (tinygrad's `renderer/amd/sqtt.py`): RDNA3 names are plain, RDNA4 variants whose
layout differs carry `_RDNA4`, CDNA packets a `CDNA_` prefix.

Packets are immutable (`raw`, `time`) pairs, a tuple subclass per type, whose fields are computed on access: the
decoder builds them with one C-level call each, so iterating a decoded trace costs little more than the loop itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from operator import itemgetter
from typing import Any, ClassVar

from .enums import AluSrc, InstOp, InstOpCDNA, InstOpRDNA4, MemSrc, op_name
from .errors import SqttEncodeError


@dataclass(frozen=True)
class Field:
    """A named bit range `[hi:lo]` of a packet; `enum` names the values when they are an enumeration."""

    name: str
    hi: int
    lo: int
    enum: type[IntEnum] | None = None

    @property
    def mask(self) -> int:
        """The field's value mask (before shifting)."""
        return (1 << (self.hi - self.lo + 1)) - 1


# Payloads that read better in hex: register values, masks, addresses, raw counter words.
_HEX_FIELDS = frozenset({"snap", "val32", "regdata", "pc", "data", "mask", "inst", "ctr", "timestamp"})


def _field_getter(lo: int, mask: int) -> property:
    return property(lambda self: (self[0] >> lo) & mask)


class TimeRule:
    """How a packet's delta field moves the trace clock (names for `Packet.TIME_RULE`)."""

    PLAIN = 0  # time += delta (packets without a delta field add 0)
    SHORT = 1  # TS_DELTA_SHORT: time += delta + 4
    MARK = 2  # TS_DELTA_OR_MARK: time += delta unless the packet is a marker
    MISC = 3  # CDNA_MISC: time += delta * 4
    ABSOLUTE = 4  # CDNA_TIMESTAMP: anchors or resets the clock from its 48-bit timestamp


class Packet(tuple):
    """One decoded SQTT packet: its raw bits (`raw`, only the packet's own nibbles) and absolute `time` in cycles.

    Subclasses declare `MATCH` (value, bit count: the packet's low bits), `NIBBLES` (its size) and `FIELDS`.
    Each field is readable as an attribute (`p.wave`). Two packets are equal when type, raw bits and time are equal.
    """

    __slots__ = ()

    MATCH: ClassVar[tuple[int, int]]
    NIBBLES: ClassVar[int]
    FIELDS: ClassVar[tuple[Field, ...]] = ()
    TIME_RULE: ClassVar[int] = TimeRule.PLAIN
    name: ClassVar[str]
    field_map: ClassVar[dict[str, Field]]

    raw = property(itemgetter(0), doc="The packet's bits (its own nibbles only), little-endian from the first nibble.")
    time = property(itemgetter(1), doc="Absolute time of the packet in shader clock cycles.")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = cls.__name__
        cls.field_map = {f.name: f for f in cls.FIELDS}
        for f in cls.FIELDS:
            setattr(cls, f.name, _field_getter(f.lo, f.mask))
        if "delta" not in cls.field_map:
            cls.delta = 0  # type: ignore[assignment]

    def __new__(cls, raw: int, time: int = 0) -> Packet:
        return tuple.__new__(cls, (raw, time))

    @classmethod
    def make(cls, time: int = 0, **values: int) -> Packet:
        """Build a packet from field values (missing fields are 0); raises SqttEncodeError on unknown or too-wide values."""
        raw = cls.MATCH[0]
        for key, value in values.items():
            f = cls.field_map.get(key)
            if f is None:
                raise SqttEncodeError(f"{cls.name} has no field {key!r}; its fields are {', '.join(cls.field_map)}")
            value = int(value)
            if not 0 <= value <= f.mask:
                raise SqttEncodeError(f"{cls.name}.{key}={value} does not fit in {f.hi - f.lo + 1} bits; use 0..{f.mask}")
            raw |= value << f.lo
        return cls(raw, time)

    def values(self) -> dict[str, int]:
        """The packet's fields as a name -> int mapping, in declaration order."""
        return {f.name: (self.raw >> f.lo) & f.mask for f in self.FIELDS}

    def field_text(self, name: str) -> str:
        """One field formatted for people: enum fields by name, wide opaque payloads in hex."""
        f = self.field_map[name]
        value = (self.raw >> f.lo) & f.mask
        if f.enum is not None:
            return op_name(f.enum, value)
        return f"0x{value:x}" if f.name in _HEX_FIELDS else str(value)

    # a packet equals only a packet of the same type: never the plain (raw, time) tuple it is built on
    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((type(self), self[0], self[1]))

    def __repr__(self) -> str:
        shown = " ".join(f"{f.name}={self.field_text(f.name)}" for f in self.FIELDS)
        return f"{self.name}(time={self.time}{' ' if shown else ''}{shown})"


def _f(name: str, hi: int, lo: int | None = None, enum: type[IntEnum] | None = None) -> Field:
    return Field(name, hi, hi if lo is None else lo, enum)


# ── packets shared by RDNA3 and RDNA4 ─────────────────────────────────────────


class NOP(Packet):
    """Padding nibble."""

    MATCH, NIBBLES = (0b0000, 4), 1


class TS_DELTA_SHORT(Packet):
    """Short clock advance: delta + 4 cycles."""

    MATCH, NIBBLES, TIME_RULE = (0b1000, 4), 2, TimeRule.SHORT
    FIELDS = (_f("delta", 7, 4),)


class TS_DELTA_S8_W3(Packet):
    """Clock advance with a 3-bit delta."""

    MATCH, NIBBLES = (0b0100001, 7), 18
    FIELDS = (_f("delta", 10, 8),)


class TS_DELTA_S5_W3(Packet):
    """Clock advance with a 3-bit delta (RDNA3 layout)."""

    MATCH, NIBBLES = (0b00110, 5), 13
    FIELDS = (_f("delta", 7, 5),)


class TS_DELTA_S5_W3_RDNA4(Packet):
    """Clock advance with a 3-bit delta (RDNA4 layout: 56 bits)."""

    MATCH, NIBBLES = (0b00110, 5), 14
    FIELDS = (_f("delta", 9, 7),)


class TS_DELTA_S5_W2(Packet):
    """Clock advance with a 2-bit delta (RDNA3 layout)."""

    MATCH, NIBBLES = (0b11100, 5), 12
    FIELDS = (_f("delta", 6, 5),)


class TS_DELTA_S5_W2_RDNA4(Packet):
    """Clock advance with a 2-bit delta (RDNA4 layout: 40 bits)."""

    MATCH, NIBBLES = (0b11100, 5), 10
    FIELDS = (_f("delta", 6, 5),)


class TS_DELTA_OR_MARK(Packet):
    """Long clock advance, or a marker (rt set, pl clear) that does not move the clock (RDNA3 layout)."""

    MATCH, NIBBLES, TIME_RULE = (0b0000001, 7), 12, TimeRule.MARK
    FIELDS = (_f("pl", 8), _f("rt", 9), _f("delta", 47, 12))

    @property
    def is_marker(self) -> bool:
        """True for a marker: it carries no clock advance."""
        return bool((self.raw >> 9) & 1) and not (self.raw >> 8) & 1


class TS_DELTA_OR_MARK_RDNA4(Packet):
    """Long clock advance or marker (RDNA4 layout: 64 bits, rt moved to bit 7)."""

    MATCH, NIBBLES, TIME_RULE = (0b0000001, 7), 16, TimeRule.MARK
    FIELDS = (_f("rt", 7), _f("pl", 8), _f("tl", 9), _f("delta", 63, 12))

    @property
    def is_marker(self) -> bool:
        """True for a marker: it carries no clock advance."""
        return bool((self.raw >> 7) & 1) and not (self.raw >> 8) & 1


class VALUINST(Packet):
    """A VALU instruction issued by `wave` on the traced SIMD."""

    MATCH, NIBBLES = (0b011, 3), 3
    FIELDS = (_f("delta", 5, 3), _f("flag", 6), _f("wave", 11, 7))


class VMEMEXEC(Packet):
    """A memory pipe started executing."""

    MATCH, NIBBLES = (0b1111, 4), 2
    FIELDS = (_f("delta", 5, 4), _f("src", 7, 6, MemSrc))


class ALUEXEC(Packet):
    """An ALU pipe started executing."""

    MATCH, NIBBLES = (0b1110, 4), 2
    FIELDS = (_f("delta", 5, 4), _f("src", 7, 6, AluSrc))


class IMMEDIATE(Packet):
    """An immediate (s_nop, s_waitcnt, ...) instruction issued by `wave`."""

    MATCH, NIBBLES = (0b1101, 4), 3
    FIELDS = (_f("delta", 6, 4), _f("wave", 11, 7))


class IMMEDIATE_MASK(Packet):
    """Immediate instructions issued by every wave whose bit is set in `mask`."""

    MATCH, NIBBLES = (0b00100, 5), 6
    FIELDS = (_f("delta", 7, 5), _f("mask", 23, 8))


class WAVERDY(Packet):
    """Waves (a bit mask) ready to issue."""

    MATCH, NIBBLES = (0b10100, 5), 6
    FIELDS = (_f("delta", 7, 5), _f("mask", 23, 8))


class WAVEEND(Packet):
    """A wave ended (RDNA3 layout)."""

    MATCH, NIBBLES = (0b10101, 5), 5
    FIELDS = (_f("delta", 7, 5), _f("sa", 8), _f("simd", 10, 9), _f("wgp", 13, 11), _f("wave", 19, 15))

    @property
    def cu(self) -> int:
        """Compute unit: the WGP with the shader array above it."""
        return ((self.raw >> 11) & 7) | (((self.raw >> 8) & 1) << 3)


class WAVEEND_RDNA4(Packet):
    """A wave ended (RDNA4 layout: 4-bit wgp)."""

    MATCH, NIBBLES = (0b10101, 5), 5
    FIELDS = (_f("delta", 7, 5), _f("sa", 8), _f("simd", 10, 9), _f("wgp", 14, 11), _f("wave", 19, 15))

    @property
    def cu(self) -> int:
        """Compute unit: the WGP with the shader array above it."""
        return ((self.raw >> 11) & 15) | (((self.raw >> 8) & 1) << 4)


class WAVESTART(Packet):
    """A wave started (RDNA3 layout)."""

    MATCH, NIBBLES = (0b01100, 5), 8
    FIELDS = (_f("delta", 6, 5), _f("sa", 7), _f("simd", 9, 8), _f("wgp", 12, 10), _f("wave", 17, 13), _f("id7", 31, 18))

    @property
    def cu(self) -> int:
        """Compute unit: the WGP with the shader array above it."""
        return ((self.raw >> 10) & 7) | (((self.raw >> 7) & 1) << 3)


class WAVESTART_RDNA4(Packet):
    """A wave started (RDNA4 layout: 4-bit wgp, wave at bits 15-19)."""

    MATCH, NIBBLES = (0b01100, 5), 8
    FIELDS = (_f("delta", 6, 5), _f("sa", 7), _f("simd", 9, 8), _f("wgp", 13, 10), _f("wave", 19, 15), _f("id7", 31, 20))

    @property
    def cu(self) -> int:
        """Compute unit: the WGP with the shader array above it."""
        return ((self.raw >> 10) & 15) | (((self.raw >> 7) & 1) << 4)


class WAVEALLOC(Packet):
    """A wave slot was allocated (RDNA3 layout)."""

    MATCH, NIBBLES = (0b00101, 5), 5
    FIELDS = (_f("delta", 7, 5),)


class WAVEALLOC_RDNA4(Packet):
    """A wave slot was allocated (RDNA4 layout: 24 bits)."""

    MATCH, NIBBLES = (0b00101, 5), 6
    FIELDS = (_f("delta", 7, 5),)


class PERF(Packet):
    """Performance counter sample (RDNA3 layout)."""

    MATCH, NIBBLES = (0b10110, 5), 7
    FIELDS = (_f("delta", 7, 5), _f("arg", 27, 8))


class PERF_RDNA4(Packet):
    """Performance counter sample (RDNA4 layout: 32 bits)."""

    MATCH, NIBBLES = (0b10110, 5), 8
    FIELDS = (_f("delta", 9, 7), _f("arg", 31, 10))


class TS_WAVE_STATE(Packet):
    """Clock advance with a coarse wave-state summary."""

    MATCH, NIBBLES = (0b1010001, 7), 6
    FIELDS = (_f("delta", 15, 7), _f("coarse", 23, 16))


class EVENT(Packet):
    """A pipeline event."""

    MATCH, NIBBLES = (0b01100001, 8), 6
    FIELDS = (_f("delta", 10, 8), _f("event", 23, 11))


class EVENT_BIG(Packet):
    """A pipeline event with a wide payload."""

    MATCH, NIBBLES = (0b11100001, 8), 8
    FIELDS = (_f("delta", 10, 8), _f("event", 31, 11))


class REG(Packet):
    """A register write seen by the thread-trace unit."""

    MATCH, NIBBLES = (0b1001, 4), 16
    FIELDS = (_f("delta", 6, 4), _f("slot", 9, 7), _f("hi_byte", 15, 8), _f("subop", 31, 16), _f("val32", 63, 32))


class SNAPSHOT(Packet):
    """A snapshot of a counter."""

    MATCH, NIBBLES = (0b1110001, 7), 16
    FIELDS = (_f("delta", 9, 7), _f("snap", 63, 10))


class LAYOUT_HEADER(Packet):
    """First packet of a trace: `layout` 3 is RDNA3, 4 is RDNA4; the decoder reads other values as a CDNA stream."""

    MATCH, NIBBLES = (0b0010001, 7), 16
    FIELDS = (_f("layout", 12, 7), _f("simd", 14, 13), _f("group", 17, 15), _f("sel_a", 31, 28), _f("sel_b", 36, 33), _f("flag4", 59))


class INST(Packet):
    """A non-VALU instruction issued by `wave` (RDNA3 layout)."""

    MATCH, NIBBLES = (0b010, 3), 5
    FIELDS = (_f("flag1", 3), _f("delta", 6, 4), _f("flag2", 7), _f("wave", 12, 8), _f("op", 19, 13, InstOp))


class INST_RDNA4(Packet):
    """A non-VALU instruction issued by `wave` (RDNA4 layout and op numbering)."""

    MATCH, NIBBLES = (0b010, 3), 5
    FIELDS = (_f("delta", 5, 3), _f("w64h", 6), _f("wave", 11, 7), _f("op", 19, 12, InstOpRDNA4))


class UTILCTR(Packet):
    """Utilisation counters."""

    MATCH, NIBBLES = (0b0110001, 7), 12
    FIELDS = (_f("delta", 8, 7), _f("ctr", 47, 9))


# ── CDNA packets: the type is the low nibble ──────────────────────────────────


class CDNA_MISC(Packet):
    """Clock advance of delta * 4 cycles, with a misc event type."""

    MATCH, NIBBLES, TIME_RULE = (0, 4), 4, TimeRule.MISC
    FIELDS = (_f("delta", 11, 4), _f("sh", 12), _f("misc_type", 15, 13))


class CDNA_TIMESTAMP(Packet):
    """A 48-bit timestamp; with the reserved bits clear it is absolute and (re)anchors the clock."""

    MATCH, NIBBLES, TIME_RULE = (1, 4), 16, TimeRule.ABSOLUTE
    FIELDS = (_f("reserved", 15, 4), _f("timestamp", 63, 16))


class CDNA_REG(Packet):
    """A register write."""

    MATCH, NIBBLES = (2, 4), 16
    FIELDS = (_f("pipe", 6, 5), _f("me", 8, 7), _f("regaddr", 31, 16), _f("regdata", 63, 32))


class CDNA_WAVESTART(Packet):
    """A wave started."""

    MATCH, NIBBLES = (3, 4), 8
    FIELDS = (_f("sh", 5), _f("cu", 9, 6), _f("wave", 13, 10), _f("simd", 15, 14), _f("pipe", 17, 16), _f("me", 19, 18), _f("count", 28, 22))


class CDNA_WAVEALLOC(Packet):
    """A wave slot was allocated."""

    MATCH, NIBBLES = (4, 4), 4
    FIELDS = (_f("sh", 5), _f("cu", 9, 6), _f("wave", 13, 10), _f("simd", 15, 14))


class CDNA_REG_CS(Packet):
    """A compute-state register write."""

    MATCH, NIBBLES = (5, 4), 12
    FIELDS = (_f("pipe", 6, 5), _f("me", 8, 7), _f("regaddr", 15, 9), _f("regdata", 47, 16))


class CDNA_WAVEEND(Packet):
    """A wave ended."""

    MATCH, NIBBLES = (6, 4), 4
    FIELDS = (_f("sh", 5), _f("cu", 9, 6), _f("wave", 13, 10), _f("simd", 15, 14))


class CDNA_EVENT(Packet):
    """A graphics event."""

    MATCH, NIBBLES = (7, 4), 4


class CDNA_EVENT_CS(Packet):
    """A compute event."""

    MATCH, NIBBLES = (8, 4), 4


class CDNA_EVENT_GFX1(Packet):
    """A graphics-pipe-1 event."""

    MATCH, NIBBLES = (9, 4), 4


class CDNA_INST(Packet):
    """An instruction of kind `op` issued by `wave` on `simd`."""

    MATCH, NIBBLES = (10, 4), 4
    FIELDS = (_f("wave", 8, 5), _f("simd", 10, 9), _f("op", 15, 11, InstOpCDNA))


class CDNA_INST_PC(Packet):
    """The program counter of a wave."""

    MATCH, NIBBLES = (11, 4), 16
    FIELDS = (_f("wave", 8, 5), _f("simd", 10, 9), _f("err", 15), _f("pc", 63, 16))


class CDNA_USERDATA(Packet):
    """User data written by a wave."""

    MATCH, NIBBLES = (12, 4), 12
    FIELDS = (_f("sh", 5), _f("cu", 9, 6), _f("wave", 13, 10), _f("simd", 15, 14), _f("data", 47, 16))


class CDNA_ISSUE(Packet):
    """Instruction issue on `simd`: `inst` holds two bits per wave for waves 0-9; a wave issued when its bits are 3."""

    MATCH, NIBBLES = (13, 4), 8
    FIELDS = (_f("simd", 6, 5), _f("inst", 27, 8))

    def issued_waves(self) -> list[int]:
        """The waves (0-9) that issued an instruction in this packet."""
        inst = (self.raw >> 8) & 0xFFFFF
        return [wave for wave in range(10) if (inst >> (2 * wave)) & 3 == 3]


class CDNA_PERF(Packet):
    """Four performance counter samples."""

    MATCH, NIBBLES = (14, 4), 16
    FIELDS = (
        _f("sh", 5), _f("cu", 9, 6), _f("cntr_bank", 11, 10), _f("cntr0", 24, 12), _f("cntr1", 37, 25), _f("cntr2", 50, 38), _f("cntr3", 63, 51),
    )  # fmt: skip


class CDNA_REG_CS_PRIV(Packet):
    """A privileged compute-state register write."""

    MATCH, NIBBLES = (15, 4), 12
    FIELDS = (_f("pipe", 6, 5), _f("me", 8, 7), _f("regaddr", 15, 9), _f("regdata", 47, 16))
