"""The USB transport, unmodified, through real pyusb calls into the simulated ASM24 bridge backend."""

import pytest
from navi_flash import DeviceLockedError, DeviceNotFoundError, TransportError, open_flash, romless_flash
from navi_flash.devices import DeviceContext, open_transport
from navi_flash.sim import Faults, SimCard, SimUsbBackend
from navi_flash.usb_bridge import TLP_MEM_READ, ASM24Bridge, find_usb_devices


@pytest.fixture
def card(ifwi):
    return SimCard(ifwi)


def open_usb(backend, tmp_path):
    return open_transport("usb", 0, None, DeviceContext(usb_backend=backend, lock_dir=tmp_path))


def test_bring_up_detaches_driver_powers_link_and_maps_bar5(card, tmp_path, ifwi):
    backend = SimUsbBackend(card)
    with open_usb(backend, tmp_path) as transport, open_flash(transport) as flash:
        assert flash.read(0x1000, 0x200) == ifwi[0x1000:0x1200]
        assert transport.bar5 == backend.gpu.bar_address(5) == 0x10000000
    assert backend.powered and not backend.kernel_driver and backend.resets == 1


@pytest.mark.parametrize("vendor", [0x3801, 0xADD1])
def test_both_vendor_ids_are_found(card, vendor):
    found = find_usb_devices(SimUsbBackend(card, vendor=vendor))
    assert [(entry.vendor, entry.product) for entry in found] == [(vendor, 0x0001)]


def test_stock_firmware_is_refused(card, tmp_path):
    with pytest.raises(DeviceNotFoundError, match="custom firmware"):
        open_usb(SimUsbBackend(card, product_string="USB Mass Storage"), tmp_path)


def test_transient_tlp_errors_are_retried(card, tmp_path, ifwi):
    card.faults = Faults(f0_transient=3)
    with open_usb(SimUsbBackend(card), tmp_path) as transport, open_flash(transport) as flash:
        assert flash.read(0, 16) == ifwi[:16]


def test_persistent_tlp_errors_fail_after_bounded_retries(card, tmp_path):
    card.faults = Faults(f0_persistent=True)
    backend = SimUsbBackend(card)
    with pytest.raises(TransportError, match="after 10 retries"):
        open_usb(backend, tmp_path)


def test_unsupported_request_completion_is_reported(card):
    backend = SimUsbBackend(card)
    bridge = ASM24Bridge(find_usb_devices(backend)[0].device)
    with pytest.raises(TransportError, match="Unsupported Request"):
        bridge.pcie_request(TLP_MEM_READ, 0x10000000)  # BAR5 not assigned yet


def test_disconnect_mid_flash_is_one_error(card, tmp_path, ifwi):
    backend = SimUsbBackend(card)
    transport = open_usb(backend, tmp_path)
    card.faults.usb_disconnect_after = backend.transfers + 3000
    with pytest.raises(TransportError, match="No such device") as info:
        romless_flash(transport, bytes(0x200000), sector_count=2)
    assert "\n" not in str(info.value)
    transport.close()


def test_second_open_of_the_same_bridge_is_locked(card, tmp_path):
    backend = SimUsbBackend(card)
    first = open_usb(backend, tmp_path)
    try:
        with pytest.raises(DeviceLockedError, match="in use"):
            open_usb(backend, tmp_path)
    finally:
        first.close()
    open_usb(backend, tmp_path).close()


def test_flash_over_usb_matches_direct_simulation(card, tmp_path, ifwi):
    image = bytearray(ifwi)
    image[0x2000:0x3000] = bytes(range(256)) * 16
    with open_usb(SimUsbBackend(card), tmp_path) as transport:
        report = romless_flash(transport, bytes(image), start_sector=1, sector_count=3)
    assert card.flash == image and report.written_sectors == 1 and report.skipped == 2
