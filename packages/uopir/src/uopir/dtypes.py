"""Data types: scalar, vector and pointer dtypes, the promotion lattice, and Python-side value truncation.

DTypes are interned: building the same dtype twice returns the same object, so `is` and `==` agree and dtypes are
cheap dictionary keys inside the hash-consed UOp cache.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from enum import IntEnum
from typing import Any, ClassVar, Final

from uopir.errors import DTypeError
from uopir.floatconv import FP8_FORMATS, decode_fp8, encode_fp8, float_to_bf16, float_to_fp16, float_to_fp32, fp8_round

ConstType = float | int | bool


class AddrSpace(IntEnum):
    """Where a pointer points: device global memory, workgroup-local memory or registers."""

    GLOBAL = 1
    LOCAL = 2
    REG = 3

    def __repr__(self) -> str:
        return f"AddrSpace.{self.name}"

    __str__ = __repr__


class _Interned(type):
    """Metaclass that returns the existing instance for equal constructor arguments."""

    cache: ClassVar[dict[tuple, Any]] = {}

    def __call__(cls, *args: Any) -> Any:
        key = (cls, *args)
        if (ret := _Interned.cache.get(key)) is None:
            ret = _Interned.cache[key] = super().__call__(*args)
        return ret


class DType(metaclass=_Interned):
    """A scalar or vector data type.

    Fields: `priority` orders dtypes for `max`/sorting (not promotion: that is the lattice), `bitsize` is the scalar
    size in bits, `name` is the C-like spelling, `fmt` the `struct` format of one scalar (None when struct has none),
    `count` the vector width (1 for scalars).
    """

    __slots__ = ("priority", "bitsize", "name", "fmt", "count", "__weakref__", "__dict__")

    def __init__(self, priority: int, bitsize: int, name: str, fmt: str | None, count: int):
        self.priority, self.bitsize, self.name, self.fmt, self.count = priority, bitsize, name, fmt, count

    def __setattr__(self, key: str, value: Any) -> None:
        if key in self.__slots__ and hasattr(self, key):
            raise AttributeError(f"DType is immutable: cannot set {key}")
        object.__setattr__(self, key, value)

    def __reduce__(self) -> tuple:
        return type(self), (self.priority, self.bitsize, self.name, self.fmt, self.count)

    def __repr__(self) -> str:
        base = f"dtypes.{_PY_NAMES.get(self.name, self.name)}"
        return base if self.count == 1 else f"{base}.vec({self.count})"

    def __lt__(self, other: DType) -> bool:
        return (self.priority, self.bitsize, self.name, self.count) < (other.priority, other.bitsize, other.name, other.count)

    @property
    def itemsize(self) -> int:
        """Bytes per element (a vector counts all its lanes)."""
        return (self.bitsize + 7) // 8 * self.count

    def scalar(self) -> DType:
        """The element dtype of a vector (a scalar returns itself)."""
        return self if self.count == 1 else DType(self.priority, self.bitsize, self.name, self.fmt, 1)

    def vec(self, count: int) -> DType:
        """The `count`-wide vector of this scalar dtype (`count == 1` gives the scalar)."""
        if self.count != 1:
            raise DTypeError(f"cannot vectorize {self}: it is already a vector, call .scalar() first")
        if count < 1:
            raise DTypeError(f"vector width must be >= 1, got {count}")
        return self if count == 1 or self.name == "void" else DType(self.priority, self.bitsize, self.name, self.fmt, count)

    def ptr(self, size: int = -1, addrspace: AddrSpace = AddrSpace.GLOBAL) -> PtrDType:
        """A pointer to `size` elements of this dtype (-1: unknown size) in `addrspace`."""
        return PtrDType(self, addrspace, size, 1)

    @functools.cached_property
    def min(self) -> ConstType:
        """The smallest value (-inf for floats, False for bool)."""
        if dtypes.is_int(self):
            return 0 if dtypes.is_unsigned(self) else -(2 ** (self.bitsize - 1))
        return -math.inf if dtypes.is_float(self) else False

    @functools.cached_property
    def max(self) -> ConstType:
        """The largest value (inf for floats, True for bool)."""
        if dtypes.is_int(self):
            return 2**self.bitsize - 1 + self.min
        return math.inf if dtypes.is_float(self) else True

    def const(self, value: ConstType) -> ConstType:
        """`value` as a Python constant of this dtype: truncated/rounded/wrapped exactly as a cast would."""
        return truncate(self.scalar(), value)


class PtrDType(DType):
    """A pointer: `base` is the pointee dtype, `addrspace` where it lives, `size` the element count (-1 unknown).

    `count` > 1 makes a vector of pointers.
    """

    __slots__ = ("base", "addrspace", "size")

    def __init__(self, base: DType, addrspace: AddrSpace, size: int, count: int):
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "addrspace", addrspace)
        object.__setattr__(self, "size", size)
        super().__init__(base.priority, base.bitsize, base.name, base.fmt, count)

    def __reduce__(self) -> tuple:
        return PtrDType, (self.base, self.addrspace, self.size, self.count)

    def __repr__(self) -> str:
        ret = f"{self.base!r}.ptr({self.size}{', ' + repr(self.addrspace) if self.addrspace != AddrSpace.GLOBAL else ''})"
        return ret if self.count == 1 else f"{ret}.vec({self.count})"

    @property
    def itemsize(self) -> int:
        """The size of the pointee element (pointers index in elements)."""
        return self.base.itemsize

    def scalar(self) -> PtrDType:
        """The single pointer of a vector of pointers."""
        return self if self.count == 1 else PtrDType(self.base, self.addrspace, self.size, 1)

    def vec(self, count: int) -> PtrDType:
        """A vector of `count` pointers."""
        if self.count != 1:
            raise DTypeError(f"cannot vectorize {self}: it is already a vector")
        return self if count == 1 else PtrDType(self.base, self.addrspace, self.size, count)

    def ptr(self, size: int = -1, addrspace: AddrSpace = AddrSpace.GLOBAL) -> PtrDType:
        """Pointers to pointers are not supported."""
        raise DTypeError(f"cannot make a pointer to the pointer {self}")


class ImageDType(PtrDType):
    """A global pointer to `height * width * 4` half or float elements stored as a 2-D RGBA image (a texture a kernel
    reads through its sampler, or writes texel by texel): element `i` is channel `i % 4` of texel `i // 4`, texel `t`
    is at (x, y) = (t % width, t // width). A kernel PARAM of this dtype opts into the image path of renderers that
    have one (`Renderer.supports_images`; `uopir.codegen.lower_images` turns its loads and stores into texel reads
    and writes). How a device lays the rows out in memory (their pitch) is the device's business."""

    __slots__ = ("height", "width")

    #: channels per texel
    CHANNELS = 4
    #: sides of at most this many texels (the A6XX texture descriptor's 15-bit width and height fields)
    MAX_SIDE = (1 << 15) - 1

    def __init__(self, base: DType, height: int, width: int):
        if base not in (dtypes.float16, dtypes.float32):
            raise DTypeError(f"an image holds half or float channels, not {base}")
        if not (0 < height <= self.MAX_SIDE and 0 < width <= self.MAX_SIDE):
            raise DTypeError(f"an image of {height} x {width} texels does not fit a texture descriptor (1..{self.MAX_SIDE} per side)")
        object.__setattr__(self, "height", height)
        object.__setattr__(self, "width", width)
        super().__init__(base, AddrSpace.GLOBAL, height * width * self.CHANNELS, 1)

    def __reduce__(self) -> tuple:
        return ImageDType, (self.base, self.height, self.width)

    def __repr__(self) -> str:
        return f"dtypes.image{'h' if self.base == dtypes.float16 else 'f'}({self.height}, {self.width})"

    @property
    def row_bytes(self) -> int:
        """Bytes of one row's texels (without any padding a device puts between rows)."""
        return self.width * self.CHANNELS * self.base.itemsize

    def scalar(self) -> ImageDType:
        return self

    def vec(self, count: int) -> PtrDType:
        if count != 1:
            raise DTypeError(f"cannot vectorize the image {self}")
        return self


class DTypes:
    """The namespace of every scalar dtype (`dtypes.float32`, `dtypes.int`, ...) and dtype predicates."""

    void: Final[DType] = DType(-1, 0, "void", None, 1)
    bool: Final[DType] = DType(0, 1, "bool", "?", 1)
    weakint: Final[DType] = DType(0, 800, "weakint", None, 1)  # the type of a Python int literal: adopts the other side's int type
    int8: Final[DType] = DType(1, 8, "signed char", "b", 1)
    uint8: Final[DType] = DType(2, 8, "unsigned char", "B", 1)
    int16: Final[DType] = DType(3, 16, "short", "h", 1)
    uint16: Final[DType] = DType(4, 16, "unsigned short", "H", 1)
    int32: Final[DType] = DType(5, 32, "int", "i", 1)
    uint32: Final[DType] = DType(6, 32, "unsigned int", "I", 1)
    int64: Final[DType] = DType(7, 64, "long", "q", 1)
    uint64: Final[DType] = DType(8, 64, "unsigned long", "Q", 1)
    weakfloat: Final[DType] = DType(9, 800, "weakfloat", None, 1)  # the type of a Python float literal
    fp8e4m3: Final[DType] = DType(10, 8, "float8_e4m3", None, 1)
    fp8e5m2: Final[DType] = DType(11, 8, "float8_e5m2", None, 1)
    fp8e4m3fnuz: Final[DType] = DType(10, 8, "float8_e4m3fnuz", None, 1)
    fp8e5m2fnuz: Final[DType] = DType(11, 8, "float8_e5m2fnuz", None, 1)
    float16: Final[DType] = DType(12, 16, "half", "e", 1)
    bfloat16: Final[DType] = DType(13, 16, "__bf16", None, 1)
    float32: Final[DType] = DType(14, 32, "float", "f", 1)
    float64: Final[DType] = DType(15, 64, "double", "d", 1)

    # C-style aliases, as tinygrad spells them
    half = float16
    float = float32
    double = float64
    uchar = uint8
    ushort = uint16
    uint = uint32
    ulong = uint64
    char = int8
    short = int16
    int = int32
    long = int64

    default_float: Final[DType] = float32
    default_int: Final[DType] = int32
    index: Final[DType] = weakint  # the dtype of index math (ranges, shapes, variables): renderers pick the width

    fp8_ocp = (fp8e4m3, fp8e5m2)
    fp8_fnuz = (fp8e4m3fnuz, fp8e5m2fnuz)
    fp8s = fp8_ocp + fp8_fnuz
    floats = fp8s + (float16, bfloat16, float32, float64)
    uints = (uint8, uint16, uint32, uint64)
    sints = (int8, int16, int32, int64)
    ints = uints + sints
    weaks = (weakint, weakfloat)
    all = floats + ints + (bool,)  # noqa: A003

    @staticmethod
    def imagef(height: int, width: int) -> ImageDType:
        """A float (RGBA float32) image of `height` x `width` texels."""
        return ImageDType(DTypes.float32, height, width)

    @staticmethod
    def imageh(height: int, width: int) -> ImageDType:
        """A half (RGBA float16) image of `height` x `width` texels."""
        return ImageDType(DTypes.float16, height, width)

    @staticmethod
    def is_float(dt: DType) -> bool:
        """True for every float dtype (and weakfloat), vectors included."""
        return dt.scalar() in _FLOATS

    @staticmethod
    def is_int(dt: DType) -> bool:
        """True for every integer dtype (and weakint), vectors included; bool is not an int."""
        return dt.scalar() in _INTS

    @staticmethod
    def is_unsigned(dt: DType) -> bool:
        """True for the unsigned integer dtypes."""
        return dt.scalar() in _UINTS

    @staticmethod
    def is_bool(dt: DType) -> bool:
        """True for bool and bool vectors."""
        return dt.scalar() is _BOOL

    @staticmethod
    def from_py(x: Any) -> DType:
        """The dtype of a Python value: bool, weakint for ints, weakfloat for floats, the join for lists/tuples."""
        if isinstance(x, bool):
            return _BOOL
        if isinstance(x, float):
            return DTypes.weakfloat
        if isinstance(x, int):
            return DTypes.weakint
        if isinstance(x, (list, tuple)):
            return strong_dtype(least_upper_dtype(*[DTypes.from_py(v) for v in x])) if x else DTypes.default_float
        raise DTypeError(f"cannot infer a dtype for {x!r} of type {type(x).__name__}: pass dtype= explicitly")

    @staticmethod
    def finfo(dt: DType) -> tuple[int, int]:
        """(exponent bits, mantissa bits) of a float dtype."""
        if not DTypes.is_float(dt) or dt in DTypes.weaks:
            raise DTypeError(f"{dt} is not a concrete float dtype")
        return _FINFO[dt.scalar()]


dtypes = DTypes()
_BOOL = DTypes.bool
_FLOATS = frozenset(DTypes.floats + (DTypes.weakfloat,))
_INTS = frozenset(DTypes.ints + (DTypes.weakint,))
_UINTS = frozenset(DTypes.uints)
_FINFO = {
    dtypes.float16: (5, 10),
    dtypes.bfloat16: (8, 7),
    dtypes.float32: (8, 23),
    dtypes.float64: (11, 52),
    dtypes.fp8e4m3: (4, 3),
    dtypes.fp8e5m2: (5, 2),
    dtypes.fp8e4m3fnuz: (4, 3),
    dtypes.fp8e5m2fnuz: (5, 2),
}

DTYPES_DICT: dict[str, DType] = {
    k: v for k, v in vars(DTypes).items() if isinstance(v, DType) and not k.startswith(("default", "void", "weak", "index"))
}
_PY_NAMES = {**{v.name: k for k, v in reversed(list(DTYPES_DICT.items()))}, "void": "void", "weakint": "weakint", "weakfloat": "weakfloat"}
# repr prefers the explicit-width spelling (dtypes.float32, not dtypes.float)
_PY_NAMES.update({dt.name: n for n, dt in vars(DTypes).items() if isinstance(dt, DType) and any(c.isdigit() for c in n)})


def to_dtype(dt: DType | str) -> DType:
    """A DType from a DType or a name such as "float32" or "half"."""
    if isinstance(dt, DType):
        return dt
    if not isinstance(dt, str):
        raise DTypeError(f"a dtype is a DType or its name, got {type(dt).__name__} {dt!r}")
    if (ret := DTYPES_DICT.get(dt.lower())) is None:
        raise DTypeError(f"unknown dtype name {dt!r}: use one of {', '.join(sorted(DTYPES_DICT))}")
    return ret


def strong_dtype(dt: DType) -> DType:
    """The concrete dtype a weak literal type becomes when nothing else decides it."""
    if dt.scalar() is dtypes.weakint:
        return dtypes.default_int.vec(dt.count)
    if dt.scalar() is dtypes.weakfloat:
        return dtypes.default_float.vec(dt.count)
    return dt


# https://jax.readthedocs.io/en/latest/jep/9407-type-promotion.html (no complex types)
PROMO_LATTICE: dict[DType, tuple[DType, ...]] = {
    dtypes.bool: (dtypes.weakint,),
    dtypes.weakint: (dtypes.int8, dtypes.uint8),
    dtypes.int8: (dtypes.int16,),
    dtypes.int16: (dtypes.int32,),
    dtypes.int32: (dtypes.int64,),
    dtypes.int64: (dtypes.weakfloat,),
    dtypes.uint8: (dtypes.int16, dtypes.uint16),
    dtypes.uint16: (dtypes.int32, dtypes.uint32),
    dtypes.uint32: (dtypes.int64, dtypes.uint64),
    dtypes.uint64: (dtypes.weakfloat,),
    dtypes.weakfloat: dtypes.fp8s,
    dtypes.fp8e4m3: (dtypes.float16, dtypes.bfloat16),
    dtypes.fp8e5m2: (dtypes.float16, dtypes.bfloat16),
    dtypes.fp8e4m3fnuz: (dtypes.float16, dtypes.bfloat16),
    dtypes.fp8e5m2fnuz: (dtypes.float16, dtypes.bfloat16),
    dtypes.float16: (dtypes.float32,),
    dtypes.bfloat16: (dtypes.float32,),
    dtypes.float32: (dtypes.float64,),
    dtypes.float64: (),
}


@functools.cache
def _ancestors(dt: DType) -> frozenset[DType]:
    return frozenset({dt}).union(*(_ancestors(p) for p in PROMO_LATTICE[dt]))


@functools.cache
def least_upper_dtype(*dts: DType) -> DType:
    """The smallest dtype every one of `dts` promotes to (the join in the promotion lattice)."""
    if not dts:
        raise DTypeError("least_upper_dtype needs at least one dtype")
    for dt in dts:
        if dt.scalar() not in PROMO_LATTICE:
            raise DTypeError(f"{dt} is not in the promotion lattice (pointers and void do not promote)")
    return min(frozenset.intersection(*(_ancestors(d.scalar()) for d in dts)))


def least_upper_float(dt: DType) -> DType:
    """The float dtype an operation like sqrt computes `dt` in."""
    if dt is dtypes.weakint:
        return dtypes.weakfloat
    return dt if dtypes.is_float(dt) else least_upper_dtype(dt, dtypes.default_float)


def sum_acc_dtype(dt: DType) -> DType:
    """The accumulator dtype of a sum over `dt` (ints widen to at least int32/uint32, floats to at least float32)."""
    if dtypes.is_unsigned(dt):
        return least_upper_dtype(dt, dtypes.uint32)
    if dtypes.is_int(dt) or dtypes.is_bool(dt):
        return least_upper_dtype(dt, dtypes.int32)
    return least_upper_dtype(dt, dtypes.float32)


def _wrap_int(bits: int, signed: bool) -> Callable[[Any], int]:
    mask, top = (1 << bits) - 1, 1 << (bits - 1)

    def wrap(x: Any) -> int:
        v = int(x) & mask
        return v - (1 << bits) if signed and v & top else v

    return wrap


def _fp8_truncator(dt: DType) -> Callable[[Any], float]:
    fmt = FP8_FORMATS[dt.name]
    return lambda x: fp8_round(float(x), fmt)


_TRUNCATE: dict[DType, Callable[[Any], ConstType]] = {
    dtypes.bool: bool,
    dtypes.weakint: int,
    dtypes.weakfloat: float,
    dtypes.float64: float,
    dtypes.float32: lambda x: float_to_fp32(float(x)),
    dtypes.float16: lambda x: float_to_fp16(float(x)),
    dtypes.bfloat16: lambda x: float_to_bf16(float(x)),
    **{dt: _fp8_truncator(dt) for dt in dtypes.fp8s},
    **{dt: _wrap_int(dt.bitsize, dt not in dtypes.uints) for dt in dtypes.ints},
}


def truncate(dt: DType, value: ConstType) -> ConstType:
    """`value` converted to scalar dtype `dt` exactly as a cast does: ints wrap, floats round to nearest even.

    A float converted to an int truncates toward zero, as C does; NaN/inf to an int raises DTypeError.
    """
    fn = _TRUNCATE.get(dt.scalar())
    if fn is None:
        raise DTypeError(f"cannot make a constant of dtype {dt}")
    if dtypes.is_int(dt) and isinstance(value, float):
        if not math.isfinite(value):
            raise DTypeError(f"cannot convert {value} to the integer dtype {dt}")
        value = math.trunc(value)
    return fn(value)


def fp8_to_bits(value: float, dt: DType) -> int:
    """The fp8 code of `value` in fp8 dtype `dt` (round to nearest even, saturating)."""
    if dt not in dtypes.fp8s:
        raise DTypeError(f"{dt} is not an fp8 dtype")
    return encode_fp8(value, FP8_FORMATS[dt.name])


def can_lossless_cast(src: DType, dst: DType) -> bool:
    """True when every value of `src` is exactly representable in `dst` (tinygrad's table, like numpy.can_cast)."""
    if src == dst or src == dtypes.bool:
        return True
    return src in _LOSSLESS.get(dst, ())


_LOSSLESS: dict[DType, tuple[DType, ...]] = {
    dtypes.weakint: dtypes.ints,
    dtypes.float64: (dtypes.float32, dtypes.float16, dtypes.bfloat16, *dtypes.fp8s, dtypes.uint32, dtypes.uint16, dtypes.uint8,
                     dtypes.int32, dtypes.int16, dtypes.int8),
    dtypes.float32: (dtypes.float16, dtypes.bfloat16, *dtypes.fp8s, dtypes.uint16, dtypes.uint8, dtypes.int16, dtypes.int8),
    dtypes.float16: (*dtypes.fp8s, dtypes.uint8, dtypes.int8),
    dtypes.uint64: (dtypes.uint32, dtypes.uint16, dtypes.uint8),
    dtypes.uint32: (dtypes.uint16, dtypes.uint8),
    dtypes.uint16: (dtypes.uint8,),
    dtypes.int64: (dtypes.uint32, dtypes.uint16, dtypes.uint8, dtypes.int32, dtypes.int16, dtypes.int8),
    dtypes.int32: (dtypes.uint16, dtypes.uint8, dtypes.int16, dtypes.int8),
    dtypes.int16: (dtypes.uint8, dtypes.int8),
}


def float_to_fp8(value: float, dt: DType) -> int:
    """The fp8 code of `value` in fp8 dtype `dt` (round to nearest even, saturating); same as fp8_to_bits."""
    return fp8_to_bits(value, dt)


def fp8_to_float(code: int, dt: DType) -> float:
    """The value of fp8 code `code` (0..255) in fp8 dtype `dt`."""
    if dt not in dtypes.fp8s:
        raise DTypeError(f"{dt} is not an fp8 dtype")
    return decode_fp8(code, FP8_FORMATS[dt.name])
