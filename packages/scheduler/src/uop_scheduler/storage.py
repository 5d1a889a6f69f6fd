"""Reading values of bytes-only devices (DISK): such a device stores bytes and runs no kernels, so a graph that
computes with a view of a file's buffer (`t[10:20]`, `t.reshape(5, 6)[1:3] + 1`, `t.bitcast(dtypes.int32)`) reads
it through a copy to the default device. Only the bytes the view can reach are copied: the view's index range over
the buffer is bounded symbolically, and that range of the file becomes a buffer of its own (a view of the file's
memory, no read until the copy runs). A plain copy of a whole file buffer (`t.to("CPU")`) is left as it is.
"""

from __future__ import annotations

import math

from hcq_runtime import Device, bind_buffer, buffer_for
from uopir import GroupOp, Ops, UOp

from .rangeify import flat_index, movement_inner
from .schedule import _is_leaf_view, bytes_only


def touches_storage(nodes) -> bool:
    """Whether a walked graph (its nodes and input leaves) holds a value of a bytes-only device: only then does
    `off_storage` have anything to do (the check every realize pays is this scan, not a second walk). The devices are
    gathered first and each asked once (a deep model's step holds hundreds of buffers, all on one or two devices)."""
    devices = set()
    add, BUFFER = devices.add, Ops.BUFFER
    for n in nodes:
        op = n.op
        if op is BUFFER:
            add(n.arg.device)
        elif op is Ops.AFTER and (base := n.src[0]).op is BUFFER:  # a written version: its buffer's device, read directly
            add(base.arg.device)
        elif op is Ops.COPY or op is Ops.AFTER:
            add(n.device)
    return any(bytes_only(d) for d in devices)




def _storage_chain(node: UOp) -> UOp | None:
    """The bytes-only value under `node` when `node` is that value or views of it (movement ops, bitcasts), else None:
    a BUFFER of a bytes-only device or a value copied to one (`Tensor.randn(30).to("disk:...")`, not yet realized)."""
    while node.op in GroupOp.Movement or node.op in (Ops.BITCAST, Ops.DETACH):
        node = node.src[0]
    if node.op is Ops.BUFFER:
        return node if bytes_only(node.arg.device) else None
    return node if node.op in (Ops.COPY, Ops.AFTER) and bytes_only(node.device) else None


def _element_range(view: UOp, base: UOp) -> tuple[int, int] | None:
    """[lo, hi): the elements of `base` that the movement-op chain `view` can read, or None when it is not bounded
    that way (a bitcast in the chain, symbolic dims)."""
    if not all(isinstance(d, int) for d in view.shape):
        return None
    idx = tuple(UOp.variable(f"storage_axis{i}", 0, d - 1) if d > 1 else UOp.const(0) for i, d in enumerate(view.shape))
    node = view
    while node is not base:
        if node.op is Ops.DETACH:
            node = node.src[0]
            continue
        if node.op not in GroupOp.Movement or not all(isinstance(d, int) for d in node.src[0].shape):
            return None
        idx, _ = movement_inner(node, idx)
        node = node.src[0]
    flat = flat_index(idx, base.shape)
    lo, hi = int(flat.vmin), int(flat.vmax) + 1
    size = base.arg.size
    return max(0, lo), min(size, hi)


def file_span(view: UOp) -> tuple[UOp, int, int] | None:
    """(buffer, byte offset, byte count) when the elements of `view` (movement ops, bitcasts and detaches over a
    BUFFER) are one contiguous range of the buffer's bytes in row-major order (what a write into a file's view
    needs), else None: a strided, permuted, flipped or padded view."""
    if view.op is Ops.BUFFER:
        return view, 0, view.arg.size * view.dtype.itemsize
    if view.op in (Ops.DETACH, Ops.BITCAST):  # a bitcast reads the same bytes in the same order
        return file_span(view.src[0])
    if view.op not in GroupOp.Movement or not all(isinstance(d, int) for d in view.shape):
        return None
    bottom = view
    while bottom.op in GroupOp.Movement:
        bottom = bottom.src[0]
    if (below := file_span(bottom)) is None:
        return None
    buffer, offset, _ = below
    if math.prod(view.shape) == 0:
        return buffer, offset, 0
    idx = tuple(UOp.variable(f"span_axis{i}", 0, d - 1) if d > 1 else UOp.const(0) for i, d in enumerate(view.shape))
    inner, node = idx, view
    while node is not bottom:
        if not all(isinstance(d, int) for d in node.src[0].shape):
            return None
        inner, gate = movement_inner(node, inner)
        if gate is not None:  # padding is no range of the file
            return None
        node = node.src[0]
    flat = flat_index(inner, bottom.shape)
    lo = int(flat.vmin)
    in_order = (flat - (flat_index(idx, view.shape) + lo)).simplify()
    if in_order.op is not Ops.CONST or in_order.arg != 0:
        return None
    return buffer, offset + lo * view.dtype.itemsize, math.prod(view.shape) * view.dtype.itemsize


def _lifted(chain: UOp, base: UOp, device: str) -> UOp:
    """`chain` (views of the bytes-only buffer `base`) computed from a copy of the bytes it reads on `device`."""
    if chain is base:
        return base.copy_to_device(device)
    span = _element_range(chain, base) if base.op is Ops.BUFFER else None
    if span is None or span == (0, base.arg.size) or span[1] <= span[0]:
        copied = base.copy_to_device(device)
    else:
        lo, hi = span
        part = UOp.new_buffer(base.arg.device, hi - lo, base.dtype)
        bind_buffer(part, buffer_for(base).view(hi - lo, base.dtype, lo * base.dtype.itemsize))
        copied = part.copy_to_device(device).pad(((lo, base.arg.size - hi),))
        if copied.shape != base.shape:
            copied = copied.reshape(base.shape)
    return chain.substitute({base: copied})


def off_storage(targets: tuple[UOp, ...], device: str) -> tuple[UOp, ...]:
    """The targets with every computation on views of bytes-only buffers moved to `device` (see the module docstring).
    A target that is such a view is computed there too; a COPY of a whole buffer (or of a reshape of it) is kept.
    When `device` itself only stores bytes (the tensor lives on DISK), the computation runs on `Device.DEFAULT`."""
    if bytes_only(device):
        device = Device.DEFAULT
    order = UOp.sink(*targets).toposort(gate=lambda n: n.op is not Ops.BUFFER)
    swap: dict[UOp, UOp] = {}
    for node in order:
        if node.op in GroupOp.Movement or node.op in (Ops.BITCAST, Ops.DETACH, Ops.BUFFER, Ops.SINK, Ops.AFTER):
            continue  # views are handled where they are read
        for s in node.src[1:2] if node.op is Ops.STORE else node.src:  # a write's target is not a read
            if s in swap or (base := _storage_chain(s)) is None:
                continue
            if node.op is Ops.COPY and _is_leaf_view(s, {base}) is not None:  # a COPY moves a whole buffer's bytes as they are
                continue
            swap[s] = _lifted(s, base, device)
    for t in targets:  # (a copy into a file realizes as the file's buffer: writes into the tensor then reach the file)
        if t not in swap and t.op not in (Ops.BUFFER, Ops.COPY) and (base := _storage_chain(t)) is not None:
            swap[t] = _lifted(t, base, device)
    if not swap:
        return targets
    return UOp.sink(*targets).substitute(swap).src

