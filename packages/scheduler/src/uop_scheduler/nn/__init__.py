"""Neural-network layers (tinygrad's `nn` names and defaults), optimizers (`nn.optim`) and state helpers (`nn.state`)."""

from __future__ import annotations

import math

from ..nn_ops import make_tuple
from ..tensor import Tensor
from . import optim, state

__all__ = [
    "BatchNorm", "BatchNorm2d", "BatchNorm3d", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "Dropout", "Embedding",
    "GroupNorm", "InstanceNorm", "LSTMCell", "LayerNorm", "LayerNorm2d", "Linear", "RMSNorm", "optim", "state",
]


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
        self.weight = Tensor.ones(*self.normalized_shape, buffer=True) if elementwise_affine else None
        self.bias = Tensor.zeros(*self.normalized_shape, buffer=True) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        x = x.layernorm(axis=self.axis, eps=self.eps)
        return x if self.weight is None else x * self.weight + self.bias


class RMSNorm:
    """x / sqrt(mean(x**2) + eps) over the last dim (then * weight when elementwise_affine)."""

    def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
        self.eps, self.weight = eps, Tensor.ones(dim, buffer=True) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        x = x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt()
        return x if self.weight is None else x * self.weight


class BatchNorm:
    """Batch normalization over all dims but 1; in training mode (`Tensor.training`) it normalizes with the batch
    statistics and updates `running_mean`, `running_var` and `num_batches_tracked`."""

    def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True, momentum: float = 0.1):
        self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
        self.weight = Tensor.ones(sz, buffer=True) if affine else None
        self.bias = Tensor.zeros(sz, buffer=True) if affine else None
        self.num_batches_tracked = Tensor.zeros(dtype="long", requires_grad=False)  # a scalar int64, as in tinygrad (checkpoints load)
        if track_running_stats:
            self.running_mean, self.running_var = Tensor.zeros(sz, requires_grad=False), Tensor.ones(sz, requires_grad=False)

    def __call__(self, x: Tensor) -> Tensor:
        axes = tuple(i for i in range(x.ndim) if i != 1)
        shape = tuple(x.shape[1] if i == 1 else 1 for i in range(x.ndim))
        if Tensor.training or not self.track_running_stats:
            mean = x.mean(axes)
            centered = x - mean.reshape(shape)
            var = centered.square().mean(axes)
            if Tensor.training and self.track_running_stats:
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


BatchNorm2d = BatchNorm3d = BatchNorm  # tinygrad's aliases: BatchNorm handles any rank


def _same_padding(kernel_size: tuple[int, ...], stride: int, dilation: int | tuple[int, ...]) -> tuple[int, ...]:
    """Flat torch-style (last axis first) padding that keeps the spatial size, for padding='same'."""
    if stride != 1:
        raise ValueError("padding='same' is not supported for strided convolutions")
    dil = make_tuple(dilation, len(kernel_size))
    return tuple(p for d, k in zip(dil[::-1], kernel_size[::-1]) for p in (d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2))


class Conv2d:
    """N-d convolution (2-D for an int kernel_size); weights uniform in ±1/sqrt(in_channels * prod(kernel_size)) as tinygrad.

    `padding` is an int, one int per axis, flat torch-style pairs, or "same" (stride 1 only)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...], stride: int = 1,
                 padding: int | tuple[int, ...] | str = 0, dilation: int = 1, groups: int = 1, bias: bool = True):
        self.kernel_size = make_tuple(kernel_size, 2)
        if isinstance(padding, str):
            if padding.lower() != "same":
                raise ValueError(f"invalid padding {padding!r}: only 'same' is supported")
            padding = _same_padding(self.kernel_size, stride, dilation)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        bound = 1 / math.sqrt(in_channels * math.prod(self.kernel_size))
        self.weight = Tensor.uniform(out_channels, in_channels // groups, *self.kernel_size, low=-bound, high=bound)
        self.bias = Tensor.uniform(out_channels, low=-bound, high=bound) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=self.padding)


def Conv1d(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int | str = 0,  # noqa: N802
           dilation: int = 1, groups: int = 1, bias: bool = True) -> Conv2d:
    """1-D convolution over (bs, in_channels, length): a Conv2d with a one-axis kernel, as in tinygrad."""
    return Conv2d(in_channels, out_channels, (kernel_size,), stride, padding, dilation, groups, bias)


class ConvTranspose2d(Conv2d):
    """N-d transposed convolution; weight is (in_channels, out_channels/groups, *kernel_size) as in tinygrad."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...], stride: int = 1,
                 padding: int | tuple[int, ...] = 0, output_padding: int | tuple[int, ...] = 0, dilation: int = 1,
                 groups: int = 1, bias: bool = True):
        self.kernel_size = make_tuple(kernel_size, 2)
        self.stride, self.padding, self.output_padding, self.dilation, self.groups = stride, padding, output_padding, dilation, groups
        bound = 1 / math.sqrt(in_channels * math.prod(self.kernel_size))
        self.weight = Tensor.uniform(in_channels, out_channels // groups, *self.kernel_size, low=-bound, high=bound)
        self.bias = Tensor.uniform(out_channels, low=-bound, high=bound) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation,
                                  padding=self.padding, output_padding=self.output_padding)


def ConvTranspose1d(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,  # noqa: N802
                    output_padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True) -> ConvTranspose2d:
    """1-D transposed convolution: a ConvTranspose2d with a one-axis kernel, as in tinygrad."""
    return ConvTranspose2d(in_channels, out_channels, (kernel_size,), stride, padding, output_padding, dilation, groups, bias)


def _channel_affine(x: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """x * weight + bias with both laid along axis 1 (identity when the layer has no affine part)."""
    if weight is None or bias is None:
        return x
    shape = (1, -1, *[1] * (x.ndim - 2))
    return x * weight.reshape(shape) + bias.reshape(shape)


class GroupNorm:
    """Normalize each of `num_groups` channel groups over its channels and spatial positions, then a per-channel affine."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.weight = Tensor.ones(num_channels, buffer=True) if affine else None
        self.bias = Tensor.zeros(num_channels, buffer=True) if affine else None

    def __call__(self, x: Tensor) -> Tensor:
        x = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
        return _channel_affine(x, self.weight, self.bias)


class InstanceNorm:
    """Normalize each channel of each sample over its spatial positions, then a per-channel affine."""

    def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
        self.num_features, self.eps = num_features, eps
        self.weight = Tensor.ones(num_features, buffer=True) if affine else None
        self.bias = Tensor.zeros(num_features, buffer=True) if affine else None

    def __call__(self, x: Tensor) -> Tensor:
        x = x.reshape(x.shape[0], self.num_features, -1).layernorm(eps=self.eps).reshape(x.shape)
        return _channel_affine(x, self.weight, self.bias)


class LayerNorm2d(LayerNorm):
    """LayerNorm over the channels of (bs, channels, height, width) inputs, at each spatial position."""

    def __call__(self, x: Tensor) -> Tensor:
        return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class LSTMCell:
    """One LSTM step: gates i, f, g, o from x @ weight_ih.T + h @ weight_hh.T (+ biases, zero-initialized as tinygrad);
    returns (h', c') with c' = f*c + i*g and h' = o*tanh(c'). A missing `hc` starts from zeros."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        bound = 1 / math.sqrt(hidden_size)
        self.weight_ih = Tensor.uniform(hidden_size * 4, input_size, low=-bound, high=bound)
        self.weight_hh = Tensor.uniform(hidden_size * 4, hidden_size, low=-bound, high=bound)
        self.bias_ih = Tensor.zeros(hidden_size * 4, buffer=True) if bias else None
        self.bias_hh = Tensor.zeros(hidden_size * 4, buffer=True) if bias else None

    def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        if hc is None:
            zeros = Tensor.zeros(x.shape[0], self.weight_hh.shape[1], dtype=x.dtype)
            hc = (zeros, zeros)
        h, c = hc
        gates = x.linear(self.weight_ih.T, self.bias_ih) + h.linear(self.weight_hh.T, self.bias_hh)
        i, f, g, o = gates.chunk(4, dim=1)
        new_c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        return o.sigmoid() * new_c.tanh(), new_c


class Dropout:
    """Zero a fraction `p` of the inputs in training mode (scaling the rest by 1/(1-p)); identity otherwise."""

    def __init__(self, p: float = 0.5):
        self.p = p

    def __call__(self, x: Tensor) -> Tensor:
        return x.dropout(self.p)
