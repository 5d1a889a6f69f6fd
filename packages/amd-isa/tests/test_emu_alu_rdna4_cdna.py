"""ALU operations of RDNA4 and gfx90a+/gfx950 against numpy and the formats' definitions: packed f32 math, IEEE
minimum/maximum, scalar transcendentals, variable lane permutes, 8-bit float conversions, 64-bit scalar adds and
multiplies, and RDNA4 sub-dword scalar loads."""

import numpy as np
import pytest
from amd_isa import assemble_insts
from amd_isa.emu import Memory, WaveState, run_program
from hypothesis import given, settings
from hypothesis import strategies as st

M64 = 2**64 - 1


def _run(asm: str, arch: str, setup=None, memory=None) -> WaveState:
    state = WaveState(64 if arch == "cdna" else 32, arch)
    if setup is not None:
        setup(state)
    return run_program(assemble_insts(asm, arch), state.n_lanes, arch, state=state, memory=memory)


def test_packed_f32_ops_select_dwords_and_negate() -> None:
    rng = np.random.default_rng(1)
    x, y, z = (rng.integers(-64, 64, (3, 2, 64)) / 4).astype(np.float32)

    def setup(state: WaveState) -> None:
        for reg, pair in ((0, x), (2, y), (4, z)):
            state.vf[reg], state.vf[reg + 1] = pair
    st_ = _run("""
        v_pk_add_f32 v[10:11], v[0:1], v[2:3]
        v_pk_mul_f32 v[12:13], v[0:1], v[2:3] op_sel:[1,0] op_sel_hi:[0,1]
        v_pk_fma_f32 v[14:15], v[0:1], v[2:3], v[4:5] neg_lo:[1,0,0] neg_hi:[0,0,1]
        v_pk_mov_b32 v[16:17], v[0:1], v[2:3] op_sel:[1,0]
    """, "cdna", setup)
    np.testing.assert_array_equal(st_.vf[10:12], x + y)
    np.testing.assert_array_equal(st_.vf[12], x[1] * y[0])
    np.testing.assert_array_equal(st_.vf[13], x[0] * y[1])
    np.testing.assert_array_equal(st_.vf[14], -x[0] * y[0] + z[0])
    np.testing.assert_array_equal(st_.vf[15], x[1] * y[1] - z[1])
    np.testing.assert_array_equal(st_.vf[16], x[1])
    np.testing.assert_array_equal(st_.vf[17], y[0])


def test_ieee_minimum_maximum_propagate_nan() -> None:
    a = np.array([1.0, np.nan, -0.0, 3.0] * 8, np.float32)
    b = np.array([2.0, 1.0, 0.0, np.nan] * 8, np.float32)
    c = np.array([0.5, 5.0, 1.0, 1.0] * 8, np.float32)

    def setup(state: WaveState) -> None:
        state.vf[1], state.vf[2], state.vf[3] = a, b, c
    st_ = _run("""
        v_maximum3_f32 v4, v1, v2, v3
        v_minimum3_f32 v5, v1, v2, v3
        v_maximumminimum_f32 v6, v1, v2, v3
        v_minimummaximum_f32 v7, v1, v2, v3
        v_max_num_f32 v8, v1, v2
    """, "rdna4", setup)
    np.testing.assert_array_equal(st_.vf[4], np.maximum(np.maximum(a, b), c))
    np.testing.assert_array_equal(st_.vf[5], np.minimum(np.minimum(a, b), c))
    np.testing.assert_array_equal(st_.vf[6], np.minimum(np.maximum(a, b), c))
    np.testing.assert_array_equal(st_.vf[7], np.maximum(np.minimum(a, b), c))
    np.testing.assert_array_equal(st_.vf[8], np.fmax(a, b))
    assert np.signbit(st_.vf[5, 2])  # minimum(-0, +0) is -0


def test_scalar_transcendentals_write_sgprs() -> None:
    def setup(state: WaveState) -> None:
        state.s[4] = int(np.float32(16.0).view(np.uint32))
        state.s[5] = int(np.float16(4.0).view(np.uint16))
    st_ = _run("""
        v_s_sqrt_f32 s10, s4
        v_s_rcp_f32 s11, s4
        v_s_log_f32 s12, s4
        v_s_exp_f16 s13, s5
    """, "rdna4", setup)
    assert np.uint32(st_.s[10]).view(np.float32) == 4.0
    assert np.uint32(st_.s[11]).view(np.float32) == 0.0625
    assert np.uint32(st_.s[12]).view(np.float32) == 4.0
    assert st_.s[13] == int(np.float16(16.0).view(np.uint16))


def test_permlane16_var_reads_the_selected_lane_of_the_row() -> None:
    rng = np.random.default_rng(3)
    data, select = rng.integers(0, 2**31, 32).astype(np.uint32), rng.integers(0, 2**31, 32).astype(np.uint32)

    def setup(state: WaveState) -> None:
        state.v[1], state.v[2] = data, select
    st_ = _run("v_permlane16_var_b32 v3, v1, v2\nv_permlanex16_var_b32 v4, v1, v2", "rdna4", setup)
    lanes = np.arange(32)
    np.testing.assert_array_equal(st_.v[3], data[(lanes & ~15) + (select & 15)])
    np.testing.assert_array_equal(st_.v[4], data[((lanes & ~15) ^ 16) + (select & 15)])


def _ocp_value(code: int, exp_bits: int) -> float:
    man_bits = 7 - exp_bits
    bias = 2 ** (exp_bits - 1) - 1
    exponent, mantissa = (code >> man_bits) & (2**exp_bits - 1), code & (2**man_bits - 1)
    sign = -1.0 if code & 0x80 else 1.0
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - man_bits)
    return sign * (1 + mantissa / 2**man_bits) * 2.0 ** (exponent - bias)


def _reference_to_fp8(x: float, exp_bits: int, saturate: bool) -> int:
    """Round to the nearest finite code (ties to the even code); beyond the top value's half ulp: NaN (E4M3), inf (E5M2)."""
    finite = [c for c in range(128) if not (exp_bits == 4 and c == 0x7F) and not (exp_bits == 5 and c >= 0x7C)]
    values = np.array([_ocp_value(c, exp_bits) for c in finite])
    sign = 0x80 if np.signbit(x) else 0
    mag = abs(x)
    if mag >= values[-1] + (values[-1] - values[-2]) / 2 and not saturate:
        return sign | (0x7F if exp_bits == 4 else 0x7C)
    distance = np.abs(values - mag)
    best = [c for c, d in zip(finite, distance, strict=True) if d == distance.min()]
    return sign | (best[0] if len(best) == 1 else next(c for c in best if c % 2 == 0))


@settings(max_examples=30, derandomize=True, deadline=None)
@given(st.lists(st.floats(-600, 600, width=32), min_size=2, max_size=2), st.booleans())
def test_fp8_conversions_round_to_nearest_even(values: list[float], saturate: bool) -> None:
    x = np.array(values * 16, np.float32)

    def setup(state: WaveState) -> None:
        state.vf[1], state.vf[2] = x, x[::-1]
        state.v[6] = 0xAAAA5555
    insts = assemble_insts("""
        v_cvt_pk_fp8_f32 v3, v1, v2
        v_cvt_pk_bf8_f32 v4, v1, v2
        v_cvt_pk_fp8_f32 v6, v1, v2 op_sel:[0,0,1]
        v_cvt_f32_fp8_e32 v7, v3
        v_cvt_pk_f32_bf8_e32 v[8:9], v4
    """, "rdna4")
    if saturate:  # the encoding's clamp bit saturates; LLVM (and so our assembler) refuses `clamp` on these ops
        for inst in insts[:3]:
            inst.fields["clmp"] = 1
    state = WaveState(32, "rdna4")
    setup(state)
    st_ = run_program(insts, state.n_lanes, "rdna4", state=state)
    for lane in (0, 1):
        lo, hi = float(x[lane]), float(x[::-1][lane])
        fp8 = _reference_to_fp8(lo, 4, saturate) | _reference_to_fp8(hi, 4, saturate) << 8
        bf8 = _reference_to_fp8(lo, 5, saturate) | _reference_to_fp8(hi, 5, saturate) << 8
        assert int(st_.v[3, lane]) == fp8
        assert int(st_.v[4, lane]) == bf8
        assert int(st_.v[6, lane]) == (fp8 << 16) | 0x5555
        back = _ocp_value(fp8 & 0xFF, 4) if fp8 & 0x7F != 0x7F else np.nan
        np.testing.assert_equal(st_.vf[7, lane], np.float32(back))
        b0, b1 = bf8 & 0xFF, bf8 >> 8
        for reg, code in ((8, b0), (9, b1)):
            expected = np.inf * (-1 if code & 0x80 else 1) if code & 0x7F == 0x7C else _ocp_value(code, 5)
            np.testing.assert_equal(st_.vf[reg, lane], np.float32(expected))


@settings(max_examples=25, derandomize=True, deadline=None)
@given(st.integers(0, M64), st.integers(0, M64))
def test_rdna4_64bit_scalar_add_sub_mul(a: int, b: int) -> None:
    def setup(state: WaveState) -> None:
        state.s[2], state.s[3], state.s[4], state.s[5] = a & 0xFFFFFFFF, a >> 32, b & 0xFFFFFFFF, b >> 32
        state.scc = 1
    st_ = _run("s_add_nc_u64 s[10:11], s[2:3], s[4:5]\ns_sub_nc_u64 s[12:13], s[2:3], s[4:5]\ns_mul_u64 s[14:15], s[2:3], s[4:5]",
               "rdna4", setup)
    pair = lambda r: st_.s[r] | st_.s[r + 1] << 32  # noqa: E731
    assert (pair(10), pair(12), pair(14)) == ((a + b) & M64, (a - b) & M64, (a * b) & M64)
    assert st_.scc == 1


@pytest.mark.parametrize("op,signed,size", [("s_load_u8", False, 1), ("s_load_i8", True, 1), ("s_load_u16", False, 2),
                                            ("s_load_i16", True, 2)])
def test_rdna4_subdword_scalar_loads(op: str, signed: bool, size: int) -> None:
    mem = Memory()
    data = np.array([0x81, 0xF2, 0x7F, 0x80, 0x11, 0x22, 0x33, 0x44], np.uint8)
    base = mem.map(data)

    def setup(state: WaveState) -> None:
        state.s[0], state.s[1] = base & 0xFFFFFFFF, base >> 32
    st_ = _run(f"{op} s4, s[0:1], 0x2\n{op} s5, s[0:1], 0x0", "rdna4", setup, mem)
    for reg, offset in ((4, 2), (5, 0)):
        value = int.from_bytes(data[offset:offset + size].tobytes(), "little")
        if signed and value >> (8 * size - 1):
            value -= 1 << (8 * size)
        assert st_.s[reg] == value & 0xFFFFFFFF


def test_gfx9_scalar_store_and_atomic() -> None:
    mem = Memory()
    data = np.zeros(8, np.uint32)
    base = mem.map(data)

    def setup(state: WaveState) -> None:
        state.s[0], state.s[1] = base & 0xFFFFFFFF, base >> 32
        state.s[4], state.s[5] = 7, 9
    st_ = _run("s_store_dwordx2 s[4:5], s[0:1], 0x8\ns_atomic_add s4, s[0:1], 0xc glc", "cdna", setup, mem)
    assert list(data[2:4]) == [7, 16] and st_.s[4] == 9


def test_swap_b16_and_find_first_zero() -> None:
    from amd_isa.rdna3 import v, v_swap_b16_e32

    state = WaveState(32)
    state.v[1], state.v[2] = 0x1111_2222, 0x3333_4444
    # v_swap_b16 exchanges the low half of v1 with the high half of v2 (field value 130 in the VOP1 encoding).
    st_ = run_program([v_swap_b16_e32(v[1], v[2].h)], state=state)
    assert (int(st_.v[1, 0]), int(st_.v[2, 0])) == (0x1111_3333, 0x2222_4444)

    def setup(state: WaveState) -> None:
        state.s[2], state.s[3], state.s[4], state.s[5] = 0b1011, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF
    # (a 64-bit source is an even-aligned pair: s[3:4] is refused, as LLVM refuses it)
    st_ = _run("s_ff0_i32_b32 s10, s2\ns_ff0_i32_b32 s11, s3\ns_ff0_i32_b64 s12, s[4:5]", "cdna", setup)
    assert (st_.s[10], st_.s[11], st_.s[12]) == (2, 0xFFFFFFFF, 0xFFFFFFFF)


def test_bpermute_fi_reads_inactive_lanes() -> None:
    data = np.arange(32, dtype=np.uint32) * 5 + 1

    def setup(state: WaveState) -> None:
        state.v[1] = data
        state.v[2] = ((np.arange(32) + 1) % 32) * 4  # lane l reads lane l+1
        state.set_exec(0x5555_5555)  # even lanes only
    st_ = _run("ds_bpermute_fi_b32 v3, v2, v1\nds_bpermute_b32 v4, v2, v1", "rdna4", setup)
    even = np.arange(0, 32, 2)
    np.testing.assert_array_equal(st_.v[3, even], data[(even + 1) % 32])  # the odd source lanes are inactive
    np.testing.assert_array_equal(st_.v[4, even], 0)


def _with(inst, **fields):
    from amd_isa.inst import Inst

    return Inst(inst.arch, inst.fmt, inst.op, dict(inst.fields, **fields), inst.literal, inst.variant)


def _gfx950_state() -> WaveState:
    rng = np.random.default_rng(9)
    state = WaveState(64, "cdna")
    state.v[1:5] = rng.integers(0, 2**32, (4, 64), dtype=np.uint64).astype(np.uint32)
    return state


@pytest.mark.parametrize("table", [0x96, 0xE8, 0x01, 0x80, 0x5A])
def test_bitop3_applies_its_truth_table(table: int) -> None:
    # The truth table lives in OMOD[1:0] / ABS[2:0] / NEG[2:0] (our assembler has no bitop3: modifier).
    inst = _with(assemble_insts("v_bitop3_b32 v5, v1, v2, v3", "cdna")[0], omod=table >> 6, abs=table >> 3 & 7, neg=table & 7)
    state = _gfx950_state()
    a, b, c = (state.v[r].astype(np.int64) for r in (1, 2, 3))
    st_ = run_program([inst], 64, "cdna", state=state)
    expected = np.zeros(64, np.int64)
    for bit in range(32):
        index = ((a >> bit) & 1) << 2 | ((b >> bit) & 1) << 1 | ((c >> bit) & 1)
        expected |= ((table >> index) & 1) << bit
    np.testing.assert_array_equal(st_.v[5], expected.astype(np.uint32))


def test_gfx950_lane_swaps_prng_and_saturating_pack() -> None:
    state = _gfx950_state()
    v1, v2, v3, v4 = (state.v[r].copy() for r in (1, 2, 3, 4))
    st_ = run_program(assemble_insts("""
        v_permlane16_swap_b32 v1, v2
        v_permlane32_swap_b32 v3, v4
        v_prng_b32 v5, v1
        v_ashr_pk_i8_i32 v6, v3, v4, 3
        v_ashr_pk_u8_i32 v7, v3, v4, 3
    """, "cdna"), 64, "cdna", state=state)
    rows = np.arange(64) // 16
    # AMD's pseudocode: the even 16-lane rows of src0 (v2) trade places with the odd rows of vdst (v1) above them.
    np.testing.assert_array_equal(st_.v[1], np.where(rows % 2 == 1, np.roll(v2, 16), v1))
    np.testing.assert_array_equal(st_.v[2], np.where(rows % 2 == 0, np.roll(v1, -16), v2))
    # And lanes 0-31 of src0 (v4) with lanes 32-63 of vdst (v3).
    np.testing.assert_array_equal(st_.v[3], np.concatenate([v3[:32], v4[:32]]))
    np.testing.assert_array_equal(st_.v[4], np.concatenate([v3[32:], v4[32:]]))
    new1 = st_.v[1].astype(np.int64)
    np.testing.assert_array_equal(st_.v[5], (((new1 << 1) ^ np.where(new1 >> 31, 197, 0)) & 0xFFFFFFFF).astype(np.uint32))
    s3, s4 = st_.v[3].view(np.int32).astype(np.int64) >> 3, st_.v[4].view(np.int32).astype(np.int64) >> 3
    signed = (np.clip(s3, -128, 127) & 0xFF) | (np.clip(s4, -128, 127) & 0xFF) << 8
    np.testing.assert_array_equal(st_.v[6] & 0xFFFF, signed)
    np.testing.assert_array_equal(st_.v[7] & 0xFFFF, np.clip(s3, 0, 255) | np.clip(s4, 0, 255) << 8)


@pytest.mark.parametrize("arch", ["rdna4", "cdna"])
def test_stochastic_rounding_to_fp8(arch: str) -> None:
    rng = np.random.default_rng(4)
    x = (rng.normal(0, 20, 64)).astype(np.float32)[: 64 if arch == "cdna" else 32]
    noise = rng.integers(0, 2**32, x.size, dtype=np.uint64).astype(np.uint32)
    state = WaveState(x.size, arch)
    state.vf[1], state.v[2], state.v[3] = x, noise, 0x11223344
    inst = _with(assemble_insts("v_cvt_sr_fp8_f32 v3, v1, v2", arch)[0], opsel=0b1000)  # OPSEL[3:2] = 2: byte 2
    st_ = run_program([inst], x.size, arch, state=state)
    for lane in range(x.size):
        bits = int(x.view(np.uint32)[lane])
        mantissa = ((bits & 0x7FFFFF) + (int(noise[lane]) >> 12)) & 0x7FFFFF
        value = float(np.uint32((bits & ~0x7FFFFF & 0xFFFFFFFF) | mantissa).view(np.float32))
        assert int(st_.v[3, lane]) == (0x11003344 | _reference_to_fp8(value, 4, False) << 16)


def test_rdna4_fp8_byte_select_is_bit_reversed() -> None:
    state = WaveState(32, "rdna4")
    codes = [0x38, 0x40, 0x44, 0x48]  # 1.0, 2.0, 3.0, 4.0 in E4M3
    state.v[1] = codes[0] | codes[1] << 8 | codes[2] << 16 | codes[3] << 24
    base = assemble_insts("v_cvt_f32_fp8_e64 v2, v1", "rdna4")[0]
    results = []
    for opsel in range(4):
        st_ = run_program([_with(base, opsel=opsel)], 32, "rdna4", state=state)
        results.append(float(st_.vf[2, 0]))
    # OPSEL 0, 1, 2, 3 read bytes 0, 2, 1, 3.
    assert results == [1.0, 3.0, 2.0, 4.0]


def _mx_value(code: int, exp_bits: int, man_bits: int) -> float:
    """An OCP MX element (no infinities or NaNs for the 6/4-bit formats) from its code."""
    bias = 2 ** (exp_bits - 1) - 1
    exponent, mantissa = (code >> man_bits) & (2**exp_bits - 1), code & (2**man_bits - 1)
    sign = -1.0 if code >> (exp_bits + man_bits) else 1.0
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - man_bits)
    return sign * (1 + mantissa / 2**man_bits) * 2.0 ** (exponent - bias)


def test_gfx950_scaled_conversions_multiply_by_the_e8m0_scale() -> None:
    rng = np.random.default_rng(12)
    state = WaveState(64, "cdna")
    state.v[1] = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32) & 0x3F3F3F3F  # E4M3 codes clear of NaN
    state.v[2:8] = rng.integers(0, 2**32, (6, 64), dtype=np.uint64).astype(np.uint32)
    scale = rng.integers(120, 134, 64)
    state.v[9] = (scale << 23).astype(np.uint32) | 0x12345  # only the exponent matters
    state.v[12] = 0xAAAA5555
    st_ = run_program(assemble_insts("""
        v_cvt_scalef32_pk_f32_fp8 v[10:11], v1, v9 op_sel:[1,0,0]
        v_cvt_scalef32_f16_fp8 v12, v1, v9 op_sel:[0,1,1]
        v_cvt_scalef32_pk_f32_fp4 v[14:15], v1, v9 op_sel:[1,1,0]
        v_cvt_scalef32_pk32_f32_fp6 v[20:51], v[2:7], v9
    """, "cdna"), 64, "cdna", state=state)
    factor = 2.0 ** (scale - 127)
    raw = state.v[1].astype(np.int64)
    byte = lambda k: (raw >> (8 * k)) & 0xFF  # noqa: E731
    fp8 = np.vectorize(lambda c: _mx_value(int(c), 4, 3))
    np.testing.assert_array_equal(st_.vf[10], (fp8(byte(2)) * factor).astype(np.float32))
    np.testing.assert_array_equal(st_.vf[11], (fp8(byte(3)) * factor).astype(np.float32))
    # OPSEL[1:0] = 2 -> byte 2; OPSEL[3] -> the high half, the low half kept.
    np.testing.assert_array_equal(st_.v[12] >> 16, (fp8(byte(2)) * factor).astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(st_.v[12] & 0xFFFF, 0x5555)
    fp4 = np.vectorize(lambda c: _mx_value(int(c), 2, 1))
    np.testing.assert_array_equal(st_.vf[14], (fp4(byte(3) & 0xF) * factor).astype(np.float32))
    np.testing.assert_array_equal(st_.vf[15], (fp4(byte(3) >> 4) * factor).astype(np.float32))
    stream = sum(state.v[2 + w].astype(object) << (32 * w) for w in range(6))
    fp6 = np.vectorize(lambda c: _mx_value(int(c), 2, 3))
    for k in range(32):
        codes = np.array([(int(x) >> (6 * k)) & 0x3F for x in stream])
        np.testing.assert_array_equal(st_.vf[20 + k], (fp6(codes) * factor).astype(np.float32))


def _nearest_code(x: float, exp_bits: int, man_bits: int) -> int:
    """Round to the nearest MX 6/4-bit code (ties to the even code), saturating: these formats have no inf or NaN."""
    half = 1 << (exp_bits + man_bits)
    values = np.array([_mx_value(c, exp_bits, man_bits) for c in range(half)])
    distance = np.abs(values - min(abs(x), values.max()))
    best = [c for c in range(half) if distance[c] == distance.min()]
    code = best[0] if len(best) == 1 else next(c for c in best if c % 2 == 0)
    return code | (half if np.signbit(x) else 0)


def test_gfx950_scaled_conversions_to_narrow_formats_divide_by_the_scale() -> None:
    rng = np.random.default_rng(21)
    state = WaveState(64, "cdna")
    state.vf[1], state.vf[2] = rng.normal(0, 40, (2, 64)).astype(np.float32)
    state.vf[10:26] = rng.normal(0, 10, (16, 64)).astype(np.float32)
    state.vf[30:46] = rng.normal(0, 10, (16, 64)).astype(np.float32)
    scale = rng.integers(124, 131, 64)
    state.v[4] = (scale << 23).astype(np.uint32)
    state.v[5], state.v[6] = 0xDEADBEEF, 0xDEADBEEF
    x1, x2 = state.vf[1].copy(), state.vf[2].copy()
    st_ = run_program(assemble_insts("""
        v_cvt_scalef32_pk_fp8_f32 v5, v1, v2, v4 op_sel:[0,0,0,1]
        v_cvt_scalef32_pk_fp4_f32 v6, v1, v2, v4 op_sel:[0,0,1,0]
        v_cvt_scalef32_2xpk16_fp6_f32 v[50:55], v[10:25], v[30:45], v4
    """, "cdna"), 64, "cdna", state=state)
    factor = 2.0 ** (scale - 127)
    for lane in range(64):
        a, b = float(x1[lane]) / factor[lane], float(x2[lane]) / factor[lane]
        fp8 = _reference_to_fp8(a, 4, False) | _reference_to_fp8(b, 4, False) << 8
        assert int(st_.v[5, lane]) == (fp8 << 16) | 0xBEEF
        fp4 = _nearest_code(a, 2, 1) | _nearest_code(b, 2, 1) << 4
        # op_sel:[0,0,1,0] sets OPSEL[2]: OPSEL[3:2] = 1 picks byte 1.
        assert int(st_.v[6, lane]) == (0xDEADBEEF & ~(0xFF << 8)) | fp4 << 8
    for lane in (0, 17, 63):
        stream = sum(int(st_.v[50 + w, lane]) << (32 * w) for w in range(6))
        for i in range(32):
            source = 10 + i // 2 if i % 2 == 0 else 30 + i // 2
            expected = _nearest_code(float(state.vf[source, lane]) / factor[lane], 2, 3)
            assert (stream >> (6 * i)) & 0x3F == expected, (lane, i)


def test_cube_map_coordinates_follow_the_pseudocode() -> None:
    rng = np.random.default_rng(30)
    xyz = rng.normal(0, 3, (3, 32)).astype(np.float32)
    xyz[:, :4] = [[1, -2, 0, 3], [1, 2, -3, -3], [1, 0, 3, 1]]  # ties between axes

    def setup(state: WaveState) -> None:
        state.vf[1:4] = xyz
    st_ = _run("v_cubeid_f32 v4, v1, v2, v3\nv_cubesc_f32 v5, v1, v2, v3\nv_cubetc_f32 v6, v1, v2, v3\nv_cubema_f32 v7, v1, v2, v3",
               "rdna3", setup)
    for lane in range(32):
        x, y, z = (float(c) for c in xyz[:, lane])
        if abs(z) >= abs(x) and abs(z) >= abs(y):
            expected = (5.0 if z < 0 else 4.0, -x if z < 0 else x, -y, 2 * z)
        elif abs(y) >= abs(x):
            expected = (3.0 if y < 0 else 2.0, x, -z if y < 0 else z, 2 * y)
        else:
            expected = (1.0 if x < 0 else 0.0, z if x < 0 else -z, -y, 2 * x)
        assert tuple(float(st_.vf[r, lane]) for r in (4, 5, 6, 7)) == pytest.approx(expected, abs=0), lane


# 2/pi in 24-bit groups, as fdlibm's __kernel_rem_pio2 tabulates it (ipio2).
TWO_OVER_PI_24 = (0xA2F983, 0x6E4E44, 0x1529FC, 0x2757D1, 0xF534DD, 0xC0DB62, 0x95993C, 0x439041, 0xFE5163)


def test_trig_preop_returns_53_bit_chunks_of_two_over_pi() -> None:
    reference = 0
    for group in TWO_OVER_PI_24:
        reference = reference << 24 | group
    bits = 24 * len(TWO_OVER_PI_24)

    def setup(state: WaveState) -> None:
        state.v[2], state.v[3] = 0, 0x3FF00000  # 1.0
        state.v[4], state.v[5] = 0, 0x43400000 + (20 << 20)  # 2^(53 + 20): the exponent exceeds 1077 by 20
    st_ = _run("""
        v_trig_preop_f64 v[10:11], v[2:3], 0
        v_trig_preop_f64 v[12:13], v[2:3], 1
        v_trig_preop_f64 v[14:15], v[2:3], 2
        v_trig_preop_f64 v[16:17], v[4:5], 1
    """, "rdna3", setup)
    value = lambda r: (st_.v[r + 1, 0].astype(np.uint64) << np.uint64(32) | st_.v[r, 0]).view(np.float64)  # noqa: E731
    for reg, shift in ((10, 0), (12, 53), (14, 106), (16, 53 + 20)):
        chunk = (reference >> (bits - 53 - shift)) & ((1 << 53) - 1)
        assert float(value(reg)) == float(np.ldexp(float(chunk), -53 - shift)), reg


def test_lds_append_consume_addtid_and_exchange() -> None:
    lane = np.arange(64, dtype=np.uint32)

    def setup(state: WaveState) -> None:
        state.s[124] = 64  # M0 (gfx9): the base of the addtid and append addresses
        state.v[1], state.v[22] = lane * 3, lane * 5
        state.v[2], state.v[20], state.v[21] = 1024 + 16 * lane, 1000 + lane, 2000 + lane
        state.v[9], state.v[23] = 4096 + 8 * lane + 3, 4096 + 8 * lane
        state.v[24], state.v[25] = 111, 222
        state.v[26], state.v[27] = 0x8000_0005, 0x0000_0007  # condxchg: only the low dword's data has its top bit set
        state.set_exec((1 << 40) - 1)
    st_ = _run("""
        ds_write_addtid_b32 v1 offset:16
        ds_read_addtid_b32 v5 offset:16
        ds_append v6 offset:4
        ds_append v7 offset:4
        ds_consume v8 offset:4
        ds_write2_b32 v2, v20, v21 offset0:1 offset1:2
        ds_wrxchg2_rtn_b32 v[10:11], v2, v1, v22 offset0:1 offset1:2
        ds_write_b64 v23, v[24:25]
        ds_condxchg32_rtn_b64 v[12:13], v9, v[26:27]
    """, "cdna", setup)
    active = lane[:40]
    # addtid: lane l at M0 + 16 + 4l.
    np.testing.assert_array_equal(st_.lds32[(64 + 16) // 4:(64 + 16) // 4 + 40], active * 3)
    np.testing.assert_array_equal(st_.v[5, :40], active * 3)
    # append / consume: the counter at M0 + 4 moves by the 40 active lanes; every lane gets the value before.
    assert (int(st_.v[6, 0]), int(st_.v[7, 39]), int(st_.v[8, 5])) == (0, 40, 80)
    assert int(st_.lds32[(64 + 4) // 4]) == 40
    # wrxchg2: both old dwords return, the new data lands at addr + 4*offset0 / 4*offset1.
    np.testing.assert_array_equal(st_.v[10, :40], 1000 + active)
    np.testing.assert_array_equal(st_.v[11, :40], 2000 + active)
    np.testing.assert_array_equal(st_.lds32[(1024 + 4) // 4::4][:40], active * 3)
    np.testing.assert_array_equal(st_.lds32[(1024 + 8) // 4::4][:40], active * 5)
    # condxchg32 at the 8-byte aligned address: the low dword becomes 5, the high one keeps 222; both return.
    np.testing.assert_array_equal(st_.v[12, :40], 111)
    np.testing.assert_array_equal(st_.v[13, :40], 222)
    np.testing.assert_array_equal(st_.lds32[4096 // 4::2][:40], 5)
    np.testing.assert_array_equal(st_.lds32[4096 // 4 + 1::2][:40], 222)


def test_global_addtid_and_swaprel() -> None:
    mem = Memory()
    data = np.arange(64, dtype=np.uint32) * 7
    base = mem.map(data)

    def setup(state: WaveState) -> None:
        state.s[2], state.s[3] = base & 0xFFFFFFFF, base >> 32
        state.v[40] = np.arange(32) + 100
        state.v[51] = np.arange(32) + 200
        state.s[125] = 10 | (11 << 16)  # M0: src + 10, dst + 11
    st_ = _run("global_load_addtid_b32 v1, s[2:3] offset:8\nv_swaprel_b32 v40, v30", "rdna3", setup, mem)
    np.testing.assert_array_equal(st_.v[1], data[2:34])
    np.testing.assert_array_equal(st_.v[40], np.arange(32) + 200)
    np.testing.assert_array_equal(st_.v[51], np.arange(32) + 100)
