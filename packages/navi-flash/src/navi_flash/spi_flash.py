"""GD25LQ16E command set over a ROM_SW session: identification, status, write enable, erase, program, read."""

from __future__ import annotations

from . import chips
from .chips import ChipSpec
from .errors import ChipError, FlashTimeoutError, UsageError
from .rom_sw import MAX_DATA, RomSwSession
from .transport import wait_until


def has_jedec(raw: bytes, jedec: bytes = chips.GD25LQ16E.jedec) -> bool:
    """Whether an RDID capture contains the expected id, allowing for a rotated capture."""
    return jedec in raw + raw[:2]


class SpiFlash:
    """One SPI NOR chip behind ROM_SW. Reads are primed because the RX window lags one transaction."""

    def __init__(self, session: RomSwSession, spec: ChipSpec = chips.GD25LQ16E) -> None:
        self.session, self.spec = session, spec
        self.wrote = False  # write-disable is due on exit (a write-enable was issued, or the command intends to write)

    def read_register(self, opcode: int, count: int = 1) -> bytes:
        """Read `count` register bytes, priming with an identical-opcode transaction first."""
        self.session.transfer(opcode, data_in=max(2, count), keep_rx=False)
        return self.session.transfer(opcode, data_in=count)

    def status(self, opcode: int = chips.OP_RDSR1) -> int:
        """SR1 (05h), SR2 (35h) or SR3 (15h)."""
        return self.read_register(opcode)[0]

    def rdid(self) -> bytes:
        """The raw 4-byte RDID capture."""
        return self.read_register(chips.OP_RDID, 4)

    def check_id(self) -> bytes:
        """Read RDID and raise ChipError unless it shows the expected part."""
        raw = self.rdid()
        if not has_jedec(raw, self.spec.jedec):
            raise ChipError(f"unexpected JEDEC capture {raw.hex()} (want {self.spec.jedec.hex()} for {self.spec.name}); check the card and cable")
        return raw

    def sfdp(self, count: int = 24) -> bytes:
        """SFDP capture (5Ah); the first byte is the dummy cycle the host does not send, kept for diagnostics."""
        self.session.transfer(chips.OP_SFDP, address_len=3, data_in=count, keep_rx=False)
        return self.session.transfer(chips.OP_SFDP, address_len=3, data_in=count)

    def wait_idle(self, timeout: float = 2.0) -> int:
        """Poll SR1 until BUSY clears; return SR1."""
        sr1 = [0]

        def idle() -> bool:
            sr1[0] = self.status()
            return not sr1[0] & chips.SR1_BUSY

        if not wait_until(self.session.transport, idle, timeout, interval=0.002):
            raise FlashTimeoutError(f"flash stayed busy for {timeout}s (SR1={sr1[0]:#04x}); power-cycle the card and retry")
        return sr1[0]

    def write_enable(self) -> None:
        """WREN and check that WEL latched."""
        self.wrote = True
        self.session.transfer(chips.OP_WREN)
        sr1 = self.status()
        if not sr1 & chips.SR1_WEL:
            raise ChipError(f"write enable did not latch (SR1={sr1:#04x}); the chip may be write-protected by hardware")

    def write_disable(self) -> None:
        """WRDI, so a half-finished command leaves no write latch armed."""
        self.session.transfer(chips.OP_WRDI)
        self.wrote = False

    def protection(self) -> tuple[int, bool]:
        """(BP bits of SR1, CMP set)."""
        sr1, sr2 = self.status(), self.status(chips.OP_RDSR2)
        return sr1 & self.spec.sr1_bp_mask, bool(sr2 & self.spec.sr2_cmp_bit)

    def clear_cmp(self) -> bool:
        """Clear SR2.CMP preserving every other writable bit; return False if it was already clear."""
        sr1, sr2 = self.status(), self.status(chips.OP_RDSR2)
        if not sr2 & self.spec.sr2_cmp_bit:
            return False
        self.write_enable()
        # BUSY and WEL are not writable; keep all protection and QE fields except CMP.
        self.session.transfer(chips.OP_WRSR, data_out=bytes((sr1 & 0xFC, sr2 & ~self.spec.sr2_cmp_bit & 0xFF)))
        self.wait_idle(1.0)
        new_sr2 = self.status(chips.OP_RDSR2)
        if new_sr2 & self.spec.sr2_cmp_bit:
            raise ChipError(f"failed to clear CMP (SR2={new_sr2:#04x}); the status register may be locked (SRP)")
        return True

    def erase_sector(self, address: int) -> None:
        """4 KiB sector erase (20h) and wait."""
        if address % self.spec.sector_size or not 0 <= address < self.spec.size:
            raise UsageError(f"sector address {address:#x} is not a 4 KiB aligned flash address")
        self.write_enable()
        self.session.transfer(chips.OP_SECTOR_ERASE, address=address, address_len=3)
        self.wait_idle(2.0)

    def program_page(self, address: int, data: bytes) -> None:
        """Page program (02h) of 1..256 bytes that stay inside one 256-byte page, and wait."""
        page = self.spec.page_size
        if not data or len(data) > page or (address % page) + len(data) > page:
            raise UsageError(f"page program of {len(data)} bytes at {address:#x} crosses a {page}-byte page boundary")
        self.write_enable()
        self.session.transfer(chips.OP_PAGE_PROGRAM, address=address, address_len=3, data_out=data)
        self.wait_idle(1.0)

    def read(self, address: int, count: int) -> bytes:
        """Read (03h) in chunks of at most 256 bytes; each chunk is sent twice because of the RX lag."""
        if address < 0 or count < 0 or address + count > self.spec.size:
            raise UsageError(f"read of {count:#x} bytes at {address:#x} is outside the {self.spec.size:#x}-byte flash")
        output = bytearray()
        while count:
            size = min(count, MAX_DATA)
            self.session.transfer(chips.OP_READ, address=address, address_len=3, data_in=size, keep_rx=False)
            output += self.session.transfer(chips.OP_READ, address=address, address_len=3, data_in=size)
            address, count = address + size, count - size
        return bytes(output)
