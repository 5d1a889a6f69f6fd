"""BAR5 MMIO operations that navi-flash spends per MiB dumped, per MiB verified and per sector flashed.

The peer is a faithful model of the seed tool's protocol (extra/amdflash/romless.py): seven registers saved, set up and
restored around every ROM_SW transfer, a posted-write flush read, the eagerly formatted timeout message's STATUS read,
every read sent twice with the window read both times. Both run against the same simulated card, which counts MMIO;
the SPI READ transactions on the wire are checked to be identical. MMIO is counted per 32-bit BAR5 access (what the
single-TLP USB transport and native PCI issue). The last figure runs a 64 KiB read of both protocols through real pyusb
calls into the simulated ASM24 bridge and counts USB control transfers (a read costs two, a write one).

Run: uv run --frozen python benchmarks/navi_flash_mmio.py
"""

from __future__ import annotations

import json
import random
import tempfile

from navi_flash import open_flash, open_transport, read_range, regs, romless_flash, verify_image
from navi_flash.devices import DeviceContext
from navi_flash.sim import SimCard, SimTransport, SimUsbBackend
from navi_flash.transport import Transport, wait_until

FLASH_SIZE, SECTOR, PAGE, MAX_DATA = 0x200000, 0x1000, 0x100, 0x100
MIB = 1 << 20
FLASH_SECTORS = 32
USB_SAMPLE = 0x10000  # bytes read through the simulated USB bridge (pyusb is slow; the figure is scaled to 1 MiB)


class SeedSPI:
    """The seed's Navi31SPI + GD25LQ16E, reduced to the MMIO and SPI sequence it issues (timeouts on the transport clock)."""

    def __init__(self, transport: Transport, prescale: int = 8) -> None:
        self.t = transport
        rom_cntl = self.t.read32(regs.ROM_CNTL)
        self.t.write32(regs.ROM_CNTL, (rom_cntl & 0xE0FFFFFF) | (1 << 28) | (prescale << 24) | 1)

    def transfer(self, opcode: int, address: int = 0, address_len: int = 0, data_out: bytes = b"", data_in: int = 0) -> bytes:
        t = self.t
        count = len(data_out) if data_out else data_in
        mask, pad_a, pad_en = t.read32(regs.GPIO_PAD_MASK), t.read32(regs.GPIO_PAD_A), t.read32(regs.GPIO_PAD_EN)
        mirror, rom_cntl = t.read32(regs.PAGE_MIRROR_CNTL), t.read32(regs.ROM_CNTL)
        try:
            t.write32(regs.GPIO_PAD_MASK, mask & ~0x780)
            t.write32(regs.GPIO_PAD_A, pad_a & ~0x780)
            t.write32(regs.GPIO_PAD_EN, pad_en & ~0x780)
            t.write32(regs.PAGE_MIRROR_CNTL, (mirror & 0xF1FFFFFF) | 0x06000000)
            t.write32(regs.ROM_CNTL, (rom_cntl & ~0xF) | 8)
            t.write32(regs.ROM_SW_CNTL, 0)
            t.write32(regs.ROM_SW_STATUS, 0)
            if t.read32(regs.ROM_SW_STATUS) != 0:
                raise RuntimeError("ROM_SW_STATUS did not clear")
            t.write32(regs.ROM_SW_COMMAND, ((address & 0xFFFFFF) << 8) | opcode)
            for offset in range(0, len(data_out), 4):
                t.write32(regs.ROM_SW_DATA + offset, int.from_bytes(data_out[offset : offset + 4].ljust(4, b"\0"), "big"))
            t.write32(regs.ROM_SW_CNTL, (address_len << 16) | (regs.RETURN_DATA_EN if data_in else 0) | count)
            t.read32(regs.ROM_SW_CNTL)  # posted-write flush
            t.read32(regs.ROM_SW_STATUS)  # the seed formats its timeout message (with a STATUS read) before waiting
            if not wait_until(t, lambda: t.read32(regs.ROM_SW_STATUS) & 1, 2.0):
                raise RuntimeError("ROM_SW transaction timeout")
            if not data_in:
                return b""
            raw = b"".join(t.read32(regs.ROM_SW_DATA + 4 * i).to_bytes(4, "little") for i in range((data_in + 3) // 4))
            return raw[:data_in]
        finally:
            t.write32(regs.ROM_SW_CNTL, 0)
            t.write32(regs.ROM_SW_STATUS, 0)
            t.write32(regs.ROM_CNTL, rom_cntl)
            t.write32(regs.PAGE_MIRROR_CNTL, mirror)
            t.write32(regs.GPIO_PAD_A, pad_a)
            t.write32(regs.GPIO_PAD_EN, pad_en)
            t.write32(regs.GPIO_PAD_MASK, mask)

    def status(self) -> int:
        self.transfer(0x05, data_in=2)
        return self.transfer(0x05, data_in=1)[0]

    def rdid(self) -> bytes:
        self.transfer(0x9F, data_in=4)
        return self.transfer(0x9F, data_in=4)

    def wait_idle(self) -> None:
        while self.status() & 1:
            self.t.sleep(0.002)

    def write_enable(self) -> None:
        self.transfer(0x06)
        if not self.status() & 2:
            raise RuntimeError("WREN failed")

    def read(self, address: int, count: int) -> bytes:
        out = bytearray()
        while count:
            size = min(count, MAX_DATA)
            self.transfer(0x03, address, 3, data_in=size)
            out += self.transfer(0x03, address, 3, data_in=size)
            address, count = address + size, count - size
        return bytes(out)

    def flash_sector(self, address: int, wanted: bytes) -> None:
        self.write_enable()
        self.transfer(0x20, address, 3)
        self.wait_idle()
        for offset in range(0, SECTOR, PAGE):
            page = wanted[offset : offset + PAGE]
            if page != b"\xff" * PAGE:
                self.write_enable()
                self.transfer(0x02, address + offset, 3, data_out=page)
                self.wait_idle()
        if self.read(address, SECTOR) != wanted:
            raise RuntimeError("verify mismatch")


def card_with(image: bytes) -> SimCard:
    card = SimCard(image)
    card.chip.wire = []
    return card


def reads_on_wire(card: SimCard) -> list[tuple[bytes, int]]:
    assert card.chip.wire is not None
    return [(tx, n) for tx, n in card.chip.wire if tx[0] == 0x03]


def measure(image: bytes, target: bytes) -> dict[str, tuple[float, float]]:
    results: dict[str, tuple[float, float]] = {}

    seed_card, ours_card = card_with(image), card_with(image)
    seed = SeedSPI(SimTransport(seed_card))
    seed.rdid()
    seed_dump = b"".join(seed.read(address, SECTOR) for address in range(0, FLASH_SIZE, SECTOR))
    with open_flash(SimTransport(ours_card)) as flash:
        ours_dump = read_range(flash, 0, FLASH_SIZE)
    assert seed_dump == ours_dump == image
    assert reads_on_wire(seed_card) == reads_on_wire(ours_card), "the SPI READ traffic must be identical"
    results["mmio_per_mib_dumped"] = (ours_card.mmio_ops * MIB / FLASH_SIZE, seed_card.mmio_ops * MIB / FLASH_SIZE)
    results["spi_transactions_per_mib_dumped"] = (len(ours_card.chip.wire) * MIB / FLASH_SIZE, len(seed_card.chip.wire) * MIB / FLASH_SIZE)

    seed_card, ours_card = card_with(image), card_with(image)
    seed = SeedSPI(SimTransport(seed_card))
    seed.rdid()
    for address in range(0, FLASH_SIZE, SECTOR):
        if seed.read(address, SECTOR) != image[address : address + SECTOR]:
            raise RuntimeError("seed verify mismatch")
    with open_flash(SimTransport(ours_card)) as flash:
        assert verify_image(flash, image).ok
    results["mmio_per_mib_verified"] = (ours_card.mmio_ops * MIB / FLASH_SIZE, seed_card.mmio_ops * MIB / FLASH_SIZE)

    # Sectors that need erase and a full program: the seed's only mode, and navi-flash's most expensive one.
    seed_card, ours_card = card_with(image), card_with(image)
    seed = SeedSPI(SimTransport(seed_card))
    seed.rdid()
    for sector in range(FLASH_SECTORS):
        seed.flash_sector(sector * SECTOR, target[sector * SECTOR : (sector + 1) * SECTOR])
    report = romless_flash(SimTransport(ours_card), target, sector_count=FLASH_SECTORS)
    assert report.erased == FLASH_SECTORS and bytes(ours_card.flash) == bytes(seed_card.flash)
    results["mmio_per_sector_flashed"] = (ours_card.mmio_ops / FLASH_SECTORS, seed_card.mmio_ops / FLASH_SECTORS)

    # Resuming over sectors that already match: navi-flash reads and skips, the seed erases and rewrites them.
    seed_card, ours_card = card_with(target), card_with(target)
    seed = SeedSPI(SimTransport(seed_card))
    seed.rdid()
    for sector in range(FLASH_SECTORS):
        seed.flash_sector(sector * SECTOR, target[sector * SECTOR : (sector + 1) * SECTOR])
    report = romless_flash(SimTransport(ours_card), target, sector_count=FLASH_SECTORS)
    assert report.skipped == FLASH_SECTORS
    results["mmio_per_identical_sector_flashed"] = (ours_card.mmio_ops / FLASH_SECTORS, seed_card.mmio_ops / FLASH_SECTORS)

    # The same reads through real pyusb calls into the simulated ASM24 bridge: each read is an F0h OUT plus an F0h IN.
    with tempfile.TemporaryDirectory() as lock_dir:
        counts = []
        for protocol in ("ours", "seed"):
            backend = SimUsbBackend(SimCard(image))
            with open_transport("usb", 0, None, DeviceContext(usb_backend=backend, lock_dir=lock_dir)) as transport:
                start = backend.transfers
                if protocol == "ours":
                    with open_flash(transport) as flash:
                        assert read_range(flash, 0, USB_SAMPLE) == image[:USB_SAMPLE]
                else:
                    seed = SeedSPI(transport)
                    seed.rdid()
                    assert seed.read(0, USB_SAMPLE) == image[:USB_SAMPLE]
                counts.append((backend.transfers - start) * MIB / USB_SAMPLE)
    results["usb_control_transfers_per_mib_read"] = (counts[0], counts[1])
    return results


def main() -> None:
    rng = random.Random(7)
    image = b"\xaa\x55\xaa\x55" + rng.randbytes(FLASH_SIZE - 4)
    target = rng.randbytes(FLASH_SIZE)
    results = measure(image, target)
    print(f"{'metric':36} {'navi-flash':>14} {'seed model':>14} {'ratio':>8}")
    for metric, (ours, peer) in results.items():
        print(f"{metric:36} {ours:14.0f} {peer:14.0f} {ours / peer:8.3f}")
    for metric, (ours, peer) in results.items():
        unit = {"spi": "SPI transactions", "usb": "USB control transfers"}.get(metric[:3], "MMIO ops")
        print(json.dumps({"bench": "navi_flash_mmio", "metric": metric, "value": round(ours, 1), "unit": unit, "peer": "seed-protocol-model",
                          "peer_value": round(peer, 1), "ratio": round(ours / peer, 4)}))


if __name__ == "__main__":
    main()
