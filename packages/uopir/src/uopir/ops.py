"""The `Ops` enum (every kind of UOp node), the `GroupOp` sets that rules match on, and range axis kinds."""

from __future__ import annotations

from enum import Enum, EnumType, IntEnum, auto
from typing import Any


class _OpsType(EnumType):
    """The metaclass of `Ops`: an enum's, whose class attribute reads (`Ops.ADD`) skip the enum machinery once the class
    is made (see the end of this module). EnumType defines `__getattr__`, and with that hook every `Ops.ADD` went
    through a bound `type.__getattribute__` call: 64 ns against 25, and the graph code reads `Ops.X` everywhere (9% of
    an eager training step). Made, Ops keeps its members and everything else its class namespace holds; attributes it
    only inherits (int's and Enum's class-level methods) are not read through the class."""


class Ops(IntEnum, metaclass=_OpsType):
    """Every kind of UOp node. The declaration order is the tie-break order of toposorts and canonical sorting."""

    # defines: loop ranges, GPU dimensions, storage
    SPECIAL = auto()
    BUFFER = auto()
    PARAM = auto()
    DEFINE_VAR = auto()

    # structure: calls and their bodies, programs, grouping
    NOOP = auto()
    CALL = auto()
    PROGRAM = auto()
    LINEAR = auto()
    SOURCE = auto()
    BINARY = auto()
    SINK = auto()
    AFTER = auto()
    GROUP = auto()
    STACK = auto()  # vector creation from scalars
    GETADDR = auto()

    # memory
    INDEX = auto()
    SHRINK = auto()
    LOAD = auto()
    STORE = auto()

    # math
    WMMA = auto()
    CAST = auto()
    BITCAST = auto()
    EXP2 = auto()
    LOG2 = auto()
    SIN = auto()
    SQRT = auto()
    RECIPROCAL = auto()
    NEG = auto()
    TRUNC = auto()
    ADD = auto()
    MUL = auto()
    SHL = auto()
    SHR = auto()
    CDIV = auto()  # integer division truncating toward zero (C)
    MAX = auto()
    CMOD = auto()  # remainder with the sign of the dividend (C)
    CMPLT = auto()
    CMPNE = auto()
    CMPEQ = auto()
    XOR = auto()
    OR = auto()
    AND = auto()
    THREEFRY = auto()
    SUB = auto()
    FDIV = auto()
    POW = auto()
    FLOORDIV = auto()  # integer division rounding toward -inf (Python //)
    FLOORMOD = auto()  # remainder with the sign of the divisor (Python %)
    WHERE = auto()
    MULACC = auto()

    # control flow, constants, custom code
    BARRIER = auto()
    RANGE = auto()
    IF = auto()
    END = auto()
    ENDIF = auto()
    CONST = auto()
    BIND = auto()
    CUSTOM = auto()
    CUSTOMI = auto()

    # tensor-graph only: scheduling hints, buffer ops, movement, reductions
    IOTA = auto()  # the values 0, 1, ..., n - 1 for its source n (a size, maybe symbolic): lowered to its loop index
    CONTIGUOUS = auto()
    CONTIGUOUS_BACKWARD = auto()
    DETACH = auto()
    COPY = auto()
    MSELECT = auto()
    MSTACK = auto()
    CUSTOM_FUNCTION = auto()
    RESHAPE = auto()
    PERMUTE = auto()
    EXPAND = auto()
    PAD = auto()
    FLIP = auto()
    UNSHARD = auto()
    REDUCE = auto()
    ALLREDUCE = auto()

    def __repr__(self) -> str:
        return f"Ops.{self.name}"

    __str__ = __repr__

    # Enum's, in the class namespace: a lookup by an unknown value reads it. Static, as the class's attribute reads return
    # what its namespace holds (a classmethod would come back unbound)
    @staticmethod
    def _missing_(value: Any) -> None:
        return None


# member reads as plain attribute reads of the class namespace (see _OpsType): set once the class exists, because making
# an enum class reads attributes its bases define. Only where the hook exists: Python 3.12 dropped EnumType.__getattr__,
# and there a member read is already as fast (19 ns; the generic read measured 21-24)
if "__getattr__" in vars(EnumType):
    _OpsType.__getattribute__ = object.__getattribute__  # type: ignore[assignment,method-assign]


class GroupOp:
    """Named sets of Ops, for rules and checks that apply to a family of ops."""

    Unary = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.NEG, Ops.TRUNC})
    Binary = frozenset({Ops.ADD, Ops.MUL, Ops.CDIV, Ops.MAX, Ops.CMOD, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.XOR, Ops.SHL, Ops.SHR, Ops.OR,
                        Ops.AND, Ops.THREEFRY, Ops.SUB, Ops.FDIV, Ops.POW, Ops.FLOORDIV, Ops.FLOORMOD})
    Ternary = frozenset({Ops.WHERE, Ops.MULACC})
    ALU = Unary | Binary | Ternary
    Broadcastable = Binary | Ternary
    Elementwise = ALU | {Ops.CAST, Ops.BITCAST}

    # constants and the things that name storage or inputs
    Constants = frozenset({Ops.CONST, Ops.DEFINE_VAR, Ops.BIND})
    Buffers = frozenset({Ops.BUFFER, Ops.PARAM, Ops.MSELECT, Ops.MSTACK})
    Defines = frozenset({Ops.PARAM, Ops.BUFFER})
    Irreducible = frozenset({Ops.CONST, Ops.DEFINE_VAR, Ops.SPECIAL, Ops.RANGE, Ops.PARAM, Ops.GETADDR})

    Movement = frozenset({Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP})
    Memory = frozenset({Ops.INDEX, Ops.LOAD, Ops.STORE})
    ControlFlow = frozenset({Ops.RANGE, Ops.END, Ops.IF, Ops.ENDIF, Ops.BARRIER})
    CallBodies = frozenset({Ops.SINK, Ops.PROGRAM, Ops.LINEAR, Ops.COPY, Ops.CUSTOM_FUNCTION})
    Programs = frozenset({Ops.CALL, Ops.PROGRAM, Ops.LINEAR, Ops.SOURCE, Ops.BINARY, Ops.CUSTOM_FUNCTION})
    Structure = frozenset({Ops.AFTER, Ops.SINK, Ops.GROUP})
    MultiDevice = frozenset({Ops.COPY, Ops.MSELECT, Ops.MSTACK, Ops.UNSHARD, Ops.ALLREDUCE})

    # f(a, b) == f(b, a)
    Commutative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.XOR, Ops.AND, Ops.OR})
    # f(f(a, b), c) == f(a, f(b, c))
    Associative = frozenset({Ops.ADD, Ops.MUL, Ops.AND, Ops.OR, Ops.MAX})
    # f(x, x) == x
    Idempotent = frozenset({Ops.OR, Ops.AND, Ops.MAX})
    # the ALU ops a REDUCE can combine with
    Reduce = frozenset({Ops.ADD, Ops.MUL, Ops.MAX})
    # these produce bool
    Comparison = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})

    All = frozenset(Ops)


class AxisType(Enum):
    """What a RANGE loops over; the codegen maps each kind to a loop, a GPU dimension or an unrolled axis."""

    DEVICE = auto()
    GLOBAL = auto()
    WARP = auto()
    LOCAL = auto()
    LOOP = auto()
    GROUP_REDUCE = auto()
    REDUCE = auto()
    UPCAST = auto()
    UNROLL = auto()
    PLACEHOLDER = auto()

    def __repr__(self) -> str:
        return f"AxisType.{self.name}"

    __str__ = __repr__


# single letters used when printing range names (r0, g1, ...)
AXIS_LETTERS = {
    AxisType.DEVICE: "d", AxisType.GLOBAL: "g", AxisType.WARP: "w", AxisType.LOCAL: "l", AxisType.LOOP: "L",
    AxisType.GROUP_REDUCE: "G", AxisType.REDUCE: "R", AxisType.UPCAST: "u", AxisType.UNROLL: "r", AxisType.PLACEHOLDER: "p",
}
