"""`OperatorMixin`: the one operator layer of every value that builds ALU graphs (`UOp` here, the scheduler's `Tensor`).

Every Python operator is defined once, here, in terms of named builders (`a + b` is `a.add(b)`, `b + a` is
`a.add(b, reverse=True)`, `a < b` builds CMPLT, `~a` is `a.bitwise_not()`...), and the builders whose meaning is the
same for both kinds of value are written once too. A class supplies the hooks the builders are written in:

- `_operands(x, reverse)`: this value and `x` at one dtype (and, for a Tensor, one broadcast shape), in op order;
- `_alu(op, *srcs)`: the node `op` of this value and `srcs`, as this class's kind of value;
- `_const(value, dtype)`: a constant of this value's kind (and shape);
- `_float()`: this value in the float dtype math on it is computed in;
- `_check_bitwise(name)`: refuse a bitwise op on a dtype that has none (a UOp checks nothing);

and overrides the builders that differ: a UOp subtracts as `a + (-b)` (the one form the symbolic rules see) and
compares `<=` as `not (b < a)`; a Tensor adds broadcasting, tinygrad's dtype rules (weak Python scalars, bool
arithmetic as logic), floor division and modulo of ints built from C's, NaN-aware `<=`. `==` and `!=` are not here:
a UOp keeps identity equality (UOps are dict keys) and builds comparisons with `eq` / `ne`.
"""

from __future__ import annotations

from typing import Any

from uopir.dtypes import dtypes
from uopir.ops import Ops


class OperatorMixin:
    """Python operators and elementwise builders shared by UOp and Tensor (see the module docstring)."""

    __slots__ = ()

    dtype: Any

    # ---- hooks (each class defines them) ----
    def _operands(self, x: Any, reverse: bool = False) -> tuple[Any, Any]:
        raise NotImplementedError

    def _alu(self, op: Ops, *srcs: Any) -> Any:
        raise NotImplementedError

    def _const(self, value: Any, dtype: Any) -> Any:
        raise NotImplementedError

    def _float(self) -> Any:
        raise NotImplementedError

    def _check_bitwise(self, name: str) -> None:
        """Refuse `name` (a bitwise op) on a dtype without bits to operate on; by default every dtype is allowed."""

    def _binop(self, op: Ops, x: Any, reverse: bool = False) -> Any:
        a, b = self._operands(x, reverse)
        return a._alu(op, b)

    # ---- arithmetic ----
    def add(self, x: Any, reverse: bool = False) -> Any:
        """self + x."""
        return self._binop(Ops.ADD, x, reverse)

    def sub(self, x: Any, reverse: bool = False) -> Any:
        """self - x."""
        return self._binop(Ops.SUB, x, reverse)

    def mul(self, x: Any, reverse: bool = False) -> Any:
        """self * x."""
        return self._binop(Ops.MUL, x, reverse)

    def div(self, x: Any, reverse: bool = False) -> Any:
        """self / x: true division, in a float dtype."""
        a, b = self._operands(x, reverse)
        return a._float()._alu(Ops.FDIV, b._float())

    def floordiv(self, x: Any, reverse: bool = False) -> Any:
        """self // x (Python semantics)."""
        return self._binop(Ops.FLOORDIV, x, reverse)

    def mod(self, x: Any, reverse: bool = False) -> Any:
        """self % x with the sign of the divisor (Python semantics)."""
        return self._binop(Ops.FLOORMOD, x, reverse)

    def pow(self, x: Any, reverse: bool = False) -> Any:
        """self ** x."""
        return self._binop(Ops.POW, x, reverse)

    def neg(self) -> Any:
        """-self (logical not for bool)."""
        if dtypes.is_bool(self.dtype):
            return self.logical_not()
        return self._alu(Ops.MUL, self._const(-1, self.dtype))

    def maximum(self, x: Any) -> Any:
        """Elementwise max."""
        return self._binop(Ops.MAX, x)

    def minimum(self, x: Any) -> Any:
        """Elementwise min: -max(-a, -b) for floats (NaN and the gradient's even split at ties as max has them), else a
        select (negating an int overflows at its lowest value: min(x, INT_MIN) gave INT_MAX)."""
        a, b = self._operands(x)
        if dtypes.is_float(a.dtype):
            return a.neg()._alu(Ops.MAX, b.neg()).neg()
        return a._alu(Ops.CMPLT, b).where(a, b)

    # ---- bitwise and logical ----
    def bitwise_and(self, x: Any, reverse: bool = False) -> Any:
        """self & x."""
        a, b = self._operands(x, reverse)
        a._check_bitwise("bitwise_and")
        return a._alu(Ops.AND, b)

    def bitwise_or(self, x: Any, reverse: bool = False) -> Any:
        """self | x."""
        a, b = self._operands(x, reverse)
        a._check_bitwise("bitwise_or")
        return a._alu(Ops.OR, b)

    def bitwise_xor(self, x: Any, reverse: bool = False) -> Any:
        """self ^ x."""
        a, b = self._operands(x, reverse)
        a._check_bitwise("bitwise_xor")
        return a._alu(Ops.XOR, b)

    def bitwise_not(self) -> Any:
        """~self (logical not for bool): XOR with all ones."""
        self._check_bitwise("bitwise_not")
        if dtypes.is_bool(self.dtype):
            return self.logical_not()
        return self._alu(Ops.XOR, self._const(self.dtype.scalar().max if dtypes.is_unsigned(self.dtype) else -1, self.dtype))

    # ---- comparisons ----
    def eq(self, x: Any) -> Any:
        """Elementwise ==."""
        return self._binop(Ops.CMPEQ, x)

    def ne(self, x: Any) -> Any:
        """Elementwise !=."""
        return self._binop(Ops.CMPNE, x)

    # ---- unary math (computed in the float dtype) ----
    def exp2(self) -> Any:
        """2 ** self."""
        return self._float()._alu(Ops.EXP2)

    def log2(self) -> Any:
        """log2(self)."""
        return self._float()._alu(Ops.LOG2)

    def sqrt(self) -> Any:
        """Square root."""
        return self._float()._alu(Ops.SQRT)

    def reciprocal(self) -> Any:
        """1 / self."""
        return self._float()._alu(Ops.RECIPROCAL)

    def sin(self) -> Any:
        """sin(self)."""
        return self._float()._alu(Ops.SIN)

    def trunc(self) -> Any:
        """Round toward zero (ints are already whole)."""
        return self._alu(Ops.TRUNC) if dtypes.is_float(self.dtype) else self

    # ---- the Python operators ----
    def __add__(self, x: Any) -> Any:
        return self.add(x)

    def __radd__(self, x: Any) -> Any:
        return self.add(x, True)

    def __sub__(self, x: Any) -> Any:
        return self.sub(x)

    def __rsub__(self, x: Any) -> Any:
        return self.sub(x, True)

    def __mul__(self, x: Any) -> Any:
        return self.mul(x)

    def __rmul__(self, x: Any) -> Any:
        return self.mul(x, True)

    def __truediv__(self, x: Any) -> Any:
        return self.div(x)

    def __rtruediv__(self, x: Any) -> Any:
        return self.div(x, True)

    def __floordiv__(self, x: Any) -> Any:
        return self.floordiv(x)

    def __rfloordiv__(self, x: Any) -> Any:
        return self.floordiv(x, True)

    def __mod__(self, x: Any) -> Any:
        return self.mod(x)

    def __rmod__(self, x: Any) -> Any:
        return self.mod(x, True)

    def __pow__(self, x: Any) -> Any:
        return self.pow(x)

    def __rpow__(self, x: Any) -> Any:
        return self.pow(x, True)

    def __neg__(self) -> Any:
        return self.neg()

    def __and__(self, x: Any) -> Any:
        return self.bitwise_and(x)

    def __rand__(self, x: Any) -> Any:
        return self.bitwise_and(x, True)

    def __or__(self, x: Any) -> Any:
        return self.bitwise_or(x)

    def __ror__(self, x: Any) -> Any:
        return self.bitwise_or(x, True)

    def __xor__(self, x: Any) -> Any:
        return self.bitwise_xor(x)

    def __rxor__(self, x: Any) -> Any:
        return self.bitwise_xor(x, True)

    def __invert__(self) -> Any:
        return self.bitwise_not()

    def __lshift__(self, x: Any) -> Any:
        return self.lshift(x)

    def __rshift__(self, x: Any) -> Any:
        return self.rshift(x)

    def __lt__(self, x: Any) -> Any:
        return self._binop(Ops.CMPLT, x)

    def __gt__(self, x: Any) -> Any:
        return self._binop(Ops.CMPLT, x, True)

    def __le__(self, x: Any) -> Any:
        a, b = self._operands(x)
        return a._alu(Ops.CMPLT, b)._alu(Ops.OR, a._alu(Ops.CMPEQ, b))  # not (b < a) would hold for NaN

    def __ge__(self, x: Any) -> Any:
        a, b = self._operands(x)
        return b._alu(Ops.CMPLT, a)._alu(Ops.OR, a._alu(Ops.CMPEQ, b))

    # provided by each class
    def lshift(self, x: Any) -> Any:
        raise NotImplementedError

    def rshift(self, x: Any) -> Any:
        raise NotImplementedError

    def logical_not(self) -> Any:
        raise NotImplementedError

    def where(self, x: Any, y: Any) -> Any:
        raise NotImplementedError
