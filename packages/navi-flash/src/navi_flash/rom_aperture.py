"""Raw 2 MiB flash dump through the SMUIO ROM_INDEX/ROM_DATA aperture (works while the ROM_SW engine is gated)."""

from __future__ import annotations

from . import regs
from .errors import DumpError
from .ifwi import IFWI_MAGIC, IFWI_SIZE
from .progress import ProgressReporter
from .transport import Transport, restore_registers

INDEX_PAGE = 0x10000


def dump_aperture(transport: Transport, progress: ProgressReporter | None = None) -> bytes:
    """Read the flash through ROM_DATA one dword at a time, restore ROM_CNTL/ROM_INDEX, then check the result.

    The seed writes byte-swapped ROM_CNTL/ROM_INDEX values on this path (including the restore); they were validated on
    hardware, so they are kept as-is. See the README's hardware notes.
    """
    progress = progress or ProgressReporter()
    t = transport
    original_cntl, original_index = t.read32(regs.ROM_CNTL), t.read32(regs.ROM_INDEX)
    if original_cntl == 0xFFFFFFFF:
        raise DumpError("raw SMUIO ROM controller is unavailable; the SOC15 function-ROM aperture is not a raw SPI dump")
    output = bytearray()
    restore = [(regs.ROM_INDEX, regs.bswap32(original_index)), (regs.ROM_CNTL, regs.bswap32(original_cntl))]
    progress.start("dump", IFWI_SIZE)
    try:
        # ROM_DATA must be read one dword at a time: a block read would walk MMIO addresses instead of the aperture.
        t.write32(regs.ROM_CNTL, regs.bswap32(original_cntl | regs.ROM_CNTL_APERTURE_ENABLE))
        for page in range(0, IFWI_SIZE, INDEX_PAGE):
            t.write32(regs.ROM_INDEX, regs.bswap32(page >> 8))
            for _ in range(INDEX_PAGE // 4):
                output += t.read32(regs.ROM_DATA).to_bytes(4, "little")
            progress.advance(INDEX_PAGE)
    except BaseException as exc:
        progress.finish()
        restore_registers(t, restore, exc)
        raise
    progress.finish()
    restore_registers(t, restore)
    if len(output) != IFWI_SIZE or output[:4] != IFWI_MAGIC:
        raise DumpError(f"invalid raw flash dump: size={len(output):#x} magic={output[:4].hex()}; not writing it")
    if output[: IFWI_SIZE // 2] == output[IFWI_SIZE // 2 :]:
        raise DumpError("ROM aperture contains mirrored 1 MiB halves; refusing to write a non-raw 2 MiB dump")
    return bytes(output)
