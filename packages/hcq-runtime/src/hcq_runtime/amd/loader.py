"""Code-object loading: the ELF's PT_LOAD segments laid out at their virtual addresses, as the GPU sees them."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from amd_isa import CodeObject, CodeObjectError, KernelDescriptor

from .errors import AMDError

PT_LOAD, SHT_RELA, SHT_REL = 1, 4, 9


@dataclass(frozen=True)
class LoadedImage:
    """The load image of one kernel: bytes to place at a GPU address, and offsets of its descriptor and code in it."""

    image: bytes
    name: str
    descriptor: KernelDescriptor
    descriptor_offset: int
    entry_offset: int
    target: str | None  # the gfx target of the ELF header (None for minimal ELFs that do not record one)


def load_image(binary: bytes, kernel: str | None = None) -> LoadedImage:
    """Lay out `binary` (an AMD HSA code object) for loading and find `kernel` (default: its only kernel)."""
    try:
        co = CodeObject.from_bytes(binary)
    except CodeObjectError as e:
        raise AMDError(f"not a loadable AMD code object: {e}") from None
    if not co.descriptors:
        raise AMDError("the code object has no kernel descriptor (<name>.kd): was it linked with ld.lld -shared?")
    name = kernel or next(iter(co.descriptors))
    if name not in co.descriptors:
        raise AMDError(f"no kernel {name!r} in the code object; it has {', '.join(co.descriptors)}")
    phoff, = struct.unpack_from("<Q", binary, 0x20)
    shoff, = struct.unpack_from("<Q", binary, 0x28)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", binary, 0x36)
    for i in range(shnum):
        sh_type, = struct.unpack_from("<I", binary, shoff + i * shentsize + 4)
        sh_size, = struct.unpack_from("<Q", binary, shoff + i * shentsize + 32)
        if sh_type in (SHT_RELA, SHT_REL) and sh_size:
            raise AMDError("the code object has dynamic relocations, which this loader does not apply yet; build kernels without them")
    segments = []
    for i in range(phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz = struct.unpack_from("<IIQQQQQ", binary, phoff + i * phentsize)
        if p_type == PT_LOAD:
            segments.append((p_offset, p_vaddr, p_filesz, p_memsz))
    if not segments:
        raise AMDError("the code object has no PT_LOAD segment to load")
    image = bytearray(max(vaddr + memsz for _, vaddr, _, memsz in segments))
    for offset, vaddr, filesz, _ in segments:
        image[vaddr:vaddr + filesz] = binary[offset:offset + filesz]
    descriptor_offset = co.symbols[f"{name}.kd"].value if f"{name}.kd" in co.symbols else -1
    entry = co.kernels[name]["entry"]
    if not 0 <= descriptor_offset < len(image) or not 0 <= entry < len(image):
        raise AMDError(f"kernel {name!r}: its descriptor or code lies outside the loaded segments")
    return LoadedImage(bytes(image), name, co.descriptors[name], descriptor_offset, entry, co.target)
