"""Code objects from damaged files: reading and writing back raise CodeObjectError (an AmdIsaError) or round-trip,
never a raw Python exception (a symbol past 2**63 made to_bytes() raise struct.error)."""

from pathlib import Path

import pytest
from amd_isa.codeobject import CodeObject
from amd_isa.errors import AmdIsaError, CodeObjectError
from hypothesis import given, settings
from hypothesis import strategies as st

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "sqtt"
# s_mov_b32 s0, 1 ; v_mov_b32_e32 v0, 0 ; s_endpgm  (encodings from llvm-mc-15 -mcpu=gfx1100)
CODE = bytes([0x81, 0x00, 0x80, 0xBE, 0x80, 0x02, 0x00, 0x7E, 0x00, 0x00, 0xB0, 0xBF])
SEEDS = [CodeObject.from_code(CODE, "gfx1100").to_bytes()] + [p.read_bytes() for p in sorted(DATA.glob("*/*/prog_*.elf"))[:6]]


@settings(max_examples=300, deadline=None)
@given(seed=st.sampled_from(SEEDS), edits=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=6))
def test_damaged_code_objects_raise_package_errors_only(seed, edits):
    data = bytearray(seed)
    for where, byte in edits:
        data[where % len(data)] = byte
    try:
        co = CodeObject.from_bytes(bytes(data))
        again = CodeObject.from_bytes(co.to_bytes())
    except AmdIsaError:
        return
    assert set(again.descriptors) == set(co.descriptors)  # a written object keeps its kernels


def test_a_symbol_outside_the_text_is_refused_on_write():
    co = CodeObject.from_bytes(SEEDS[0])
    name = next(iter(co.symbols))
    co.symbols[name].value = 1 << 63
    with pytest.raises(CodeObjectError, match="outside"):
        co.to_bytes()


@pytest.mark.parametrize("index", range(len(SEEDS)))
def test_code_objects_round_trip_with_their_kernels_where_they_were(index):
    a = CodeObject.from_bytes(SEEDS[index])
    if not a.target:
        pytest.skip("a code object without its target in e_flags (tinygrad's minimal writer) cannot be written")
    b = CodeObject.from_bytes(a.to_bytes())
    assert b.text == a.text and b.target == a.target and b.descriptors.keys() == a.descriptors.keys()
    # each kernel enters at the same offset into .text (the addresses may move with the layout)
    assert {k: v["entry"] - a.text_addr for k, v in a.kernels.items()} == {k: v["entry"] - b.text_addr for k, v in b.kernels.items()}
    absolute = {n: s.value for n, s in a.symbols.items() if s.section == ""}
    assert absolute == {n: s.value for n, s in b.symbols.items() if s.section == "" and n in absolute}


def test_a_descriptor_symbol_in_another_section_does_not_hide_the_kernel():
    co = CodeObject.from_bytes(SEEDS[0])
    co.symbols["kernel.kd"].section = ""  # as a damaged section index reads
    again = CodeObject.from_bytes(co.to_bytes())
    assert set(again.descriptors) == {"kernel"}
