"""Images of the QCOM IMAGE path: a buffer stored as a 2-D RGBA image (`height` x `width` texels of 4 half or float
channels), read through the texture unit and written as a UAV.

`uopir.ImageDType` is both the dtype of a kernel PARAM that opts into the image path (the QCOM renderer then reads it
with read_image{f,h} and writes it with write_image{f,h}) and the allocation option that makes `QCOMAllocator` lay
the buffer out with the row pitch Qualcomm's OpenCL driver uses (`pitch`, `image_nbytes`). The image arguments of a kernel travel from the rendered
source to the program library as a small table (`with_image_table`, `split_image_table`), which the dispatch reads
to write the descriptors.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass

import numpy as np
from uopir import ImageDType, dtypes

from .errors import QCOMError
from .program_lib import next_power2, round_up

CHANNELS = ImageDType.CHANNELS
#: "// qcom-image <argument> <read|write> <half|float> <height> <width>": one line per image argument of a kernel
IMAGE_LINE = re.compile(r"^// qcom-image (\d+) (read|write) (half|float) (\d+) (\d+)$", re.MULTILINE)
TABLE_MAGIC = b"UOPIMAGE"
_ENTRY = struct.Struct("<IIIII")  # argument index, writes, itemsize, height, width


def image_pitch(height: int, width: int, itemsize: int) -> int:
    """Bytes from one image row to the next, as Qualcomm's OpenCL driver lays images out (a fact from tinygrad's
    `ImageDType.pitch`, checked there against the driver's pitches): rows align to 2**pitchalign bytes (64 for tall
    images, more for short ones), and widths just under a power of two get one more alignment unit."""
    itemsize_log = int(math.log2(itemsize))
    pitchalign = max(6, 11 - int(math.log2(height))) if height > 1 else 6
    align_up = max(1, (8 // itemsize_log + 1) - height // 32) if pitchalign == 6 else 2 ** (pitchalign - itemsize_log - 2)
    granularity = 128 if itemsize == 4 else 256
    padded = min(next_power2(width), round_up(width, granularity)) - align_up + 1 <= width and width > granularity // 2
    return round_up(width * CHANNELS * itemsize, 1 << pitchalign) + ((1 << pitchalign) if padded else 0)


def pitch(image: ImageDType) -> int:
    """Bytes from one row of `image` to the next in QCOM memory (the driver's layout, `image_pitch`)."""
    return image_pitch(image.height, image.width, image.base.itemsize)


def image_nbytes(image: ImageDType) -> int:
    """Bytes `image` occupies in QCOM memory (every row at its pitch)."""
    return pitch(image) * image.height


#: a float (FMT6_32_32_32_32_FLOAT) image: `uopir.dtypes.imagef`
imagef = dtypes.imagef
#: a half (FMT6_16_16_16_16_FLOAT) image: `uopir.dtypes.imageh`
imageh = dtypes.imageh


@dataclass(frozen=True)
class ImageArg:
    """Kernel argument `index` (among its buffers) is `image`, read through a texture or written as a UAV."""

    index: int
    writes: bool
    image: ImageDType


def image_line(arg: ImageArg) -> str:
    """The source line that declares `arg` to the QCOM compilers."""
    kind = "half" if arg.image.base == dtypes.float16 else "float"
    return f"// qcom-image {arg.index} {'write' if arg.writes else 'read'} {kind} {arg.image.height} {arg.image.width}"


def image_args(src: str) -> tuple[ImageArg, ...]:
    """The image arguments a rendered kernel declares (see `image_line`)."""
    return tuple(ImageArg(int(index), kind == "write", (imageh if fmt == "half" else imagef)(int(height), int(width)))
                 for index, kind, fmt, height, width in IMAGE_LINE.findall(src))


def with_image_table(lib: bytes, args: tuple[ImageArg, ...]) -> bytes:
    """`lib` followed by the table of its image arguments (nothing when it has none)."""
    if not args:
        return lib
    table = b"".join(_ENTRY.pack(a.index, a.writes, a.image.base.itemsize, a.image.height, a.image.width) for a in args)
    return lib + table + struct.pack("<I", len(args)) + TABLE_MAGIC


def split_image_table(lib: bytes) -> tuple[bytes, tuple[ImageArg, ...]]:
    """The library without its image table, and the table."""
    if not lib.endswith(TABLE_MAGIC):
        return lib, ()
    count = struct.unpack_from("<I", lib, len(lib) - len(TABLE_MAGIC) - 4)[0]
    start = len(lib) - len(TABLE_MAGIC) - 4 - count * _ENTRY.size
    if start < 0:
        raise QCOMError(f"the program library's image table claims {count} images but the library has {len(lib)} bytes")
    args = []
    for at in range(start, start + count * _ENTRY.size, _ENTRY.size):
        index, writes, itemsize, height, width = _ENTRY.unpack_from(lib, at)
        args.append(ImageArg(index, bool(writes), ImageDType(dtypes.float16 if itemsize == 2 else dtypes.float32, height, width)))
    return lib[:start], tuple(args)


def pitched_rows(view: np.ndarray, image: ImageDType) -> np.ndarray:
    """The (height, row_bytes) texel bytes inside a uint8 `view` of the image's GPU memory (rows `pitch` apart)."""
    return np.lib.stride_tricks.as_strided(view, (image.height, image.row_bytes), (pitch(image), 1), writeable=True)
