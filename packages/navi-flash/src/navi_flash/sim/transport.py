"""`SimTransport`: the Transport interface over a `SimCard`, with a virtual clock."""

from __future__ import annotations

from ..locks import DeviceLock
from ..transport import Transport
from .card import SimCard


class SimTransport(Transport):
    """BAR5 of a simulated card. Timeouts run on the card's virtual clock; `close` saves a card that lives in a directory."""

    name = "sim"

    def __init__(self, card: SimCard) -> None:
        self.card = card
        self.description = f"simulated Navi31 ({card.directory})" if card.directory else "simulated Navi31 (in memory)"
        # Like hardware, a card directory is driven by one process at a time (the lock lives in the directory).
        self.lock = DeviceLock("sim", card.directory) if card.directory else None
        self._closed = False

    def read32(self, offset: int) -> int:
        return self.card.read32(offset)

    def write32(self, offset: int, value: int) -> None:
        self.card.write32(offset, value)

    def monotonic(self) -> float:
        return self.card.clock

    def sleep(self, seconds: float) -> None:
        self.card.clock += seconds

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self.card.save()
            finally:
                if self.lock is not None:
                    self.lock.release()
