"""Navi31 SPI-flash recovery over an ASM24 USB-PCIe bridge, native PCI, or a simulator."""

__version__ = "0.1.0"

from .chips import GD25LQ16E, ChipSpec
from .devices import DeviceContext, DeviceEntry, list_devices, open_transport
from .errors import (
    ChipError,
    DeviceLockedError,
    DeviceNotFoundError,
    DisabledCommandError,
    DriverBoundError,
    DumpError,
    EngineError,
    FlashTimeoutError,
    ImageError,
    NaviFlashError,
    ProtectionError,
    PSPError,
    TransportError,
    UsageError,
    VerifyError,
)
from .ifwi import resolve_ifwi_item, stream_ifwi
from .pci import PciTransport, find_pci_devices
from .progress import PlainProgress, ProgressReporter, RichProgress
from .psp import PSP_ERRORS, PspMailbox
from .rom_aperture import dump_aperture
from .rom_sw import RomSwSession
from .romless import FlashReport, VerifyResult, backup_flash, open_flash, plan_sector, read_info, read_range, romless_flash, verify_image
from .spi_flash import SpiFlash, has_jedec
from .transport import Transport
from .usb_bridge import ASM24Bridge, UsbTransport, find_usb_devices

__all__ = [
    "ASM24Bridge",
    "ChipError",
    "ChipSpec",
    "DeviceContext",
    "DeviceEntry",
    "DeviceLockedError",
    "DeviceNotFoundError",
    "DisabledCommandError",
    "DriverBoundError",
    "DumpError",
    "EngineError",
    "FlashReport",
    "FlashTimeoutError",
    "GD25LQ16E",
    "ImageError",
    "NaviFlashError",
    "PSPError",
    "PSP_ERRORS",
    "PciTransport",
    "PlainProgress",
    "ProgressReporter",
    "ProtectionError",
    "PspMailbox",
    "RichProgress",
    "RomSwSession",
    "SpiFlash",
    "Transport",
    "TransportError",
    "UsageError",
    "UsbTransport",
    "VerifyError",
    "VerifyResult",
    "__version__",
    "backup_flash",
    "dump_aperture",
    "find_pci_devices",
    "find_usb_devices",
    "has_jedec",
    "list_devices",
    "open_flash",
    "open_transport",
    "plan_sector",
    "read_info",
    "read_range",
    "resolve_ifwi_item",
    "romless_flash",
    "stream_ifwi",
    "verify_image",
]
