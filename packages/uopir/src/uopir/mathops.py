"""UOp's side of the operator layer (`operators.OperatorMixin`): its hooks and the operators whose meaning is its own.

Promotion: both operands meet at `least_upper_dtype`; a weak constant (a Python number) adopts the other side's dtype,
anything else is cast. Subtraction and negation are built from ADD and MUL by -1, so the symbolic rules only see one
canonical form, and `a <= b` is `not (b < a)`. `==` and `!=` keep their identity meaning (UOps are dict keys); use
`.eq()` / `.ne()` to build comparisons.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from uopir.dtypes import dtypes, least_upper_dtype, least_upper_float
from uopir.operators import OperatorMixin
from uopir.ops import Ops


class MathMixin(OperatorMixin):
    """The operator layer's hooks for UOp, and UOp's own builders (C division, shifts, select, `<=` and `>=`)."""

    __slots__ = ()

    # provided by UOp: fields and the node builders these operators are written in terms of
    dtype: Any
    op: Any
    arg: Any
    alu: Callable[..., Any]
    const_like: Callable[..., Any]
    cast: Callable[..., Any]

    # ---- the operator layer's hooks ----
    def _operands(self, x: Any, reverse: bool = False) -> tuple[Any, Any]:
        a, b = self._promote(x)
        return (b, a) if reverse else (a, b)

    def _binop(self, op: Ops, other: Any, reverse: bool = False) -> Any:
        a, b = self._promote(other)
        return b.alu(op, a) if reverse else a.alu(op, b)

    def _alu(self, op: Ops, *srcs: Any) -> Any:
        return self.alu(op, *srcs)

    def _const(self, value: Any, dtype: Any) -> Any:
        return self.const_like(value, dtype)

    def _float(self) -> Any:
        return self._to(least_upper_float(self.dtype))

    def _promote(self, other: Any) -> tuple[Any, Any]:
        """Both operands at their common dtype: weak constants adopt it, everything else is cast."""
        if not isinstance(other, MathMixin):
            other = self.const_like(other, dtypes.from_py(other))
        a, b = self, other
        if a.dtype is b.dtype:
            return a, b
        out = least_upper_dtype(a.dtype.scalar(), b.dtype.scalar()).vec(max(a.dtype.count, b.dtype.count))
        return a._to(out), b._to(out)

    def _to(self, dt: Any) -> Any:
        if self.dtype is dt:
            return self
        if self.op is Ops.CONST and self.dtype.scalar() in dtypes.weaks:
            return self.const_like(self.arg, dt)
        return self.cast(dt)

    def ufix(self, x: Any) -> Any:
        """`x` as a UOp: Python numbers become constants of this node's dtype."""
        return x if isinstance(x, MathMixin) else self.const_like(x)

    # ---- UOp's own meanings ----
    def sub(self, x: Any, reverse: bool = False) -> Any:
        """self - x, as self + (-x)."""
        a, b = self._operands(x, reverse)
        return a + (-b)

    def cdiv(self, x: Any) -> Any:
        """Integer division truncating toward zero (C semantics)."""
        return self._binop(Ops.CDIV, x)

    def cmod(self, x: Any) -> Any:
        """Remainder with the sign of the dividend (C semantics)."""
        return self._binop(Ops.CMOD, x)

    def lshift(self, x: Any) -> Any:
        """self << x (x a UOp or a Python int of the same dtype)."""
        return self.alu(Ops.SHL, self.ufix(x))

    def rshift(self, x: Any) -> Any:
        """self >> x."""
        return self.alu(Ops.SHR, self.ufix(x))

    def logical_not(self) -> Any:
        """Boolean not, as `x != True`."""
        return self.ne(True)

    def __le__(self, x: Any) -> Any:
        return self._binop(Ops.CMPLT, x, True).logical_not()

    def __ge__(self, x: Any) -> Any:
        return self._binop(Ops.CMPLT, x).logical_not()

    def where(self, x: Any, y: Any) -> Any:
        """`x` where this bool is true, else `y`."""
        if isinstance(x, MathMixin):
            a, b = x._promote(y)
        elif isinstance(y, MathMixin):
            b, a = y._promote(x)
        else:
            a = self.const_like(x, dtypes.from_py(x))
            a, b = a._promote(y)
        return self.alu(Ops.WHERE, a, b)


#: operand types a UOp's binary operators leave the operation to (their reflected operator answers): a tensor class
#: registers itself, so `variable * tensor` is the tensor's product as `tensor * variable` is
DEFERRED_OPERAND_TYPES: set[type] = set()


def _deferring(name: str) -> Callable[..., Any]:
    base = getattr(MathMixin, name)

    def method(self: Any, x: Any) -> Any:
        return NotImplemented if x.__class__ in DEFERRED_OPERAND_TYPES else base(self, x)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = base.__doc__
    return method


for _name in ("__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__", "__and__", "__or__", "__xor__",
              "__lt__", "__gt__", "__le__", "__ge__"):
    setattr(MathMixin, _name, _deferring(_name))
