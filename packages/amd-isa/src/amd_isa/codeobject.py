"""AMD HSA code objects (ELF64, EM_AMDGPU): read .text, symbols and kernel descriptors; write one from machine code.

Kernel descriptor layout: LLVM AMDGPUUsage, "Kernel Descriptor" (64 bytes, symbol `<kernel>.kd` in .rodata).
"""

import struct
from dataclasses import dataclass, field

from .arch import TARGETS
from .errors import CodeObjectError

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
ELFABIVERSION_AMDGPU_HSA_V5 = 3
ET_DYN = 3
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOBITS, SHT_DYNSYM = 1, 2, 3, 8, 11
SHDR_SIZE, SYM_SIZE = 64, 24  # ELF64 section header and symbol entry sizes
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
STT_OBJECT, STT_FUNC, STT_AMDGPU_HSA_KERNEL = 1, 2, 10
STB_GLOBAL = 1
KD_SIZE = 64
SHN_ABS = 0xFFF1
# e_flags mach values (EF_AMDGPU_MACH_*) of the targets this package knows.
MACH: dict[str, int] = {"gfx1100": 0x41, "gfx1101": 0x46, "gfx1102": 0x47, "gfx1103": 0x44, "gfx1150": 0x43, "gfx1151": 0x4A,
                        "gfx1200": 0x48, "gfx1201": 0x4E, "gfx90a": 0x3F, "gfx940": 0x40, "gfx941": 0x4B, "gfx942": 0x4C, "gfx950": 0x4F}
EF_AMDGPU_MACH = 0xFF
# (name, offset, struct format) of the kernel descriptor fields.
KD_FIELDS = (
    ("group_segment_fixed_size", 0, "<I"), ("private_segment_fixed_size", 4, "<I"), ("kernarg_size", 8, "<I"),
    ("kernel_code_entry_byte_offset", 16, "<q"), ("compute_pgm_rsrc3", 44, "<I"), ("compute_pgm_rsrc1", 48, "<I"),
    ("compute_pgm_rsrc2", 52, "<I"), ("kernel_code_properties", 56, "<H"), ("kernarg_preload", 58, "<H"),
)
# kernel_code_properties bits: the user SGPRs the hardware/firmware set up, in order.
USER_SGPR_BITS = (("private_segment_buffer", 0, 4), ("dispatch_ptr", 1, 2), ("queue_ptr", 2, 2), ("kernarg_segment_ptr", 3, 2),
                  ("dispatch_id", 4, 2), ("flat_scratch_init", 5, 2), ("private_segment_size", 6, 1))
WAVE32_BIT = 10


@dataclass
class KernelDescriptor:
    """The 64-byte AMDHSA kernel descriptor: segment sizes, entry offset, rsrc1/2/3 and user-SGPR setup."""

    group_segment_fixed_size: int = 0
    private_segment_fixed_size: int = 0
    kernarg_size: int = 0
    kernel_code_entry_byte_offset: int = 0
    compute_pgm_rsrc3: int = 0
    compute_pgm_rsrc1: int = 0
    compute_pgm_rsrc2: int = 0
    kernel_code_properties: int = 0
    kernarg_preload: int = 0

    @classmethod
    def from_bytes(cls, data: bytes) -> "KernelDescriptor":
        """Parse a 64-byte descriptor."""
        if len(data) < KD_SIZE:
            raise CodeObjectError(f"kernel descriptor is {len(data)} bytes, expected {KD_SIZE}")
        return cls(**{name: struct.unpack_from(fmt, data, off)[0] for name, off, fmt in KD_FIELDS})

    def to_bytes(self) -> bytes:
        """The 64-byte encoding."""
        out = bytearray(KD_SIZE)
        for name, off, fmt in KD_FIELDS:
            struct.pack_into(fmt, out, off, getattr(self, name))
        return bytes(out)

    @property
    def user_sgprs(self) -> list[str]:
        """Names of the enabled user-SGPR inputs, in the order they occupy s0, s1, ..."""
        return [name for name, bit, _ in USER_SGPR_BITS if self.kernel_code_properties >> bit & 1]

    @property
    def user_sgpr_count(self) -> int:
        """USER_SGPR_COUNT from compute_pgm_rsrc2 (bits 5:1)."""
        return (self.compute_pgm_rsrc2 >> 1) & 0x1F

    @property
    def wave32(self) -> bool:
        """Whether the kernel runs in wave32 mode (RDNA)."""
        return bool(self.kernel_code_properties >> WAVE32_BIT & 1)

    @property
    def lds_size(self) -> int:
        """Static LDS bytes (the group segment)."""
        return self.group_segment_fixed_size

    @property
    def scratch_size(self) -> int:
        """Per-lane scratch bytes (the private segment)."""
        return self.private_segment_fixed_size

    def fields(self) -> dict[str, int]:
        """All fields as a dict (what `CodeObject.kernels` maps each kernel name to)."""
        return {name: getattr(self, name) for name, _, _ in KD_FIELDS}


@dataclass
class Symbol:
    """An ELF symbol: name, value (virtual address), size, type and the section it lives in."""

    name: str
    value: int
    size: int
    type: int
    section: str


@dataclass
class CodeObject:
    """An AMD HSA code object: the machine code of .text, its address, symbols and kernel descriptors."""

    text: bytes
    text_addr: int = 0
    target: str = ""
    symbols: dict[str, Symbol] = field(default_factory=dict)
    descriptors: dict[str, KernelDescriptor] = field(default_factory=dict)

    @property
    def kernels(self) -> dict[str, dict[str, int]]:
        """kernel name -> kernel descriptor fields (plus `entry`, the kernel's code address)."""
        out = {}
        for name, kd in self.descriptors.items():
            entry = self.symbols[name].value if name in self.symbols else self.symbols[f"{name}.kd"].value + kd.kernel_code_entry_byte_offset
            out[name] = {**kd.fields(), "entry": entry}
        return out

    @classmethod
    def from_bytes(cls, blob: bytes) -> "CodeObject":
        """Parse an ELF64 AMDGPU code object; raises CodeObjectError if it is not one."""
        return _read(blob)

    def to_bytes(self) -> bytes:
        """Serialise as a loadable ELF64 ET_DYN code object (.text, .rodata descriptors, .dynsym/.symtab)."""
        return _write(self)

    @classmethod
    def from_code(cls, code: bytes, target: str, kernel: str = "kernel", descriptor: KernelDescriptor | None = None) -> "CodeObject":
        """A code object holding one kernel whose code is `code`; the descriptor's entry offset is filled in by `to_bytes`."""
        if target not in MACH:
            raise CodeObjectError(f"unknown target {target!r}; use one of {', '.join(MACH)}")
        kd = descriptor or default_descriptor(target)
        return cls(text=code, target=target, symbols={kernel: Symbol(kernel, 0, len(code), STT_FUNC, ".text")}, descriptors={kernel: kd})


def default_descriptor(target: str) -> KernelDescriptor:
    """A descriptor for a simple kernel: kernarg pointer in s[0:1], workgroup id x enabled, wave32 on RDNA."""
    rdna = TARGETS.get(target, "").startswith("rdna")
    properties = 1 << 3 | (1 << WAVE32_BIT if rdna else 0)
    # rsrc2: USER_SGPR_COUNT=2 (bits 5:1), ENABLE_SGPR_WORKGROUP_ID_X (bit 7).
    rsrc2 = 2 << 1 | 1 << 7
    # rsrc1: FLOAT_DENORM_MODE_16_64=3 (bits 19:18), DX10_CLAMP/IEEE_MODE (bits 21, 23) as LLVM's defaults, plus WGP/MEM_ORDERED on gfx10+.
    rsrc1 = 3 << 18 | 1 << 21 | 1 << 23 | ((1 << 29 | 1 << 30) if rdna else 0)
    return KernelDescriptor(compute_pgm_rsrc1=rsrc1, compute_pgm_rsrc2=rsrc2, kernel_code_properties=properties)


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode("utf-8", "replace")


def _read(blob: bytes) -> CodeObject:
    if len(blob) < 64 or blob[:4] != b"\x7fELF":
        raise CodeObjectError("not an ELF file (bad magic)")
    # tinygrad's minimal ELF writer leaves EI_DATA, e_machine and e_shentsize zero: read those as little-endian AMDGPU with
    # 64-byte section headers; only what we cannot read (ELF32, big-endian, another machine) is refused.
    if blob[4] != 2 or blob[5] not in (0, 1):
        raise CodeObjectError("only little-endian ELF64 code objects are supported")
    e_machine, e_flags = struct.unpack_from("<H", blob, 18)[0], struct.unpack_from("<I", blob, 48)[0]
    if e_machine not in (EM_AMDGPU, 0):
        raise CodeObjectError(f"ELF machine is {e_machine}, not AMDGPU ({EM_AMDGPU})")
    e_shoff = struct.unpack_from("<Q", blob, 40)[0]
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", blob, 58)
    e_shentsize = e_shentsize or SHDR_SIZE
    if e_shentsize < SHDR_SIZE:
        raise CodeObjectError(f"ELF section header size is {e_shentsize}, expected at least {SHDR_SIZE}")
    if e_shoff + e_shnum * e_shentsize > len(blob):
        raise CodeObjectError("truncated ELF: section headers run past the end of the file")
    sections = []
    for i in range(e_shnum):
        name, kind, flags, addr, offset, size, link, info, align, entsize = struct.unpack_from("<IIQQQQIIQQ", blob, e_shoff + i * e_shentsize)
        if kind != SHT_NOBITS and offset + size > len(blob):
            raise CodeObjectError(f"truncated ELF: section {i} runs past the end of the file")
        sections.append((name, kind, addr, offset, size, link, entsize))
    shstr = _section_bytes(blob, sections, e_shstrndx)
    names = [_cstr(shstr, s[0]) for s in sections]
    by_name = {name: s for name, s in zip(names, sections, strict=True)}
    if ".text" not in by_name:
        raise CodeObjectError("code object has no .text section")
    _, _, text_addr, text_off, text_size, _, _ = by_name[".text"]
    symbols: dict[str, Symbol] = {}
    for _, kind, _, offset, size, link, entsize in sections:
        if kind not in (SHT_SYMTAB, SHT_DYNSYM) or entsize < SYM_SIZE:
            continue
        strtab = _section_bytes(blob, sections, link)
        for at in range(offset, offset + size - SYM_SIZE + 1, entsize):
            st_name, st_info, _, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", blob, at)
            name = _cstr(strtab, st_name)
            if name and name not in symbols:
                section = names[st_shndx] if st_shndx < len(names) else ""
                symbols[name] = Symbol(name, st_value, st_size, st_info & 0xF, section)
    descriptors = {}
    for name, sym in symbols.items():
        if not name.endswith(".kd"):
            continue
        for sec_name, (_, kind, addr, offset, size, _, _) in zip(names, sections, strict=True):
            if sec_name == sym.section and kind != SHT_NOBITS and addr <= sym.value and sym.value + KD_SIZE <= addr + size:
                at = offset + sym.value - addr
                descriptors[name.removesuffix(".kd")] = KernelDescriptor.from_bytes(blob[at:at + KD_SIZE])
    mach = e_flags & EF_AMDGPU_MACH
    target = next((t for t, m in MACH.items() if m == mach), "")
    return CodeObject(blob[text_off:text_off + text_size], text_addr, target, symbols, descriptors)


def _section_bytes(blob: bytes, sections: list[tuple[int, int, int, int, int, int, int]], index: int) -> bytes:
    """The file bytes of section `index` (empty when the index is out of range or the section has none)."""
    if index >= len(sections) or sections[index][1] == SHT_NOBITS:
        return b""
    offset, size = sections[index][3], sections[index][4]
    return blob[offset:offset + size]


class _Strtab:
    """An ELF string table being built."""

    def __init__(self) -> None:
        self.data = bytearray(b"\0")

    def add(self, name: str) -> int:
        """Append a name and return its offset in the table."""
        at = len(self.data)
        self.data += name.encode() + b"\0"
        return at


def _align(value: int, to: int) -> int:
    return (value + to - 1) // to * to


def _write(co: CodeObject) -> bytes:
    if co.target not in MACH:
        raise CodeObjectError(f"cannot write a code object for unknown target {co.target!r}")
    kd_names = list(co.descriptors)
    # Layout (one RX+R image, addresses == file offsets): header, .rodata descriptors at 0x40 multiples, .text at 0x100 alignment.
    rodata_off = 0x100
    rodata = bytearray()
    text_off = _align(rodata_off + KD_SIZE * len(kd_names), 0x100)
    for name in kd_names:
        kd = co.descriptors[name]
        # symbol values are addresses: the entry is its offset into .text (at text_addr)
        entry = co.symbols[name].value - co.text_addr if name in co.symbols else 0
        if not 0 <= entry <= len(co.text):
            raise CodeObjectError(f"kernel {name!r} enters at {entry + co.text_addr:#x}, outside its .text "
                                  f"({len(co.text)} bytes at {co.text_addr:#x})")
        kd_addr = rodata_off + len(rodata)
        kd.kernel_code_entry_byte_offset = text_off + entry - kd_addr
        rodata += kd.to_bytes()
    strtab, shstrtab = _Strtab(), _Strtab()
    syms = bytearray(24)
    for name, sym in co.symbols.items():
        if name.endswith(".kd"):
            continue  # descriptor symbols are written with the descriptors below (a second one would hide them)
        if sym.section == "":  # an absolute symbol (SHN_ABS: a constant such as a segment size) keeps its value
            syms += struct.pack("<IBBHQQ", strtab.add(name), STB_GLOBAL << 4 | (sym.type & 0xF), 0, SHN_ABS, sym.value & (1 << 64) - 1,
                                sym.size & (1 << 64) - 1)
            continue
        if sym.section != ".text":
            continue
        offset = sym.value - co.text_addr
        if not (0 <= offset <= len(co.text) and 0 <= sym.size < 1 << 63):
            raise CodeObjectError(f"symbol {name!r} (address {sym.value:#x}, size {sym.size}) lies outside .text "
                                  f"({len(co.text)} bytes at {co.text_addr:#x})")
        syms += struct.pack("<IBBHQQ", strtab.add(name), STB_GLOBAL << 4 | STT_FUNC, 0, 2, text_off + offset, sym.size)
    for index, name in enumerate(kd_names):
        syms += struct.pack("<IBBHQQ", strtab.add(f"{name}.kd"), STB_GLOBAL << 4 | STT_OBJECT, 0, 1, rodata_off + index * KD_SIZE, KD_SIZE)
    body = bytearray(text_off + len(co.text))
    body[rodata_off:rodata_off + len(rodata)] = rodata
    body[text_off:text_off + len(co.text)] = co.text
    symtab_off = _align(len(body), 8)
    body += bytes(symtab_off - len(body)) + syms
    strtab_off = len(body)
    body += strtab.data
    section_names = ["", ".rodata", ".text", ".symtab", ".strtab", ".shstrtab"]
    name_offsets = [shstrtab.add(n) if n else 0 for n in section_names]
    shstrtab_off = len(body)
    body += shstrtab.data
    shoff = _align(len(body), 8)
    body += bytes(shoff - len(body))
    headers = [
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        (name_offsets[1], SHT_PROGBITS, SHF_ALLOC, rodata_off, rodata_off, len(rodata), 0, 0, 64, 0),
        (name_offsets[2], SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, text_off, text_off, len(co.text), 0, 0, 256, 0),
        (name_offsets[3], SHT_SYMTAB, 0, 0, symtab_off, len(syms), 4, 1, 8, 24),
        (name_offsets[4], SHT_STRTAB, 0, 0, strtab_off, len(strtab.data), 0, 0, 1, 0),
        (name_offsets[5], SHT_STRTAB, 0, 0, shstrtab_off, len(shstrtab.data), 0, 0, 1, 0),
    ]
    for header in headers:
        body += struct.pack("<IIQQQQIIQQ", *header)
    # One PT_LOAD segment maps descriptors and code (read + execute), as loaders that ignore sections expect.
    end = text_off + len(co.text)
    body[64:64 + 56] = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, end, end, 0x1000)
    ident = b"\x7fELF" + bytes([2, 1, 1, ELFOSABI_AMDGPU_HSA, ELFABIVERSION_AMDGPU_HSA_V5]) + bytes(7)
    elf_header = ident + struct.pack("<HHIQQQIHHHHHH", ET_DYN, EM_AMDGPU, 1, 0, 64, shoff, MACH[co.target], 64, 56, 1, 64, len(headers), 5)
    body[:64] = elf_header
    return bytes(body)
