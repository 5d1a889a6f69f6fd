"""Buffer instructions (MUBUF / MTBUF / RDNA4 VBUFFER) through resource descriptors: raw and structured addressing,
range checks, format conversions and loads to LDS.

A kernel of LLVM buffer intrinsics compiled by clang-15 for gfx90a and gfx1100 (skipped without clang-15 / ld.lld-15)
is checked against numpy; per-instruction programs check the conversions of each number format against the formats'
definitions (UNORM v/(2^n-1), SNORM max(v/(2^(n-1)-1), -1), USCALED/SSCALED as floats, UINT/SINT extended), and the
gfx11 unified format numbers against llvm-objdump-15's names for them.
"""

import shutil
import struct
import subprocess

import numpy as np
import pytest
from amd_isa import assemble_insts
from amd_isa.emu import Memory, WaveState, run_kernel, run_program
from amd_isa.emu.buffer_insts import UNIFIED_FORMATS

CLANG, LLD, LLVM_MC = shutil.which("clang-15"), shutil.which("ld.lld-15"), shutil.which("llvm-mc-15")
needs_llvm = pytest.mark.skipif(CLANG is None or LLD is None, reason="clang-15 and ld.lld-15 are needed to build the test kernels")

BUFFER_KERNEL = """
target triple = "amdgcn-amd-amdhsa"
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.raw.buffer.load.i32(<4 x i32>, i32, i32, i32)
declare void @llvm.amdgcn.raw.buffer.store.i32(i32, <4 x i32>, i32, i32, i32)
declare <2 x i32> @llvm.amdgcn.struct.buffer.load.v2i32(<4 x i32>, i32, i32, i32, i32)
declare <4 x float> @llvm.amdgcn.raw.buffer.load.format.v4f32(<4 x i32>, i32, i32, i32)
declare <4 x float> @llvm.amdgcn.raw.tbuffer.load.v4f32(<4 x i32>, i32, i32, i32, i32)

define amdgpu_kernel void @buf(<4 x i32> %raw, <4 x i32> %strided, <4 x i32> %fmt, <4 x i32> %tbuf, ptr addrspace(1) %out) {
  %lane = call i32 @llvm.amdgcn.workitem.id.x()
  %off = shl i32 %lane, 2
  %a = call i32 @llvm.amdgcn.raw.buffer.load.i32(<4 x i32> %raw, i32 %off, i32 0, i32 0)
  %b = call <2 x i32> @llvm.amdgcn.struct.buffer.load.v2i32(<4 x i32> %strided, i32 %lane, i32 4, i32 0, i32 0)
  %c = call <4 x float> @llvm.amdgcn.raw.buffer.load.format.v4f32(<4 x i32> %fmt, i32 %off, i32 0, i32 0)
  %d = call <4 x float> @llvm.amdgcn.raw.tbuffer.load.v4f32(<4 x i32> %tbuf, i32 %off, i32 0, i32 FORMAT, i32 0)
  %b0 = extractelement <2 x i32> %b, i32 0
  %b1 = extractelement <2 x i32> %b, i32 1
  %idx = mul i32 %lane, 12
  %p0 = getelementptr i32, ptr addrspace(1) %out, i32 %idx
  store i32 %a, ptr addrspace(1) %p0
  %p1 = getelementptr i32, ptr addrspace(1) %p0, i32 1
  store i32 %b0, ptr addrspace(1) %p1
  %p2 = getelementptr i32, ptr addrspace(1) %p0, i32 2
  store i32 %b1, ptr addrspace(1) %p2
  %p3 = getelementptr i32, ptr addrspace(1) %p0, i32 3
  store <4 x float> %c, ptr addrspace(1) %p3
  %p7 = getelementptr i32, ptr addrspace(1) %p0, i32 7
  store <4 x float> %d, ptr addrspace(1) %p7
  %e = add i32 %a, 1000
  call void @llvm.amdgcn.raw.buffer.store.i32(i32 %e, <4 x i32> %raw, i32 %off, i32 0, i32 0)
  ret void
}
"""
# tbuffer format: gfx9 dfmt 10 (8_8_8_8) | nfmt 0 (UNORM) << 4; gfx11 unified 56 (BUF_FMT_16_16_16_16_SINT).
TARGETS = {"gfx90a": 10, "gfx1100": 56}


def _descriptor(base: int, num_records: int, stride: int = 0, gfx9: tuple[int, int] = (4, 4), unified: int = 22, oob: int = 3,
                target: str = "gfx90a") -> bytes:
    word3 = (gfx9[0] << 15 | gfx9[1] << 12) if target == "gfx90a" else (unified << 12 | oob << 28)
    return struct.pack("<4I", base & 0xFFFFFFFF, (base >> 32) | stride << 16, num_records, word3)


def _build(target: str, tmp_path) -> bytes:
    src, obj, lib = tmp_path / "buf.ll", tmp_path / "buf.o", tmp_path / "buf.so"
    src.write_text(BUFFER_KERNEL.replace("FORMAT", str(TARGETS[target])))
    subprocess.run([CLANG, "-target", "amdgcn-amd-amdhsa", f"-mcpu={target}", "-nogpulib", "-O2", "-c", str(src), "-o", str(obj)],
                   check=True, capture_output=True)
    subprocess.run([LLD, "-shared", str(obj), "-o", str(lib)], check=True, capture_output=True)
    return lib.read_bytes()


@needs_llvm
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_buffer_intrinsics_kernel(target: str, tmp_path) -> None:
    blob = _build(target, tmp_path)
    rng = np.random.default_rng(2)
    raw = rng.integers(0, 2**31, 64).astype(np.uint32)
    strided = rng.integers(0, 2**31, 256).astype(np.uint32)
    fmt = rng.integers(0, 256, 256).astype(np.uint8)
    tbuf = rng.integers(-32768, 32768, 256).astype(np.int16)
    out = np.zeros(64 * 12, np.uint32)
    mem = Memory()
    raw0 = raw.copy()
    kind = dict(target=target)
    args = (_descriptor(mem.map(raw), 40 * 4, **kind) + _descriptor(mem.map(strided), 50, stride=16, oob=1, **kind)
            + _descriptor(mem.map(fmt), 256, gfx9=(10, 0), unified=42, **kind) + _descriptor(mem.map(tbuf), 512, **kind)
            + struct.pack("<Q", mem.map(out)))
    run_kernel(blob, args, 64, 64, mem)
    rows = out.reshape(64, 12)
    lanes = np.arange(64)
    # Raw buffer: 40 dwords in range; out-of-range loads read 0 and stores are dropped.
    np.testing.assert_array_equal(rows[:, 0], np.where(lanes < 40, raw0, 0))
    np.testing.assert_array_equal(raw, np.where(lanes < 40, raw0 + 1000, raw0))
    # Structured: record = lane (16-byte stride), offset 4; 50 records in range.
    expected = strided.reshape(64, 4)[:, 1:3]
    np.testing.assert_array_equal(rows[:, 1:3], np.where((lanes < 50)[:, None], expected, 0))
    # 8_8_8_8 UNORM through the descriptor's format.
    np.testing.assert_array_equal(rows[:, 3:7].view(np.float32), (fmt.reshape(64, 4) / 255.0).astype(np.float32))
    if target == "gfx90a":
        # 8_8_8_8 UNORM at byte offset 4*lane, from the instruction's format.
        np.testing.assert_array_equal(rows[:, 7:11].view(np.float32), (tbuf.view(np.uint8)[:256].reshape(64, 4) / 255.0).astype(np.float32))
    else:
        # 16_16_16_16 SINT at byte offset 4*lane: four shorts starting at short 2*lane.
        shorts = np.stack([tbuf[2 * lane:2 * lane + 4] for lane in range(64)]).astype(np.int32)
        np.testing.assert_array_equal(rows[:, 7:11].view(np.int32), shorts)


@pytest.mark.parametrize("arch,fmt_fields", [("cdna", "format:[BUF_DATA_FORMAT_16_16,BUF_NUM_FORMAT_{nfmt}]"),
                                             ("rdna3", "format:[BUF_FMT_16_16_{nfmt}]")])
@pytest.mark.parametrize("nfmt", ["UNORM", "SNORM", "USCALED", "SSCALED", "UINT", "SINT", "FLOAT"])
def test_tbuffer_number_formats_round_trip(arch: str, fmt_fields: str, nfmt: str) -> None:
    rng = np.random.default_rng(len(nfmt))
    shorts = rng.integers(0, 65536, 128).astype(np.uint16)
    if nfmt == "FLOAT":
        shorts = (rng.integers(-500, 500, 128) / 8).astype(np.float16).view(np.uint16)
    mem = Memory()
    src, dst = shorts.copy(), np.zeros(128, np.uint16)
    lanes = 64 if arch == "cdna" else 32
    state = WaveState(lanes, arch)
    for base, array, reg in ((mem.map(src), src, 0), (mem.map(dst), dst, 4)):
        desc = _descriptor(base, array.nbytes, target="gfx90a" if arch == "cdna" else "gfx1100")
        for i, word in enumerate(struct.unpack("<4I", desc)):
            state.s[reg + i] = word
    state.v[0] = np.arange(lanes) * 4
    fmt = fmt_fields.format(nfmt=nfmt)
    st = run_program(assemble_insts(f"""
        tbuffer_load_format_xy v[2:3], v0, s[0:3], 0 {fmt} offen
        tbuffer_store_format_xy v[2:3], v0, s[4:7], 0 {fmt} offen
    """, arch), lanes, arch, state=state, memory=mem)
    x, y = shorts[0:2 * lanes:2].astype(np.int64), shorts[1:2 * lanes:2].astype(np.int64)
    sx, sy = np.where(x >= 32768, x - 65536, x), np.where(y >= 32768, y - 65536, y)
    expected = {"UNORM": (x / 65535.0, y / 65535.0), "SNORM": (np.maximum(sx / 32767.0, -1), np.maximum(sy / 32767.0, -1)),
                "USCALED": (x * 1.0, y * 1.0), "SSCALED": (sx * 1.0, sy * 1.0), "UINT": (x, y), "SINT": (sx, sy),
                "FLOAT": (x.astype(np.uint16).view(np.float16).astype(np.float64), y.astype(np.uint16).view(np.float16).astype(np.float64))}[nfmt]
    if nfmt in ("UINT", "SINT"):
        np.testing.assert_array_equal(st.v[2].view(np.int32), expected[0])
        np.testing.assert_array_equal(st.v[3].view(np.int32), expected[1])
    else:
        np.testing.assert_array_equal(st.vf[2], expected[0].astype(np.float32))
        np.testing.assert_array_equal(st.vf[3], expected[1].astype(np.float32))
    # Storing the loaded values back reproduces the memory exactly (SNORM's -32768 comes back as -32767).
    back = shorts[:2 * lanes].copy()
    if nfmt == "SNORM":
        back[back == 0x8000] = 0x8001
    np.testing.assert_array_equal(dst[:2 * lanes], back)


def test_d16_format_loads_pack_halves_and_missing_components() -> None:
    mem = Memory()
    data = np.arange(64, dtype=np.uint8) * 3
    state = WaveState(32, "rdna3")
    for i, word in enumerate(struct.unpack("<4I", _descriptor(mem.map(data), data.nbytes, target="gfx1100"))):
        state.s[i] = word
    state.v[0] = np.arange(32) * 2
    st = run_program(assemble_insts("""
        tbuffer_load_d16_format_xyzw v[2:3], v0, s[0:3], 0 format:[BUF_FMT_8_8_UINT] offen
        tbuffer_load_format_xyzw v[4:7], v0, s[0:3], 0 format:[BUF_FMT_8_8_UINT] offen
    """, "rdna3"), 32, "rdna3", state=state, memory=mem)
    x, y = data[0:64:2].astype(np.uint32), data[1:64:2].astype(np.uint32)
    np.testing.assert_array_equal(st.v[2], x | (y << 16))
    np.testing.assert_array_equal(st.v[3], np.full(32, 1 << 16, np.uint32))  # z = 0, w = 1
    np.testing.assert_array_equal(st.v[4:8].T, np.stack([x, y, np.zeros(32), np.ones(32)], axis=1))


def test_buffer_load_to_lds_and_add_tid() -> None:
    mem = Memory()
    data = np.arange(256, dtype=np.uint32) * 7
    state = WaveState(64, "cdna")
    base = mem.map(data)
    words = struct.unpack("<4I", _descriptor(base, data.nbytes, stride=4))
    for i, word in enumerate(words):
        state.s[i] = word
    state.s[3] |= 1 << 23  # ADD_TID_ENABLE: the lane id is added to the index
    state.s[124] = 64  # M0: LDS base
    st = run_program(assemble_insts("""
        buffer_load_dword v1, off, s[0:3], 0 offset:8
        buffer_load_dword off, s[0:3], 0 offset:4 lds
    """, "cdna"), 64, "cdna", state=state, memory=mem)
    np.testing.assert_array_equal(st.v[1], data[2:66])
    # LDS gets lane l's dword at M0 + inst_offset + 4*l.
    np.testing.assert_array_equal(st.lds[68:68 + 256].view(np.uint32), data[1:65])


@pytest.mark.skipif(LLVM_MC is None, reason="llvm-mc-15 is needed to name the gfx11 formats")
def test_unified_format_numbers_match_llvm() -> None:
    """Disassemble tbuffer loads with every unified format number and compare LLVM's name with the table's entry."""
    from amd_isa.rdna3 import s, tbuffer_load_format_x, v

    dfmt_names = {1: "8", 2: "16", 3: "8_8", 4: "32", 5: "16_16", 6: "10_11_11", 7: "11_11_10", 8: "10_10_10_2", 9: "2_10_10_10",
                  10: "8_8_8_8", 11: "32_32", 12: "16_16_16_16", 13: "32_32_32", 14: "32_32_32_32"}
    nfmt_names = {0: "UNORM", 1: "SNORM", 2: "USCALED", 3: "SSCALED", 4: "UINT", 5: "SINT", 7: "FLOAT"}
    # Format 1 (8_UNORM) is the default, which LLVM does not print.
    code = b"".join(tbuffer_load_format_x(v[0], v[1], s[0:3], 0, format=n, offen=True).to_bytes() for n in range(2, 64))
    text = subprocess.run([LLVM_MC, "-arch=amdgcn", "-mcpu=gfx1100", "--disassemble"], input=" ".join(f"0x{b:02x}" for b in code),
                          capture_output=True, text=True).stdout
    names = [line.split("BUF_FMT_")[1].split("]")[0] for line in text.splitlines() if "BUF_FMT_" in line]
    assert len(names) == 62
    for number, name in zip(range(2, 64), names, strict=True):
        dfmt, nfmt = UNIFIED_FORMATS[number]
        assert name == f"{dfmt_names[dfmt]}_{nfmt_names[nfmt]}", number
