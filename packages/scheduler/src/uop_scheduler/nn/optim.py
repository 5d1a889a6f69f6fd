"""Optimizers with tinygrad's names and defaults: LARS (SGD is LARS without the trust ratio), LAMB (Adam and AdamW are LAMB
without it) and OptimizerGroup.

`step()` computes every parameter's new value from its `.grad`, assigns it and realizes all parameters and optimizer
state in one schedule (`schedule_step()` does the assigns and returns what to realize); `zero_grad()` clears the gradients.
"""

from __future__ import annotations

import functools
import math
import os
import weakref

from hcq_runtime import buffer_for
from uopir import CallInfo, DType, KernelInfo, Ops, UOp, dtypes, kernel_form

from ..call_values import IN_PLACE, version_under
from ..context import dtype_knob
from ..elementwise import const_uop
from ..errors import TensorRuntimeError
from ..tensor import Tensor
from ..writes import write_by_kernel

__all__ = ["LAMB", "LARS", "SGD", "Adam", "AdamW", "Muon", "Optimizer", "OptimizerGroup"]


def _trust_ratio(r1: Tensor, r2: Tensor, ratio: Tensor) -> Tensor:
    """`ratio` where both norms r1 (of the parameter) and r2 are positive, else 1 (the trust ratio of LARS and LAMB)."""
    return (r1 > 0).where((r2 > 0).where(ratio, 1.0), 1.0)


def _optim_dtype() -> DType:
    """The dtype of optimizer state: `OPTIM_DTYPE` (a dtype name, float32 by default), as tinygrad reads it."""
    return dtype_knob("OPTIM_DTYPE", os.environ.get("OPTIM_DTYPE", "float32"), "float")


def _state_like(p: Tensor) -> Tensor:
    """Optimizer state for parameter `p`: zeros in a buffer of their own, filled now. Left a constant (or a pending
    fill), the first step's update kernels fold the zeros in and differ from every later step's: a second set of
    kernels was compiled at the second step (an MLP's second eager step took 0.5 s instead of 0.15 s cold). State of
    a parameter on several devices stays a sharded constant (one tensor object, which `to_` can move)."""
    # float32 whatever the default float (tinygrad's OPTIM_DTYPE): moments of a half default overflowed (Adam with lr 1e10)
    if isinstance(p.device, tuple):
        return Tensor.zeros(*p.shape, device=p.device, dtype=_optim_dtype(), requires_grad=False)
    # a buffer of its own, so a hand-written step can update it in place from the first step on, filled from the host
    # (zero bytes are zero in every float dtype): a fill kernel was compiled for each parameter shape, one after another
    # as the optimizer was made (6 of a small CNN's cold start, ~50 ms each)
    state = Tensor.empty(*p.shape, device=p.device, dtype=_optim_dtype(), requires_grad=False).realize()
    buffer = buffer_for(state.uop.base)
    zeros = memoryview(bytes(max(1, min(buffer.nbytes, _ZERO_PIECE_BYTES))))
    for offset in range(0, buffer.nbytes, len(zeros)):
        piece = zeros[: min(len(zeros), buffer.nbytes - offset)]
        buffer.view(len(piece), dtypes.uint8, offset).copyin(piece)
    return state


#: the host zeros `_state_like` copies a buffer's worth of, a piece at a time
_ZERO_PIECE_BYTES = 1 << 20


class Optimizer:
    """Base: holds the parameters (tensors whose requires_grad is not False; None becomes True) and the learning rate."""

    def __init__(self, params: list[Tensor], lr: float):
        if lr < 0:
            raise ValueError(f"invalid learning rate {lr}: it must be >= 0")
        # each tensor once, however often it is passed (tinygrad's dedup): a duplicate would be stepped twice
        self.params = list({id(p): p for p in params if p.requires_grad is not False}.values())
        for p in self.params:
            if p.requires_grad is None:
                p.requires_grad = True
        self.lr = lr
        self.state: list[Tensor] = []

    def zero_grad(self) -> None:
        """Clear every parameter's gradient."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """Update the parameters that have a gradient and realize them with the optimizer state. Training mode is not
        required, but a step where it is explicitly off (`Context(TRAINING=0)`, or TRAINING=0 in the environment) is a
        TensorRuntimeError, as in tinygrad: evaluation code that steps an optimizer is a bug."""
        if not Tensor.training and os.environ.get("TRAINING", "").strip() == "0":
            raise TensorRuntimeError("TRAINING=0: the optimizer does not step outside training; use Context(TRAINING=1) or "
                                     "set Tensor.training = True around the training step")
        Tensor.realize(*self.schedule_step())

    def schedule_step(self) -> list[Tensor]:
        """Assign each parameter's new value (lazily) and return the tensors to realize to perform the step."""
        for i, p in enumerate(self.params):
            if p.grad is not None:
                p.assign(self._update(i, p.detach(), p.grad.detach()).detach().cast(p.dtype))
        return [*self.params, *self.state]

    def _update(self, i: int, p: Tensor, g: Tensor) -> Tensor:
        raise NotImplementedError


class OptimizerGroup(Optimizer):
    """Several optimizers (e.g. one per parameter group) zeroed and stepped as one, in a single schedule."""

    def __init__(self, *optimizers: Optimizer):  # no super().__init__: the members own parameters and state
        self.optimizers = optimizers
        self.params = [p for o in optimizers for p in o.params]
        self.state = [s for o in optimizers for s in o.state]

    def __getitem__(self, i: int) -> Optimizer:
        return self.optimizers[i]

    def zero_grad(self) -> None:
        for o in self.optimizers:
            o.zero_grad()

    def schedule_step(self) -> list[Tensor]:
        return [t for o in self.optimizers for t in o.schedule_step()]


class LARS(Optimizer):
    """Layer-wise Adaptive Rate Scaling: SGD whose step is scaled per parameter by the trust ratio
    tcoef * |p| / (|g| + weight_decay * |p|) (1 when a norm is zero).

    `classic` applies lr (and the ratio) before the momentum buffer, otherwise after it; `pre_wd` adds weight_decay * p to
    the gradient first, otherwise weight_decay * lr * p to the final step. With `ns_coefficients` the step after momentum
    is orthogonalized by `ns_steps` Newton-Schulz iterations (Muon)."""

    def __init__(self, params: list[Tensor], lr: float = 0.001, momentum: float = 0.9, weight_decay: float = 1e-4, ns_steps: int = 0,
                 ns_coefficients: tuple[float, ...] | None = None, nesterov: bool = False, classic: bool = True, pre_wd: bool = True,
                 tcoef: float = 0.001):
        if momentum < 0:
            raise ValueError(f"invalid momentum {momentum}: it must be >= 0")
        super().__init__(params, lr)
        self.momentum, self.wd, self.nesterov, self.classic, self.pre_wd, self.tcoef = momentum, weight_decay, nesterov, classic, pre_wd, tcoef
        self.ns_steps, self.ns_coefficients = ns_steps, tuple(ns_coefficients) if ns_coefficients else None
        self.b = [_state_like(p) for p in self.params] if momentum else []
        self.state = self.b

    def _update(self, i: int, p: Tensor, g: Tensor) -> Tensor:
        r: Tensor | float = 1.0
        if self.tcoef:
            r1, r2 = p.square().sum().sqrt(), g.square().sum().sqrt()
            r = _trust_ratio(r1, r2, self.tcoef * r1 / (r2 + self.wd * r1))
        if self.pre_wd and self.wd:
            g = g + self.wd * p
        if self.classic:
            g = g * r * _lr(self, g)
        if self.momentum:
            buf = self.b[i].assign(self.momentum * self.b[i] + g)
            g = g + self.momentum * buf if self.nesterov else buf
        if self.ns_coefficients:  # Muon: the step orthogonalized, each parameter as a matrix of its first axis
            g = g.reshape(g.shape[0], -1).newton_schulz(self.ns_steps, self.ns_coefficients).reshape(g.shape)
        if not self.classic:
            g = g * r * _lr(self, g)
        if not self.pre_wd and self.wd:
            g = g + _lr(self, p, self.wd) * p
        return p - g


def Muon(params: list[Tensor], lr: float = 0.001, momentum: float = 0.95, weight_decay: float = 0.1, ns_steps: int = 5,  # noqa: N802
         ns_coefficients: tuple[float, ...] = (3.4445, -4.775, 2.0315), nesterov: bool = True) -> LARS:
    """Muon (https://kellerjordan.github.io/posts/muon/): momentum SGD whose step is orthogonalized by Newton-Schulz
    iterations, with weight decay applied after momentum: LARS with classic=False, pre_wd=False and no trust ratio."""
    return LARS(params, lr, momentum, weight_decay, ns_steps, ns_coefficients, nesterov, classic=False, pre_wd=False, tcoef=0.0)


def SGD(params: list[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,  # noqa: N802
        classic: bool = False) -> LARS:
    """Stochastic gradient descent with optional momentum (nesterov), weight decay and tinygrad's `classic` momentum rule:
    LARS without the trust ratio."""
    return LARS(params, lr, momentum, weight_decay, nesterov=nesterov, classic=classic, pre_wd=True, tcoef=0.0)


class LAMB(Optimizer):
    """Layer-wise Adaptive Moments: the Adam step m_hat / (sqrt(v_hat) + eps) + weight_decay * p, scaled per parameter by
    the trust ratio |p| / |step| (1 when a norm is zero); `adam=True` drops the ratio, which is AdamW."""

    def __init__(self, params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
                 weight_decay: float = 0.0, adam: bool = False):
        if weight_decay < 0:
            raise ValueError(f"invalid weight_decay {weight_decay}: it must be >= 0")
        super().__init__(params, lr)
        self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
        self.m = [_state_like(p) for p in self.params]
        self.v = [_state_like(p) for p in self.params]
        # b1**t and b2**t live in tensors rather than constants, so every step has the same graph: one schedule and
        # one set of kernels for the whole run instead of new ones per step
        self.b1_t, self.b2_t = (Tensor([1.0], dtype=dtypes.float32, requires_grad=False) for _ in range(2))
        self.state = [self.b1_t, self.b2_t, *self.m, *self.v]

    def schedule_step(self) -> list[Tensor]:
        self.b1_t.assign(self.b1_t * self.b1)
        self.b2_t.assign(self.b2_t * self.b2)
        if not (self.adam and self.uop_steps and self.fused_steps):
            return super().schedule_step()
        # the plain parameters of one device and dtype are stepped by one kernel (a loop per parameter); when one of
        # them cannot be written in place, each of them is tried alone
        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(self.params):
            if p.grad is not None and self._plain(i, p, p.grad):
                groups.setdefault((p.device, p.dtype), []).append(i)
        in_place: set[int] = set()
        for group in groups.values():
            if self._adam_in_place(group):
                in_place.update(group)
            elif len(group) > 1:
                in_place.update(i for i in group if self._adam_in_place([i]))
        for i, p in enumerate(self.params):
            if p.grad is not None and i not in in_place:
                p.assign(self._update(i, p.detach(), p.grad.detach()).detach().cast(p.dtype))
        return [*self.params, *self.state]

    # Adam(W) steps of plain parameters are built from UOps (`_adam_uops`); False takes the tensor ops for every step
    uop_steps = True
    # ... and run as one hand-written kernel (`_adam_in_place`) for the parameters whose values and moments hold
    # buffers of their own; False builds each step's graph from UOps (three kernels per parameter)
    fused_steps = True

    def _adam_in_place(self, indices: list[int]) -> bool:
        """The Adam(W) steps of parameters `indices` (plain, one device and dtype) as one kernel, a loop per parameter,
        that reads each parameter, its moments and gradient and the bias corrections once and writes the parameter and
        both moments in place: the values of `_adam_uops` (the same operations in the same order), without a graph of
        ~20 nodes and three writes per parameter (two thirds of a deep model's step graph) and with one kernel instead
        of three per parameter (a 24-layer MLP's 50 parameters: one kernel instead of 50). False, doing nothing, when one
        of them cannot run in place (see `writes.write_by_kernel`)."""
        first = self.params[indices[0]]
        lr = _learning_rate(self, first.device, first.dtype)
        written: list[Tensor] = []
        grads: list[UOp] = []
        nests = []
        for i in indices:
            p, m, v, g = self.params[i], self.m[i], self.v[i], self.params[i].grad
            written += [p, m, v]
            grads.append(g.uop)
            nests.append((tuple(_buffer_size(t.uop) or math.prod(t.shape) for t in (p, m, v, g)), math.prod(p.shape)))
        shared = tuple(_buffer_size(t.uop) or math.prod(t.shape) for t in (self.b1_t, self.b2_t, lr))
        kernel, info = _adam_kernel(tuple(nests), shared, first.dtype, self.b1, self.b2, self.eps, self.wd)
        return write_by_kernel(kernel, info, written, [*grads, self.b1_t.uop, self.b2_t.uop, lr.uop])

    def _update(self, i: int, p: Tensor, g: Tensor) -> Tensor:
        if self.adam and self.uop_steps and self._plain(i, p, g):
            return self._adam_uops(i, p, g)
        # the moments are computed where they live (state moved with `to_`, e.g. to the CPU beside sharded parameters)
        state_device = self.m[i].device
        g = g.to(state_device) if state_device != p.device else g
        # the moments keep their dtype (float32 state for a float64 or half parameter, as tinygrad keeps it)
        m = self.m[i].assign((self.b1 * self.m[i] + (1 - self.b1) * g).cast(self.m[i].dtype))
        v = self.v[i].assign((self.b2 * self.v[i] + (1 - self.b2) * g * g).cast(self.v[i].dtype))
        # each bias correction is one reciprocal of a scalar, multiplied in: an element then takes one division and one
        # square root, not three divisions (the fused kernel's divisions were most of an MLP step's Adam time)
        m_hat, v_hat = m * (1 / (1 - self.b1_t.to(state_device))), v * (1 / (1 - self.b2_t.to(state_device)))
        up = m_hat / (v_hat.sqrt() + self.eps)
        up = up.to(p.device) if state_device != p.device else up
        if self.wd:
            up = up + self.wd * p
        if not self.adam:
            r1, r2 = p.square().sum().sqrt(), up.square().sum().sqrt()
            up = up * _trust_ratio(r1, r2, r1 / r2)
        return p - _lr(self, up) * up

    def _plain(self, i: int, p: Tensor, g: Tensor) -> bool:
        """Whether parameter i's step can be built by `_adam_uops`: one device for the parameter, its gradient and state,
        one dtype for all of them and the bias-correction tensors, a number as the learning rate, and at least one (fixed)
        axis."""
        m, v, dt = self.m[i], self.v[i], p.dtype
        return (isinstance(p.device, str) and p.device == g.device == m.device == v.device == self.b1_t.device == self.b2_t.device
                and isinstance(self.lr, (int, float))
                and p.ndim > 0
                and all(isinstance(d, int) for d in p.shape) and g.dtype is dt and m.dtype is dt and v.dtype is dt
                and self.b1_t.dtype is dt and self.b2_t.dtype is dt)

    def _adam_uops(self, i: int, p: Tensor, g: Tensor) -> Tensor:
        """The Adam(W) step of `_update`'s tensor code built from UOps: the same graph node for node (so the same kernels
        and the same values; a test compares both), without a tensor, broadcast and promotion check per intermediate (the
        tensor code was about a third of an MLP's eager training step). The moments are assigned as there."""
        m, v, dt, shape = self.m[i], self.v[i], p.dtype, p.shape

        def k(value: float) -> UOp:
            return const_uop(value, dt, shape)

        def op(o: Ops, a: UOp, b: UOp) -> UOp:
            return UOp.elementwise(o, dt, a, b)

        def unbiased(moment: UOp, b_t: Tensor) -> UOp:  # moment * (1 / (1 - b_t)), b_t broadcast as a tensor op does
            scale = op(Ops.FDIV, const_uop(1, dt, b_t.shape), op(Ops.SUB, const_uop(1, dt, b_t.shape), b_t.uop))
            if b_t.shape != shape:
                scale = scale.reshape((1,) * (len(shape) - b_t.ndim) + b_t.shape).expand(shape)
            return op(Ops.MUL, moment, scale)

        gu = g.uop
        m.assign(p._wrap(op(Ops.ADD, op(Ops.MUL, k(self.b1), m.uop), op(Ops.MUL, k(1 - self.b1), gu))))
        v.assign(p._wrap(op(Ops.ADD, op(Ops.MUL, k(self.b2), v.uop), op(Ops.MUL, op(Ops.MUL, k(1 - self.b2), gu), gu))))
        v_hat = unbiased(v.uop, self.b2_t)
        up = op(Ops.FDIV, unbiased(m.uop, self.b1_t), op(Ops.ADD, UOp.elementwise(Ops.SQRT, dt, v_hat), k(self.eps)))
        if self.wd:
            up = op(Ops.ADD, up, op(Ops.MUL, k(self.wd), p.uop))
        lr = _lr(self, p).uop.reshape((1,) * len(shape)).expand(shape)  # as the tensor code's `_lr(...) * up` broadcasts
        return p._wrap(op(Ops.SUB, p.uop, op(Ops.MUL, lr, up)))


def _buffer_size(u: UOp) -> int | None:
    """The size of the buffer `u` is (seen through reshapes), None for a value not in a buffer."""
    return base.arg.size if (base := version_under(u)) is not None and base.op is Ops.BUFFER else None


# each optimizer's learning rate as a one-element tensor per (device, dtype), with the value it was last written: kept
# here rather than on the optimizer, where `get_state_dict(optimizer)` would list it and a loaded state could change the
# tensor behind the value `lr` says it holds
_learning_rates: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _learning_rate(opt: Optimizer, device: str, dtype: DType, factor: float = 1.0) -> Tensor:
    """`factor * opt.lr` as a one-element tensor on `device` of `dtype`, written again (a write of one element) only
    when `opt.lr` changed since: a kernel reading it is compiled once for every value a learning-rate schedule sets (as a
    constant, each new value compiled the step's kernels again: ~0.2 s per step of a cosine schedule on an MLP)."""
    return _learning_rate_entry(opt, device, dtype, factor)[0]


def _learning_rate_entry(opt: Optimizer, device: str, dtype: DType, factor: float) -> list:
    """[the one-element tensor, its scalar view (rebuilt by the tensor's writes), the value last written]."""
    held = _learning_rates.setdefault(opt, {})
    value = factor * float(opt.lr)  # as the constant was computed (weight decay * lr)
    if (entry := held.get((device, dtype, factor))) is None:
        t = Tensor([value], dtype=dtype, device=device, requires_grad=False).realize()
        held[(device, dtype, factor)] = entry = [t, t.reshape(()), value]
    elif entry[2] != value:
        entry[0].assign(Tensor([value], dtype=dtype, device=device))
        entry[2] = value
    return entry


def _lr(opt: Optimizer, like: Tensor, factor: float = 1.0) -> Tensor | float:
    """`factor * opt.lr` for an update of `like` (its dtype and device) in a step's tensor code: a scalar view of the
    learning-rate tensor (see `_learning_rate`), or the number itself for a value on several devices."""
    if not isinstance(like.device, str) or not isinstance(opt.lr, (int, float)):  # a tensor set as `lr` is used as it is
        return factor * opt.lr
    return _learning_rate_entry(opt, like.device, like.dtype, factor)[1]


@functools.lru_cache(maxsize=256)
def _adam_kernel(nests: tuple[tuple[tuple[int, int, int, int], int], ...], shared: tuple[int, int, int], dt: DType, b1: float,
                 b2: float, eps: float, wd: float) -> tuple[UOp, CallInfo]:
    """The kernel of `LAMB._adam_in_place` and its CALL's arg. Parameter j of `nests` ((buffer sizes of the parameter, m,
    v and the gradient), elements) is written at slots 3j (parameter), 3j + 1 (m), 3j + 2 (v) and reads its gradient at
    3N + j; slots 4N, 4N + 1, 4N + 2 hold b1**t, b2**t and the learning rate (sizes `shared`). Each parameter is one
    loop computing what `_adam_uops` builds, operation for operation (the learning rate read from its tensor holds the
    constant's value); the parameter is stored first and the moments after it, so no element is read after this
    kernel wrote it (each store's vector block loads what it reads itself)."""
    count = len(nests)
    b1_t, b2_t, lr = (UOp.param(4 * count + k, dt.ptr(size)) for k, size in enumerate(shared))

    def k(value: float) -> UOp:
        return UOp.const(value, dt)

    loops = []
    for j, ((p_size, m_size, v_size, g_size), n) in enumerate(nests):
        p, m, v = (UOp.param(3 * j + k, dt.ptr(size)) for k, size in enumerate((p_size, m_size, v_size)))
        g = UOp.param(3 * count + j, dt.ptr(g_size))
        i = UOp.range(n, j)
        first = UOp.const(0, i.dtype)
        gi = g.index(i).load()
        m_new = k(b1) * m.index(i).load() + k(1 - b1) * gi
        v_new = k(b2) * v.index(i).load() + k(1 - b2) * gi * gi
        # (the reciprocals of the bias corrections are the same scalars in every iteration: the compiler hoists them)
        up = (m_new * (k(1) / (k(1) - b1_t.index(first).load()))) / ((v_new * (k(1) / (k(1) - b2_t.index(first).load()))).sqrt() + k(eps))
        if wd:
            up = up + k(wd) * p.index(i).load()
        p_new = p.index(i).load() - lr.index(first).load() * up
        loops.append(UOp.group(p.index(i).store(p_new), m.index(i).store(m_new), v.index(i).store(v_new)).end(i))
    kernel = kernel_form(UOp.sink(*loops, arg=KernelInfo(name="adam_step")))
    return kernel, CallInfo(aux=(IN_PLACE, 4 * count + 3, tuple(range(3 * count))))


def AdamW(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,  # noqa: N802
          weight_decay: float = 0.01) -> LAMB:
    """Adam with decoupled weight decay: LAMB without the trust ratio."""
    return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True)


def Adam(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> LAMB:  # noqa: N802
    """Adam: LAMB without the trust ratio or weight decay."""
    return LAMB(params, lr, b1, b2, eps, 0.0, adam=True)
