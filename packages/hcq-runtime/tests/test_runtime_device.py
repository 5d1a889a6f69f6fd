import pytest
from hcq_runtime import CPUDevice, Device, DeviceError, canonicalize


@pytest.mark.parametrize(
    "name, canonical",
    [("cpu", "CPU"), ("CPU:0", "CPU"), ("cpu:2", "CPU:2"), ("amd:1", "AMD:1"), ("disk:/tmp/X", "DISK:/tmp/X"), ("mockamd", "MOCKAMD")],
)
def test_canonical_names(name, canonical):
    assert canonicalize(name) == canonical


def test_default_device_comes_from_dev(monkeypatch):
    monkeypatch.delenv("DEV", raising=False)
    assert Device.DEFAULT == "CPU"
    monkeypatch.setenv("DEV", "cpu:1")
    assert Device.DEFAULT == "CPU:1"


def test_unknown_device_names_the_known_backends():
    with pytest.raises(DeviceError, match=r"unknown device 'NOPE': known backends are .*CPU.*DISK"):
        Device["NOPE"]


def test_registered_backend_is_opened_once_per_name():
    opened = []

    class Fake:
        def __init__(self, name):
            opened.append(name)

    Device.register("FAKETEST", Fake)
    assert Device["faketest:1"] is Device["FAKETEST:1"]
    assert isinstance(Device["FAKETEST"], Fake)
    assert opened == ["FAKETEST:1", "FAKETEST"]
    assert "FAKETEST" in Device.backends()


def test_cpu_device_type():
    assert isinstance(Device["CPU"], CPUDevice)
    assert Device["CPU"].n_cores >= 1


def test_a_refused_disk_name_raises_one_clean_error(monkeypatch):
    # the refused device object used to fail again in __del__ (no file descriptor yet): "Exception ignored" on stderr
    import gc  # noqa: PLC0415
    import sys  # noqa: PLC0415

    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with pytest.raises(DeviceError, match="needs a path"):
        Device["DISK"]
    gc.collect()
    assert unraisable == []


def test_graph_names_how_a_jit_replay_runs():
    # tinygrad's tests ask `Device[...].graph` whether captured kernels are batched: CPU kernels are linked into one
    # native call, queue devices' steps into one submission
    from hcq_runtime import Linked  # noqa: PLC0415

    assert Device["CPU"].graph is Linked
    assert Device["MOCKAMD"].graph is Linked
