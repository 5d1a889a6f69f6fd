"""Device -> backend resolution and registration."""

from __future__ import annotations

import pytest
from llm_bench import BackendUnavailableError, NumpyBackend, available_devices, backends, get_backend, register_backend


def test_numpy_is_available_and_tensor_devices_say_what_is_missing():
    assert "numpy" in available_devices()
    assert isinstance(get_backend("NumPy"), NumpyBackend)
    for device in ("CPU", "AMD", "CPU:1", "MOCKAMD"):
        with pytest.raises(BackendUnavailableError, match="uop_scheduler backend, which is not available yet"):
            get_backend(device)


def test_registered_backends_are_found(monkeypatch):
    monkeypatch.setattr(backends, "_BACKENDS", dict(backends._BACKENDS))
    register_backend("Other", NumpyBackend)
    assert "other" in available_devices()
    assert isinstance(get_backend("OTHER"), NumpyBackend)
