"""Shared fixtures for navi-flash tests: synthetic IFWI images, simulated cards and a CLI runner."""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

import navi_flash.usb_bridge
import pytest
from navi_flash import cli
from navi_flash.devices import DeviceContext
from navi_flash.sim import SimCard

FLASH_SIZE = 0x200000
SGN_TABLE, ISH_PAYLOAD, ISH_SIZE = 0x14000, 0x40000, 0x2000
SGN_ENTRIES = {1: (0x50000, 0x400), 2: (0x51000, 0x200), 3: (0x52000, 0x100), 4: (0x53000, 0x80), 5: (0x54000, 0x40), 6: (0x55000, 0x20),
               7: (0x56000, 0x10)}
PSP_DIR_COUNTS = {0x2000: 5, 0x3000: 3}


def make_ifwi(seed: int = 1) -> bytes:
    """A 2 MiB image with the IFWI structures the resolver follows, random bytes elsewhere (deterministic per seed)."""
    rng = random.Random(seed)
    image = bytearray(rng.randbytes(FLASH_SIZE))
    image[0:4] = b"\xaa\x55\xaa\x55"
    struct.pack_into("<I", image, 0x1000, SGN_TABLE)
    image[SGN_TABLE : SGN_TABLE + 4] = b"$SGN"
    struct.pack_into("<I", image, SGN_TABLE + 8, len(SGN_ENTRIES))
    for i, (sign_type, (offset, size)) in enumerate(SGN_ENTRIES.items()):
        struct.pack_into("<IIII", image, SGN_TABLE + 0x10 + i * 0x10, sign_type, 0, size, offset)
    for offset, count in PSP_DIR_COUNTS.items():
        image[offset : offset + 4] = b"$PSP"
        struct.pack_into("<I", image, offset + 8, count)
    struct.pack_into("<I", image, 0x12000 + 0x10, ISH_PAYLOAD)
    struct.pack_into("<I", image, 0x12000 + 0x18, ISH_SIZE)
    return bytes(image)


@pytest.fixture
def ifwi() -> bytes:
    return make_ifwi(1)


@pytest.fixture(autouse=True)
def _no_usb_retry_delay(monkeypatch):
    # Retries of transient TLP failures wait 1 ms on hardware; the simulator needs no wait.
    monkeypatch.setattr(navi_flash.usb_bridge, "RETRY_DELAY", 0)


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys, tmp_path):
    """Call `navi-flash` in-process; returns exit code, stdout and stderr."""

    def run(*argv: str, context: DeviceContext | None = None) -> Run:
        context = context or DeviceContext(lock_dir=tmp_path, sysfs_root=tmp_path / "no-sysfs")
        code = cli.main(list(argv), context)
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


@pytest.fixture
def card_dir(tmp_path, ifwi):
    """A simulated card directory whose flash holds the synthetic IFWI."""
    directory = tmp_path / "card"
    SimCard.create(directory, ifwi)
    return directory


@pytest.fixture
def ifwi_layout() -> dict[int, tuple[int, int]]:
    """Item type -> (offset, size) where `make_ifwi` placed each item: the oracle for the resolver."""
    layout = {
        0x01: (0, 0x54), 0x02: (0x2000, (PSP_DIR_COUNTS[0x2000] + 1) * 16), 0x03: (0x3000, (PSP_DIR_COUNTS[0x3000] + 1) * 16),
        0x04: (0x10000, 0x1000), 0x05: (0x11000, 0x1000), 0x06: (0x12000, 0x20), 0x07: (0x13000, 0x20), 0x08: (ISH_PAYLOAD, ISH_SIZE),
        0x80: (0x1000, 4), 0x81: (SGN_TABLE, (len(SGN_ENTRIES) + 1) * 16), 0x89: (0x1F0000, 0x100),
    }
    layout.update({0x81 + sign_type: place for sign_type, place in SGN_ENTRIES.items()})
    return layout


@pytest.fixture
def ifwi_factory():
    return make_ifwi
