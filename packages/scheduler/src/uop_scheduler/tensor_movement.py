"""Movement ops: reshape, permute, expand, pad, shrink, flip and what is built from them (getitem, cat, split, ...).

They only change how a value is viewed; the scheduler turns each into index math inside the kernels that read it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from uopir import Ops, UOp, dtypes, least_upper_dtype, prod, shape_str, size_factors

from .elementwise import broadcast_shape
from .errors import ArgumentError, ShapeError, TensorIndexError, TensorRuntimeError
from .fields import TensorFields
from .symbolic_sizes import concrete
from .templates import templated

if TYPE_CHECKING:
    from .tensor import Tensor


def argfix(*x: Any) -> tuple[Any, ...]:
    """`f((1, 2))` and `f(1, 2)` both as (1, 2)."""
    if x and isinstance(x[0], (tuple, list)):
        if len(x) != 1:
            raise ShapeError(f"bad arg {x}: pass a tuple or separate ints, not both")
        return tuple(x[0])
    return x


def index_tuple(indices: Any, tensor_cls: type) -> Any:
    """A list holding slices, None, Ellipsis, lists, tuples or tensors read as a tuple of indices (tinygrad's and torch's
    reading, and old numpy's: `x[[slice(None), [1, 3]]]` is `x[:, [1, 3]]`, `x[[t0, t1]]` is `x[t0, t1]`); any other
    index as given."""
    if isinstance(indices, list) and any(i is None or i is Ellipsis or isinstance(i, (slice, list, tuple, tensor_cls)) for i in indices):
        return tuple(indices)
    return indices


_PLAIN_BOUND = (int, type(None))  # the types of a slice bound `_basic_view` takes


class TensorMovementMixin(TensorFields):
    """Movement ops of Tensor."""

    __slots__ = ()

    # ---- the basic six ----
    def reshape(self: Tensor, shape: Any, *args: Any) -> Tensor:
        """The same elements in row-major order viewed as `shape` (one dim may be -1; None keeps a dim)."""
        new = tuple(self.shape[i] if s is None else s if isinstance(s, UOp) else int(s) for i, s in enumerate(argfix(shape, *args)))
        if any(isinstance(d, UOp) for d in (*new, *self.shape)):
            if -1 in new:
                raise ShapeError(f"reshape of symbolic shape {self.shape} to {new} cannot infer a -1 dim: give every dim")
            (c_new, f_new), (c_old, f_old) = size_factors(prod(new)), size_factors(prod(self.shape))
            # sizes that differ for (almost) every value: one concrete and one symbolic, or the same variables scaled differently
            if f_new != f_old and not (f_new and f_old) or f_new == f_old and c_new != c_old:
                raise ShapeError(f"size mismatch, can't reshape {shape_str(self.shape)} -> {shape_str(new)}")
            return self._view(Ops.RESHAPE, new)
        if new.count(-1) > 1:
            raise TensorRuntimeError(f"only one dimension can be inferred using -1, getting {new}")
        numel = math.prod(self.shape)
        if -1 in new:
            rest = -math.prod(new)
            if rest == 0 or numel % rest:
                raise ShapeError(f"size mismatch, can't reshape ({self.shape}) -> ({new})")
            new = tuple(numel // rest if s == -1 else s for s in new)
        if any(s < 0 for s in new):
            raise ShapeError(f"shape can't contain negative numbers {new}")
        if math.prod(new) != numel:
            raise ShapeError(f"size mismatch, can't reshape ({self.shape}) -> ({new})")
        return self._view(Ops.RESHAPE, new)

    def view(self: Tensor, shape: Any, *args: Any) -> Tensor:
        """Same as reshape."""
        return self.reshape(shape, *args)

    def permute(self: Tensor, order: Any, *args: Any) -> Tensor:
        """The axes reordered: output axis i is input axis order[i]."""
        resolved = tuple(self._resolve_dim(d) for d in argfix(order, *args))
        if sorted(resolved) != list(range(self.ndim)):
            raise TensorRuntimeError(f"order is not a valid permutation, getting {resolved} for shape {self.shape}")
        return self._view(Ops.PERMUTE, resolved)

    def expand(self: Tensor, shape: Any, *args: Any) -> Tensor:
        """Size-1 dims broadcast to `shape` (-1 keeps a dim); new leading dims are added."""
        new = argfix(shape, *args)
        if len(new) < self.ndim:
            raise ShapeError(f"cannot broadcast tensor to fewer dimensions. shape={self.shape} to new_shape={new}")
        lead = len(new) - self.ndim
        resolved = tuple(self.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(new))
        return self._broadcast_to(resolved)

    def shrink(self: Tensor, arg: Sequence[tuple[int, int] | None]) -> Tensor:
        """Keep [begin, end) of each axis (None keeps the whole axis)."""
        if len(arg) != self.ndim:
            raise ShapeError(f"shrink {tuple(arg)} needs one (begin, end) or None per axis of {self.shape}")
        pairs = tuple((0, s) if p is None else tuple(x if isinstance(x, UOp) else int(x) for x in p) for p, s in zip(arg, self.shape))
        for (b, e), s in zip(pairs, self.shape):
            if all(isinstance(x, int) for x in (b, e, s)) and not 0 <= b <= e <= s:
                raise ShapeError(f"shrink {pairs} is out of bounds for shape {self.shape}")
        return self._view(Ops.SHRINK, pairs)

    def flip(self: Tensor, axis: Any, *args: Any) -> Tensor:
        """Reverse the order along `axis` (each axis at most once)."""
        given = argfix(axis, *args)
        axes = {self._resolve_dim(a) for a in given}
        if len(axes) != len(given):
            raise TensorRuntimeError(f"flip lists an axis twice: {given} of a {self.ndim}-d tensor")
        return self._view(Ops.FLIP, tuple(i in axes for i in range(self.ndim)))

    def pad(self: Tensor, padding: Sequence[Any], mode: str = "constant", value: float = 0.0) -> Tensor:
        """Pad with `value` (mode "constant") or by "reflect", "replicate" or "circular".

        `padding` is either flat torch-style (last axis first: (left, right, top, bottom, ...)) or one (before, after)
        pair or None per axis. Negative amounts cut elements off.
        """
        if mode not in ("constant", "reflect", "replicate", "circular"):
            raise NotImplementedError(f"mode={mode!r} is not supported: use constant, reflect, replicate or circular")
        if all(isinstance(p, (int, UOp)) for p in padding):  # flat, torch's form (an amount may be a bound Variable)
            if len(padding) % 2 or len(padding) // 2 > self.ndim:
                raise ShapeError(f"padding length is improper, padding={tuple(padding)} ndim={self.ndim}")
            flat = tuple(padding)
            pairs = ((0, 0),) * (self.ndim - len(flat) // 2) + tuple(zip(flat[-2::-2], flat[::-2]))
        else:
            if len(padding) != self.ndim:
                raise ShapeError(f"padding {tuple(padding)} needs one pair per axis of {self.shape}")
            pairs = tuple((0, 0) if p is None else (_pad_amount(p[0]), _pad_amount(p[1])) for p in padding)
        x: Tensor = self
        if any(isinstance(a, UOp) for pair in pairs for a in pair):  # a symbolic amount (never negative, see _pad_amount)
            if mode != "constant":
                raise NotImplementedError(f"a symbolic pad takes mode='constant', got {mode!r}")
            padded = x._wrap(x.uop.pad(pairs))
            return padded if value == 0 else x._wrap(x._const(True, dtypes.bool).uop.pad(pairs)).where(padded, value)
        # negative amounts cut elements off: constant and circular cut first (circular wraps around what is left, as
        # torch's does), reflect and replicate last (below)
        crop = tuple((-min(b, 0), min(e, 0)) for b, e in pairs)
        if not any(b or e for b, e in crop):
            crop = ()
        if crop and mode in ("constant", "circular"):
            x, crop = x._cut(crop), ()
        pairs = tuple((max(b, 0), max(e, 0)) for b, e in pairs)
        if mode == "constant":
            padded = x._wrap(x.uop.pad(pairs))
            if value == 0 or not any(b or e for b, e in pairs):
                return padded
            inside = x._wrap(x._const(True, dtypes.bool).uop.pad(pairs))
            return inside.where(padded, value)
        return x._pad_by_mode(pairs, crop, mode)

    @templated
    def _pad_by_mode(self: Tensor, pairs: tuple[tuple[int, int], ...], crop: tuple[tuple[int, int], ...], mode: str) -> Tensor:
        """`pad` by "reflect", "replicate" or "circular" of (before, after) `pairs`, then the `crop` (a template: a
        reflection is a cat of two flipped slices per axis). Reflect and replicate pad the whole input first, then cut:
        element j of the result is the input's element reflected or clamped at j - before, as torch defines them (a
        reflection or a repeat reaches into what a negative amount removes, and a reflection's limit is the input's
        size)."""
        x: Tensor = self
        for axis, (b, e) in enumerate(pairs):
            if b or e:
                x = x._pad_axis(axis, b, e, mode)
        return x._cut(crop) if crop else x

    def _cut(self: Tensor, crop: tuple[tuple[int, int], ...]) -> Tensor:
        """Cut (before, after) elements off each axis (after as a negative amount)."""
        return self.shrink(tuple((b, s + e) for (b, e), s in zip(crop, self.shape)))

    def _pad_axis(self: Tensor, axis: int, b: int, e: int, mode: str) -> Tensor:
        s = self.shape[axis]

        def part(lo: int, hi: int) -> Tensor:
            return self.shrink(tuple((lo, hi) if i == axis else None for i in range(self.ndim)))

        if mode == "reflect":
            if b >= s or e >= s:
                raise ShapeError(f"Padding ({b}, {e}) should be less than the input size={s} for dim={axis}.")
            before, after = part(1, b + 1).flip(axis), part(s - e - 1, s - 1).flip(axis)
        elif mode == "replicate":
            before = part(0, 1).expand(*(b if i == axis else d for i, d in enumerate(self.shape)))
            after = part(s - 1, s).expand(*(e if i == axis else d for i, d in enumerate(self.shape)))
        else:
            if b > s or e > s:
                raise ShapeError("Padding value causes wrapping around more than once.")
            before, after = part(s - b, s), part(0, e)
        return before.cat(self, after, dim=axis)

    # ---- derived ----
    def transpose(self: Tensor, dim0: int = 1, dim1: int = 0) -> Tensor:
        """Swap two axes."""
        order = list(range(self.ndim))
        a, b = self._resolve_dim(dim0), self._resolve_dim(dim1)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self: Tensor) -> Tensor:  # noqa: N802 -- tinygrad's name
        """transpose() (the first two axes swapped)."""
        return self.transpose()

    def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Merge axes start_dim..end_dim into one."""
        if self.ndim == 0:
            return self.reshape(1)
        s, e = self._resolve_dim(start_dim), self._resolve_dim(end_dim)
        return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

    def unflatten(self: Tensor, dim: int, sizes: tuple[int, ...]) -> Tensor:
        """Split axis `dim` into `sizes`."""
        d = self._resolve_dim(dim)
        return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

    def squeeze(self: Tensor, dim: int | None = None) -> Tensor:
        """Drop size-1 axes (only `dim` when given)."""
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        d = self._resolve_dim(dim)
        return self if not self.ndim or self.shape[d] != 1 else self.reshape(self.shape[:d] + self.shape[d + 1:])

    def unsqueeze(self: Tensor, dim: int) -> Tensor:
        """Insert a size-1 axis at `dim`."""
        d = self._resolve_dim(dim, extra=True)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def repeat(self: Tensor, repeats: Any, *args: Any) -> Tensor:
        """Tile the tensor `repeats[i]` times along each axis (new leading axes when repeats is longer)."""
        reps = argfix(repeats, *args)
        if len(reps) < self.ndim:
            raise ShapeError(f"repeat {reps} needs at least one entry per axis of {self.shape}")
        base = (1,) * (len(reps) - self.ndim) + self.shape
        x = self.reshape(tuple(v for d in base for v in (1, d)))
        x = x.expand(tuple(v for r, d in zip(reps, base) for v in (r, d)))
        return x.reshape(tuple(r * d for r, d in zip(reps, base)))

    def repeat_interleave(self: Tensor, repeats: int, dim: int | None = None) -> Tensor:
        """Each element `repeats` times in a row along `dim` (the flattened tensor when None): [1, 2] -> [1, 1, 2, 2]."""
        x, d = (self.flatten(), 0) if dim is None else (self, self._resolve_dim(dim))
        x = x.unsqueeze(d + 1).expand(*x.shape[:d + 1], repeats, *x.shape[d + 1:])
        return x.reshape(*x.shape[:d], x.shape[d] * repeats, *x.shape[d + 2:])

    def cat(self: Tensor, *args: Tensor, dim: int = 0) -> Tensor:
        """Concatenate along `dim` (dtypes promoted)."""
        tensors: list[Tensor] = [self, *args]
        d = self._resolve_dim(dim)
        for t in tensors:
            if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
                raise ShapeError(f"cat needs equal shapes except along dim {d}, got {[x.shape for x in tensors]}")
        out_dt = least_upper_dtype(*[t.dtype for t in tensors])
        total = sum(t.shape[d] for t in tensors)
        ret: UOp | None = None
        offset = 0
        for t in tensors:
            pairs = tuple((offset, total - offset - t.shape[d]) if i == d else (0, 0) for i in range(self.ndim))
            padded = t.cast(out_dt).uop.pad(pairs)
            offset += t.shape[d]
            if ret is None:
                ret = padded
            else:
                ret = UOp(Ops.OR if out_dt is dtypes.bool else Ops.ADD, out_dt, (ret, padded))
        return self._wrap(ret)

    def stack(self: Tensor, *args: Tensor, dim: int = 0) -> Tensor:
        """Stack along a new axis `dim`: `t.stack(u, v)`, `Tensor.stack(t, u, v)` or `Tensor.stack((t, u, v))`."""
        if isinstance(self, (tuple, list)):  # Tensor.stack(sequence): no more tensors may follow it
            if args:
                raise ArgumentError("stack takes tensors, or one sequence of tensors, not both")
            if not self:
                raise ArgumentError("stack needs at least one tensor")
            self, args = self[0], tuple(self[1:])
        tensors: list[Tensor] = [self, *args]
        if any(t.shape != self.shape for t in tensors):
            raise ShapeError(f"all shapes must match for stack, got {[t.shape for t in tensors]}")
        d = self._resolve_dim(dim, extra=True)
        first, *rest = [t.unsqueeze(d) for t in tensors]
        return first.cat(*rest, dim=d)

    def split(self: Tensor, sizes: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        """Pieces of `sizes` elements (or equal pieces of `sizes`) along `dim`."""
        d = self._resolve_dim(dim)
        n = self.shape[d]
        if isinstance(sizes, int):
            if sizes <= 0:
                raise ShapeError(f"split size must be positive, got {sizes}")
            sizes = [min(sizes, n - i) for i in range(0, max(1, n), max(1, sizes))]
        if sum(sizes) != n:
            raise ShapeError(f"split sizes {list(sizes)} must add up to {n}, the size of dim {d} of {self.shape}")
        out, start = [], 0
        for s in sizes:
            out.append(self.shrink(tuple((start, start + s) if i == d else None for i in range(self.ndim))))
            start += s
        return tuple(out)

    def chunk(self: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        """`chunks` near-equal pieces along `dim`."""
        if chunks <= 0:
            raise ShapeError(f"chunks must be positive, got {chunks}")
        n = self.shape[self._resolve_dim(dim)]
        if not isinstance(n, int):
            raise ShapeError(f"cannot chunk along the symbolic dim {dim} of {self.shape}: shrink it to a size first")
        return self.split(math.ceil(n / chunks) if n else 1, dim)

    # ---- indexing ----
    def _slice_axis(self: Tensor, axis: int, start: int, count: int, step: int) -> Tensor:
        """Elements start, start+step, ... (count of them) along `axis`."""
        x: Tensor = self
        n = x.shape[axis]
        if start == 0 and count == n and step == 1:
            # the whole axis: no step (its caller, __getitem__, always ends with a reshape, so `a[:]` is still a view)
            return x
        if count == 0:
            return x.shrink(tuple((0, 0) if i == axis else None for i in range(x.ndim)))
        if step < 0:
            x, start, step = x.flip(axis), n - 1 - start, -step
        x = x.shrink(tuple((start, start + (count - 1) * step + 1) if i == axis else None for i in range(x.ndim)))
        if step == 1:
            return x
        # every step-th element: pad to count*step, split the axis into (count, step), keep column 0
        # (a pad inside a slice is part of the view: a write through x[::2] lands in x)
        x = x._view(Ops.PAD, tuple((0, count * step - x.shape[axis]) if i == axis else (0, 0) for i in range(x.ndim)))
        x = x.reshape(x.shape[:axis] + (count, step) + x.shape[axis + 1:])
        x = x.shrink(tuple((0, 1) if i == axis + 1 else None for i in range(x.ndim)))
        return x.reshape(x.shape[:axis] + (count,) + x.shape[axis + 2:])

    def __getitem__(self: Tensor, indices: Any) -> Tensor:
        """numpy-style indexing: ints, bound Variables, slices (any step), None, Ellipsis, and int tensors, lists and
        tuples of ints. `t[...]` is `t` itself; a list holding slices, None, Ellipsis, lists or tensors is read as a tuple of
        indices (tinygrad's and torch's reading)."""
        if indices is Ellipsis:
            return self
        # ints and step-1 slices (`x[i]`, `x[i:j]`, `x[i, 3]`, `x[:, 2:5]`, the commonest indexes): the view steps the
        # general path records for them, without its parsing and as one view tensor (a loop over rows paid both per row)
        basic = indices if type(indices) is tuple else (indices,) if type(indices) in (int, slice) else None
        if basic is not None and (view := self._basic_view(basic)) is not None:
            return view
        return self._index_general(indices)

    def _basic_view(self: Tensor, indices: tuple) -> Tensor | None:
        """`self[indices]` for a tuple of in-range Python ints and slices with int or absent bounds and no step over
        axes of int sizes: the view steps `_index_general` records (a shrink per cut axis, over the shape as cut so
        far, then the reshape to the result's shape), made as one view tensor. None for any other index."""
        shape = self.shape
        if len(indices) > len(shape):
            return None
        now = list(shape)
        steps: list[tuple[Ops, Any]] = []
        out: list[int] = []
        u = self.uop
        for axis, idx in enumerate(indices):
            n = shape[axis]
            if type(n) is not int:
                return None
            if type(idx) is int:
                if idx >= n or idx < -n:
                    return None  # (the general path's error)
                first, count = idx if idx >= 0 else n + idx, 1
            elif type(idx) is slice and idx.step in (None, 1) and type(idx.start) in _PLAIN_BOUND and type(idx.stop) in _PLAIN_BOUND:
                first, stop, _ = idx.indices(n)
                count = max(stop - first, 0)
                out.append(count)
            else:
                return None
            if count == n:  # the whole axis: no step
                continue
            cut = (first, first + count) if count else (0, 0)
            pairs = tuple(cut if i == axis else (0, d) for i, d in enumerate(now))
            now[axis] = count
            steps.append((Ops.SHRINK, pairs))
            u = u.shrink(pairs)
        out.extend(shape[len(indices):])
        steps.append((Ops.RESHAPE, tuple(out)))
        return self._view_steps(u.reshape(tuple(out)), tuple(steps))

    def _index_general(self: Tensor, indices: Any) -> Tensor:
        """`self[indices]` for every index form `__getitem__` takes (ints, slices, None, Ellipsis, tensors, lists...)."""
        tensor_cls = type(self)
        indices = index_tuple(indices, tensor_cls)
        if not isinstance(indices, tuple):
            indices = (indices,)
        hosts: dict[int, np.ndarray] = {}  # index tensors made from host values, checked against the axis size below
        converted = []
        for i in indices:
            if isinstance(i, tuple):  # a tuple inside the index is a sequence of positions, as a list
                i = list(i)
            if isinstance(i, (list, np.ndarray)):
                t = tensor_cls(i, device=self.device)
                hosts[id(t)] = np.asarray(i)
                i = t
            converted.append(i)
        indices = tuple(converted)
        if len(ell := [i for i, x in enumerate(indices) if x is Ellipsis]) > 1:
            raise TensorIndexError("indices can only have a single ellipsis")
        num_real = sum(1 for x in indices if x is not None and x is not Ellipsis)
        if num_real > self.ndim:
            raise TensorIndexError(f"too many indices ({num_real}) for {self.ndim}D")
        fill = (slice(None),) * (self.ndim - num_real)
        indices = indices[:ell[0]] + fill + indices[ell[0] + 1:] if ell else indices + fill
        x: Tensor = self
        out_shape: list[int] = []
        tensor_pos: list[tuple[int, Tensor]] = []
        axis = 0
        for idx in indices:
            if idx is None:
                out_shape.append(1)
                continue
            size = self.shape[axis]
            if isinstance(idx, (bool, np.bool_)):
                raise TensorIndexError(f"bool indexing with {idx!r} is not supported: use a bool mask with where()")
            if isinstance(idx, UOp) and idx.op is Ops.BIND:  # a bound Variable: one position, the axis dropped as by an int
                x = x.shrink(tuple((idx, idx + 1) if i == axis else None for i in range(x.ndim)))
            elif isinstance(idx, (int, np.integer)):
                n = size if isinstance(size, int) else concrete(size)  # a symbolic axis: checked at its bound value
                if idx >= n or idx < -n:
                    raise TensorIndexError(f"index={int(idx)} is out of bounds with size={n} for dim {axis} of {shape_str(self.shape)}")
                # a negative index counts from the end by an addition (a modulo of a symbolic size is a floor modulo of a
                # variable in the kernel, which the C renderer has no code for)
                x = x._slice_axis(axis, int(idx) if idx >= 0 else size + int(idx), 1, 1)
            elif isinstance(idx, slice) and (any(isinstance(b, UOp) for b in (idx.start, idx.stop)) or not isinstance(size, int)):
                # a symbolic bound (a bound Variable) or a symbolic axis: a plain [start, stop) shrink, a negative int
                # bound counting from the end
                if idx.step not in (None, 1):
                    raise TensorIndexError(f"a slice with a symbolic bound or of a symbolic axis takes no step, got {idx}")
                start = 0 if idx.start is None else idx.start
                stop = size if idx.stop is None else idx.stop
                start, stop = (size + b if isinstance(b, int) and b < 0 else b for b in (start, stop))
                x = x.shrink(tuple((start, stop) if i == axis else None for i in range(x.ndim)))
                out_shape.append(x.shape[axis])
            elif isinstance(idx, slice):
                if idx.step == 0:
                    raise ValueError(f"index={idx} cannot have 0 as step")
                rng = range(*idx.indices(size))
                x = x._slice_axis(axis, rng.start, len(rng), rng.step)
                out_shape.append(len(rng))
            elif isinstance(idx, tensor_cls):
                if not dtypes.is_int(idx.dtype):
                    raise TensorIndexError(f"index dtype {idx.dtype} is not supported: index with an int tensor")
                if (host := hosts.get(id(idx))) is not None and host.size and (host.max() >= size or host.min() < -size):
                    bad = int(host.max()) if host.max() >= size else int(host.min())
                    raise TensorIndexError(f"index {bad} is out of bounds with size={size} for dim {axis} of {self.shape}")
                tensor_pos.append((len(out_shape), idx))
                out_shape.append(size)
            else:
                raise TensorIndexError(f"{type(idx).__name__} indexing is not supported")
            axis += 1
        x = x.reshape(tuple(out_shape))
        return x._index_with_tensors(tensor_pos) if tensor_pos else x

    def _index_with_tensors(self: Tensor, tensor_pos: list[tuple[int, Tensor]]) -> Tensor:
        """Advanced indexing: axes picked by int tensors (broadcast together), by one-hot masks and a sum."""
        return self._index_at(tuple(p for p, _ in tensor_pos), *(t for _, t in tensor_pos))

    @templated
    def _index_at(self: Tensor, at: tuple[int, ...], *index: Tensor) -> Tensor:
        """`_index_with_tensors` with the axes `at` picked by the int tensors `index` (a template: an embedding's lookup
        was some 25 tensor ops, ~170 us of graph building for a 30 us kernel)."""
        tensor_pos = list(zip(at, index))
        positions = list(at)
        sizes = [self.shape[p] for p in positions]
        bshape = broadcast_shape(*[t.shape for _, t in tensor_pos])
        others = [i for i in range(self.ndim) if i not in positions]
        nb, k = len(bshape), len(positions)
        x = self.permute(others + positions)
        x = x.reshape(tuple(self.shape[i] for i in others) + (1,) * nb + tuple(sizes))
        mask: Tensor | None = None
        arange = type(self).arange
        for j, ((_, t), s) in enumerate(zip(tensor_pos, sizes)):
            t = t._broadcast_to(bshape)
            if t.dtype.itemsize < 4 and not dtypes.is_unsigned(t.dtype):
                t = t.cast(dtypes.int32)  # (a negative int8 index of a 200-row axis wrapped in int8: -1 + 200 overflowed)
            t = (t < 0).where(t.add(s), t)
            one_hot = t.reshape(bshape + (1,) * k) == arange(s, device=self.device).reshape((1,) * (nb + j) + (s,) + (1,) * (k - j - 1))
            mask = one_hot if mask is None else mask.bitwise_and(one_hot)
        assert mask is not None
        mask = mask.reshape((1,) * len(others) + mask.shape)
        picked = mask.where(x, x._const(0, x.dtype, ()))
        out = (picked.any if x.dtype is dtypes.bool else picked.sum)(tuple(range(-k, 0)))
        out = out.cast(self.dtype)
        first = positions[0]
        if positions != list(range(first, first + k)):
            # separated tensor indices put the broadcast axes first, as numpy does
            return out.permute(list(range(len(others), len(others) + nb)) + list(range(len(others))))
        no = len(others)
        return out.permute(list(range(first)) + list(range(no, no + nb)) + list(range(first, no)))

    def _scatter_index(self: Tensor, indices: Any, value: Tensor) -> Tensor:
        """This tensor with `value` written at `self[indices]` (any index form; a repeated position takes the last
        value, as numpy)."""
        tensor_cls = type(self)
        if (fast := self._scatter_on_indexed_axes(indices, value)) is not None:
            return fast
        n = self.numel()
        picked = tensor_cls.arange(n, device=self.device).reshape(self.shape)[indices]
        m = picked.numel()
        if m == 0:  # no element picked (an empty axis): nothing is written, as in numpy
            return self
        value = value._broadcast_to(picked.shape).reshape(m, 1)
        return self._last_writes(picked.reshape(m), value, self.reshape(n, 1)).reshape(self.shape)

    def _last_writes(self: Tensor, pos: Tensor, value: Tensor, old: Tensor) -> Tensor:
        """`old` (positions, r) with row `pos[k]` replaced by `value[k]` (shape (m, r)) for every k; where several k
        write one row, the last one wins (numpy's assignment). A one-hot match: positions x m x r work."""
        tensor_cls = type(self)
        s, m = old.shape[0], pos.shape[0]
        order = tensor_cls.arange(1, m + 1, device=self.device).reshape(1, m, 1)
        hit = tensor_cls.arange(s, device=self.device).reshape(s, 1, 1) == pos.reshape(1, m, 1)
        last = hit.where(order, 0).max(1, keepdim=True)  # 1 + the last k writing each position, 0 when none does
        chosen = (order == last).where(value.reshape(1, m, -1), value._const(0, value.dtype, ()))
        new = chosen.any(1) if value.dtype is dtypes.bool else chosen.sum(1).cast(value.dtype)
        return (last.reshape(s, 1) > 0).where(new, old)

    def _scatter_on_indexed_axes(self: Tensor, indices: Any, value: Tensor) -> Tensor | None:
        """`_scatter_index` for an index of whole-axis slices (`:`, `...`) and integer tensors: the one-hot match runs
        over the positions of the indexed axes only (cost: elements x index combinations), where the general form
        matches every element against every picked element. None when the index has another form."""
        tensor_cls = type(self)
        items = list(indices) if isinstance(indices, tuple) else [indices]
        ellipses = [i for i, it in enumerate(items) if it is Ellipsis]  # by identity: a Tensor's == is elementwise
        if len(ellipses) > 1 or any(it is None or isinstance(it, (bool, int, np.integer)) for it in items):
            return None
        if ellipses:
            at = ellipses[0]
            items[at:at + 1] = [slice(None)] * (self.ndim - len(items) + 1)
        items += [slice(None)] * (self.ndim - len(items))
        if len(items) != self.ndim:
            return None
        adv: list[tuple[int, Tensor]] = []
        for axis, it in enumerate(items):
            if isinstance(it, slice) and it == slice(None):
                continue
            if isinstance(it, (list, tuple, np.ndarray)):  # positions, as __getitem__ reads them
                it = tensor_cls(list(it) if isinstance(it, tuple) else it, device=self.device)
            if not isinstance(it, tensor_cls) or not dtypes.is_int(it.dtype) or it.device != self.device:
                return None
            adv.append((axis, it))
        if not adv or any(not isinstance(self.shape[a], int) for a, _ in adv):
            return None
        picked_shape = tensor_cls.arange(self.numel(), device=self.device).reshape(self.shape)[indices].shape
        b_shape = broadcast_shape(*(t.shape for _, t in adv))
        m = math.prod(b_shape)
        if m == 0:
            return self
        axes = [a for a, _ in adv]
        rest = [a for a in range(self.ndim) if a not in axes]
        sizes = [self.shape[a] for a in axes]
        rest_shape = [self.shape[a] for a in rest]
        r = math.prod(rest_shape)
        # each index combination's flat position among the indexed axes (negative indices count from the end)
        pos = None
        for (axis, t), stride in zip(adv, [math.prod(sizes[i + 1:]) for i in range(len(sizes))]):
            wrapped = (t < 0).where(t + self.shape[axis], t).cast(dtypes.int32)._broadcast_to(b_shape).reshape(m) * stride
            pos = wrapped if pos is None else pos + wrapped
        # the value laid out as (index combination, the other axes): numpy puts the broadcast index dims where the
        # indexed axes were when they are adjacent, else first
        value = value._broadcast_to(picked_shape)
        nb = len(b_shape)
        first = axes[0] if axes == list(range(axes[0], axes[0] + len(axes))) else 0
        order_v = list(range(first, first + nb)) + [d for d in range(value.ndim) if not first <= d < first + nb]
        value = value.permute(tuple(order_v)).reshape(m, r)
        s = math.prod(sizes)
        out = self._last_writes(pos, value, self.permute(tuple(axes + rest)).reshape(s, r)).reshape(*sizes, *rest_shape)
        inverse = [0] * self.ndim
        for i, a in enumerate(axes + rest):
            inverse[a] = i
        return out.permute(tuple(inverse))

    def nonzero(self: Tensor, size: int | None = None, fill_value: Any = 0) -> Tensor:
        """The indices of the non-zero elements, one row per element in order: shape (count, ndim) as numpy's
        `argwhere` (reads the count from the device, so not for TinyJit), or with `size=N` exactly N rows, cut or
        padded with `fill_value` (no host read: jittable)."""
        tensor_cls = type(self)
        flat = (self.reshape(-1) != 0) if self.ndim else (self.reshape(1) != 0)
        n = flat.shape[0]
        if size is None:
            size = int(flat.cast(dtypes.int32).sum().item())
        if size == 0 or n == 0:
            return tensor_cls.full((size, self.ndim), fill_value, dtype=dtypes.int32, device=self.device).contiguous()
        rank = flat.cast(dtypes.int32).cumsum(0) - 1  # the output row of each non-zero element
        rows = tensor_cls.arange(size, device=self.device).reshape(size, 1)
        match = (rank.reshape(1, n) == rows) & flat.reshape(1, n)
        found = match.any(1, keepdim=True)
        index = match.where(tensor_cls.arange(n, device=self.device).reshape(1, n), 0).sum(1, keepdim=True)
        strides = [math.prod(self.shape[d + 1:]) for d in range(self.ndim)]
        coords = [(index // st) % dim for st, dim in zip(strides, self.shape)]
        out = coords[0].cat(*coords[1:], dim=1) if coords else index[:, :0]
        return found.where(out, fill_value).cast(dtypes.int32)

    @templated
    def gather(self: Tensor, dim: int, index: Tensor) -> Tensor:
        """out[i][j][k] = self[i][index[i][j][k]][k] (for dim=1): pick along `dim` by an int tensor."""
        d = self._resolve_dim(dim)
        if index.ndim != self.ndim:
            raise TensorRuntimeError(f"self.ndim must equal index.ndim, self.ndim={self.ndim}, index.ndim={index.ndim}")
        if not dtypes.is_int(index.dtype) or index.dtype is dtypes.bool:
            raise TensorRuntimeError(f"gather takes an integer index tensor, got {index.dtype}")
        if any(s < i for a, (s, i) in enumerate(zip(self.shape, index.shape)) if a != d):
            raise ShapeError(f"gather needs self.shape[d] >= index.shape[d] for d != {d}, got {self.shape} and {index.shape}")
        n = self.shape[d]
        x = self.shrink(tuple(None if a == d else (0, i) for a, i in enumerate(index.shape)))
        x = x.unsqueeze(-1).transpose(d, -1)
        one_hot = index.unsqueeze(-1) == type(self).arange(n, device=self.device)
        picked = one_hot.where(x, x._const(0, x.dtype, ()))
        return (picked.any(-1) if x.dtype is dtypes.bool else picked.sum(-1)).cast(self.dtype)


def _pad_amount(p: Any) -> Any:
    """A pad amount: an int, or a symbolic one (a UOp of bound variables) whose bound value is not negative."""
    if isinstance(p, UOp):
        try:
            now = concrete(p)
        except ValueError:
            return p  # unbound: checked when it is bound
        if now < 0:
            raise ShapeError(f"a pad amount is negative: {now} at the variables' bound values")
        return p
    return int(p)
