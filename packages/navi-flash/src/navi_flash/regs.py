"""Navi31 BAR5 register offsets and bit fields used by navi-flash (values from the validated seed tools)."""

# SMUIO ROM controller.
ROM_CNTL = 0x5A380
PAGE_MIRROR_CNTL = 0x5A384
ROM_INDEX = 0x5A390
ROM_DATA = 0x5A394

# SMUIO ROM_SW engine: a software-driven SPI transaction with a 256-byte data window.
ROM_SW_CNTL = 0x5A3A0
ROM_SW_STATUS = 0x5A3A4
ROM_SW_COMMAND = 0x5A3A8
ROM_SW_DATA = 0x5A3B0
ROM_SW_WINDOW_BYTES = 0x100

# GPIO pads shared with the SPI pins; the SPI bits must be released from GPIO control during a transaction.
GPIO_PAD_MASK = 0x5A504
GPIO_PAD_A = 0x5A508
GPIO_PAD_EN = 0x5A510
SPI_GPIO_BITS = 0x780

# ROM_SW_CNTL fields. RETURN_DATA_EN is bit 19 on Navi31 (public headers say 18; bit 19 was validated on hardware).
RETURN_DATA_EN = 1 << 19
CNTL_NCMD_SHIFT = 16
CNTL_COUNT_MASK = 0x1FF
STATUS_DONE = 1
GATED_STATUS = 0x04000800  # what a healthy, autonomously booted card shows: the engine is gated

# ROM_CNTL fields used by the ROM_SW path.
ROM_CNTL_PRESCALE_SHIFT = 24
ROM_CNTL_PRESCALE_MASK = 0x1F000000  # bits cleared before selecting the prescaler (seed mask 0xE0FFFFFF)
ROM_CNTL_PRESCALE_SELECT = 1 << 28
ROM_CNTL_SW_MODE = 0x8  # low nibble during ROM_SW transactions
ROM_CNTL_APERTURE_ENABLE = 1 << 29  # set (byte-swapped, as in the seed) for ROM_INDEX/ROM_DATA dumps

# PAGE_MIRROR_CNTL field selected for ROM_SW transactions.
PAGE_MIRROR_MASK = 0x0E000000
PAGE_MIRROR_ROM_SW = 0x06000000

# PSP early-boot firmware mailbox (C2PMSG registers).
PSP_DOORBELL = 0x58224
PSP_COMMAND = 0x582CC
PSP_COMMAND_DATA = 0x582D0
PSP_READY = 0x80000000

# The registers a ROM_SW session saves and restores; with ROM_SW_CNTL and ROM_SW_STATUS (zeroed) these are the seed's seven.
SAVED_REGISTERS = (GPIO_PAD_MASK, GPIO_PAD_A, GPIO_PAD_EN, PAGE_MIRROR_CNTL, ROM_CNTL)
RESTORE_ORDER = (ROM_CNTL, PAGE_MIRROR_CNTL, GPIO_PAD_A, GPIO_PAD_EN, GPIO_PAD_MASK)


def bswap32(value: int) -> int:
    """Reverse the byte order of a 32-bit value."""
    return int.from_bytes((value & 0xFFFFFFFF).to_bytes(4, "little"), "big")
