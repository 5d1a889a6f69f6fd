"""What a dispatch needs to know about an Adreno OpenCL program, read from the compiled library's descriptors.

The library layout (offsets of the image, the image descriptor, the register footprint, the kernel-argument and
constant descriptors) is the one Qualcomm's OpenCL compiler writes; the field offsets are facts from tinygrad's
ops_qcom.py. MOCKQCOM's compiler writes the same layout, so this parser is the one both devices run.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from . import packets as pk
from .errors import QCOMError

BUFTYPE_BUF, BUFTYPE_TEX, BUFTYPE_IBO = 0, 1, 2
# where the header keeps each descriptor
LIB_REG_DESC, LIB_CONST_DESC, LIB_CONST_COUNT, LIB_IMAGE_OFFSET, LIB_IMAGE_SIZE, LIB_IMAGE_DESC = 0x34, 0xAC, 0xB0, 0xC0, 0x100, 0x110
# offsets inside the image descriptor
DESC_PRG_OFFSET, DESC_PVTMEM, DESC_SHMEM, DESC_SAMPLERS, DESC_BRANCHSTACK, DESC_NAME = 0xC4, 0xC8, 0xD8, 0xDC, 0x108, 0x158
REG_DESC_FREGS, REG_DESC_HREGS = 0x14, 0x18
BUF_DESC_SIZE, CONST_DESC_SIZE = 32, 40
#: the kernarg (constant) space: arguments and constants below it, then UAV and texture descriptors, then samplers
ARGS_SPACE = 2048
TEX_DESC_SIZE = 0x40


def round_up(x: int, align: int) -> int:
    return -(-x // align) * align


def next_power2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


@dataclass(frozen=True)
class QCOMProgramInfo:
    """A parsed program: its image (shader code), dispatch settings and where its kernel arguments go.

    `buf_offs` holds the byte offset in the constant space of every argument, buffers first (8-byte addresses), then
    scalars; `consts` the immediates the compiler placed there as (value, byte offset, size 2 or 4)."""

    name: str
    image: bytes
    prg_offset: int
    branchstack: int
    pvtmem: int
    shmem: int
    fregs: int
    hregs: int
    buf_offs: tuple[int, ...]
    consts: tuple[tuple[int, int, int], ...] = ()
    tex_cnt: int = 0
    ibo_cnt: int = 0
    samplers: tuple[int, ...] = ()
    #: the descriptor kind (BUFTYPE_*) of every argument, in parameter order
    arg_kinds: tuple[int, ...] = ()
    #: the geometry of the image arguments (`image.ImageArg`s, in parameter order)
    images: tuple = ()

    @property
    def samp_cnt(self) -> int:
        return len(self.samplers) // 4

    @property
    def instr_units(self) -> int:
        """The image in CP_LOAD_STATE6 shader units (16 instructions of 8 bytes)."""
        return -(-len(self.image) // pk.SHADER_UNIT)

    @property
    def ibo_off(self) -> int:
        return ARGS_SPACE

    @property
    def tex_off(self) -> int:
        return ARGS_SPACE + TEX_DESC_SIZE * self.ibo_cnt

    @property
    def samp_off(self) -> int:
        return ARGS_SPACE + TEX_DESC_SIZE * (self.tex_cnt + self.ibo_cnt)

    @property
    def kernargs_size(self) -> int:
        """Bytes of the kernel's constant space the dispatch uploads (and the const load reads): arguments, texture and
        UAV descriptors, samplers, rounded to 256."""
        return round_up(ARGS_SPACE + (self.tex_cnt + self.ibo_cnt) * TEX_DESC_SIZE + len(self.samplers) * 4, 0x100)

    @property
    def pvtmem_per_item(self) -> int:
        """Private memory per work-item in 512-byte units."""
        return round_up(self.pvtmem, 512) >> 9

    @property
    def pvtmem_total(self) -> int:
        return self.pvtmem_per_item * 128 * 2

    @property
    def hw_stack_offset(self) -> int:
        """SP_CS_PVT_MEM_STACK_OFFSET; the private-memory stack needs 4 times this many bytes."""
        return round_up(next_power2(round_up(self.pvtmem, 512)) * 128 * 16, 0x1000)

    @property
    def stack_bytes(self) -> int:
        return self.hw_stack_offset * 4

    @property
    def shared_size(self) -> int:
        """SP_CS_CNTL_1.SHARED_SIZE: local memory in 1 KiB units (at least 1)."""
        return max(1, (self.shmem - 1) // 1024)

    @property
    def max_threads(self) -> int:
        """The largest work-group the register footprint allows."""
        return min(1024, ((384 * 32) // (max(1, self.fregs + round_up(self.hregs, 2) // 2) * 128)) * 128)


def _u32(lib: bytes, offset: int) -> int:
    if offset + 4 > len(lib):
        raise QCOMError(f"the program library is truncated: it has {len(lib)} bytes, a descriptor field is at {offset:#x}")
    return struct.unpack_from("<I", lib, offset)[0]


def sampler_words() -> list[int]:
    """One sampler (4 dwords): clamp to the (black) border on every axis, unnormalized coordinates."""
    wrap = (pk.A6XX_TEX_CLAMP_TO_BORDER << pk.TEX_SAMP_0_WRAP_S_SHIFT | pk.A6XX_TEX_CLAMP_TO_BORDER << pk.TEX_SAMP_0_WRAP_T_SHIFT
            | pk.A6XX_TEX_CLAMP_TO_BORDER << pk.TEX_SAMP_0_WRAP_R_SHIFT)
    return [wrap, pk.TEX_SAMP_1_UNNORM_COORDS | pk.TEX_SAMP_1_CUBEMAPSEAMLESSFILTOFF, 0, 0]


def parse_lib(lib: bytes, name: str, images: tuple = ()) -> QCOMProgramInfo:
    """Read the dispatch settings of kernel `name` from a compiled Adreno OpenCL library; `images` is the geometry of
    its image arguments (`image.ImageArg`s), one per texture or UAV descriptor."""
    image_offset, image_size = _u32(lib, LIB_IMAGE_OFFSET), _u32(lib, LIB_IMAGE_SIZE)
    if image_offset + image_size > len(lib) or image_size == 0:
        raise QCOMError(f"the program library's image ({image_size} bytes at {image_offset:#x}) is outside its {len(lib)} bytes")
    desc = _u32(lib, LIB_IMAGE_DESC)
    samplers_in_file = _u32(lib, desc + DESC_SAMPLERS)
    if samplers_in_file > 1:
        raise QCOMError(f"kernel {name!r} uses {samplers_in_file} samplers; the backend supports at most one")
    # a program with a sampler gets two sampler slots: the border-clamping one and an all-zero one after it
    samplers = sampler_words() + [0, 0, 0, 0] if samplers_in_file else []

    buffers: list[tuple[int, int]] = []
    offset = round_up(desc + DESC_NAME + len(name), 4) + 8 * samplers_in_file
    while offset + BUF_DESC_SIZE <= len(lib):
        length, _, _, offset_words, _, _, _, kind = struct.unpack_from("<8I", lib, offset)
        if length == 0:
            break
        buffers.append((offset_words * 4, kind))
        offset += length

    consts = []
    if _u32(lib, LIB_CONST_COUNT):
        offset = _u32(lib, LIB_CONST_DESC)
        while offset + CONST_DESC_SIZE <= image_offset:
            value = _u32(lib, offset)
            offset_units, _, is32 = struct.unpack_from("<3I", lib, offset + 16)
            size = 2 << is32
            consts.append((value, offset_units * size, size))
            offset += CONST_DESC_SIZE

    kinds = tuple(kind for _, kind in buffers)
    if (described := sum(kind in (BUFTYPE_TEX, BUFTYPE_IBO) for kind in kinds)) != len(images):
        raise QCOMError(f"kernel {name!r} has {described} image arguments in its library, but {len(images)} image geometries came with it")
    regs = _u32(lib, LIB_REG_DESC)
    return QCOMProgramInfo(
        name=name, image=bytes(lib[image_offset:image_offset + image_size]), prg_offset=_u32(lib, desc + DESC_PRG_OFFSET),
        branchstack=_u32(lib, desc + DESC_BRANCHSTACK) // 2, pvtmem=_u32(lib, desc + DESC_PVTMEM), shmem=_u32(lib, desc + DESC_SHMEM),
        fregs=_u32(lib, regs + REG_DESC_FREGS), hregs=_u32(lib, regs + REG_DESC_HREGS),
        buf_offs=tuple(off for off, kind in buffers if kind not in (BUFTYPE_TEX, BUFTYPE_IBO)), consts=tuple(consts),
        tex_cnt=sum(kind == BUFTYPE_TEX for _, kind in buffers), ibo_cnt=sum(kind == BUFTYPE_IBO for _, kind in buffers),
        samplers=tuple(samplers), arg_kinds=kinds, images=tuple(images))
