"""Which backend runs a `--device`: `numpy` (the reference) or a uop_scheduler device (`CPU`, `CPU:1`, ...) via the Tensor backend."""

from __future__ import annotations

from collections.abc import Callable

from hcq_runtime import RuntimeErrorBase
from uop_scheduler import Device

from .errors import BackendUnavailableError
from .model_api import Backend
from .reference_model import NumpyBackend
from .tensor_model import TensorBackend

# exact device name (lower case) -> backend factory
_BACKENDS: dict[str, Callable[[], Backend]] = {"numpy": NumpyBackend}
# device family prefix (upper case) -> factory taking the full device name, for `CPU`, `CPU:1`, ...
_FAMILIES: dict[str, Callable[[str], Backend]] = {}
# devices the Tensor stack targets; those hcq_runtime cannot open in this installation get an error saying so
TENSOR_DEVICES = ("CPU", "AMD", "QCOM", "MOCKAMD", "MOCKQCOM")


def register_backend(device: str, factory: Callable[[], Backend]) -> None:
    """Make `--device DEVICE` (case-insensitive, exact name) load models with `factory()`."""
    _BACKENDS[device.lower()] = factory


def register_device_family(prefix: str, factory: Callable[[str], Backend]) -> None:
    """Make `--device PREFIX` and `--device PREFIX:N` (case-insensitive) load models with `factory(device_name)`."""
    _FAMILIES[prefix.upper()] = factory


def available_devices() -> list[str]:
    """The `--device` values this installation knows (a family `CPU` also accepts `CPU:N`); see `device_status` for
    whether each can run here."""
    return sorted(_BACKENDS) + sorted(_FAMILIES)


def device_status(device: str) -> str | None:
    """None when `device` can run models here, else why not (no driver, no such GPU model, ...). A stack device is
    opened to find out (the first open of a mock GPU takes about half a second)."""
    if device.lower() in _BACKENDS:
        return None
    prefix = device.split(":")[0].upper()
    if prefix not in _FAMILIES:
        return f"unknown device; known: {', '.join(available_devices())}"
    try:
        Device[device]
    except RuntimeErrorBase as e:
        return str(e)
    return None


def usable_devices() -> list[str]:
    """The known devices that can run models on this machine now."""
    return [d for d in available_devices() if device_status(d) is None]


def get_backend(device: str) -> Backend:
    """The backend for `device` (case-insensitive), or a `BackendUnavailableError` that says what to use instead."""
    factory = _BACKENDS.get(device.lower())
    if factory is not None:
        return factory()
    prefix = device.split(":")[0].upper()
    if prefix in _FAMILIES:
        if (reason := device_status(device)) is not None:
            raise BackendUnavailableError(f"device {device} is not available here: {reason}")
        return _FAMILIES[prefix](device)
    if prefix in TENSOR_DEVICES:
        raise BackendUnavailableError(f"device {device!r} has no hcq_runtime backend in this installation; use --device CPU or numpy")
    raise BackendUnavailableError(f"unknown device {device!r}; available: {', '.join(available_devices())}")


def _register_tensor_devices() -> None:
    """Register the Tensor backend for every stack device hcq_runtime can open here (CPU always)."""
    for prefix in TENSOR_DEVICES:
        if Device.knows(prefix):
            register_device_family(prefix, TensorBackend)


_register_tensor_devices()
