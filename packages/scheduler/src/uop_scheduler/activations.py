"""Activation functions beyond the basic ones in elementwise.py (tinygrad's defaults, which are PyTorch's).

Each is a composition of elementwise ops; the dtype follows from them (`relu6` and `hardtanh` keep an int dtype,
the exponential ones compute in float).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .fields import TensorFields
from .templates import templated

if TYPE_CHECKING:
    from .tensor import Tensor


class ActivationMixin(TensorFields):
    """Activation functions of Tensor."""

    __slots__ = ()

    @templated
    def elu(self: Tensor, alpha: float = 1.0) -> Tensor:
        """self where positive, else alpha * (e**self - 1)."""
        return (self > 0).where(self, self.exp().sub(1).mul(alpha))

    @templated
    def celu(self: Tensor, alpha: float = 1.0) -> Tensor:
        """max(0, self) + min(0, alpha * (e**(self / alpha) - 1))."""
        return self.maximum(0).add(self.div(alpha).exp().sub(1).mul(alpha).minimum(0))

    @templated
    def selu(self: Tensor, alpha: float = 1.67326, gamma: float = 1.0507) -> Tensor:
        """gamma * (self where self >= 0, else alpha * (e**self - 1))."""
        return (self >= 0).where(self, self.exp().sub(1).mul(alpha)).mul(gamma)

    def relu6(self: Tensor) -> Tensor:
        """min(max(self, 0), 6)."""
        return self.relu().minimum(6)

    @templated
    def hardsigmoid(self: Tensor, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor:
        """alpha * self + beta, limited to [0, 1]."""
        return self.mul(alpha).add(beta).clip(0, 1)

    @templated
    def hardswish(self: Tensor) -> Tensor:
        """self * relu6(self + 3) / 6."""
        return self.mul(self.add(3).relu6()).mul(1 / 6)

    def hardtanh(self: Tensor, min_val: Any = -1, max_val: Any = 1) -> Tensor:
        """self limited to [min_val, max_val]."""
        return self.clip(min_val, max_val)

    @templated
    def mish(self: Tensor) -> Tensor:
        """self * tanh(softplus(self))."""
        return self.mul(self.softplus().tanh())

    @templated
    def logsigmoid(self: Tensor) -> Tensor:
        """log(sigmoid(self)) = -softplus(-self), stable for large |self|."""
        return self.neg().softplus().neg()

    @templated
    def softsign(self: Tensor) -> Tensor:
        """self / (1 + |self|)."""
        return self.div(self.abs().add(1))

    def softmin(self: Tensor, axis: int = -1, dtype: Any = None) -> Tensor:
        """softmax(-self) along `axis`."""
        return self.neg().softmax(axis, dtype)
