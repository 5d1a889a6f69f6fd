"""Driver for the SMUIO ROM_SW engine: one SPI transaction per `transfer`, inside a session that owns the controller setup."""

from __future__ import annotations

from types import TracebackType

from . import regs
from .errors import EngineError, UsageError
from .transport import Transport, restore_registers, wait_until

MAX_DATA = regs.ROM_SW_WINDOW_BYTES
GATED_HINT = "the engine may be gated after PSP/SOS boot; romless only works while the PBL is stalled on an empty or corrupt flash"


class RomSwSession:
    """Holds the GPIO pad masking, PAGE_MIRROR and ROM_CNTL prescaler setup for a whole command and restores it once.

    The seed saved and restored seven registers around every transaction; the SPI traffic is identical here, only the
    MMIO around it is cut. Use as a context manager: entering saves and sets up, leaving restores on every path.
    """

    def __init__(self, transport: Transport, prescale: int = 8, *, timeout: float = 2.0) -> None:
        if not 0 <= prescale <= 15:
            raise UsageError(f"prescale must be 0..15, got {prescale}")
        self.transport, self.prescale, self.timeout = transport, prescale, timeout
        self.saved: dict[int, int] | None = None
        self.transactions = 0

    def __enter__(self) -> RomSwSession:
        self.open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close(exc)  # with an error in flight, a failed restore becomes a note on it instead of replacing it

    def open(self) -> None:
        """Save the five shared registers and route the SPI pins to ROM_SW."""
        t = self.transport
        self.saved = {offset: t.read32(offset) for offset in regs.SAVED_REGISTERS}
        try:
            self._setup()
        except BaseException as exc:
            self.close(exc)
            raise

    def _setup(self) -> None:
        t, saved = self.transport, self.saved
        assert saved is not None
        mask = ~regs.SPI_GPIO_BITS & 0xFFFFFFFF
        t.write32(regs.GPIO_PAD_MASK, saved[regs.GPIO_PAD_MASK] & mask)
        t.write32(regs.GPIO_PAD_A, saved[regs.GPIO_PAD_A] & mask)
        t.write32(regs.GPIO_PAD_EN, saved[regs.GPIO_PAD_EN] & mask)
        mirror = saved[regs.PAGE_MIRROR_CNTL]
        t.write32(regs.PAGE_MIRROR_CNTL, (mirror & ~regs.PAGE_MIRROR_MASK & 0xFFFFFFFF) | regs.PAGE_MIRROR_ROM_SW)
        # Select our prescaler rather than inheriting a possibly unusable boot value, and put the controller in SW mode.
        rom_cntl = saved[regs.ROM_CNTL] & ~regs.ROM_CNTL_PRESCALE_MASK & ~0xF & 0xFFFFFFFF
        t.write32(regs.ROM_CNTL, rom_cntl | regs.ROM_CNTL_PRESCALE_SELECT | (self.prescale << regs.ROM_CNTL_PRESCALE_SHIFT) | regs.ROM_CNTL_SW_MODE)
        t.write32(regs.ROM_SW_CNTL, 0)
        t.write32(regs.ROM_SW_STATUS, 0)
        status = t.read32(regs.ROM_SW_STATUS)
        if status != 0:
            raise EngineError(f"ROM_SW_STATUS did not clear (status={status:#010x}); {GATED_HINT}")

    def close(self, original: BaseException | None = None) -> None:
        """Zero the engine controls and write every saved register back, in the seed's order. Idempotent.

        Every write is attempted even if one fails; see `restore_registers` for how failures are reported.
        """
        if self.saved is None:
            return
        saved, self.saved = self.saved, None
        values = [(regs.ROM_SW_CNTL, 0), (regs.ROM_SW_STATUS, 0)] + [(offset, saved[offset]) for offset in regs.RESTORE_ORDER]
        restore_registers(self.transport, values, original)

    def transfer(self, opcode: int, *, address: int = 0, address_len: int = 0, data_out: bytes = b"", data_in: int = 0,
                 keep_rx: bool = True) -> bytes:
        """Run one SPI transaction: opcode, `address_len` address bytes, then TX `data_out` or RX `data_in` bytes.

        The RX window shows the *preceding* RX transaction's capture, so callers prime reads (see `SpiFlash`). A priming
        transfer passes `keep_rx=False` to skip reading the window, which it would throw away anyway.
        """
        if self.saved is None:
            raise EngineError("ROM_SW session is not open")
        if data_out and data_in:
            raise UsageError("simultaneous TX and RX is unsupported by ROM_SW")
        if not 0 <= address_len <= 3:
            raise UsageError("address_len must be 0..3")
        count = len(data_out) if data_out else data_in
        if not 0 <= count <= MAX_DATA:
            raise UsageError(f"a ROM_SW transfer carries at most {MAX_DATA} bytes, got {count}")
        t = self.transport
        # Reset the engine before every transaction exactly as the validated sequence does; only the pad, mirror and
        # prescaler setup around it is hoisted to the session.
        t.write32(regs.ROM_SW_CNTL, 0)
        t.write32(regs.ROM_SW_STATUS, 0)
        status = t.read32(regs.ROM_SW_STATUS)
        if status != 0:
            raise EngineError(f"ROM_SW_STATUS did not clear before {opcode:#04x} (status={status:#010x}); {GATED_HINT}")
        # Navi31 serializes the low instruction byte first, then ADDRESS[23:0].
        t.write32(regs.ROM_SW_COMMAND, ((address & 0xFFFFFF) << 8) | (opcode & 0xFF))
        for offset in range(0, len(data_out), 4):
            t.write32(regs.ROM_SW_DATA + offset, int.from_bytes(data_out[offset : offset + 4].ljust(4, b"\0"), "big"))
        control = (address_len << regs.CNTL_NCMD_SHIFT) | (regs.RETURN_DATA_EN if data_in else 0) | count
        t.write32(regs.ROM_SW_CNTL, control)
        self.transactions += 1
        # The STATUS poll is a non-posted read, so it also flushes the CNTL write; no separate flush read is needed.
        polled = [0]

        def done() -> bool:
            polled[0] = t.read32(regs.ROM_SW_STATUS)
            return bool(polled[0] & regs.STATUS_DONE)

        if not wait_until(t, done, self.timeout):
            raise EngineError(f"ROM_SW transaction {opcode:#04x} timed out (status={polled[0]:#010x}); {GATED_HINT}")
        if not data_in or not keep_rx:
            return b""
        words = (data_in + 3) // 4
        raw = b"".join(t.read32(regs.ROM_SW_DATA + 4 * i).to_bytes(4, "little") for i in range(words))
        return raw[:data_in]
