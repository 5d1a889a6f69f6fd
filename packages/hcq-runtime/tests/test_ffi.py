"""ccall / cstruct: calling C through pointers and packing C structs, checked against libc and `struct`."""

import ctypes
import ctypes.util
import struct

import numpy as np
import pytest
from hcq_runtime.ffi import FFIError, ccall, cstruct
from hypothesis import given, settings
from hypothesis import strategies as st

libc = ctypes.CDLL(ctypes.util.find_library("c"))


class Mixed(ctypes.Structure):
    _fields_ = [("u8", ctypes.c_uint8), ("u16", ctypes.c_uint16), ("u32", ctypes.c_uint32), ("u64", ctypes.c_uint64)]


def test_ccall_libc_ffs():
    assert ccall(libc.ffs, 0x10) == 5


def test_ccall_through_a_pointer_held_in_a_buffer():
    holder = np.zeros(1, np.uint64)
    holder[0] = ctypes.cast(libc.ffs, ctypes.c_void_p).value
    assert ccall(holder, 0x80) == 8
    assert ccall(int(holder[0]), 0) == 0


def test_ccall_with_explicit_types():
    labs = ctypes.cast(libc.labs, ctypes.c_void_p).value
    assert ccall(labs, -(1 << 40), restype=ctypes.c_long, argtypes=(ctypes.c_long,)) == 1 << 40


def test_ccall_refuses_null_and_arity_mismatch():
    with pytest.raises(FFIError, match="NULL"):
        ccall(0, 1)
    with pytest.raises(FFIError, match="takes 1 arguments"):
        ccall(ctypes.cast(libc.abs, ctypes.c_void_p).value, 1, 2, argtypes=(ctypes.c_int,))
    with pytest.raises(FFIError, match="8 bytes"):
        ccall(b"\x01\x02", 1)


def test_cstruct_fields_at_their_offsets():
    raw = cstruct(Mixed, u8=0x12, u16=0x3456, u32=0x789ABCDE, u64=0xFEDCBA9876543210)
    assert len(raw) == 16
    assert struct.unpack("<BxHIQ", raw) == (0x12, 0x3456, 0x789ABCDE, 0xFEDCBA9876543210)


@settings(max_examples=50, derandomize=True)
@given(st.integers(0, 0xFF), st.integers(0, 0xFFFF), st.integers(0, 0xFFFFFFFF), st.integers(0, (1 << 64) - 1))
def test_cstruct_matches_struct_pack(u8, u16, u32, u64):
    assert cstruct(Mixed, u8=u8, u16=u16, u32=u32, u64=u64) == struct.pack("<BxHIQ", u8, u16, u32, u64)


def test_cstruct_refuses_unknown_fields_and_overflow():
    with pytest.raises(FFIError, match="no field 'u128'"):
        cstruct(Mixed, u128=1)
    with pytest.raises(FFIError, match="does not fit Mixed.u16"):
        cstruct(Mixed, u16=0x10000)
