"""VALU semantics of the emulator against independent per-lane Python references (struct/ctypes/fractions), with edge
values: signed zeros, infinities, NaN, denormals, overflow, shift amounts at and past the operand width."""

import ctypes
import math
import struct
from fractions import Fraction

import numpy as np
import pytest
from amd_isa import assemble_insts
from amd_isa.emu import WaveState, run_program
from hypothesis import given, settings
from hypothesis import strategies as st

N = 32
M32 = 0xFFFFFFFF
F32_EDGES = [0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001, 0x807FFFFF,
             0x7F7FFFFF, 0xFF7FFFFF, 0x3FC00000, 0x3DCCCCCD, 0x4B800000, 0xCF000000, 0x4F800000, 0x00800000, 0x7149F2CA,
             0x0DA24260, 0x40490FDB, 0xC0490FDB, 0x3F000000, 0xBF000000, 0x40000000, 0x4EFFFFFF, 0x4F000000, 0xC1200000,
             0x3EAAAAAB, 0x80000001, 0x7F000000, 0x00400000, 0xC0000001]
INT_EDGES = [0, 1, 2, 31, 32, 33, 63, 64, 100, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 0x00FFFFFF, 0x01000000, 0x12345678,
             0x9ABCDEF0, 0x0000FFFF, 0xFFFF0000, 0x55555555, 0xAAAAAAAA, 7, 8, 15, 16, 17, 0x80000001, 0x7FFFFFFE, 255, 256, 0xDEADBEEF,
             0x00800000]


def f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & M32))[0]


def bits32(x: float) -> int:
    """Round a Python float to f32 (C cast: overflow to inf) and return its bits."""
    return struct.unpack("<I", struct.pack("<f", ctypes.c_float(x).value))[0]


def s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def run_vop(asm: str, inputs: dict[int, list[int]], sgprs: dict[int, int] | None = None, n_lanes: int = N) -> WaveState:
    state = WaveState(n_lanes)
    for reg, values in inputs.items():
        state.v[reg] = np.array(values, np.uint64).astype(np.uint32)
    for reg, value in (sgprs or {}).items():
        state.s[reg] = value
    return run_program(assemble_insts(asm, "rdna3"), n_lanes, state=state)


def check_f32(got: int, want: int, what: str) -> None:
    if math.isnan(f32(want)):
        assert math.isnan(f32(got)), f"{what}: expected NaN, got {got:#010x}"
    else:
        assert got == want, f"{what}: expected {want:#010x} ({f32(want)!r}), got {got:#010x} ({f32(got)!r})"


A_F = F32_EDGES
B_F = F32_EDGES[7:] + F32_EDGES[:7]
C_F = F32_EDGES[13:] + F32_EDGES[:13]


def _fma_ref(a: int, b: int, c: int) -> int:
    x, y, z = f32(a), f32(b), f32(c)
    if any(math.isnan(t) or math.isinf(t) for t in (x, y, z)):
        return bits32(x * y + z)
    return bits32(float(Fraction(x) * Fraction(y) + Fraction(z)))


def _min_ref(a: float, b: float) -> float:
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    if a == b == 0:
        return a if math.copysign(1, a) < 0 else b
    return min(a, b)


def _max_ref(a: float, b: float) -> float:
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    if a == b == 0:
        return a if math.copysign(1, a) > 0 else b
    return max(a, b)


FLOAT_BINARY = {
    "v_add_f32": lambda a, b: bits32(f32(a) + f32(b)),
    "v_sub_f32": lambda a, b: bits32(f32(a) - f32(b)),
    "v_subrev_f32": lambda a, b: bits32(f32(b) - f32(a)),
    "v_mul_f32": lambda a, b: bits32(f32(a) * f32(b)),
    "v_mul_dx9_zero_f32": lambda a, b: 0 if f32(a) == 0 or f32(b) == 0 else bits32(f32(a) * f32(b)),
}


@pytest.mark.parametrize("name", sorted(FLOAT_BINARY))
def test_float_binary_vop2(name: str) -> None:
    st_ = run_vop(f"{name}_e32 v2, v0, v1", {0: A_F, 1: B_F})
    for lane in range(N):
        check_f32(int(st_.v[2, lane]), FLOAT_BINARY[name](A_F[lane], B_F[lane]), f"{name} lane {lane}")


@pytest.mark.parametrize("name,ref", [("v_min_f32", _min_ref), ("v_max_f32", _max_ref)])
def test_float_min_max_ieee(name: str, ref) -> None:
    st_ = run_vop(f"{name}_e32 v2, v0, v1", {0: A_F, 1: B_F})
    for lane in range(N):
        want = ref(f32(A_F[lane]), f32(B_F[lane]))
        got = f32(int(st_.v[2, lane]))
        assert (math.isnan(got) and math.isnan(want)) or (got == want and math.copysign(1, got) == math.copysign(1, want)), lane


def test_fma_and_fmac_are_fused() -> None:
    st_ = run_vop("v_fma_f32 v3, v0, v1, v2\nv_mov_b32 v4, v2\nv_fmac_f32_e32 v4, v0, v1", {0: A_F, 1: B_F, 2: C_F})
    for lane in range(N):
        want = _fma_ref(A_F[lane], B_F[lane], C_F[lane])
        check_f32(int(st_.v[3, lane]), want, f"v_fma_f32 lane {lane}")
        check_f32(int(st_.v[4, lane]), want, f"v_fmac_f32 lane {lane}")


def test_fma_rounds_once() -> None:
    # (1 + 2^-23) * (1 - 2^-23) - 1 = -2^-46 exactly; an unfused multiply would round the product to 1 and give 0.
    a, b, c = bits32(1 + 2**-23), bits32(1 - 2**-23), bits32(-1.0)
    st_ = run_vop("v_fma_f32 v3, v0, v1, v2", {0: [a] * N, 1: [b] * N, 2: [c] * N})
    assert f32(int(st_.v[3, 0])) == -(2.0**-46)


UNARY_F32 = {
    "v_trunc_f32": lambda x: math.trunc(x) if math.isfinite(x) else x,
    "v_floor_f32": lambda x: math.floor(x) if math.isfinite(x) else x,
    "v_ceil_f32": lambda x: math.ceil(x) if math.isfinite(x) else x,
    "v_rndne_f32": lambda x: round(x) if math.isfinite(x) else x,
    "v_sqrt_f32": lambda x: math.sqrt(x) if x >= 0 else (x if math.isnan(x) else math.nan),
    "v_rcp_f32": lambda x: math.copysign(math.inf, x) if x == 0 else 1 / x,
}


@pytest.mark.parametrize("name", sorted(UNARY_F32))
def test_unary_f32(name: str) -> None:
    st_ = run_vop(f"{name}_e32 v1, v0", {0: A_F})
    for lane in range(N):
        x = f32(A_F[lane])
        want = UNARY_F32[name](x)
        got = f32(int(st_.v[1, lane]))
        if math.isnan(want):
            assert math.isnan(got), (name, lane)
        else:
            # Keep the sign of zero results (trunc(-0.5) is -0).
            assert got == ctypes.c_float(want).value, (name, lane, x, got)
            assert got != 0 or math.copysign(1, got) == math.copysign(1, x), f"{name} keeps the sign of a zero result"


def test_transcendental_f32_within_one_ulp() -> None:
    xs = [bits32(v) for v in (0.0, 1.0, -1.0, 0.5, 3.7, -9.25, 100.0, 1e-3, 20.0, -126.5)] * 4
    st_ = run_vop("v_exp_f32_e32 v1, v0\nv_log_f32_e32 v2, v0\nv_sin_f32_e32 v3, v0\nv_cos_f32_e32 v4, v0", {0: xs[:N]})
    for lane in range(N):
        x = f32(xs[lane])
        assert f32(int(st_.v[1, lane])) == pytest.approx(2.0**x, rel=2**-22, abs=1e-38)
        if x > 0:
            assert f32(int(st_.v[2, lane])) == pytest.approx(math.log2(x), rel=2**-22, abs=2**-22)
        elif x < 0:
            assert math.isnan(f32(int(st_.v[2, lane])))
        assert f32(int(st_.v[3, lane])) == pytest.approx(math.sin(2 * math.pi * x), abs=1e-5)
        assert f32(int(st_.v[4, lane])) == pytest.approx(math.cos(2 * math.pi * x), abs=1e-5)


def _cvt_i32(x: float) -> int:
    if math.isnan(x):
        return 0
    if x >= 2**31:
        return 0x7FFFFFFF
    if x <= -(2**31):
        return 0x80000000
    return int(x) & M32


def _cvt_u32(x: float) -> int:
    if math.isnan(x) or x <= 0:
        return 0
    return M32 if x >= 2**32 else int(x)


def test_float_to_int_conversions_saturate() -> None:
    st_ = run_vop("v_cvt_i32_f32_e32 v1, v0\nv_cvt_u32_f32_e32 v2, v0\nv_cvt_floor_i32_f32_e32 v3, v0", {0: A_F})
    for lane in range(N):
        x = f32(A_F[lane])
        assert int(st_.v[1, lane]) == _cvt_i32(x), (lane, x)
        assert int(st_.v[2, lane]) == _cvt_u32(x), (lane, x)
        assert int(st_.v[3, lane]) == _cvt_i32(math.floor(x) if math.isfinite(x) else x), (lane, x)


def test_int_to_float_conversions_round_to_nearest() -> None:
    st_ = run_vop("v_cvt_f32_i32_e32 v1, v0\nv_cvt_f32_u32_e32 v2, v0", {0: INT_EDGES})
    for lane in range(N):
        assert int(st_.v[1, lane]) == bits32(float(s32(INT_EDGES[lane])))
        assert int(st_.v[2, lane]) == bits32(float(INT_EDGES[lane]))


def _f16_bits(x: float) -> int:
    return int(np.array(x, np.float32).astype(np.float16).view(np.uint16))


def test_f16_conversions_and_rtz_pack() -> None:
    st_ = run_vop("v_cvt_f16_f32_e32 v1, v0\nv_cvt_pk_rtz_f16_f32_e32 v2, v0, v3\nv_cvt_f32_f16_e32 v4, v1", {0: A_F, 3: B_F})
    for lane in range(N):
        x = f32(A_F[lane])
        half = int(st_.v[1, lane]) & 0xFFFF
        if math.isnan(x):
            assert half & 0x7C00 == 0x7C00 and half & 0x3FF
        elif abs(x) >= 65520:
            assert half & 0x7FFF == 0x7C00, "round to nearest overflows to infinity"
        else:
            assert half == struct.unpack("<H", struct.pack("<e", x))[0]
        # Round toward zero: the f16 value never has a larger magnitude than the input and is the nearest such value.
        for value, half_bits in ((x, int(st_.v[2, lane]) & 0xFFFF), (f32(B_F[lane]), int(st_.v[2, lane]) >> 16)):
            h = struct.unpack("<e", struct.pack("<H", half_bits))[0]
            if math.isnan(value) or math.isinf(value):
                assert (math.isnan(h) and math.isnan(value)) or h == value
                continue
            assert abs(h) <= abs(value) and (h == 0 or math.copysign(1, h) == math.copysign(1, value))
            up = struct.unpack("<e", struct.pack("<H", half_bits + 1))[0] if (half_bits & 0x7FFF) < 0x7BFF else math.inf
            assert abs(up) > abs(value)
        if not math.isnan(x):
            assert f32(int(st_.v[4, lane])) == struct.unpack("<e", struct.pack("<H", half))[0]


def test_cmp_class() -> None:
    classes = [0x001, 0x002, 0x004, 0x008, 0x010, 0x020, 0x040, 0x080, 0x100, 0x200]
    values = [0x7FA00000, 0x7FC00000, 0xFF800000, 0xBF800000, 0x807FFFFF, 0x80000000, 0x00000000, 0x00000001, 0x3F800000, 0x7F800000]
    for bit, mask in enumerate(classes):
        st_ = run_vop("v_cmp_class_f32_e32 vcc_lo, v0, v1", {0: (values * 4)[:N], 1: [mask] * N})
        want = sum(1 << lane for lane in range(N) if lane % 10 == bit)
        assert st_.vcc == want, f"class bit {bit}: {st_.vcc:#x} != {want:#x}"


def _shift_refs() -> dict:
    return {
        "v_lshlrev_b32": lambda s, x: (x << (s & 31)) & M32, "v_lshrrev_b32": lambda s, x: x >> (s & 31),
        "v_ashrrev_i32": lambda s, x: (s32(x) >> (s & 31)) & M32,
    }


INT_BINARY = {
    "v_add_nc_u32": lambda a, b: (a + b) & M32, "v_sub_nc_u32": lambda a, b: (a - b) & M32, "v_subrev_nc_u32": lambda a, b: (b - a) & M32,
    "v_and_b32": lambda a, b: a & b, "v_or_b32": lambda a, b: a | b, "v_xor_b32": lambda a, b: a ^ b,
    "v_xnor_b32": lambda a, b: ~(a ^ b) & M32,
    "v_min_i32": lambda a, b: a if s32(a) < s32(b) else b, "v_max_i32": lambda a, b: a if s32(a) > s32(b) else b,
    "v_min_u32": min, "v_max_u32": max,
    "v_mul_u32_u24": lambda a, b: ((a & 0xFFFFFF) * (b & 0xFFFFFF)) & M32,
    "v_mul_hi_u32_u24": lambda a, b: ((a & 0xFFFFFF) * (b & 0xFFFFFF)) >> 32,
    "v_mul_i32_i24": lambda a, b: (_s24(a) * _s24(b)) & M32,
    "v_mul_hi_i32_i24": lambda a, b: ((_s24(a) * _s24(b)) >> 32) & M32,
    **_shift_refs(),
}
VOP3_INT_BINARY = {
    "v_mul_lo_u32": lambda a, b: (a * b) & M32, "v_mul_hi_u32": lambda a, b: (a * b) >> 32,
    "v_mul_hi_i32": lambda a, b: ((s32(a) * s32(b)) >> 32) & M32,
    "v_bfm_b32": lambda a, b: (((1 << (a & 31)) - 1) << (b & 31)) & M32,
    "v_bcnt_u32_b32": lambda a, b: (bin(a).count("1") + b) & M32,
    "v_add_nc_i32": lambda a, b: (a + b) & M32, "v_sub_nc_i32": lambda a, b: (a - b) & M32,
}


def _s24(x: int) -> int:
    x &= 0xFFFFFF
    return x - (1 << 24) if x >> 23 else x


A_I = INT_EDGES
B_I = INT_EDGES[5:] + INT_EDGES[:5]
C_I = INT_EDGES[11:] + INT_EDGES[:11]


@pytest.mark.parametrize("name", sorted(INT_BINARY))
def test_int_binary_vop2(name: str) -> None:
    st_ = run_vop(f"{name}_e32 v2, v0, v1", {0: A_I, 1: B_I})
    got = [int(x) for x in st_.v[2]]
    assert got == [INT_BINARY[name](a, b) for a, b in zip(A_I, B_I, strict=True)]


@pytest.mark.parametrize("name", sorted(VOP3_INT_BINARY))
def test_int_binary_vop3(name: str) -> None:
    st_ = run_vop(f"{name} v2, v0, v1", {0: A_I, 1: B_I})
    assert [int(x) for x in st_.v[2]] == [VOP3_INT_BINARY[name](a, b) for a, b in zip(A_I, B_I, strict=True)]


def _bfe_u(x: int, off: int, width: int) -> int:
    off, width = off & 31, width & 31
    return (x >> off) & ((1 << width) - 1)


def _bfe_i(x: int, off: int, width: int) -> int:
    width &= 31
    value = _bfe_u(x, off, width)
    if width and value >> (width - 1):
        value -= 1 << width
    return value & M32


VOP3_INT_TERNARY = {
    "v_bfe_u32": _bfe_u, "v_bfe_i32": _bfe_i, "v_bfi_b32": lambda a, b, c: (a & b) | (~a & c & M32),
    "v_alignbit_b32": lambda a, b, c: (((a << 32) | b) >> (c & 31)) & M32,
    "v_alignbyte_b32": lambda a, b, c: (((a << 32) | b) >> (8 * (c & 3))) & M32,
    "v_add3_u32": lambda a, b, c: (a + b + c) & M32, "v_lshl_add_u32": lambda a, b, c: (((a << (b & 31)) & M32) + c) & M32,
    "v_add_lshl_u32": lambda a, b, c: (((a + b) & M32) << (c & 31)) & M32, "v_lshl_or_b32": lambda a, b, c: ((a << (b & 31)) & M32) | c,
    "v_and_or_b32": lambda a, b, c: (a & b) | c, "v_or3_b32": lambda a, b, c: a | b | c, "v_xor3_b32": lambda a, b, c: a ^ b ^ c,
    "v_xad_u32": lambda a, b, c: ((a ^ b) + c) & M32,
    "v_min3_u32": lambda a, b, c: min(a, b, c), "v_max3_u32": lambda a, b, c: max(a, b, c),
    "v_med3_u32": lambda a, b, c: sorted((a, b, c))[1],
    "v_med3_i32": lambda a, b, c: sorted((a, b, c), key=s32)[1], "v_min3_i32": lambda a, b, c: min((a, b, c), key=s32),
    "v_max3_i32": lambda a, b, c: max((a, b, c), key=s32),
    "v_mad_u32_u24": lambda a, b, c: ((a & 0xFFFFFF) * (b & 0xFFFFFF) + c) & M32,
    "v_mad_i32_i24": lambda a, b, c: (_s24(a) * _s24(b) + s32(c)) & M32,
    "v_perm_b32": lambda a, b, c: _perm_ref(a, b, c),
}


def _perm_ref(a: int, b: int, sel: int) -> int:
    data = (b | (a << 32)).to_bytes(8, "little")
    out = 0
    for i in range(4):
        s = (sel >> (8 * i)) & 0xFF
        if s < 8:
            byte = data[s]
        elif s < 12:
            byte = 0xFF if data[2 * (s - 8) + 1] & 0x80 else 0
        elif s == 12:
            byte = 0
        else:
            byte = 0xFF
        out |= byte << (8 * i)
    return out


@pytest.mark.parametrize("name", sorted(VOP3_INT_TERNARY))
def test_int_ternary_vop3(name: str) -> None:
    st_ = run_vop(f"{name} v3, v0, v1, v2", {0: A_I, 1: B_I, 2: C_I})
    assert [int(x) for x in st_.v[3]] == [VOP3_INT_TERNARY[name](a, b, c) for a, b, c in zip(A_I, B_I, C_I, strict=True)]


UNARY_INT = {
    "v_not_b32": lambda x: ~x & M32, "v_bfrev_b32": lambda x: int(f"{x:032b}"[::-1], 2),
    "v_clz_i32_u32": lambda x: (32 - x.bit_length()) if x else M32,
    "v_ctz_i32_b32": lambda x: ((x & -x).bit_length() - 1) if x else M32,
    "v_cls_i32": lambda x: ((32 - (x if not x >> 31 else ~x & M32).bit_length()) if x not in (0, M32) else M32),
    "v_cvt_f32_ubyte1": lambda x: bits32(float((x >> 8) & 0xFF)),
}


@pytest.mark.parametrize("name", sorted(UNARY_INT))
def test_unary_int(name: str) -> None:
    st_ = run_vop(f"{name}_e32 v1, v0", {0: A_I})
    assert [int(x) for x in st_.v[1]] == [UNARY_INT[name](a) for a in A_I]


def test_64bit_shifts_use_six_bits_of_the_amount() -> None:
    values = [(a << 32) | b for a, b in zip(A_I, B_I, strict=True)]
    st_ = run_vop("v_lshlrev_b64 v[4:5], v6, v[0:1]\nv_lshrrev_b64 v[8:9], v6, v[0:1]\nv_ashrrev_i64 v[10:11], v6, v[0:1]",
                  {0: B_I, 1: A_I, 6: C_I})
    for lane in range(N):
        x, sh = values[lane], C_I[lane] & 63

        def got(reg: int, lane: int = lane) -> int:
            return int(st_.v[reg, lane]) | (int(st_.v[reg + 1, lane]) << 32)
        assert got(4) == (x << sh) & (2**64 - 1)
        assert got(8) == x >> sh
        signed = x - (1 << 64) if x >> 63 else x
        assert got(10) == (signed >> sh) & (2**64 - 1)


def test_carry_chain_add_sub_and_mad64() -> None:
    st_ = run_vop("v_add_co_u32 v2, vcc_lo, v0, v1\nv_add_co_ci_u32_e32 v3, vcc_lo, v0, v1, vcc_lo\n"
                  "v_sub_co_u32 v4, s10, v0, v1\nv_mad_u64_u32 v[6:7], s12, v0, v1, v[8:9]",
                  {0: A_I, 1: B_I, 8: C_I, 9: A_I})
    carry1 = [(a + b) >> 32 for a, b in zip(A_I, B_I, strict=True)]
    assert [int(x) for x in st_.v[2]] == [(a + b) & M32 for a, b in zip(A_I, B_I, strict=True)]
    assert [int(x) for x in st_.v[3]] == [(a + b + c) & M32 for a, b, c in zip(A_I, B_I, carry1, strict=True)]
    assert st_.vcc == sum(((a + b + c) >> 32) << i for i, (a, b, c) in enumerate(zip(A_I, B_I, carry1, strict=True)))
    assert st_.s[10] == sum(int(b > a) << i for i, (a, b) in enumerate(zip(A_I, B_I, strict=True)))
    for lane in range(N):
        full = A_I[lane] * B_I[lane] + (C_I[lane] | (A_I[lane] << 32))
        assert int(st_.v[6, lane]) | (int(st_.v[7, lane]) << 32) == full & (2**64 - 1)
        assert (st_.s[12] >> lane) & 1 == full >> 64


def test_vopc_float_compares_with_nan_and_exec_mask() -> None:
    conds = {"lt": lambda a, b: a < b, "eq": lambda a, b: a == b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
             "lg": lambda a, b: a < b or a > b, "ge": lambda a, b: a >= b, "o": lambda a, b: not (math.isnan(a) or math.isnan(b)),
             "u": lambda a, b: math.isnan(a) or math.isnan(b), "neq": lambda a, b: not a == b, "nlt": lambda a, b: not a < b}
    for cond, ref in conds.items():
        st_ = run_vop(f"s_mov_b32 exec_lo, 0x7fffffff\nv_cmp_{cond}_f32_e32 vcc_lo, v0, v1\nv_cmp_{cond}_f32_e64 s20, v1, v0", {0: A_F, 1: B_F})
        want = sum(1 << i for i in range(31) if ref(f32(A_F[i]), f32(B_F[i])))
        assert st_.vcc == want, cond
        assert st_.s[20] == sum(1 << i for i in range(31) if ref(f32(B_F[i]), f32(A_F[i]))), cond


def test_vopc_int_compares_and_cmpx() -> None:
    st_ = run_vop("v_cmp_lt_i32_e32 vcc_lo, v0, v1\nv_cmp_gt_u32_e64 s4, v0, v1\nv_cmpx_ne_u32_e32 v0, v1", {0: A_I, 1: B_I})
    assert st_.vcc == sum(int(s32(a) < s32(b)) << i for i, (a, b) in enumerate(zip(A_I, B_I, strict=True)))
    assert st_.s[4] == sum(int(a > b) << i for i, (a, b) in enumerate(zip(A_I, B_I, strict=True)))
    assert st_.exec == sum(int(a != b) << i for i, (a, b) in enumerate(zip(A_I, B_I, strict=True)))


def test_exec_mask_keeps_inactive_lanes() -> None:
    st_ = run_vop("s_mov_b32 exec_lo, 0x0000ffff\nv_add_nc_u32_e32 v2, v0, v1\nv_mul_f32_e32 v3, 2.0, v0", {0: A_I, 1: B_I, 2: [7] * N, 3: [9] * N})
    assert [int(x) for x in st_.v[2, 16:]] == [7] * 16
    assert [int(x) for x in st_.v[3, 16:]] == [9] * 16
    assert [int(x) for x in st_.v[2, :16]] == [(a + b) & M32 for a, b in zip(A_I[:16], B_I[:16], strict=True)]


def test_cndmask_vop2_and_vop3() -> None:
    st_ = run_vop("v_cndmask_b32_e32 v2, v0, v1, vcc_lo\nv_cndmask_b32_e64 v3, v0, v1, s8", {0: A_I, 1: B_I},
                  sgprs={106: 0xF0F0F0F0, 8: 0x0000FFFF})
    assert [int(x) for x in st_.v[2]] == [B_I[i] if (0xF0F0F0F0 >> i) & 1 else A_I[i] for i in range(N)]
    assert [int(x) for x in st_.v[3]] == [B_I[i] if i < 16 else A_I[i] for i in range(N)]


def test_cndmask_with_a_modifier_on_one_source_keeps_the_other_bit_exact() -> None:
    # clang's fabs: v_cndmask_b32_e64 v1, v1, -v1, vcc (the unmodified source must not be converted to a float value)
    st_ = run_vop("v_cndmask_b32_e64 v2, v0, -v1, s8\nv_cndmask_b32_e64 v3, 1.0, |v1|, s8", {0: A_I, 1: B_I},
                  sgprs={8: 0x0F0F0F0F})
    for i in range(N):
        sel = (0x0F0F0F0F >> i) & 1
        assert int(st_.v[2, i]) == (B_I[i] ^ 0x80000000 if sel else A_I[i])
        assert int(st_.v[3, i]) == (B_I[i] & 0x7FFFFFFF if sel else 0x3F800000)


def test_vop3_source_modifiers_clamp_and_omod() -> None:
    st_ = run_vop("v_add_f32_e64 v2, -v0, |v1|\nv_mul_f32_e64 v3, v0, v1 clamp\nv_add_f32_e64 v4, v0, v1 mul:2\n"
                  "v_add_nc_u32_e64 v5, v6, v7 clamp", {0: A_F, 1: B_F, 6: A_I, 7: B_I})
    for lane in range(N):
        a, b = f32(A_F[lane]), f32(B_F[lane])
        check_f32(int(st_.v[2, lane]), bits32(-a + abs(b)), f"neg/abs lane {lane}")
        prod = ctypes.c_float(a * b).value
        check_f32(int(st_.v[3, lane]), bits32(0.0 if math.isnan(prod) else min(max(prod, 0.0), 1.0)), f"clamp lane {lane}")
        check_f32(int(st_.v[4, lane]), bits32(ctypes.c_float(a + b).value * 2), f"omod lane {lane}")
        assert int(st_.v[5, lane]) == min(A_I[lane] + B_I[lane], M32)


def test_f16_ops_and_opsel() -> None:
    halves = [0x3C00, 0xC000, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x8000, 0x7BFF, 0x3555, 0x4248] * 4
    lo = [(h | (halves[(i + 3) % len(halves)] << 16)) for i, h in enumerate(halves[:N])]
    st_ = run_vop("v_add_f16_e64 v2, v0, v1 op_sel:[1,0,0]\nv_mul_f16_e32 v3, v0, v1\nv_fma_f16 v4, v0, v1, v0 op_sel:[0,0,0,1]",
                  {0: lo, 1: lo[5:] + lo[:5], 3: [0xAAAA0000] * N, 4: [0x5555] * N})

    def h(bits: int) -> float:
        return float(np.array(bits & 0xFFFF, np.uint16).view(np.float16))

    for lane in range(N):
        a, b = lo[lane], (lo[5:] + lo[:5])[lane]
        want_add = np.float16(h(a >> 16) + h(b))
        got = h(int(st_.v[2, lane]))
        assert (np.isnan(got) and np.isnan(want_add)) or got == want_add
        want_mul = np.float16(h(a) * h(b))
        got3 = int(st_.v[3, lane])
        assert got3 >> 16 == 0xAAAA, "a 16-bit write keeps the other half"
        assert (np.isnan(h(got3)) and np.isnan(want_mul)) or h(got3) == want_mul
        with np.errstate(over="ignore", invalid="ignore"):
            want_fma = np.float16(float(Fraction(h(a)) * Fraction(h(b)) + Fraction(h(a)))) if all(
                math.isfinite(h(x)) for x in (a, b)) else np.float16(h(a) * h(b) + h(a))
        got4 = int(st_.v[4, lane])
        assert got4 & 0xFFFF == 0x5555
        assert (np.isnan(h(got4 >> 16)) and np.isnan(want_fma)) or h(got4 >> 16) == want_fma


def test_f64_arithmetic_and_conversions() -> None:
    values = [0.0, -0.0, 1.5, -2.25, 1e300, -1e-300, math.inf, -math.inf, math.nan, 5e-324, 3.0, 2.0**53 + 1] * 3
    bits = [struct.unpack("<Q", struct.pack("<d", x))[0] for x in values[:N]]
    other = bits[3:] + bits[:3]
    st_ = run_vop("v_add_f64 v[4:5], v[0:1], v[2:3]\nv_mul_f64 v[6:7], v[0:1], v[2:3]\nv_cvt_i32_f64_e32 v8, v[0:1]\n"
                  "v_cvt_f32_f64_e32 v9, v[0:1]",
                  {0: [b & M32 for b in bits], 1: [b >> 32 for b in bits], 2: [b & M32 for b in other], 3: [b >> 32 for b in other]})
    for lane in range(N):
        x = struct.unpack("<d", struct.pack("<Q", bits[lane]))[0]
        y = struct.unpack("<d", struct.pack("<Q", other[lane]))[0]
        for reg, want in ((4, x + y), (6, x * y)):
            got = struct.unpack("<d", struct.pack("<Q", int(st_.v[reg, lane]) | (int(st_.v[reg + 1, lane]) << 32)))[0]
            assert (math.isnan(got) and math.isnan(want)) or got == want, (lane, reg)
        assert int(st_.v[8, lane]) == _cvt_i32(x)
        check_f32(int(st_.v[9, lane]), bits32(x), f"cvt_f32_f64 lane {lane}")


def test_lane_ops_readlane_writelane_mbcnt() -> None:
    st_ = run_vop("v_readlane_b32 s5, v0, 7\nv_readfirstlane_b32 s6, v0\nv_writelane_b32 v1, s7, 3\n"
                  "v_mbcnt_lo_u32_b32 v2, -1, 0\nv_mbcnt_lo_u32_b32 v3, s8, 10", {0: A_I}, sgprs={7: 0x1234, 8: 0b1011})
    assert st_.s[5] == A_I[7] and st_.s[6] == A_I[0]
    assert [int(x) for x in st_.v[1]] == [0x1234 if lane == 3 else 0 for lane in range(N)]
    assert [int(x) for x in st_.v[2]] == list(range(N))
    assert [int(x) for x in st_.v[3]] == [10 + bin(0b1011 & ((1 << lane) - 1)).count("1") for lane in range(N)]


def test_vopd_reads_sources_before_writing() -> None:
    # X writes v0 while Y reads v0: Y must see the old value.
    st_ = run_vop("v_dual_mov_b32 v0, v2 :: v_dual_add_nc_u32 v1, v0, v3", {0: A_I, 2: B_I, 3: C_I})
    assert [int(x) for x in st_.v[0]] == B_I
    assert [int(x) for x in st_.v[1]] == [(a + c) & M32 for a, c in zip(A_I, C_I, strict=True)]


def test_inline_constants_and_literals_by_operand_type() -> None:
    st_ = run_vop("v_add_f32_e32 v1, 0.5, v0\nv_add_nc_u32_e32 v2, -16, v3\nv_mul_f32_e32 v4, 0x40490fdb, v0\nv_add_f32_e32 v5, 2, v0\n"
                  "v_add_f64 v[6:7], 1.0, v[8:9]", {0: [bits32(1.0)] * N, 3: [100] * N, 8: [0] * N, 9: [0x3FF00000] * N})
    assert f32(int(st_.v[1, 0])) == 1.5
    assert int(st_.v[2, 0]) == 84
    assert int(st_.v[4, 0]) == 0x40490FDB
    assert f32(int(st_.v[5, 0])) == 3.0, "an integer inline constant is converted for a float operand"
    assert int(st_.v[7, 0]) == 0x40000000 and int(st_.v[6, 0]) == 0


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.lists(st.integers(0, M32), min_size=N, max_size=N), st.lists(st.integers(0, M32), min_size=N, max_size=N))
def test_property_f32_add_mul_match_reference(a: list[int], b: list[int]) -> None:
    st_ = run_vop("v_add_f32_e32 v2, v0, v1\nv_mul_f32_e32 v3, v0, v1", {0: a, 1: b})
    for lane in range(N):
        check_f32(int(st_.v[2, lane]), bits32(f32(a[lane]) + f32(b[lane])), "add")
        check_f32(int(st_.v[3, lane]), bits32(f32(a[lane]) * f32(b[lane])), "mul")


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.lists(st.integers(0, M32), min_size=N, max_size=N), st.lists(st.integers(0, M32), min_size=N, max_size=N))
def test_property_integer_ops_match_reference(a: list[int], b: list[int]) -> None:
    st_ = run_vop("v_mul_lo_u32 v2, v0, v1\nv_mul_hi_i32 v3, v0, v1\nv_ashrrev_i32_e32 v4, v1, v0\nv_bfe_i32 v5, v0, v1, v1",
                  {0: a, 1: b})
    for lane in range(N):
        x, y = a[lane], b[lane]
        assert int(st_.v[2, lane]) == (x * y) & M32
        assert int(st_.v[3, lane]) == ((s32(x) * s32(y)) >> 32) & M32
        assert int(st_.v[4, lane]) == (s32(x) >> (y & 31)) & M32
        assert int(st_.v[5, lane]) == _bfe_i(x, y, y)


def _median_or_min(a: float, b: float, c: float) -> float:
    if any(math.isnan(x) for x in (a, b, c)):
        return _min_ref(_min_ref(a, b), c)
    return sorted((a, b, c))[1]


def test_float_min3_max3_med3() -> None:
    st_ = run_vop("v_min3_f32 v3, v0, v1, v2\nv_max3_f32 v4, v0, v1, v2\nv_med3_f32 v5, v0, v1, v2", {0: A_F, 1: B_F, 2: C_F})
    for lane in range(N):
        a, b, c = f32(A_F[lane]), f32(B_F[lane]), f32(C_F[lane])
        for reg, want in ((3, _min_ref(_min_ref(a, b), c)), (4, _max_ref(_max_ref(a, b), c)), (5, _median_or_min(a, b, c))):
            got = f32(int(st_.v[reg, lane]))
            assert (math.isnan(got) and math.isnan(want)) or got == want, (reg, lane, a, b, c)


def test_fract_frexp_ldexp() -> None:
    exps = [0, 1, -1, 10, -10, 127, -126, 200, -200, 3] * 4
    st_ = run_vop("v_fract_f32_e32 v1, v0\nv_frexp_mant_f32_e32 v2, v0\nv_frexp_exp_i32_f32_e32 v3, v0\nv_ldexp_f32 v4, v0, v5",
                  {0: A_F, 5: [e & M32 for e in exps[:N]]})
    for lane in range(N):
        x = f32(A_F[lane])
        fract = int(st_.v[1, lane])
        if math.isfinite(x):
            floor = math.copysign(float(math.floor(x)), x) if math.floor(x) == 0 else float(math.floor(x))
            check_f32(fract, bits32(x + -floor), f"fract lane {lane}")  # S0 + -floor(S0): fract(-0.0) is +0.0
            mant, exp = math.frexp(x)
            check_f32(int(st_.v[2, lane]), bits32(mant), f"frexp_mant lane {lane}")
            assert s32(int(st_.v[3, lane])) == exp
        else:
            assert math.isnan(f32(fract))
            check_f32(int(st_.v[2, lane]), A_F[lane], "frexp_mant of inf/nan is the input")
        try:
            want = bits32(math.ldexp(x, exps[lane]))
        except OverflowError:
            want = bits32(math.copysign(math.inf, x))
        check_f32(int(st_.v[4, lane]), want, f"ldexp lane {lane}")


def _sat(x: float, lo: int, hi: int) -> int:
    return 0 if math.isnan(x) else int(max(lo, min(hi, math.trunc(x) if math.isfinite(x) else (hi if x > 0 else lo))))


def test_packed_saturating_conversions() -> None:
    st_ = run_vop("v_cvt_pk_i16_f32 v2, v0, v1\nv_cvt_pk_u16_f32 v3, v0, v1\nv_sat_pk_u8_i16_e32 v4, v5",
                  {0: A_F, 1: B_F, 5: A_I})
    for lane in range(N):
        a, b = f32(A_F[lane]), f32(B_F[lane])
        assert int(st_.v[2, lane]) == (_sat(a, -32768, 32767) & 0xFFFF) | ((_sat(b, -32768, 32767) & 0xFFFF) << 16)
        assert int(st_.v[3, lane]) == _sat(a, 0, 65535) | (_sat(b, 0, 65535) << 16)
        lo, hi = A_I[lane] & 0xFFFF, A_I[lane] >> 16
        sat8 = [min(255, max(0, h - 0x10000 if h >> 15 else h)) for h in (lo, hi)]
        assert int(st_.v[4, lane]) == sat8[0] | (sat8[1] << 8)


def test_dot2acc_and_pk_fmac_vop2() -> None:
    rng = np.random.default_rng(11)
    a, b = rng.normal(size=(N, 2)).astype(np.float16), rng.normal(size=(N, 2)).astype(np.float16)
    acc = rng.normal(size=N).astype(np.float32)
    pa, pb = a.view(np.uint32).ravel(), b.view(np.uint32).ravel()
    st_ = run_vop("v_dot2acc_f32_f16_e32 v2, v0, v1\nv_pk_fmac_f16_e32 v3, v0, v1", {0: pa, 1: pb, 2: acc.view(np.uint32), 3: pa})
    want = (a.astype(np.float64) * b).sum(axis=1) + acc
    np.testing.assert_allclose(st_.v[2].view(np.float32), want.astype(np.float32), rtol=1e-6)
    np.testing.assert_array_equal(st_.v[3].view(np.float16).reshape(N, 2), (a.astype(np.float64) * b + a).astype(np.float16))


def test_16bit_integer_ops_and_shift_amounts() -> None:
    st_ = run_vop("v_add_nc_u16 v2, v0, v1\nv_mul_lo_u16 v3, v0, v1\nv_lshlrev_b16 v4, v1, v0\nv_max_i16 v5, v0, v1\n"
                  "v_ashrrev_i16 v6, v1, v0", {0: A_I, 1: B_I, 2: [0xFFFF0000] * N})
    for lane in range(N):
        a, b = A_I[lane] & 0xFFFF, B_I[lane] & 0xFFFF
        assert int(st_.v[2, lane]) == 0xFFFF0000 | ((a + b) & 0xFFFF), "16-bit results keep the high half"
        assert int(st_.v[3, lane]) & 0xFFFF == (a * b) & 0xFFFF
        assert int(st_.v[4, lane]) & 0xFFFF == (a << (b & 15)) & 0xFFFF
        sa, sb = (a ^ 0x8000) - 0x8000, (b ^ 0x8000) - 0x8000
        assert int(st_.v[5, lane]) & 0xFFFF == max(sa, sb) & 0xFFFF
        assert int(st_.v[6, lane]) & 0xFFFF == (sa >> (b & 15)) & 0xFFFF


def test_byte_ops_sad_and_lerp() -> None:
    st_ = run_vop("v_sad_u8 v3, v0, v1, v2\nv_sad_u16 v4, v0, v1, v2\nv_lerp_u8 v5, v0, v1, v2\nv_msad_u8 v6, v0, v1, v2",
                  {0: A_I, 1: B_I, 2: C_I})
    for lane in range(N):
        a, b, c = A_I[lane], B_I[lane], C_I[lane]
        ab, bb = a.to_bytes(4, "little"), b.to_bytes(4, "little")
        assert int(st_.v[3, lane]) == (sum(abs(x - y) for x, y in zip(ab, bb, strict=True)) + c) & M32
        assert int(st_.v[4, lane]) == (abs((a & 0xFFFF) - (b & 0xFFFF)) + abs((a >> 16) - (b >> 16)) + c) & M32
        cb = c.to_bytes(4, "little")
        assert int(st_.v[5, lane]) == int.from_bytes(bytes((x + y + (z & 1)) >> 1 for x, y, z in zip(ab, bb, cb, strict=True)), "little")


def test_f64_fma_and_conversions() -> None:
    values = [1.0 + 2.0**-30, -3.5, 1e-310, 2.0**60, 0.1, -0.0, 7.25, 1e308] * 4
    other = values[3:] + values[:3]
    third = values[5:] + values[:5]

    def regs(xs):
        bits = [struct.unpack("<Q", struct.pack("<d", x))[0] for x in xs[:N]]
        return [b & M32 for b in bits], [b >> 32 for b in bits]

    (a0, a1), (b0, b1), (c0, c1) = regs(values), regs(other), regs(third)
    st_ = run_vop("v_fma_f64 v[6:7], v[0:1], v[2:3], v[4:5]\nv_cvt_f64_i32_e32 v[8:9], v10\nv_cvt_f64_f32_e32 v[12:13], v11",
                  {0: a0, 1: a1, 2: b0, 3: b1, 4: c0, 5: c1, 10: A_I, 11: A_F})
    for lane in range(N):
        got = struct.unpack("<d", struct.pack("<Q", int(st_.v[6, lane]) | int(st_.v[7, lane]) << 32))[0]
        exact = Fraction(values[lane]) * Fraction(other[lane]) + Fraction(third[lane])
        # f64 FMA is computed as a*b+c in f64: within one ulp of the exactly rounded result.
        assert got == pytest.approx(float(exact), rel=2**-51, abs=1e-320)
        assert struct.unpack("<d", struct.pack("<Q", int(st_.v[8, lane]) | int(st_.v[9, lane]) << 32))[0] == float(s32(A_I[lane]))
        cvt = struct.unpack("<d", struct.pack("<Q", int(st_.v[12, lane]) | int(st_.v[13, lane]) << 32))[0]
        x = f32(A_F[lane])
        assert (math.isnan(cvt) and math.isnan(x)) or cvt == x


def test_f16_dot_and_normalising_conversions() -> None:
    rng = np.random.default_rng(12)
    a, b = rng.normal(size=(N, 2)).astype(np.float16), rng.normal(size=(N, 2)).astype(np.float16)
    c = rng.normal(size=N).astype(np.float16)
    st_ = run_vop("v_dot2_f16_f16 v3, v0, v1, v2\nv_cvt_pk_norm_i16_f16 v4, v0, v1\nv_cvt_norm_u16_f16_e32 v5, v0\nv_sad_hi_u8 v6, v7, v8, v9",
                  {0: a.view(np.uint32).ravel(), 1: b.view(np.uint32).ravel(), 2: c.view(np.uint16).astype(np.uint32), 7: A_I, 8: B_I, 9: C_I})
    want = (a.astype(np.float64) * b).sum(axis=1) + c
    np.testing.assert_array_equal((st_.v[3] & 0xFFFF).astype(np.uint16).view(np.float16), want.astype(np.float16))
    for lane in range(N):
        lo, hi = float(a[lane, 0]), float(b[lane, 0])
        norm = [round(max(-1.0, min(1.0, x)) * 32767) & 0xFFFF for x in (lo, hi)]
        assert int(st_.v[4, lane]) == norm[0] | (norm[1] << 16)
        assert int(st_.v[5, lane]) & 0xFFFF == round(max(0.0, min(1.0, lo)) * 65535)
        sad = sum(abs(x - y) for x, y in zip(A_I[lane].to_bytes(4, "little"), B_I[lane].to_bytes(4, "little"), strict=True))
        assert int(st_.v[6, lane]) == ((sad << 16) + C_I[lane]) & M32
