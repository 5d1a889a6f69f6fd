"""Devices, buffers, compile caches and the hcq2 command-queue engine with CPU, AMD and QCOM backends."""

__version__ = "0.1.0"

__all__ = ["__version__"]
