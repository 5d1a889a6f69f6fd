"""Neural-network layers (tinygrad's `nn` names and defaults), optimizers (`nn.optim`) and state helpers (`nn.state`)."""

from __future__ import annotations

import math

from ..tensor import Tensor
from . import optim, state

__all__ = ["BatchNorm", "Conv2d", "Dropout", "Embedding", "LayerNorm", "Linear", "RMSNorm", "optim", "state"]


class Linear:
    """y = x @ W.T + b, weights uniform in ±1/sqrt(in_features) as tinygrad (kaiming-uniform with a=sqrt(5))."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        bound = 1 / math.sqrt(in_features)
        self.weight = Tensor.uniform(out_features, in_features, low=-bound, high=bound)
        self.bias = Tensor.uniform(out_features, low=-bound, high=bound) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight.transpose(), self.bias)


class Embedding:
    """Rows of a (vocab_size, embed_size) table looked up by integer index."""

    def __init__(self, vocab_size: int, embed_size: int):
        self.vocab_sz, self.embed_sz = vocab_size, embed_size
        bound = math.sqrt(6 / (vocab_size + embed_size))  # glorot-uniform, as tinygrad
        self.weight = Tensor.uniform(vocab_size, embed_size, low=-bound, high=bound)

    def __call__(self, idx: Tensor) -> Tensor:
        # a one-hot matmul keeps the lookup differentiable with respect to the table
        return idx.one_hot(self.vocab_sz).cast(self.weight.dtype) @ self.weight


class LayerNorm:
    """Normalize over the last len(normalized_shape) dims, then scale and shift (elementwise_affine)."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5, elementwise_affine: bool = True):
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.axis, self.eps = tuple(-1 - i for i in range(len(self.normalized_shape))), eps
        self.weight = Tensor.ones(*self.normalized_shape) if elementwise_affine else None
        self.bias = Tensor.zeros(*self.normalized_shape) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        x = x.layernorm(axis=self.axis, eps=self.eps)
        return x if self.weight is None else x * self.weight + self.bias


class RMSNorm:
    """x / sqrt(mean(x**2) + eps) * weight over the last dim."""

    def __init__(self, dim: int, eps: float = 1e-6):
        self.eps, self.weight = eps, Tensor.ones(dim)

    def __call__(self, x: Tensor) -> Tensor:
        return x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt() * self.weight


class BatchNorm:
    """Batch normalization over all dims but 1; in training mode (`Tensor.training`) it normalizes with the batch
    statistics and updates `running_mean`, `running_var` and `num_batches_tracked`."""

    def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True, momentum: float = 0.1):
        self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
        self.weight = Tensor.ones(sz) if affine else None
        self.bias = Tensor.zeros(sz) if affine else None
        self.num_batches_tracked = Tensor.zeros(1, dtype="int32")
        if track_running_stats:
            self.running_mean, self.running_var = Tensor.zeros(sz), Tensor.ones(sz)

    def __call__(self, x: Tensor) -> Tensor:
        axes = tuple(i for i in range(x.ndim) if i != 1)
        shape = tuple(x.shape[1] if i == 1 else 1 for i in range(x.ndim))
        if Tensor.training:
            mean = x.mean(axes)
            centered = x - mean.reshape(shape)
            var = centered.square().mean(axes)
            if self.track_running_stats:
                n = math.prod(x.shape) // x.shape[1]
                self.running_mean.assign((1 - self.momentum) * self.running_mean + self.momentum * mean.detach())
                self.running_var.assign((1 - self.momentum) * self.running_var + self.momentum * (var * n / max(n - 1, 1)).detach())
                self.num_batches_tracked.assign(self.num_batches_tracked + 1)
        else:
            mean, var = self.running_mean, self.running_var
        out = (x - mean.reshape(shape)) * (var + self.eps).rsqrt().reshape(shape)
        if self.weight is not None:
            out = out * self.weight.reshape(shape) + self.bias.reshape(shape)
        return out


class Conv2d:
    """2-D convolution with tinygrad's initialization (uniform in ±1/sqrt(fan_in))."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int], stride: int = 1, padding: int = 0,
                 dilation: int = 1, groups: int = 1, bias: bool = True):
        ks = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        bound = 1 / math.sqrt(in_channels // groups * ks[0] * ks[1])
        self.weight = Tensor.uniform(out_channels, in_channels // groups, *ks, low=-bound, high=bound)
        self.bias = Tensor.uniform(out_channels, low=-bound, high=bound) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=self.padding)


class Dropout:
    """Zero a fraction `p` of the inputs in training mode (scaling the rest by 1/(1-p)); identity otherwise."""

    def __init__(self, p: float = 0.5):
        self.p = p

    def __call__(self, x: Tensor) -> Tensor:
        return x.dropout(self.p)
