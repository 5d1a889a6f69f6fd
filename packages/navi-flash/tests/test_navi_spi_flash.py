"""GD25LQ16E command layer: JEDEC check, WEL, CMP clear, erase/program checks, BUSY timeout."""

import pytest
from navi_flash import ChipError, FlashTimeoutError, RomSwSession, SpiFlash, UsageError, has_jedec
from navi_flash.sim import Faults, SimCard, SimTransport


@pytest.fixture
def card():
    return SimCard(bytes(0x200000))


def flash_of(card: SimCard) -> tuple[RomSwSession, SpiFlash]:
    session = RomSwSession(SimTransport(card))
    session.open()
    return session, SpiFlash(session)


@pytest.mark.parametrize("capture", ["c86015c8", "6015c8c8", "15c8c860", "c8c86015"])
def test_jedec_check_tolerates_rotation(capture):
    assert has_jedec(bytes.fromhex(capture))


def test_jedec_check_rejects_other_parts():
    assert not has_jedec(bytes.fromhex("ef4015ef"))


def test_wrong_jedec_is_a_chip_error(card):
    card.faults = Faults(wrong_jedec=True)
    card.apply_faults()
    _, flash = flash_of(card)
    with pytest.raises(ChipError, match="ef4015"):
        flash.check_id()


def test_clear_cmp_preserves_other_status_bits(card):
    card.chip.sr2 = 0x42  # CMP and QE
    _, flash = flash_of(card)
    assert flash.clear_cmp()
    assert card.chip.sr2 == 0x02 and not flash.clear_cmp()


def test_write_enable_checks_wel(card, monkeypatch):
    _, flash = flash_of(card)
    monkeypatch.setattr(card.chip, "transaction", lambda tx, n, real=card.chip.transaction: real(tx if tx[:1] != b"\x06" else b"\x00", n))
    with pytest.raises(ChipError, match="write enable did not latch"):
        flash.write_enable()


def test_erase_then_program_then_read(card):
    _, flash = flash_of(card)
    flash.erase_sector(0x5000)
    flash.program_page(0x5080, b"\x5a" * 0x80)
    assert flash.read(0x5000, 0x100) == b"\xff" * 0x80 + b"\x5a" * 0x80
    assert card.chip.erases == 1 and card.chip.programs == 1


def test_program_refuses_to_cross_a_page(card):
    _, flash = flash_of(card)
    with pytest.raises(UsageError, match="crosses"):
        flash.program_page(0x5080, b"\x00" * 0x81)
    with pytest.raises(UsageError, match="aligned"):
        flash.erase_sector(0x5080)


def test_reads_are_chunked_to_256_bytes(card):
    card.chip.wire = []
    _, flash = flash_of(card)
    flash.read(0x10, 0x300)
    reads = [(tx, n) for tx, n in card.chip.wire if tx[0] == 0x03]
    assert [n for _, n in reads] == [0x100, 0x100, 0x100, 0x100, 0x100, 0x100]
    assert [int.from_bytes(tx[1:4], "big") for tx, _ in reads[::2]] == [0x10, 0x110, 0x210]


def test_busy_forever_times_out(card):
    _, flash = flash_of(card)
    card.faults.busy_forever = True
    card.apply_faults()
    with pytest.raises(FlashTimeoutError, match="stayed busy for 2.0s"):
        flash.erase_sector(0)
