"""The PSP early-boot firmware mailbox (C2PMSG COMMAND/COMMAND_DATA plus doorbell) and its item-streaming protocol."""

from __future__ import annotations

from collections.abc import Callable

from . import regs
from .errors import NaviFlashError, PSPError, UsageError
from .transport import Transport, wait_until

GET_BOOT_PARTITION, GET_FB_STATE, GET_TRANSFER_TYPE = 0x01, 0x06, 0x07
START_TRANSFER, DATA_TRANSFER, END_TRANSFER = 0x08, 0x09, 0x0A
SPI_GET_MODEL_ID = 0x0B
GATED_ERROR = 0x0A
GATED_HINT = "update commands gated: reset the card and do not initialize a driver/SOS before streaming"

PSP_ERRORS = {
    0x01: "generic error",
    0x02: "out of bounds",
    0x03: "invalid parameter",
    0x04: "off-chip boot error",
    0x05: "address not set",
    0x06: "parse off-chip error",
    0x07: "address map error",
    0x08: "parse on-chip error",
    0x09: "full update error",
    0x0A: "partition update error",
    0x0B: "map on-chip error",
    0x0C: "write to SPI error",
    0x0D: "signature validation error",
    0x0E: "invalid command",
    0x0F: "signature not found",
    0x10: "state machine not initialized",
    0x11: "state machine transfer error",
    0x12: "initialization error",
}

PROBE_COMMANDS = (("boot_partition", GET_BOOT_PARTITION), ("fb_state", GET_FB_STATE), ("model_id", SPI_GET_MODEL_ID),
                  ("transfer_type", GET_TRANSFER_TYPE))


class PspMailbox:
    """Send one command at a time: wait for the ready bit, write data and command, ring the doorbell, wait, read back."""

    def __init__(self, transport: Transport, log: Callable[[str], None] | None = None) -> None:
        self.transport = transport
        self.log = log or (lambda message: None)

    def command(self, command: int, data: int | None = None, *, timeout: float = 10.0) -> tuple[int, int]:
        """Return (error, response) for one mailbox command."""
        t = self.transport
        status = t.read32(regs.PSP_COMMAND)
        if not status & regs.PSP_READY:
            raise PSPError(f"PSP mailbox is not ready before command {command:#x} (status={status:#010x}); power-cycle the card and retry")
        if data is not None:
            t.write32(regs.PSP_COMMAND_DATA, data)
        t.write32(regs.PSP_COMMAND, command << 16)
        t.write32(regs.PSP_DOORBELL, 1)
        if not wait_until(t, lambda: t.read32(regs.PSP_COMMAND) & regs.PSP_READY, timeout):
            raise PSPError(f"PSP mailbox command {command:#x} timed out after {timeout}s; power-cycle the card and retry")
        return t.read32(regs.PSP_COMMAND) & 0xFFFF, t.read32(regs.PSP_COMMAND_DATA)

    def require(self, command: int, data: int | None = None, *, timeout: float = 10.0, name: str = "") -> int:
        """Like `command` but raise PSPError (with the firmware's error name) on a non-zero error."""
        error, response = self.command(command, data, timeout=timeout)
        if error:
            detail = PSP_ERRORS.get(error, "unknown error")
            hint = f"; {GATED_HINT}" if command == GET_TRANSFER_TYPE and error == GATED_ERROR else ""
            raise PSPError(f"PSP {name or hex(command)} failed: error={error:#x} ({detail}){hint}")
        return response

    def probe(self) -> dict[str, tuple[int, int]]:
        """Query boot partition, FB state, SPI model id and transfer type without changing anything."""
        return {name: self.command(command) for name, command in PROBE_COMMANDS}

    def stream(self, payload: bytes, item_type: int, transfer_type: int | None = None, progress: Callable[[int], None] | None = None) -> int:
        """Stream one ROM item as START, one DATA per dword, END; return the bytes sent.

        If anything interrupts the stream before all data was sent, END is sent once with the partial size so the
        firmware can close the session; END is never sent twice when the firmware rejected the real END.
        """
        if not payload:
            raise UsageError("payload is empty")
        if len(payload) > 0xFFFFFF:
            raise UsageError("payload exceeds the mailbox's 24-bit size field")
        if len(payload) % 4:
            raise UsageError("payload size must be divisible by four")
        if not 0 <= item_type <= 0xFF:
            raise UsageError("item type must fit in eight bits")
        if transfer_type is None:
            transfer_type = self.require(GET_TRANSFER_TYPE, name="GET_TRANSFER_TYPE")
        self.log(f"firmware transfer_type={transfer_type:#x}")
        if transfer_type & 0xFF != item_type:
            raise PSPError(f"firmware requests item {transfer_type & 0xFF:#x}, not {item_type:#x}")
        self.require(START_TRANSFER, (len(payload) << 8) | item_type, name="START_TRANSFER")
        sent = 0
        try:
            for offset in range(0, len(payload), 4):
                self.require(DATA_TRANSFER, int.from_bytes(payload[offset : offset + 4], "little"), name=f"DATA_TRANSFER@{offset:#x}")
                sent = offset + 4
                if progress is not None:
                    progress(4)
            self.require(END_TRANSFER, (sent << 8) | item_type, timeout=60.0, name="END_TRANSFER")
        except BaseException as exc:
            if sent != len(payload):
                try:
                    self.command(END_TRANSFER, (sent << 8) | item_type, timeout=10.0)
                except NaviFlashError as cleanup:
                    exc.add_note(f"also failed to end the partial transfer: {cleanup}")
            raise
        self.log(f"stream complete: type={item_type:#x} size={sent:#x}")
        return sent
