"""Python operators on UOps: `a + b`, `a < b`, `a // b`... build ALU nodes with dtype promotion.

Subtraction and negation are built from ADD and MUL by -1, so the symbolic rules only see one canonical form.
`==` and `!=` keep their identity meaning (UOps are dict keys); use `.eq()` / `.ne()` to build comparisons.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from uopir.dtypes import dtypes, least_upper_dtype, least_upper_float
from uopir.ops import Ops


class MathMixin:
    """ALU builders and operator overloads shared by every UOp."""

    __slots__ = ()

    # provided by UOp: fields and the node builders these operators are written in terms of
    dtype: Any
    op: Any
    arg: Any
    alu: Callable[..., Any]
    const_like: Callable[..., Any]
    cast: Callable[..., Any]

    def _binop(self, op: Ops, other: Any, reverse: bool = False) -> Any:
        a, b = self._promote(other)
        return b.alu(op, a) if reverse else a.alu(op, b)

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

    # ---- arithmetic ----
    def __add__(self, x: Any) -> Any:
        return self._binop(Ops.ADD, x)

    def __radd__(self, x: Any) -> Any:
        return self._binop(Ops.ADD, x, True)

    def __mul__(self, x: Any) -> Any:
        return self._binop(Ops.MUL, x)

    def __rmul__(self, x: Any) -> Any:
        return self._binop(Ops.MUL, x, True)

    def __neg__(self) -> Any:
        return self.logical_not() if dtypes.is_bool(self.dtype) else self * -1

    def __sub__(self, x: Any) -> Any:
        a, b = self._promote(x)
        return a + (-b)

    def __rsub__(self, x: Any) -> Any:
        a, b = self._promote(x)
        return b + (-a)

    def __floordiv__(self, x: Any) -> Any:
        return self._binop(Ops.FLOORDIV, x)

    def __rfloordiv__(self, x: Any) -> Any:
        return self._binop(Ops.FLOORDIV, x, True)

    def __mod__(self, x: Any) -> Any:
        return self._binop(Ops.FLOORMOD, x)

    def __rmod__(self, x: Any) -> Any:
        return self._binop(Ops.FLOORMOD, x, True)

    def __truediv__(self, x: Any) -> Any:
        a, b = self._promote(x)
        ft = least_upper_float(a.dtype)
        return a._to(ft).alu(Ops.FDIV, b._to(ft))

    def __rtruediv__(self, x: Any) -> Any:
        a, b = self._promote(x)
        ft = least_upper_float(a.dtype)
        return b._to(ft).alu(Ops.FDIV, a._to(ft))

    def cdiv(self, x: Any) -> Any:
        """Integer division truncating toward zero (C semantics)."""
        return self._binop(Ops.CDIV, x)

    def cmod(self, x: Any) -> Any:
        """Remainder with the sign of the dividend (C semantics)."""
        return self._binop(Ops.CMOD, x)

    # ---- bitwise / logical ----
    def __and__(self, x: Any) -> Any:
        return self._binop(Ops.AND, x)

    def __rand__(self, x: Any) -> Any:
        return self._binop(Ops.AND, x, True)

    def __or__(self, x: Any) -> Any:
        return self._binop(Ops.OR, x)

    def __ror__(self, x: Any) -> Any:
        return self._binop(Ops.OR, x, True)

    def __xor__(self, x: Any) -> Any:
        return self._binop(Ops.XOR, x)

    def __rxor__(self, x: Any) -> Any:
        return self._binop(Ops.XOR, x, True)

    def __lshift__(self, x: Any) -> Any:
        return self.alu(Ops.SHL, self.ufix(x))

    def __rshift__(self, x: Any) -> Any:
        return self.alu(Ops.SHR, self.ufix(x))

    def __invert__(self) -> Any:
        if dtypes.is_bool(self.dtype):
            return self.logical_not()
        return self ^ (self.dtype.max if dtypes.is_unsigned(self.dtype) else -1)

    def logical_not(self) -> Any:
        """Boolean not, as `x != True`."""
        return self.ne(True)

    # ---- comparisons ----
    def __lt__(self, x: Any) -> Any:
        return self._binop(Ops.CMPLT, x)

    def __gt__(self, x: Any) -> Any:
        return self._binop(Ops.CMPLT, x, True)

    def __le__(self, x: Any) -> Any:
        return self._binop(Ops.CMPLT, x, True).logical_not()

    def __ge__(self, x: Any) -> Any:
        return self._binop(Ops.CMPLT, x).logical_not()

    def ne(self, x: Any) -> Any:
        """Elementwise `!=` as a CMPNE node."""
        return self._binop(Ops.CMPNE, x)

    def eq(self, x: Any) -> Any:
        """Elementwise `==` as a CMPEQ node."""
        return self._binop(Ops.CMPEQ, x)

    # ---- min/max/select ----
    def maximum(self, x: Any) -> Any:
        """Elementwise max."""
        return self._binop(Ops.MAX, x)

    def minimum(self, x: Any) -> Any:
        """Elementwise min, as -max(-a, -b)."""
        a, b = self._promote(x)
        return -((-a).maximum(-b))

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

    # ---- unary math ----
    def sqrt(self) -> Any:
        """Square root (computed in a float dtype)."""
        return self._to(least_upper_float(self.dtype)).alu(Ops.SQRT)

    def exp2(self) -> Any:
        """2**x."""
        return self._to(least_upper_float(self.dtype)).alu(Ops.EXP2)

    def log2(self) -> Any:
        """log2(x)."""
        return self._to(least_upper_float(self.dtype)).alu(Ops.LOG2)

    def sin(self) -> Any:
        """sin(x)."""
        return self._to(least_upper_float(self.dtype)).alu(Ops.SIN)

    def reciprocal(self) -> Any:
        """1/x."""
        return self._to(least_upper_float(self.dtype)).alu(Ops.RECIPROCAL)

    def trunc(self) -> Any:
        """Round toward zero."""
        return self.alu(Ops.TRUNC)
