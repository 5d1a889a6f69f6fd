"""Native PCI transport: sysfs enumeration, driver-binding check, lock file, and BAR5 through an mmap of resource5."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from .errors import DriverBoundError, TransportError
from .locks import DeviceLock
from .transport import Transport

SYSFS_PCI = Path("/sys/bus/pci/devices")
AMD_VENDOR, NAVI31_DEVICES = 0x1002, (0x744C,)


def _read_hex(path: Path) -> int | None:
    try:
        return int(path.read_text().strip(), 16)
    except (OSError, ValueError):
        return None


def find_pci_devices(root: Path = SYSFS_PCI) -> list[str]:
    """Bus addresses of Navi31 GPUs (1002:744c), sorted. An absent sysfs means no devices."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(entry.name for entry in root.iterdir()
                  if _read_hex(entry / "vendor") == AMD_VENDOR and _read_hex(entry / "device") in NAVI31_DEVICES)


def bound_driver(root: Path, bdf: str) -> str | None:
    """Name of the kernel driver bound to `bdf`, or None."""
    link = Path(root) / bdf / "driver"
    if not link.exists():
        return None
    return Path(os.path.realpath(link)).name


class PciTransport(Transport):
    """BAR5 via `resource5`. Every access is a single aligned 32-bit load or store through a memoryview of format 'I'."""

    name = "pci"

    def __init__(self, bdf: str, *, root: Path = SYSFS_PCI, unbind: bool = False, lock_dir: Path | None = None) -> None:
        root = Path(root)
        self.bdf, self.description = bdf, f"pci:{bdf}"
        self.lock = DeviceLock(f"pci-{bdf}", lock_dir)
        self._fd: int | None = None
        self._map: mmap.mmap | None = None
        self._words: memoryview | None = None
        try:
            self._detach_driver(root, unbind)
            self._enable(root / bdf / "enable")
            self._map_bar(root / bdf / "resource5")
        except BaseException:
            self.close()
            raise

    def _detach_driver(self, root: Path, unbind: bool) -> None:
        driver = bound_driver(root, self.bdf)
        if driver is None:
            return
        if not unbind:
            raise DriverBoundError(f"kernel driver {driver} is bound to {self.bdf}; rerun with --unbind to detach it (its display and compute stop)")
        try:
            (root / self.bdf / "driver" / "unbind").write_text(self.bdf)
        except OSError as exc:
            raise TransportError(f"cannot unbind {driver} from {self.bdf}: {exc.strerror}; run as root") from exc
        if bound_driver(root, self.bdf) is not None:
            raise DriverBoundError(f"kernel driver {driver} is still bound to {self.bdf} after unbind; unload it and rerun")

    def _enable(self, enable: Path) -> None:
        # Without a driver nobody has enabled memory decoding; BAR reads would return all ones.
        if not enable.exists():
            return
        try:
            enable.write_text("1")
        except OSError as exc:
            raise TransportError(f"cannot enable {self.bdf}: {exc.strerror}; run as root") from exc

    def _map_bar(self, resource: Path) -> None:
        try:
            self._fd = os.open(resource, os.O_RDWR | os.O_SYNC)
            size = os.fstat(self._fd).st_size
            self._map = mmap.mmap(self._fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, ValueError) as exc:
            raise TransportError(f"cannot map {resource}: {exc}; run as root and check that the card is powered") from exc
        self._words = memoryview(self._map).cast("I")

    def _index(self, offset: int) -> int:
        assert self._words is not None
        if offset % 4 or not 0 <= offset < 4 * len(self._words):
            raise TransportError(f"BAR5 offset {offset:#x} is unaligned or outside the {4 * len(self._words):#x}-byte BAR")
        return offset // 4

    def read32(self, offset: int) -> int:
        assert self._words is not None
        return self._words[self._index(offset)]

    def write32(self, offset: int, value: int) -> None:
        assert self._words is not None
        self._words[self._index(offset)] = value & 0xFFFFFFFF

    def close(self) -> None:
        if self._words is not None:
            self._words.release()
            self._words = None
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.lock.release()
