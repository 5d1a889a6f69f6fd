"""romless flash safety: plan, skip identical sectors, verify, resume, protection, backup, dry run, cleanup on every path."""

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from navi_flash import ProtectionError, TransportError, VerifyError, plan_sector, romless, romless_flash
from navi_flash.progress import ProgressReporter
from navi_flash.sim import Faults, SimCard, SimTransport

SECTOR = 0x1000


class Notes(ProgressReporter):
    def __init__(self):
        self.lines = []

    def note(self, message):
        self.lines.append(message)


def apply_plan_oracle(current: bytes, wanted: bytes, erase: bool, pages: list[int]) -> bytes:
    """What the chip holds after the plan: erase makes all ones, programming ANDs page data in."""
    result = bytearray(b"\xff" * len(current) if erase else current)
    for offset in pages:
        for i in range(offset, offset + 0x100):
            result[i] &= wanted[i]
    return bytes(result)


sector_bytes = st.binary(min_size=SECTOR // 16, max_size=SECTOR // 16).map(lambda b: bytes(x for x in b for _ in range(16)))


@settings(max_examples=60, derandomize=True)
@given(sector_bytes, sector_bytes, st.sets(st.integers(0, 15)), st.booleans())
def test_plan_reaches_the_image_with_minimal_work(current, wanted, blank_pages, force):
    wanted = bytearray(wanted)
    for page in blank_pages:
        wanted[page * 0x100 : (page + 1) * 0x100] = b"\xff" * 0x100
    wanted = bytes(wanted)
    plan = plan_sector(3, current, wanted, 0x100, force)
    assert apply_plan_oracle(current, wanted, plan.erase, plan.pages) == wanted
    if current == wanted and not force:
        assert (plan.action, plan.erase, plan.pages) == ("skip", False, [])
        return
    needs_erase = any(w & ~c & 0xFF for c, w in zip(current, wanted, strict=True))
    assert plan.erase == (force or needs_erase)
    blank = b"\xff" * 0x100
    pages = range(0, SECTOR, 0x100)
    if plan.erase:
        expected = [p for p in pages if wanted[p : p + 0x100] != blank]
    else:
        expected = [p for p in pages if wanted[p : p + 0x100] != current[p : p + 0x100]]
    assert plan.pages == expected


def flash(card, image, **kwargs):
    return romless_flash(SimTransport(card), image, **kwargs)


def test_flash_range_then_rerun_skips_everything(ifwi):
    card = SimCard(bytes(0x200000))
    report = flash(card, ifwi, start_sector=2, sector_count=3)
    assert card.flash[2 * SECTOR : 5 * SECTOR] == ifwi[2 * SECTOR : 5 * SECTOR]
    assert card.flash[: 2 * SECTOR] == bytes(2 * SECTOR) and card.flash[5 * SECTOR :] == bytes(0x200000 - 5 * SECTOR)
    assert (report.written_sectors, report.erased, report.skipped, report.verified) == (3, 3, 0, True)
    again = flash(card, ifwi, start_sector=2, sector_count=3)
    assert (again.written_sectors, again.skipped, card.chip.erases) == (0, 3, 3)


def test_force_rewrites_identical_sectors(ifwi):
    card = SimCard(ifwi)
    report = flash(card, ifwi, start_sector=0, sector_count=2, force=True)
    assert report.erased == 2 and report.skipped == 0 and card.flash == bytearray(ifwi)


def test_full_chip_flash_with_backup_then_verify(ifwi, tmp_path):
    original = bytes(range(256)) * (0x200000 // 256)
    card = SimCard(original)
    report = flash(card, ifwi, backup=tmp_path / "backup.bin")
    assert card.flash == bytearray(ifwi)
    assert (tmp_path / "backup.bin").read_bytes() == original
    assert report.backup_sha256 == hashlib.sha256(original).hexdigest()
    assert report.written_sectors + report.skipped == 512


def test_stuck_bit_fails_verify_and_that_sector_is_not_reported(ifwi):
    address = 3 * SECTOR + 0x10
    image = bytearray(ifwi)
    image[address] = 0x00
    card = SimCard(b"\xff" * 0x200000, faults=Faults(stuck_bits={address: 0x01}))
    notes = Notes()
    with pytest.raises(VerifyError, match=f"sector 3 did not verify at {address:#x}: flash=01 image=00"):
        flash(card, bytes(image), start_sector=1, sector_count=4, progress=notes)
    reported = [line for line in notes.lines if line.startswith("OK")]
    assert [line.split()[2] for line in reported] == ["001/511", "002/511"]


def test_cmp_needs_clear_cmp(ifwi):
    card = SimCard(bytes(0x200000), cmp=True)
    with pytest.raises(ProtectionError, match="--clear-cmp"):
        flash(card, ifwi, sector_count=1)
    assert card.chip.erases == 0
    report = flash(card, ifwi, sector_count=1, clear_cmp=True)
    assert report.cleared_cmp and card.chip.sr2 & 0x40 == 0 and card.flash[:SECTOR] == ifwi[:SECTOR]


@pytest.mark.parametrize(("cmp", "message"), [(False, "does not clear BP"), (True, "swap the protected half")])
def test_block_protect_is_refused(ifwi, cmp, message):
    card = SimCard(bytes(0x200000), cmp=cmp)
    card.chip.sr1 = 0x0C
    with pytest.raises(ProtectionError, match=message):
        flash(card, ifwi, sector_count=1, clear_cmp=True)
    assert card.chip.sr2 == (0x40 if cmp else 0) and card.chip.erases == 0


def test_backup_reads_must_match(ifwi, tmp_path, monkeypatch):
    card = SimCard(bytes(0x200000))
    reads = iter([b"\x00" * 0x200000, b"\x00" * 0x1000 + b"\x01" + b"\x00" * (0x200000 - 0x1001)])
    monkeypatch.setattr(romless, "read_range", lambda *args, **kwargs: next(reads))
    with pytest.raises(VerifyError, match="differ at 0x1000"):
        flash(card, ifwi, sector_count=1, backup=tmp_path / "b.bin")
    assert not (tmp_path / "b.bin").exists() and card.chip.erases == 0


def test_dry_run_writes_nothing(ifwi, tmp_path):
    card = SimCard(ifwi[:0x1000] + bytes(0x1FF000))
    report = flash(card, ifwi, sector_count=3, dry_run=True, backup=tmp_path / "b.bin")
    assert [entry["action"] for entry in report.plan] == ["skip", "erase+program", "erase+program"]
    assert card.chip.erases == card.chip.programs == 0 and not (tmp_path / "b.bin").exists()
    assert 0x06 not in card.chip.log


@pytest.mark.parametrize("after", [40, 200, 900])
def test_ctrl_c_restores_registers_and_disables_writes(ifwi, after):
    card = SimCard(bytes(0x200000), faults=Faults(interrupt_after_transactions=after))
    before = card.snapshot()
    with pytest.raises(KeyboardInterrupt):
        flash(card, ifwi, sector_count=4)
    assert card.snapshot() == before
    assert not card.chip.sr1 & 0x02
    if 0x06 in card.chip.log:
        assert card.chip.log[-1] == 0x04


def test_transport_failure_is_reported_not_masked(ifwi):
    card = SimCard(bytes(0x200000), faults=Faults(disconnect_after_mmio=3000))
    with pytest.raises(TransportError, match="stopped answering") as info:
        flash(card, ifwi, sector_count=4)
    assert any("restore" in note or "write-disable" in note for note in info.value.__notes__)


def test_refused_write_still_ends_with_write_disable(ifwi):
    card = SimCard(bytes(0x200000), cmp=True)
    with pytest.raises(ProtectionError):
        flash(card, ifwi, sector_count=1)
    assert card.chip.log[-1] == 0x04 and 0x06 not in card.chip.log
