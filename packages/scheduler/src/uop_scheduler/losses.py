"""Loss functions with tinygrad's conventions: `self` is the prediction (probabilities, logits or log-probabilities,
as each name says), `Y` the target, and `reduction` one of "none", "sum", "mean"."""

from __future__ import annotations

from typing import TYPE_CHECKING

from uopir import Ops, UOp, dtypes

from .elementwise import const_uop
from .errors import ArgumentError, TensorRuntimeError
from .fields import TensorFields
from .templates import templated

if TYPE_CHECKING:
    from .tensor import Tensor

REDUCTIONS = ("none", "sum", "mean")


def _check_reduction(reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ArgumentError(f"reduction={reduction!r} must be one of {REDUCTIONS}")


def _check_smoothing(label_smoothing: float) -> None:
    if not 0.0 <= label_smoothing <= 1.0:
        raise ArgumentError(f"label_smoothing={label_smoothing} must be in [0.0, 1.0]")


class LossMixin(TensorFields):
    """Loss functions of Tensor."""

    __slots__ = ()

    def _do_reduction(self: Tensor, reduction: str = "mean") -> Tensor:
        _check_reduction(reduction)
        return self if reduction == "none" else self.sum() if reduction == "sum" else self.mean()

    def _one_hot_along(self: Tensor, num_classes: int, dim: int) -> Tensor:
        """Bool one-hot of an int tensor whose axis `dim` has size 1: True where the arange along dim equals it."""
        if not dtypes.is_int(self.dtype):
            raise TensorRuntimeError(f"class labels must be an int tensor, got {self.dtype}")
        after = self.ndim - self._resolve_dim(dim) - 1
        return self.eq(type(self).arange(num_classes, device=self.device).reshape((num_classes,) + (1,) * after))

    @templated
    def binary_crossentropy(self: Tensor, Y: Tensor, reduction: str = "mean") -> Tensor:  # noqa: N803 -- tinygrad's name
        """-(Y log(self) + (1 - Y) log(1 - self)) for probabilities `self`."""
        _check_reduction(reduction)
        return Y.neg().mul(self.log()).sub(Y.sub(1, True).mul(self.sub(1, True).log()))._do_reduction(reduction)

    @templated
    def binary_crossentropy_logits(self: Tensor, Y: Tensor, reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:  # noqa: N803
        """Binary cross-entropy of sigmoid(self), computed from the logits stably; `pos_weight` scales the positive
        term."""
        _check_reduction(reduction)
        pos = Y.mul(self.logsigmoid())
        if pos_weight is not None:
            pos = pos.mul(pos_weight)
        return pos.add(Y.sub(1, True).mul(self.neg().logsigmoid())).neg()._do_reduction(reduction)

    @templated
    def sparse_categorical_crossentropy(self: Tensor, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0,  # noqa: N803
                                        reduction: str = "mean") -> Tensor:
        """Cross-entropy of logits `self` (classes on the last axis) against int labels `Y`; labels equal to
        `ignore_index` (unless it is -1) add nothing and are left out of the mean."""
        _check_reduction(reduction)
        _check_smoothing(label_smoothing)
        if Y.device != self.device:
            raise TensorRuntimeError(f"labels on {Y.device} and logits on {self.device}: move one with .to()")
        if ignore_index == -1 and not label_smoothing and (fast := self._sparse_ce_uop(Y, reduction)) is not None:
            return self._wrap(fast)
        log_probs = self.log_softmax()
        # every label counts unless ignore_index is set; the smoothing term only with label_smoothing (left out, not
        # multiplied by 0: a -inf log-probability made it NaN, and it cost a reduce kernel and ~10 tensor ops a step)
        keep = Y.ne(ignore_index) if ignore_index != -1 else None
        target = Y.unsqueeze(-1)._one_hot_along(self.shape[-1], -1)
        if keep is not None:
            target = target.bitwise_and(keep.unsqueeze(-1))
        unreduced = target.where(log_probs, 0).sum(-1)
        if label_smoothing:
            smoothing = log_probs.mean(-1) if keep is None else keep.where(log_probs.mean(-1), 0)
            unreduced = unreduced.mul(1 - label_smoothing).add(smoothing.mul(label_smoothing))
        if reduction == "mean":
            return unreduced.sum().div(keep.sum() if keep is not None else Y.numel()).neg()
        return unreduced._do_reduction(reduction).neg()

    def _sparse_ce_uop(self: Tensor, Y: Tensor, reduction: str) -> UOp | None:  # noqa: N803
        """`sparse_categorical_crossentropy` without ignore_index or smoothing, as UOps: the graph its tensor ops build
        node for node (a test compares them), without a tensor per op (the loss was ~10 tensor ops, 0.2 ms of a small
        model's eager step). None where the tensor ops handle it (other dtypes, symbolic shapes, label dtypes other than
        the class index's)."""
        shape = self.shape
        if not shape or Y.shape != shape[:-1] or not dtypes.is_int(Y.dtype) or not all(isinstance(d, int) for d in shape):
            return None
        if (log_probs := self._log_softmax_uop(-1)) is None:
            return None
        classes = type(self).arange(shape[-1], device=self.device).uop
        if classes.dtype is not Y.dtype:
            return None
        # Y.unsqueeze(-1) == arange(C), broadcast; where(target, log_probs, 0); summed over the classes
        labels = Y.uop.reshape(Y.shape + (1,)).expand(shape)
        target = UOp.elementwise(Ops.CMPEQ, None, labels, classes.reshape((1,) * (len(shape) - 1) + shape[-1:]).expand(shape))
        picked = UOp.elementwise(Ops.WHERE, None, target, log_probs, const_uop(0, self.dtype, shape))
        unreduced = picked.r(Ops.ADD, (len(shape) - 1,)).reshape(shape[:-1])
        if reduction == "none":
            out = unreduced
        else:
            out = unreduced.r(Ops.ADD, tuple(range(len(shape) - 1))).reshape(()) if len(shape) > 1 else unreduced
            if reduction == "mean":
                out = UOp.elementwise(Ops.FDIV, None, out, const_uop(Y.numel(), self.dtype, ()))
        return UOp.elementwise(Ops.MUL, None, out, const_uop(-1, self.dtype, out.shape))

    @templated
    def cross_entropy(self: Tensor, Y: Tensor, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:  # noqa: N803
        """Cross-entropy of logits `self` (classes on axis 1, or 0 for 1-D) against class indices or probabilities."""
        _check_reduction(reduction)
        _check_smoothing(label_smoothing)
        cdim = 0 if self.ndim == 1 else 1
        if Y.shape != self.shape:
            if self.max(cdim).shape != Y.shape:
                raise TensorRuntimeError(f"cross_entropy shape mismatch: logits {self.shape}, targets {Y.shape}")
            Y = Y.unsqueeze(cdim)._one_hot_along(self.shape[cdim], cdim)
        probs = Y.mul(1 - label_smoothing).add(label_smoothing / self.shape[cdim])
        return self.log_softmax(cdim).mul(probs).sum(cdim).neg()._do_reduction(reduction)

    def nll_loss(self: Tensor, Y: Tensor, weight: Tensor | None = None, ignore_index: int | None = None,  # noqa: N803
                 reduction: str = "mean") -> Tensor:
        """Negative log-likelihood of log-probabilities `self` (classes on axis 1) at int labels `Y`, weighted per class
        by `weight`; the mean divides by the total weight of the labels not equal to `ignore_index`."""
        _check_reduction(reduction)
        w = Y.full_like(1.0, dtype=self.dtype) if weight is None else weight.gather(0, Y.flatten()).reshape(Y.shape)
        if ignore_index is not None:
            w = Y.ne(ignore_index).where(w, 0)
        nll = self.gather(1, Y.unsqueeze(1)).squeeze(1).mul(w).neg()
        return nll.sum().div(w.sum()) if reduction == "mean" else nll._do_reduction(reduction)
