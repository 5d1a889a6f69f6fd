"""Image accesses lowered to texel reads and writes: a rewrite pass run before linearizing, for renderers with images.

A kernel PARAM whose dtype is an `ImageDType` holds element `i` as channel `i % 4` of texel `i // 4`. Devices read an
image a texel at a time through a sampler and write it a texel at a time, so `lower_images` rewrites every access:

- a load `LOAD(INDEX(image, i[, gate])[, alt])` becomes `LOAD(INDEX(image, i // 4))` of dtype `base.vec(4)` (one texel;
  a read outside the image gives the sampler's black border, so it is never gated) and
  `CUSTOM((IMAGE_CHANNEL,), base, (texel, i % 4))` picking the channel, selected against `alt` by the gate;
- a store must write whole texels: it sits in a register range `lane` of 4 (UPCAST or UNROLL) with index
  `4 * texel + lane`, and becomes `STORE(INDEX(image, texel), STACK(v0, v1, v2, v3))` with `vk` its value at `lane = k`,
  the lane range dropped from its END.

Renderers then write a texel read, a channel pick and a texel write in their language (`read_imagef`, `.x`/`.y`/...,
`write_imagef` in OpenCL). The pass leaves floor division in the index math for `lower_kernel` to run again.
"""

from __future__ import annotations

from uopir.dtypes import ImageDType, dtypes
from uopir.ops import AxisType, Ops
from uopir.uop import UOp

from .kernel import CodegenError

#: the arg tag of CUSTOM(IMAGE_CHANNEL): channel `src[1]` of the texel `src[0]`
IMAGE_CHANNEL = "image_channel"
CHANNELS = ImageDType.CHANNELS


def image_params(kernel: UOp) -> list[UOp]:
    """The image PARAMs a kernel reads or writes, by slot."""
    return sorted({u for u in kernel.toposort() if u.op is Ops.PARAM and isinstance(u.dtype, ImageDType)}, key=lambda p: p.arg.slot)


def _texel_lane(index: UOp, slot: int) -> tuple[UOp, UOp]:
    """(texel, lane): the register range of 4 lanes whose lane is the channel of the store at `index` (= 4 * texel + lane)."""
    for lane in (r for r in index.toposort() if r.op is Ops.RANGE and r.arg[1] in (AxisType.UPCAST, AxisType.UNROLL)):
        if lane.src[0].op is not Ops.CONST or lane.src[0].arg != CHANNELS:
            continue
        base = index.substitute({lane: lane.const_like(0)}).simplify()
        remainder = (base % CHANNELS).simplify()
        if remainder.op is Ops.CONST and remainder.arg == 0 and (index - base).simplify() is lane:
            return (base // CHANNELS).simplify(), lane
    raise CodegenError(f"image argument {slot} is written texel by texel, so its store must sit in an UPCAST register loop of "
                       f"{CHANNELS} lanes over the channels (index = 4 * texel + lane)")


def _lower_load(load: UOp) -> UOp:
    index = load.src[0]
    image, i = index.src[0], index.src[1]
    base = image.dtype.base
    texel = UOp(Ops.LOAD, base.vec(CHANNELS), (image.index(i // CHANNELS),))
    value = UOp(Ops.CUSTOM, base, (texel, i % CHANNELS), (IMAGE_CHANNEL,))
    if len(index.src) > 2:  # gated: the read itself is safe anywhere (the border), the gate picks the alternative
        alt = load.src[1] if len(load.src) > 1 else UOp.const(0.0, base)
        value = index.src[2].where(value, alt)
    return value


def _lower_store(store: UOp) -> tuple[UOp, UOp]:
    """The texel write of an image store, and the lane range it no longer runs in."""
    index, value = store.src[0], store.src[1]
    if len(index.src) > 2:
        raise CodegenError(f"image argument {index.src[0].arg.slot} is written through a gated store: image stores write whole texels, ungated")
    texel, lane = _texel_lane(index.src[1], index.src[0].arg.slot)
    lanes = tuple(value.substitute({lane: lane.const_like(k)}) for k in range(CHANNELS))
    stack = UOp(Ops.STACK, value.dtype.vec(CHANNELS), lanes)
    return UOp(Ops.STORE, dtypes.void, (index.src[0].index(texel), stack)), lane


def lower_images(kernel: UOp) -> UOp:
    """`kernel` with its image loads and stores as texel reads and writes (see the module docstring)."""
    images = set(image_params(kernel))
    if not images:
        return kernel
    loads = {u: _lower_load(u) for u in kernel.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and u.src[0].src[0] in images}
    outs = []
    for end in kernel.src:
        closed = []
        node = end
        while node.op is Ops.END:
            closed.append(node.src[1:])
            node = node.src[0]
        store = node.substitute(loads) if loads else node
        dropped = None
        if store.op is Ops.STORE and store.src[0].op is Ops.INDEX and store.src[0].src[0] in images:
            store, dropped = _lower_store(store)
        for ranges in reversed(closed):
            kept = tuple(r for r in ranges if r is not dropped)
            if kept:
                store = store.end(*kept)
        outs.append(store)
    return kernel.replace(src=tuple(outs))
