"""More elementwise math: inverse trig and hyperbolic functions, copysign / fmod / logaddexp, closeness tests.

All are compositions of the ops in elementwise.py, so they fuse like them and get gradients from their parts.
Integer and bool inputs of the transcendental functions are computed in the default float dtype, as tinygrad does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from uopir import dtypes

from .elementwise import in_float32
from .errors import TensorRuntimeError
from .fields import TensorFields
from .templates import templated

if TYPE_CHECKING:
    from .tensor import Tensor

# Abramowitz & Stegun 4.4.46: asin(x) = pi/2 - sqrt(1 - x) * sum(c_k x^k) on [0, 1], absolute error below 2e-8
_ASIN_COEFFS = (1.5707963050, -0.2145988016, 0.0889789874, -0.0501743046, 0.0308918810, -0.0170881256, 0.0066700901, -0.0012624911)


def _odd_series(x: Tensor, coeffs: tuple[float, ...]) -> Tensor:
    """x * (c0 + c1 x**2 + c2 x**4 + ...): a Taylor series of an odd function, for small |x| where the closed form
    cancels (truncated after the x**9 term, its error is below 1e-10 relative for |x| < 0.1)."""
    x2 = x.square()
    acc = x2._const(coeffs[-1], x2.dtype)
    for c in reversed(coeffs[:-1]):
        acc = acc.mul(x2).add(c)
    return acc.mul(x)


def _with_sign_of(x: Tensor, magnitude: Tensor) -> Tensor:
    """`magnitude` negated where x is negative (an odd function's value from its value at |x|)."""
    return (x < 0).where(magnitude.neg(), magnitude)


class CompositeMathMixin(TensorFields):
    """Inverse trigonometric / hyperbolic functions and other elementwise math of Tensor, composed of the ops in
    elementwise.py."""

    __slots__ = ()

    # ---- inverse trigonometric ----
    @templated
    @in_float32
    def asin(self: Tensor) -> Tensor:
        """arcsin(self) (NaN outside [-1, 1]); below 0.1 in magnitude its Taylor series keeps the relative error small."""
        x = self._float()
        a = x.abs()
        poly = a._const(_ASIN_COEFFS[-1], a.dtype)
        for c in reversed(_ASIN_COEFFS[:-1]):
            poly = poly.mul(a).add(c)
        series = _odd_series(a, (1, 1 / 6, 3 / 40, 5 / 112, 35 / 1152))
        return _with_sign_of(x, (a < 0.1).where(series, a.sub(1.0, True).sqrt().mul(poly).sub(math.pi / 2, True)))

    @templated
    @in_float32
    def acos(self: Tensor) -> Tensor:
        """arccos(self) (NaN outside [-1, 1])."""
        return self.asin().sub(math.pi / 2, True)

    @templated
    @in_float32
    def atan(self: Tensor) -> Tensor:
        """arctan(self); |self| > 1 goes through pi/2 - atan(1/|self|), so +-inf gives +-pi/2."""
        x = self._float()
        a = x.abs()
        big = a > 1
        t = big.where(a.reciprocal(), a)
        small = t.div(t.square().add(1).sqrt()).asin()
        return _with_sign_of(x, big.where(small.sub(math.pi / 2, True), small))

    # ---- hyperbolic and inverse hyperbolic ----
    @templated
    @in_float32
    def sinh(self: Tensor) -> Tensor:
        """(e**self - e**-self) / 2 (its Taylor series below 0.1 in magnitude, where the difference cancels)."""
        x = self._float()
        return (x.abs() < 0.1).where(_odd_series(x, (1, 1 / 6, 1 / 120, 1 / 5040, 1 / 362880)), x.exp().sub(x.neg().exp()).mul(0.5))

    @templated
    @in_float32
    def cosh(self: Tensor) -> Tensor:
        """(e**self + e**-self) / 2."""
        x = self._float()
        return x.exp().add(x.neg().exp()).mul(0.5)

    @templated
    @in_float32
    def asinh(self: Tensor) -> Tensor:
        """log(|self| + sqrt(self**2 + 1)) with the sign of self (its Taylor series below 0.1 in magnitude)."""
        x = self._float()
        a = x.abs()
        closed = a.add(a.square().add(1).sqrt()).log()
        return _with_sign_of(x, (a < 0.1).where(_odd_series(a, (1, -1 / 6, 3 / 40, -5 / 112, 35 / 1152)), closed))

    @templated
    @in_float32
    def acosh(self: Tensor) -> Tensor:
        """log(self + sqrt(self**2 - 1)) (NaN below 1)."""
        x = self._float()
        return x.add(x.square().sub(1).sqrt()).log()

    @templated
    @in_float32
    def atanh(self: Tensor) -> Tensor:
        """log((1 + self) / (1 - self)) / 2 (+-inf at +-1, NaN outside; its Taylor series below 0.1 in magnitude)."""
        x = self._float()
        closed = x.add(1).div(x.sub(1, True)).log().mul(0.5)
        return (x.abs() < 0.1).where(_odd_series(x, (1, 1 / 3, 1 / 5, 1 / 7, 1 / 9)), closed)

    @in_float32
    def log10(self: Tensor) -> Tensor:
        """Base-10 logarithm."""
        return self.log2().mul(math.log10(2))

    # ---- binary ----
    @templated
    def copysign(self: Tensor, other: Any) -> Tensor:
        """|self| with the sign of `other` (-0.0 counts as negative); the dtype follows the usual promotion."""
        a, b = self._broadcasted(other)
        negative = (b < 0).bitwise_or(b.reciprocal() < 0) if dtypes.is_float(b.dtype) else b < 0
        mag = a.abs()
        return negative.where(mag.neg(), mag)

    @templated
    def fmod(self: Tensor, x: Any) -> Tensor:
        """C's remainder: the sign follows the dividend (`self - trunc(self / x) * x`); an int x of 0 gives 0, as numpy."""
        a, b = self._broadcasted(x)
        if dtypes.is_int(a.dtype):
            return a._trunc_divmod(b)[1]
        if a.dtype is dtypes.bool:
            raise TensorRuntimeError("fmod of bool tensors is not supported: cast to int first")
        return a.sub(a.div(b, rounding_mode="trunc").mul(b))

    @templated
    def logaddexp(self: Tensor, other: Any) -> Tensor:
        """log(e**self + e**other), computed stably (infinite operands give the exact limit)."""
        a, b = self._broadcasted(other)
        m = a.maximum(b)
        m = m.isinf().where(0, m)
        return a.sub(m).exp().add(b.sub(m).exp()).log().add(m)

    # ---- tests ----
    @templated
    def isfinite(self: Tensor) -> Tensor:
        """True where self is neither infinite nor NaN."""
        return self.isinf().bitwise_or(self.isnan()).logical_not()

    @templated
    def isclose(self: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        """True where |self - other| <= atol + rtol * |other| (equal infinities are close; NaNs when `equal_nan`)."""
        a, b = self._broadcasted(other)
        finite = a.isfinite().bitwise_and(b.isfinite()).bitwise_and(a.sub(b).abs() <= b.abs().mul(rtol).add(atol))
        ret = finite.bitwise_or(a.isinf().bitwise_or(b.isinf()).bitwise_and(a.eq(b)))
        return ret.bitwise_or(a.isnan().bitwise_and(b.isnan())) if equal_nan else ret

    def allclose(self: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        """A bool scalar Tensor: whether every element is close (see `isclose`); `.item()` gives the Python bool."""
        return self.isclose(other, rtol=rtol, atol=atol, equal_nan=equal_nan).all()

    def masked_fill(self: Tensor, mask: Tensor, value: Any) -> Tensor:
        """`value` where the bool `mask` is True, else self (broadcast, promoted)."""
        if mask.dtype is not dtypes.bool:
            raise TensorRuntimeError(f"masked_fill needs a bool mask, got {mask.dtype}")
        return mask.where(value, self)
