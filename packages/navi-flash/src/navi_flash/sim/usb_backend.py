"""A pyusb backend (`usb.backend.IBackend`) that presents a simulated ASM24 bridge with a PCIe tree and the card's BAR5.

With it, `usb.core.find(..., backend=SimUsbBackend(card))` returns a real pyusb `Device`, so the USB transport code runs
unmodified: string descriptors, kernel-driver detach, configuration, vendor requests E4h/E5h/F0h/F3h, and TLPs routed
through four upstream bridges to the GPU's configuration space and BAR5.
"""

from __future__ import annotations

import array
import errno
import struct
from types import SimpleNamespace

import usb.backend
import usb.core

from .card import SimCard

LTSSM_REGISTER, LTSSM_L0, LTSSM_DETECT = 0xB450, 0x78, 0x11
GPU_BUS = 4
CPL_UNSUPPORTED = 0b001
# Navi31 BARs: (config index, size, low type bits). BAR0/2 are 64-bit prefetchable, BAR4 is I/O, BAR5 is 32-bit MMIO.
GPU_BARS = ((0, 256 << 20, 0xC), (2, 2 << 20, 0xC), (4, 0x100, 0x1), (5, 1 << 20, 0x0))


class _ConfigSpace:
    """4 KiB of configuration space written with byte enables."""

    def __init__(self, vendor_device: int, header_type: int) -> None:
        self.data = bytearray(0x1000)
        struct.pack_into("<I", self.data, 0, vendor_device)
        self.data[0x0E] = header_type

    def dword(self, offset: int) -> int:
        """The aligned dword containing `offset`."""
        return struct.unpack_from("<I", self.data, offset & ~3)[0]

    def write(self, offset: int, value: int, byte_enable: int) -> None:
        """Write the byte lanes selected by `byte_enable`."""
        base = offset & ~3
        for lane in range(4):
            if byte_enable >> lane & 1:
                self.data[base + lane] = (value >> (8 * lane)) & 0xFF


class _Gpu(_ConfigSpace):
    """The GPU function: BAR registers answer the all-ones sizing probe."""

    def __init__(self) -> None:
        super().__init__(0x744C1002, 0)
        self.bars: dict[int, int] = {}  # BAR index -> programmed register value
        for index, _, bits in GPU_BARS:
            self.bars[index] = bits
            if bits & 0x4:
                self.bars[index + 1] = 0

    def _bar(self, offset: int) -> int | None:
        index = (offset - 0x10) // 4
        return index if 0x10 <= offset < 0x28 and index in self.bars else None

    def dword(self, offset: int) -> int:
        """The aligned dword containing `offset`."""
        index = self._bar(offset & ~3)
        return self.bars[index] if index is not None else super().dword(offset)

    def write(self, offset: int, value: int, byte_enable: int) -> None:
        """Write the byte lanes selected by `byte_enable`."""
        index = self._bar(offset & ~3)
        if index is None:
            super().write(offset, value, byte_enable)
            return
        for bar, size, bits in GPU_BARS:
            if index == bar:
                self.bars[index] = (value & ~(size - 1) & 0xFFFFFFF0 | bits) & 0xFFFFFFFF
            elif index == bar + 1 and bits & 0x4:
                self.bars[index] = value & ~((size - 1) >> 32) & 0xFFFFFFFF

    def bar_address(self, index: int) -> int:
        """The address programmed into BAR `index` (64-bit BARs span two registers)."""
        low = self.bars[index] & 0xFFFFFFF0
        high = self.bars.get(index + 1, 0) if self.bars[index] & 0x4 else 0
        return high << 32 | low


class SimUsbBackend(usb.backend.IBackend):
    """One simulated ASM24 bridge (`vendor`:`product`) in front of `card`."""

    def __init__(self, card: SimCard, *, vendor: int = 0xADD1, product: int = 0x0001, product_string: str = "custom ASM2464PD",
                 kernel_driver: bool = True) -> None:
        self.card = card
        self.vendor, self.product, self.product_string = vendor, product, product_string
        self.kernel_driver = kernel_driver
        self.powered = False
        self.configuration = 0
        self.claimed: set[int] = set()
        self.transfers = 0
        self.resets = 0
        self.completion = (0, CPL_UNSUPPORTED)
        self.failed_reads = 0
        self.bridges = [_ConfigSpace(0x24631B21, 1) for _ in range(GPU_BUS)]
        self.gpu = _Gpu()
        self.device = SimpleNamespace(bus=1, address=7)

    # -- enumeration and descriptors ------------------------------------------------------------------------------------

    def enumerate_devices(self):
        yield self.device

    def get_device_descriptor(self, dev):
        return SimpleNamespace(bLength=18, bDescriptorType=1, bcdUSB=0x0320, bDeviceClass=0, bDeviceSubClass=0, bDeviceProtocol=0,
                               bMaxPacketSize0=9, idVendor=self.vendor, idProduct=self.product, bcdDevice=0x0100, iManufacturer=1, iProduct=2,
                               iSerialNumber=0, bNumConfigurations=1, address=dev.address, bus=dev.bus, port_number=1, port_numbers=(1,), speed=4)

    def get_configuration_descriptor(self, dev, config):
        return SimpleNamespace(bLength=9, bDescriptorType=2, wTotalLength=32, bNumInterfaces=1, bConfigurationValue=1, iConfiguration=0,
                               bmAttributes=0x80, bMaxPower=50, extra_descriptors=[])

    def get_interface_descriptor(self, dev, intf, alt, config):
        if intf != 0 or alt != 0:
            raise IndexError("no such interface")
        return SimpleNamespace(bLength=9, bDescriptorType=4, bInterfaceNumber=0, bAlternateSetting=0, bNumEndpoints=2, bInterfaceClass=0xFF,
                               bInterfaceSubClass=0, bInterfaceProtocol=0, iInterface=0, extra_descriptors=[])

    def get_endpoint_descriptor(self, dev, ep, intf, alt, config):
        address = (0x81, 0x02)[ep]
        return SimpleNamespace(bLength=7, bDescriptorType=5, bEndpointAddress=address, bmAttributes=2, wMaxPacketSize=1024, bInterval=0,
                               bRefresh=0, bSynchAddress=0, extra_descriptors=[])

    # -- device state -----------------------------------------------------------------------------------------------------

    def open_device(self, dev):
        return dev

    def close_device(self, dev_handle):
        self.claimed.clear()

    def set_configuration(self, dev_handle, config_value):
        self._count()
        self.configuration = config_value

    def get_configuration(self, dev_handle):
        return self.configuration

    def set_interface_altsetting(self, dev_handle, intf, altsetting):
        self._count()

    def claim_interface(self, dev_handle, intf):
        if self.kernel_driver:
            raise usb.core.USBError("Resource busy", errno.EBUSY)
        self.claimed.add(intf)

    def release_interface(self, dev_handle, intf):
        self.claimed.discard(intf)

    def is_kernel_driver_active(self, dev_handle, intf):
        return self.kernel_driver

    def detach_kernel_driver(self, dev_handle, intf):
        self.kernel_driver = False

    def reset_device(self, dev_handle):
        self.resets += 1

    # -- control transfers ------------------------------------------------------------------------------------------------

    def _count(self) -> None:
        self.transfers += 1
        limit = self.card.faults.usb_disconnect_after
        if limit is not None and self.transfers > limit:
            raise usb.core.USBError("No such device (it may have been disconnected)", errno.ENODEV)

    def ctrl_transfer(self, dev_handle, bmRequestType, bRequest, wValue, wIndex, data, timeout):
        self._count()
        if bmRequestType & 0x80:
            reply = self._control_in(bRequest, wValue, wIndex, len(data))
            data[: len(reply)] = array.array("B", reply)
            return len(reply)
        self._control_out(bRequest, wValue, wIndex, bytes(data))
        return len(data)

    def _control_in(self, request: int, value: int, index: int, length: int) -> bytes:
        if request == 0x06:  # GET_DESCRIPTOR (string)
            if value == 0x0300:
                return bytes((4, 3, 0x09, 0x04))[:length]
            text = {1: "ASMedia", 2: self.product_string}.get(value & 0xFF, "")
            encoded = text.encode("utf-16-le")
            return (bytes((2 + len(encoded), 3)) + encoded)[:length]
        if request == 0xE4:
            return bytes(self._xdata(value + i) for i in range(length))
        if request == 0xF0:
            value_out, cpl_status = self.completion
            faults = self.card.faults
            result = 0
            if faults.f0_persistent or self.failed_reads < faults.f0_transient:
                self.failed_reads += 1
                result = 1
            else:
                self.failed_reads = 0
            return struct.pack("<IBBBB", value_out, cpl_status << 5, 0, 0, result)[:length]
        raise usb.core.USBError("Pipe error", errno.EPIPE)

    def _xdata(self, address: int) -> int:
        if address == LTSSM_REGISTER:
            return LTSSM_L0 if self.powered else LTSSM_DETECT
        return 0

    def _control_out(self, request: int, value: int, index: int, payload: bytes) -> None:
        if request == 0xF3:
            self.powered = bool(value)
        elif request == 0xF0:
            low, high, word = struct.unpack("<III", payload)
            self._tlp(value & 0xFF, value >> 8, high << 32 | low, word)
        elif request != 0xE5:
            raise usb.core.USBError("Pipe error", errno.EPIPE)

    # -- PCIe -------------------------------------------------------------------------------------------------------------

    def _function(self, bus: int) -> _ConfigSpace | None:
        """The function at `bus`:00.0, or None when the bridges do not route configuration cycles there."""
        for upstream in range(bus):
            secondary, subordinate = self.bridges[upstream].data[0x19], self.bridges[upstream].data[0x1A]
            if not secondary <= bus <= subordinate:
                return None
        return self.gpu if bus == GPU_BUS else self.bridges[bus] if bus < GPU_BUS else None

    def _routes_memory(self, address: int) -> bool:
        for bridge in self.bridges:
            base, limit = struct.unpack_from("<HH", bridge.data, 0x20)
            if not bridge.data[0x04] & 0x2 or not (base & 0xFFF0) << 16 <= address <= ((limit & 0xFFF0) << 16 | 0xFFFFF):
                return False
        return bool(self.gpu.data[0x04] & 0x2)

    def _tlp(self, fmt_type: int, byte_enable: int, address: int, value: int) -> None:
        if fmt_type in (0x04, 0x05, 0x44, 0x45):
            function = self._function(address >> 24 & 0xFF)
            if function is None or address >> 16 & 0xFF:  # only device 0 function 0 exists on each bus
                self.completion = (0, CPL_UNSUPPORTED)
                return
            if fmt_type & 0x40:
                function.write(address & 0xFFF, value, byte_enable)
                self.completion = (0, 0)
            else:
                self.completion = (function.dword(address & 0xFFF), 0)
            return
        bar5 = self.gpu.bar_address(5)
        inside = bar5 != 0 and bar5 <= address < bar5 + (1 << 20) and self._routes_memory(address)
        if fmt_type in (0x40, 0x60):
            if inside and byte_enable == 0xF:
                self.card.write32(address - bar5, value)
            return
        if fmt_type in (0x00, 0x20):
            self.completion = (self.card.read32(address - bar5), 0) if inside else (0, CPL_UNSUPPORTED)
            return
        self.completion = (0, CPL_UNSUPPORTED)
