"""`QCOMRenderer`: kernels as portable OpenCL C for Adreno GPUs (Qualcomm's OpenCL compiler on a phone, the host C
compiler through a shim header on MOCKQCOM).

It is the AMD OpenCL renderer with the standard work-item functions (`get_group_id`, `get_local_id`) and
`barrier(CLK_LOCAL_MEM_FENCE)` in place of the amdgcn builtins; the kernel arguments are the same (buffers as global
pointers, then the variables as `long`).

The IMAGE path: a buffer PARAM whose dtype is a `uopir.ImageDType` is an `image2d_t` argument, `read_only` when the
kernel loads it, `write_only` when it stores it. uopir lowers its accesses before linearizing
(`uopir.lower_images`): a texel read (a 4-lane LOAD of an image INDEX) is rendered as read_image{f,h} at (x, y) =
(texel % width, texel / width) with a nearest, unnormalized, clamp-to-border sampler; a channel pick
(CUSTOM(IMAGE_CHANNEL)) as `.x` ... `.w`; a texel write (a STORE of a 4-lane STACK) as write_image{f,h}. The geometry
of every image argument is declared in a `// qcom-image` line the QCOM compilers read (see image.py).
"""

from __future__ import annotations

import copy

from uopir import IMAGE_CHANNEL, AMDOpenCLRenderer, CodegenError, ImageDType, OpenCLProgram, Ops, PtrDType, UOp, dtypes

from .image import ImageArg, image_line

_DIM_FUNCTION = {"gidx": "get_group_id", "lidx": "get_local_id"}
SAMPLER = "const sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;"
_LANES = "xyzw"


def _kind(image: ImageDType) -> tuple[str, str]:
    """The read_image / write_image suffix and the channel type of an image."""
    return ("h", "half") if image.base == dtypes.float16 else ("f", "float")


def _helpers(kind: str, ctype: str) -> str:
    """Picking a channel a run-time index names, and making a texel of 4 channels, for `ctype` (float or half): both
    plain functions, so the same source compiles as OpenCL C and, on MOCKQCOM, as C over the shim's struct types."""
    return (f"static inline {ctype} uop_channel_{kind}({ctype}4 t, long c) {{\n"
            "  return c == 0 ? t.x : c == 1 ? t.y : c == 2 ? t.z : t.w;\n}\n"
            f"static inline {ctype}4 uop_texel_{kind}({ctype} x, {ctype} y, {ctype} z, {ctype} w) {{\n"
            f"  {ctype}4 t; t.x = x; t.y = y; t.z = z; t.w = w; return t;\n}}\n")


class QCOMRenderer(AMDOpenCLRenderer):
    """OpenCL C for Adreno 6xx (`arch` is the GPU's name, e.g. "a630")."""

    device = "QCOM"
    supports_images = True

    def __init__(self, arch: str = "a630"):
        super().__init__(arch)
        self._images: dict[str, ImageArg] = {}  # argument name -> image argument, while rendering a kernel with images

    def special(self, name: str) -> str:
        kind, dim = name[:4], name[4:]
        if kind not in _DIM_FUNCTION or dim not in ("0", "1", "2"):
            raise CodegenError(f"the QCOM OpenCL renderer has no index {name}")
        return f"((long){_DIM_FUNCTION[kind]}({dim}))"

    def barrier(self) -> str:
        return "barrier(CLK_LOCAL_MEM_FENCE);"

    def render(self, name: str, linear: list[UOp]) -> str:
        params = sorted({u for u in linear if u.op is Ops.PARAM and isinstance(u.dtype, PtrDType)}, key=lambda u: u.arg.slot)
        images = [p for p in params if isinstance(p.dtype, ImageDType)]
        if not images:
            return super().render(name, linear)
        written = {u.src[0].src[0] for u in linear if u.op is Ops.STORE and u.src[0].op is Ops.INDEX}
        read = {u.src[0].src[0] for u in linear if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX}
        args = {}
        for param in images:
            if param in written and param in read:
                raise CodegenError(f"kernel {name} reads and writes image argument {param.arg.slot}: an image is read-only or write-only")
            args[f"data{param.arg.slot}"] = ImageArg(params.index(param), param in written, param.dtype)
        renderer = copy.copy(self)
        renderer._images = args
        return _QCOMProgram(renderer, name, linear).render()

    def function(self, name: str, helpers: str, body: list[str], buffers: list[UOp], variables: list[UOp], names: dict[UOp, str]) -> str:
        if not self._images:
            return super().function(name, helpers, body, buffers, variables, names)
        helpers += "".join(_helpers(*_kind(arg.image)) for arg in {a.image.base: a for a in self._images.values()}.values())
        if any(not arg.writes for arg in self._images.values()):
            body = [f"  {SAMPLER}", *body]
        source = super().function(name, helpers, body, buffers, variables, names)
        for buf in buffers:  # the image arguments' global pointers become image2d_t
            if (arg := self._images.get(names[buf])) is not None:
                pointer = f"__global {self.storage_type(buf.dtype.base)} *restrict {names[buf]}"
                source = source.replace(pointer, f"{'write_only' if arg.writes else 'read_only'} image2d_t {names[buf]}", 1)
        return "".join(image_line(arg) + "\n" for arg in sorted(self._images.values(), key=lambda a: a.index)) + source


class _QCOMProgram(OpenCLProgram):
    """The OpenCL program writer plus texel reads, channel picks and texel writes of image arguments."""

    r: QCOMRenderer

    def coord(self, image: ImageDType, texel: UOp) -> str:
        t = self.names[texel]
        return f"(int2)((int)(({t}) % {image.width}), (int)(({t}) / {image.width}))"

    def render_node(self, node: UOp) -> None:
        op = node.op
        if op is Ops.LOAD and isinstance(image := node.src[0].src[0].dtype, ImageDType):
            kind, ctype = _kind(image)
            name = self.names[node] = self.fresh("tex")
            self.line(f"{ctype}4 {name} = read_image{kind}({self.names[node.src[0].src[0]]}, smp, {self.coord(image, node.src[0].src[1])});")
        elif op is Ops.CUSTOM and node.arg == (IMAGE_CHANNEL,):
            texel, channel = node.src
            kind, _ = _kind(node.src[0].src[0].src[0].dtype)
            pick = f".{_LANES[channel.arg]}" if channel.op is Ops.CONST else None
            self.names[node] = f"{self.names[texel]}{pick}" if pick else f"uop_channel_{kind}({self.names[texel]}, {self.names[channel]})"
        elif op is Ops.STACK:
            kind, ctype = ("h", "half") if node.dtype.scalar() == dtypes.float16 else ("f", "float")
            name = self.names[node] = self.fresh("px")
            self.line(f"{ctype}4 {name} = uop_texel_{kind}({', '.join(self.names[s] for s in node.src)});")
        elif op is Ops.STORE and isinstance(image := node.src[0].src[0].dtype, ImageDType):
            kind, _ = _kind(image)
            self.line(f"write_image{kind}({self.names[node.src[0].src[0]]}, {self.coord(image, node.src[0].src[1])}, {self.names[node.src[1]]});")
        else:
            super().render_node(node)
