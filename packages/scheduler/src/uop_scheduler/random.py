"""Random tensors from a counter-based hash: every element is a pure function of (seed, call number, position).

The hash is MurmurHash3's 32-bit finalizer over `position * golden + key`, built from integer ALU ops, so it runs
inside kernels on every device and gives the same numbers wherever it runs. `manual_seed` resets the key sequence.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from hcq_runtime import Device, buffer_for, canonicalize
from uopir import UOp, dtypes, shape_str, to_dtype

from .errors import ArgumentError, TensorTypeError

if TYPE_CHECKING:
    from .tensor import Tensor

_GOLDEN = 0x9E3779B1
_MUL_SEED, _MUL_CALL = 0x85EBCA6B, 0xC2B2AE35


class JitRng:
    """The RNG state of a step TinyJit captures: a uint32 buffer holding (seed, call count at the step's start) per
    device, which the jit fills before every replay. The j-th random tensor of the step reads its key from it,
    (seed * A + (count + j + 1) * B), the key eager mode computes for that call, so replays draw new numbers exactly
    as eager calls would, and after each replay the jit advances the call count by `calls`."""

    def __init__(self, tensor_cls: Any):
        self.tensor_cls = tensor_cls
        self.calls = 0
        self.state: dict[str, Tensor] = {}  # device -> its (seed, count) buffer

    def fill(self) -> None:
        """Write the current (seed, call count) into every state buffer (before a replay)."""
        values = np.array([RandomMixin._seed, RandomMixin._calls], np.uint32)
        for t in self.state.values():
            buffer_for(t.uop.base).copyin(values)

    def key(self, device: str | None) -> Tensor:
        """The key of the next random tensor of the step (the eager call count has already advanced for it)."""
        dev = canonicalize(device) if device is not None else Device.DEFAULT
        if dev not in self.state:
            start = np.array([RandomMixin._seed, RandomMixin._calls - 1 - self.calls], np.uint32)
            self.state[dev] = self.tensor_cls(start, device=dev)  # a buffer already (no realize: it would run pending writes)
        state = self.state[dev]
        self.calls += 1
        return state[0].mul(_MUL_SEED).add(state[1].add(self.calls).mul(_MUL_CALL))


class RandomMixin:
    """Random creation functions of Tensor."""

    __slots__ = ()
    _seed: ClassVar[int] = 0
    _calls: ClassVar[int] = 0

    @staticmethod
    def manual_seed(seed: int = 0) -> None:
        """Make the following random tensors reproducible from `seed`."""
        RandomMixin._seed, RandomMixin._calls = seed & 0xFFFFFFFF, 0

    # while TinyJit captures a step: the step's RNG state (see `JitRng`), read from a buffer instead of baked in
    _jit_rng: ClassVar[JitRng | None] = None

    @classmethod
    def _next_key(cls) -> int:
        RandomMixin._calls += 1
        return (RandomMixin._seed * _MUL_SEED + RandomMixin._calls * _MUL_CALL) & 0xFFFFFFFF

    @classmethod
    def _random_bits(cls, n: int, device: str | None) -> Tensor:
        """`n` pseudo-random uint32s."""
        tensor_cls: Any = cls
        key: Any = cls._next_key()
        if (rng := RandomMixin._jit_rng) is not None:
            key = rng.key(device)
        else:
            # the key is a one-element buffer the kernel reads, not a constant in its source: every call has its own
            # key, and as a constant it made each call's kernel a new one (a compile per eager Tensor.rand or dropout,
            # 80-170 ms each). The same key, so the same numbers
            key = tensor_cls(np.array([key], np.uint32), device=device)
        x = tensor_cls.arange(n, dtype=dtypes.uint32, device=device).mul(_GOLDEN).add(key)
        x = x.bitwise_xor(x.rshift(16)).mul(0x85EBCA6B)
        x = x.bitwise_xor(x.rshift(13)).mul(0xC2B2AE35)
        return x.bitwise_xor(x.rshift(16))

    @classmethod
    def rand(cls, *shape: Any, device: str | None = None, dtype: Any = None, **kwargs: Any) -> Tensor:
        """Uniform samples in [0, 1)."""
        tensor_cls: Any = cls
        given = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if any(isinstance(d, UOp) for d in given):
            raise ArgumentError(f"random tensors need a concrete shape, got the symbolic {shape_str(given)} "
                                "(dropout of a tensor shrunk by a Variable included): draw the full size and shrink it")
        if device is not None and not isinstance(device, str):  # (tinygrad refuses it too)
            raise ArgumentError(f"random tensors are drawn on one device, got device={device!r}: draw on one and shard the result")
        dims = tensor_cls._shape_arg(shape)
        dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
        bits = cls._random_bits(math.prod(dims), device)
        # the top k bits, k the significant bits of the dtype (at most float32's 24): k/2**k is exact in the dtype, so
        # the result is < 1 after the cast (a float32 0.9999 rounds to 1.0 in half)
        k = min(24, dtypes.finfo(dt)[1] + 1) if dtypes.is_float(dt) else 24
        unit = bits.rshift(32 - k).cast(dtypes.float32).mul(1.0 / (1 << k))
        return tensor_cls(unit.reshape(dims).cast(dt).uop, device=device, **kwargs)

    @classmethod
    def randn(cls, *shape: Any, dtype: Any = None, device: str | None = None, **kwargs: Any) -> Tensor:
        """Standard normal samples (Box-Muller)."""
        tensor_cls: Any = cls
        dims = tensor_cls._shape_arg(shape)
        u = cls.rand(2, *dims, device=device, dtype=dtypes.float32)  # (in float32 whatever the default: log(1 - u) stays finite)
        radius = u[0].sub(1.0, True).log().mul(-2.0).sqrt()
        ret = radius.mul(u[1].mul(2 * math.pi).cos())
        return tensor_cls(ret.cast(to_dtype(dtype) if dtype is not None else dtypes.default_float).uop, device=device, **kwargs)

    @classmethod
    def uniform(cls, *shape: Any, low: float = 0.0, high: float = 1.0, dtype: Any = None, **kwargs: Any) -> Tensor:
        """Uniform samples in [low, high)."""
        if not low < high:
            raise ArgumentError(f"uniform needs low < high, got low={low}, high={high}")
        dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
        return cls.rand(*shape, dtype=dtypes.float32, **kwargs).mul(high - low).add(low).cast(dt)

    @classmethod
    def normal(cls, *shape: Any, mean: float = 0.0, std: float = 1.0, **kwargs: Any) -> Tensor:
        """Normal samples with `mean` and `std`."""
        if std < 0:
            raise ArgumentError(f"normal needs std >= 0, got {std}")
        return cls.randn(*shape, **kwargs).mul(std).add(mean)

    @classmethod
    def randint(cls, *shape: Any, low: int = 0, high: int = 10, dtype: Any = None, **kwargs: Any) -> Tensor:
        """Uniform integers in [low, high)."""
        dt = to_dtype(dtype) if dtype is not None else dtypes.int32
        if not isinstance(low, (int, np.integer)) or not isinstance(high, (int, np.integer)):
            raise TensorTypeError(f"randint takes int bounds, got low={low!r}, high={high!r}")
        if not dtypes.is_int(dt):
            raise TensorTypeError(f"randint makes ints, got dtype={dt}: use uniform for floats")
        low, high = int(low), int(high)
        if low >= high:
            raise ArgumentError(f"randint needs low < high, got low={low}, high={high}")
        return cls.rand(*shape, dtype=dtypes.float32, **kwargs).mul(high - low).floor().add(low).cast(dt)

    @classmethod
    def scaled_uniform(cls, *shape: Any, **kwargs: Any) -> Tensor:
        """Uniform samples in [-n**-0.5, n**-0.5) for n = prod(shape)."""
        tensor_cls: Any = cls
        return cls.uniform(*shape, low=-1.0, high=1.0, **kwargs).mul(math.prod(tensor_cls._shape_arg(shape)) ** -0.5)

    @classmethod
    def glorot_uniform(cls, *shape: Any, **kwargs: Any) -> Tensor:
        """Glorot (Xavier) uniform init: bound sqrt(6 / (shape[0] + prod(shape[1:])))."""
        tensor_cls: Any = cls
        dims = tensor_cls._shape_arg(shape)
        bound = (6 / (dims[0] + math.prod(dims[1:]))) ** 0.5
        return cls.uniform(*shape, low=-bound, high=bound, **kwargs)

    @classmethod
    def kaiming_uniform(cls, *shape: Any, a: float = 0.01, **kwargs: Any) -> Tensor:
        """Kaiming (He) uniform init for a leaky ReLU of slope `a`: bound sqrt(6 / (1 + a**2) / prod(shape[1:]))."""
        tensor_cls: Any = cls
        bound = (6 / (1 + a**2) / math.prod(tensor_cls._shape_arg(shape)[1:])) ** 0.5
        return cls.uniform(*shape, low=-bound, high=bound, **kwargs)

    @classmethod
    def kaiming_normal(cls, *shape: Any, a: float = 0.01, **kwargs: Any) -> Tensor:
        """Kaiming (He) normal init for a leaky ReLU of slope `a`: std sqrt(2 / (1 + a**2) / prod(shape[1:]))."""
        tensor_cls: Any = cls
        std = (2 / (1 + a**2) / math.prod(tensor_cls._shape_arg(shape)[1:])) ** 0.5
        return cls.normal(*shape, mean=0.0, std=std, **kwargs)

    @classmethod
    def randperm(cls, n: int, device: str | None = None, dtype: Any = dtypes.int32, **kwargs: Any) -> Tensor:
        """A random permutation of 0..n-1 (the stable argsort of uniform samples)."""
        return cls.rand(n, device=device, **kwargs).argsort().cast(to_dtype(dtype))

    def multinomial(self: Tensor, num_samples: int = 1, replacement: bool = False) -> Tensor:
        """`num_samples` class indices per row drawn with probability proportional to the weights in this 1-D or 2-D
        tensor (int32). Without replacement the classes of a row are distinct (Efraimidis-Spirakis keys)."""
        me: Any = self
        if me.ndim not in (1, 2) or num_samples <= 0:
            raise ArgumentError(f"multinomial needs a 1-D or 2-D weight tensor and num_samples > 0, got {me.shape} and {num_samples}")
        weight = me.unsqueeze(0) if me.ndim == 1 else me
        if not replacement and num_samples > weight.shape[1]:
            raise ArgumentError(f"cannot draw {num_samples} distinct classes out of {weight.shape[1]} without replacement")
        if replacement or num_samples == 1:
            cdf = weight.cumsum(1).float()
            cdf = cdf.div(cdf[:, -1].unsqueeze(1))
            u = type(me).rand(num_samples, cdf.shape[0], 1, device=me.device)
            # the class of a sample is the number of cdf steps at or below it
            indices = (u >= cdf).sum(2).permute(1, 0)
        else:
            keys = weight.rand_like(dtype=dtypes.float32).log2().div(weight)
            indices = keys.topk(num_samples, dim=1)[1]
        return (indices.squeeze(0) if me.ndim == 1 else indices).cast(dtypes.int32)

    def _like(self: Tensor, sampler: str, kwargs: dict[str, Any]) -> Tensor:
        me: Any = self
        kwargs.setdefault("device", me.device)
        kwargs.setdefault("dtype", me.dtype if dtypes.is_float(me.dtype) else None)
        return getattr(type(self), sampler)(*me.shape, **kwargs)

    def rand_like(self: Tensor, **kwargs: Any) -> Tensor:
        """Uniform samples shaped like this tensor (its device, and its dtype when it is a float)."""
        return self._like("rand", kwargs)

    def randn_like(self: Tensor, **kwargs: Any) -> Tensor:
        """Standard normal samples shaped like this tensor (its device, and its dtype when it is a float)."""
        return self._like("randn", kwargs)
