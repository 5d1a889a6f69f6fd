"""Behavioural model of a GD25LQ16E SPI NOR flash as seen from the SPI bus."""

from __future__ import annotations

from .. import chips
from ..chips import ChipSpec

# A minimal SFDP table: signature, revision 1.6, one parameter header (JEDEC basic table, 9 dwords at 0x30).
SFDP_TABLE = (b"SFDP" + bytes((0x06, 0x01, 0x00, 0xFF)) + bytes((0x00, 0x06, 0x01, 0x09, 0x30, 0x00, 0x00, 0xFF))).ljust(0x30, b"\xff") + bytes(
    (0xE5, 0x20, 0xF1, 0xFF, 0xFF, 0xFF, 0xFF, 0x00)
).ljust(0x100 - 0x30, b"\xff")

SR1_WRITABLE = 0xFC  # BUSY and WEL are read-only
SR2_WRITABLE = 0x43  # SRP1, QE, CMP (LB bits are one-time programmable and left alone)


class GD25Model:
    """SPI-level model: `transaction(tx, rx_count)` takes the bytes the controller clocks out and returns what it clocks in.

    BUSY lasts a number of SR1 polls rather than wall time so tests stay fast and deterministic.
    """

    def __init__(self, data: bytearray, spec: ChipSpec = chips.GD25LQ16E, *, sr1: int = 0, sr2: int = 0, sr3: int = 0,
                 erase_polls: int = 3, program_polls: int = 1, wrsr_polls: int = 1) -> None:
        if len(data) != spec.size:
            raise ValueError(f"flash model needs exactly {spec.size:#x} bytes")
        self.spec, self.data = spec, data
        self.sr1, self.sr2, self.sr3 = sr1 & SR1_WRITABLE, sr2, sr3
        self.erase_polls, self.program_polls, self.wrsr_polls = erase_polls, program_polls, wrsr_polls
        self.jedec = spec.jedec
        self.busy_forever = False
        self.stuck_bits: dict[int, int] = {}  # address -> bits that stay 1 (worn cells)
        self.busy_left = 0
        self.log: list[int] = []  # opcodes seen, for protocol assertions in tests
        self.wire: list[tuple[bytes, int]] | None = None  # set to a list to record every (tx, rx_count) on the bus
        self.erases = 0
        self.programs = 0

    @property
    def busy(self) -> bool:
        """True while an erase, program or status write is in progress."""
        return self.busy_left > 0

    def protected(self, address: int) -> bool:
        """Simplified BP/CMP decode: BP2..0 select an upper (BP3=0) or lower (BP3=1) region of 64 KiB << (n-1); CMP inverts it."""
        bp = (self.sr1 >> 2) & 0x1F
        level = bp & 0x7
        region = 0 if level == 0 else min(self.spec.size, 0x10000 << (level - 1))
        inside = address < region if bp & 0x8 else address >= self.spec.size - region
        return inside != bool(self.sr2 & self.spec.sr2_cmp_bit)

    def _start_busy(self, polls: int) -> None:
        self.sr1 |= chips.SR1_BUSY | chips.SR1_WEL
        self.busy_left = max(1, polls)

    def _poll(self) -> None:
        if self.busy_left and not self.busy_forever:
            self.busy_left -= 1
            if self.busy_left == 0:
                self.sr1 &= ~(chips.SR1_BUSY | chips.SR1_WEL)

    def _status1(self) -> int:
        return self.sr1 | (chips.SR1_BUSY if self.busy else 0)

    def transaction(self, tx: bytes, rx_count: int) -> bytes:
        """Run one chip-select cycle: `tx` holds opcode, address and output data; return `rx_count` bytes clocked in afterwards."""
        if not tx:
            return b"\xff" * rx_count
        opcode, rest = tx[0], tx[1:]
        self.log.append(opcode)
        if self.wire is not None:
            self.wire.append((bytes(tx), rx_count))
        if opcode == chips.OP_RDSR1:
            value = self._status1()
            self._poll()
            return bytes([value]) * rx_count
        if opcode == chips.OP_RDSR2:
            return bytes([self.sr2]) * rx_count
        if opcode == chips.OP_RDSR3:
            return bytes([self.sr3]) * rx_count
        if self.busy:  # a busy chip ignores everything but status reads
            return b"\xff" * rx_count
        if opcode == chips.OP_RDID:
            return bytes(self.jedec[i % len(self.jedec)] for i in range(rx_count))
        if opcode == chips.OP_WREN:
            self.sr1 |= chips.SR1_WEL
        elif opcode == chips.OP_WRDI:
            self.sr1 &= ~chips.SR1_WEL
        elif opcode == chips.OP_READ and len(rest) >= 3:
            address = int.from_bytes(rest[:3], "big")
            return bytes(self.data[(address + i) % self.spec.size] for i in range(rx_count))
        elif opcode == chips.OP_SFDP and len(rest) >= 3:
            address = int.from_bytes(rest[:3], "big")
            # The host sends no dummy byte, so the first byte captured falls in the chip's dummy cycle.
            stream = b"\xff" + bytes(SFDP_TABLE[(address + i) % len(SFDP_TABLE)] for i in range(rx_count))
            return stream[:rx_count]
        elif opcode == chips.OP_WRSR and rest and self.sr1 & chips.SR1_WEL:
            self.sr1 = (self.sr1 & ~SR1_WRITABLE) | (rest[0] & SR1_WRITABLE)
            if len(rest) > 1:
                self.sr2 = (self.sr2 & ~SR2_WRITABLE) | (rest[1] & SR2_WRITABLE)
            self._start_busy(self.wrsr_polls)
        elif opcode == chips.OP_SECTOR_ERASE and len(rest) >= 3 and self.sr1 & chips.SR1_WEL:
            base = int.from_bytes(rest[:3], "big") % self.spec.size & ~(self.spec.sector_size - 1)
            if not self.protected(base):
                self.data[base : base + self.spec.sector_size] = b"\xff" * self.spec.sector_size
                self.erases += 1
            self._start_busy(self.erase_polls)
        elif opcode == chips.OP_PAGE_PROGRAM and len(rest) >= 3 and self.sr1 & chips.SR1_WEL:
            self._program(int.from_bytes(rest[:3], "big") % self.spec.size, rest[3:])
            self._start_busy(self.program_polls)
        return b"\xff" * rx_count

    def _program(self, address: int, payload: bytes) -> None:
        page = self.spec.page_size
        base = address & ~(page - 1)
        # Only the last page_size bytes latch; the column address wraps inside the page.
        start = max(0, len(payload) - page)
        for i, byte in enumerate(payload[start:], start=start):
            target = base + (address - base + i) % page
            if self.protected(target):
                continue
            self.data[target] &= byte | self.stuck_bits.get(target, 0)
        self.programs += 1
