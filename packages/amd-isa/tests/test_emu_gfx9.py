"""gfx9 (CDNA) encodings the compiler emits for narrow types and wave reductions: SDWA, the whole-wave DPP controls,
16-bit results that zero the high half, and the accumulating dots. Checked with kernels clang-15 compiles for gfx90a /
gfx940 (against numpy; skipped without clang-15 / ld.lld-15) and with per-instruction cases whose expected values are
worked out bit by bit from the ISA's definitions in the test."""

import shutil
import struct
import subprocess

import numpy as np
import pytest
from amd_isa import assemble_insts
from amd_isa.emu import Memory, WaveState, run_kernel, run_program
from amd_isa.inst import Inst
from hypothesis import given, settings
from hypothesis import strategies as st

CLANG, LLD = shutil.which("clang-15"), shutil.which("ld.lld-15")
needs_llvm = pytest.mark.skipif(CLANG is None or LLD is None, reason="clang-15 and ld.lld-15 are needed to build the test kernels")

# A wave-wide atomic add: with the atomic optimizer on, clang scans the lanes with DPP (row_shr, and on gfx9
# row_bcast:15 / row_bcast:31 / wave_shr) and issues one atomic, so `out` is the exclusive prefix sum in lane order.
SCAN_KERNEL = """
__kernel void scan(__global const int *x, __global int *total, __global int *out) {
  int i = __builtin_amdgcn_workitem_id_x() + __builtin_amdgcn_workgroup_id_x() * 64;
  out[i] = __atomic_fetch_add(total, x[i], __ATOMIC_RELAXED);
}
"""
# Byte, short and half arithmetic: gfx9 code is full of SDWA selects, mad_legacy_u16 and 16-bit ops.
NARROW_KERNEL = """
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
__kernel void narrow(__global const uchar *a, __global const char *b, __global short *c, __global ushort *d, __global half *h,
                     __global float *f) {
  int i = __builtin_amdgcn_workitem_id_x() + __builtin_amdgcn_workgroup_id_x() * 64;
  c[i] = (short)(a[i] * b[i]) + (c[i] >> 3);
  ushort m = (ushort)(a[i] << 2);
  d[i] = (d[i] > m ? d[i] : m) / 3;
  h[i] = h[i] * (half)a[i] - (half)b[i];
  f[i] = (float)h[i] + (float)(c[i] & 0xff) + (float)(uchar)(d[i] >> 8);
  uchar4 v = ((__global const uchar4 *)a)[i] + (uchar4)(1, 2, 3, 4);
  ((__global uchar4 *)f)[i + 64] = v * v;
  short4 w = __builtin_convertvector(((__global const char4 *)b)[i], short4);
  ((__global short4 *)c)[i + 64] = w * (short)3 + (short)(a[i] * 7);
}
"""


def _build(source: str, target: str, tmp_path, extra: tuple[str, ...] = ()) -> bytes:
    src, obj, lib = tmp_path / "k.cl", tmp_path / f"k_{target}.o", tmp_path / f"k_{target}.so"
    src.write_text(source)
    subprocess.run([CLANG, "-target", "amdgcn-amd-amdhsa", f"-mcpu={target}", *extra, "-nogpulib", "-O2", "-x", "cl", "-c", str(src), "-o",
                    str(obj)], check=True, capture_output=True)
    subprocess.run([LLD, "-shared", str(obj), "-o", str(lib)], check=True, capture_output=True)
    return lib.read_bytes()


@needs_llvm
@pytest.mark.parametrize("target", ["gfx90a", "gfx940", "gfx1100"])
def test_dpp_wave_scan_kernel(target: str, tmp_path) -> None:
    blob = _build(SCAN_KERNEL, target, tmp_path, ("-mllvm", "-amdgpu-atomic-optimizations=true"))
    rng = np.random.default_rng(3)
    x = rng.integers(-1000, 1000, 128).astype(np.int32)
    total, out = np.array([5], np.int32), np.zeros(128, np.int32)
    mem = Memory()
    wave = 64 if target != "gfx1100" else 32
    run = run_kernel(blob, struct.pack("<QQQ", mem.map(x), mem.map(total), mem.map(out)), 128, 64, mem, count_mix=True)
    assert total[0] == 5 + x.sum()
    # One atomic per wave, waves in order: each lane sees the running total before it.
    starts = 5 + np.concatenate([[0], np.cumsum([x[w:w + wave].sum() for w in range(0, 128, wave)])[:-1]])
    expected = np.concatenate([starts[j] + np.concatenate([[0], np.cumsum(x[w:w + wave])[:-1]]) for j, w in enumerate(range(0, 128, wave))])
    np.testing.assert_array_equal(out, expected)
    assert any("dpp" in name for name in run.mix) or target == "gfx1100"


@needs_llvm
@pytest.mark.parametrize("target", ["gfx90a", "gfx940", "gfx1100"])
def test_narrow_type_kernel(target: str, tmp_path) -> None:
    blob = _build(NARROW_KERNEL, target, tmp_path)
    rng = np.random.default_rng(11)
    a = rng.integers(0, 256, 256).astype(np.uint8)
    b = rng.integers(-128, 128, 256).astype(np.int8)
    c = rng.integers(-30000, 30000, 512).astype(np.int16)
    d = rng.integers(0, 65536, 64).astype(np.uint16)
    h = (rng.integers(-64, 64, 64) / 8).astype(np.float16)
    f = np.zeros(128, np.float32)
    a0, b0, c0, d0, h0 = a.copy(), b.copy(), c.copy(), d.copy(), h.copy()
    mem = Memory()
    args = struct.pack("<QQQQQQ", *(mem.map(buf) for buf in (a, b, c, d, h, f)))
    run = run_kernel(blob, args, 64, 64, mem, count_mix=True)
    ai, bi = a0[:64].astype(np.int64), b0[:64].astype(np.int64)
    c_new = ((ai * bi).astype(np.int16).astype(np.int64) + (c0[:64].astype(np.int64) >> 3)).astype(np.int16)
    m = ((ai << 2) & 0xFFFF).astype(np.uint16)
    d_new = (np.maximum(d0, m) // 3).astype(np.uint16)
    h_new = (h0 * a0[:64].astype(np.float16) - b0[:64].astype(np.float16)).astype(np.float16)
    np.testing.assert_array_equal(c[:64], c_new)
    np.testing.assert_array_equal(d, d_new)
    np.testing.assert_allclose(h.astype(np.float64), h_new.astype(np.float64), rtol=2e-3, atol=0.06)
    f_new = h.astype(np.float32) + (c_new.astype(np.int64) & 0xFF) + (d_new >> 8).astype(np.uint8)
    np.testing.assert_array_equal(f[:64], f_new.astype(np.float32))
    v = (a0.reshape(64, 4).astype(np.int64) + [1, 2, 3, 4]) & 0xFF
    np.testing.assert_array_equal(f[64:].view(np.uint8).reshape(64, 4), (v * v) & 0xFF)
    w = b0.reshape(64, 4).astype(np.int64) * 3 + ((ai * 7).astype(np.int16).astype(np.int64))[:, None]
    np.testing.assert_array_equal(c[256:].reshape(64, 4), w.astype(np.int16))
    assert target == "gfx1100" or any(name.endswith("_sdwa") for name in run.mix)


# --- SDWA, per instruction ---------------------------------------------------------------------------------------------
SELECTS = {"BYTE_0": (0, 8), "BYTE_1": (8, 8), "BYTE_2": (16, 8), "BYTE_3": (24, 8), "WORD_0": (0, 16), "WORD_1": (16, 16), "DWORD": (0, 32)}


def _with_fields(inst: Inst, **fields: int) -> Inst:
    return Inst(inst.arch, inst.fmt, inst.op, dict(inst.fields, **fields), inst.literal, inst.variant)


def _ref_select(value: int, sel: str, sext: bool) -> int:
    shift, width = SELECTS[sel]
    part = (value >> shift) & ((1 << width) - 1)
    if sext and width < 32 and part >> (width - 1):
        part -= 1 << width
    return part & 0xFFFFFFFF


def _ref_place(result: int, old: int, sel: str, unused: str) -> int:
    shift, width = SELECTS[sel]
    if width == 32:
        return result & 0xFFFFFFFF
    field = (result & ((1 << width) - 1)) << shift
    if unused == "UNUSED_PRESERVE":
        return (old & ~(((1 << width) - 1) << shift) & 0xFFFFFFFF) | field
    if unused == "UNUSED_SEXT" and result >> (width - 1) & 1:
        return field | ((0xFFFFFFFF << (shift + width)) & 0xFFFFFFFF)
    return field


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.sampled_from(list(SELECTS)), st.sampled_from(list(SELECTS)), st.sampled_from(list(SELECTS)),
       st.sampled_from(["UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE"]), st.booleans(), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_sdwa_add_selects_and_places(sel0: str, sel1: str, dst: str, unused: str, sext: bool, x: int, y: int) -> None:
    state = WaveState(64, "cdna")
    state.v[1], state.v[2], state.v[3] = x, y, 0xA5A5A5A5
    asm = f"v_add_u32_sdwa v3, v1, v2 dst_sel:{dst} dst_unused:{unused} src0_sel:{sel0} src1_sel:{sel1}"
    # Our assembler does not parse sext(...); set the SRC0_SEXT bit directly.
    st_ = run_program([_with_fields(assemble_insts(asm, "cdna")[0], src0_sext=int(sext))], 64, "cdna", state=state)
    expected = _ref_place((_ref_select(x, sel0, sext) + _ref_select(y, sel1, False)) & 0xFFFFFFFF, 0xA5A5A5A5, dst, unused)
    assert int(st_.v[3, 0]) == expected


def test_sdwa_float_sources_modifiers_and_scalar_operand() -> None:
    state = WaveState(64, "cdna")
    state.v[1] = np.float16(1.5).view(np.uint16).astype(np.uint32) << 16 | 0x1234
    state.v[2] = np.float16(-2.25).view(np.uint16)
    state.s[4] = 0x4000_0000  # 2.0 in f32
    prog = assemble_insts("""
        v_cvt_f32_f16_sdwa v3, -v1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1
        v_add_f16_sdwa v4, v1, |v2| dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:WORD_0
        v_mul_f32_sdwa v5, s4, v3 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD
    """, "cdna")
    st_ = run_program(prog, 64, "cdna", state=state)
    assert st_.vf[3, 0] == -1.5
    assert int(st_.v[4, 0]) == int(np.float16(3.75).view(np.uint16)) << 16
    assert st_.vf[5, 0] == -3.0


def test_sdwa_compare_to_an_sgpr_pair() -> None:
    # v_cmp_gt_i32_sdwa s[8:9], v1, v2 src0_sel:BYTE_1 src1_sel:WORD_0 with sext on src0 (built from fields: SD set).
    state = WaveState(64, "cdna")
    state.v[1] = (np.arange(64, dtype=np.uint32) * 7) << 8
    state.v[2] = 100
    base = assemble_insts("v_cmp_gt_i32_sdwa vcc, v1, v2 src0_sel:BYTE_1 src1_sel:WORD_0", "cdna")[0]
    st_ = run_program([_with_fields(base, sd=1, sdst=8, src0_sext=1)], 64, "cdna", state=state)
    signed = [((7 * lane) & 0xFF) - (256 if (7 * lane) & 0x80 else 0) for lane in range(64)]
    expected = sum(1 << lane for lane in range(64) if signed[lane] > 100)
    assert st_.s[8] | st_.s[9] << 32 == expected and st_.vcc == 0


# --- gfx9 DPP controls, 16-bit results, accumulating dots ------------------------------------------------------------------
@pytest.mark.parametrize("control,source", [
    ("wave_shl:1", lambda lane: lane + 1 if lane < 63 else None), ("wave_rol:1", lambda lane: (lane + 1) % 64),
    ("wave_shr:1", lambda lane: lane - 1 if lane > 0 else None), ("wave_ror:1", lambda lane: (lane - 1) % 64),
    ("row_bcast:15", lambda lane: (lane // 16) * 16 - 1 if lane >= 16 else None), ("row_bcast:31", lambda lane: 31 if lane >= 32 else None),
])
def test_gfx9_wave_dpp_controls(control: str, source) -> None:
    state = WaveState(64, "cdna")
    state.v[1] = np.arange(64) * 10 + 1
    state.v[2] = 7
    st_ = run_program(assemble_insts(f"v_mov_b32_dpp v2, v1 {control} row_mask:0xf bank_mask:0xf", "cdna"), 64, "cdna", state=state)
    expected = [source(lane) * 10 + 1 if source(lane) is not None else 7 for lane in range(64)]
    assert [int(x) for x in st_.v[2]] == expected


def test_gfx9_16bit_results_zero_the_high_half_except_mac() -> None:
    state = WaveState(64, "cdna")
    state.v[1] = 0xDEAD_0003
    state.v[2] = 0xBEEF_0004
    state.v[3] = 0xFFFF_FFFF
    state.v[4] = 0x1111_0000 | int(np.float16(1.0).view(np.uint16))
    state.v[5] = int(np.float16(2.0).view(np.uint16)) | 0x2222_0000
    prog = assemble_insts("""
        v_add_u16_e32 v3, v1, v2
        v_mac_f16_e32 v4, v5, v5
        v_mad_legacy_u16 v6, v1, v2, 5
    """, "cdna")
    st_ = run_program(prog, 64, "cdna", state=state)
    assert int(st_.v[3, 0]) == 7
    assert int(st_.v[4, 0]) == 0x1111_0000 | int(np.float16(5.0).view(np.uint16))
    assert int(st_.v[6, 0]) == 17


def test_gfx9_accumulating_dots() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32), rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    acc = rng.integers(-1000, 1000, 64).astype(np.int32)
    for name, bits in (("v_dot4c_i32_i8", 8), ("v_dot8c_i32_i4", 4), ("v_dot2c_i32_i16", 16)):
        state = WaveState(64, "cdna")
        state.v[1], state.v[2], state.v[3] = a, b, acc.view(np.uint32)
        st_ = run_program(assemble_insts(f"{name}_e32 v3, v1, v2", "cdna"), 64, "cdna", state=state)

        def parts(words, bits=bits):
            out = [(words.astype(np.int64) >> (bits * k)) & ((1 << bits) - 1) for k in range(32 // bits)]
            return [np.where(p >= 1 << (bits - 1), p - (1 << bits), p) for p in out]
        expected = (sum(x * y for x, y in zip(parts(a), parts(b), strict=True)) + acc) & 0xFFFFFFFF
        np.testing.assert_array_equal(st_.v[3], expected.astype(np.uint32), err_msg=name)
    halves = (rng.integers(-8, 8, (64, 2)) / 4).astype(np.float16)
    state = WaveState(64, "cdna")
    state.v[1] = halves.view(np.uint32).ravel()
    state.v[2] = halves.view(np.uint32).ravel()
    state.vf[3] = 0.5
    st_ = run_program(assemble_insts("v_dot2c_f32_f16_e32 v3, v1, v2", "cdna"), 64, "cdna", state=state)
    np.testing.assert_array_equal(st_.vf[3], (halves.astype(np.float64) ** 2).sum(axis=1) + 0.5)


def test_ds_loads_and_stores_move_accumulation_registers() -> None:
    state = WaveState(64, "cdna")
    state.a[4:8] = (np.arange(256).reshape(4, 64) * 3 + 1).astype(np.uint32)
    state.v[1] = np.arange(64) * 16
    st_ = run_program(assemble_insts("ds_write_b128 v1, a[4:7]\nds_read_b128 a[8:11], v1\nds_read_b32 v20, v1 offset:4", "cdna"),
                      64, "cdna", state=state)
    # Lane l's four dwords sit at LDS byte 16*l.
    np.testing.assert_array_equal(st_.lds32[:256].reshape(64, 4), state.a[4:8].T)
    np.testing.assert_array_equal(st_.a[8:12], st_.a[4:8])
    np.testing.assert_array_equal(st_.v[20], st_.a[5])
