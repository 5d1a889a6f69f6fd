"""MOCKQCOM's compiler: the OpenCL C a `QCOMRenderer` writes, compiled by the host C compiler through a shim header,
packed in the same library layout Qualcomm's compiler writes (see program.py).

The library's image is a shared object exporting `uop_qcom_run(consts, dims, textures, uavs)`: it reads the kernel's
arguments from the constant space at the offsets the library's descriptors give, checks the compiler's constants
arrived where the descriptors put them, binds each image argument to the texture or UAV descriptor the CP loaded for
it (read_image / write_image decode the format, size, pitch and address from those 16 dwords, so a wrong descriptor
gives a wrong result), and runs every work-item of the dispatch. Work-groups of a kernel that calls `barrier` run
their work-items as coroutines (ucontext), so local memory and barriers behave as on the GPU. The image also exports
where its pointer arguments are (`uop_qcom_pointers`, `uop_qcom_npointers`), so the mock GPU can refuse a dispatch
whose buffers are not GPU memory instead of letting the host process crash.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from ..compiler import CCompiler, Compiler
from ..errors import CompileError
from . import program_lib as layout
from .image import image_args, with_image_table

SHIM_VERSION = 3  # bump when the shim or the entry changes: cached libraries of older versions must not be served
ENTRY, POINTERS, NPOINTERS = "uop_qcom_run", "uop_qcom_pointers", "uop_qcom_npointers"
#: the immediates the mock compiler places in every program's constant space: (value, byte offset, size)
CONSTS = ((0x0ADE9053, 0x20, 4), (0x6A30, 0x24, 2))
FIRST_ARG, ARG_SLOT = 0x40, 16
REGISTER_ARRAY_LIMIT = 256
ITEM_STACK = 128 << 10  # bytes of stack per work-item coroutine
FOOTPRINT_FREGS, FOOTPRINT_HREGS = 4, 0
REG_DESC_AT, IMAGE_DESC_AT = 0x200, 0x240  # where the mock's libraries put the two descriptors
SIZES = {"char": 1, "uchar": 1, "bool": 1, "short": 2, "ushort": 2, "half": 2, "int": 4, "uint": 4, "float": 4,
         "long": 8, "ulong": 8, "double": 8}

SHIM = r"""
#include <stdbool.h>
#include <string.h>
#include <stdlib.h>
#include <ucontext.h>
typedef unsigned char uchar; typedef unsigned short ushort; typedef unsigned int uint; typedef unsigned long ulong;
typedef _Float16 half;
#define __kernel static
#define __global
#define __local static
#define CLK_LOCAL_MEM_FENCE 1
#define CLK_GLOBAL_MEM_FENCE 2
static long uop_group[3], uop_local[3], uop_local_size[3], uop_groups[3];
#define get_group_id(d) uop_group[d]
#define get_local_id(d) uop_local[d]
#define get_local_size(d) uop_local_size[d]
#define get_num_groups(d) uop_groups[d]
#define get_global_id(d) (uop_group[d] * uop_local_size[d] + uop_local[d])
#define UOP_AS(T, x) ({ __typeof__(x) uop_v = (x); T uop_r; _Static_assert(sizeof uop_v == sizeof uop_r, "as_type size"); \
                        memcpy(&uop_r, &uop_v, sizeof uop_r); uop_r; })
#define as_char(x) UOP_AS(char, x)
#define as_uchar(x) UOP_AS(uchar, x)
#define as_short(x) UOP_AS(short, x)
#define as_ushort(x) UOP_AS(ushort, x)
#define as_half(x) UOP_AS(half, x)
#define as_int(x) UOP_AS(int, x)
#define as_uint(x) UOP_AS(uint, x)
#define as_float(x) UOP_AS(float, x)
#define as_long(x) UOP_AS(long, x)
#define as_ulong(x) UOP_AS(ulong, x)
#define as_double(x) UOP_AS(double, x)
/* OpenCL images over A6XX texture constants: width 14:0 and height 29:15 of dword 1, pitch 28:7 of dword 2, the
   format 29:22 of dword 0 (FMT6_16_16_16_16_FLOAT or FMT6_32_32_32_32_FLOAT), the address in dwords 4-5; reads
   outside the image return the black border, writes outside it are dropped */
typedef struct { float x, y, z, w; } float4;
typedef struct { half x, y, z, w; } half4;
typedef struct { int x, y; } uop_coord;
static inline uop_coord uop_make_coord(int x, int y) { uop_coord c = {x, y}; return c; }
#define int2 uop_make_coord /* the renderer writes coordinates as OpenCL vector literals, (int2)(x, y): here a call */
typedef struct { const unsigned *desc; } image2d_t;
typedef int sampler_t;
#define read_only
#define write_only
#define CLK_NORMALIZED_COORDS_FALSE 0
#define CLK_ADDRESS_CLAMP 0
#define CLK_FILTER_NEAREST 0
static unsigned char *uop_texel(image2d_t img, uop_coord c, int *is_float) {
  const unsigned *d = img.desc;
  int width = d[1] & 0x7fff, height = d[1] >> 15 & 0x7fff;
  *is_float = (d[0] >> 22 & 0xff) == 130;
  if (c.x < 0 || c.y < 0 || c.x >= width || c.y >= height) return 0;
  return (unsigned char *)(d[4] | (unsigned long)d[5] << 32) + (unsigned long)c.y * (d[2] >> 7 & 0x3fffff) + c.x * (*is_float ? 16 : 8);
}
static float4 read_imagef(image2d_t img, sampler_t s, uop_coord c) {
  int f; unsigned char *p = uop_texel(img, c, &f); float4 t = {0, 0, 0, 0}; half4 h; (void)s;
  if (p && f) memcpy(&t, p, 16);
  else if (p) { memcpy(&h, p, 8); t.x = h.x; t.y = h.y; t.z = h.z; t.w = h.w; }
  return t;
}
static half4 read_imageh(image2d_t img, sampler_t s, uop_coord c) {
  float4 t = read_imagef(img, s, c); half4 h = {t.x, t.y, t.z, t.w}; return h;
}
static void write_imagef(image2d_t img, uop_coord c, float4 t) {
  int f; unsigned char *p = uop_texel(img, c, &f); half4 h = {t.x, t.y, t.z, t.w};
  if (p && f) memcpy(p, &t, 16);
  else if (p) memcpy(p, &h, 8);
}
static void write_imageh(image2d_t img, uop_coord c, half4 h) { float4 t = {h.x, h.y, h.z, h.w}; write_imagef(img, c, t); }
static ucontext_t uop_main, *uop_items;
static int uop_current, uop_finished;
static void barrier(int flags) { (void)flags; swapcontext(&uop_items[uop_current], &uop_main); }
"""


@dataclass(frozen=True)
class KernelParam:
    """One parameter of the kernel: a global pointer, a scalar of `ctype`, or an image (`image` "read" or "write")."""

    name: str
    ctype: str
    pointer: bool
    image: str | None = None

    @property
    def size(self) -> int:
        return 8 if self.pointer else SIZES[self.ctype]

    @property
    def kind(self) -> int:
        """The library descriptor kind of the parameter."""
        return {None: layout.BUFTYPE_BUF, "read": layout.BUFTYPE_TEX, "write": layout.BUFTYPE_IBO}[self.image]


def kernel_signature(src: str) -> tuple[str, list[KernelParam]]:
    """The name and parameters of the (single) `__kernel` in `src`."""
    found = re.findall(r"__kernel\s+void\s+(\w+)\s*\(([^)]*)\)", src)
    if len(found) != 1:
        raise CompileError(f"MOCKQCOM compiles one __kernel per program, found {len(found)}")
    name, params_text = found[0]
    params = []
    for text in filter(None, (p.strip() for p in params_text.split(","))):
        if match := re.fullmatch(r"(?:const\s+)?__global\s+(?:const\s+)?(\w+)\s*\*\s*(?:restrict\s+)?(\w+)", text):
            params.append(KernelParam(match.group(2), match.group(1), True))
        elif match := re.fullmatch(r"(read|write)_only\s+image2d_t\s+(\w+)", text):
            params.append(KernelParam(match.group(2), "image2d_t", False, match.group(1)))
        elif (match := re.fullmatch(r"(?:const\s+)?(\w+)\s+(\w+)", text)) and match.group(1) in SIZES:
            params.append(KernelParam(match.group(2), match.group(1), False))
        else:
            raise CompileError(f"kernel {name}: MOCKQCOM cannot pass the parameter `{text}` (global pointers, images and scalars only)")
    return name, params


def array_bytes(src: str, local: bool) -> int:
    """Bytes of the arrays `src` declares in local memory (`local`), or of the private arrays too large for registers
    (over `REGISTER_ARRAY_LIMIT` bytes: a real compiler keeps small accumulators in registers)."""
    total = 0
    for qualifier, ctype, count in re.findall(r"(__local\s+)?\b(\w+)\s+\w+\[(\d+)\];", src):
        nbytes = SIZES.get(ctype, 0) * int(count)
        if bool(qualifier) == local and (local or nbytes > REGISTER_ARRAY_LIMIT):
            total += nbytes
    return total


def arg_offsets(params: list[KernelParam]) -> list[int]:
    """The constant-space byte offset of each parameter that is not an image (images are bound to descriptors)."""
    return [FIRST_ARG + ARG_SLOT * i for i in range(sum(p.image is None for p in params))]


def entry_source(name: str, params: list[KernelParam], uses_barrier: bool) -> str:
    """`uop_qcom_run`: the arguments read from the constant space, the images bound to the texture and UAV descriptors
    in parameter order, every work-item of the dispatch run."""
    offsets = iter(arg_offsets(params))
    binds, pointers, images = [], [], {"read": 0, "write": 0}
    for i, p in enumerate(params):
        if p.image is not None:
            binds.append(f"  uop_arg{i}.desc = {'tex' if p.image == 'read' else 'uav'} + {16 * images[p.image]};")
            images[p.image] += 1
        else:
            offset = next(offsets)
            binds.append(f"  memcpy(&uop_arg{i}, consts + {offset}, {p.size});")
            if p.pointer:
                pointers.append(offset)
    lines = [f"const unsigned {POINTERS}[] = {{{', '.join(map(str, pointers)) or '0'}}};", f"const unsigned {NPOINTERS} = {len(pointers)};"]
    lines += [f"static {p.ctype} {'*' if p.pointer else ''}uop_arg{i};" for i, p in enumerate(params)]
    call = f"{name}({', '.join(f'uop_arg{i}' for i in range(len(params)))});"
    lines += [f"static void uop_item(void) {{ {call} uop_finished = 1; }}",
              f"int {ENTRY}(const unsigned char *consts, const unsigned int *dims, const unsigned *tex, const unsigned *uav) {{"]
    for value, offset, size in CONSTS:
        ctype = "uint" if size == 4 else "ushort"
        lines.append(f"  {{ {ctype} c; memcpy(&c, consts + {offset}, {size}); if (c != {value}u) return 1; }}")
    lines += binds
    lines.append("  for (int d = 0; d < 3; d++) { uop_local_size[d] = dims[d]; uop_groups[d] = dims[3 + d]; }")
    lines.append("  long n = dims[0] * dims[1] * dims[2];")
    if uses_barrier:
        lines += [f"  uop_items = malloc(n * sizeof(ucontext_t)); char *stacks = malloc(n * {ITEM_STACK}l); int *done = calloc(n, sizeof(int));",
                  "  if (!uop_items || !stacks || !done) return 2;"]
    lines.append("  for (uop_group[2] = 0; uop_group[2] < dims[5]; uop_group[2]++) for (uop_group[1] = 0; uop_group[1] < dims[4]; uop_group[1]++)"
                 " for (uop_group[0] = 0; uop_group[0] < dims[3]; uop_group[0]++) {")
    if uses_barrier:
        lines += ["    for (long i = 0; i < n; i++) {",
                  f"      getcontext(&uop_items[i]); uop_items[i].uc_stack.ss_sp = stacks + i * {ITEM_STACK}l;",
                  f"      uop_items[i].uc_stack.ss_size = {ITEM_STACK}; uop_items[i].uc_link = &uop_main; makecontext(&uop_items[i], uop_item, 0);",
                  "      done[i] = 0;", "    }",
                  "    for (long left = n; left > 0;) for (long i = 0; i < n; i++) if (!done[i]) {",
                  "      uop_local[0] = i % dims[0]; uop_local[1] = i / dims[0] % dims[1]; uop_local[2] = i / (dims[0] * dims[1]);",
                  "      uop_current = (int)i; uop_finished = 0; swapcontext(&uop_main, &uop_items[i]);",
                  "      if (uop_finished) { done[i] = 1; left--; }",
                  "    }"]
    else:
        lines.append("    for (long i = 0; i < n; i++) { uop_local[0] = i % dims[0]; uop_local[1] = i / dims[0] % dims[1];"
                     " uop_local[2] = i / (dims[0] * dims[1]); uop_item(); }")
    lines.append("  }")
    if uses_barrier:
        lines.append("  free(uop_items); free(stacks); free(done);")
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


def build_lib(name: str, image: bytes, arg_offsets: list[int], consts: tuple[tuple[int, int, int], ...], *, pvtmem: int = 0,
              shmem: int = 0, fregs: int = FOOTPRINT_FREGS, hregs: int = FOOTPRINT_HREGS, branchstack: int = 0,
              kinds: list[int] | None = None) -> bytes:
    """A library in the layout `program.parse_lib` reads: header, register footprint, image descriptor with the
    kernel name, its sampler (when it reads images) and one descriptor per argument, the constant descriptors, then
    the image. `kinds` gives each argument's kind (BUFTYPE_*; default all buffers); `arg_offsets` are the constant
    offsets of the arguments that are not images, in order."""
    kinds = [layout.BUFTYPE_BUF] * len(arg_offsets) if kinds is None else kinds
    samplers = int(layout.BUFTYPE_TEX in kinds)
    desc_end = layout.round_up(IMAGE_DESC_AT + layout.DESC_NAME + len(name), 4) + 8 * samplers
    offsets = iter(arg_offsets)
    buf_descs = b"".join(struct.pack("<8I", layout.BUF_DESC_SIZE, 0, 0, 0 if kind != layout.BUFTYPE_BUF else next(offsets) // 4, 0, 0, 0, kind)
                         for kind in kinds)
    const_start = layout.round_up(desc_end + len(buf_descs) + layout.BUF_DESC_SIZE, 8)
    const_descs = b"".join(struct.pack("<I12xIII12x", value, offset // size, 0, int(size == 4)) for value, offset, size in consts)
    image_offset = const_start + len(const_descs)
    lib = bytearray(image_offset + len(image))
    for offset, value in ((layout.LIB_REG_DESC, REG_DESC_AT), (layout.LIB_CONST_DESC, const_start), (layout.LIB_CONST_COUNT, len(consts)),
                          (layout.LIB_IMAGE_OFFSET, image_offset), (layout.LIB_IMAGE_SIZE, len(image)), (layout.LIB_IMAGE_DESC, IMAGE_DESC_AT),
                          (REG_DESC_AT + layout.REG_DESC_FREGS, fregs), (REG_DESC_AT + layout.REG_DESC_HREGS, hregs),
                          (IMAGE_DESC_AT + layout.DESC_PVTMEM, pvtmem), (IMAGE_DESC_AT + layout.DESC_SHMEM, shmem),
                          (IMAGE_DESC_AT + layout.DESC_BRANCHSTACK, branchstack * 2), (IMAGE_DESC_AT + layout.DESC_SAMPLERS, samplers)):
        struct.pack_into("<I", lib, offset, value)
    lib[IMAGE_DESC_AT + layout.DESC_NAME:IMAGE_DESC_AT + layout.DESC_NAME + len(name)] = name.encode()
    lib[desc_end:desc_end + len(buf_descs)] = buf_descs
    lib[const_start:image_offset] = const_descs
    lib[image_offset:] = image
    return bytes(lib)


class MockQCOMCompiler(Compiler):
    """OpenCL C → a MOCKQCOM library (host shared object in the Adreno library layout)."""

    def __init__(self) -> None:
        self.cc = CCompiler(("-O1", "-w", "-fno-math-errno", "-ffp-contract=off"))
        self.cache_key = f"mockqcom {SHIM_VERSION}\0{self.cc.cache_key}"

    def compile_uncached(self, src: str) -> bytes:
        name, params = kernel_signature(src)
        if FIRST_ARG + ARG_SLOT * len(params) > layout.ARGS_SPACE:
            most = (layout.ARGS_SPACE - FIRST_ARG) // ARG_SLOT
            raise CompileError(f"kernel {name} has {len(params)} parameters; MOCKQCOM's constant space holds {most}")
        uses_barrier = "barrier(" in src
        image = self.cc.compile_uncached(SHIM + src + entry_source(name, params, uses_barrier))
        lib = build_lib(name, image, arg_offsets(params), CONSTS, pvtmem=array_bytes(src, local=False), shmem=array_bytes(src, local=True),
                        kinds=[p.kind for p in params])
        return with_image_table(lib, image_args(src))
