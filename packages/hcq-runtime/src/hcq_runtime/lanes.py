"""Calls on multi-device tuples, split into one call per device (lane).

A BUFFER whose device is a tuple (`("AMD", "AMD:1")`) holds one lane per device; each lane is an ordinary BUFFER on
that device (`lane_buffers`). A call with such arguments becomes one call per lane: every multi-device argument picks
its lane, single-device arguments are passed to every lane, and the variable `_device_num` is bound to the lane's
index, so a kernel can tell its lanes apart. `run_linear` and `link_linear` split calls into lanes before handing them
to their devices' runners (the queue engine submits the lanes of one call to each device's own queues in one batch).
"""

from __future__ import annotations

import weakref

from uopir import Ops, UOp

from .buffer_registry import strip_after
from .errors import DeviceError

LANE_VARIABLE = "_device_num"

_lanes: weakref.WeakKeyDictionary[UOp, tuple[UOp, ...]] = weakref.WeakKeyDictionary()


def lane_buffers(multi: UOp) -> tuple[UOp, ...]:
    """The per-device BUFFERs holding the lanes of a multi-device BUFFER, in its device order (made on first use)."""
    multi = strip_after(multi)
    if multi.op is not Ops.BUFFER or not isinstance(multi.arg.device, tuple):
        raise DeviceError(f"only a BUFFER on a device tuple has lanes, got {multi.op.name} on {getattr(multi.arg, 'device', None)!r}")
    if (lanes := _lanes.get(multi)) is None:
        lanes = _lanes[multi] = tuple(UOp.new_buffer(device, multi.arg.size, multi.arg.dtype) for device in multi.arg.device)
    return lanes


def _lane_count(call: UOp) -> int:
    counts = {len(node.arg.device) for node in map(strip_after, call.src[1:]) if node.op is Ops.BUFFER and isinstance(node.arg.device, tuple)}
    if len(counts) > 1:
        raise DeviceError(f"a call mixes device tuples of {sorted(counts)} devices; its multi-device arguments must have as many lanes")
    return counts.pop() if counts else 0


def split_lanes(call: UOp) -> list[UOp]:
    """`call` as one call per lane when it has multi-device arguments, else `[call]`."""
    call = strip_after(call)
    if not (n := _lane_count(call)):
        return [call]
    lane = UOp.variable(LANE_VARIABLE, 0, n - 1)
    split = []
    for i in range(n):
        args = [lane_buffers(a)[i] if strip_after(a).op is Ops.BUFFER and isinstance(strip_after(a).arg.device, tuple) else a
                for a in call.src[1:]]
        split.append(call.replace(src=(call.src[0], *args, lane.bind(i))))
    return split
