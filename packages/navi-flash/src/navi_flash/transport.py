"""The one small interface every transport implements: 32-bit BAR5 access, a clock, and close."""

from __future__ import annotations

import time
from types import TracebackType

from .errors import NaviFlashError


class Transport:
    """A path to one card's BAR5 register space.

    Implementations: `UsbTransport` (ASM24 bridge), `PciTransport` (native sysfs) and `SimTransport` (simulator).
    The clock methods exist so the simulator can run timeouts in virtual time; hardware transports keep the defaults.
    """

    name = "transport"
    description = ""

    def read32(self, offset: int) -> int:
        """Return the 32-bit register at byte `offset` of BAR5 as one aligned access; raise TransportError on link failure."""
        raise NotImplementedError

    def write32(self, offset: int, value: int) -> None:
        """Write `value` (masked to 32 bits) to byte `offset` of BAR5 as one aligned access; raise TransportError on link failure."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the device (USB interface, mmap, lock file). Safe to call twice."""

    def monotonic(self) -> float:
        """Seconds on a monotonic clock used for protocol timeouts."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Wait between polls; the simulator advances virtual time instead."""
        time.sleep(seconds)

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def wait_until(transport: Transport, predicate, timeout: float, interval: float = 0.0) -> bool:
    """Poll `predicate()` until it is truthy or `timeout` seconds pass on the transport's clock; return whether it succeeded."""
    deadline = transport.monotonic() + timeout
    while True:
        if predicate():
            return True
        if transport.monotonic() >= deadline:
            return False
        if interval:
            transport.sleep(interval)


def restore_registers(transport: Transport, values: list[tuple[int, int]], original: BaseException | None = None) -> None:
    """Write every (offset, value) even if some fail. With an `original` error, failures become notes on it; otherwise the first is raised."""
    failures: list[NaviFlashError] = []
    for offset, value in values:
        try:
            transport.write32(offset, value)
        except NaviFlashError as exc:
            failures.append(exc)
    if not failures:
        return
    if original is None:
        raise failures[0]
    original.add_note(f"also failed to restore registers: {failures[0]}")
