"""C FFI for submitters: call a C function through a pointer, pack a ctypes structure from values.

A submitter program patches command buffers and rings doorbells; what it calls (an ioctl wrapper, libc) is a plain
function pointer, possibly one stored in a buffer, and what it passes (ioctl arguments) is a packed C struct.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

from .errors import RuntimeErrorBase

IOC_WRITE, IOC_READ = 1, 2


def ioctl_number(direction: int, kind: int, nr: int, struct_t: type[ctypes.Structure]) -> int:
    """`_IOC(direction, kind, nr, sizeof(struct_t))` as Linux's asm-generic/ioctl.h builds an ioctl request number."""
    return direction << 30 | ctypes.sizeof(struct_t) << 16 | kind << 8 | nr


class FFIError(RuntimeErrorBase):
    """A foreign call or struct packing was given something it cannot use."""


CFunction = Any  # a ctypes foreign function (`libc.ffs`), a raw address, or a buffer holding the address


def _address(fn: CFunction) -> int:
    """The code address of `fn`: a ctypes function, an int, or the first 8 bytes of a buffer (little-endian)."""
    if isinstance(fn, int):
        return fn
    if isinstance(fn, ctypes._CFuncPtr):  # type: ignore[attr-defined]
        return ctypes.cast(fn, ctypes.c_void_p).value or 0
    try:
        raw = memoryview(fn).cast("B")
    except TypeError:
        raise FFIError(f"cannot call {fn!r}: pass a ctypes function, an address, or a buffer holding an address") from None
    if raw.nbytes < 8:
        raise FFIError(f"a buffer holding a function pointer needs 8 bytes, this one has {raw.nbytes}")
    return struct.unpack_from("<Q", raw, 0)[0]


def ccall(fn: CFunction, *args: Any, restype: Any = None, argtypes: tuple[Any, ...] | None = None) -> Any:
    """Call the C function `fn` with `args` and return its result.

    `fn` is a ctypes function (its `restype`/`argtypes` are used unless given here), a raw code address, or a buffer
    (bytes, memoryview, numpy array) whose first 8 bytes hold the address. Untyped int arguments pass as C `int`, as
    in C's default promotions; pass ctypes values (`ctypes.c_uint64(x)`) or `argtypes` for wider ones.
    """
    if isinstance(fn, ctypes._CFuncPtr):  # type: ignore[attr-defined]
        restype = restype if restype is not None else fn.restype
        argtypes = argtypes if argtypes is not None else fn.argtypes
    address = _address(fn)
    if address == 0:
        raise FFIError("cannot call a NULL function pointer; resolve the symbol first")
    if argtypes is None:
        argtypes = tuple(type(a) if isinstance(a, ctypes._SimpleCData | ctypes.Structure) else ctypes.c_int for a in args)
    if len(argtypes) != len(args):
        raise FFIError(f"the function takes {len(argtypes)} arguments, {len(args)} were given")
    prototype = ctypes.CFUNCTYPE(restype if restype is not None else ctypes.c_int, *argtypes)
    return prototype(address)(*args)


def cstruct(struct_t: type[ctypes.Structure], **fields: int) -> bytes:
    """The bytes of a `struct_t` whose named fields hold `fields` (other fields zero).

    A value that does not fit its field is refused rather than truncated: a silently wrapped ioctl argument is a bug
    that shows up far away."""
    known = {name: ctype for name, ctype, *_ in struct_t._fields_}
    value = struct_t()
    for name, field_value in fields.items():
        if name not in known:
            raise FFIError(f"{struct_t.__name__} has no field {name!r}; its fields are {', '.join(known)}")
        ctype = known[name]
        if isinstance(field_value, int) and issubclass(ctype, ctypes._SimpleCData):
            bits = 8 * ctypes.sizeof(ctype)
            signed = ctype(-1).value == -1
            low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
            if not low <= field_value <= high:
                raise FFIError(f"{field_value:#x} does not fit {struct_t.__name__}.{name} ({bits}-bit {'signed' if signed else 'unsigned'})")
        setattr(value, name, field_value)
    return bytes(value)
