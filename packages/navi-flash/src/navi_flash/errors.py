"""Exception hierarchy: every failure navi-flash reports is a `NaviFlashError` with a one-line, actionable message."""


class NaviFlashError(Exception):
    """Base class for all navi-flash errors; the CLI prints `error: <message>` and exits 1."""


class UsageError(NaviFlashError):
    """A bad argument, number or input file supplied by the user."""


class ImageError(UsageError):
    """An image file has the wrong size or its IFWI structures cannot be resolved."""


class DeviceNotFoundError(NaviFlashError):
    """No device matched the selected transport and index."""


class DeviceLockedError(NaviFlashError):
    """Another process holds the lock file for this card."""


class TransportError(NaviFlashError):
    """The link to the card failed (USB transfer, PCIe completion, sysfs or mmap access)."""


class EngineError(NaviFlashError):
    """The SMUIO ROM_SW engine did not respond as expected (gated, timed out, status stuck)."""


class ChipError(NaviFlashError):
    """The SPI flash chip answered unexpectedly (JEDEC id, write-enable latch, status register)."""


class FlashTimeoutError(ChipError):
    """The flash chip stayed BUSY past its timeout."""


class ProtectionError(ChipError):
    """Block protection (BP/CMP) prevents the requested write."""


class VerifyError(NaviFlashError):
    """Flash contents differ from the expected bytes."""


class DumpError(NaviFlashError):
    """The ROM_INDEX/ROM_DATA aperture produced something that is not a raw 2 MiB flash image."""


class PSPError(NaviFlashError):
    """The PSP boot-firmware mailbox reported an error or did not become ready."""


class DisabledCommandError(NaviFlashError):
    """The command exists for protocol documentation but is disabled for safety."""


class DriverBoundError(NaviFlashError):
    """A kernel driver owns the PCI device; navi-flash only detaches it with --unbind."""
