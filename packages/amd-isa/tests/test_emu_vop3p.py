"""VOP3P in the emulator: packed 16-bit math with op_sel/op_sel_hi/neg, dot products, fma_mix, and every RDNA3 WMMA
form against numpy matrix products (including the seed's inline-zero accumulator case)."""

import numpy as np
import pytest
from amd_isa import assemble_insts
from amd_isa.emu import WaveState, run_program
from amd_isa.rdna3 import s, s_mov_b32, v, v_mov_b32_e32, v_wmma_f16_16x16x16_f16

N = 32
RNG = np.random.default_rng(7)


def run_asm(asm: str, vgprs: dict[int, np.ndarray]) -> WaveState:
    state = WaveState(N)
    for reg, values in vgprs.items():
        state.v[reg] = np.asarray(values).astype(np.uint32)
    return run_program(assemble_insts(asm, "rdna3"), N, state=state)


def halves(reg_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    raw = np.asarray(reg_values, np.uint32)
    return (raw & 0xFFFF).astype(np.uint16).view(np.float16), (raw >> 16).astype(np.uint16).view(np.float16)


def pack(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.astype(np.float16).view(np.uint16).astype(np.uint32) | (hi.astype(np.float16).view(np.uint16).astype(np.uint32) << 16)


def test_pk_fma_add_mul_with_op_sel_and_neg() -> None:
    a = pack(RNG.normal(size=N), RNG.normal(size=N))
    b = pack(RNG.normal(size=N), RNG.normal(size=N))
    c = pack(RNG.normal(size=N), RNG.normal(size=N))
    st = run_asm("v_pk_fma_f16 v3, v0, v1, v2\nv_pk_add_f16 v4, v0, v1 op_sel:[1,0] op_sel_hi:[0,1]\n"
                 "v_pk_mul_f16 v5, v0, v1 neg_lo:[1,0] neg_hi:[0,1]", {0: a, 1: b, 2: c})
    (al, ah), (bl, bh), (cl, ch) = halves(a), halves(b), halves(c)

    def fma16(x, y, z):
        return (x.astype(np.float64) * y.astype(np.float64) + z.astype(np.float64)).astype(np.float16)

    lo, hi = halves(st.v[3])
    np.testing.assert_array_equal(lo, fma16(al, bl, cl))
    np.testing.assert_array_equal(hi, fma16(ah, bh, ch))
    lo, hi = halves(st.v[4])
    np.testing.assert_array_equal(lo, (ah + bl).astype(np.float16))
    np.testing.assert_array_equal(hi, (al + bh).astype(np.float16))
    lo, hi = halves(st.v[5])
    np.testing.assert_array_equal(lo, (-al * bl).astype(np.float16))
    np.testing.assert_array_equal(hi, (ah * -bh).astype(np.float16))


def test_pk_integer_ops() -> None:
    a = RNG.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    b = RNG.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    st = run_asm("v_pk_add_u16 v2, v0, v1\nv_pk_max_i16 v3, v0, v1\nv_pk_lshlrev_b16 v4, v1, v0", {0: a, 1: b})
    a16, b16 = a.view(np.uint16).reshape(N, 2), b.view(np.uint16).reshape(N, 2)
    np.testing.assert_array_equal(st.v[2].view(np.uint16).reshape(N, 2), a16 + b16)
    np.testing.assert_array_equal(st.v[3].view(np.int16).reshape(N, 2), np.maximum(a16.view(np.int16), b16.view(np.int16)))
    np.testing.assert_array_equal(st.v[4].view(np.uint16).reshape(N, 2), a16 << (b16 & 15))


def test_dot_products() -> None:
    a = pack(RNG.normal(size=N), RNG.normal(size=N))
    b = pack(RNG.normal(size=N), RNG.normal(size=N))
    acc = RNG.normal(size=N).astype(np.float32)
    bytes_a = RNG.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    bytes_b = RNG.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    st = run_asm("v_dot2_f32_f16 v3, v0, v1, v2\nv_dot4_u32_u8 v6, v4, v5, 7\nv_dot4_i32_iu8 v7, v4, v5, 0 neg_lo:[1,1,0]",
                 {0: a, 1: b, 2: acc.view(np.uint32), 4: bytes_a, 5: bytes_b})
    (al, ah), (bl, bh) = halves(a), halves(b)
    want = (al.astype(np.float64) * bl + ah.astype(np.float64) * bh + acc).astype(np.float32)
    np.testing.assert_allclose(st.v[3].view(np.float32), want, rtol=1e-6)
    ua, ub = bytes_a.view(np.uint8).reshape(N, 4).astype(np.int64), bytes_b.view(np.uint8).reshape(N, 4).astype(np.int64)
    np.testing.assert_array_equal(st.v[6], ((ua * ub).sum(axis=1) + 7).astype(np.uint32))
    sa, sb = bytes_a.view(np.int8).reshape(N, 4).astype(np.int64), bytes_b.view(np.int8).reshape(N, 4).astype(np.int64)
    np.testing.assert_array_equal(st.v[7].view(np.int32), (sa * sb).sum(axis=1).astype(np.int32))


def test_fma_mix_reads_f16_or_f32_per_operand() -> None:
    a32 = RNG.normal(size=N).astype(np.float32)
    b = pack(RNG.normal(size=N), RNG.normal(size=N))
    c32 = RNG.normal(size=N).astype(np.float32)
    st = run_asm("v_fma_mix_f32 v3, v0, v1, v2 op_sel:[0,1,0] op_sel_hi:[0,1,0]", {0: a32.view(np.uint32), 1: b, 2: c32.view(np.uint32)})
    _, bh = halves(b)
    np.testing.assert_array_equal(st.v[3].view(np.float32), (a32.astype(np.float64) * bh + c32).astype(np.float32))


def _a_regs(a: np.ndarray, bits: int) -> np.ndarray:
    """(regs, 32 lanes) holding A (16x16, row per lane) the way RDNA3 WMMA reads it; lanes 16-31 repeat lanes 0-15."""
    raw = np.ascontiguousarray(a).view(np.uint32) if bits >= 8 else a
    rows = raw.reshape(16, -1)
    return np.concatenate([rows, rows]).T


def _c_regs(c: np.ndarray) -> np.ndarray:
    """(8, 32) register block of a 16x16 f32/i32 C/D matrix: element (m, n) in register m//2, lane n + 16*(m%2)."""
    return np.ascontiguousarray(c).view(np.uint32).reshape(8, 2, 16).reshape(8, 32)


@pytest.mark.parametrize("in_type", ["f16", "bf16"])
def test_wmma_float_forms(in_type: str) -> None:
    a = RNG.normal(size=(16, 16)).astype(np.float32)
    b = RNG.normal(size=(16, 16)).astype(np.float32)
    c = RNG.normal(size=(16, 16)).astype(np.float32)
    if in_type == "f16":
        a_bits, b_bits = a.astype(np.float16), b.T.astype(np.float16)
        a_val, b_val = a_bits.astype(np.float64), b_bits.T.astype(np.float64)
    else:
        a_bits = (a.view(np.uint32) >> 16).astype(np.uint16)
        b_bits = (np.ascontiguousarray(b.T).view(np.uint32) >> 16).astype(np.uint16)
        a_val = (a_bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        b_val = (b_bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64).T
    vgprs = {}
    for i, row in enumerate(_a_regs(a_bits, 16)):
        vgprs[i] = row
    for i, row in enumerate(_a_regs(b_bits, 16)):
        vgprs[8 + i] = row
    for i, row in enumerate(_c_regs(c)):
        vgprs[16 + i] = row
    st = run_asm(f"v_wmma_f32_16x16x16_{in_type} v[24:31], v[0:7], v[8:15], v[16:23]", vgprs)
    got = st.v[24:32].reshape(8, 2, 16).reshape(16, 16).view(np.float32)
    np.testing.assert_allclose(got, a_val @ b_val + c, rtol=1e-5, atol=1e-5)


def test_wmma_f16_output_uses_low_halves() -> None:
    a = RNG.normal(size=(16, 16)).astype(np.float16)
    b = RNG.normal(size=(16, 16)).astype(np.float16)
    c = RNG.normal(size=(16, 16)).astype(np.float16)
    vgprs = {i: row for i, row in enumerate(_a_regs(a, 16))}
    vgprs.update({8 + i: row for i, row in enumerate(_a_regs(np.ascontiguousarray(b.T), 16))})
    c_block = c.view(np.uint16).astype(np.uint32).reshape(8, 2, 16).reshape(8, 32) | 0xABCD0000
    vgprs.update({16 + i: row for i, row in enumerate(c_block)})
    st = run_asm("v_wmma_f16_16x16x16_f16 v[16:23], v[0:7], v[8:15], v[16:23]", vgprs)
    got = (st.v[16:24] & 0xFFFF).astype(np.uint16).reshape(8, 2, 16).reshape(16, 16).view(np.float16)
    want = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float16)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("signed", [False, True])
def test_wmma_iu8(signed: bool) -> None:
    dtype = np.int8 if signed else np.uint8
    a = RNG.integers(-128 if signed else 0, 128 if signed else 256, (16, 16)).astype(dtype)
    b = RNG.integers(-128 if signed else 0, 128 if signed else 256, (16, 16)).astype(dtype)
    c = RNG.integers(-1000, 1000, (16, 16)).astype(np.int32)
    vgprs = {i: row for i, row in enumerate(_a_regs(a, 8))}
    vgprs.update({4 + i: row for i, row in enumerate(_a_regs(np.ascontiguousarray(b.T), 8))})
    vgprs.update({8 + i: row for i, row in enumerate(_c_regs(c))})
    neg = " neg_lo:[1,1,0]" if signed else ""
    st = run_asm(f"v_wmma_i32_16x16x16_iu8 v[16:23], v[0:3], v[4:7], v[8:15]{neg}", vgprs)
    got = st.v[16:24].reshape(8, 2, 16).reshape(16, 16).view(np.int32)
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64) + c)


def test_wmma_iu4_unsigned() -> None:
    a = RNG.integers(0, 16, (16, 16))
    b = RNG.integers(0, 16, (16, 16))

    def nibble_regs(m: np.ndarray) -> np.ndarray:
        words = np.zeros((16, 2), np.uint32)
        for row in range(16):
            for k in range(16):
                words[row, k // 8] |= np.uint32(int(m[row, k]) << (4 * (k % 8)))
        return np.concatenate([words, words]).T

    vgprs = {i: row for i, row in enumerate(nibble_regs(a))}
    vgprs.update({2 + i: row for i, row in enumerate(nibble_regs(b.T))})
    st = run_asm("v_wmma_i32_16x16x16_iu4 v[8:15], v[0:1], v[2:3], 0", vgprs)
    got = st.v[8:16].reshape(8, 2, 16).reshape(16, 16).view(np.int32)
    np.testing.assert_array_equal(got, a @ b)


def test_wmma_inline_zero_accumulator_ignores_vgprs() -> None:
    """The seed's case: C given as the inline constant 0 computes D = A @ B whatever v[128:135] holds."""
    insts = [s_mov_b32(s[0], 0x3C003C00)]
    insts += [v_mov_b32_e32(v[i], s[0]) for i in range(16, 32)]
    insts.append(s_mov_b32(s[1], 0x57B057B0))  # f16 123.0 in the registers a misread of code 128 as a VGPR would use
    insts += [v_mov_b32_e32(v[i], s[1]) for i in range(128, 136)]
    insts.append(v_wmma_f16_16x16x16_f16(v[0:7], v[16:23], v[24:31], 0))
    st = run_program(insts, n_lanes=32)
    for lane in range(32):
        for reg in range(8):
            assert st.vgpr[lane][reg] == 0x4C00, f"v[{reg}] lane {lane}"  # 16 x (1.0 * 1.0) = 16.0 in f16


def _rdna4_ab_regs(m: np.ndarray, bits: int) -> np.ndarray:
    """Registers (regs, 32 lanes) holding A (rows) or B (columns, pass B.T) in the RDNA4 layout: for row i and k, lane
    i + 16*(k>>2 & 1), element (k & 3) | (k>>1 & 4) of the lane's registers."""
    per = 32 // bits
    regs = np.zeros((8 // per, 32), np.uint32)
    raw = m.view(np.uint16 if bits == 16 else np.uint8)
    for i in range(16):
        for k in range(16):
            elem = (k & 3) | ((k >> 1) & 4)
            regs[elem // per, i + 16 * ((k >> 2) & 1)] |= np.uint32(int(raw[i, k]) << (bits * (elem % per)))
    return regs


def _rdna4_dc_regs(c: np.ndarray) -> np.ndarray:
    regs = np.zeros((8, 32), np.uint32)
    raw = c.view(np.uint32)
    for m in range(16):
        for n in range(16):
            regs[m & 7, n + 16 * (m >> 3)] = raw[m, n]
    return regs


def _run_rdna4(asm: str, vgprs: dict[int, np.ndarray]) -> WaveState:
    state = WaveState(32, "rdna4")
    for reg, values in vgprs.items():
        state.v[reg] = values
    return run_program(assemble_insts(asm, "rdna4"), 32, "rdna4", state=state)


def test_rdna4_wmma_f32_f16_and_iu8() -> None:
    a, b = RNG.normal(size=(16, 16)).astype(np.float16), RNG.normal(size=(16, 16)).astype(np.float16)
    c = RNG.normal(size=(16, 16)).astype(np.float32)
    vgprs = {i: r for i, r in enumerate(_rdna4_ab_regs(a, 16))}
    vgprs.update({4 + i: r for i, r in enumerate(_rdna4_ab_regs(np.ascontiguousarray(b.T), 16))})
    vgprs.update({8 + i: r for i, r in enumerate(_rdna4_dc_regs(c))})
    st = _run_rdna4("v_wmma_f32_16x16x16_f16 v[16:23], v[0:3], v[4:7], v[8:15]", vgprs)
    got = np.array([[st.v[16 + (m & 7), n + 16 * (m >> 3)] for n in range(16)] for m in range(16)], np.uint32).view(np.float32)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64) + c, rtol=1e-5, atol=1e-5)
    ia, ib = RNG.integers(-128, 128, (16, 16)).astype(np.int8), RNG.integers(-128, 128, (16, 16)).astype(np.int8)
    vgprs = {i: r for i, r in enumerate(_rdna4_ab_regs(ia, 8))}
    vgprs.update({2 + i: r for i, r in enumerate(_rdna4_ab_regs(np.ascontiguousarray(ib.T), 8))})
    st = _run_rdna4("v_wmma_i32_16x16x16_iu8 v[16:23], v[0:1], v[2:3], 0 neg_lo:[1,1,0]", vgprs)
    got = np.array([[st.v[16 + (m & 7), n + 16 * (m >> 3)] for n in range(16)] for m in range(16)], np.uint32).view(np.int32)
    np.testing.assert_array_equal(got, ia.astype(np.int64) @ ib.astype(np.int64))


def test_rdna4_wmma_f16_output_packs_two_rows_per_register() -> None:
    a, b = RNG.normal(size=(16, 16)).astype(np.float16), RNG.normal(size=(16, 16)).astype(np.float16)
    vgprs = {i: r for i, r in enumerate(_rdna4_ab_regs(a, 16))}
    vgprs.update({4 + i: r for i, r in enumerate(_rdna4_ab_regs(np.ascontiguousarray(b.T), 16))})
    st = _run_rdna4("v_wmma_f16_16x16x16_f16 v[8:11], v[0:3], v[4:7], 0", vgprs)
    got = np.zeros((16, 16), np.float16)
    for m in range(16):
        for n in range(16):
            word = int(st.v[8 + (m & 7) // 2, n + 16 * (m >> 3)])
            got[m, n] = np.uint16((word >> (16 * ((m & 7) % 2))) & 0xFFFF).view(np.float16)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


def _ocp_e4m3(code: int) -> float:
    """OCP E4M3 by its definition, via float16 bit patterns (bias 7 -> 15), subnormals by scaling."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = code >> 3 & 0xF, code & 7
    if exponent == 0xF and mantissa == 7:
        return float("nan")
    if exponent == 0:
        return sign * mantissa * 2.0 ** -9
    return sign * float(np.uint16((exponent + 8) << 10 | mantissa << 7).view(np.float16))


def _ocp_e5m2(code: int) -> float:
    """OCP E5M2 is the high byte of an IEEE float16."""
    return float(np.uint16(code << 8).view(np.float16))


def test_ocp_fp8_tables_match_their_definitions() -> None:
    from amd_isa.emu import fp

    for code in range(256):
        for table, ref in ((fp.FP8_VALUES, _ocp_e4m3), (fp.BF8_VALUES, _ocp_e5m2)):
            want = ref(code)
            assert (np.isnan(want) and np.isnan(table[code])) or table[code] == want, (code, table[code], want)
    assert fp.FP8_VALUES[0x7E] == 448.0 and fp.BF8_VALUES[0x7C] == np.inf


@pytest.mark.parametrize(("a_type", "b_type"), [("fp8", "fp8"), ("fp8", "bf8"), ("bf8", "fp8"), ("bf8", "bf8")])
def test_rdna4_wmma_fp8_forms(a_type: str, b_type: str) -> None:
    # finite codes only (no NaN / inf), so the numpy product is well defined
    finite = {"fp8": [c for c in range(256) if c & 0x7F != 0x7F], "bf8": [c for c in range(256) if c & 0x7C != 0x7C]}
    ref = {"fp8": _ocp_e4m3, "bf8": _ocp_e5m2}
    a = RNG.choice(finite[a_type], (16, 16)).astype(np.uint8)
    b = RNG.choice(finite[b_type], (16, 16)).astype(np.uint8)
    c = RNG.normal(size=(16, 16)).astype(np.float32)
    vgprs = {i: r for i, r in enumerate(_rdna4_ab_regs(a, 8))}
    vgprs.update({2 + i: r for i, r in enumerate(_rdna4_ab_regs(np.ascontiguousarray(b.T), 8))})
    vgprs.update({8 + i: r for i, r in enumerate(_rdna4_dc_regs(c))})
    st = _run_rdna4(f"v_wmma_f32_16x16x16_{a_type}_{b_type} v[16:23], v[0:1], v[2:3], v[8:15]", vgprs)
    got = np.array([[st.v[16 + (m & 7), n + 16 * (m >> 3)] for n in range(16)] for m in range(16)], np.uint32).view(np.float32)
    av, bv = np.vectorize(ref[a_type])(a), np.vectorize(ref[b_type])(b)
    np.testing.assert_allclose(got, (av @ bv + c).astype(np.float32), rtol=1e-6, atol=1e-6)
