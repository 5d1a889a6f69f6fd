"""ROM_SW engine driver against the simulated engine: wire format, RX lag, register restore, gating and timeouts."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from navi_flash import EngineError, RomSwSession, SpiFlash, UsageError, regs
from navi_flash.sim import SimCard, SimTransport

IMAGE = os.urandom(0x200000)


def session_for(card: SimCard, **kwargs) -> RomSwSession:
    return RomSwSession(SimTransport(card), **kwargs)


def test_tx_is_a_big_endian_stream_after_opcode_and_address():
    card = SimCard(IMAGE)
    card.chip.wire = []
    with session_for(card) as session:
        session.transfer(0x02, address=0x123456, address_len=3, data_out=bytes(range(7)))
    assert card.chip.wire == [(bytes([0x02, 0x12, 0x34, 0x56]) + bytes(range(7)), 0)]


@pytest.mark.parametrize("rx_lag", [True, False])
def test_primed_reads_return_flash_bytes_with_and_without_rx_lag(rx_lag):
    card = SimCard(IMAGE, rx_lag=rx_lag)
    with session_for(card) as session:
        assert SpiFlash(session).read(0x1FFF00, 0x100) == IMAGE[0x1FFF00:]


def test_slow_engine_is_polled_until_done():
    card = SimCard(IMAGE)
    card.rom_sw.done_polls = 5
    with session_for(card) as session:
        before = card.reads
        data = SpiFlash(session).read(0x40, 8)
    assert data == IMAGE[0x40:0x48] and card.reads - before == 2 * (1 + 6) + 2


def test_an_unprimed_read_shows_the_previous_capture():
    card = SimCard(IMAGE)
    with session_for(card) as session:
        session.transfer(0x03, address=0x1000, address_len=3, data_in=8)
        stale = session.transfer(0x03, address=0x2000, address_len=3, data_in=8)
    assert stale == IMAGE[0x1000:0x1008]


def test_session_restores_every_register_and_holds_setup_once():
    card = SimCard(IMAGE)
    before = card.snapshot()
    with session_for(card) as session:
        assert not card.register(regs.GPIO_PAD_MASK) & regs.SPI_GPIO_BITS
        assert card.register(regs.ROM_CNTL) >> regs.ROM_CNTL_PRESCALE_SHIFT & 0xF == 8
        SpiFlash(session).read(0, 0x400)
    assert card.snapshot() == before


def test_prescaler_lands_in_rom_cntl():
    card = SimCard(IMAGE)
    with session_for(card, prescale=3):
        value = card.register(regs.ROM_CNTL)
    assert value >> 24 & 0x1F == 0x10 | 3 and value & 0xF == 8


def test_transfer_without_pad_setup_reaches_no_chip():
    card = SimCard(IMAGE)
    with session_for(card) as session:
        card.registers[regs.GPIO_PAD_EN] |= regs.SPI_GPIO_BITS  # something else grabbed the pads
        session.transfer(0x9F, data_in=4, keep_rx=False)
        assert session.transfer(0x9F, data_in=4) == b"\xff" * 4


def test_gated_engine_is_reported_and_registers_restored():
    card = SimCard(IMAGE, gated=True)
    before = card.snapshot()
    with pytest.raises(EngineError, match="0x04000800.*gated"):
        with session_for(card):
            pass
    assert card.snapshot() == before


def test_done_timeout_names_the_opcode_and_gating(monkeypatch):
    card = SimCard(IMAGE)
    with session_for(card) as session:
        monkeypatch.setattr(card.rom_sw, "_run", lambda: None)  # the engine accepts the start but never finishes
        with pytest.raises(EngineError, match="0x9f timed out.*gated"):
            session.transfer(0x9F, data_in=4)


def test_engine_gated_mid_command_is_caught_before_the_next_transaction():
    card = SimCard(IMAGE)
    with session_for(card) as session:
        card.rom_sw.gated = True
        with pytest.raises(EngineError, match="did not clear before 0x9f.*0x04000800"):
            session.transfer(0x9F, data_in=4)
        card.rom_sw.gated = False


def test_transfer_argument_checks():
    with session_for(SimCard(IMAGE)) as session:
        with pytest.raises(UsageError):
            session.transfer(0x03, data_in=257)
        with pytest.raises(UsageError):
            session.transfer(0x02, data_out=b"x", data_in=1)
        with pytest.raises(UsageError):
            session.transfer(0x03, address_len=4)


def test_prescale_range_is_checked():
    with pytest.raises(UsageError, match="prescale"):
        RomSwSession(SimTransport(SimCard(IMAGE)), prescale=16)


@settings(max_examples=25, derandomize=True, deadline=None)
@given(st.integers(0, 0x200000 - 1), st.integers(0, 1200))
def test_reads_match_the_image(address, size):
    size = min(size, 0x200000 - address)
    with session_for(SimCard(IMAGE)) as session:
        assert SpiFlash(session).read(address, size) == IMAGE[address : address + size]
