"""The SQTT stream decoder: nibble stream -> packets with absolute times.

Rules (the seed decoder's, which the test data was measured with):
- The stream is read as 4-bit nibbles, low nibble of each byte first. A packet starts at a nibble; its first byte
  (two nibbles) selects its type in the current layout (see `layouts.py`), the type fixes its size.
- A packet is decoded only while a full 64-bit window (16 nibbles) from its start lies inside the blob, so the
  zero padding at the end of a trace buffer ends the stream cleanly and a truncated blob just stops early.
- Time: each packet adds its delta field; TS_DELTA_SHORT adds delta + 4, a TS_DELTA_OR_MARK marker adds nothing,
  CDNA_MISC adds delta * 4. An absolute CDNA_TIMESTAMP (reserved bits clear) anchors the clock the first time and
  afterwards sets it to ((timestamp - anchor) & ~3) - 4.

Speed: packet boundaries are found with numpy over the whole stream (pointer doubling, or parallel walkers for long
streams), without per-packet Python work; raw values, deltas and times are computed with numpy over all packets at
once, and packet objects are built lazily.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate

import numpy as np

from . import packets as P
from .errors import SqttDecodeError
from .layouts import ALL_TYPES, CLASSIFY, TYPE_INDEX, layout_after_header, layout_of

_WINDOW_NIBBLES = 16
_HEADER = TYPE_INDEX[P.LAYOUT_HEADER]
_SIZES: list[int] = [t.NIBBLES for t in ALL_TYPES]
_SIZE_ARR = np.array(_SIZES, dtype=np.intp)
_CHAIN_SEGMENTS = 4
# Streams from this many nibbles on are split by parallel walkers, shorter ones by pointer doubling (measured crossover).
_BLOCKED_MIN_NIBBLES = 1 << 17
_BLOCK_NIBBLES = 1024


# Per-type constants as numpy tables indexed by type index, so the time rules run over all packets at once.
def _per_type(value_of, dtype: type) -> np.ndarray:
    return np.array([value_of(t) for t in ALL_TYPES], dtype=dtype)


# a packet's raw value keeps only its own nibbles (at most the 64-bit window)
_RAW_MASK = _per_type(lambda t: (1 << (4 * min(t.NIBBLES, _WINDOW_NIBBLES))) - 1, np.uint64)
_DELTA_LO = _per_type(lambda t: t.field_map["delta"].lo if "delta" in t.field_map else 0, np.uint64)
_DELTA_MASK = _per_type(lambda t: t.field_map["delta"].mask if "delta" in t.field_map else 0, np.uint64)
_RULE = _per_type(lambda t: t.TIME_RULE, np.intp)
_RULE_NAMES = ("PLAIN", "SHORT", "MARK", "MISC", "ABSOLUTE")
# the `rt` bit of the TS_DELTA_OR_MARK layouts (0 for other types, where it is never read)
_RT_BIT = _per_type(lambda t: t.field_map["rt"].lo if "rt" in t.field_map else 0, np.uint64)



def _as_bytes(blob: object) -> bytes | bytearray | memoryview:
    if isinstance(blob, bytes | bytearray):
        return blob
    if isinstance(blob, memoryview):
        return blob.cast("B") if blob.format != "B" else blob
    raise SqttDecodeError(f"an SQTT trace must be bytes, got {type(blob).__name__}; read the file in binary mode")


def _header_layout(nib: np.ndarray, pos: int) -> int:
    """The `layout` field (bits 12:7) of a LAYOUT_HEADER starting at nibble `pos`."""
    return (int(nib[pos + 1]) >> 3) | (int(nib[pos + 2]) << 1) | ((int(nib[pos + 3]) & 1) << 5)


def _chain(types: np.ndarray, start: int, limit: int) -> np.ndarray:
    """Start nibbles of the packets from `start` on, all read in one layout."""
    if limit - start + 1 >= _BLOCKED_MIN_NIBBLES:
        return _chain_blocked(types, start, limit)
    return _chain_doubling(types, start, limit)


def _chain_doubling(types: np.ndarray, start: int, limit: int) -> np.ndarray:
    """Pointer doubling: `jump` maps each nibble to the start of the packet 2**k packets later, so log2(packets)
    vectorized passes collect the whole chain. Cheapest for short streams (cost grows as n log n)."""
    count = limit - start + 1
    jump = np.minimum(np.arange(count) + _SIZE_ARR[types[start : limit + 1]], count)
    jump = np.append(jump, count)  # `count` is the end: it jumps to itself
    reached = np.zeros(1, dtype=np.intp)
    while jump[0] != count:
        further = jump[reached]
        reached = np.concatenate([reached, further[further != count]])
        jump = jump[jump]
    reached.sort()
    return reached + start


def _chain_blocked(types: np.ndarray, start: int, limit: int) -> np.ndarray:
    """Parallel walkers for long streams (cost grows as n): one walker per block of nibbles, all stepped together.

    Packet boundaries resynchronise within a few packets, so the true chain, entering a block wherever the previous
    block left it, soon lands on that block's walker and follows it from there; only the few packets before that
    meeting point are walked one by one.
    """
    size = limit + 1 - start
    nxt = np.empty(size + 1, dtype=np.intp)  # relative positions; `size` (the end) jumps to itself
    np.minimum(np.arange(size) + _SIZE_ARR[types[start : limit + 1]], size, out=nxt[:size])
    nxt[size] = size
    firsts = np.arange(0, size, _BLOCK_NIBBLES)
    owner = np.full(size + 1, -1, dtype=np.intp)
    exits = np.empty(firsts.size, dtype=np.intp)
    walkers, pos = np.arange(firsts.size), firsts.copy()
    stops = np.minimum(firsts + _BLOCK_NIBBLES, size)
    while walkers.size:
        owner[pos] = walkers
        pos = nxt[pos]
        done = pos >= stops[walkers]
        if done.any():
            exits[walkers[done]] = pos[done]
            keep = ~done
            walkers, pos = walkers[keep], pos[keep]
    # follow the true chain block by block: where it meets the block's walker, the rest of the block is the walker's
    meet = np.full(firsts.size, size + 1, dtype=np.intp)
    extra: list[int] = []
    here = 0
    for block in range(firsts.size):
        stop = int(stops[block])
        while here < stop and owner[here] != block:
            extra.append(here)
            here = int(nxt[here])
        if here < stop:
            meet[block] = here
            here = int(exits[block])
    on_walker = np.nonzero(owner[:size] >= 0)[0]
    on_walker = on_walker[on_walker >= meet[owner[on_walker]]]
    chain = np.concatenate([on_walker, np.array(extra, dtype=np.intp)]) if extra else on_walker
    chain.sort()
    return chain + start


def _split(nib: np.ndarray, n_nibbles: int, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """The start nibble and type index of every packet."""
    first_byte = (nib[:n_nibbles] | (nib[1 : n_nibbles + 1] << 4)).astype(np.intp)
    tables: dict[str, np.ndarray] = {}

    def table_for(name: str) -> np.ndarray:
        if name not in tables:
            tables[name] = CLASSIFY[name][first_byte].astype(np.intp)
        return tables[name]

    limit = n_nibbles - _WINDOW_NIBBLES
    pos = 0
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    # Real traces switch layout once, at their first packet; a stream that keeps switching is finished by a walk.
    for _ in range(_CHAIN_SEGMENTS):
        if pos > limit:
            break
        types = table_for(layout)
        starts = _chain(types, pos, limit)
        kinds = types[starts]
        pos = limit + 1
        for header in starts[kinds == _HEADER].tolist():
            new_layout = layout_after_header(_header_layout(nib, header), layout)
            if new_layout != layout:
                keep = starts <= header
                starts, kinds = starts[keep], kinds[keep]
                pos, layout = header + _SIZES[_HEADER], new_layout
                break
        parts.append((starts, kinds))
    if pos <= limit:
        parts.append(_walk(nib, pos, limit, layout, table_for))
    if not parts:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _walk(nib: np.ndarray, pos: int, limit: int, layout: str, table_for) -> tuple[np.ndarray, np.ndarray]:
    """Packet by packet from `pos`: for streams whose layout headers keep switching the layout."""
    tables: dict[str, list[int]] = {}
    types = tables.setdefault(layout, table_for(layout).tolist())
    starts: list[int] = []
    kinds: list[int] = []
    while pos <= limit:
        kind = types[pos]
        starts.append(pos)
        kinds.append(kind)
        if kind == _HEADER and (new_layout := layout_after_header(_header_layout(nib, pos), layout)) != layout:
            layout = new_layout
            if layout not in tables:
                tables[layout] = table_for(layout).tolist()
            types = tables[layout]
        pos += _SIZES[kind]
    return np.array(starts, dtype=np.intp), np.array(kinds, dtype=np.intp)


def _times(kinds: np.ndarray, raw: np.ndarray) -> list[int]:
    """Absolute time of every packet by the seed's timestamp rules."""
    rule = _RULE[kinds]
    delta = (raw >> _DELTA_LO[kinds]) & _DELTA_MASK[kinds]
    present = np.bincount(rule, minlength=len(_RULE_NAMES))
    if present[P.TimeRule.SHORT]:
        delta[rule == P.TimeRule.SHORT] += np.uint64(4)
    if present[P.TimeRule.MARK]:
        mark = np.nonzero(rule == P.TimeRule.MARK)[0]
        is_marker = ((raw[mark] >> _RT_BIT[kinds[mark]]) & np.uint64(1)) & ~((raw[mark] >> np.uint64(8)) & np.uint64(1))
        delta[mark[is_marker.astype(bool)]] = 0
    if present[P.TimeRule.MISC]:
        delta[rule == P.TimeRule.MISC] <<= np.uint64(2)
    absolute = np.zeros(0, dtype=np.intp)
    if present[P.TimeRule.ABSOLUTE]:
        absolute = np.nonzero((rule == P.TimeRule.ABSOLUTE) & (((raw >> np.uint64(4)) & np.uint64(0xFFF)) == 0))[0]
    if not absolute.size and int(delta.max()) * delta.size < 1 << 63:
        return np.cumsum(delta.astype(np.int64)).tolist()
    steps = delta.tolist()
    if absolute.size:
        # the clock jumps at absolute timestamps: fold each jump into that packet's step, in stream order
        unadjusted = list(accumulate(steps))
        raw_list = raw.tolist()
        anchor: int | None = None
        shift = 0
        for i in absolute.tolist():
            now = unadjusted[i] + shift
            stamp = raw_list[i] >> 16
            if anchor is None:
                anchor = stamp - now
            else:
                jump = (((stamp - anchor) & ~3) - 4) - now
                steps[i] += jump
                shift += jump
    return list(accumulate(steps))


def decode(blob: bytes | bytearray | memoryview, arch: str | None = None, *, check: bool = False) -> Iterator[P.Packet]:
    """Decode a raw SQTT byte stream into packets, each with its absolute `time` in shader clock cycles.

    `arch` ('rdna3', 'rdna4', 'cdna' or a target such as 'gfx1100') picks the layout the stream starts in; by
    default the stream starts as RDNA3 and the LAYOUT_HEADER picks RDNA4 or CDNA. Headers inside the stream switch
    the layout in both cases. Raises SqttDecodeError for a blob that is not bytes and SqttArchError for an
    unknown arch; any byte content decodes (a truncated stream ends at its last complete packet window) unless
    `check` is set: then a blob that is not an SQTT stream (see `check_stream`) raises SqttDecodeError.
    """
    decoded = _decode_arrays(_as_bytes(blob), arch)
    if check:
        _check_arrays(_as_bytes(blob), *decoded)
    start_arr, kind_arr, raw, times = decoded
    if not start_arr.size:
        return iter(())
    # C-level construction: no Python frame per packet
    types = map(ALL_TYPES.__getitem__, kind_arr.tolist())
    return map(tuple.__new__, types, zip(raw.tolist(), times))


def _decode_arrays(data: bytes | bytearray | memoryview, arch: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """(start nibble, type index, raw bits, absolute time) of every packet."""
    layout = "rdna3" if arch is None else layout_of(arch)
    n_nibbles = 2 * len(data)
    # zero padding past the end keeps every 16-nibble window read in bounds
    padded = np.zeros(len(data) + _WINDOW_NIBBLES + 8 - len(data) % 8, dtype=np.uint8)
    padded[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    nib = np.empty(2 * padded.size, dtype=np.uint8)
    nib[0::2] = padded & 0xF
    nib[1::2] = padded >> 4
    start_arr, kind_arr = _split(nib, n_nibbles, layout)
    if not start_arr.size:
        return start_arr, kind_arr, np.zeros(0, dtype=np.uint64), []
    raw = _windows(padded, start_arr) & _RAW_MASK[kind_arr]
    return start_arr, kind_arr, raw, _times(kind_arr, raw)


def check_stream(blob: bytes | bytearray | memoryview, arch: str | None = None) -> None:
    """Raise SqttDecodeError, saying why, unless `blob` reads as an SQTT stream.

    What every trace the hardware writes (and every stream `encode` and the emulator write) has, and other files
    almost never have: at least one packet; a LAYOUT_HEADER as the first packet, at byte 0; no later LAYOUT_HEADER
    announcing another layout; and a clock that never runs backwards (CDNA absolute timestamps can only move it
    forward). `decode(blob, check=True)` runs the same check.
    """
    data = _as_bytes(blob)
    _check_arrays(data, *_decode_arrays(data, arch))


_ELF_MAGIC = b"\x7fELF"


def _check_arrays(data: bytes | bytearray | memoryview, starts: np.ndarray, kinds: np.ndarray, raw: np.ndarray, times: list[int]) -> None:
    def fail(reason: str) -> None:
        hint = " (it is an ELF file: a code object, not a trace)" if bytes(data[:4]) == _ELF_MAGIC else ""
        raise SqttDecodeError(f"not an SQTT trace: {reason}{hint}")

    if not starts.size:
        fail(f"{len(data)} bytes hold no complete packet (a trace is at least {_WINDOW_NIBBLES // 2} bytes)")
    if kinds[0] != _HEADER or starts[0] != 0:
        fail(f"it does not begin with a LAYOUT_HEADER packet (byte 0 is {data[0]:#04x})")
    headers = np.nonzero(kinds == _HEADER)[0]
    layout_field = (raw[headers] >> np.uint64(7)) & np.uint64(0x3F)
    if (switch := np.nonzero(layout_field != layout_field[0])[0]).size:
        at = int(starts[headers[switch[0]]]) // 2
        fail(f"a LAYOUT_HEADER at byte {at} switches to layout {int(layout_field[switch[0]])} after layout {int(layout_field[0])}")
    try:
        clock = np.array(times, dtype=np.int64)
    except OverflowError:  # a clock past 2**63 cycles: compare the Python ints
        clock = np.array(times, dtype=object)
    steps = np.diff(clock)
    if (back := np.nonzero(steps < 0)[0]).size:
        i = int(back[0]) + 1
        fail(f"the clock runs backwards at byte {int(starts[i]) // 2} ({ALL_TYPES[int(kinds[i])].name} at time {times[i]} after {times[i - 1]})")


def _windows(padded: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The 64-bit window at each start nibble: two aligned little-endian words, shifted together."""
    words = padded.view("<u8")
    shift = (starts & 15).astype(np.uint64) << np.uint64(2)  # bit offset inside the first word
    first = starts >> 4
    # numpy defines a shift by 64 as 0, so an aligned start takes nothing from the second word
    return (words[first] >> shift) | (words[first + 1] << (np.uint64(64) - shift))


def stream_layout(blob: bytes | bytearray | memoryview) -> str:
    """The layout ('rdna3', 'rdna4' or 'cdna') a trace's LAYOUT_HEADER announces; 'rdna3' when it has none."""
    data = _as_bytes(blob)
    if len(data) < _WINDOW_NIBBLES // 2:
        return "rdna3"
    first = int.from_bytes(data[:8], "little")
    if CLASSIFY["rdna3"][first & 0xFF] != _HEADER:
        return "rdna3"
    return layout_after_header((first >> 7) & 0x3F, "rdna3")
