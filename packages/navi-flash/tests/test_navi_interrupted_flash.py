"""Property: a `romless flash` interrupted after any number of SPI transfers is completed by re-running the same command."""

import contextlib
import io
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from navi_flash import cli, romless_flash
from navi_flash.devices import DeviceContext
from navi_flash.sim import Faults, SimCard, SimTransport

START, COUNT, SECTOR = 4, 5, 0x1000
IMAGE = bytes(range(256)) * (0x200000 // 256)


def old_contents() -> bytes:
    """Mixes identical, program-only, erase-needing and one-page-different sectors inside the range."""
    old = bytearray(IMAGE)
    old[5 * SECTOR : 6 * SECTOR] = b"\xff" * SECTOR
    old[6 * SECTOR : 7 * SECTOR] = bytes(SECTOR)
    old[8 * SECTOR + 0x300 : 8 * SECTOR + 0x310] = bytes(16)
    return bytes(old)


def flash_command(directory: Path, image: Path) -> tuple[int, str]:
    argv = ["--sim", str(directory), "romless", "flash", str(image), "--start-sector", str(START), "--sector-count", str(COUNT),
            "--no-backup", "--yes"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(argv, DeviceContext(lock_dir=directory, sysfs_root=directory / "none"), out=io.StringIO())
    return code, err.getvalue()


@pytest.fixture(scope="module")
def total_transactions():
    card = SimCard(old_contents())
    romless_flash(SimTransport(card), IMAGE, start_sector=START, sector_count=COUNT)
    return card.rom_sw.transactions


@settings(max_examples=20, derandomize=True, deadline=None)
@given(st.integers(1, 10**6), st.sampled_from(["ctrl-c", "disconnect"]))
def test_rerunning_the_same_command_completes_an_interrupted_flash(total_transactions, where, how):
    point = 1 + where % total_transactions
    faults = Faults(interrupt_after_transactions=point) if how == "ctrl-c" else Faults(disconnect_after_mmio=point * 4)
    with tempfile.TemporaryDirectory() as name:
        directory, image = Path(name) / "card", Path(name) / "image.bin"
        image.write_bytes(IMAGE)
        SimCard.create(directory, old_contents(), faults=faults)
        code, err = flash_command(directory, image)
        assert code == 1 and err.startswith("error: ") and err.count("\n") == 1
        card = SimCard.load(directory)
        card.faults = Faults()
        card.save()
        code, err = flash_command(directory, image)
        assert code == 0, err
        card = SimCard.load(directory)
        assert card.flash == bytearray(IMAGE)
        assert not card.chip.sr1 & 0x02
