"""Compiling buffer instructions (MUBUF, MTBUF, RDNA4 VBUFFER): untyped, format and typed loads and stores, atomics and
loads to LDS, through a 128-bit buffer resource descriptor (V#).

Addressing (no swizzle): address = base + soffset + index * stride + offset, where index is the IDXEN VGPR (plus the
lane id with ADD_TID_ENABLE) and offset is the OFFEN VGPR plus the instruction offset. Range checking works on whole
accesses and leaves the soffset out: a structured buffer checks index < num_records (gfx10+ OOB_SELECT 0 and 1; gfx9
when the stride is non-zero and an index is used), a raw one offset + size <= num_records (OOB_SELECT 3; gfx9
otherwise), OOB_SELECT 2 nothing; out-of-range loads read 0 and out-of-range stores are dropped. A zero base with gfx9 is
the private segment buffer: the access goes to the wave's scratch, as gfx9 kernels spill through it. Swizzled
descriptors and the descriptor's DST_SEL component swizzle are not modelled.

Format conversions (buffer_*_format_*, tbuffer_*): the data format's components are 8, 16 or 32 bits (the packed
10/11-bit formats are not emulated); UNORM/SNORM scale to [0, 1] / [-1, 1] floats, USCALED/SSCALED convert integers to
floats, UINT/SINT extend, FLOAT widens halves. Components the format lacks load as 0, and w as 1. D16 forms pack
16-bit results two per register.
"""

from collections.abc import Callable

import numpy as np

from ..inst import Inst
from .errors import EmulatorError, unsupported
from .names import canonical
from .operand_access import scalar_reader
from .vmem import _from_registers, _load_kind, _scratch_gather, _scratch_scatter, _to_registers, compile_atomic, compile_load_to_lds
from .wave_state import WaveState

Op = Callable[[WaveState], None]
U32, U64 = np.uint32, np.uint64
CACHE_CONTROLS = ("buffer_gl0_inv", "buffer_gl1_inv", "buffer_wbinvl1", "buffer_wbinvl1_vol", "buffer_wbl2", "buffer_inv")
# gfx9 DATA_FORMAT -> component widths (x first); None marks the packed formats the emulator does not convert.
DATA_FORMATS: dict[int, tuple[int, ...] | None] = {
    1: (8,), 2: (16,), 3: (8, 8), 4: (32,), 5: (16, 16), 6: None, 7: None, 8: None, 9: None, 10: (8, 8, 8, 8), 11: (32, 32),
    12: (16, 16, 16, 16), 13: (32, 32, 32), 14: (32, 32, 32, 32),
}
UNORM, SNORM, USCALED, SSCALED, UINT, SINT, FLOAT = 0, 1, 2, 3, 4, 5, 7
# gfx11+ unified FORMAT -> (gfx9 data format, number format), in LLVM's UfmtGFX11 order (SIDefines / AMDGPUBaseInfo).
_NUMS_8_16 = (UNORM, SNORM, USCALED, SSCALED, UINT, SINT)
UNIFIED_FORMATS: dict[int, tuple[int, int]] = dict(enumerate(
    [(0, UNORM)] + [(1, n) for n in _NUMS_8_16] + [(2, n) for n in (*_NUMS_8_16, FLOAT)] + [(3, n) for n in _NUMS_8_16]
    + [(4, n) for n in (UINT, SINT, FLOAT)] + [(5, n) for n in (*_NUMS_8_16, FLOAT)] + [(6, FLOAT), (7, FLOAT)]
    + [(8, n) for n in (UNORM, SNORM, UINT, SINT)] + [(9, n) for n in _NUMS_8_16] + [(10, n) for n in _NUMS_8_16]
    + [(11, n) for n in (UINT, SINT, FLOAT)] + [(12, n) for n in (*_NUMS_8_16, FLOAT)] + [(13, n) for n in (UINT, SINT, FLOAT)]
    + [(14, n) for n in (UINT, SINT, FLOAT)]))


class Descriptor:
    """The fields of a buffer resource descriptor the emulator uses, read from four SGPRs."""

    def __init__(self, words: list[int], arch: str):
        self.base = words[0] | ((words[1] & 0xFFFF) << 32)
        self.stride = (words[1] >> 16) & 0x3FFF
        self.num_records = words[2]
        self.add_tid = bool(words[3] >> 23 & 1)
        # gfx10+ OOB_SELECT: 0 structured (index and offset within the record), 1 structured (index), 2 unchecked, 3 raw.
        self.oob_select = None if arch == "cdna" else (words[3] >> 28) & 3
        if arch == "cdna":
            self.format = ((words[3] >> 15) & 0xF, (words[3] >> 12) & 7)
        else:
            self.format = UNIFIED_FORMATS.get((words[3] >> 12) & 0x3F, (0, 0))


def _format_of(inst: Inst, pc: int) -> tuple[int, int] | None:
    """The (data format, number format) a typed instruction names, or None when the descriptor supplies it."""
    f = inst.fields
    if "dfmt" in f:
        return f["dfmt"], f["nfmt"]
    if "format" in f and canonical(inst).startswith("tbuffer"):
        if f["format"] not in UNIFIED_FORMATS:
            raise unsupported(inst, pc, f"buffer format {f['format']}")
        return UNIFIED_FORMATS[f["format"]]
    return None


def compile_buffer(inst: Inst, pc: int) -> Op:
    """A closure executing one MUBUF / MTBUF / VBUFFER instruction."""
    name = canonical(inst)
    if name in CACHE_CONTROLS:
        return lambda st: None
    f = inst.fields
    arch = inst.arch.name
    rsrc = f["srsrc"] * 4 if "srsrc" in f else f["rsrc"]
    vaddr, vdata = f["vaddr"], f["vdata"]
    inst_offset = f.get("offset", f.get("ioffset", 0))
    soffset = scalar_reader(f["soffset"], 32, "U32", None)
    idxen, offen = bool(f.get("idxen")), bool(f.get("offen"))
    acc = bool(f.get("acc"))  # CDNA: the data registers are AGPRs

    def locate(st: WaveState, lanes: np.ndarray) -> tuple[Descriptor, np.ndarray, np.ndarray]:
        """(descriptor, byte offset within the buffer, in-range check value) per lane."""
        desc = Descriptor([st.s[rsrc + i] for i in range(4)], arch)
        index = st.v[vaddr, lanes].astype(np.int64) if idxen else np.zeros(lanes.size, np.int64)
        if desc.add_tid:
            index = index + lanes
        voffset = st.v[vaddr + idxen, lanes].astype(np.int64) if offen else 0
        offset = index * desc.stride + voffset + inst_offset
        return desc, offset, index

    def in_range(desc: Descriptor, offset: np.ndarray, index: np.ndarray, nbytes: int) -> np.ndarray:
        mode = desc.oob_select
        if mode == 2:
            return np.ones(offset.size, bool)
        if mode in (0, 1) or (mode is None and desc.stride and (idxen or desc.add_tid)):
            ok = index < desc.num_records
            if mode == 0:
                ok &= offset - index * desc.stride + nbytes <= desc.stride
            return ok
        return offset + nbytes <= desc.num_records

    def address(st: WaveState, lanes: np.ndarray) -> np.ndarray:
        desc, offset, _ = locate(st, lanes)
        return (offset + soffset(st) + desc.base).astype(U64)

    def memory_gather(st: WaveState, lanes: np.ndarray, addresses: np.ndarray, nbytes: int) -> np.ndarray:
        return st.memory.gather(addresses, nbytes)

    def memory_scatter(st: WaveState, lanes: np.ndarray, addresses: np.ndarray, payload: np.ndarray) -> None:
        st.memory.scatter(addresses, payload)

    if "_atomic_" in name:
        if acc:
            raise unsupported(inst, pc, "atomics on accumulation registers are not emulated")
        return compile_atomic(inst, pc, address, memory_gather, memory_scatter, vdata, vdata)
    if "_load_lds_" in name or (f.get("lds") and "_load_" in name):
        if "format" in name:
            raise unsupported(inst, pc, "format loads to LDS are not emulated")
        return compile_load_to_lds(name.replace("_load_lds_", "_load_").replace("_load_", "_load_lds_"), address, memory_gather, inst_offset)
    if "format" in name:
        return _compile_format(inst, pc, name, locate, in_range, soffset, vdata, acc)
    if "_load_" not in name and "_store_" not in name:
        raise unsupported(inst, pc)
    store = "_store_" in name
    if store:
        tail = name.split("store_", 1)[1]
        hi16, nbytes = "d16_hi" in tail, int(tail.replace("d16_hi_", "")[1:]) // 8
    else:
        nbytes, kind = _load_kind(name)

    def run(st: WaveState) -> None:
        lanes = st.lanes if st.exec_full else np.flatnonzero(st.exec_mask)
        desc, offset, index = locate(st, lanes)
        offsets = offset + soffset(st)
        if desc.base == 0 and arch == "cdna":
            if store:
                _scratch_scatter(st, lanes, offsets, _from_registers(st, vdata, nbytes, lanes, hi16, acc))
            else:
                _to_registers(st, _scratch_gather(st, lanes, offsets, nbytes), kind, vdata, lanes, st.exec_full, acc)
            return
        ok = in_range(desc, offset, index, nbytes)
        addresses = (offsets + desc.base).astype(U64)
        if store:
            st.memory.scatter(addresses[ok], _from_registers(st, vdata, nbytes, lanes[ok], hi16, acc))
            return
        data = np.zeros((lanes.size, nbytes), np.uint8)
        data[ok] = st.memory.gather(addresses[ok], nbytes)
        _to_registers(st, data, kind, vdata, lanes, st.exec_full, acc)
    return run


def _compile_format(inst: Inst, pc: int, name: str, locate, in_range, soffset, vdata: int, acc: bool) -> Op:
    """buffer_load/store_format_* and tbuffer_*: component conversions between memory and registers."""
    fixed = _format_of(inst, pc)
    count = len(name.rsplit("_", 1)[1])  # x, xy, xyz, xyzw
    d16, hi = "d16" in name, "d16_hi" in name
    store = "_store_" in name
    file_of = (lambda st: st.a) if acc else (lambda st: st.v)

    def layout(fmt: tuple[int, int]) -> tuple[tuple[int, ...], int] | None:
        widths = DATA_FORMATS.get(fmt[0])
        if widths is None or (fmt[1] == FLOAT and widths[0] == 8) or fmt[1] == 6:
            return None
        return widths, fmt[1]

    if fixed is not None and layout(fixed) is None:
        raise unsupported(inst, pc, f"data format {fixed[0]} with number format {fixed[1]}")

    def run(st: WaveState) -> None:
        lanes = st.lanes if st.exec_full else np.flatnonzero(st.exec_mask)
        desc, offset, index = locate(st, lanes)
        found = layout(fixed or desc.format)
        if found is None:
            raise EmulatorError(f"{name} at pc {pc:#x}: the descriptor's data format {desc.format[0]} with number format "
                                f"{desc.format[1]} is not emulated")
        widths, number = found
        nbytes = sum(widths) // 8
        ok = in_range(desc, offset, index, nbytes)
        addresses = (offset + soffset(st) + desc.base).astype(U64)
        file = file_of(st)
        if store:
            values = _registers_to_components(file, vdata, lanes, count, d16, hi)
            st.memory.scatter(addresses[ok], encode_components([value[ok] for value in values], widths, number, d16))
            return
        raw = np.zeros((lanes.size, nbytes), np.uint8)
        raw[ok] = st.memory.gather(addresses[ok], nbytes)
        _components_to_registers(file, vdata, lanes, decode_components(raw, widths, number, count, d16), d16, hi)
    return run


def _split(raw: np.ndarray, widths: tuple[int, ...]) -> list[np.ndarray]:
    """Component bit patterns (int64) of (lanes, bytes) data, x first."""
    out, byte = [], 0
    for width in widths:
        chunk = raw[:, byte:byte + width // 8].astype(np.int64)
        out.append(sum(chunk[:, i] << (8 * i) for i in range(width // 8)))
        byte += width // 8
    return out


def decode_components(raw: np.ndarray, widths: tuple[int, ...], number: int, count: int, d16: bool) -> list[np.ndarray]:
    """`count` register values (uint32, or uint16 bit patterns for D16) of the components; missing ones are 0, w is 1."""
    parts = _split(raw, widths)
    is_float = number in (UNORM, SNORM, USCALED, SSCALED, FLOAT)
    out = []
    for c in range(count):
        if c < len(parts):
            bits, width = parts[c], widths[c]
            signed = np.where(bits >> (width - 1), bits - (1 << width), bits) if width < 64 else bits
            if number == UNORM:
                value = bits / ((1 << width) - 1)
            elif number == SNORM:
                value = np.maximum(signed / ((1 << (width - 1)) - 1), -1.0)
            elif number == USCALED:
                value = bits.astype(np.float64)
            elif number == SSCALED:
                value = signed.astype(np.float64)
            elif number == FLOAT:
                value = bits.astype(np.uint16).view(np.float16).astype(np.float64) if width == 16 else bits.astype(U32).view(np.float32)
            else:
                value = signed if number == SINT else bits
        else:
            value = np.full(raw.shape[0], 1.0 if c == 3 and is_float else (1 if c == 3 else 0))
        if is_float:
            out.append(np.asarray(value, np.float64).astype(np.float16).view(np.uint16) if d16 else np.asarray(value).astype(np.float32).view(U32))
        else:
            out.append((np.asarray(value, np.int64) & (0xFFFF if d16 else 0xFFFFFFFF)).astype(np.uint16 if d16 else U32))
    return out


def encode_components(values: list[np.ndarray], widths: tuple[int, ...], number: int, d16: bool) -> np.ndarray:
    """(lanes, bytes) memory data of the register values of each component (uint32, or uint16 for D16)."""
    is_float = number in (UNORM, SNORM, USCALED, SSCALED, FLOAT)
    lanes = values[0].shape[0]
    out = np.zeros((lanes, sum(widths) // 8), np.uint8)
    byte = 0
    for c, width in enumerate(widths):
        reg = values[c] if c < len(values) else np.zeros(lanes, np.uint16 if d16 else U32)
        if is_float:
            x = (reg.view(np.float16) if d16 else reg.view(np.float32)).astype(np.float64)
            if number == UNORM:
                bits = np.rint(np.clip(np.nan_to_num(x), 0, 1) * ((1 << width) - 1)).astype(np.int64)
            elif number == SNORM:
                bits = np.rint(np.clip(np.nan_to_num(x), -1, 1) * ((1 << (width - 1)) - 1)).astype(np.int64)
            elif number in (USCALED, SSCALED):
                bits = np.rint(np.nan_to_num(x)).astype(np.int64)
            else:
                bits = (x.astype(np.float16).view(np.uint16) if width == 16 else x.astype(np.float32).view(U32)).astype(np.int64)
        else:
            bits = reg.astype(np.int64)
        bits &= (1 << width) - 1
        for i in range(width // 8):
            out[:, byte + i] = (bits >> (8 * i)) & 0xFF
        byte += width // 8
    return out


def _registers_to_components(file: np.ndarray, vdata: int, lanes: np.ndarray, count: int, d16: bool, hi: bool) -> list[np.ndarray]:
    if not d16:
        return [file[vdata + c, lanes] for c in range(count)]
    halves = file.view(np.uint16)
    return [halves[vdata + c // 2, 2 * lanes + (c % 2) + int(hi)] for c in range(count)]


def _components_to_registers(file: np.ndarray, vdata: int, lanes: np.ndarray, values: list[np.ndarray], d16: bool, hi: bool) -> None:
    if not d16:
        for c, value in enumerate(values):
            file[vdata + c, lanes] = value
        return
    halves = file.view(np.uint16)
    for c, value in enumerate(values):
        halves[vdata + c // 2, 2 * lanes + (c % 2) + int(hi)] = value
