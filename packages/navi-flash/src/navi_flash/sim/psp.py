"""A scripted PSP early-boot firmware mailbox: enough of the flash-update state machine to test the host side."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from .. import regs

GET_BOOT_PARTITION, GET_FB_STATE, GET_TRANSFER_TYPE = 0x01, 0x06, 0x07
START_TRANSFER, DATA_TRANSFER, END_TRANSFER = 0x08, 0x09, 0x0A
SPI_GET_MODEL_ID = 0x0B
ERR_INVALID_PARAMETER, ERR_INVALID_COMMAND, ERR_TRANSFER = 0x03, 0x0E, 0x11
ERR_GATED = 0x0A  # what GET_TRANSFER_TYPE returns once SOS has loaded


@dataclass
class PspScript:
    """What the firmware answers. `transfer_types` is the sequence of GET_TRANSFER_TYPE states, one per streamed item."""

    boot_partition: int = 0
    fb_state: int = 0
    model_id: int = 0xC86015
    transfer_types: list[int] = field(default_factory=lambda: [0x001, 0x080, 0x081, 0x004, 0x005, 0x208])
    gated: bool = False  # GET_TRANSFER_TYPE fails with 0xA (update commands gated after SOS)
    not_ready: bool = False  # the mailbox never shows its ready bit
    errors: dict[int, tuple[int, int]] = field(default_factory=dict)  # command -> (occurrence from 1, error code)
    latency: int = 1  # COMMAND reads that show not-ready after each doorbell

    @classmethod
    def from_json(cls, data: dict) -> PspScript:
        """Build from a JSON script; `errors` maps a command number (string) to [occurrence, error]."""
        data = dict(data)
        data["errors"] = {int(str(command), 0): (int(pair[0]), int(pair[1])) for command, pair in data.get("errors", {}).items()}
        return cls(**data)

    def to_json(self) -> dict:
        """Inverse of `from_json`."""
        return {**self.__dict__, "errors": {str(command): list(pair) for command, pair in self.errors.items()}}


class SimPsp:
    """Mailbox registers: COMMAND (ready bit 31, command in 23:16, error in 15:0), COMMAND_DATA and the doorbell."""

    def __init__(self, script: PspScript, received: list[dict] | None = None) -> None:
        self.script = script
        self.received = received if received is not None else []  # completed and aborted streams, persisted by the card
        self.command_reg = 0 if script.not_ready else regs.PSP_READY
        self.data_reg = 0
        self.pending = 0
        self.step = len([entry for entry in self.received if entry["complete"]])
        self.counts: dict[int, int] = {}
        self.transfer: tuple[int, int, bytearray] | None = None  # (item, size, data)

    def read(self, offset: int) -> int:
        """Mailbox register read (COMMAND shows not-ready for `latency` reads after a doorbell)."""
        if offset == regs.PSP_COMMAND:
            if self.pending:
                self.pending -= 1
                return self.command_reg & ~regs.PSP_READY
            return self.command_reg
        if offset == regs.PSP_COMMAND_DATA:
            return self.data_reg
        return 0

    def write(self, offset: int, value: int) -> None:
        """Mailbox register write; the doorbell executes the command."""
        if offset == regs.PSP_COMMAND_DATA:
            self.data_reg = value
        elif offset == regs.PSP_COMMAND:
            self.command_reg = value & ~regs.PSP_READY
        elif offset == regs.PSP_DOORBELL:
            command = (self.command_reg >> 16) & 0xFF
            error, response = self._execute(command, self.data_reg)
            self.data_reg = response
            ready = 0 if self.script.not_ready else regs.PSP_READY
            self.command_reg = ready | (command << 16) | error
            self.pending = self.script.latency

    def state(self) -> int:
        """The current GET_TRANSFER_TYPE answer."""
        types = self.script.transfer_types
        return types[min(self.step, len(types) - 1)] if types else 0

    def _execute(self, command: int, data: int) -> tuple[int, int]:
        self.counts[command] = self.counts.get(command, 0) + 1
        injected = self.script.errors.get(command)
        if injected and injected[0] == self.counts[command]:
            if command == END_TRANSFER:
                self._finish(data, complete=False)
            return injected[1], 0
        if command == GET_BOOT_PARTITION:
            return 0, self.script.boot_partition
        if command == GET_FB_STATE:
            return 0, self.script.fb_state
        if command == SPI_GET_MODEL_ID:
            return 0, self.script.model_id
        if command == GET_TRANSFER_TYPE:
            return (ERR_GATED, 0) if self.script.gated else (0, self.state())
        if command == START_TRANSFER:
            item, size = data & 0xFF, data >> 8
            if item != self.state() & 0xFF or size == 0:
                return ERR_INVALID_PARAMETER, 0
            self.transfer = (item, size, bytearray())
            return 0, 0
        if command == DATA_TRANSFER:
            if self.transfer is None or len(self.transfer[2]) >= self.transfer[1]:
                return ERR_TRANSFER, 0
            self.transfer[2].extend(data.to_bytes(4, "little"))
            return 0, 0
        if command == END_TRANSFER:
            if self.transfer is None:
                return ERR_TRANSFER, 0
            item, size, payload = self.transfer
            complete = data == (size << 8 | item) and len(payload) == size
            self._finish(data, complete)
            if not complete:
                return ERR_TRANSFER, 0
            self.step += 1
            return 0, 0
        return ERR_INVALID_COMMAND, 0

    def _finish(self, end_data: int, complete: bool) -> None:
        if self.transfer is None:
            return
        item, size, payload = self.transfer
        self.received.append({"item": item, "size": size, "sent": len(payload), "end": end_data, "complete": complete,
                              "sha256": hashlib.sha256(payload).hexdigest()})
        self.transfer = None
