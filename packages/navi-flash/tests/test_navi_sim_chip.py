"""The GD25LQ16E model behaves like the datasheet says (checked against simple independent rules)."""

from hypothesis import given, settings
from hypothesis import strategies as st
from navi_flash import chips
from navi_flash.sim.gd25 import GD25Model

SIZE = 0x200000


def fresh(fill: int = 0xFF) -> GD25Model:
    return GD25Model(bytearray([fill]) * SIZE)


def wren(chip: GD25Model) -> None:
    chip.transaction(bytes([chips.OP_WREN]), 0)


def settle(chip: GD25Model) -> int:
    polls = 0
    while chip.transaction(bytes([chips.OP_RDSR1]), 1)[0] & chips.SR1_BUSY:
        polls += 1
    return polls


def test_rdid_repeats_the_three_id_bytes():
    assert fresh().transaction(bytes([chips.OP_RDID]), 5) == bytes.fromhex("c86015c860")


@settings(max_examples=40, derandomize=True)
@given(st.binary(min_size=1, max_size=256), st.binary(min_size=256, max_size=256), st.integers(0, 255))
def test_program_only_clears_bits_and_wraps_in_the_page(payload, initial, column):
    chip = GD25Model(bytearray(b"\xff" * SIZE))
    chip.data[0x1000:0x1100] = initial
    wren(chip)
    chip.transaction(bytes([chips.OP_PAGE_PROGRAM]) + (0x1000 + column).to_bytes(3, "big") + payload, 0)
    expected = bytearray(initial)
    for i, byte in enumerate(payload):
        expected[(column + i) % 256] &= byte
    assert chip.data[0x1000:0x1100] == expected
    assert chip.data[0x1100:0x1200] == b"\xff" * 256


def test_erase_sets_ff_and_wel_clears_after_busy():
    chip = fresh(0x00)
    wren(chip)
    assert chip.sr1 & chips.SR1_WEL
    chip.transaction(bytes([chips.OP_SECTOR_ERASE]) + (0x3456).to_bytes(3, "big"), 0)
    assert chip.busy
    assert chip.data[0x3000:0x4000] == b"\xff" * 0x1000 and chip.data[0x2FFF] == 0 and chip.data[0x4000] == 0
    assert settle(chip) == chip.erase_polls
    assert not chip.sr1 & chips.SR1_WEL


def test_writes_without_wel_are_ignored_and_busy_chip_ignores_commands():
    chip = fresh(0x00)
    chip.transaction(bytes([chips.OP_SECTOR_ERASE, 0, 0, 0]), 0)
    assert chip.data[0] == 0
    wren(chip)
    chip.transaction(bytes([chips.OP_SECTOR_ERASE, 0, 0, 0]), 0)
    assert chip.transaction(bytes([chips.OP_READ, 0, 0x10, 0]), 2) == b"\xff\xff"  # busy: read ignored
    assert chip.transaction(bytes([chips.OP_RDID]), 3) == b"\xff\xff\xff"


def test_cmp_with_zero_bp_protects_everything_and_bp_protects_the_top():
    chip = fresh(0x00)
    chip.sr2 = 0x40
    assert all(chip.protected(address) for address in (0, 0x100000, SIZE - 1))
    wren(chip)
    chip.transaction(bytes([chips.OP_SECTOR_ERASE, 0, 0, 0]), 0)
    settle(chip)
    assert chip.data[0] == 0
    chip.sr2, chip.sr1 = 0, 1 << 2  # BP0: upper 64 KiB
    assert chip.protected(SIZE - 0x10000) and not chip.protected(SIZE - 0x10001)


def test_wrsr_keeps_busy_and_wel_read_only():
    chip = fresh()
    wren(chip)
    chip.transaction(bytes([chips.OP_WRSR, 0xFF, 0x40]), 0)
    settle(chip)
    assert chip.sr1 == 0xFC and chip.sr2 == 0x40


def test_sfdp_capture_starts_with_the_dummy_byte():
    assert fresh().transaction(bytes([chips.OP_SFDP, 0, 0, 0]), 5) == b"\xffSFDP"
