"""The SQTT stream encoder: packets -> the byte stream the decoder reads back.

Used by the emulator's trace mode to write traces in the hardware format. Times are not stored in the stream: they
follow from each packet's delta field, so `decode(encode(packets, arch), arch) == packets` holds whenever each packet's
`time` is the one its deltas imply, as for decoded packets.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from . import packets as P
from .decoder import _WINDOW_NIBBLES
from .errors import SqttEncodeError
from .layouts import LAYOUT_TYPES, classify, layout_after_header, layout_of

_LOW64 = (1 << 64) - 1


def encode(packets: Iterable[P.Packet], arch: str) -> bytes:
    """Write packets as an SQTT byte stream in the layout of `arch` ('rdna3', 'rdna4', 'cdna' or a gfx target).

    A LAYOUT_HEADER among the packets switches the layout exactly as it does when decoding. Raises SqttEncodeError
    for a packet that does not belong to the current layout, whose bits exceed its size, whose field values make it
    read back as another type, or for a trailing NOP that the decoder could not tell from padding.
    """
    layout = layout_of(arch)
    raws: list[int] = []
    sizes: list[int] = []
    for index, packet in enumerate(packets):
        kind = type(packet)
        if not isinstance(packet, P.Packet):
            raise SqttEncodeError(f"item {index} is a {kind.__name__}, not an SQTT packet; build packets with e.g. INST.make(...)")
        if kind not in LAYOUT_TYPES[layout]:
            raise SqttEncodeError(f"packet {index} ({kind.name}) does not exist in the {layout} layout; use the {layout} packet types")
        raw = packet.raw
        if raw < 0 or raw >> (4 * kind.NIBBLES):
            raise SqttEncodeError(f"packet {index} ({kind.name}) has raw bits beyond its {kind.NIBBLES} nibbles; build it with {kind.name}.make(...)")
        if kind.NIBBLES > 1 and (read_as := classify(raw & 0xFF, layout)) is not kind:
            raise SqttEncodeError(f"packet {index} ({kind.name}) would decode as {read_as.name}; build it with {kind.name}.make(...)")
        if kind is P.LAYOUT_HEADER:
            layout = layout_after_header(packet.layout, layout)  # type: ignore[attr-defined]
        raws.append(raw)
        sizes.append(kind.NIBBLES)
    return _pack(raws, sizes)


def _pack(raws: list[int], sizes: list[int]) -> bytes:
    if not raws:
        return b""
    size_arr = np.array(sizes, dtype=np.int64)
    ends = np.cumsum(size_arr)
    starts = ends - size_arr
    last_start, end = int(starts[-1]), int(ends[-1])
    # the decoder reads a packet only when 16 nibbles from its start exist, and must find no packet at `end`
    total = max(last_start + _WINDOW_NIBBLES, end)
    total += total & 1
    if total >= end + _WINDOW_NIBBLES:
        raise SqttEncodeError("the stream ends with a NOP at an odd nibble offset, which reads back as two; drop it or add one more NOP")
    nib = np.zeros(total + _WINDOW_NIBBLES, dtype=np.uint8)
    low = np.array([raw & _LOW64 for raw in raws], dtype=np.uint64)
    for k in range(_WINDOW_NIBBLES):
        has = size_arr > k
        nib[starts[has] + k] = ((low[has] >> np.uint64(4 * k)) & np.uint64(0xF)).astype(np.uint8)
    for i in np.nonzero(size_arr > _WINDOW_NIBBLES)[0].tolist():
        for k in range(_WINDOW_NIBBLES, sizes[i]):
            nib[starts[i] + k] = (raws[i] >> (4 * k)) & 0xF
    nib = nib[:total]
    return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()
