"""Elementwise Tensor ops: broadcasting, tinygrad's dtype promotion, arithmetic, comparisons and unary math.

Promotion: two tensors meet at `least_upper_dtype`; a Python scalar is a weak literal (weakint / weakfloat), so
`int8_tensor + 1` stays int8 and `int_tensor * 0.5` becomes float32. Transcendentals are built from the few ALU ops
kernels have (EXP2, LOG2, SIN, SQRT, RECIPROCAL, TRUNC), in the float dtype of the input.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

from uopir import DType, OperatorMixin, Ops, UOp, dtypes, least_upper_dtype, least_upper_float, strong_dtype

from .errors import BroadcastError, TensorRuntimeError
from .fields import TensorFields
from .templates import templated

if TYPE_CHECKING:
    from .tensor import Tensor

Scalar = bool | int | float


@functools.lru_cache(maxsize=4096)
def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The numpy broadcast of `shapes` (right-aligned; size-1 dims stretch); remembered per shapes (every broadcasting
    op asks, and a model's shapes repeat)."""
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out = []
    for dims in zip(*padded):
        big = {d for d in dims if d != 1}
        if len(big) > 1:
            raise BroadcastError(f"shape mismatch: objects cannot be broadcast to a single shape {shapes}")
        out.append(big.pop() if big else 1)
    return tuple(out)


def in_float32(fn: Any) -> Any:
    """A function built of several float ops (exp as exp2 of a product, cos as sin of a difference) computed in float32
    for the narrow floats (half, bfloat16, fp8), rounded to the tensor's dtype once at the end: each op of a narrow
    dtype rounds its result, and exp(12) in bfloat16 came out 4% off (12 / ln 2 rounded to 17.375 first)."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.dtype in _NARROW_FLOATS:
            return fn(self.cast(dtypes.float32), *args, **kwargs).cast(self.dtype)
        return fn(self, *args, **kwargs)

    return wrapper


_NARROW_FLOATS = frozenset((dtypes.float16, dtypes.bfloat16, *dtypes.fp8s))
# float dtypes whose elementwise math runs in the dtype itself (strong: a weak float takes its partner's dtype)
_WIDE_FLOATS = frozenset((dtypes.float32, dtypes.float64))


def _defers(x: Any) -> bool:
    """True for operands of another tensor kind (a ShardedTensor): Python then asks their reflected operator."""
    return hasattr(x, "shards")


@functools.lru_cache(maxsize=4096)
def _shaped_const(kind: type, key: Any, value: Scalar, dtype: DType, shape: tuple[int, ...]) -> UOp:
    """A constant broadcast to `shape`: the same hash-consed node every time, made once (an optimizer step builds
    hundreds of them per step; each took a reshape and an expand with their shape inference). `kind` and `key` tell
    apart values that compare equal as cache keys (0.0 and -0.0; 1, 1.0 and True): see `_const`."""
    return UOp.const(dtype.const(value), dtype).reshape((1,) * len(shape)).expand(shape)


def const_uop(value: Scalar, dtype: DType, shape: tuple[Any, ...]) -> UOp:
    """The constant `value` of `dtype` broadcast to `shape`, as every tensor op makes it (one node per value)."""
    if all(isinstance(d, int) for d in shape):
        # a float's key is its bits (0.0 == -0.0 and NaN != NaN as dict keys), plus its type (1 == 1.0 == True)
        key = value.hex() if isinstance(value, float) else value
        return _shaped_const(type(value), key, value, dtype, shape)
    return UOp.const(dtype.const(value), dtype).reshape((1,) * len(shape)).expand(shape)


def _const_dtype(x: Scalar) -> DType:
    return dtypes.from_py(x)


@functools.cache
def _scalar_promotion(dt: DType, scalar_dt: DType) -> DType:
    """The dtype of a tensor of dtype `dt` combined with a Python scalar of dtype `scalar_dt` (a weak literal): the
    tensor's kind of dtype, weak when the tensor is (`Tensor(2).exp()` stays a weak float, as tinygrad's)."""
    out = least_upper_dtype(dt, scalar_dt)
    return out if dt in dtypes.weaks else strong_dtype(out)


class ElementwiseMixin(OperatorMixin, TensorFields):
    """Elementwise ops of Tensor: uopir's operator layer (`OperatorMixin`, which defines the Python operators once for
    UOp and Tensor) with Tensor's hooks (broadcasting, tinygrad's promotion) and the ops whose Tensor meaning differs."""

    __slots__ = ()

    # ---- broadcasting and promotion ----
    def _broadcast_to(self: Tensor, shape: tuple[int, ...]) -> Tensor:
        if self.shape == tuple(shape):
            return self
        padded = self._broadcast_padded(tuple(shape))
        steps = ((Ops.RESHAPE, padded), (Ops.EXPAND, tuple(shape)))  # one view tensor for both steps
        return self._view_steps(self.uop.reshape(padded).expand(tuple(shape)), steps)

    def _broadcast_padded(self: Tensor, shape: tuple[int, ...]) -> tuple[int, ...]:
        """This shape with leading 1s to the length of `shape`, checked to broadcast to it."""
        if len(shape) < self.ndim:
            raise BroadcastError(f"cannot broadcast tensor to fewer dimensions. shape={self.shape} to new_shape={shape}")
        padded = (1,) * (len(shape) - self.ndim) + self.shape
        if any(p != 1 and p != s for p, s in zip(padded, shape)):
            raise BroadcastError(f"cannot broadcast {self.shape} to new_shape={shape}")
        return padded

    def _operand_to(self: Tensor, shape: tuple[int, ...]) -> Tensor:
        """This tensor broadcast to `shape` as the operand of an op being built: a new value, not a view (`_broadcast_to`).
        An operand is only read by that op and never returned or written through, and a view tensor's bookkeeping (a
        constructor call, its root's set of views) was two thirds of a broadcasting binary op's graph building."""
        if self.shape == shape:
            return self
        return self._wrap(self.uop.reshape(self._broadcast_padded(shape)).expand(shape))

    def _const(self: Tensor, value: Scalar, dtype: DType, shape: tuple[int, ...] | None = None) -> Tensor:
        return self._wrap(const_uop(value, dtype, self.shape if shape is None else shape))

    def _broadcasted(self: Tensor, y: Any, reverse: bool = False) -> tuple[Tensor, Tensor]:
        """Both operands as tensors of the broadcast shape and the promoted dtype. A symbolic int (a bound `Variable`
        or an expression of them) is a 0-d tensor of its value: weakly typed, so it takes the tensor's int dtype."""
        x: Tensor = self
        if isinstance(y, ElementwiseMixin):
            if y.device != x.device:
                raise TensorRuntimeError(f"operands are on different devices ({x.device} and {y.device}): move one with .to()")
            xu, yu = x.uop, y.uop
            if xu.dtype is yu.dtype and xu.shape == yu.shape:  # most operands: nothing to broadcast or promote
                return (y, x) if reverse else (x, y)
            out_dt = least_upper_dtype(x.dtype, y.dtype)
            shape = broadcast_shape(x.shape, y.shape)
            yt = y
        else:
            if not isinstance(y, (bool, int, float)):
                if isinstance(y, UOp) and y.shape_or_none == () and dtypes.is_int(y.dtype):
                    return x._broadcasted(type(x)(y, device=x.device), reverse)
                raise TensorRuntimeError(f"cannot combine a Tensor with {type(y).__name__}: use a Tensor or a Python number")
            out_dt = _scalar_promotion(x.dtype, _const_dtype(y))
            shape = x.shape
            yt = x._const(y, out_dt, shape)  # made in x's shape at once: broadcasting a () tensor took two view steps
            if out_dt is x.dtype:
                return (yt, x) if reverse else (x, yt)
        x, yt = x._operand_to(shape).cast(out_dt), yt._operand_to(shape).cast(out_dt)
        return (yt, x) if reverse else (x, yt)

    def _alu(self: Tensor, op: Ops, *srcs: Tensor, dtype: DType | None = None) -> Tensor:
        return self._wrap(UOp.elementwise(op, dtype, self.uop, *(s.uop for s in srcs)))

    def _float(self: Tensor) -> Tensor:
        return self.cast(least_upper_float(self.dtype))

    def _check_int(self: Tensor, name: str) -> None:
        if not (dtypes.is_int(self.dtype) or dtypes.is_bool(self.dtype)):
            raise TensorRuntimeError(f"{name} needs an int or bool tensor, got {self.dtype}: cast it first")

    # the operator layer's hooks (`_alu`, `_const` and `_float` above)
    _operands = _broadcasted
    _check_bitwise = _check_int

    # ---- arithmetic ----
    def add(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """self + x, broadcast."""
        a, b = self._broadcasted(x, reverse)
        return a._alu(Ops.OR, b) if a.dtype is dtypes.bool else a._alu(Ops.ADD, b)

    def sub(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """self - x, broadcast."""
        a, b = self._broadcasted(x, reverse)
        if a.dtype is dtypes.bool:
            raise TensorRuntimeError("subtracting bool tensors is not supported: use logical_xor or cast to int")
        return a._alu(Ops.SUB, b)

    def mul(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """self * x, broadcast."""
        a, b = self._broadcasted(x, reverse)
        return a._alu(Ops.AND, b) if a.dtype is dtypes.bool else a._alu(Ops.MUL, b)

    def div(self: Tensor, x: Any, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
        """self / x: true division in a float dtype; rounding_mode "trunc" or "floor" rounds the quotient."""
        a, b = self._broadcasted(x, reverse)
        if rounding_mode is not None and dtypes.is_int(a.dtype):
            if rounding_mode not in ("trunc", "floor"):
                raise TensorRuntimeError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
            return a._trunc_divmod(b)[0] if rounding_mode == "trunc" else a._floor_divmod(b)[0]
        q = a._float()._alu(Ops.FDIV, b._float())
        if rounding_mode == "trunc":
            return q.trunc()
        if rounding_mode == "floor":
            return q.floor()
        if rounding_mode is not None:
            raise TensorRuntimeError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
        return q

    def _trunc_divmod(self: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        """C's / and % on same-shape int tensors, with numpy's answer for a zero divisor: 0 for both (the IR's CMOD by 0
        is the dividend, so the remainder is selected; for a constant divisor the select folds away)."""
        zero = self._const(0, self.dtype)
        r = b._alu(Ops.CMPEQ, zero)._alu(Ops.WHERE, zero, self._alu(Ops.CMOD, b))
        return self._alu(Ops.CDIV, b), r

    def _floor_divmod(self: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        """Python // and % on same-shape int tensors, from C's truncating division (kernels have no floor division);
        a zero divisor gives 0 for both, as in numpy."""
        q, r = self._trunc_divmod(b)
        if dtypes.is_unsigned(self.dtype):
            return q, r
        # truncation rounded toward zero; step one down when the remainder and divisor have opposite signs
        zero = self._const(0, self.dtype)
        off = r._alu(Ops.CMPNE, zero)._alu(Ops.AND, r._alu(Ops.CMPLT, zero)._alu(Ops.CMPNE, b._alu(Ops.CMPLT, zero)))
        return off._alu(Ops.WHERE, q.sub(1), q), off._alu(Ops.WHERE, r._alu(Ops.ADD, b), r)

    def idiv(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """Integer division rounding toward zero (C semantics)."""
        a, b = self._broadcasted(x, reverse)
        a._check_int("idiv")
        return a._trunc_divmod(b)[0]

    @templated
    def floordiv(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """self // x: floor division (Python semantics)."""
        a, b = self._broadcasted(x, reverse)
        if dtypes.is_int(a.dtype):
            return a._floor_divmod(b)[0]
        return a.div(b).floor().cast(a.dtype)

    @templated
    def mod(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """self % x with the sign of the divisor (Python semantics)."""
        a, b = self._broadcasted(x, reverse)
        if dtypes.is_int(a.dtype):
            return a._floor_divmod(b)[1]
        return a.sub(a.div(b).floor().mul(b))

    def pow(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """self ** x (C pow). An int tensor to an int constant power is multiplied out (squaring), wrapping on
        overflow as numpy and torch do; to a negative one it is refused, as torch refuses it (the result is not an
        int). Other int powers are computed in float64 and converted back."""
        if not reverse and isinstance(x, int) and not isinstance(x, bool) and dtypes.is_int(self.dtype):
            if x < 0:
                raise TensorRuntimeError(f"an int tensor ({self.dtype}) to the negative power {x}: cast it to a float first")
            ret, base = self.ones_like(), self
            while x:
                if x & 1:
                    ret = ret.mul(base)
                x >>= 1
                if x:
                    base = base.mul(base)
            return ret
        a, b = self._broadcasted(x, reverse)
        if dtypes.is_float(a.dtype):
            return a._alu(Ops.POW, b)
        return a.cast(dtypes.float64)._alu(Ops.POW, b.cast(dtypes.float64)).cast(a.dtype)

    def where(self: Tensor, x: Any, y: Any) -> Tensor:
        """x where self is true, else y (broadcast, promoted)."""
        cond: Tensor = self.cast(dtypes.bool)
        if isinstance(x, ElementwiseMixin):
            x, y = x._broadcasted(y)
        elif isinstance(y, ElementwiseMixin):
            y, x = y._broadcasted(x)
        else:
            x, y = type(self)(x, device=self.device)._broadcasted(y)
        shape = broadcast_shape(cond.shape, x.shape, y.shape)
        cond, x, y = cond._operand_to(shape), x._operand_to(shape), y._operand_to(shape)
        return cond._alu(Ops.WHERE, x, y)

    # a ShardedTensor operand answers these itself (its reflected operator)
    def __add__(self: Tensor, x: Any) -> Tensor:
        return NotImplemented if _defers(x) else self.add(x)

    def __sub__(self: Tensor, x: Any) -> Tensor:
        return NotImplemented if _defers(x) else self.sub(x)

    def __mul__(self: Tensor, x: Any) -> Tensor:
        return NotImplemented if _defers(x) else self.mul(x)

    def __truediv__(self: Tensor, x: Any) -> Tensor:
        return NotImplemented if _defers(x) else self.div(x)

    # ---- bitwise and logical ----
    def lshift(self: Tensor, x: Any) -> Tensor:
        """self << x (x an int or an int tensor of shift amounts, broadcast; the result keeps self's dtype)."""
        return self._shift(Ops.SHL, x, "lshift")

    def rshift(self: Tensor, x: Any) -> Tensor:
        """self >> x (arithmetic for signed ints; x an int or an int tensor, broadcast)."""
        return self._shift(Ops.SHR, x, "rshift")

    def _shift(self: Tensor, op: Ops, x: Any, name: str) -> Tensor:
        self._check_int(name)
        if not isinstance(x, type(self)):
            if not isinstance(x, int):  # a float amount is refused, as a float tensor of amounts is
                raise TensorRuntimeError(f"{name} takes an int shift amount, got {x!r}")
            return self._alu(op, self._const(x, self.dtype))
        x._check_int(name)
        shape = broadcast_shape(self.shape, x.shape)
        return self._operand_to(shape)._alu(op, x.cast(self.dtype)._operand_to(shape))

    def logical_not(self: Tensor) -> Tensor:
        """not self, as bool."""
        b = self.cast(dtypes.bool)
        return b._alu(Ops.CMPNE, b._const(True, dtypes.bool))

    # in-place forms write the result into this tensor (and whatever it views), as tinygrad's
    def __iadd__(self: Tensor, x: Any) -> Tensor:
        return self.assign(self.add(x))

    def __isub__(self: Tensor, x: Any) -> Tensor:
        return self.assign(self.sub(x))

    def __imul__(self: Tensor, x: Any) -> Tensor:
        return self.assign(self.mul(x))

    def __itruediv__(self: Tensor, x: Any) -> Tensor:
        return self.assign(self.div(x))

    def __ipow__(self: Tensor, x: Any) -> Tensor:
        return self.assign(self.pow(x))

    def __iand__(self: Tensor, x: Any) -> Tensor:
        return self.assign(self.bitwise_and(x))

    def __ior__(self: Tensor, x: Any) -> Tensor:
        return self.assign(self.bitwise_or(x))

    def __ixor__(self: Tensor, x: Any) -> Tensor:
        return self.assign(self.bitwise_xor(x))

    def __ilshift__(self: Tensor, x: Any) -> Tensor:
        return self.assign(self.lshift(x))

    def __irshift__(self: Tensor, x: Any) -> Tensor:
        return self.assign(self.rshift(x))

    # ---- comparisons ----
    def __eq__(self: Tensor, x: Any) -> Tensor:
        return self._binop(Ops.CMPEQ, x)

    def __ne__(self: Tensor, x: Any) -> Tensor:
        return self._binop(Ops.CMPNE, x)

    # ---- unary math ----
    @in_float32
    def exp(self: Tensor) -> Tensor:
        """e ** self."""
        if self.dtype in _WIDE_FLOATS:  # the graph of the tensor ops below, built as UOps (a test compares them)
            scaled = UOp.elementwise(Ops.MUL, None, self.uop, const_uop(1 / math.log(2), self.dtype, self.shape))
            return self._wrap(UOp.elementwise(Ops.EXP2, None, scaled))
        return self._float().mul(1 / math.log(2)).exp2()

    @in_float32
    def log(self: Tensor) -> Tensor:
        """Natural log."""
        return self.log2().mul(math.log(2))

    def rsqrt(self: Tensor) -> Tensor:
        """1 / sqrt(self)."""
        return self.sqrt().reciprocal()

    def square(self: Tensor) -> Tensor:
        """self * self."""
        return self.mul(self)

    @in_float32
    def cos(self: Tensor) -> Tensor:
        """cos(self), as sin(pi/2 - self)."""
        return self._float().sub(math.pi / 2, True).sin()

    @templated
    @in_float32
    def tan(self: Tensor) -> Tensor:
        """tan(self)."""
        return self.sin().div(self.cos())

    @templated
    @in_float32
    def sigmoid(self: Tensor) -> Tensor:
        """1 / (1 + e**-self), through e = e**-|self| (at most 1): 1 / (1 + e) for self >= 0, e / (1 + e) below.
        Nothing overflows, so the gradient is s * (1 - s) everywhere: 0 for large |self|, where 1 / (1 + e**-self)
        differentiated into inf * 0 = NaN (sigmoid, tanh, silu and gelu's gradients at |x| > ~90)."""
        x = self._float()
        below = x < 0
        # -|x| taken per branch (not through abs, whose gradient is 0 at 0), as a power of 2
        e = below.where(x, x.neg()).mul(1 / math.log(2)).exp2()
        return below.where(e.div(e.add(1)), e.add(1).reciprocal())

    @templated
    @in_float32
    def tanh(self: Tensor) -> Tensor:
        """tanh(self), as 2*sigmoid(2*self) - 1."""
        return self.mul(2.0).sigmoid().mul(2.0).sub(1.0)

    def relu(self: Tensor) -> Tensor:
        """max(self, 0)."""
        if self.dtype in _WIDE_FLOATS:  # the graph of the tensor ops below, built as UOps (a test compares them)
            zero = const_uop(0, self.dtype, self.shape)
            return self._wrap(UOp.elementwise(Ops.WHERE, None, UOp.elementwise(Ops.CMPLT, None, zero, self.uop), self.uop, zero))
        return (self > 0).where(self, 0)

    def leaky_relu(self: Tensor, neg_slope: float = 0.01) -> Tensor:
        """self where self >= 0, else neg_slope * self."""
        return (self < 0).where(self.mul(neg_slope), self)

    @templated
    @in_float32
    def gelu(self: Tensor, approximate: str = "tanh") -> Tensor:
        """GELU: x * Phi(x), with the tanh approximation (default) or exactly through erf (approximate="none")."""
        if approximate == "tanh":
            return self.mul(0.5).mul(self.add(self.mul(self).mul(self).mul(0.044715)).mul(math.sqrt(2 / math.pi)).tanh().add(1))
        if approximate == "none":
            return self.mul(0.5).mul(self.div(math.sqrt(2)).erf().add(1))
        raise TensorRuntimeError(f"gelu approximate={approximate!r} is not supported; use 'tanh' or 'none'")

    @templated
    def quick_gelu(self: Tensor) -> Tensor:
        """self * sigmoid(1.702 * self)."""
        return self.mul(self.mul(1.702).sigmoid())

    @templated
    def silu(self: Tensor) -> Tensor:
        """self * sigmoid(self)."""
        return self.mul(self.sigmoid())

    def swish(self: Tensor) -> Tensor:
        """Same as silu."""
        return self.silu()

    @templated
    @in_float32
    def softplus(self: Tensor, beta: float = 1.0) -> Tensor:
        """log(1 + e**(beta*self)) / beta, computed without overflow."""
        x = self._float().mul(beta)
        return x.relu().add(x.abs().neg().exp().add(1).log()).mul(1 / beta)

    @templated
    @in_float32
    def erf(self: Tensor) -> Tensor:
        """The error function (Abramowitz-Stegun 7.1.26, absolute error below 1.5e-7)."""
        x = self._float()
        t = x.abs().mul(0.3275911).add(1.0).reciprocal()
        poly = t.mul(1.061405429).add(-1.453152027).mul(t).add(1.421413741).mul(t).add(-0.284496736).mul(t).add(0.254829592).mul(t)
        return x.sign().mul(poly.mul(x.square().neg().exp()).sub(1.0, True))

    @templated
    def abs(self: Tensor) -> Tensor:
        """|self|. Its gradient is sign(self): 0 at 0, as torch has it (a select between -self and self gave 1). At 0
        the value is +0.0 (for -0.0 too), NaN stays NaN; the innermost branch is a select too (a product there put
        0 * inf = NaN into the gradient at +-inf)."""
        if dtypes.is_unsigned(self.dtype) or self.dtype is dtypes.bool:
            return self
        return (self > 0).where(self, (self < 0).where(self.neg(), self.eq(0).where(0, self)))

    @templated
    def sign(self: Tensor) -> Tensor:
        """-1, 0 or 1 by the sign of self (±inf gives ±1, NaN stays NaN)."""
        ret = self.ne(0).where((self < 0).where(self._const(-1, self.dtype), self._const(1, self.dtype)), self._const(0, self.dtype))
        return self.ne(self).where(self, ret) if dtypes.is_float(self.dtype) else ret

    @templated
    def clip(self: Tensor, min_: Any = None, max_: Any = None) -> Tensor:
        """self limited to [min_, max_]."""
        if min_ is None and max_ is None:
            raise TensorRuntimeError("clip needs at least one of min_ or max_")
        # selects, not maximum/minimum: an element equal to a bound keeps gradient 1 (as torch has it; max splits it
        # in half at ties), NaN stays NaN, and with min_ > max_ every element is max_
        ret: Tensor = self
        if min_ is not None:
            ret = (ret < min_).where(min_, ret)
        if max_ is not None:
            ret = (ret > max_).where(max_, ret)
        return ret

    def clamp(self: Tensor, min_: Any = None, max_: Any = None) -> Tensor:
        """Same as clip."""
        return self.clip(min_, max_)

    def floor(self: Tensor) -> Tensor:
        """Round toward -inf."""
        if not dtypes.is_float(self.dtype):
            return self
        t = self.trunc()
        return (self < t).where(t.sub(1), t)

    def ceil(self: Tensor) -> Tensor:
        """Round toward +inf."""
        if not dtypes.is_float(self.dtype):
            return self
        t = self.trunc()
        return (self > t).where(t.add(1), t)

    @templated
    def round(self: Tensor) -> Tensor:
        """Round to nearest, ties to even (as numpy)."""
        if not dtypes.is_float(self.dtype):
            return self
        f = self.floor()
        frac = self.sub(f)
        odd = f.sub(f.mul(0.5).floor().mul(2)).ne(0)
        return (frac > 0.5).where(f.add(1), (frac < 0.5).where(f, odd.where(f.add(1), f)))

    def isnan(self: Tensor) -> Tensor:
        """True where self is NaN."""
        return self.ne(self)

    def isinf(self: Tensor, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
        """True where self is +inf (detect_positive) or -inf (detect_negative)."""
        pos = self.eq(math.inf) if detect_positive else self._const(False, dtypes.bool)
        neg = self.eq(-math.inf) if detect_negative else self._const(False, dtypes.bool)
        return pos.bitwise_or(neg)

    @templated
    def lerp(self: Tensor, end: Any, weight: Any) -> Tensor:
        """self + (end - self) * weight."""
        return self.add(self.sub(end, True).mul(weight))
