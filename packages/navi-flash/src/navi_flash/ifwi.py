"""IFWI item resolution: which bytes of a 2 MiB Navi31 image the PSP wants for each requested item type."""

from __future__ import annotations

import struct
from collections.abc import Callable

from .errors import ImageError, PSPError
from .progress import ProgressReporter
from .psp import GET_TRANSFER_TYPE, PspMailbox

IFWI_SIZE = 0x200000
IFWI_MAGIC = b"\xaa\x55\xaa\x55"
MAX_ITEMS = 19  # Navi31 ROMItemCount (AMDVBFlash ASICDetails.xml)

# Fixed-location items: type -> (offset, size).
FIXED_ITEMS = {0x01: (0, 0x54), 0x04: (0x10000, 0x1000), 0x05: (0x11000, 0x1000), 0x06: (0x12000, 0x20), 0x07: (0x13000, 0x20),
               0x80: (0x1000, 4), 0x89: (0x1F0000, 0x100)}
PSP_DIRECTORIES = {0x02: 0x2000, 0x03: 0x3000}
SGN_POINTER = 0x1000
ISH_FIRST_ENTRY = 0x12000


def _u32(image: bytes, offset: int) -> int:
    if offset < 0 or offset + 4 > len(image):
        raise ImageError(f"IFWI field at {offset:#x} is outside the image")
    return struct.unpack_from("<I", image, offset)[0]


def _sgn_table(image: bytes) -> int:
    table = _u32(image, SGN_POINTER)
    if image[table : table + 4] != b"$SGN":
        raise ImageError("invalid $SGN table pointer")
    return table


def resolve_ifwi_item(image: bytes, item_type: int) -> tuple[int, bytes]:
    """Return (offset, payload) for a requested item type, following AMDVBFlash's recovery layout."""
    if item_type in FIXED_ITEMS:
        offset, size = FIXED_ITEMS[item_type]
    elif item_type in PSP_DIRECTORIES:
        offset = PSP_DIRECTORIES[item_type]
        if image[offset : offset + 4] != b"$PSP":
            raise ImageError(f"invalid PSP directory at {offset:#x}")
        size = (_u32(image, offset + 8) + 1) * 0x10
    elif item_type == 0x81:
        offset = _sgn_table(image)
        size = (_u32(image, offset + 8) + 1) * 0x10
    elif 0x82 <= item_type <= 0x88:
        table = _sgn_table(image)
        wanted = item_type - 0x81  # 82h..88h map to SIGN_TYPE 1..7
        count = _u32(image, table + 8)
        entries = [struct.unpack_from("<IIII", image, table + 0x10 + i * 0x10) for i in range(count) if table + 0x20 + i * 0x10 <= len(image)]
        match = [entry for entry in entries if entry[0] == wanted]
        if len(match) != 1:
            raise ImageError(f"missing $SGN type {wanted}")
        _, _, size, offset = match[0]
    elif item_type == 0x08:
        # The payload of the first ISH entry (firmware id 0x13c); PSP, not the host, picks the destination partition.
        offset, size = _u32(image, ISH_FIRST_ENTRY + 0x10), _u32(image, ISH_FIRST_ENTRY + 0x18)
    else:
        raise ImageError(f"IFWI resolver does not support requested item {item_type:#x}")
    payload = image[offset : offset + size]
    if len(payload) != size:
        raise ImageError(f"item {item_type:#x} extends beyond IFWI")
    return offset, payload


def check_ifwi(image: bytes) -> None:
    """Raise ImageError unless `image` is a 2 MiB IFWI."""
    if len(image) != IFWI_SIZE:
        raise ImageError(f"Navi31 IFWI image must be exactly {IFWI_SIZE:#x} bytes, got {len(image):#x}")


def stream_ifwi(mailbox: PspMailbox, image: bytes, log: Callable[[str], None] | None = None,
                progress: ProgressReporter | None = None) -> list[tuple[int, int]]:
    """Stream requested items until the item of terminal phase 2 completes; at most 19 items. Return (state, size) per item."""
    log = log or (lambda message: None)
    progress = progress or ProgressReporter()
    check_ifwi(image)
    streamed = []
    current = mailbox.require(GET_TRANSFER_TYPE, name="GET_TRANSFER_TYPE")
    for step in range(MAX_ITEMS):
        request, phase = current & 0xFF, current >> 8
        log(f"IFWI step {step}: state={current:#x} item={request:#x} phase={phase}")
        offset, payload = resolve_ifwi_item(image, request)
        log(f"resolved requested item {request:#x}: offset={offset:#x} size={len(payload):#x}")
        progress.start(f"item {request:#04x}", len(payload))
        try:
            mailbox.stream(payload, request, transfer_type=current, progress=progress.advance)
        finally:
            progress.finish()
        streamed.append((current, len(payload)))
        # Phase 2 ends the sequence only after its own item has streamed successfully (as AMDVBFlash does).
        if phase == 2:
            log(f"IFWI stream complete after terminal state {current:#x}; hard power cycle required")
            return streamed
        current = mailbox.require(GET_TRANSFER_TYPE, name="GET_TRANSFER_TYPE")
    raise PSPError(f"IFWI stream did not reach terminal phase after {MAX_ITEMS} items (state={current:#x}); power-cycle and do not retry blindly")
