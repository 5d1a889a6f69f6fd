"""The device registry: `Device["CPU"]`, canonical names, the default device, backend discovery.

Built-in backends are listed in `BUILTIN_BACKENDS`; other installed packages add backends through the
`hcq_runtime.backends` entry-point group (name = device prefix, value = a factory taking the full device
name), so an installed backend appears without code changes here.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from typing import Any

from .errors import DeviceError

#: device prefix -> "module:factory" of the backends that ship with hcq_runtime
BUILTIN_BACKENDS: dict[str, str] = {
    "CPU": "hcq_runtime.cpu:CPUDevice",
    "DISK": "hcq_runtime.disk:DiskDevice",
    "AMD": "hcq_runtime.amd:AMDDevice",
    "MOCKAMD": "hcq_runtime.amd:AMDDevice",
    "QCOM": "hcq_runtime.qcom:QCOMDevice",
    "MOCKQCOM": "hcq_runtime.qcom:QCOMDevice",
}


@functools.lru_cache(maxsize=1024)  # every buffer, call and device lookup asks: a few names, asked millions of times
def canonicalize(name: str) -> str:
    """`cpu` -> `CPU`, `CPU:0` -> `CPU`, `disk:/x` -> `DISK:/x`; the prefix is case-insensitive, the rest kept."""
    prefix, sep, rest = name.partition(":")
    prefix = prefix.upper()
    if prefix == "DISK":
        return f"DISK:{rest}" if sep else "DISK"
    if sep and rest == "0":
        return prefix
    return f"{prefix}{sep}{rest}"


def _installed_backends() -> Any:
    from importlib.metadata import entry_points

    return entry_points(group="hcq_runtime.backends")


class DeviceRegistry:
    """Opens each device once, by canonical name."""

    def __init__(self) -> None:
        self._opened: dict[str, Any] = {}
        self._factories: dict[str, Callable[[str], Any]] = {}

    def register(self, prefix: str, factory: Callable[[str], Any]) -> None:
        """Make `factory(full_name)` the backend of devices named `prefix` or `prefix:N`."""
        self._factories[prefix.upper()] = factory

    def backends(self) -> list[str]:
        """Prefixes of every known backend, built-in or installed."""
        return sorted(set(BUILTIN_BACKENDS) | set(self._factories) | {ep.name.upper() for ep in _installed_backends()})

    def knows(self, prefix: str) -> bool:
        """Whether `prefix` names a backend; the installed packages' entry points are read only when it is not built in
        or registered (reading them imports importlib.metadata and scans every installed distribution)."""
        prefix = prefix.upper()
        return prefix in BUILTIN_BACKENDS or prefix in self._factories or any(ep.name.upper() == prefix for ep in _installed_backends())

    def _factory(self, prefix: str) -> Callable[[str], Any]:
        if prefix in self._factories:
            return self._factories[prefix]
        if prefix in BUILTIN_BACKENDS:
            module, attr = BUILTIN_BACKENDS[prefix].split(":")
            return getattr(importlib.import_module(module), attr)
        for ep in _installed_backends():
            if ep.name.upper() == prefix:
                return ep.load()
        raise DeviceError(f"unknown device {prefix!r}: known backends are {', '.join(self.backends())}")

    def __getitem__(self, name: str) -> Any:
        if (dev := self._opened.get(name)) is not None:  # a canonical name already opened (every buffer's device)
            return dev
        canonical = canonicalize(name)
        if (dev := self._opened.get(canonical)) is None:
            dev = self._opened[canonical] = self._factory(canonical.split(":")[0])(canonical)
        return dev

    @property
    def DEFAULT(self) -> str:  # noqa: N802 -- tinygrad's spelling
        """The default device: the `DEV` environment variable, else CPU."""
        return canonicalize(os.environ.get("DEV", "CPU") or "CPU")

    def opened(self) -> list[str]:
        return list(self._opened)


Device = DeviceRegistry()
