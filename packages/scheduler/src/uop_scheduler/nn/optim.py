"""Optimizers: SGD (momentum, nesterov, weight decay), Adam and AdamW, with tinygrad's defaults.

`step()` computes every parameter's new value from its `.grad`, assigns it and realizes all parameters and optimizer
state in one schedule; `zero_grad()` clears the gradients.
"""

from __future__ import annotations

from ..tensor import Tensor

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]


class Optimizer:
    """Base: holds the parameters (tensors whose requires_grad is not False; None becomes True) and the learning rate."""

    def __init__(self, params: list[Tensor], lr: float):
        self.params = [p for p in params if p.requires_grad is not False]
        for p in self.params:
            if p.requires_grad is None:
                p.requires_grad = True
        self.lr = lr
        self.state: list[Tensor] = []

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            p.assign(self._update(i, p, p.grad.detach()).detach().cast(p.dtype))
        Tensor.realize(*self.params, *self.state)

    def _update(self, i: int, p: Tensor, g: Tensor) -> Tensor:
        raise NotImplementedError


class SGD(Optimizer):
    def __init__(self, params: list[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False):
        super().__init__(params, lr)
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, nesterov
        self.state = [Tensor.zeros(*p.shape, device=p.device) for p in self.params] if momentum else []

    def _update(self, i: int, p: Tensor, g: Tensor) -> Tensor:
        g = g + self.weight_decay * p if self.weight_decay else g
        if self.momentum:
            buf = self.state[i].assign(self.momentum * self.state[i] + g)
            g = g + self.momentum * buf if self.nesterov else buf
        return p - self.lr * g


class AdamW(Optimizer):
    """Adam with decoupled weight decay (AdamW); `Adam` is AdamW with weight_decay=0."""

    def __init__(self, params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.01):
        super().__init__(params, lr)
        self.b1, self.b2, self.eps, self.weight_decay = b1, b2, eps, weight_decay
        self.m = [Tensor.zeros(*p.shape, device=p.device) for p in self.params]
        self.v = [Tensor.zeros(*p.shape, device=p.device) for p in self.params]
        # b1**t and b2**t live in tensors rather than constants, so every step has the same graph: one schedule and
        # one set of kernels for the whole run instead of new ones per step
        self.b1_t, self.b2_t = Tensor([1.0]), Tensor([1.0])
        self.state = [*self.m, *self.v, self.b1_t, self.b2_t]

    def step(self) -> None:
        self.b1_t.assign(self.b1_t * self.b1)
        self.b2_t.assign(self.b2_t * self.b2)
        super().step()

    def _update(self, i: int, p: Tensor, g: Tensor) -> Tensor:
        m = self.m[i].assign(self.b1 * self.m[i] + (1 - self.b1) * g)
        v = self.v[i].assign(self.b2 * self.v[i] + (1 - self.b2) * g * g)
        m_hat, v_hat = m / (1 - self.b1_t.to(p.device)), v / (1 - self.b2_t.to(p.device))
        update = m_hat / (v_hat.sqrt() + self.eps)
        if self.weight_decay:
            update = update + self.weight_decay * p
        return p - self.lr * update


def Adam(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> AdamW:  # noqa: N802
    """Adam: AdamW without weight decay (tinygrad's spelling)."""
    return AdamW(params, lr, b1, b2, eps, weight_decay=0.0)
