"""Multi-device tensors: `Tensor.shard(devices, axis)` splits a tensor across devices; ops run per shard.

A `ShardedTensor` holds one lazy `Tensor` per device and the axis they split (None: every device holds the whole
value). Elementwise ops run shard by shard; a reduction over the sharded axis reduces each shard and then combines
the partial results on every device (an all-reduce through COPYs), leaving a replicated result; matmul picks the
schedule that keeps the contraction local (batch-sharded x, or column-sharded w) or all-reduces partial products
when both operands split the contraction axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from hcq_runtime import canonicalize
from uopir import DType, dtypes

from .elementwise import ElementwiseMixin, broadcast_shape
from .errors import ShapeError, TensorRuntimeError

if TYPE_CHECKING:
    from .tensor import Tensor

_UNARY = ("exp", "log", "exp2", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "leaky_relu", "gelu", "silu",
          "softplus", "erf", "abs", "sign", "floor", "ceil", "round", "trunc", "isnan", "isinf", "reciprocal", "square", "neg",
          "logical_not", "cast", "contiguous", "clip", "clamp", "zeros_like", "ones_like", "full_like", "detach", "float", "half")
_BINARY = {"__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div", "__pow__": "pow", "__lt__": "__lt__",
           "__gt__": "__gt__", "__le__": "__le__", "__ge__": "__ge__", "__eq__": "eq", "__ne__": "ne", "maximum": "maximum",
           "minimum": "minimum", "add": "add", "sub": "sub", "mul": "mul", "div": "div"}


def split_sizes(size: int, n: int) -> list[int]:
    """Shard sizes along an axis of `size` over `n` devices: ceil(size/n) each, the last ones smaller or empty."""
    step = math.ceil(size / n) if size else 0
    return [max(0, min(step, size - i * step)) for i in range(n)]


def shard(t: Tensor, devices: Sequence[str], axis: int | None = None) -> ShardedTensor:
    """`t` split along `axis` over `devices` (copied whole to each device when axis is None)."""
    devs = tuple(canonicalize(d) for d in devices)
    if len(set(devs)) != len(devs):
        raise TensorRuntimeError(f"shard devices must be distinct, got {devs}")
    if axis is None:
        return ShardedTensor(tuple(_placed(t, d) for d in devs), None)
    ax = t._resolve_dim(axis)
    start, pieces = 0, []
    for d, size in zip(devs, split_sizes(t.shape[ax], len(devs))):
        pieces.append(_placed(t.shrink(tuple((start, start + size) if i == ax else None for i in range(t.ndim))), d))
        start += size
    return ShardedTensor(tuple(pieces), ax)


def _placed(t: Tensor, device: str) -> Tensor:
    """A shard of its own on `device`: a copy there, or on t's own device a clone (a shard is not a view of `t`, so
    writing it leaves `t` alone, and no replica's graph holds another replica: each gets its own gradient)."""
    return t.to(device) if device != t.device else t.clone()


def sharded_value(x: Any) -> Any:
    """The ShardedTensor a Tensor sharded in place (`shard_`) stands for; anything else as it is."""
    return x.sharded if hasattr(x, "shards") else x


class ShardedTensor:
    """One lazy Tensor per device; `axis` is the split axis, None when each device holds the whole value."""

    def __init__(self, shards: tuple[Tensor, ...], axis: int | None):
        self.shards, self.axis = shards, axis

    # ---- properties ----
    @property
    def device(self) -> tuple[str, ...]:
        """The devices, one per shard."""
        return tuple(s.device for s in self.shards)

    @property
    def dtype(self) -> DType:
        """The element dtype."""
        return self.shards[0].dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """The logical (whole) shape."""
        first = self.shards[0].shape
        if self.axis is None:
            return first
        return tuple(sum(s.shape[self.axis] for s in self.shards) if i == self.axis else d for i, d in enumerate(first))

    @property
    def sharded(self) -> ShardedTensor:
        """This value (what a Tensor sharded in place by `shard_` stands for)."""
        return self

    @property
    def requires_grad(self) -> bool | None:
        """Whether backward fills this value's gradient (the shards', as one setting)."""
        return self.shards[0].requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool | None) -> None:
        for s in self.shards:
            s.requires_grad = value

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return len(self.shape)

    def __repr__(self) -> str:
        return f"<ShardedTensor {self.shape} {self.dtype} on {self.device} axis={self.axis}>"

    # ---- realization ----
    def realize(self) -> ShardedTensor:
        """Compute every shard."""
        for s in self.shards:
            s.realize()
        return self

    def numpy(self) -> np.ndarray:
        """The whole value on the host."""
        if self.axis is None:
            return self.shards[0].numpy()
        return np.concatenate([s.numpy() for s in self.shards], axis=self.axis)

    def tolist(self) -> Any:
        """The whole value as Python lists."""
        return self.numpy().tolist()

    def item(self) -> Any:
        """The value of a one-element tensor."""
        return self.numpy().reshape(()).item()

    def to(self, device: str) -> Tensor:
        """The whole value gathered on one device."""
        if self.axis is None:
            return self.shards[0].to(device)
        first, *rest = [s.to(device) for s in self.shards]
        return first.cat(*rest, dim=self.axis)

    # ---- autodiff ----
    def backward(self, gradient: ShardedTensor | None = None) -> ShardedTensor:
        """Accumulate gradients into every tensor this value depends on, shards included (see `grad`). A replicated
        value's replicas are computed alike, so backward runs from the first device's; a split value runs from each
        shard with its part of `gradient`."""
        if self.axis is None:
            self.shards[0].backward(None if gradient is None else self._matching(gradient)[0])
            return self
        if gradient is None:
            raise TensorRuntimeError(f"backward of a value split over devices (shape {self.shape}) needs an explicit `gradient=`")
        for s, g in zip(self.shards, self._matching(gradient)):
            s.backward(g)
        return self

    @property
    def grad(self) -> ShardedTensor | None:
        """The gradient, split like the value. Replicas on several devices are one value: its gradient is the sum of
        every replica's, on each device."""
        grads = [s.grad for s in self.shards]
        if all(g is None for g in grads):
            return None
        full = [g if g is not None else s.zeros_like() for s, g in zip(self.shards, grads)]
        if self.axis is not None:
            return ShardedTensor(tuple(full), self.axis)
        return self._allreduce(full, lambda a, b: a + b)

    @grad.setter
    def grad(self, value: ShardedTensor | None) -> None:
        if value is None:
            for s in self.shards:
                s.grad = None
            return
        parts = self._matching(value)
        if self.axis is None:  # the sum over replicas is the value: the first holds it, the others start at zero
            parts = [parts[0], *(s.zeros_like().contiguous() for s in self.shards[1:])]
        for s, g in zip(self.shards, parts):
            s.grad = g

    # ---- per-shard application ----
    def _map(self, fn: Callable[[Tensor], Tensor], axis: int | None = None) -> ShardedTensor:
        return ShardedTensor(tuple(fn(s) for s in self.shards), self.axis if axis is None else axis)

    def _matching(self, other: Any) -> list[Any]:
        """`other` split like self: one operand per shard (scalars pass through)."""
        other = sharded_value(other)
        if isinstance(other, ShardedTensor):
            if other.device != self.device:
                raise TensorRuntimeError(f"sharded operands are on different devices: {self.device} and {other.device}")
            if other.axis == self.axis:
                return list(other.shards)
            other = other.to(self.device[0]) if other.axis is not None else other.shards[0]
        if not isinstance(other, ElementwiseMixin):
            return [other] * len(self.shards)
        full = broadcast_shape(self.shape, other.shape)
        if full != self.shape:
            raise ShapeError(f"a sharded tensor of shape {self.shape} cannot grow to {full} by broadcasting: expand it first")
        whole = other._broadcast_to(full)
        return list(shard(whole, self.device, self.axis).shards) if self.axis is not None else [whole.to(d) for d in self.device]

    def _binary(self, name: str, other: Any, reverse: bool = False) -> ShardedTensor:
        others = self._matching(other)
        outs = []
        for s, o in zip(self.shards, others):
            a, b = (o, s) if reverse else (s, o)
            outs.append(getattr(a, name)(b) if isinstance(a, ElementwiseMixin) else getattr(s, name)(o, True))
        return ShardedTensor(tuple(outs), self.axis)

    # ---- views and writes ----
    def __getitem__(self, indices: Any) -> ShardedTensor:
        """Basic indexing that keeps the split axis whole (slices of the other axes view each shard)."""
        idx = indices if isinstance(indices, tuple) else (indices,)
        if any(i is None or i is Ellipsis or isinstance(i, int) for i in idx):
            raise TensorRuntimeError(f"index a sharded tensor with slices only, got {indices!r}: gather it with .to(device) first")
        if self.axis is not None and self.axis < len(idx) and idx[self.axis] != slice(None):
            raise TensorRuntimeError(f"indexing cuts the sharded axis {self.axis} with {idx[self.axis]!r}: gather it with .to(device) first")
        return self._map(lambda s: s[idx])

    def assign(self, x: Any) -> ShardedTensor:
        """Write `x` (split like self, or broadcast to every shard) into every shard (and what each shard views)."""
        for s, o in zip(self.shards, self._matching(x)):
            s.assign(o if isinstance(o, ElementwiseMixin) else s.full_like(o))
        return self

    def __setitem__(self, indices: Any, value: Any) -> None:
        self[indices].assign(value)

    def __getattr__(self, name: str) -> Any:
        if name in _UNARY:
            return lambda *args, **kwargs: self._map(lambda s: getattr(s, name)(*args, **kwargs))
        if name in _BINARY:
            return lambda other: self._binary(_BINARY[name], other)
        raise AttributeError(f"ShardedTensor has no {name!r}: gather it with .to(device) first")

    def where(self, x: Any, y: Any) -> ShardedTensor:
        """x where this condition holds, else y (both split like the condition, or scalars)."""
        return ShardedTensor(tuple(c.where(a, b) for c, a, b in zip(self.shards, self._matching(x), self._matching(y))), self.axis)

    def __neg__(self) -> ShardedTensor:
        return self._map(lambda s: s.neg())

    def __hash__(self) -> int:
        return id(self)

    # ---- reductions ----
    def _allreduce(self, partials: list[Tensor], combine: Callable[[Tensor, Tensor], Tensor]) -> ShardedTensor:
        """Combine per-device partial results on every device: a replicated result."""
        outs = []
        for dev in self.device:
            acc: Tensor | None = None
            for p in partials:
                q = p.to(dev)
                acc = q if acc is None else combine(acc, q)
            assert acc is not None
            outs.append(acc)
        return ShardedTensor(tuple(outs), None)

    def _reduce(self, name: str, combine: Callable[[Tensor, Tensor], Tensor], axis: Any, keepdim: bool) -> ShardedTensor:
        axes = self.shards[0]._axes(axis)
        if self.axis is None or self.axis not in axes:
            new_axis = None if self.axis is None else (self.axis if keepdim else self.axis - sum(1 for a in axes if a < self.axis))
            return self._map(lambda s: getattr(s, name)(axes, keepdim=keepdim), axis=new_axis)
        # an empty shard (the split did not divide evenly) has nothing to contribute, and max/min have no identity
        partials = [getattr(s, name)(axes, keepdim=True) for s in self.shards if s.shape[self.axis] > 0]
        ret = self._allreduce(partials, combine)
        if keepdim:
            return ret
        return ret._map(lambda s: s.reshape(tuple(d for i, d in enumerate(s.shape) if i not in axes)))

    def sum(self, axis: Any = None, keepdim: bool = False) -> ShardedTensor:
        """Sum over `axis`; over the sharded axis it all-reduces."""
        return self._reduce("sum", lambda a, b: a + b, axis, keepdim)

    def max(self, axis: Any = None, keepdim: bool = False) -> ShardedTensor:
        """Max over `axis`."""
        return self._reduce("max", lambda a, b: a.maximum(b), axis, keepdim)

    def min(self, axis: Any = None, keepdim: bool = False) -> ShardedTensor:
        """Min over `axis`."""
        return self._reduce("min", lambda a, b: a.minimum(b), axis, keepdim)

    def mean(self, axis: Any = None, keepdim: bool = False) -> ShardedTensor:
        """Mean over `axis`."""
        count = math.prod(self.shape[a] for a in self.shards[0]._axes(axis))
        total = self.cast(self.dtype if dtypes.is_float(self.dtype) else dtypes.float32).sum(axis, keepdim)
        return total / count

    # ---- movement and per-row ops ----
    def permute(self, *order: Any) -> ShardedTensor:
        """Reorder the axes; the sharded axis moves with them."""
        dims = order[0] if len(order) == 1 and isinstance(order[0], (tuple, list)) else order
        resolved = tuple(self.shards[0]._resolve_dim(d) for d in dims)
        new_axis = None if self.axis is None else resolved.index(self.axis)
        return self._map(lambda s: s.permute(resolved), axis=new_axis)

    def transpose(self, dim0: int = 1, dim1: int = 0) -> ShardedTensor:
        """Swap two axes."""
        order = list(range(self.ndim))
        a, b = self.shards[0]._resolve_dim(dim0), self.shards[0]._resolve_dim(dim1)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self) -> ShardedTensor:  # noqa: N802 -- tinygrad's name
        """transpose()."""
        return self.transpose()

    def _along(self, name: str, axis: int) -> ShardedTensor:
        ax = self.shards[0]._resolve_dim(axis)
        if ax == self.axis:
            whole = getattr(self.to(self.device[0]), name)(ax)
            return shard(whole, self.device, self.axis)
        return self._map(lambda s: getattr(s, name)(ax))

    def softmax(self, axis: int = -1) -> ShardedTensor:
        """softmax along `axis` (per shard unless it is the sharded axis, which is gathered first)."""
        return self._along("softmax", axis)

    def log_softmax(self, axis: int = -1) -> ShardedTensor:
        """log_softmax along `axis`."""
        return self._along("log_softmax", axis)

    # ---- matmul ----
    def matmul(self, w: Any) -> ShardedTensor:
        """self @ w with at least one sharded operand."""
        n, w = self.ndim, sharded_value(w)
        if isinstance(w, ElementwiseMixin):
            w = ShardedTensor(tuple(w.to(d) for d in self.device), None)
        if self.axis is not None and self.axis < n - 1 and w.axis is None:
            return ShardedTensor(tuple(s @ ws for s, ws in zip(self.shards, w.shards)), self.axis)
        if self.axis is None and w.axis is not None and w.axis == w.ndim - 1:
            return ShardedTensor(tuple(s @ ws for s, ws in zip(self.shards, w.shards)), max(n, w.ndim) - 1)
        if self.axis == n - 1 and w.axis == w.ndim - 2:
            return self._allreduce([s @ ws for s, ws in zip(self.shards, w.shards)], lambda a, b: a + b)
        # any other layout: gather both on the first device and replicate the result
        whole = self.to(self.device[0]) @ w.to(self.device[0])
        return ShardedTensor(tuple(whole.to(d) for d in self.device), None)

    def linear(self, weight: Any, bias: Any = None) -> ShardedTensor:
        """self @ weight + bias (weight: (in, out))."""
        out = self.matmul(weight)
        return out if bias is None else out + bias

    def __matmul__(self, w: Any) -> ShardedTensor:
        return self.matmul(w)

    def __rmatmul__(self, x: Tensor) -> ShardedTensor:
        return ShardedTensor(tuple(x.to(d) for d in self.device), None).matmul(self)


# operators, as (Tensor method, reflected): `1 - s` is Tensor-side sub with the operands swapped
_OPERATORS = {"__add__": ("add", False), "__radd__": ("add", True), "__sub__": ("sub", False), "__rsub__": ("sub", True),
              "__mul__": ("mul", False), "__rmul__": ("mul", True), "__truediv__": ("div", False), "__rtruediv__": ("div", True),
              "__pow__": ("pow", False), "__rpow__": ("pow", True), "__lt__": ("__lt__", False), "__gt__": ("__gt__", False),
              "__le__": ("__le__", False), "__ge__": ("__ge__", False), "__ne__": ("ne", False), "__eq__": ("eq", False)}


def _operator(name: str, reverse: bool) -> Callable[[ShardedTensor, Any], ShardedTensor]:
    def method(self: ShardedTensor, x: Any) -> ShardedTensor:
        return self._binary(name, x, reverse)

    return method


for _dunder, (_name, _reverse) in _OPERATORS.items():
    setattr(ShardedTensor, _dunder, _operator(_name, _reverse))
