"""Device -> backend resolution and registration."""

from __future__ import annotations

import pytest
from llm_bench import BackendUnavailableError, NumpyBackend, TensorBackend, available_devices, backends, get_backend, register_backend
from uop_scheduler import Device


def test_numpy_and_cpu_are_available_and_missing_devices_say_so():
    assert {"numpy", "CPU"} <= set(available_devices())
    assert isinstance(get_backend("NumPy"), NumpyBackend)
    for device, name in (("cpu", "CPU"), ("CPU:1", "CPU:1")):
        backend = get_backend(device)
        assert isinstance(backend, TensorBackend) and backend.name == name
    # stack devices hcq_runtime cannot open here (which ones depends on the installed backends)
    for device in [d for d in backends.TENSOR_DEVICES if d not in Device.backends()]:
        with pytest.raises(BackendUnavailableError, match="no hcq_runtime backend in this installation"):
            get_backend(device)


def test_registered_backends_are_found(monkeypatch):
    monkeypatch.setattr(backends, "_BACKENDS", dict(backends._BACKENDS))
    register_backend("Other", NumpyBackend)
    assert "other" in available_devices()
    assert isinstance(get_backend("OTHER"), NumpyBackend)
