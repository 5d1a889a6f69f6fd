"""A whole simulated Navi31 card: BAR5 register file, ROM_SW engine, flash chip, ROM aperture and PSP mailbox.

A card can live in a directory (`flash.bin` plus `card.json`), so separate CLI runs act on the same board.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .. import chips, regs
from ..errors import TransportError, UsageError
from .aperture import APERTURE_MODES, SimAperture
from .faults import Faults
from .gd25 import GD25Model
from .psp import PspScript, SimPsp
from .rom_sw import SimRomSw

# Power-on values chosen so that a missed restore is visible (every SPI-related field differs from its ROM_SW setting).
DEFAULT_REGISTERS = {
    regs.ROM_CNTL: 0x0A000021,
    regs.PAGE_MIRROR_CNTL: 0x00000001,
    regs.ROM_INDEX: 0x00000000,
    regs.GPIO_PAD_MASK: 0xFFFFFFFF,
    regs.GPIO_PAD_A: 0x00000780,
    regs.GPIO_PAD_EN: 0x00000F80,
}
MMIO_SECONDS = 20e-6  # virtual time per register access, roughly one USB round trip
FLASH_FILE, STATE_FILE = "flash.bin", "card.json"
WRONG_JEDEC = b"\xef\x40\x15"  # a Winbond W25Q16, the usual wrong-part suspect


class SimCard:
    """The simulated card. `read32`/`write32` are BAR5; `reads`/`writes` count every MMIO operation."""

    def __init__(self, image: bytes | None = None, *, cmp: bool = False, gated: bool = False, rx_lag: bool = True, aperture: str = "raw",
                 psp_script: PspScript | None = None, faults: Faults | None = None, directory: Path | None = None) -> None:
        spec = chips.GD25LQ16E
        if image is not None and len(image) != spec.size:
            raise UsageError(f"simulated flash image must be exactly {spec.size:#x} bytes, got {len(image):#x}")
        if aperture not in APERTURE_MODES:
            raise UsageError(f"aperture mode must be one of {', '.join(APERTURE_MODES)}")
        self.directory = directory
        self.options = {"cmp": cmp, "gated": gated, "rx_lag": rx_lag, "aperture": aperture}
        self.flash = bytearray(image if image is not None else b"\xff" * spec.size)
        self.chip = GD25Model(self.flash, spec, sr2=spec.sr2_cmp_bit if cmp else 0)
        self.registers = dict(DEFAULT_REGISTERS)
        self.rom_sw = SimRomSw(self.chip, self.register, rx_lag=rx_lag, gated=gated)
        self.aperture = SimAperture(self.flash, aperture)
        self.psp = SimPsp(psp_script or PspScript())
        self.faults = faults or Faults()
        self.reads = self.writes = 0
        self.clock = 0.0
        self.apply_faults()

    def apply_faults(self) -> None:
        """Push the fault switches into the models (call again after changing `faults`)."""
        self.chip.busy_forever = self.faults.busy_forever
        self.chip.stuck_bits = dict(self.faults.stuck_bits)
        self.chip.jedec = WRONG_JEDEC if self.faults.wrong_jedec else self.chip.spec.jedec
        self.rom_sw.before_transaction = self._maybe_interrupt if self.faults.interrupt_after_transactions is not None else None

    def _maybe_interrupt(self, number: int) -> None:
        if number == self.faults.interrupt_after_transactions:
            self.faults.interrupt_after_transactions = None  # one Ctrl-C, then cleanup may run
            self.rom_sw.before_transaction = None
            raise KeyboardInterrupt

    @property
    def mmio_ops(self) -> int:
        """Total BAR5 reads plus writes so far."""
        return self.reads + self.writes

    def register(self, offset: int) -> int:
        """A plain register's stored value (no side effects, not counted)."""
        return self.registers.get(offset, 0)

    def _tick(self) -> None:
        self.clock += MMIO_SECONDS
        limit = self.faults.disconnect_after_mmio
        if limit is not None and self.mmio_ops >= limit:
            raise TransportError("simulated card stopped answering MMIO; check the cable and power, then rerun")

    def read32(self, offset: int) -> int:
        """One BAR5 dword read with the hardware side effects."""
        self._tick()
        self.reads += 1
        if self.rom_sw.owns(offset):
            return self.rom_sw.read(offset)
        if offset == regs.ROM_DATA:
            return self.aperture.read_data()
        if offset == regs.ROM_INDEX:
            return self.aperture.index
        if offset in (regs.PSP_COMMAND, regs.PSP_COMMAND_DATA, regs.PSP_DOORBELL):
            return self.psp.read(offset)
        if offset == regs.ROM_CNTL and self.aperture.mode == "unavailable":
            return 0xFFFFFFFF
        return self.registers.get(offset, 0)

    def write32(self, offset: int, value: int) -> None:
        """One BAR5 dword write with the hardware side effects."""
        self._tick()
        self.writes += 1
        value &= 0xFFFFFFFF
        if self.rom_sw.owns(offset):
            self.rom_sw.write(offset, value)
        elif offset == regs.ROM_INDEX:
            self.aperture.write_index(value)
        elif offset in (regs.PSP_COMMAND, regs.PSP_COMMAND_DATA, regs.PSP_DOORBELL):
            self.psp.write(offset, value)
        else:
            self.registers[offset] = value

    def snapshot(self) -> dict[int, int]:
        """The values a tool must leave as it found them (plain registers plus the engine controls)."""
        values = dict(self.registers)
        values[regs.ROM_SW_CNTL] = self.rom_sw.cntl
        values[regs.ROM_SW_STATUS] = self.rom_sw.status
        values[regs.ROM_INDEX] = self.aperture.index
        return values

    # -- persistence -------------------------------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, image: bytes | None = None, **options) -> SimCard:
        """Make a new card in `directory` (created if needed) and save it."""
        directory = Path(directory)
        card = cls(image, directory=directory, **options)  # validate before creating anything on disk
        directory.mkdir(parents=True, exist_ok=True)
        card.save()
        return card

    @classmethod
    def load(cls, directory: Path) -> SimCard:
        """Open the card saved in `directory`."""
        directory = Path(directory)
        try:
            state = json.loads((directory / STATE_FILE).read_text())
            image = (directory / FLASH_FILE).read_bytes()
        except FileNotFoundError as exc:
            raise UsageError(f"{directory} holds no simulated card; create one with `navi-flash sim create {directory}`") from exc
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read the simulated card in {directory}: {exc}") from exc
        card = cls(image, directory=directory, psp_script=PspScript.from_json(state["psp_script"]), faults=Faults.from_json(state["faults"]),
                   **state["options"])
        card.chip.sr1, card.chip.sr2, card.chip.sr3 = state["status"]
        card.registers = {int(offset, 16): value for offset, value in state["registers"].items()}
        card.psp.received.extend(state.get("psp_received", []))
        card.psp.step = len([entry for entry in card.psp.received if entry["complete"]])
        card.apply_faults()
        return card

    def save(self) -> None:
        """Write the card back to its directory atomically (flash first, then state)."""
        if self.directory is None:
            return
        state = {
            "options": self.options,
            "status": [self.chip.sr1 & ~(chips.SR1_BUSY | chips.SR1_WEL), self.chip.sr2, self.chip.sr3],
            "registers": {f"{offset:#x}": value for offset, value in sorted(self.registers.items())},
            "faults": self.faults.to_json(),
            "psp_script": self.psp.script.to_json(),
            "psp_received": self.psp.received,
        }
        _atomic_write(self.directory / FLASH_FILE, bytes(self.flash))
        _atomic_write(self.directory / STATE_FILE, json.dumps(state, indent=1).encode())


def _atomic_write(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)
