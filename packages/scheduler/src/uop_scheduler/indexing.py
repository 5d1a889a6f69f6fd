"""Movement-built indexing ops: roll, diag / diagonal, meshgrid, unfold, pad_to / shrink_to, scatter, masked_select
and einops-style rearrange.

Scatters compare each index with an arange (a one-hot along the scattered axis) and reduce over the source
positions, so they are ordinary fused kernels; only `masked_select` without `size` reads a count back to the host,
as tinygrad's does, because its output shape depends on the data.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from uopir import dtypes

from .elementwise import broadcast_shape
from .errors import ShapeError, TensorRuntimeError, TensorTypeError
from .fields import TensorFields
from .templates import templated
from .tensor_movement import argfix

if TYPE_CHECKING:
    from .tensor import Tensor

_SCATTER_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _parse_side(side: str) -> list[list[str] | str]:
    """One side of a rearrange formula as a list of axes: a name, "...", or a list of names for a parenthesized group
    ("1" and "()" are empty groups)."""
    tokens = side.replace("…", "...").replace("(", " ( ").replace(")", " ) ").split()
    out: list[list[str] | str] = []
    group: list[str] | None = None
    for tok in tokens:
        if tok == "(":
            if group is not None:
                raise ShapeError(f"nested parentheses in rearrange side {side!r}")
            group = []
        elif tok == ")":
            if group is None:
                raise ShapeError(f"unbalanced parentheses in rearrange side {side!r}")
            out.append(group)
            group = None
        elif tok == "1":
            if group is None:
                out.append([])
        elif tok != "..." and not (tok.isidentifier() and not tok.startswith("_") and not tok.endswith("_")):
            raise ShapeError(f"invalid axis name {tok!r} in rearrange side {side!r}")
        else:
            (out if group is None else group).append(tok)
    if group is not None:
        raise ShapeError(f"unbalanced parentheses in rearrange side {side!r}")
    return out


def _names(side: list[list[str] | str]) -> list[str]:
    return [n for ax in side for n in (ax if isinstance(ax, list) else [ax])]


def _expand_ellipsis(side: list[list[str] | str], ell: list[str]) -> list[list[str] | str]:
    """`side` with "..." (alone or inside a group) replaced by the names in `ell`."""
    out: list[list[str] | str] = []
    for ax in side:
        if ax == "...":
            out.extend(ell)
        elif isinstance(ax, list):
            out.append([n for m in ax for n in (ell if m == "..." else [m])])
        else:
            out.append(ax)
    return out


class IndexingMixin(TensorFields):
    """roll, diagonals, meshgrid, unfold, pad_to / shrink_to, scatter, masked_select and rearrange of Tensor."""

    __slots__ = ()

    # ---- rolls and diagonals ----
    @templated
    def roll(self: Tensor, shifts: int | tuple[int, ...], dims: int | tuple[int, ...] | None = None) -> Tensor:
        """Shift elements circularly by `shifts` along `dims` (of the flattened tensor when dims is None)."""
        if dims is None:
            return self.flatten().roll(shifts, 0).reshape(self.shape)
        dims_t = (dims,) if isinstance(dims, int) else tuple(dims)
        shifts_t = (shifts,) if isinstance(shifts, int) else tuple(shifts)
        if len(dims_t) != len(shifts_t):
            raise TensorRuntimeError(f"roll needs one shift per dim, got shifts={shifts_t} and dims={dims_t}")
        x: Tensor = self
        for d, s in zip((self._resolve_dim(d) for d in dims_t), shifts_t):
            n = x.shape[d]
            if n == 0 or s % n == 0:
                continue
            cut = n - s % n
            keep = [None] * x.ndim
            head, tail = list(keep), list(keep)
            head[d], tail[d] = (cut, n), (0, cut)
            x = x.shrink(head).cat(x.shrink(tail), dim=d)
        return x

    def diag(self: Tensor) -> Tensor:
        """The (n, n) matrix with this 1-D tensor on its diagonal and zeros elsewhere."""
        if self.ndim != 1:
            raise ShapeError(f"diag expects a 1-D tensor, got shape {self.shape}")
        n = self.shape[0]
        arange = type(self).arange
        on_diag = arange(n, device=self.device).reshape(n, 1).eq(arange(n, device=self.device).reshape(1, n))
        return on_diag.where(self.reshape(n, 1), self._const(0, self.dtype, ()))

    def diagonal(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        """The `offset`-th diagonal of axes dim1 and dim2 (above the main one when positive), as a new last axis."""
        d1, d2 = self._resolve_dim(dim1), self._resolve_dim(dim2)
        if d1 == d2:
            raise TensorRuntimeError(f"diagonal needs two different dims, got dim1={dim1} and dim2={dim2}")
        x = self.permute(*[a for a in range(self.ndim) if a not in (d1, d2)], d1, d2)
        rows, cols = x.shape[-2:]
        r0, c0 = max(0, -offset), max(0, offset)
        n = max(0, min(rows - r0, cols - c0))
        lead = [None] * (x.ndim - 2)
        x = x.shrink((*lead, (min(r0, rows), min(r0, rows) + n), (min(c0, cols), min(c0, cols) + n)))
        if n == 0:
            return x.reshape(*x.shape[:-2], 0)
        return x._diagonal(x.ndim - 2, x.ndim - 1)

    def meshgrid(self: Tensor, *args: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
        """Coordinate grids from 1-D (or 0-d) tensors: `x.meshgrid(y)` or `Tensor.meshgrid(x, y)`; indexing "xy"
        swaps the first two grid axes (Cartesian order)."""
        if indexing not in ("ij", "xy"):
            raise TensorRuntimeError(f"indexing must be 'ij' or 'xy', got {indexing!r}")
        tensors = (self, *args)
        if len(tensors) == 1:
            return tensors
        if any(t.ndim > 1 for t in tensors):
            raise ShapeError(f"meshgrid takes 0-d or 1-D tensors, got shapes {[t.shape for t in tensors]}")
        order = list(range(len(tensors)))
        if indexing == "xy":
            order[0], order[1] = 1, 0
        shaped = [t.reshape((1,) * a + (-1,) + (1,) * (len(tensors) - a - 1)) for a, t in zip(order, tensors)]
        out = broadcast_shape(*(t.shape for t in shaped))
        return tuple(t.expand(out) for t in shaped)

    def unfold(self: Tensor, dim: int, size: int, step: int) -> Tensor:
        """Windows of `size` elements every `step` along `dim`: that axis becomes the window count and a new last axis
        of `size` holds each window."""
        d = self._resolve_dim(dim)
        if size < 0 or step <= 0:
            raise TensorRuntimeError(f"unfold needs size >= 0 and step > 0, got size={size}, step={step}")
        if size > self.shape[d]:
            raise TensorRuntimeError(f"unfold size={size} is larger than dim {d} of shape {self.shape}")
        perm = [a for a in range(self.ndim) if a != d] + [d]
        windows = self.permute(perm)._pool((size,), step)
        # windows is (other axes..., n_windows, size): put n_windows back at d
        back = list(range(self.ndim - 1))
        back.insert(d, self.ndim - 1)
        return windows.permute(*back, self.ndim)

    # ---- to a shape ----
    def pad_to(self: Tensor, shape: Any, *args: Any, value: Any = 0) -> Tensor:
        """Pad at the end of each axis up to `shape` (None keeps an axis) with `value`."""
        target = argfix(shape, *args)
        if len(target) != self.ndim or any(t is not None and t < s for s, t in zip(self.shape, target)):
            raise ShapeError(f"pad_to {target} needs one size >= the current one (or None) per axis of {self.shape}")
        pads = tuple((0, 0 if t is None else t - s) for s, t in zip(self.shape, target))
        return self if not any(e for _, e in pads) else self.pad(pads, value=value)

    def shrink_to(self: Tensor, shape: Any, *args: Any) -> Tensor:
        """The first `shape` elements of each axis (None keeps an axis)."""
        target = argfix(shape, *args)
        if len(target) != self.ndim:
            raise ShapeError(f"shrink_to {target} needs one size (or None) per axis of {self.shape}")
        return self.shrink(tuple(None if t is None else (0, t) for t in target))

    # ---- scatter ----
    def _scatter_parts(self: Tensor, dim: int, index: Tensor, src: Tensor) -> tuple[Tensor, Tensor, int]:
        """(src values, one-hot hits), both shaped self.shape + (index.shape[dim],), and the resolved dim: hit[..., k]
        says that source position k along dim writes this element."""
        d = self._resolve_dim(dim)
        if index.device != self.device or src.device != self.device:
            raise TensorRuntimeError(f"scatter operands must share a device: self {self.device}, index {index.device}, src {src.device}")
        if not index.ndim == self.ndim == src.ndim:
            raise ShapeError(f"scatter needs equal ranks, got self {self.shape}, index {index.shape}, src {src.shape}")
        if any(i > s or (a != d and i > t) for a, (t, i, s) in enumerate(zip(self.shape, index.shape, src.shape))):
            raise ShapeError(f"scatter index {index.shape} must fit in src {src.shape} and, except on dim {d}, self {self.shape}")
        if not dtypes.is_int(index.dtype):
            raise TensorRuntimeError(f"scatter index must be an int tensor, got {index.dtype}")
        if src.dtype != self.dtype:
            raise TensorRuntimeError(f"scatter src dtype {src.dtype} differs from self dtype {self.dtype}")
        n = self.shape[d]
        hit = index.unsqueeze(-1).eq(type(self).arange(n, device=self.device)).transpose(d, -1)
        src = src.shrink_to(index.shape).unsqueeze(-1).transpose(d, -1)._broadcast_to(hit.shape)
        # dims other than d cover only the index's extent: pad them (with misses) up to self's
        target = tuple(self.shape) + (None,)
        return src.pad_to(target), hit.pad_to(target, value=False), d

    def scatter(self: Tensor, dim: int, index: Tensor, src: Any, reduce: str | None = None) -> Tensor:
        """self with `src` written along `dim` at `index` (out[index[i][j]][j] = src[i][j] for dim 0); of repeated
        positions the last write wins. `reduce` "add" / "multiply" (with a scalar src) combines instead."""
        if reduce not in (None, "add", "multiply"):
            raise TensorTypeError(f"scatter reduce={reduce!r} must be None, 'add' or 'multiply'")
        if isinstance(src, (bool, int, float)):
            src = type(self).full(index.shape, src, dtype=self.dtype, device=self.device)
        elif reduce is not None:
            raise TensorTypeError("scatter with reduce takes a scalar src: use scatter_reduce for a tensor src")
        if reduce is not None:
            return self.scatter_reduce(dim, index, src, "sum" if reduce == "add" else "prod")
        values, hit, _ = self._scatter_parts(dim, index, src)
        m = hit.shape[-1]
        order = type(self).arange(1, m + 1, device=self.device)
        last = hit.where(order, 0).max(-1, keepdim=True)  # 1 + the last source position writing here, 0 for none
        chosen = hit.bitwise_and(order.eq(last))
        picked = chosen.where(values, values._const(0, values.dtype, ()))
        new = picked.any(-1) if self.dtype is dtypes.bool else picked.sum(-1).cast(self.dtype)
        return (last.reshape(self.shape) > 0).where(new, self)

    def scatter_reduce(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True) -> Tensor:
        """Combine `src` into self along `dim` at `index` with "sum", "prod", "mean", "amax" or "amin"; positions no
        index hits keep self's value, and `include_self=False` leaves self out of the hit positions."""
        if reduce not in _SCATTER_REDUCES:
            raise TensorRuntimeError(f"scatter_reduce reduce={reduce!r} must be one of {_SCATTER_REDUCES}")
        values, hit, _ = self._scatter_parts(dim, index, src)
        touched = hit.any(-1)

        def own(identity: Any) -> Tensor:
            """self's part of each result: self, or (without include_self) the identity where any index hits."""
            return self if include_self else touched.where(identity, self)

        if reduce == "sum":
            return hit.where(values, 0).sum(-1).cast(self.dtype).add(own(0))
        if reduce == "prod":
            return hit.where(values, 1).prod(-1).mul(own(1))
        if reduce == "amax":
            return hit.where(values, self._lowest()).max(-1).maximum(own(self._lowest()))
        if reduce == "amin":
            highest = math.inf if dtypes.is_float(self.dtype) else self.dtype.max
            return hit.where(values, highest).min(-1).minimum(own(highest))
        count = hit.where(1, 0).sum(-1).add(1 if include_self else touched.where(0, 1))
        return hit.where(values, 0).sum(-1).add(own(0)).div(count)

    def masked_select(self: Tensor, mask: Tensor, size: int | None = None, fill_value: Any = 0) -> Tensor:
        """The elements where the bool `mask` (broadcast to self) is True, flattened. Without `size` the count is read
        back to the host (its shape depends on the data); with `size` the result has that length, cut or filled with
        `fill_value`, and nothing is read back."""
        if mask.dtype is not dtypes.bool:
            raise TensorRuntimeError(f"masked_select needs a bool mask, got {mask.dtype}")
        x, flat = self.flatten(), mask._broadcast_to(self.shape).flatten()
        n = x.shape[0]
        total = flat.sum()
        k = (int(total.item()) if n else 0) if size is None else size
        if k == 0 or n == 0:
            return type(self).full((k,), fill_value, dtype=self.dtype, device=self.device)
        # the j-th selected element sits where the running count of Trues first reaches j + 1
        ranks = type(self).arange(k, device=self.device).reshape(k, 1)
        pos = (flat.cumsum().reshape(1, n) <= ranks).sum(1).minimum(n - 1)
        picked = x[pos]
        if size is None:
            return picked
        return (type(self).arange(k, device=self.device) < total).where(picked, fill_value).cast(self.dtype)

    # ---- einops ----
    def rearrange(self: Tensor, formula: str, **sizes: int) -> Tensor:
        """einops-style rearrange: "b (h w) c -> b h w c" splits, permutes and merges axes; `sizes` gives the sizes of
        split axes (one per group may be inferred); "..." stands for the axes not named; "1" / "()" is a unit axis."""
        if formula.count("->") != 1:
            raise ShapeError(f'rearrange formula needs exactly one "->", got {formula!r}')
        lhs, rhs = (_parse_side(s) for s in formula.split("->"))
        if any(isinstance(ax, list) and "..." in ax for ax in lhs) or lhs.count("...") > 1:
            raise ShapeError(f"rearrange allows at most one '...' on the left, outside parentheses: {formula!r}")
        ln, rn = _names(lhs), _names(rhs)
        if sorted(ln) != sorted(rn) or len(ln) != len(set(ln)):
            raise ShapeError(f"rearrange needs the same distinct axis names on both sides: {formula!r}")
        if unknown := set(sizes) - set(ln):
            raise ShapeError(f"rearrange sizes {sorted(unknown)} are not axes of {formula!r}")
        if "..." in lhs:
            if self.ndim < len(lhs) - 1:
                raise ShapeError(f"rearrange left side of {formula!r} names more axes than the tensor {self.shape} has")
            ell = [f"...{j}" for j in range(self.ndim - len(lhs) + 1)]
            lhs, rhs = _expand_ellipsis(lhs, ell), _expand_ellipsis(rhs, ell)
        if len(lhs) != self.ndim:
            raise ShapeError(f"rearrange left side of {formula!r} has {len(lhs)} axes, the tensor {self.shape} has {self.ndim}")
        dims: dict[str, int] = {}
        for ax, n in zip(lhs, self.shape):
            group = ax if isinstance(ax, list) else [ax]
            known = math.prod(sizes[g] for g in group if g in sizes)
            missing = [g for g in group if g not in sizes]
            if len(missing) > 1 or (missing and (known == 0 or n % known)) or (not missing and known != n):
                raise ShapeError(f"rearrange cannot split an axis of size {n} into {group} with sizes {sizes}")
            dims.update({g: sizes[g] for g in group if g in sizes})
            if missing:
                dims[missing[0]] = n // known
        names = _names(lhs)
        x = self.reshape(tuple(dims[g] for g in names)).permute([names.index(g) for g in _names(rhs)])
        return x.reshape(tuple(math.prod(dims[g] for g in ax) if isinstance(ax, list) else dims[ax] for ax in rhs))
