"""Image loads and stores of linear images (RDNA3 MIMG, RDNA4 VIMAGE) through gfx10+ image descriptors built from Mesa's
field layout: a kernel of LLVM image intrinsics compiled by clang-15 for gfx1100 (skipped without clang-15 / ld.lld-15),
and assembled programs for DST_SEL swizzles, D16, out-of-bounds texels, arrays and the RDNA4 encoding."""

import shutil
import struct
import subprocess

import numpy as np
import pytest
from amd_isa import assemble_insts
from amd_isa.emu import EmulatorError, Memory, WaveState, run_kernel, run_program

CLANG, LLD = shutil.which("clang-15"), shutil.which("ld.lld-15")
IMAGE_KERNEL = """
target triple = "amdgcn-amd-amdhsa"
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare <4 x float> @llvm.amdgcn.image.load.2d.v4f32.i32(i32, i32, i32, <8 x i32>, i32, i32)
declare float @llvm.amdgcn.image.load.2d.f32.i32(i32, i32, i32, <8 x i32>, i32, i32)
declare void @llvm.amdgcn.image.store.2d.v4f32.i32(<4 x float>, i32, i32, i32, <8 x i32>, i32, i32)
declare <2 x float> @llvm.amdgcn.image.load.1d.v2f32.i32(i32, i32, <8 x i32>, i32, i32)

define amdgpu_kernel void @img(<8 x i32> %src, <8 x i32> %dst, <8 x i32> %one, ptr addrspace(1) %out) {
  %x = call i32 @llvm.amdgcn.workitem.id.x()
  %y = call i32 @llvm.amdgcn.workgroup.id.x()
  %v = call <4 x float> @llvm.amdgcn.image.load.2d.v4f32.i32(i32 15, i32 %x, i32 %y, <8 x i32> %src, i32 0, i32 0)
  %g = call float @llvm.amdgcn.image.load.2d.f32.i32(i32 2, i32 %x, i32 %y, <8 x i32> %src, i32 0, i32 0)
  %w = call <2 x float> @llvm.amdgcn.image.load.1d.v2f32.i32(i32 9, i32 %x, <8 x i32> %one, i32 0, i32 0)
  %s = fmul <4 x float> %v, <float 2.0, float 2.0, float 2.0, float 2.0>
  call void @llvm.amdgcn.image.store.2d.v4f32.i32(<4 x float> %s, i32 15, i32 %x, i32 %y, <8 x i32> %dst, i32 0, i32 0)
  %row = mul i32 %y, 64
  %idx = add i32 %row, %x
  %i3 = mul i32 %idx, 3
  %p = getelementptr float, ptr addrspace(1) %out, i32 %i3
  store float %g, ptr addrspace(1) %p
  %w0 = extractelement <2 x float> %w, i32 0
  %w1 = extractelement <2 x float> %w, i32 1
  %p1 = getelementptr float, ptr addrspace(1) %p, i32 1
  store float %w0, ptr addrspace(1) %p1
  %p2 = getelementptr float, ptr addrspace(1) %p, i32 2
  store float %w1, ptr addrspace(1) %p2
  ret void
}
"""
IDENTITY = (4, 5, 6, 7)
# gfx11 unified formats (LLVM's UfmtGFX11 order): 8_8_8_8_UNORM, 32_32_32_32_FLOAT, 32_FLOAT, 16_16_FLOAT, 32_UINT.
FMT_RGBA8, FMT_RGBA32F, FMT_R32F, FMT_RG16F, FMT_R32UI = 42, 63, 22, 29, 20
IMG_1D, IMG_2D, IMG_2D_ARRAY = 8, 9, 13


def descriptor(base: int, width: int, height: int, fmt: int, dst_sel=IDENTITY, depth: int = 1, kind: int = IMG_2D) -> list[int]:
    """Eight T# dwords (gfx10+ layout, Mesa's SQ_IMG_RSRC_WORD0..7) of a linear image."""
    sel = dst_sel[0] | dst_sel[1] << 3 | dst_sel[2] << 6 | dst_sel[3] << 9
    return [(base >> 8) & 0xFFFFFFFF, (base >> 40) & 0xFF | fmt << 20 | ((width - 1) & 3) << 30,
            ((width - 1) >> 2) & 0xFFF | (height - 1) << 14, sel | kind << 28, depth - 1, 0, 0, 0]


def _aligned(mem: Memory, array: np.ndarray) -> int:
    """Map an array for a T#, which holds the base in 256-byte units (Memory.map places arrays on page boundaries)."""
    address = mem.map(array)
    assert address % 256 == 0
    return address


@pytest.mark.skipif(CLANG is None or LLD is None, reason="clang-15 and ld.lld-15 are needed to build the test kernel")
def test_image_intrinsics_kernel(tmp_path) -> None:
    src, obj, lib = tmp_path / "img.ll", tmp_path / "img.o", tmp_path / "img.so"
    src.write_text(IMAGE_KERNEL)
    subprocess.run([CLANG, "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-nogpulib", "-O2", "-c", str(src), "-o", str(obj)],
                   check=True, capture_output=True)
    subprocess.run([LLD, "-shared", str(obj), "-o", str(lib)], check=True, capture_output=True)
    rng = np.random.default_rng(5)
    width, height = 64, 4
    texels = rng.integers(0, 256, (height, width, 4)).astype(np.uint8)
    out_img = np.zeros((height, width, 4), np.float32)
    row = (rng.integers(-100, 100, (width, 4)) / 4).astype(np.float32)
    out = np.zeros(width * height * 3, np.float32)
    mem = Memory()
    rsrc = descriptor(_aligned(mem, texels), width, height, FMT_RGBA8)
    rdst = descriptor(_aligned(mem, out_img), width, height, FMT_RGBA32F)
    rone = descriptor(_aligned(mem, row), width, 1, FMT_RGBA32F, kind=IMG_1D)
    args = struct.pack("<24IQ", *rsrc, *rdst, *rone, mem.map(out))
    run_kernel(lib.read_bytes(), args, width * height, width, mem)  # workgroup i draws row i
    unorm = (texels / 255.0).astype(np.float32)
    np.testing.assert_array_equal(out_img, unorm * 2)
    result = out.reshape(height, width, 3)
    np.testing.assert_array_equal(result[:, :, 0], unorm[:, :, 1])  # dmask 0x2: the y component
    np.testing.assert_array_equal(result[:, :, 1:], np.broadcast_to(row[:, [0, 3]], (height, width, 2)))  # dmask 0x9: x and w


def _run(asm: str, words: list[int], arch: str = "rdna3", vgprs: dict | None = None, memory: Memory | None = None) -> WaveState:
    state = WaveState(32, arch)
    for i, word in enumerate(words):
        state.s[8 + i] = word
    for reg, value in (vgprs or {}).items():
        state.v[reg] = value
    return run_program(assemble_insts(asm, arch), 32, arch, state=state, memory=memory)


def test_dst_sel_d16_and_out_of_bounds() -> None:
    mem = Memory()
    image = (np.arange(16 * 2 * 2).reshape(2, 16, 2) / 8).astype(np.float16)
    words = descriptor(_aligned(mem, image), 16, 2, FMT_RG16F, dst_sel=(5, 4, 1, 0))
    x = np.arange(32) % 20  # lanes 16-19: x beyond the width
    y = np.arange(32) // 20
    st = _run("""
        image_load v[4:7], v[0:1], s[8:15] dmask:0xf dim:SQ_RSRC_IMG_2D unorm
        image_load v[8:9], v[0:1], s[8:15] dmask:0xf dim:SQ_RSRC_IMG_2D unorm d16
    """, words, vgprs={0: x, 1: y}, memory=mem)
    inside = x < 16
    texel = image[np.minimum(y, 1), np.minimum(x, 15)].astype(np.float32)
    # DST_SEL (y, x, 1, 0): the components come back swapped, then one and zero; outside the image everything is 0.
    np.testing.assert_array_equal(st.vf[4], np.where(inside, texel[:, 1], 0))
    np.testing.assert_array_equal(st.vf[5], np.where(inside, texel[:, 0], 0))
    np.testing.assert_array_equal(st.vf[6], np.where(inside, 1.0, 0))
    np.testing.assert_array_equal(st.vf[7], 0)
    halves = st.v[8:10].T.copy().view(np.float16).reshape(32, 4)
    np.testing.assert_array_equal(halves[:, 0], np.where(inside, texel[:, 1], 0).astype(np.float16))
    np.testing.assert_array_equal(halves[:, 2], np.where(inside, 1.0, 0).astype(np.float16))


def test_array_store_and_resinfo_rdna4() -> None:
    mem = Memory()
    image = np.zeros((3, 2, 8), np.uint32)
    words = descriptor(_aligned(mem, image), 8, 2, FMT_R32UI, depth=3, kind=IMG_2D_ARRAY)
    lanes = np.arange(32)
    st = _run("""
        image_store v3, [v0, v1, v2], s[8:15] dmask:0x1 dim:SQ_RSRC_IMG_2D_ARRAY
        image_get_resinfo v[4:7], [v5], s[8:15] dmask:0xf dim:SQ_RSRC_IMG_2D_ARRAY
    """, words, "rdna4", {0: lanes % 8, 1: (lanes // 8) % 2, 2: lanes // 16, 3: lanes * 11 + 1}, mem)
    expected = np.zeros((3, 2, 8), np.uint32)
    expected[lanes // 16, (lanes // 8) % 2, lanes % 8] = lanes * 11 + 1
    np.testing.assert_array_equal(image, expected)
    assert [int(st.v[r, 0]) for r in range(4, 8)] == [8, 2, 3, 1]


def test_tiled_images_are_refused() -> None:
    mem = Memory()
    image = np.zeros(64, np.float32)
    words = descriptor(_aligned(mem, image), 8, 8, FMT_R32F)
    words[3] |= 9 << 20  # SW_MODE 9: a 64 KiB swizzle
    with pytest.raises(EmulatorError, match="tiled images"):
        _run("image_load v4, v[0:1], s[8:15] dmask:0x1 dim:SQ_RSRC_IMG_2D", words, vgprs={0: 0, 1: 0}, memory=mem)
