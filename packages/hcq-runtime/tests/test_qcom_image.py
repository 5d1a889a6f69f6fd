"""The QCOM IMAGE path on MOCKQCOM: kernels whose PARAMs are `ImageDType`s are rendered with read_image / write_image,
their buffers laid out at the driver's row pitch, bound through texture and UAV descriptors the mock CP decodes; results
against numpy, pitches against the Qualcomm driver's, descriptors against bit fields computed here from a6xx.xml."""

import numpy as np
import pytest
from hcq_runtime import Buffer, bind_buffer, buffer_for, link_linear, run_linear
from hcq_runtime.qcom import (
    GPUFaultError,
    Image,
    ImageArg,
    MalformedPacketError,
    MockKGSL,
    QCOMComputeQueue,
    QCOMDevice,
    QCOMError,
    build_lib,
    imagef,
    imageh,
    parse_lib,
    pitch,
)
from hcq_runtime.qcom.device import bind_images
from hcq_runtime.qcom.image import split_image_table, with_image_table
from hcq_runtime.qcom.program_lib import BUFTYPE_BUF, BUFTYPE_IBO, BUFTYPE_TEX
from hypothesis import given, settings
from hypothesis import strategies as st
from uopir import AxisType, CodegenError, Ops, UOp, dtypes, to_program

# pitches Qualcomm's OpenCL driver gives these images (tinygrad's test_image_dtype.py records them from the driver)
DRIVER_PITCHES = [
    (imageh, 1, 201, 0x680), (imageh, 16, 216, 0x700), (imageh, 16, 9, 0x80), (imageh, 48, 64, 0x200), (imageh, 64, 256, 0x840),
    (imageh, 64, 768, 0x1840), (imageh, 256, 49, 0x1C0), (imageh, 16, 1024, 0x2080), (imageh, 4, 512, 0x1200), (imageh, 8, 2048, 0x4100),
    (imagef, 16, 49, 0x380), (imagef, 16, 1024, 0x4080), (imagef, 256, 64, 0x400), (imagef, 4, 16, 0x200), (imagef, 2, 16, 0x400),
    (imagef, 3, 32, 0x400), (imagef, 128, 128, 0x840), (imagef, 8, 3072, 0xC100), (imagef, 10, 384, 0x1900), (imagef, 128, 12, 0xC0),
    (imagef, 10, 24, 0x200), (imagef, 1, 129, 0x840), (imagef, 1, 1239, 0x4D80), (imagef, 1, 1, 0x40),
]


@pytest.mark.parametrize("make,height,width,expected", DRIVER_PITCHES)
def test_image_pitch_matches_the_qualcomm_driver(make, height, width, expected):
    assert pitch(make(height, width)) == expected


def test_texture_and_uav_descriptors_have_the_a6xx_bit_fields():
    row_pitch = pitch(imageh(7, 13))
    tex = Image(0x12_3456_7000, 7, 13, 2, row_pitch).descriptor(uav=False)
    uav = Image(0x12_3456_7000, 7, 13, 2, row_pitch).descriptor(uav=True)
    # a6xx.xml: TEX_CONST_0 FMT 29:22, SWIZ_X..W 6:4 9:7 12:10 15:13; TEX_CONST_1 WIDTH 14:0 HEIGHT 29:15;
    # TEX_CONST_2 PITCHALIGN 3:0 PITCH 28:7 TYPE 31:29 (A6XX_TEX_2D = 1); BASE in dwords 4-5
    fmt_half = 98
    assert tex[0] == fmt_half << 22 | 0 << 4 | 1 << 7 | 2 << 10 | 3 << 13 | 0x8 and uav[0] == fmt_half << 22
    assert tex[1] == uav[1] == 13 | 7 << 15
    assert tex[2] == 1 << 29 | row_pitch << 7 | (row_pitch & -row_pitch).bit_length() - 7
    assert (tex[4], tex[5]) == (0x3456_7000, 0x12) and len(tex) == 16
    with pytest.raises(Exception, match="pitch"):
        Image(0x1000, 2, 3).descriptor(uav=False)  # 48-byte rows packed: no 64-byte pitch


@pytest.fixture(scope="module")
def dev():
    return QCOMDevice("MOCKQCOM", MockKGSL())


def upload(dev, image, data: np.ndarray):
    mem = dev.allocator.alloc(data.nbytes, image)
    dev.allocator.copyin(mem, memoryview(np.ascontiguousarray(data)).cast("B"))
    return mem


def download(dev, mem, image, dtype):
    out = np.empty(image.height * image.width * 4, dtype)
    dev.allocator.copyout(memoryview(out).cast("B"), mem)
    return out


def run_kernel(dev, ast: UOp, out_image, inputs: list[tuple[object, np.ndarray]], out_dtype):
    prg = to_program(ast, dev.renderer)
    program = dev.program(prg.arg.function_name, dev.compiler.compile(prg.src[2].arg))
    out = dev.allocator.alloc(out_image.height * out_image.row_bytes, out_image)
    mems = [upload(dev, image, data) for image, data in inputs]
    program.launch([out.va, *[m.va for m in mems]], [], prg.arg.global_size, prg.arg.local_size)
    return download(dev, out, out_image, out_dtype), prg.src[2].arg


def texel_loop(height: int, width: int):
    texel, channel = UOp.range(height * width, 0), UOp.range(4, 1, AxisType.UPCAST)
    return texel * 4 + channel, (texel, channel)


@settings(max_examples=6, deadline=None)
@given(height=st.integers(1, 9), width=st.integers(1, 40), half_in=st.booleans(), half_out=st.booleans())
def test_image_copy_and_elementwise_match_numpy(dev, height, width, half_in, half_out):
    # widths like 3 or 37 texels make rows whose packed size is no multiple of the pitch alignment
    src_image, dst_image = (imageh if half_in else imagef)(height, width), (imageh if half_out else imagef)(height, width)
    x = np.random.default_rng(height * 100 + width).standard_normal(height * width * 4).astype(np.float16 if half_in else np.float32)
    out, a = UOp.param(0, dst_image), UOp.param(1, src_image)
    idx, ranges = texel_loop(height, width)
    value = a.index(idx).load().cast(dtypes.float32) * 3.0 + 1.0
    ast = UOp.sink(out.index(idx).store(value.cast(dst_image.base)).end(*ranges))
    got, src = run_kernel(dev, ast, dst_image, [(src_image, x)], np.float16 if half_out else np.float32)
    expected = (x.astype(np.float32) * 3 + 1).astype(np.float16 if half_out else np.float32)
    np.testing.assert_array_equal(got, expected)
    assert ("read_imageh" if half_in else "read_imagef") in src and ("write_imageh" if half_out else "write_imagef") in src


def test_two_images_and_a_buffer_in_one_kernel(dev):
    height, width = 7, 13
    image = imagef(height, width)
    rng = np.random.default_rng(5)
    x, y = (rng.standard_normal(height * width * 4).astype(np.float32) for _ in range(2))
    z = rng.standard_normal(4).astype(np.float32)
    out, a, b, c = UOp.param(0, image), UOp.param(1, image), UOp.param(2, image), UOp.param(3, dtypes.float32.ptr(4))
    idx, ranges = texel_loop(height, width)
    ast = UOp.sink(out.index(idx).store(a.index(idx).load() * b.index(idx).load() + c.index(ranges[1]).load()).end(*ranges))
    prg = to_program(ast, dev.renderer)
    program = dev.program(prg.arg.function_name, dev.compiler.compile(prg.src[2].arg))
    assert (program.info.tex_cnt, program.info.ibo_cnt, program.info.samp_cnt) == (2, 1, 2)
    dst = dev.allocator.alloc(height * image.row_bytes, image)
    plain = dev.allocator.alloc(z.nbytes)
    dev.allocator.copyin(plain, memoryview(z).cast("B"))
    program.launch([dst.va, upload(dev, image, x).va, upload(dev, image, y).va, plain.va], [], prg.arg.global_size, prg.arg.local_size)
    np.testing.assert_allclose(download(dev, dst, image, np.float32), x * y + np.tile(z, height * width), rtol=1e-6)
    # CP_LOAD_STATE6 (state type, block, units): samplers (ST6_SHADER into SB6_CS_TEX), texture constants
    # (ST6_CONSTANTS into SB6_CS_TEX) and UAVs (ST6_UAV into SB6_CS_SHADER)
    loads = {(load.state_type, load.block, load.units) for load in dev.file.cp.dispatches[-1].loads}
    assert {(0, 5, 2), (1, 5, 2), (3, 13, 1)} <= loads


def test_a_rendered_2d_stencil_with_gated_neighbour_reads(dev):
    height, width = 6, 11
    image = imagef(height, width)
    out, a = UOp.param(0, image), UOp.param(1, image)
    y, x, channel = UOp.range(height, 0), UOp.range(width, 1), UOp.range(4, 2, AxisType.UPCAST)

    def neighbour(dy: int, dx: int) -> UOp:
        index = ((y + dy) * width + x + dx) * 4 + channel
        inside = {-1: (x + dx >= 0) if dx else (y + dy >= 0), 1: (x + dx < width) if dx else (y + dy < height)}.get(dx or dy)
        return a.index(index).load() if inside is None else a.index(index, inside).load(UOp.const(0.0, dtypes.float32))

    laplace = neighbour(0, 0) * 4.0 - neighbour(0, -1) - neighbour(0, 1) - neighbour(-1, 0) - neighbour(1, 0)
    ast = UOp.sink(out.index((y * width + x) * 4 + channel).store(laplace).end(y, x, channel))
    data = np.random.default_rng(11).standard_normal((height, width, 4)).astype(np.float32)
    got, _ = run_kernel(dev, ast, image, [(image, data)], np.float32)
    padded = np.pad(data, ((1, 1), (1, 1), (0, 0)))
    expected = 4 * data - padded[1:-1, :-2] - padded[1:-1, 2:] - padded[:-2, 1:-1] - padded[2:, 1:-1]
    np.testing.assert_allclose(got.reshape(height, width, 4), expected, rtol=1e-5, atol=1e-6)


STENCIL = """// qcom-image 0 write {fmt} {h} {w}
// qcom-image 1 read {fmt} {h} {w}
__kernel void stencil(write_only image2d_t out, read_only image2d_t a) {{
  const sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;
  int x = (int)get_global_id(0), y = (int)get_global_id(1);
  float4 c = read_imagef(a, smp, (int2)(x, y)), l = read_imagef(a, smp, (int2)(x - 1, y)), r = read_imagef(a, smp, (int2)(x + 1, y));
  float4 u = read_imagef(a, smp, (int2)(x, y - 1)), d = read_imagef(a, smp, (int2)(x, y + 1)), s;
  s.x = 4.0f * c.x - l.x - r.x - u.x - d.x; s.y = 4.0f * c.y - l.y - r.y - u.y - d.y;
  s.z = 4.0f * c.z - l.z - r.z - u.z - d.z; s.w = 4.0f * c.w - l.w - r.w - u.w - d.w;
  write_imagef(out, (int2)(x, y), s);
}}
"""


@pytest.mark.parametrize("half", [False, True])
def test_a_2d_stencil_through_images_reads_a_black_border(dev, half):
    # read_imagef / write_imagef on half images convert the channels, as OpenCL specifies
    height, width = 6, 11
    image, dtype = (imageh, np.float16) if half else (imagef, np.float32)
    image = image(height, width)
    x = np.random.default_rng(7).standard_normal((height, width, 4)).astype(dtype)
    program = dev.program("stencil", dev.compiler.compile(STENCIL.format(fmt="half" if half else "float", h=height, w=width)))
    dst = dev.allocator.alloc(x.nbytes, image)
    program.launch([dst.va, upload(dev, image, x).va], [], (width, height, 1), (1, 1, 1))
    padded = np.pad(x.astype(np.float32), ((1, 1), (1, 1), (0, 0)))  # clamp-to-border: texels outside the image read as zero
    expected = (4 * padded[1:-1, 1:-1] - padded[1:-1, :-2] - padded[1:-1, 2:] - padded[:-2, 1:-1] - padded[2:, 1:-1]).astype(dtype)
    np.testing.assert_allclose(download(dev, dst, image, dtype).reshape(height, width, 4), expected, rtol=1e-5, atol=1e-6)


def test_image_memory_is_laid_out_at_the_pitch(dev):
    image = imagef(3, 5)  # 80-byte rows, each at a multiple of the pitch
    x = np.arange(60, dtype=np.float32)
    mem = upload(dev, image, x)
    assert mem.size >= pitch(image) * 3 and pitch(image) > 80
    rows = mem.view[:pitch(image) * 3].reshape(3, pitch(image))
    np.testing.assert_array_equal(rows[:, :80].copy().view(np.float32).ravel(), x)
    np.testing.assert_array_equal(download(dev, mem, image, np.float32), x)


def test_malformed_and_unmapped_descriptors_are_rejected_by_name(dev, link_queue):
    height, width = 2, 4
    image = imagef(height, width)
    program = dev.program("stencil", dev.compiler.compile(STENCIL.format(fmt="float", h=height, w=width)))
    src, dst = upload(dev, image, np.zeros(height * width * 4, np.float32)), dev.allocator.alloc(height * image.row_bytes, image)

    def submit(texture: Image, corrupt=None):
        queue = QCOMComputeQueue().exec(program.info, program.image.va, [], [], (width, height, 1), (1, 1, 1), textures=[texture],
                                        uavs=[Image(dst.va, height, width, 4, pitch(image))])
        linked = link_queue(dev, queue)
        if corrupt is not None:
            corrupt(linked.words(linked.ib_bytes + program.info.tex_off, 64))
        linked.submit()

    def bad_format(words):
        words[0] = (int(words[0]) & ~(0xFF << 22) & 0xFFFFFFFF) | 48 << 22

    def bad_pitchalign(words):
        words[2] ^= 1

    with pytest.raises(MalformedPacketError, match="texture descriptor 0: format 48"):
        submit(Image(src.va, height, width, 4, pitch(image)), bad_format)
    with pytest.raises(MalformedPacketError, match="texture descriptor 0: pitch"):
        submit(Image(src.va, height, width, 4, pitch(image)), bad_pitchalign)
    with pytest.raises(GPUFaultError, match="texture descriptor 0"):
        submit(Image(0x10, height, width, 4, pitch(image)))
    # a well-formed descriptor with another pitch is sampled as it says: row 1 is read from the wrong place
    data = np.arange(height * width * 4, dtype=np.float32)
    dev.allocator.copyin(src, memoryview(data).cast("B"))
    submit(Image(src.va, height, width, 4, pitch(image)))
    dev.synchronize()
    right = download(dev, dst, image, np.float32)
    submit(Image(src.va, height, width, 4, pitch(image) // 2))
    dev.synchronize()
    assert not np.array_equal(download(dev, dst, image, np.float32), right)


def test_image_stores_outside_a_lane_loop_and_read_write_images_are_refused(dev):
    image = imagef(2, 4)
    out, a = UOp.param(0, image), UOp.param(1, image)
    i = UOp.range(32, 0)
    with pytest.raises(CodegenError, match="UPCAST register loop"):
        to_program(UOp.sink(out.index(i).store(a.index(i).load()).end(i)), dev.renderer)
    # 4 lanes that are 4 different texels' first channels cannot be staged as one texel
    lane, texel = UOp.range(4, 0, AxisType.UPCAST), UOp.range(2, 1)
    with pytest.raises(CodegenError, match="UPCAST register loop"):
        to_program(UOp.sink(out.index(lane * 8 + texel * 4).store(a.index(lane).load()).end(lane, texel)), dev.renderer)
    idx, ranges = texel_loop(2, 4)
    with pytest.raises(CodegenError, match="reads and writes"):
        to_program(UOp.sink(out.index(idx).store(out.index(idx).load() + 1.0).end(*ranges)), dev.renderer)


def test_image_kernels_run_in_linked_batches_with_fresh_inputs():
    # the hcq2 path: two image kernels in one submit, the images' addresses run-time inputs of the linked steps
    height, width = 5, 9
    image = imageh(height, width)
    n = height * width * 4
    a, b = (UOp.param(s, image) for s in (0, 1))
    idx, ranges = texel_loop(height, width)
    double = UOp.sink(a.index(idx).store(b.index(idx).load() * 2.0).end(*ranges))
    plus_one = UOp.sink(a.index(idx).store(b.index(idx).load() + 1.0).end(*ranges))
    x, tmp, y = (UOp.new_buffer("MOCKQCOM", n, dtypes.float16) for _ in range(3))
    for uop in (x, tmp, y):
        bind_buffer(uop, Buffer("MOCKQCOM", n, dtypes.float16, options=image))
    linear = UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (double, tmp, x)), UOp(Ops.CALL, dtypes.void, (plus_one, y, tmp))))
    data = np.random.default_rng(3).standard_normal(n).astype(np.float16)
    buffer_for(x).copyin(data)
    run_linear(linear)
    np.testing.assert_array_equal(buffer_for(y).numpy(), data * np.float16(2) + np.float16(1))
    linked = link_linear(linear, inputs=[x, y])
    fresh_in, fresh_out = (Buffer("MOCKQCOM", n, dtypes.float16, options=image) for _ in range(2))
    fresh_in.copyin(data[::-1].copy())
    linked([fresh_in, fresh_out], {})
    np.testing.assert_array_equal(fresh_out.numpy(), data[::-1] * np.float16(2) + np.float16(1))


@settings(max_examples=25, deadline=None)
@given(height=st.integers(1, 300), width=st.integers(1, 5000), half=st.booleans())
def test_every_pitch_holds_a_row_at_the_descriptor_alignment(height, width, half):
    image = (imageh if half else imagef)(height, width)
    assert pitch(image) >= image.row_bytes and pitch(image) % 64 == 0
    Image(0x1000, height, width, image.base.itemsize, pitch(image)).descriptor(uav=True)  # accepted by the encoder


def test_library_descriptors_and_the_image_table_bind_arguments_by_kind():
    kinds = [BUFTYPE_IBO, BUFTYPE_BUF, BUFTYPE_TEX, BUFTYPE_BUF]
    geometry = (ImageArg(0, True, imageh(3, 7)), ImageArg(2, False, imagef(5, 2)))
    lib = with_image_table(build_lib("k", b"\x00" * 256, [0x40, 0x50], (), kinds=kinds), geometry)
    body, table = split_image_table(lib)
    assert table == geometry and lib.startswith(body)
    info = parse_lib(body, "k", table)
    assert (info.arg_kinds, info.buf_offs, info.tex_cnt, info.ibo_cnt, info.samp_cnt) == (tuple(kinds), (0x40, 0x50), 1, 1, 2)
    buffers, textures, uavs = bind_images(info, [0xA000, 0xB000, 0xC000, 0xD000])
    assert buffers == [0xB000, 0xD000]
    assert textures == [Image(0xC000, 5, 2, 4, pitch(imagef(5, 2)))] and uavs == [Image(0xA000, 3, 7, 2, pitch(imageh(3, 7)))]
    with pytest.raises(QCOMError, match="2 image arguments"):
        parse_lib(body, "k", table[:1])
