"""Compiling image loads and stores without a sampler (RDNA3 MIMG, RDNA4 VIMAGE): image_load / image_store (and their
_mip forms at level 0) and image_get_resinfo, through a gfx10+ image resource descriptor (T#) of a linear image.

T# fields (facts of Mesa's gfx10+ descriptor layout, SQ_IMG_RSRC_WORD0..4): base address >> 8 in dword 0 and its bits
47:40 in dword 1 bits 7:0; the unified FORMAT in dword 1 bits 27:20 (the buffer format numbers); width - 1 split into
dword 1 bits 31:30 (low two bits) and dword 2 bits 11:0; height - 1 in dword 2 bits 27:14; DST_SEL_X/Y/Z/W in dword 3
bits 11:0 (0: zero, 1: one, 4-7: component x-w); SW_MODE in dword 3 bits 24:20; depth - 1 (3D) or the last array
slice in dword 4 bits 12:0.

The emulator models linear images only (SW_MODE 0): texel (x, y, slice) is at base + ((slice * height + y) * width + x)
* texel size, rows packed at the image width (pitch padding is not modelled). Coordinates outside the image load zeros
and drop stores. A load applies DST_SEL to the texel's components, then returns those DMASK enables, packed into
consecutive VGPRs (16-bit halves with D16); a store writes the enabled components. Mip levels above 0, MSAA, 16-bit
addresses (A16) and samplers (image_sample*, gather, BVH) are not emulated.
"""

from collections.abc import Callable

import numpy as np

from ..inst import Inst
from .buffer_insts import DATA_FORMATS, UNIFIED_FORMATS, decode_components, encode_components
from .errors import EmulatorError, unsupported
from .names import canonical
from .wave_state import WaveState

Op = Callable[[WaveState], None]
U32, U64 = np.uint32, np.uint64
# DIM field -> (address components, whether the last of them is an array slice).
DIMS = {0: (1, False), 1: (2, False), 2: (3, False), 3: (3, True), 4: (2, True), 5: (3, True)}


class ImageDescriptor:
    """The fields of a gfx10+ image descriptor the emulator uses."""

    def __init__(self, words: list[int], name: str, pc: int):
        self.base = (words[0] << 8) | ((words[1] & 0xFF) << 40)
        fmt = (words[1] >> 20) & 0xFF
        self.width = (((words[1] >> 30) & 3) | ((words[2] & 0xFFF) << 2)) + 1
        self.height = ((words[2] >> 14) & 0x3FFF) + 1
        self.dst_sel = [(words[3] >> (3 * c)) & 7 for c in range(4)]
        self.depth = (words[4] & 0x1FFF) + 1
        if (words[3] >> 20) & 0x1F:
            raise EmulatorError(f"{name} at pc {pc:#x}: tiled images (SW_MODE {(words[3] >> 20) & 0x1F}) are not emulated; use a linear image")
        if fmt not in UNIFIED_FORMATS or DATA_FORMATS.get(UNIFIED_FORMATS[fmt][0]) is None:
            raise EmulatorError(f"{name} at pc {pc:#x}: image format {fmt} is not emulated")
        self.data_format, self.number_format = UNIFIED_FORMATS[fmt]
        self.widths = DATA_FORMATS[self.data_format]
        self.texel_bytes = sum(self.widths) // 8


def _address_registers(inst: Inst) -> list[int]:
    """The VGPRs of the address components in order (sequential, or listed one by one in the NSA / VIMAGE forms)."""
    f = inst.fields
    if "vaddr0" in f:
        return [f[f"vaddr{i}"] for i in range(5)]
    if inst.variant == "NSA":
        return [f["vaddr"]] + [f[f"vaddr{i}"] for i in range(1, 5)]
    return [f["vaddr"] + i for i in range(5)]


def compile_image(inst: Inst, pc: int) -> Op:
    """A closure executing one image load/store/get_resinfo."""
    name = canonical(inst)
    f = inst.fields
    if name not in ("image_load", "image_load_mip", "image_store", "image_store_mip", "image_get_resinfo"):
        raise unsupported(inst, pc, "only image_load/image_store (linear, level 0) and image_get_resinfo are emulated")
    if f.get("a16") or f.get("dim", 0) not in DIMS:
        raise unsupported(inst, pc, "16-bit addresses and MSAA images are not emulated")
    rsrc = f["srsrc"] * 4 if "srsrc" in f else f["rsrc"]
    vdata, dmask, d16 = f["vdata"], f.get("dmask", 0xF), bool(f.get("d16"))
    count, arrayed = DIMS[f.get("dim", 0)]
    regs = _address_registers(inst)
    mip = name.endswith("_mip")
    components = [c for c in range(4) if dmask >> c & 1]

    def descriptor(st: WaveState) -> ImageDescriptor:
        return ImageDescriptor([st.s[rsrc + i] for i in range(8)], name, pc)

    if name == "image_get_resinfo":
        def run_info(st: WaveState) -> None:
            desc = descriptor(st)
            info = [desc.width, desc.height, desc.depth, 1]
            for slot, c in enumerate(components):
                st.v[vdata + slot] = np.where(st.exec_mask, info[c], st.v[vdata + slot])
        return run_info

    def texels(st: WaveState, lanes: np.ndarray, desc: ImageDescriptor) -> tuple[np.ndarray, np.ndarray]:
        """(byte address, in-bounds) per lane."""
        coords = [st.v[regs[i], lanes].astype(np.int64) for i in range(count)]
        if mip and np.any(st.v[regs[count], lanes]):
            raise EmulatorError(f"{name} at pc {pc:#x}: mip levels above 0 are not emulated")
        x = coords[0]
        y = coords[1] if count > 1 and not (arrayed and count == 2) else np.zeros_like(x)
        layer = coords[-1] if arrayed or count == 3 else np.zeros_like(x)
        layers = desc.depth if (arrayed or count == 3) else 1
        ok = (x < desc.width) & (y < desc.height) & (layer < layers)
        index = (layer * desc.height + y) * desc.width + x
        return (desc.base + index * desc.texel_bytes).astype(U64), ok

    if name.startswith("image_store"):
        def run_store(st: WaveState) -> None:
            lanes = st.lanes if st.exec_full else np.flatnonzero(st.exec_mask)
            desc = descriptor(st)
            addresses, ok = texels(st, lanes, desc)
            values = []
            for c in range(4):
                slot = components.index(c) if c in components else None
                if slot is None:
                    values.append(np.zeros(lanes.size, np.uint16 if d16 else U32))
                elif d16:
                    values.append(st.v.view(np.uint16)[vdata + slot // 2, 2 * lanes + slot % 2])
                else:
                    values.append(st.v[vdata + slot, lanes])
            st.memory.scatter(addresses[ok], encode_components([v[ok] for v in values], desc.widths, desc.number_format, d16))
        return run_store

    def run_load(st: WaveState) -> None:
        lanes = st.lanes if st.exec_full else np.flatnonzero(st.exec_mask)
        desc = descriptor(st)
        addresses, ok = texels(st, lanes, desc)
        raw = np.zeros((lanes.size, desc.texel_bytes), np.uint8)
        raw[ok] = st.memory.gather(addresses[ok], desc.texel_bytes)
        texel = decode_components(raw, desc.widths, desc.number_format, 4, d16)
        is_float = desc.number_format not in (4, 5)
        one = (np.float16(1).view(np.uint16) if d16 else np.float32(1).view(U32)) if is_float else 1
        for slot, c in enumerate(components):
            sel = desc.dst_sel[c]
            value = texel[sel - 4] if sel >= 4 else np.full(lanes.size, one if sel == 1 else 0)
            value = np.where(ok, value, 0)
            if d16:
                st.v.view(np.uint16)[vdata + slot // 2, 2 * lanes + slot % 2] = value
            else:
                st.v[vdata + slot, lanes] = value
    return run_load
