"""ImageDType and the image lowering pass: element i is channel i % 4 of texel i // 4; loads become texel reads and
channel picks, stores in a 4-lane register range become texel writes of a STACK; renderers without images refuse."""

import pickle

import pytest
from uopir import (
    IMAGE_CHANNEL,
    AMDOpenCLRenderer,
    AxisType,
    CodegenError,
    CRenderer,
    DTypeError,
    ImageDType,
    Ops,
    UOp,
    dtypes,
    lower_images,
    to_program,
)
from uopir.codegen.program import lower_kernel


def test_image_dtypes_are_interned_pointers_with_their_geometry():
    image = dtypes.imagef(3, 5)
    assert image is dtypes.imagef(3, 5) is ImageDType(dtypes.float32, 3, 5) and image is not dtypes.imageh(3, 5)
    assert (image.height, image.width, image.size, image.base, image.row_bytes) == (3, 5, 60, dtypes.float32, 80)
    assert dtypes.imageh(3, 5).row_bytes == 40 and repr(image) == "dtypes.imagef(3, 5)"
    assert pickle.loads(pickle.dumps(image)) is image
    with pytest.raises(DTypeError, match="half or float channels"):
        ImageDType(dtypes.int32, 2, 2)
    with pytest.raises(DTypeError, match="does not fit"):
        dtypes.imagef(0, 4)
    with pytest.raises(DTypeError, match="does not fit"):
        dtypes.imagef(2, 1 << 15)


def texel_loop(n: int):
    texel, lane = UOp.range(n, 0), UOp.range(4, 1, AxisType.UPCAST)
    return texel * 4 + lane, texel, lane


def lowered(ast: UOp) -> UOp:
    return lower_kernel(lower_images(lower_kernel(ast)))


def test_a_copy_through_images_reads_and_writes_each_texel_once():
    image = dtypes.imagef(2, 3)
    out, a = UOp.param(0, image), UOp.param(1, image)
    idx, texel, lane = texel_loop(6)
    kernel = lowered(UOp.sink(out.index(idx).store(a.index(idx).load() * 2.0).end(texel, lane)))
    nodes = kernel.toposort()
    reads = [u for u in nodes if u.op is Ops.LOAD]
    assert len(reads) == 1 and reads[0].dtype == dtypes.float32.vec(4) and reads[0].src[0].src[1] is texel
    picks = sorted(u.src[1].arg for u in nodes if u.op is Ops.CUSTOM and u.arg == (IMAGE_CHANNEL,))
    assert picks == [0, 1, 2, 3], "each lane's channel is a constant once the lane is substituted"
    (store,) = [u for u in nodes if u.op is Ops.STORE]
    assert store.src[0].src[1] is texel and store.src[1].op is Ops.STACK and store.src[1].dtype == dtypes.float32.vec(4)
    assert lane not in nodes, "the lane range is gone: the texel is written once"


def test_a_gated_image_read_selects_its_alternative_and_reads_ungated():
    image = dtypes.imageh(1, 4)
    out, a = UOp.param(0, dtypes.float16.ptr(16)), UOp.param(1, image)
    i = UOp.range(16, 0)
    gate = i >= 4
    kernel = lowered(UOp.sink(out.index(i).store(a.index(i - 4, gate).load(UOp.const(7.0, dtypes.float16))).end(i)))
    nodes = kernel.toposort()
    (read,) = [u for u in nodes if u.op is Ops.LOAD]
    assert len(read.src[0].src) == 2, "the texel read itself is never gated: outside the image it reads the border"
    (select,) = [u for u in nodes if u.op is Ops.WHERE]
    assert select.src[2].op is Ops.CONST and select.src[2].arg == 7.0
    pick = select.src[1]
    assert pick.op is Ops.CUSTOM and pick.arg == (IMAGE_CHANNEL,) and pick.src[1].op is not Ops.CONST


def test_image_stores_must_write_whole_texels_ungated():
    image = dtypes.imagef(2, 4)
    out = UOp.param(0, image)
    i = UOp.range(32, 0)
    with pytest.raises(CodegenError, match="UPCAST register loop of 4 lanes"):
        lowered(UOp.sink(out.index(i).store(1.0).end(i)))
    idx, texel, lane = texel_loop(8)
    with pytest.raises(CodegenError, match="gated store"):
        lowered(UOp.sink(out.index(idx, texel < 4).store(1.0).end(texel, lane)))


@pytest.mark.parametrize("renderer", [CRenderer(), AMDOpenCLRenderer("gfx1100")])
def test_renderers_without_an_image_path_refuse_image_kernels(renderer):
    image = dtypes.imagef(1, 2)
    out, a = UOp.param(0, image), UOp.param(1, image)
    idx, texel, lane = texel_loop(2)
    with pytest.raises(CodegenError, match="no image path"):
        to_program(UOp.sink(out.index(idx).store(a.index(idx).load()).end(texel, lane)), renderer)


def test_kernels_without_images_are_left_alone():
    buf = UOp.param(0, dtypes.float32.ptr(8))
    i = UOp.range(8, 0)
    kernel = UOp.sink(buf.index(i).store(1.0).end(i))
    assert lower_images(kernel) is kernel
