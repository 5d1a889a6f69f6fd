"""Evaluate ALU ops on Python values, with each dtype's wrap-around and rounding.

Used for constant folding and `sym_infer`; every result is truncated to the node's dtype exactly as a cast would.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uopir.dtypes import ConstType, DType, dtypes, truncate
from uopir.errors import SymbolicError
from uopir.ops import Ops

if TYPE_CHECKING:
    from uopir.uop import UOp


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _cmod(a: int, b: int) -> int:
    return a - _cdiv(a, b) * b


def _safe_log2(x: float) -> float:
    if x == 0:
        return -math.inf
    return math.log2(x) if x > 0 else math.nan


def _safe_sqrt(x: float) -> float:
    return math.sqrt(x) if x >= 0 else math.nan


def _recip(x: float) -> float:
    return 1 / x if x != 0 else math.copysign(math.inf, x)


def _exp2(x: float) -> float:
    try:
        return 2.0**x
    except OverflowError:
        return math.inf


PYTHON_ALU: dict[Ops, Callable[..., Any]] = {
    Ops.ADD: operator.add,
    Ops.SUB: operator.sub,
    Ops.MUL: operator.mul,
    Ops.NEG: operator.neg,
    Ops.MAX: max,
    Ops.FLOORDIV: operator.floordiv,
    Ops.FLOORMOD: operator.mod,
    Ops.CDIV: _cdiv,
    Ops.CMOD: _cmod,
    Ops.CMPLT: operator.lt,
    Ops.CMPNE: operator.ne,
    Ops.CMPEQ: operator.eq,
    Ops.AND: operator.and_,
    Ops.OR: operator.or_,
    Ops.XOR: operator.xor,
    Ops.SHL: operator.lshift,
    Ops.SHR: operator.rshift,
    Ops.WHERE: lambda c, a, b: a if c else b,
    Ops.SQRT: _safe_sqrt,
    Ops.EXP2: _exp2,
    Ops.LOG2: _safe_log2,
    Ops.SIN: lambda x: math.sin(x) if math.isfinite(x) else math.nan,
    Ops.RECIPROCAL: _recip,
    Ops.TRUNC: lambda x: float(math.trunc(x)) if math.isfinite(x) else x,
    Ops.FDIV: lambda a, b: a / b if b != 0 else (math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1, b)),
    Ops.POW: lambda a, b: a**b,
}


def exec_alu(op: Ops, dtype: DType, operands: tuple[ConstType, ...]) -> ConstType | None:
    """The value of `op` on Python operands, truncated to `dtype`; None when it has no value (x // 0, x % 0)."""
    fn = PYTHON_ALU.get(op)
    if fn is None:
        return None
    if op in (Ops.FLOORDIV, Ops.FLOORMOD, Ops.CDIV, Ops.CMOD) and operands[1] == 0:
        return None
    if op in (Ops.SHL, Ops.SHR) and operands[1] < 0:
        return None
    try:
        ret = fn(*operands)
    except (OverflowError, ValueError, ZeroDivisionError):
        return None
    dt = dtype.scalar()
    if dt is dtypes.weakint or dt is dtypes.weakfloat:
        return ret
    if dtypes.is_int(dt) and isinstance(ret, float):
        return None  # float math on an int node has no exact fold
    return truncate(dt, ret)


class Unset:
    """The value of a variable that var_vals does not set."""

    def __init__(self, name: str):
        self.name = name


def eval_node(node: UOp, vals: dict[UOp, ConstType], env: dict[str, int]) -> ConstType | Unset:
    """The value of one node given its srcs' values `vals` and variable values `env` (by name; ranges as r<id>)."""
    op = node.op
    if op is Ops.CONST:
        return node.arg
    if op is Ops.DEFINE_VAR:
        # a variable without a value is only an error if something other than its BIND reads it
        return env.get(node.arg[0], Unset(node.arg[0]))
    if op is Ops.BIND:
        return env.get(node.src[0].arg[0], vals[node.src[1]])
    if op is Ops.PARAM and node.arg.name is not None:
        if node.arg.name not in env:
            raise SymbolicError(f"variable {node.arg.name!r} has no value: pass it in var_vals")
        return env[node.arg.name]
    if op in (Ops.RANGE, Ops.SPECIAL):
        name = f"r{node.arg[0]}" if op is Ops.RANGE else node.arg
        if name not in env:
            raise SymbolicError(f"{op.name.lower()} {name!r} has no value: pass it in var_vals")
        return env[name]
    operands = tuple(vals[s] for s in node.src)
    if (unset := next((v for v in operands if isinstance(v, Unset)), None)) is not None:
        raise SymbolicError(f"variable {unset.name!r} has no value: pass it in var_vals")
    if op is Ops.CAST:
        return truncate(node.dtype, operands[0])
    ret = exec_alu(op, node.dtype, operands)
    if ret is None:
        raise SymbolicError(f"cannot evaluate {op!r} on {[vals[s] for s in node.src]} (division by zero or not an ALU op)")
    return ret
