"""The fields every Tensor op mixin reads, declared once for type checkers."""

from __future__ import annotations

from uopir import DType, UOp


class TensorFields:
    """Base of the op mixins: what they may read from the Tensor they are mixed into."""

    __slots__ = ()
    uop: UOp
    dtype: DType
    shape: tuple[int, ...]
    ndim: int
    device: str
