"""The ROM_INDEX/ROM_DATA aperture: a dword window onto the flash with an auto-incrementing index."""

from __future__ import annotations

from .. import regs

APERTURE_MODES = ("raw", "mirrored", "unavailable")


class SimAperture:
    """`raw` reads the chip, `mirrored` repeats the first 1 MiB (the non-raw SOC15 view), `unavailable` reads all ones.

    The index register takes the byte-swapped page number the seed writes: address = bswap32(ROM_INDEX) << 8.
    """

    def __init__(self, data: bytearray, mode: str = "raw") -> None:
        if mode not in APERTURE_MODES:
            raise ValueError(f"aperture mode must be one of {APERTURE_MODES}")
        self.data, self.mode = data, mode
        self.index = 0
        self.pointer = 0

    def write_index(self, value: int) -> None:
        """ROM_INDEX write: set the byte pointer from the byte-swapped page number."""
        self.index = value
        self.pointer = regs.bswap32(value) << 8

    def read_data(self) -> int:
        """ROM_DATA read: one dword at the pointer, which then advances by four."""
        if self.mode == "unavailable":
            return 0xFFFFFFFF
        address = self.pointer % len(self.data)
        if self.mode == "mirrored":
            address %= len(self.data) // 2
        self.pointer += 4
        return int.from_bytes(self.data[address : address + 4], "little")
