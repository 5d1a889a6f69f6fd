"""The SMUIO ROM_SW engine: turns register writes into SPI transactions on the simulated chip."""

from __future__ import annotations

from collections.abc import Callable

from .. import regs
from .gd25 import GD25Model

WINDOW_DWORDS = regs.ROM_SW_WINDOW_BYTES // 4


class SimRomSw:
    """ROM_SW_CNTL/STATUS/COMMAND and the 256-byte data window.

    Model: writing ROM_SW_COMMAND arms the engine; the next ROM_SW_CNTL write runs one transaction and sets STATUS.DONE.
    TX bytes are the window read as big-endian dwords; RX bytes land in the window little-endian. With `rx_lag` the
    window shows the capture of the preceding RX transaction (the Navi31 quirk that makes the driver prime reads).
    A transaction only reaches the chip when the GPIO pads, PAGE_MIRROR and ROM_CNTL are set up; otherwise RX reads 0xFF.
    """

    def __init__(self, chip: GD25Model, register: Callable[[int], int], *, rx_lag: bool = True, gated: bool = False) -> None:
        self.chip, self.register = chip, register
        self.rx_lag, self.gated = rx_lag, gated
        self.cntl = self.status = self.command = 0
        self.window = [0] * WINDOW_DWORDS
        self.armed = False
        self.capture = b""
        self.transactions = 0
        self.done_polls = 0  # STATUS reads that still show the engine busy after a start (transaction time)
        self.pending_polls = 0
        self.before_transaction: Callable[[int], None] | None = None  # fault hook, gets the transaction number

    def owns(self, offset: int) -> bool:
        """Whether `offset` is one of the engine's registers."""
        return offset in (regs.ROM_SW_CNTL, regs.ROM_SW_STATUS, regs.ROM_SW_COMMAND) or (
            regs.ROM_SW_DATA <= offset < regs.ROM_SW_DATA + regs.ROM_SW_WINDOW_BYTES
        )

    def read(self, offset: int) -> int:
        """Engine register read (a gated engine shows GATED_STATUS)."""
        if offset == regs.ROM_SW_STATUS:
            if self.gated:
                return regs.GATED_STATUS
            if self.pending_polls:
                self.pending_polls -= 1
                return self.status & ~regs.STATUS_DONE
            return self.status
        if offset == regs.ROM_SW_CNTL:
            return self.cntl
        if offset == regs.ROM_SW_COMMAND:
            return self.command
        return self.window[(offset - regs.ROM_SW_DATA) // 4]

    def write(self, offset: int, value: int) -> None:
        """Engine register write; COMMAND arms, the next CNTL write runs the transaction."""
        if offset == regs.ROM_SW_STATUS:
            if not self.gated:  # any write acknowledges DONE; a gated engine ignores it
                self.status = 0
        elif offset == regs.ROM_SW_COMMAND:
            self.command, self.armed = value, True
        elif offset == regs.ROM_SW_CNTL:
            self.cntl = value
            if self.armed and not self.gated:
                self.armed = False
                self._run()
        else:
            self.window[(offset - regs.ROM_SW_DATA) // 4] = value

    def routed(self) -> bool:
        """Whether the SPI pins are driven by ROM_SW: pads released, mirror and ROM_CNTL in software mode."""
        pads = self.register(regs.GPIO_PAD_MASK) | self.register(regs.GPIO_PAD_A) | self.register(regs.GPIO_PAD_EN)
        mirror = self.register(regs.PAGE_MIRROR_CNTL) & regs.PAGE_MIRROR_MASK
        rom_cntl = self.register(regs.ROM_CNTL)
        return (not pads & regs.SPI_GPIO_BITS and mirror == regs.PAGE_MIRROR_ROM_SW and rom_cntl & 0xF == regs.ROM_CNTL_SW_MODE
                and bool(rom_cntl & regs.ROM_CNTL_PRESCALE_SELECT))

    def _run(self) -> None:
        self.transactions += 1
        if self.before_transaction is not None:
            self.before_transaction(self.transactions)
        ncmd = ((self.cntl >> regs.CNTL_NCMD_SHIFT) & 0x3) + 1
        count = self.cntl & regs.CNTL_COUNT_MASK
        receive = bool(self.cntl & regs.RETURN_DATA_EN)
        # Low instruction byte first, then ADDRESS[23:0] most significant byte first.
        command = bytes([self.command & 0xFF]) + ((self.command >> 8) & 0xFFFFFF).to_bytes(3, "big")
        tx = command[:ncmd]
        if not receive:
            tx += b"".join(word.to_bytes(4, "big") for word in self.window)[:count]
        rx = self.chip.transaction(tx, count if receive else 0) if self.routed() else b"\xff" * (count if receive else 0)
        if receive:
            shown = self.capture if self.rx_lag else rx
            self.capture = rx
            padded = shown.ljust(regs.ROM_SW_WINDOW_BYTES, b"\0")[: regs.ROM_SW_WINDOW_BYTES]
            self.window = [int.from_bytes(padded[i : i + 4], "little") for i in range(0, len(padded), 4)]
        self.status = regs.STATUS_DONE
        self.pending_polls = self.done_polls
