"""The ASM24 custom-firmware USB-PCIe bridge over pyusb: link bring-up, bridge/BAR setup and single-TLP BAR5 access."""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from .errors import DeviceNotFoundError, TransportError
from .locks import DeviceLock
from .transport import Transport

USB_IDS = ((0x3801, 0x0001), (0xADD1, 0x0001))
PRODUCT_PREFIXES = ("custom", "AS2462")
REQ_XDATA_READ, REQ_XDATA_WRITE, REQ_TLP, REQ_PCIE_POWER = 0xE4, 0xE5, 0xF0, 0xF3
LTSSM_REGISTER, LTSSM_L0 = 0xB450, 0x78
TLP_MEM_READ, TLP_MEM_WRITE, TLP_CFG_READ, TLP_CFG_WRITE = 0x20, 0x60, 0x04, 0x44
CPL_STATUS = {0b001: "Unsupported Request", 0b010: "Config Retry", 0b100: "Completer Abort"}
TLP_RETRIES = 10
RETRY_DELAY = 0.001  # seconds between retries of a transient TLP failure (the bridge needs a moment)
GPU_BUS = 4
MEM_BASE, PREF_MEM_BASE = 0x10000000, 32 << 30
BAR5 = 5

# PCI configuration space offsets (type 0 and type 1 headers).
PCI_COMMAND, PCI_BASE_ADDRESS_0, PCI_PRIMARY_BUS = 0x04, 0x10, 0x18
PCI_MEMORY_BASE, PCI_MEMORY_LIMIT, PCI_PREF_MEMORY_BASE, PCI_PREF_MEMORY_LIMIT = 0x20, 0x22, 0x24, 0x26
PCI_PREF_BASE_UPPER32, PCI_PREF_LIMIT_UPPER32 = 0x28, 0x2C
PCI_COMMAND_IO, PCI_COMMAND_MEMORY, PCI_COMMAND_MASTER = 0x1, 0x2, 0x4


def _usb_modules():
    """pyusb, imported lazily so that a missing libusb makes USB unavailable instead of breaking the import."""
    import usb.core
    import usb.util

    return usb.core, usb.util


@dataclass(frozen=True)
class UsbCandidate:
    """A matching USB device before it is opened."""

    device: object  # usb.core.Device
    vendor: int
    product: int

    @property
    def name(self) -> str:
        """`usb:<bus>-<address>` as the seed prints it."""
        return f"usb:{getattr(self.device, 'bus', 0)}-{getattr(self.device, 'address', 0)}"


def find_usb_devices(backend=None) -> list[UsbCandidate]:
    """All attached bridges with a supported vendor:product, in the seed's order. Raises TransportError if pyusb has no backend."""
    core, _ = _usb_modules()
    found = []
    try:
        for vendor, product in USB_IDS:
            for device in core.find(find_all=True, idVendor=vendor, idProduct=product, backend=backend) or ():
                found.append(UsbCandidate(device, vendor, product))
    except core.NoBackendError as exc:
        raise TransportError("pyusb found no libusb backend; install libusb-1.0 to use the USB bridge") from exc
    return found


class ASM24Bridge:
    """Vendor requests of the custom ASM24 firmware. Every method raises TransportError on USB or PCIe failure."""

    def __init__(self, device) -> None:
        self.device = device
        self.core, self.util = _usb_modules()

    # -- USB plumbing --------------------------------------------------------------------------------------------------

    def _control(self, request_type: int, request: int, value: int, index: int, data, timeout: int):
        try:
            return self.device.ctrl_transfer(request_type, request, value, index, data, timeout)
        except self.core.USBError as exc:
            raise TransportError(f"USB request {request:#x} failed: {exc}; check the cable and bridge power, then rerun") from exc

    def control_write(self, request: int, value: int = 0, index: int = 0, data: bytes = b"", timeout: int = 1000) -> None:
        """Vendor OUT request; the whole payload must be accepted."""
        written = self._control(0x40, request, value, index, data, timeout)
        if written != len(data):
            raise TransportError(f"USB request {request:#x} wrote {written} of {len(data)} bytes")

    def control_read(self, request: int, length: int, value: int = 0, index: int = 0, timeout: int = 1000) -> bytes:
        """Vendor IN request returning exactly `length` bytes."""
        data = bytes(self._control(0xC0, request, value, index, length, timeout))
        if len(data) != length:
            raise TransportError(f"USB request {request:#x} returned {len(data)} of {length} bytes")
        return data

    def open(self) -> str:
        """Check the product string, detach a kernel driver, configure and claim interface 0; return the product string."""
        try:
            product = self.util.get_string(self.device, self.device.iProduct) or ""
        except (self.core.USBError, ValueError) as exc:
            raise TransportError(f"cannot read the bridge's product string: {exc}; check permissions (udev rule) and rerun") from exc
        if not product.startswith(PRODUCT_PREFIXES):
            raise DeviceNotFoundError(f"USB device {product!r} is not running the ASM24 custom firmware; flash the bridge firmware first")
        try:
            if self.device.is_kernel_driver_active(0):
                self.device.detach_kernel_driver(0)
                self.device.reset()
            self.device.set_configuration(1)
            self.util.claim_interface(self.device, 0)
            self.device.set_interface_altsetting(0, 0)
        except self.core.USBError as exc:
            raise TransportError(f"cannot claim the bridge's USB interface: {exc}; close other tools using it and rerun") from exc
        return product

    def close(self) -> None:
        """Release the interface and the device's resources."""
        try:
            self.util.release_interface(self.device, 0)
            self.util.dispose_resources(self.device)
        except self.core.USBError:
            pass  # the device may already be gone; nothing left to release

    def xdata_read(self, address: int, length: int) -> bytes:
        """Read bridge XDATA (request E4h), at most 255 bytes per request."""
        out = b""
        for offset in range(0, length, 0xFF):
            out += self.control_read(REQ_XDATA_READ, min(0xFF, length - offset), value=address + offset)
        return out

    def set_pcie_power(self, enabled: bool) -> None:
        """Power the PCIe side on or off (request F3h); the custom firmware boots with it off."""
        self.control_write(REQ_PCIE_POWER, value=int(enabled), timeout=10000)

    def bring_up_link(self) -> None:
        """Power PCIe if the LTSSM is not in L0 and require L0 afterwards."""
        if self.xdata_read(LTSSM_REGISTER, 1)[0] != LTSSM_L0:
            self.set_pcie_power(True)
        ltssm = self.xdata_read(LTSSM_REGISTER, 1)[0]
        if ltssm != LTSSM_L0:
            raise TransportError(f"PCIe link not up (LTSSM={ltssm:#04x}); reseat the card and check its power, then rerun")

    # -- TLPs ------------------------------------------------------------------------------------------------------------

    def pcie_request(self, fmt_type: int, address: int, value: int | None = None, size: int = 4) -> int | None:
        """One TLP through request F0h with byte enables; read and config TLPs wait for their completion.

        Transient bridge result codes are retried a bounded number of times; a bad completion status is an error.
        """
        if not 1 <= size <= 4 or (address & 3) + size > 4:
            raise ValueError(f"TLP of {size} bytes at {address:#x} crosses a dword")
        shift = 8 * (address & 3)
        byte_enable = ((1 << size) - 1) << (address & 3)
        payload = struct.pack("<III", address & 0xFFFFFFFC, address >> 32, ((value or 0) << shift) & 0xFFFFFFFF)
        posted = (fmt_type & 0b11011111) == 0b01000000 or (fmt_type & 0b10111000) == 0b00110000
        for attempt in range(TLP_RETRIES + 1):
            self.control_write(REQ_TLP, fmt_type | (byte_enable << 8), 0, payload, 5000)
            if posted:  # memory writes and messages get no completion
                return None
            reply = self.control_read(REQ_TLP, 8, timeout=5000)
            data, cpl_status, result = struct.unpack_from("<I", reply)[0], (reply[4] >> 5) & 0x7, reply[7]
            if result == 0:
                break
            if attempt == TLP_RETRIES:
                raise TransportError(f"TLP to {address:#x} failed after {TLP_RETRIES} retries (result={result}); replug the bridge and rerun")
            time.sleep(RETRY_DELAY)
        if cpl_status:
            reason = CPL_STATUS.get(cpl_status, f"reserved status 0b{cpl_status:03b}")
            raise TransportError(f"TLP completion for {address:#x}: {reason}; the card is not answering, power-cycle it")
        return (data >> shift) & ((1 << (8 * size)) - 1) if value is None else None

    def config(self, offset: int, bus: int = GPU_BUS, value: int | None = None, size: int = 4) -> int | None:
        """Configuration read or write to device 0 function 0 on `bus` (type 1 beyond bus 0)."""
        fmt_type = (TLP_CFG_WRITE if value is not None else TLP_CFG_READ) | int(bus > 0)
        return self.pcie_request(fmt_type, (bus << 24) | (offset & 0xFFF), value, size)

    def setup_bars(self) -> dict[int, tuple[int, int]]:
        """Number the upstream bridges, open their memory windows, enable them, and assign the GPU's memory BARs."""
        for bus in range(GPU_BUS):
            # Primary, secondary and subordinate bus numbers must be written together.
            self.config(PCI_PRIMARY_BUS, bus, (bus + 1) << 8 | GPU_BUS << 16)
            self.config(PCI_MEMORY_BASE, bus, (MEM_BASE >> 16) & 0xFFFF, 2)
            self.config(PCI_MEMORY_LIMIT, bus, 0xFFFF, 2)
            self.config(PCI_PREF_MEMORY_BASE, bus, (PREF_MEM_BASE >> 16) & 0xFFFF, 2)
            self.config(PCI_PREF_MEMORY_LIMIT, bus, 0xFFFF, 2)
            self.config(PCI_PREF_BASE_UPPER32, bus, PREF_MEM_BASE >> 32)
            self.config(PCI_PREF_LIMIT_UPPER32, bus, 0xFFFFFFFF)
            self.config(PCI_COMMAND, bus, PCI_COMMAND_IO | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER, 1)
        bases, bars, offset = [MEM_BASE, PREF_MEM_BASE], {}, 0
        while offset < 24:
            register = PCI_BASE_ADDRESS_0 + offset
            cfg = self.config(register)
            is_64 = (cfg >> 1) & 0x3 == 0x2
            if not cfg & 1:  # memory BAR: size it by writing all ones, then place it
                prefetch = int(bool(cfg & 0x8))
                self.config(register, value=0xFFFFFFFF)
                low = self.config(register) & 0xFFFFFFF0
                high = 0
                if is_64:
                    self.config(register + 4, value=0xFFFFFFFF)
                    high = self.config(register + 4)
                mask = 0xFFFFFFFFFFFFFFFF if is_64 else 0xFFFFFFFF
                size = (~((high << 32) | low) + 1) & mask
                self.config(register, value=bases[prefetch] & 0xFFFFFFFF)
                if is_64:
                    self.config(register + 4, value=bases[prefetch] >> 32)
                bars[offset // 4] = (bases[prefetch], size)
                bases[prefetch] += -(-size // (2 << 20)) * (2 << 20)
            offset += 8 if is_64 else 4
        self.config(PCI_COMMAND, GPU_BUS, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER, 1)
        return bars


class UsbTransport(Transport):
    """BAR5 of a GPU behind the ASM24 bridge; each access is one memory TLP."""

    name = "usb"

    def __init__(self, candidate: UsbCandidate, lock_dir=None) -> None:
        self.lock = DeviceLock(candidate.name, lock_dir)
        self.bridge = ASM24Bridge(candidate.device)
        try:
            self.product = self.bridge.open()
            self.bridge.bring_up_link()
            bars = self.bridge.setup_bars()
            if BAR5 not in bars:
                raise TransportError("GPU exposes no memory BAR5; this is not a Navi31 card")
            self.bar5 = bars[BAR5][0]
        except BaseException:
            self._release()
            raise
        self.description = f"{candidate.name} ({self.product}) BAR5 at {self.bar5:#x}"

    def read32(self, offset: int) -> int:
        value = self.bridge.pcie_request(TLP_MEM_READ, self.bar5 + offset)
        assert value is not None
        return value

    def write32(self, offset: int, value: int) -> None:
        self.bridge.pcie_request(TLP_MEM_WRITE, self.bar5 + offset, value & 0xFFFFFFFF)

    def _release(self) -> None:
        try:
            self.bridge.close()
        finally:
            self.lock.release()

    def close(self) -> None:
        if self.lock.held:
            self._release()
