"""Choosing and opening a transport: `auto` tries the USB bridge first, then native PCI (as the seed), `sim` opens a card directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import DeviceNotFoundError, TransportError, UsageError
from .pci import SYSFS_PCI, PciTransport, find_pci_devices
from .sim import SimCard, SimTransport
from .transport import Transport
from .usb_bridge import UsbTransport, find_usb_devices

TRANSPORTS = ("auto", "usb", "pci", "sim")


@dataclass
class DeviceContext:
    """Where devices are looked for. Tests point these at a simulated pyusb backend and a fake sysfs tree."""

    usb_backend: object | None = None  # a usb.backend.IBackend; None lets pyusb pick libusb
    sysfs_root: Path = SYSFS_PCI
    lock_dir: Path | None = None
    unbind: bool = False


@dataclass
class DeviceEntry:
    """One line of `navi-flash list`."""

    transport: str
    index: int  # --device with --transport <transport>
    name: str
    detail: str = ""
    auto_index: int | None = None  # --device with --transport auto (USB first, then PCI)


def _candidates(kind: str, context: DeviceContext, strict: bool) -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    if kind in ("auto", "usb"):
        try:
            found += [("usb", candidate) for candidate in find_usb_devices(context.usb_backend)]
        except TransportError:
            if strict and kind == "usb":
                raise
    if kind in ("auto", "pci"):
        found += [("pci", bdf) for bdf in find_pci_devices(context.sysfs_root)]
    return found


def open_transport(kind: str = "auto", device: int = 0, sim_dir: Path | None = None, context: DeviceContext | None = None) -> Transport:
    """Open device number `device` of transport `kind`. A `sim_dir` with `auto` selects the simulator."""
    context = context or DeviceContext()
    if kind not in TRANSPORTS:
        raise UsageError(f"unknown transport {kind!r}; choose one of {', '.join(TRANSPORTS)}")
    if kind == "sim" or (kind == "auto" and sim_dir is not None):
        if sim_dir is None:
            raise UsageError("--transport sim needs --sim DIR (create one with `navi-flash sim create DIR`)")
        return SimTransport(SimCard.load(Path(sim_dir)))
    candidates = _candidates(kind, context, strict=True)
    if not candidates:
        raise DeviceNotFoundError(f"no supported {kind} Navi31 device found; check `navi-flash list`, cabling and permissions")
    if not 0 <= device < len(candidates):
        raise DeviceNotFoundError(f"device index {device} out of range (found {len(candidates)}); see `navi-flash list`")
    which, target = candidates[device]
    if which == "usb":
        return UsbTransport(target, context.lock_dir)  # type: ignore[arg-type]
    return PciTransport(str(target), root=context.sysfs_root, unbind=context.unbind, lock_dir=context.lock_dir)


def list_devices(context: DeviceContext | None = None, sim_dir: Path | None = None) -> tuple[list[DeviceEntry], list[str]]:
    """Every device on every transport, numbered as `--device` expects per transport, plus notes on unavailable transports."""
    context = context or DeviceContext()
    entries, notes = [], []
    try:
        for index, candidate in enumerate(find_usb_devices(context.usb_backend)):
            entries.append(DeviceEntry("usb", index, candidate.name, f"{candidate.vendor:04x}:{candidate.product:04x}"))
    except TransportError as exc:
        notes.append(f"usb: unavailable ({exc})")
    for index, bdf in enumerate(find_pci_devices(context.sysfs_root)):
        entries.append(DeviceEntry("pci", index, f"pci:{bdf}", "1002:744c"))
    for auto_index, entry in enumerate(entry for entry in entries if entry.transport in ("usb", "pci")):
        entry.auto_index = auto_index
    if sim_dir is not None:
        card = SimCard.load(Path(sim_dir))
        entries.append(DeviceEntry("sim", 0, f"sim:{sim_dir}", ", ".join(f"{k}={v}" for k, v in card.options.items())))
    return entries, notes
