"""The structured args carried by PARAM/BUFFER (`ParamArg`), CALL (`CallInfo`) and PROGRAM (`ProgramInfo`) nodes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from uopir.dtypes import AddrSpace, DType, dtypes
from uopir.ops import Ops

# the body of a CALL is always one of these: programs (SINK/PROGRAM/LINEAR), copies, and function references
OPAQUE_CALL_BODIES = frozenset({Ops.SINK, Ops.PROGRAM, Ops.LINEAR, Ops.COPY, Ops.CUSTOM_FUNCTION})


@dataclass(frozen=True, order=True)
class ParamArg:
    """The arg of a PARAM (a call's formal argument) or a BUFFER (storage).

    slot: a PARAM's argument position in its call / a BUFFER's unique id; dtype: element dtype; size: a BUFFER's
    element count (its max when the shape is symbolic); vmin_vmax: value range of a scalar variable PARAM; name:
    a variable's name; addrspace: where a buffer lives; axis: the sharded axis of a multi-device value; device: a
    device name or a tuple of them; unbound: a BUFFER minted by call_with_outputs that no storage backs yet.
    """

    slot: int
    dtype: DType
    size: int | None = None
    vmin_vmax: tuple[int, int] | None = None
    name: str | None = None
    addrspace: AddrSpace = AddrSpace.GLOBAL
    axis: int | None = None
    device: str | tuple[str, ...] | None = None
    unbound: bool = False

    def __repr__(self) -> str:
        defaults = {f.name: f.default for f in fields(self)}
        extra = [f"{k}={getattr(self, k)!r}" for k in ("size", "vmin_vmax", "name", "addrspace", "axis", "device", "unbound")
                 if getattr(self, k) != defaults[k]]
        return f"ParamArg({', '.join([repr(self.slot), repr(self.dtype), *extra])})"

    @staticmethod
    def of_buffer(slot: int, dtype: DType, size: int | None, device: str | tuple[str, ...] | None) -> ParamArg:
        """`ParamArg(slot, dtype, size, device=device)`: a BUFFER's arg, its fields written in one step (a frozen
        dataclass sets each field through object.__setattr__: 1 us a buffer, and every realize makes buffers)."""
        ret = object.__new__(ParamArg)
        ret.__dict__.update(_PARAM_DEFAULTS, slot=slot, dtype=dtype, size=size, device=device)
        return ret


# every field's default (`ParamArg.of_buffer` starts from them)
_PARAM_DEFAULTS = {f.name: f.default for f in fields(ParamArg)}

@dataclass(frozen=True)
class CallInfo:
    """The arg of a CALL: gradient function, display name, precompile flags, free-form aux data and the return dtype."""

    grad_fxn: Callable[..., Any] | None = None
    name: str | None = None
    precompile: bool = False
    precompile_backward: bool = False
    aux: Any = None
    dtype: DType = field(default=dtypes.void)

    def __repr__(self) -> str:
        # a grad_fxn has no source form: it is named, and pyrender drops it with a comment
        grad = None if self.grad_fxn is None else getattr(self.grad_fxn, "__name__", "grad_fxn")
        return (f"CallInfo({grad}, {self.name!r}, {self.precompile!r}, {self.precompile_backward!r}, {self.aux!r}, {self.dtype!r})")


@dataclass(frozen=True)
class KernelInfo:
    """The arg of a hand-written kernel's SINK (tinygrad's name): the function name it is compiled under."""

    name: str = "test"


@dataclass(frozen=True)
class ProgramInfo:
    """The arg of a PROGRAM: the function name, which call arguments it touches, and its launch dims.

    globals: the call-argument slots of the buffers the program uses, in the order the runtime binds them; vars: the
    variable PARAMs it reads, after the buffers; outs/ins: which of those slots are written / read; ops/mem: the
    arithmetic ops it runs and the bytes of the buffers it touches (`codegen.estimates`).
    """

    function_name: str
    globals: tuple[int, ...] = ()
    vars: tuple[Any, ...] = ()
    outs: tuple[int, ...] = ()
    ins: tuple[int, ...] = ()
    global_size: tuple[int, ...] = (1, 1, 1)
    local_size: tuple[int, ...] | None = (1, 1, 1)
    target: str | None = None
    ops: int = 0
    mem: int = 0
