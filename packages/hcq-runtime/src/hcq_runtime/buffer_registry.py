"""The buffer registry: which `Buffer` (storage) each BUFFER UOp stands for.

A BUFFER UOp gets its storage on first use (`buffer_for`, allocated lazily, freed with the UOp) or is bound to storage
that already exists (`bind_buffer`). AFTERs on a BUFFER are later versions of the same storage and are looked through.
"""

from __future__ import annotations

import weakref

from uopir import Ops, UOp

from .buffer import Buffer
from .device import Device
from .errors import DeviceError

_buffers: weakref.WeakKeyDictionary[UOp, Buffer] = weakref.WeakKeyDictionary()


def strip_after(uop: UOp) -> UOp:
    """The node under any AFTERs (an AFTER is a later version of the same buffer or call)."""
    while uop.op is Ops.AFTER:
        uop = uop.src[0]
    return uop


def buffer_for(uop: UOp) -> Buffer:
    """The storage of a BUFFER UOp (allocated lazily, freed when the UOp is); AFTERs on it are looked through."""
    uop = strip_after(uop)
    if uop.op is not Ops.BUFFER:
        raise DeviceError(f"a call argument must be a BUFFER, got {uop.op.name}")
    if (buf := _buffers.get(uop)) is None:
        arg = uop.arg
        if not isinstance(arg.device, str):
            raise DeviceError(f"BUFFER {arg.slot} has no single device ({arg.device!r}); give it one before running")
        buf = _buffers[uop] = Buffer(arg.device, arg.size, arg.dtype)
    return buf


def bound_buffer(uop: UOp) -> Buffer | None:
    """The storage a BUFFER UOp (AFTERs looked through) already has, or None: unlike `buffer_for`, nothing is made."""
    uop = strip_after(uop)
    return _buffers.get(uop) if uop.op is Ops.BUFFER else None


def bind_buffer(uop: UOp, buf: Buffer) -> None:
    """Make `buf` the storage of the BUFFER UOp `uop` (for inputs that already live somewhere)."""
    if uop.op is not Ops.BUFFER:
        raise DeviceError(f"only BUFFER UOps have storage, got {uop.op.name}")
    _buffers[uop] = buf


def device_for_call(args: tuple[UOp, ...]) -> str:
    """Where a call runs: the device of its first buffer argument (the default device when it has none)."""
    for a in args:
        if strip_after(a).op is Ops.BUFFER:
            return buffer_for(a).device
    return Device.DEFAULT
