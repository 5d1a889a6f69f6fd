"""Movement ops on UOps (reshape, expand, permute, pad, shrink, flip, unshard) and walking back to the storage.

The symbolic parameters of a movement op are srcs of the node (so rewrites reach them); `marg` reads them back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from uopir.dtypes import dtypes
from uopir.ops import GroupOp, Ops
from uopir.shapes import movement_shape, sint

if TYPE_CHECKING:
    from uopir.uop import UOp


# the weakint constants of movement-op sizes, made once each (an eager training step builds thousands of movement ops)
_DIMS: dict[int, UOp] = {}
_DIMS_MAX = 1 << 14
# movement ops whose argument is their sizes, and those whose argument is the node's arg
_SIZED = frozenset({Ops.RESHAPE, Ops.EXPAND})
_ARGED = frozenset({Ops.PERMUTE, Ops.FLIP})


def _set_shape(node: Any, shape: tuple[sint, ...]) -> None:
    """Set a new node's `_shape` (uop.py replaces this with the slot's own setter, once UOp exists)."""
    object.__setattr__(node, "_shape", shape)


def _dim(node: UOp, d: int) -> UOp:
    if (u := _DIMS.get(d)) is None:
        if len(_DIMS) >= _DIMS_MAX:
            _DIMS.clear()
        u = _DIMS[d] = node.const_like(d, dtypes.weakint)
    return u


class MovementMixin:
    """View-changing builders shared by every UOp (they build nodes through the node's own class)."""

    __slots__ = ()

    # provided by UOp
    op: Any
    dtype: Any
    src: Any
    shape: Any
    ndim: Any
    const_like: Any

    def _mop(self, op: Ops, dims: Iterable[sint], arg: Any = None) -> UOp:
        dims = tuple(dims)
        # the size srcs in one loop, noting whether every size is a plain int (a view is built for every movement op of
        # every tensor op: this loop and the shape below were half of writing into a buffer)
        srcs: list[Any] = [self]
        plain = True
        get = _DIMS.get
        for d in dims:
            if isinstance(d, int):
                srcs.append(u if (u := get(d)) is not None else _dim(self, d))
                if type(d) is not int:  # a bool or another int subclass: its size node, but no plain shape
                    plain = False
            else:
                srcs.append(d)
                plain = False
        ret = type(self)(op, self.dtype, tuple(srcs), arg)
        if hasattr(ret, "_shape"):  # a node that exists already (validated when it was built)
            return ret
        # validate now: a bad movement op fails where it is built. A new node with plain int sizes takes its shape from
        # them (`marg` in the form UOp.marg reads back from the size nodes, a third of building a view)
        if plain and (ps := self.shape_or_none) is not None:
            marg = dims if op in _SIZED else arg if op in _ARGED else tuple(zip(dims[0::2], dims[1::2]))
            _set_shape(ret, movement_shape(op, ps, marg))  # UOp's own __setattr__ refuses every field
        else:
            _ = ret.shape
        return ret

    def reshape(self, shape: tuple[sint, ...]) -> UOp:
        """A reshape to `shape` (same element count)."""
        return self if self.shape == tuple(shape) else self._mop(Ops.RESHAPE, shape)

    def expand(self, shape: tuple[sint, ...]) -> UOp:
        """Broadcast size-1 dims to `shape`."""
        return self if self.shape == tuple(shape) else self._mop(Ops.EXPAND, shape)

    def permute(self, order: tuple[int, ...]) -> UOp:
        """Reorder the axes."""
        return self if tuple(order) == tuple(range(self.ndim)) else self._mop(Ops.PERMUTE, (), tuple(order))

    def pad(self, padding: tuple[tuple[sint, sint], ...]) -> UOp:
        """Pad each axis by (before, after) elements."""
        if all(isinstance(x, int) and x == 0 for p in padding for x in p):
            return self
        return self._mop(Ops.PAD, [x for p in padding for x in p])

    def shrink(self, arg: tuple[tuple[sint, sint], ...]) -> UOp:
        """Keep [begin, end) of each axis."""
        if all(isinstance(b, int) and b == 0 and (e is s or (isinstance(e, int) and isinstance(s, int) and e == s))
               for (b, e), s in zip(arg, self.shape)):
            return self
        return self._mop(Ops.SHRINK, [x for p in arg for x in p])

    def shrink_to(self, shape: tuple[sint, ...]) -> UOp:
        """Keep the first `shape[i]` elements of each axis."""
        return self.shrink(tuple((0, s) for s in shape))

    def flip(self, flags: tuple[bool, ...]) -> UOp:
        """Reverse the axes whose flag is True."""
        return self if not any(flags) else self._mop(Ops.FLIP, (), tuple(bool(f) for f in flags))

    def unshard(self, axis: int) -> UOp:
        """Join the per-device shards of a multi-device value along `axis`."""
        return type(self)(Ops.UNSHARD, self.dtype, (self,), axis)

    @property
    def base(self) -> UOp:
        """The node under any movement ops."""
        node = self
        while node.op in GroupOp.Movement:
            node = node.src[0]
        return node

    @property
    def unsharded_base(self) -> UOp:
        """The storage under movement ops and UNSHARD."""
        node = self
        while node.op in GroupOp.Movement or node.op is Ops.UNSHARD:
            node = node.src[0]
        return node


    def view_as(self, shape: tuple[sint, ...], axis: int | None = None) -> UOp:
        """View this flat storage as `shape`: reshape to the max shape, shrink symbolic dims, UNSHARD on `axis`."""
        max_shape = tuple(d if isinstance(d, int) else int(d.vmax) for d in shape)
        ret = self.reshape(max_shape)
        if max_shape != tuple(shape):
            ret = ret.shrink_to(shape)
        return ret if axis is None else ret.unshard(axis)
