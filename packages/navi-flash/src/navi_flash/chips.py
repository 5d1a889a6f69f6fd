"""Flash chip facts as data: the driver and the simulator read the same entry."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChipSpec:
    """One SPI NOR part: identity, geometry and the status bits navi-flash relies on."""

    name: str
    jedec: bytes  # manufacturer, memory type, capacity
    size: int
    sector_size: int  # smallest erase unit (4 KiB sector erase, opcode 20h)
    page_size: int  # program page; programming wraps inside it
    sr1_bp_mask: int  # block-protect bits in SR1
    sr2_cmp_bit: int  # complement-protect bit in SR2

    @property
    def sector_count(self) -> int:
        """Number of erase sectors."""
        return self.size // self.sector_size


GD25LQ16E = ChipSpec(name="GD25LQ16E", jedec=b"\xc8\x60\x15", size=0x200000, sector_size=0x1000, page_size=0x100, sr1_bp_mask=0x7C, sr2_cmp_bit=0x40)

# SPI opcodes (GD25LQ16E datasheet; identical on most 25-series NOR parts).
OP_WRSR = 0x01
OP_PAGE_PROGRAM = 0x02
OP_READ = 0x03
OP_WRDI = 0x04
OP_RDSR1 = 0x05
OP_WREN = 0x06
OP_RDSR3 = 0x15
OP_SECTOR_ERASE = 0x20
OP_RDSR2 = 0x35
OP_SFDP = 0x5A
OP_RDID = 0x9F

SR1_BUSY = 0x01
SR1_WEL = 0x02
