"""Simulated Navi31 card for tests, demos and the MMIO benchmark: no hardware touched.

`SimCard` is the board; `SimTransport` drives it through the ordinary Transport interface; `SimUsbBackend` puts it
behind a simulated ASM24 bridge as a pyusb backend so the real USB transport code runs against it.
"""

from .card import SimCard
from .faults import Faults
from .gd25 import GD25Model
from .psp import PspScript
from .transport import SimTransport
from .usb_backend import SimUsbBackend

__all__ = ["Faults", "GD25Model", "PspScript", "SimCard", "SimTransport", "SimUsbBackend"]
