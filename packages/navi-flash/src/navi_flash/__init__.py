"""Navi31 SPI-flash recovery over an ASM24 USB-PCIe bridge, native PCI, or a simulator."""

__version__ = "0.1.0"

__all__ = ["__version__"]
