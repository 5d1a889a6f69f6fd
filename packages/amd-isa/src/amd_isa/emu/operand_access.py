"""Operand access compiled once per instruction: each source becomes a reader `st -> value`, each destination a writer.

A VGPR reader returns a lane array (a view of the register file, in the operand's data type); scalar registers, inline
constants and literals return numpy scalars, which broadcast over lanes in the numpy expression of the op.
"""

import math
from collections.abc import Callable

import numpy as np

from .errors import UnsupportedInstructionError
from .wave_state import N_VGPRS, WaveState

Reader = Callable[[WaveState], object]
Writer = Callable[[WaveState, object], None]

# Data-format name of the tables -> (numpy dtype, bits). PK*/WMMA formats are read as raw 32-bit registers.
DTYPES: dict[str, tuple[type, int]] = {
    "F32": (np.float32, 32), "U32": (np.uint32, 32), "B32": (np.uint32, 32), "I32": (np.int32, 32),
    "U24": (np.uint32, 32), "I24": (np.int32, 32),
    "F16": (np.float16, 16), "U16": (np.uint16, 16), "B16": (np.uint16, 16), "I16": (np.int16, 16), "BF16": (np.uint16, 16),
    "F64": (np.float64, 64), "U64": (np.uint64, 64), "B64": (np.uint64, 64), "I64": (np.int64, 64),
    "M64": (np.uint64, 64), "B8": (np.uint8, 8),
}
INLINE_FLOATS = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0, 248: 1.0 / (2.0 * math.pi)}
# 1/(2*pi) as each precision's hardware constant (the f32 and f16 patterns are rounded from the f64 one).
INV_2PI_BITS = {16: 0x3118, 32: 0x3E22F983, 64: 0x3FC45F306DC9C882}
LITERAL, VGPR_BASE = 255, 256
SCC_CODE, VCCZ_CODE, EXECZ_CODE = 253, 251, 252
# Flat-address apertures the emulator reports through src_shared_base / src_private_base (high dwords).
SHARED_APERTURE_HI, PRIVATE_APERTURE_HI = 0x0001_0000, 0x0002_0000


def dtype_of(dfmt: str) -> tuple[type, int]:
    """The numpy dtype and width of a table data format (packed and matrix formats read as 32-bit raw)."""
    if dfmt in DTYPES:
        return DTYPES[dfmt]
    return (np.uint32, 32)


def _float_bits(value: float, bits: int) -> int:
    if bits == 16:
        return int(np.array(value, np.float16).view(np.uint16))
    if bits == 64:
        return int(np.array(value, np.float64).view(np.uint64))
    return int(np.array(value, np.float32).view(np.uint32))


def constant_bits(code: int, bits: int, dfmt: str, literal: int | None) -> int | None:
    """The raw bits of an inline constant or literal for an operand of `bits` bits, or None if `code` is a register."""
    is_float = dfmt.startswith("F") or dfmt == "BF16"
    mask = (1 << bits) - 1
    if 128 <= code <= 208:
        value = code - 128 if code <= 192 else 192 - code
        if is_float:
            return _float_bits(float(value), bits) if dfmt != "BF16" else _float_bits(float(value), 32) >> 16
        return value & mask
    if code in INLINE_FLOATS:
        if code == 248:
            return INV_2PI_BITS[bits] if dfmt != "BF16" else 0x3E22
        if dfmt == "BF16":
            return _float_bits(INLINE_FLOATS[code], 32) >> 16
        # Integer operands see the float constant as the bit pattern of the operand's own width.
        return _float_bits(INLINE_FLOATS[code], bits if bits in (16, 32, 64) else 32)
    if code == LITERAL:
        lit = (literal or 0) & 0xFFFFFFFF
        if bits == 64:
            # A 64-bit float literal supplies the high dword; 64-bit integer literals are sign-extended if signed.
            if is_float:
                return lit << 32
            return (lit - (1 << 32)) & mask if dfmt == "I64" and lit & 0x80000000 else lit
        return lit & mask
    return None


def _scalar_value(st: WaveState, code: int, bits: int) -> int:
    """Raw bits of a scalar-register source (SGPR, VCC, EXEC, M0, NULL, SCC, VCCZ/EXECZ, apertures)."""
    if code < 128:
        if bits == 64:
            return st.s[code] | (st.s[code + 1] << 32)
        return st.s[code]
    if code == SCC_CODE:
        return st.scc
    if code == VCCZ_CODE:
        return int(st.vcc == 0)
    if code == EXECZ_CODE:
        return int(st.exec_value == 0)
    if code in (235, 237):
        hi = SHARED_APERTURE_HI if code == 235 else PRIVATE_APERTURE_HI
        return hi << 32 if bits == 64 else hi
    if code in (236, 238):
        hi = SHARED_APERTURE_HI if code == 236 else PRIVATE_APERTURE_HI
        return (hi << 32 | 0xFFFFFFFF) if bits == 64 else hi
    raise UnsupportedInstructionError(f"scalar source code {code} is not emulated")


def scalar_reader(code: int, bits: int, dfmt: str, literal: int | None) -> Callable[[WaveState], int]:
    """A reader of a scalar source as a Python int of raw bits (SALU operands)."""
    const = constant_bits(code, bits, dfmt, literal)
    if const is not None:
        return lambda st: const
    if code < 128 and bits == 32:
        return lambda st: st.s[code]
    return lambda st: _scalar_value(st, code, bits)


def _as_np_scalar(bits_value: int, dtype: type, bits: int):
    raw = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
    return raw(bits_value & ((1 << bits) - 1)).view(dtype)


def vector_reader(code: int, dfmt: str, literal: int | None, hi: bool = False, short16: bool = False) -> Reader:
    """A reader of a VALU source in its data type: a lane array for VGPRs, a numpy scalar otherwise.

    `hi` selects the high half of a 16-bit operand (VOP3 opsel); `short16` applies the RDNA VOP1/VOP2/VOPC rule that a
    16-bit VGPR operand numbered 128 or more names the high half of VGPR n-128 (the staging rows past the register
    file, which DPP and SDWA read through, are whole registers).
    """
    dtype, bits = dtype_of(dfmt)
    if code >= VGPR_BASE:
        reg = code - VGPR_BASE
        if bits == 16:
            if short16 and 128 <= reg < N_VGPRS:
                reg, hi = reg - 128, True
            view = {np.float16: "vh", np.int16: "vi16"}.get(dtype, "v16")
            half = int(hi)
            return lambda st: getattr(st, view)[reg, half::2]
        if bits == 64:
            if dtype is np.float64:
                return lambda st: ((st.v[reg + 1].astype(np.uint64) << np.uint64(32)) | st.v[reg]).view(np.float64)
            if dtype is np.int64:
                return lambda st: ((st.v[reg + 1].astype(np.uint64) << np.uint64(32)) | st.v[reg]).view(np.int64)
            return lambda st: (st.v[reg + 1].astype(np.uint64) << np.uint64(32)) | st.v[reg]
        if dtype is np.float32:
            return lambda st: st.vf[reg]
        if dtype is np.int32:
            return lambda st: st.vi[reg]
        return lambda st: st.v[reg]
    const = constant_bits(code, bits, dfmt, literal)
    if const is not None:
        value = _as_np_scalar(const, dtype, bits)
        return lambda st: value
    if bits == 32 and code < 128:
        # Plain SGPR/VCC/EXEC/M0 reads are the common scalar operand: one numpy scalar construction.
        if dtype is np.uint32:
            return lambda st: np.uint32(st.s[code])
        return lambda st: np.uint32(st.s[code]).view(dtype)
    if bits == 16:
        shift = 16 if hi else 0
        return lambda st: _as_np_scalar(_scalar_value(st, code, 32) >> shift, dtype, 16)
    return lambda st: _as_np_scalar(_scalar_value(st, code, bits), dtype, bits)


def with_modifiers(read: Reader, neg: bool, abs_: bool) -> Reader:
    """Apply VOP3 float source modifiers (|x| first, then negation) to a reader."""
    if abs_ and neg:
        return lambda st: -np.abs(read(st))
    if abs_:
        return lambda st: np.abs(read(st))
    if neg:
        return lambda st: -read(st)
    return read


def vector_writer(reg: int, dfmt: str, hi: bool = False, short16: bool = False, zero_high: bool = False) -> Writer:
    """A writer of a VALU result to VGPR `reg` in the destination's data type, honouring EXEC.

    The result is cast to the destination type (`unsafe` casting: integer results wrap, float results round once).
    A 16-bit result keeps the other half of the register unless `zero_high` (gfx9's rule for most 16-bit ops).
    """
    dtype, bits = dtype_of(dfmt)
    if bits == 16:
        if short16 and 128 <= reg < N_VGPRS:
            reg, hi = reg - 128, True
        view_name = {np.float16: "vh", np.int16: "vi16"}.get(dtype, "v16")
        half = int(hi)
        if zero_high:
            def write16_zero_high(st: WaveState, value) -> None:
                word = np.zeros(st.n_lanes, np.uint32)
                np.copyto(word.view(dtype)[0::2], value, casting="unsafe")
                np.copyto(st.v[reg], word, where=st.exec_mask)
            return write16_zero_high

        def write16(st: WaveState, value) -> None:
            dst = getattr(st, view_name)[reg, half::2]
            if st.exec_full:
                np.copyto(dst, value, casting="unsafe")
            else:
                np.copyto(dst, value, casting="unsafe", where=st.exec_mask)
        return write16
    if bits == 64:
        def write64(st: WaveState, value) -> None:
            raw = np.asarray(value)
            if raw.dtype != dtype:
                raw = raw.astype(dtype)
            raw = raw.view(np.uint64)
            lo, hi_part = raw.astype(np.uint32), (raw >> np.uint64(32)).astype(np.uint32)
            if st.exec_full:
                st.v[reg] = lo
                st.v[reg + 1] = hi_part
            else:
                np.copyto(st.v[reg], lo, where=st.exec_mask)
                np.copyto(st.v[reg + 1], hi_part, where=st.exec_mask)
        return write64
    if dtype is np.float32:
        def write_f32(st: WaveState, value) -> None:
            if st.exec_full:
                np.copyto(st.vf[reg], value, casting="unsafe")
            else:
                np.copyto(st.vf[reg], value, casting="unsafe", where=st.exec_mask)
        return write_f32

    def write_u32(st: WaveState, value) -> None:
        if st.exec_full:
            np.copyto(st.v[reg], value, casting="unsafe")
        else:
            np.copyto(st.v[reg], value, casting="unsafe", where=st.exec_mask)
    return write_u32

