"""Fault injection switches for the simulator; each one models a failure seen (or feared) on real hardware."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Faults:
    """Which faults the simulated card injects. All off by default."""

    stuck_bits: dict[int, int] = field(default_factory=dict)  # flash address -> bits that can no longer be programmed to 0
    busy_forever: bool = False  # once an erase/program/status write starts, the chip never clears BUSY
    wrong_jedec: bool = False  # the chip answers RDID with another part's id
    usb_disconnect_after: int | None = None  # the USB device vanishes after this many control transfers
    f0_transient: int = 0  # every PCIe completion read fails with a transient result code this many times first
    f0_persistent: bool = False  # every PCIe completion read fails
    interrupt_after_transactions: int | None = None  # raise KeyboardInterrupt when this ROM_SW transaction starts (Ctrl-C)
    disconnect_after_mmio: int | None = None  # MMIO fails with TransportError after this many operations

    def to_json(self) -> dict:
        """A JSON-safe dict (integer keys become strings)."""
        data = asdict(self)
        data["stuck_bits"] = {str(address): mask for address, mask in self.stuck_bits.items()}
        return data

    @classmethod
    def from_json(cls, data: dict) -> Faults:
        """Inverse of `to_json`."""
        data = dict(data)
        data["stuck_bits"] = {int(address): mask for address, mask in data.get("stuck_bits", {}).items()}
        return cls(**data)
