"""Reductions: sum, prod, max, min, mean, var, std, argmax, any/all, logsumexp, softmax, cumulative ops, sorting.

Each builds a tensor-form REDUCE (`UOp.r`) that keeps the reduced axes as size 1, then drops them unless keepdim.
Sums accumulate in `sum_acc_dtype` (ints widen to int32/uint32, small floats to float32) as tinygrad does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from uopir import Ops, UOp, dtypes, sum_acc_dtype, to_dtype

from .elementwise import const_uop
from .errors import TensorIndexError, TensorRuntimeError
from .fields import TensorFields
from .templates import templated

if TYPE_CHECKING:
    from .tensor import Tensor

Axis = int | tuple[int, ...] | list[int] | None


def _div_symbolic(total: Tensor, n: UOp) -> Tensor:
    """`total` divided by a symbolic count (a reduce over a dim shrunk by a Variable), its value taken at run time."""
    return total.div(total._wrap(n.cast(total.dtype)))


#: elements a running sum, product or max scans as one block along a long axis (see `ReduceMixin._running`)
SCAN_BLOCK = 64
#: the comparisons (rows x n^2) from which sort runs a merge network (`ReduceMixin._sort_network`) instead of counting
#: ranks (one kernel). Warm on 2 AVX-512 cores, the ranks were faster up to 1 row of 8192 (7.7 against 8.9 ms), 16 rows
#: of 2048 (6.1 against 8.3) and 256 of 512 (6.3 against 7.5), the network from 16 rows of 4096 (9.3 against 21.7) and
#: 256 of 1024 (10.5 against 22.4); 2^20 elements took 0.27 s instead of hours
SORT_NETWORK_COMPARISONS = 1 << 27
#: the most elements topk picks one by one (see `_top_cost`); more are sorted
TOPK_PICKS = 64
#: what `_top_cost` estimates with, in seconds, from those runs: a kernel's Python and launch, a comparison of the rank
#: count, and an element of a merge step or a pick
_STEP_S, _RANK_S, _NETWORK_S, _PICK_S = 70e-6, 0.12e-9, 0.3e-9, 0.5e-9


def _top_cost(rows: int, n: int, k: int) -> tuple[float, float]:
    """(picking k of n one by one, sorting n) per the estimates above: topk picks when that is cheaper. The 10 largest
    of 32000 (a sampler's top-k of a vocabulary): 3.4 ms picked, 12 ms sorted; of 1024 rows of 1024: 6.0 against 25 ms;
    of one row of 4096, the rank count: 2.8 against 3.8 ms."""
    picks = k * (4 * _STEP_S + rows * n * _PICK_S)
    if rows * n * n < SORT_NETWORK_COMPARISONS:
        return picks, 10 * _STEP_S + rows * n * n * _RANK_S
    bits = (n - 1).bit_length()
    return picks, bits * (bits + 1) // 2 * (_STEP_S + rows * (1 << bits) * _NETWORK_S)


class ReduceMixin(TensorFields):
    """Reduction ops of Tensor."""

    __slots__ = ()

    def _resolve_dim(self: Tensor, dim: int, *, extra: bool = False) -> int:
        total = self.ndim + int(extra)
        if not -max(1, total) <= dim <= max(1, total) - 1:
            raise TensorIndexError(f"dim={dim} out of range {[-max(1, total), max(1, total) - 1]}")
        return dim + total if dim < 0 else dim

    def _axes(self: Tensor, axis: Axis) -> tuple[int, ...]:
        if axis is None:
            return tuple(range(self.ndim))
        if isinstance(axis, int):
            axis = (axis,)
        resolved = tuple(sorted({self._resolve_dim(a) for a in axis}))
        # a 0-d tensor takes axis 0 or -1 (as torch does) and has nothing to reduce
        return resolved if self.ndim else ()

    def _reduce(self: Tensor, op: Ops, axis: Axis = None, keepdim: bool = False) -> Tensor:
        axes = self._axes(axis)
        if any(self.shape[a] == 0 for a in axes) and op is not Ops.ADD:
            # a reduction of nothing is its identity: the product 1; the max the dtype's lowest value (-inf for
            # floats; min, through max of the inverse, gives +inf), as tinygrad
            identity = {Ops.MUL: True if self.dtype is dtypes.bool else 1, Ops.MAX: False if self.dtype is dtypes.bool else self._lowest()}
            if op not in identity:
                raise TensorRuntimeError(f"cannot reduce an empty axis of shape {self.shape} with {op.name.lower()}: it has no identity")
            kept = tuple(1 if i in axes else d for i, d in enumerate(self.shape))
            ret = type(self).full(kept, identity[op], dtype=self.dtype, device=self.device)
            return ret if keepdim else ret.reshape(tuple(d for i, d in enumerate(self.shape) if i not in axes))
        if not axes:
            return self if keepdim else self.reshape(self.shape)
        u = self.uop.r(op, axes)
        # the reduced axes dropped from the new value directly (a view tensor of an intermediate tensor nothing else holds
        # only cost its bookkeeping)
        return self._wrap(u if keepdim else u.reshape(tuple(d for i, d in enumerate(self.shape) if i not in axes)))

    def _lowest(self: Tensor) -> float | int:
        """The smallest value of the dtype, as an operand (the identity of max)."""
        if dtypes.is_float(self.dtype):
            return -math.inf
        return self.dtype.min

    def _inverse(self: Tensor) -> Tensor:
        """An order-reversing map (min via max): negation for floats, the bitwise complement for ints and bools (~x is
        -1 - x for signed ints: no overflow at the lowest value, which negation maps to itself)."""
        if dtypes.is_float(self.dtype):
            return self.neg()
        return self.bitwise_not()

    def sum(self: Tensor, axis: Axis = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        """Sum over `axis` (all axes when None)."""
        acc = sum_acc_dtype(self.dtype) if dtype is None else to_dtype(dtype)
        ret = self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
        small_float = self.dtype in (dtypes.float16, dtypes.bfloat16, *dtypes.fp8s)
        return ret.cast(self.dtype) if dtype is None and small_float else ret

    def prod(self: Tensor, axis: Axis = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        """Product over `axis`."""
        return self.cast(self.dtype if dtype is None else to_dtype(dtype))._reduce(Ops.MUL, axis, keepdim)

    def max(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
        """Max over `axis` (NaN propagates)."""
        return self._reduce(Ops.MAX, axis, keepdim)

    @templated
    def min(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
        """Min over `axis`."""
        return self._inverse().max(axis, keepdim)._inverse()

    def any(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
        """True where any element along `axis` is nonzero."""
        return self.bool().max(axis, keepdim)

    def all(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
        """True where every element along `axis` is nonzero."""
        return self.logical_not().any(axis, keepdim).logical_not()

    def _count(self: Tensor, axis: Axis) -> int | UOp:
        return math.prod(self.shape[a] for a in self._axes(axis))

    @templated
    def mean(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
        """Mean over `axis` (float result)."""
        out_dt = self.dtype if dtypes.is_float(self.dtype) else dtypes.float32
        total = self.cast(sum_acc_dtype(self.dtype)).sum(axis, keepdim)
        n = self._count(axis)
        return (total.div(n if n else math.nan) if isinstance(n, int) else _div_symbolic(total, n)).cast(out_dt)

    @templated
    def var(self: Tensor, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        """Variance over `axis` with Bessel's `correction`."""
        squares = self.sub(self.mean(axis, keepdim=True)).square()
        # summed and divided in the accumulation dtype: a half count past 65504 is inf, and so would be the denominator
        total, n = squares.sum(axis, keepdim, dtype=sum_acc_dtype(squares.dtype)), self._count(axis) - correction
        return (total.div(max(0, n)) if isinstance(n, int) else _div_symbolic(total, n.maximum(0))).cast(squares.dtype)

    @templated
    def std(self: Tensor, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        """Standard deviation over `axis`."""
        return self.var(axis, keepdim, correction).sqrt()

    def var_mean(self: Tensor, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
        """(var, mean) over `axis`."""
        return self.var(axis, keepdim, correction), self.mean(axis, keepdim)

    def std_mean(self: Tensor, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
        """(std, mean) over `axis`."""
        return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

    @templated
    def normalize(self: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
        """self divided by its Lp norm along `dim` (at least `eps`); p=0 counts the nonzero elements."""
        norm = self.ne(0).sum(dim, keepdim=True) if p == 0 else self.abs().pow(p).sum(dim, keepdim=True).pow(1 / p)
        return self.div(norm.maximum(eps))

    @templated
    def argmax(self: Tensor, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """Index of the first maximum along `axis` (of the flattened tensor when None), as int32."""
        if axis is None:
            return self.flatten().argmax(0)
        axis = self._resolve_dim(axis)
        n = self.shape[axis]
        is_max = self.eq(self.max(axis, keepdim=True))
        # counting down from n: the largest matching weight is the first maximum
        weights = type(self).arange(n, 0, -1, device=self.device).reshape(n, *[1] * (self.ndim - axis - 1))
        idx = is_max.where(weights, 0).max(axis, keepdim)
        return idx.sub(n, True).cast(dtypes.int32)

    def argmin(self: Tensor, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """Index of the first minimum along `axis`."""
        return self._inverse().argmax(axis, keepdim)

    @templated
    def logsumexp(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
        """log(sum(exp(self))) over `axis`, computed stably."""
        # the shift's own gradient is exactly zero (the result does not depend on it): detached, the backward pass
        # neither computes nor rounds it
        m = self.max(axis, keepdim=True).detach()
        m = m.isinf().where(0, m)
        ret = self.sub(m).exp().sum(axis, keepdim=True).log().add(m)
        return ret if keepdim else ret.reshape(tuple(d for i, d in enumerate(self.shape) if i not in self._axes(axis)))

    @templated
    def softmax(self: Tensor, axis: int = -1, dtype: Any = None) -> Tensor:
        """exp(self) / sum(exp(self)) along `axis`, with the max subtracted first."""
        x = self.cast(to_dtype(dtype)) if dtype is not None else self
        if (parts := x._shifted_exp(axis)) is not None:
            _, e, axes = parts
            return x._wrap(UOp.elementwise(Ops.FDIV, None, e, e.r(Ops.ADD, axes).expand(x.shape)))
        # the max is detached: the result does not depend on the shift, whose gradient through the max only added
        # rounding (nonzero gradients of ~1e-7 where the exact one is 0) and a backward max pass
        shifted = x.sub(x.max(axis, keepdim=True).detach())
        e = shifted.exp()
        return e.div(e.sum(axis, keepdim=True))

    @templated
    def log_softmax(self: Tensor, axis: int = -1, dtype: Any = None) -> Tensor:
        """log(softmax(self)) along `axis`."""
        x = self.cast(to_dtype(dtype)) if dtype is not None else self
        if (u := x._log_softmax_uop(axis)) is not None:
            return x._wrap(u)
        shifted = x.sub(x.max(axis, keepdim=True).detach())  # see softmax
        return shifted.sub(shifted.exp().sum(axis, keepdim=True).log())

    def _log_softmax_uop(self: Tensor, axis: int) -> UOp | None:
        """log_softmax's value as `log_softmax`'s tensor ops build it (see `_shifted_exp`), or None."""
        if (parts := self._shifted_exp(axis)) is None:
            return None
        shifted, e, axes = parts
        total = e.r(Ops.ADD, axes)
        log = UOp.elementwise(Ops.MUL, None, UOp.elementwise(Ops.LOG2, None, total), const_uop(math.log(2), self.dtype, total.shape))
        return UOp.elementwise(Ops.SUB, None, shifted, log.expand(self.shape))

    def _shifted_exp(self: Tensor, axis: int) -> tuple[UOp, UOp, tuple[int, ...]] | None:
        """For a float32 or float64 tensor of fixed shape: (self - max, its exp, the reduced axes) as UOps, the graph
        the tensor ops of `softmax` build node for node (a test compares them), without their tensors (a softmax was
        seven tensor ops, ~70 us of graph building). None otherwise (the tensor ops handle it)."""
        dt, shape = self.dtype, self.shape
        if dt not in (dtypes.float32, dtypes.float64) or sum_acc_dtype(dt) is not dt or not all(isinstance(d, int) for d in shape):
            return None
        axes = self._axes(axis)
        if not axes or any(shape[a] == 0 for a in axes):
            return None
        x = self.uop
        shifted = UOp.elementwise(Ops.SUB, None, x, x.r(Ops.MAX, axes).detach().expand(shape))
        scaled = UOp.elementwise(Ops.MUL, None, shifted, const_uop(1 / math.log(2), dt, shape))
        return shifted, UOp.elementwise(Ops.EXP2, None, scaled), axes

    @templated
    def _cumulative(self: Tensor, op: Ops, axis: int) -> Tensor:
        axis = self._resolve_dim(axis)
        if self.ndim == 0:  # a 0-d tensor (axis 0 or -1) is its own running value
            return self
        return self.transpose(axis, -1)._running(op).transpose(axis, -1)

    def _running(self: Tensor, op: Ops) -> Tensor:
        """The running ADD, MUL or MAX along the last axis.

        Up to 2 * SCAN_BLOCK elements: out[..., i] = op over j <= i of x[..., j], a lower-triangular mask over an (n, n)
        expansion (n^2 work per row). Longer axes are scanned in blocks of SCAN_BLOCK: each block's running values, then
        the running values of the blocks' totals (scanned the same way), each block combined with the total of the
        blocks before it. That is about n * SCAN_BLOCK work instead of n^2: a cumsum of 2^20 elements was 2^40
        compare-and-adds (minutes); 1024 rows of 1024, 16 ms -> about 1 ms."""
        n = self.shape[-1]
        identity: float | int = 0 if op is Ops.ADD else 1 if op is Ops.MUL else self._lowest()
        if not isinstance(n, int) or n <= 2 * SCAN_BLOCK:
            mask = type(self).arange(n, device=self.device).reshape(n, 1) >= type(self).arange(n, device=self.device).reshape(1, n)
            wide = self.unsqueeze(-2)
            if op is Ops.ADD:
                return mask.where(wide, 0).sum(-1, dtype=None if not dtypes.is_float(self.dtype) else self.dtype)
            if op is Ops.MUL:
                return mask.where(wide, 1).prod(-1)
            return mask.where(wide, identity).max(-1)
        lead, blocks = self.shape[:-1], -(-n // SCAN_BLOCK)
        width = blocks * SCAN_BLOCK
        x = self.pad((0, width - n), value=identity) if width != n else self
        inner = x.reshape(*lead, blocks, SCAN_BLOCK)._running(op)
        totals = inner.shrink(tuple(None for _ in lead) + (None, (SCAN_BLOCK - 1, SCAN_BLOCK))).reshape(*lead, blocks)
        # the blocks before each block: the running totals shifted by one, the identity before the first
        before = totals._running(op).pad((1, 0), value=identity).shrink(tuple(None for _ in lead) + ((0, blocks),))
        before = before.unsqueeze(-1)
        out = inner + before if op is Ops.ADD else inner * before if op is Ops.MUL else inner.maximum(before)
        return out.reshape(*lead, width).shrink(tuple(None for _ in lead) + ((0, n),))

    def _ranks(self: Tensor, axis: int, descending: bool) -> tuple[Tensor, Tensor]:
        """The stable sorted position of every element along `axis` (moved last), and the moved tensor.

        rank[i] = #{j : x[j] before x[i]} + #{j < i : x[j] == x[i]}: an O(n^2) comparison count, two fused kernels.
        """
        x = self.transpose(axis, -1)
        n = x.shape[-1]
        xi, xj = x.unsqueeze(-1), x.unsqueeze(-2)
        before = (xj > xi) if descending else (xj < xi)
        same = xj.eq(xi)
        if dtypes.is_float(x.dtype):
            # NaN sorts as the largest value: before every number descending, after every one ascending; NaNs tie
            nan_i, nan_j = xi.ne(xi), xj.ne(xj)
            before = before.bitwise_or(nan_j.bitwise_and(nan_i.logical_not()) if descending else nan_i.bitwise_and(nan_j.logical_not()))
            same = same.bitwise_or(nan_i.bitwise_and(nan_j))
        arange = type(self).arange
        j_lt_i = arange(n, device=self.device).reshape(1, n) < arange(n, device=self.device).reshape(n, 1)
        ties = same.bitwise_and(j_lt_i)
        return before.bitwise_or(ties).sum(-1), x

    def sort(self: Tensor, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
        """(values, indices) sorted along `dim`, stable (equal elements keep their order). NaN sorts as the largest
        value (last ascending, first descending) and -0.0 equals 0.0, as in PyTorch."""
        axis = self._resolve_dim(dim)
        n, rows = self._axis_and_rows(axis)
        network = isinstance(n, int) and isinstance(rows, int) and rows * n * n >= SORT_NETWORK_COMPARISONS
        indices = self._sort_indices(axis, descending, network)
        return self.gather(axis, indices), indices

    @templated
    def _sort_indices(self: Tensor, axis: int, descending: bool, network: bool) -> Tensor:
        """The int32 positions `sort` reads its values at along `axis`: by the merge network, else by the rank count
        (a template: the network over 32000 elements is some 400 tensor ops to build; the choice is an argument, so
        the signature holds it)."""
        if network:
            return self.transpose(axis, -1)._sort_network(descending).transpose(axis, -1)
        n = self.shape[axis]
        rank, _ = self._ranks(axis, descending)
        arange = type(self).arange
        # one-hot of rank: hit[..., i, k] is True when element i lands at position k; the values are then read at the
        # indices (a sum of the one-hot would make -0.0 0.0)
        hit = rank.unsqueeze(-1).eq(arange(n, device=self.device))
        indices = hit.where(arange(n, device=self.device).reshape(n, 1), 0).sum(-2).cast(dtypes.int32)
        return indices.transpose(axis, -1)

    def _axis_and_rows(self: Tensor, axis: int) -> tuple[Any, Any]:
        """The length of `axis` and the number of rows along it (the product of the other axes)."""
        return self.shape[axis], math.prod(d for i, d in enumerate(self.shape) if i != axis)

    def _sort_key(self: Tensor, descending: bool) -> Tensor:
        """Integer keys whose ascending order along the last axis is the sort's order of the elements (equal elements
        tie): floats key by their bits, the negative ones' magnitude bits flipped, after -0.0 becomes 0.0 and every NaN
        the positive quiet NaN (above +inf); unsigned ints are shifted into the signed range. int32 keys for elements of
        up to 32 bits, int64 for wider ones. Descending reverses the order (-1 - key: the range onto itself, where
        negation overflows at its lowest)."""
        x = self
        wide = x.dtype.itemsize > 4
        key_dtype = dtypes.int64 if wide else dtypes.int32
        if dtypes.is_float(x.dtype):
            top = 63 if wide else 31
            f = x.cast(dtypes.float64 if wide else dtypes.float32) + 0.0  # (-0.0 + 0.0 is 0.0)
            f = f.ne(f).where(math.nan, f)
            bits = f.bitcast(key_dtype)
            key = bits.bitwise_xor(bits.rshift(top).bitwise_and((1 << top) - 1))
        elif x.dtype in (dtypes.uint32, dtypes.uint64):
            key = x.bitwise_xor(1 << (8 * x.dtype.itemsize - 1)).bitcast(key_dtype)
        else:
            key = x.cast(key_dtype)
        return key.bitwise_not() if descending else key

    def _sort_network(self: Tensor, descending: bool) -> Tensor:
        """The int32 indices that stably sort the last axis, by a bitonic merge network over (key, index) pairs padded
        to a power of two: log2(N) merges, the one of blocks of 2m a step comparing each element of a block's first
        half with its mirror in the second and then log2(m) steps of halves, each step a kernel of N/2 compare-and-
        swaps. O(N log^2 N) work where the rank count is n^2 (2^20 elements: 210 steps, not 2^40 comparisons). Steps
        of the same kind and size are the same kernel (about 2 log2(N) distinct ones). Elements of up to 32 bits carry
        one int64 per element, the key above the index (no two equal); wider ones the key and the index apart."""
        n = self.shape[-1]
        lead = self.shape[:-1]
        size = 1 << (n - 1).bit_length()
        key = self._sort_key(descending)
        index = type(self).arange(size, dtype=dtypes.int64 if self.dtype.itemsize <= 4 else dtypes.int32, device=self.device)
        if size != n:  # (padding sorts last: the largest key of its range, and an index above every element's)
            key = key.pad((0, size - n), value=dtypes.int32.max if self.dtype.itemsize <= 4 else dtypes.int64.max)
        carried = [key.cast(dtypes.int64) * (1 << 32) + index] if self.dtype.itemsize <= 4 else [key, index._broadcast_to(key.shape)]
        carried = [c.contiguous() for c in carried]
        # each step sees the carried tensors as pairs of runs (..., runs, 2, m): an element takes the smaller of itself
        # and its partner in the first run of its pair and the larger in the second (the partner is in the other run:
        # the same place, or the mirrored one in a merge's first step; no two elements tie)
        first = type(self).arange(2, device=self.device).reshape(2, 1).eq(0)
        block = 2
        while block <= size:
            half = block // 2
            while half >= 1:
                pairs = [c.reshape(*lead, size // (2 * half), 2, half) for c in carried]
                partners = [p.flip((-2, -1)) if 2 * half == block else p.flip(-2) for p in pairs]
                before = partners[0] < pairs[0]
                if len(pairs) == 2:
                    before = before.bitwise_or(partners[0].eq(pairs[0]).bitwise_and(partners[1] < pairs[1]))
                take = before.eq(first)
                carried = [take.where(q, p).reshape(*lead, size).contiguous() for p, q in zip(pairs, partners)]
                half //= 2
            block *= 2
        out = carried[-1]
        if size != n:
            out = out.shrink(tuple(None for _ in lead) + ((0, n),))
        return (out.bitwise_and(0xFFFFFFFF) if len(carried) == 1 else out).cast(dtypes.int32)

    def argsort(self: Tensor, dim: int = -1, descending: bool = False) -> Tensor:
        """The indices that sort `dim` (stable: equal elements keep their order), as int32."""
        return self.sort(dim, descending)[1]

    def topk(self: Tensor, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True) -> tuple[Tensor, Tensor]:
        """The k largest (or smallest) elements along `dim` and their indices, in sorted order."""
        axis = self._resolve_dim(dim)
        if k > self.shape[axis]:
            raise ValueError(f"selected index k={k} is out of range for dim {axis} of size {self.shape[axis]}")
        n, rows = self._axis_and_rows(axis)
        if 0 < k <= TOPK_PICKS and isinstance(n, int) and isinstance(rows, int) and (cost := _top_cost(rows, n, k))[0] < cost[1]:
            return self._top_by_picks(k, axis, largest)
        values, indices = self.sort(axis, descending=largest)
        keep = tuple((0, k) if i == axis else None for i in range(self.ndim))
        return values.shrink(keep), indices.shrink(keep)

    def _top_by_picks(self: Tensor, k: int, axis: int, largest: bool) -> tuple[Tensor, Tensor]:
        """topk for a few of many: k times, the first element in the sort's order after the one picked last, and its
        index, each a pass over the axis (about k * n work where the sort's ranks are n^2: the 10 largest of 1024 rows of
        1024, 32 ms -> 6 ms). The order is the sort's (`_sort_key`: NaN above +inf, -0.0 equal to 0.0, equal keys in
        index order), so "after the last pick" is a key past its key, or its key at a later index: one test per element
        and pick, where excluding each earlier pick by position was k tests. The values are read at the indices."""
        index = self._pick_indices(k, axis, largest)
        return self.gather(axis, index), index

    @templated
    def _pick_indices(self: Tensor, k: int, axis: int, largest: bool) -> Tensor:
        """The int32 positions `_top_by_picks` picks along `axis` (a template: each pick is about a dozen tensor ops to build)."""
        x = self.transpose(axis, -1)
        n = x.shape[-1]
        key = x._sort_key(descending=largest)  # ascending: the order picked in
        arange = type(self).arange(n, device=self.device)
        countdown = type(self).arange(n, 0, -1, device=self.device)  # the first index wins a max
        indices: list[Tensor] = []
        for _ in range(k):
            if indices:
                last = indices[-1]
                last_key = key.gather(-1, last)
                after = (key > last_key).bitwise_or(key.eq(last_key).bitwise_and(arange > last))
                best = after.where(key, key.dtype.max).min(-1, keepdim=True)
                hit = after.bitwise_and(key.eq(best))
            else:
                best = key.min(-1, keepdim=True)
                hit = key.eq(best)
            indices.append((n - hit.where(countdown, 0).max(-1, keepdim=True)).cast(dtypes.int32))
        index = indices[0].cat(*indices[1:], dim=-1) if k > 1 else indices[0]
        return index.transpose(axis, -1)

    def cumsum(self: Tensor, axis: int = 0) -> Tensor:
        """Running sum along `axis`."""
        return self._cumulative(Ops.ADD, axis)

    def cummax(self: Tensor, axis: int = 0) -> tuple[Tensor, Tensor]:
        """(running max, int32 index of the first element equal to it) along `axis`."""
        return self._running_with_index(self._cumulative(Ops.MAX, axis), axis)

    def cumprod(self: Tensor, axis: int) -> Tensor:
        """Running product along `axis`."""
        return self._cumulative(Ops.MUL, axis)

    def cummin(self: Tensor, axis: int = 0) -> tuple[Tensor, Tensor]:
        """(running min, int32 index of the first element equal to it) along `axis`."""
        return self._running_with_index(self._inverse()._cumulative(Ops.MAX, axis)._inverse(), axis)

    def _running_with_index(self: Tensor, values: Tensor, axis: int) -> tuple[Tensor, Tensor]:
        """(values, the index of the first element of self at or before each position that equals its value)."""
        if self.ndim == 0:
            return values, type(self).zeros((), dtype=dtypes.int32, device=self.device)
        axis = self._resolve_dim(axis)
        x, v = self.transpose(axis, -1), values.transpose(axis, -1)
        n = x.shape[-1]
        arange = type(self).arange
        # match[..., j, i]: element j (at or before i) equals the running value at i; the countdown picks the first j
        upto = arange(n, device=self.device).reshape(n, 1) <= arange(n, device=self.device).reshape(1, n)
        match = x.unsqueeze(-1).eq(v.unsqueeze(-2)).bitwise_and(upto)
        first = match.where(arange(n, 0, -1, device=self.device).reshape(n, 1), 0).max(-2)
        return values, first.sub(n, True).cast(dtypes.int32).transpose(axis, -1)

    def logcumsumexp(self: Tensor, axis: int = 0) -> Tensor:
        """log(cumsum(exp(self))) along `axis`, shifted by the running max so it neither overflows nor underflows."""
        if self.ndim == 0:
            return self
        axis = self._resolve_dim(axis)
        x = self._float().transpose(axis, -1)
        n = x.shape[-1]
        m = x._cumulative(Ops.MAX, -1).detach()
        m = m.isinf().where(0, m)
        arange = type(self).arange
        upto = arange(n, device=self.device).reshape(1, n) <= arange(n, device=self.device).reshape(n, 1)
        # terms[..., i, j] = x[j] - m[i] for j <= i
        terms = upto.where(x.unsqueeze(-2).sub(m.unsqueeze(-1)), -math.inf)
        return terms.exp().sum(-1).log().add(m).transpose(axis, -1)
