"""Which backend runs a `--device`: numpy today; the uop_scheduler Tensor backend is registered here once it exists."""

from __future__ import annotations

from .errors import BackendUnavailableError
from .model_api import Backend
from .reference_model import NumpyBackend

# device name -> backend factory; devices of the Tensor stack are listed so their error can say what is missing
_BACKENDS: dict[str, type[Backend]] = {"numpy": NumpyBackend}
TENSOR_DEVICES = ("CPU", "AMD", "QCOM", "MOCKAMD", "MOCKQCOM")


def register_backend(device: str, factory: type[Backend]) -> None:
    """Make `--device DEVICE` (case-insensitive) load models with `factory()`; the Tensor backend registers itself here."""
    _BACKENDS[device.lower()] = factory


def available_devices() -> list[str]:
    """The `--device` values that work in this installation."""
    return sorted(_BACKENDS)


def get_backend(device: str) -> Backend:
    """The backend for `device` (case-insensitive), or a `BackendUnavailableError` that says what to use instead."""
    factory = _BACKENDS.get(device.lower())
    if factory is not None:
        return factory()
    if device.split(":")[0].upper() in TENSOR_DEVICES:
        raise BackendUnavailableError(f"device {device!r} needs the uop_scheduler backend, which is not available yet; use --device numpy")
    raise BackendUnavailableError(f"unknown device {device!r}; available: {', '.join(available_devices())}")
