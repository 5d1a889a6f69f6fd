"""Native PCI transport on a fake sysfs tree: enumeration, driver binding, lock file, single dword mmap access."""

import os

import pytest
from navi_flash import DeviceLockedError, DriverBoundError, PciTransport, TransportError, find_pci_devices
from navi_flash.devices import DeviceContext, list_devices, open_transport
from navi_flash.sim import SimCard, SimUsbBackend

BDF = "0000:03:00.0"


@pytest.fixture
def sysfs(tmp_path):
    root = tmp_path / "devices"
    for bdf, vendor, device in ((BDF, "0x1002", "0x744c"), ("0000:00:01.0", "0x8086", "0x1234"), ("0000:04:00.0", "0x1002", "0x73bf")):
        node = root / bdf
        node.mkdir(parents=True)
        (node / "vendor").write_text(vendor + "\n")
        (node / "device").write_text(device + "\n")
    (root / BDF / "resource5").write_bytes(bytes(0x1000))
    return root


def test_only_navi31_is_listed(sysfs, tmp_path):
    assert find_pci_devices(sysfs) == [BDF]
    entries, _ = list_devices(DeviceContext(sysfs_root=sysfs, lock_dir=tmp_path))
    assert [(entry.transport, entry.name) for entry in entries] == [("pci", f"pci:{BDF}")]


def test_dword_access_goes_to_resource5(sysfs, tmp_path):
    (sysfs / BDF / "enable").write_text("0")
    with PciTransport(BDF, root=sysfs, lock_dir=tmp_path) as transport:
        transport.write32(0x10, 0x11223344)
        assert transport.read32(0x10) == 0x11223344
        with pytest.raises(TransportError, match="unaligned or outside"):
            transport.read32(0x11)
    assert (sysfs / BDF / "resource5").read_bytes()[0x10:0x14] == bytes.fromhex("44332211")
    assert (sysfs / BDF / "enable").read_text() == "1"


def test_bound_driver_is_refused_without_unbind(sysfs, tmp_path):
    driver = tmp_path / "drivers" / "amdgpu"
    driver.mkdir(parents=True)
    (driver / "unbind").write_text("")
    os.symlink(driver, sysfs / BDF / "driver")
    with pytest.raises(DriverBoundError, match="amdgpu is bound.*--unbind"):
        PciTransport(BDF, root=sysfs, lock_dir=tmp_path)
    assert (driver / "unbind").read_text() == ""
    # With --unbind the address is written to the driver's unbind file; this fake driver stays bound, which is caught.
    with pytest.raises(DriverBoundError, match="still bound"):
        PciTransport(BDF, root=sysfs, unbind=True, lock_dir=tmp_path)
    assert (driver / "unbind").read_text() == BDF


def test_lock_file_keeps_a_second_tool_out(sysfs, tmp_path):
    first = PciTransport(BDF, root=sysfs, lock_dir=tmp_path)
    with pytest.raises(DeviceLockedError):
        PciTransport(BDF, root=sysfs, lock_dir=tmp_path)
    first.close()
    PciTransport(BDF, root=sysfs, lock_dir=tmp_path).close()


def test_missing_resource_is_a_transport_error(sysfs, tmp_path):
    (sysfs / BDF / "resource5").unlink()
    with pytest.raises(TransportError, match="cannot map"):
        PciTransport(BDF, root=sysfs, lock_dir=tmp_path)


def test_absent_sysfs_means_no_devices(tmp_path):
    assert find_pci_devices(tmp_path / "nothing") == []


def test_auto_puts_usb_before_pci(sysfs, tmp_path):
    context = DeviceContext(usb_backend=SimUsbBackend(SimCard()), sysfs_root=sysfs, lock_dir=tmp_path)
    with open_transport("auto", 0, None, context) as first:
        assert first.name == "usb"
    with open_transport("auto", 1, None, context) as second:
        assert second.name == "pci" and second.description == f"pci:{BDF}"
    entries, _ = list_devices(context)
    assert [(entry.transport, entry.index, entry.auto_index) for entry in entries] == [("usb", 0, 0), ("pci", 0, 1)]
