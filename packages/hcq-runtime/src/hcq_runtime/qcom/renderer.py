"""`QCOMRenderer`: kernels as portable OpenCL C for Adreno GPUs (Qualcomm's OpenCL compiler on a phone, the host C
compiler through a shim header on MOCKQCOM).

It is the AMD OpenCL renderer with the standard work-item functions (`get_group_id`, `get_local_id`) and
`barrier(CLK_LOCAL_MEM_FENCE)` in place of the amdgcn builtins; the kernel arguments are the same (buffers as global
pointers, then the variables as `long`).

The IMAGE path: a buffer PARAM whose dtype is an `ImageDType` is an `image2d_t` argument, `read_only` when the kernel
loads it, `write_only` when it stores it. Element `i` is channel `i & 3` of texel `i >> 2`, at (x, y) =
(texel % width, texel / width). A load reads the texel with read_image{f,h} (a nearest, unnormalized, clamp-to-border
sampler) and picks the channel; a store writes whole texels, so it must sit in a register (UPCAST) loop of 4 lanes:
each lane fills a channel of a staging texel, which write_image{f,h} writes once the loop ends. The geometry of every
image argument is declared in a `// qcom-image` line the QCOM compilers read (see image.py). uopir's C program writer
is internal to it, so image accesses are rewritten in the lines it renders for the kernel body (with vector blocks
off, every access is a plain `dataN[index]`), after the store's index was checked on the UOps to be 4 * texel + lane.
"""

from __future__ import annotations

import copy
import re

from uopir import AddrSpace, AMDOpenCLRenderer, AxisType, CodegenError, Ops, PtrDType, UOp, dtypes

from .image import CHANNELS, ImageArg, ImageDType, image_line

_DIM_FUNCTION = {"gidx": "get_group_id", "lidx": "get_local_id"}
SAMPLER = "const sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;"
_LANE_LOOP = re.compile(r"^(\s*)(?:_Pragma\(\"unroll\"\) )?for \(long (uidx\d+) = 0; \2 < 4l; \2\+\+\) \{$")


def _helpers(kind: str, ctype: str) -> str:
    """Reading one channel of an image element and packing 4 channels into a texel, for `ctype` (float or half)."""
    return (f"static inline {ctype} uop_read_{kind}(read_only image2d_t img, sampler_t smp, long i, int w) {{\n"
            f"  {ctype}4 t = read_image{kind}(img, smp, (int2)((int)((i >> 2) % w), (int)((i >> 2) / w)));\n"
            "  int c = (int)(i & 3);\n  return c == 0 ? t.x : c == 1 ? t.y : c == 2 ? t.z : t.w;\n}\n"
            f"static inline {ctype}4 uop_texel_{kind}(const {ctype} *c) {{\n"
            f"  {ctype}4 t; t.x = c[0]; t.y = c[1]; t.z = c[2]; t.w = c[3]; return t;\n}}\n")


def _bracketed(text: str, start: int) -> int:
    """The index of the `]` closing the `[` at `start`."""
    depth = 0
    for at in range(start, len(text)):
        depth += {"[": 1, "]": -1}.get(text[at], 0)
        if depth == 0:
            return at
    raise CodegenError(f"unbalanced brackets in rendered line {text!r}")


class QCOMRenderer(AMDOpenCLRenderer):
    """OpenCL C for Adreno 6xx (`arch` is the GPU's name, e.g. "a630")."""

    device = "QCOM"

    def __init__(self, arch: str = "a630"):
        super().__init__(arch)
        self._images: dict[UOp, ImageArg] = {}
        self._lane_loops: set[str] = set()  # the loop variables of the register loops image stores stage texels in

    def special(self, name: str) -> str:
        kind, dim = name[:4], name[4:]
        if kind not in _DIM_FUNCTION or dim not in ("0", "1", "2"):
            raise CodegenError(f"the QCOM OpenCL renderer has no index {name}")
        return f"((long){_DIM_FUNCTION[kind]}({dim}))"

    def barrier(self) -> str:
        return "barrier(CLK_LOCAL_MEM_FENCE);"

    def render(self, name: str, linear: list[UOp]) -> str:
        params = sorted({u for u in linear if u.op is Ops.PARAM and isinstance(u.dtype, PtrDType) and u.arg.addrspace is AddrSpace.GLOBAL},
                        key=lambda u: u.arg.slot)
        images = {p: p.dtype for p in params if isinstance(p.dtype, ImageDType)}
        if not images:
            return super().render(name, linear)
        stores = [u for u in linear if u.op is Ops.STORE and u.src[0].src[0] in images]
        loaded = {u.src[0].src[0] for u in linear if u.op is Ops.LOAD}
        args = {}
        for param, image in images.items():
            writes = any(store.src[0].src[0] is param for store in stores)
            if writes and param in loaded:
                raise CodegenError(f"kernel {name} reads and writes image argument {param.arg.slot}: an image is read-only or write-only")
            args[param] = ImageArg(params.index(param), writes, image)
        # image accesses are rewritten line by line, so every access must be a plain (non-vector) load or store
        renderer = copy.copy(self)
        renderer.vectorize, renderer._images = False, args
        renderer._lane_loops = {f"uidx{_texel_lane(store, name).arg[0]}" for store in stores}
        return AMDOpenCLRenderer.render(renderer, name, linear)

    def function(self, name: str, helpers: str, body: list[str], buffers: list[UOp], variables: list[UOp], names: dict[UOp, str]) -> str:
        if not self._images:
            return super().function(name, helpers, body, buffers, variables, names)
        images = {names[p]: arg for p, arg in self._images.items()}
        body = _image_body(body, images, self._lane_loops)
        helpers += "".join(_helpers(kind, ctype) for kind, ctype in sorted({_kind(arg) for arg in images.values()}))
        if any(not arg.writes for arg in images.values()):
            body.insert(0, f"  {SAMPLER}")
        source = super().function(name, helpers, body, buffers, variables, names)
        for buf in buffers:  # the image arguments' global pointers become image2d_t
            if (arg := images.get(names[buf])) is not None:
                pointer = f"__global {self.storage_type(buf.dtype.base)} *restrict {names[buf]}"
                source = source.replace(pointer, f"{'write_only' if arg.writes else 'read_only'} image2d_t {names[buf]}", 1)
        return "".join(image_line(arg) + "\n" for arg in sorted(images.values(), key=lambda a: a.index)) + source


def _texel_lane(store: UOp, kernel: str) -> UOp:
    """The register RANGE whose 4 lanes are the channels of the texel `store` writes: its index is 4 * texel + lane."""
    index = store.src[0].src[1]
    for lane in (r for r in index.toposort() if r.op is Ops.RANGE and r.arg[1] in (AxisType.UPCAST, AxisType.UNROLL)):
        if lane.src[0].op is not Ops.CONST or lane.src[0].arg != CHANNELS:
            continue
        base = index.substitute({lane: lane.const_like(0)}).simplify()
        remainder = (base % CHANNELS).simplify()
        if remainder.op is Ops.CONST and remainder.arg == 0 and (index - base).simplify() is lane:
            return lane
    raise CodegenError(f"kernel {kernel}: image argument {store.src[0].src[0].arg.slot} is written texel by texel, so its store must sit "
                       f"in an UPCAST register loop of {CHANNELS} lanes over the channels (index = 4 * texel + lane)")


def _image_body(body: list[str], images: dict[str, ImageArg], lane_loops: set[str]) -> list[str]:
    """The kernel body with image loads turned into channel reads and image stores into staged texel writes."""
    out = list(body)
    staged: dict[int, list[str]] = {}  # line of a lane loop -> the images its stores stage
    for i, line in enumerate(out):
        for image_name, arg in images.items():
            if not arg.writes:
                out[i] = _rewrite_loads(out[i], image_name, arg)
            elif re.search(rf"\b{image_name}\[", line):
                out[i] = _stage_store(out, i, image_name, staged, lane_loops)
    # declare each staging texel before its loop and write it after the loop ends (walking back keeps line numbers)
    for loop in sorted(staged, reverse=True):
        indent = _LANE_LOOP.match(out[loop]).group(1)  # type: ignore[union-attr]
        end = next(j for j in range(loop + 1, len(out)) if out[j] == f"{indent}}}")
        writes, declarations = [], []
        for image_name in staged[loop]:
            arg = images[image_name]
            kind, ctype = _kind(arg)
            px, texel = _staging(image_name, out[loop])
            declarations.append(f"{indent}{ctype} {px}[{CHANNELS}]; long {texel} = 0;")
            writes.append(f"{indent}write_image{kind}({image_name}, (int2)((int)({texel} % {arg.image.width}), "
                          f"(int)({texel} / {arg.image.width})), uop_texel_{kind}({px}));")
        out[end + 1:end + 1] = writes
        out[loop:loop] = declarations
    return out


def _kind(arg: ImageArg) -> tuple[str, str]:
    """The read_image / write_image suffix and the channel type of an image argument."""
    return ("h", "half") if arg.image.base == dtypes.float16 else ("f", "float")


def _rewrite_loads(line: str, image_name: str, arg: ImageArg) -> str:
    kind, _ = _kind(arg)
    while (match := re.search(rf"\b{image_name}\[", line)) is not None:
        close = _bracketed(line, match.end() - 1)
        index = line[match.end():close]
        line = f"{line[:match.start()]}uop_read_{kind}({image_name}, smp, {index}, {arg.image.width}){line[close + 1:]}"
    return line


def _staging(image_name: str, loop_line: str) -> tuple[str, str]:
    """The staging texel and texel index of `image_name` in the lane loop starting at `loop_line`."""
    lane = _LANE_LOOP.match(loop_line).group(2)  # type: ignore[union-attr]
    return f"uop_px_{image_name}_{lane}", f"uop_texel_{image_name}_{lane}"


def _stage_store(lines: list[str], at: int, image_name: str, staged: dict[int, list[str]], lane_loops: set[str]) -> str:
    line = lines[at]
    match = re.fullmatch(rf"(\s*){image_name}\[", line[:line.index("[") + 1])
    if match is None:
        raise CodegenError(f"a store into image {image_name} must be a plain store of one channel, not `{line.strip()}` (gated stores are "
                           "not supported)")
    close = _bracketed(line, line.index("["))
    index, value = line[line.index("[") + 1:close], line[close + 1:].strip()
    if not value.startswith("= ") or not value.endswith(";"):
        raise CodegenError(f"cannot read the store `{line.strip()}` into image {image_name}")
    depth = len(match.group(1))
    loop = next((j for j in range(at - 1, -1, -1) if len(lines[j]) - len(lines[j].lstrip()) < depth and lines[j].strip().endswith("{")), None)
    if loop is None or not (lane := _LANE_LOOP.match(lines[loop])) or lane.group(2) not in lane_loops:
        raise CodegenError(f"image {image_name} is written texel by texel: its store must sit directly in an UPCAST register loop of "
                           f"{CHANNELS} lanes over the channels")
    if image_name not in staged.setdefault(loop, []):
        staged[loop].append(image_name)
    px, texel = _staging(image_name, lines[loop])
    return f"{match.group(1)}{px}[({index}) & 3] {value} {texel} = ({index}) >> 2;"
