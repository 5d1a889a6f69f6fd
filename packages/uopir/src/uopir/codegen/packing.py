"""Operand packing: a reduce kernel that reads a large operand across rows gets a copy of it laid out along its loop.

`C[m, n] = sum_k A[m, k] * B[k, n]` vectorizes along n, the output's contiguous axis: each step of the k loop reads
a short run of B's row k, so the loop walks down a column strip of B one row (N elements) at a time. With a
power-of-two N the strip's cache lines all fall into a few cache sets and evict each other, and even without that
the hardware prefetchers do not follow a stride of kilobytes: a 1024 x 1024 x 1024 float32 matmul measured 33 ms
here (65 GFLOP/s on 2 Zen 3 cores) where PyTorch takes 12 ms. The cure GEMM libraries use is packing: B is first
copied so that each strip of `group` columns is contiguous over k (`P[n // G, k, n % G]`), and the kernel reads the
copy. Measured on the same matmul: packing 0.5 ms, the kernel 11.7 ms (190 GFLOP/s). An operand B[n, k] read
transposed (`x @ w.T`) is copied into the same strips, so it too gets the ordinary register tiles.

An output axis `group` does not divide (1000 or 1023 columns) is packed too: the kernel's axis becomes strips and lanes
(`_Split`), the last strip starting `group` columns before the axis's end, so it overlaps the strip before and every
access stays inside the operand; the overlapped columns are computed and stored twice, the same values, so a kernel
that reads a buffer it writes keeps its operand in place. 1023x1024 @ 1024x1023 on 2 AVX-512 cores: 9.9 -> 7.3 ms.

`operand_packs(ast, group_bytes)` finds such operands and returns the kernel rewritten to read packed copies, with
one packing kernel per copy for the scheduler to run first. A renderer asks for it with `packed_operand_bytes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from uopir.dtypes import DType, PtrDType
from uopir.ops import Ops
from uopir.uop import UOp

from .kernel import axis_type, next_axis_id, range_end, replace_ranges
from .onehot import collapse_onehot
from .opts import reads_what_it_writes, stride

#: the reduce loop must be at least this long (a strip of fewer lines stays in the first-level cache anyway)...
PACK_MIN_REDUCE = 256
#: ...unless the operand's row stride is a multiple of this many bytes: then a strip's lines fall into a few of the
#: first-level cache's sets (64 sets of 64-byte lines: a 1 KiB stride uses 4 of them, 32 lines with 8 ways), so even
#: a short strip evicts itself. Such a strip of PACK_MIN_ALIASED_REDUCE or more lines is packed: batched
#: (8, 256, 64) @ (8, 64, 256) 558 -> 398 us with the copy, (4, 256, 64) @ (4, 64, 1024) 2.1 -> 0.8 ms;
#: with 16 or 32 lines, or a stride of 784 floats, the copy cost about what it saved
PACK_ALIASED_STRIDE_BYTES = 1024
PACK_MIN_ALIASED_REDUCE = 64
#: and move the operand by at least this many bytes per step
PACK_MIN_STRIDE_BYTES = 1024
#: the kernel must read each operand element at least this many times (the copy is a read and a write of it: with
#: 16 or 32 rows over a 1024 x 1024 operand the copy measured slower than the strided passes; 64 rows 1.3x faster)
PACK_MIN_REUSE = 64
#: an operand contiguous along the reduce axis (`q @ k^T`, `x @ w.T`) is read by the kernel as vector lanes along that
#: axis, summed across after the loop (LANES); a transposing copy into strips lets it use the register tiles of an
#: ordinary matmul instead. The copy gathers with a stride, so it pays when at least this many output rows read each
#: element: (8, 256, 64) @ (8, 64, 256)^T 573 -> 411 us, 512x128 @ (128x512)^T 3.1 -> 1.5 ms, 1024^3 17.8 -> 11.8 ms;
#: with 64 rows (a 64-row batch times a 784x256 weight) the copy cost what it saved
PACK_MIN_TRANSPOSED_REUSE = 256
#: and the reduce loop of such an operand must be at least this long (shorter, the lanes' cross sums are cheap)
PACK_MIN_TRANSPOSED_REDUCE = 64
#: an operand split in strips whose last one overlaps (columns no strip divides: their rows are not a power of two
#: apart, so they do not alias in the cache) needs this many output rows reading each element: 64x1024 @ 1024x1000
#: measured 0.66-0.79 ms in place against 1.03-1.07 with the copy, 128x2048 @ 2048x1000 3.15-3.17 against 2.92-3.09
PACK_MIN_SPLIT_REUSE = 128
#: operands smaller than this are left alone (the extra kernel costs more than it saves)
PACK_MIN_BYTES = 128 * 1024


@dataclass(frozen=True)
class OperandPack:
    """A packed copy the rewritten kernel reads at PARAM `slot`: `size` elements of `dtype`, filled by `ast`, a
    kernel whose slot 0 is the copy and slot 1 the buffer the original kernel read at `slot`."""

    slot: int
    size: int
    dtype: DType
    ast: UOp


def _affine(off: UOp, ranges: list[UOp]) -> dict[UOp, int] | None:
    """The constant step of `off` along each of `ranges`, when `off` is exactly a sum of constant multiples of them
    plus a constant (no divisions, gates or variables)."""
    steps: dict[UOp, int] = {}
    for r in ranges:
        s = stride(off, r)
        if s is None:
            return None
        steps[r] = s
    rest = off
    for r, s in steps.items():
        rest = rest - r * s
    return steps if rest.simplify().op is Ops.CONST else None


class _Candidate(NamedTuple):
    """An operand load worth packing, and what `_packed` needs to pack it."""

    load: UOp
    param: UOp
    off: UOp
    others: list[UOp]
    group: int
    size: int
    rows_outer: bool
    uneven: bool  # `group` does not divide the inner axis: packed in split strips


@dataclass(frozen=True)
class _Split:
    """The kernel's inner axis (`inner`, which `group` does not divide) as strips `t` of `group` lanes `l`: strip t starts
    at `start(t)`, t * group except the last one, which ends with the axis and so overlaps the strip before."""

    inner: UOp
    group: int
    t: UOp
    l: UOp

    def start(self, t: UOp) -> UOp:
        n, last = range_end(self.inner), range_end(self.t) - 1
        return (t < last).where(t * self.group, t.const_like(n - self.group))


def _packed(param: UOp, off: UOp, others: list[UOp], inner: UOp, k: UOp, group: int, size: int, rows_outer: bool,
            split: _Split | None = None) -> tuple[OperandPack, UOp]:
    """The pack of the operand `param` read at `off` (moving along `others`, `inner` and `k`), and the load of the copy
    that replaces the kernel's load (with `split`, in terms of its strips and lanes)."""
    n_k = range_end(k)
    n_strips = range_end(split.t) if split is not None else range_end(inner) // group
    # the copy's layout: the other axes outermost (in loop order), then strips of `group` along inner, each over k
    strides, acc = {}, n_k * n_strips * group
    for r in reversed(others):
        strides[r] = acc
        acc *= range_end(r)

    def packed_at(rs: dict[UOp, UOp], strip: UOp, lane: UOp) -> UOp:
        ret = strip * (n_k * group) + rs[k] * group + lane
        for r in others:
            ret = ret + rs[r] * strides[r]
        return ret.simplify()

    dtype = param.dtype.base
    # the packing kernel loops over (others, strip, k, lane) and reads the operand where the kernel did. Its axes are
    # numbered from 0, so a new range can be the very UOp of a kernel range (same size and number): the substitution
    # must be simultaneous (`replace_ranges`), not UOp.substitute's rewrite to a fixpoint, which substituted such a
    # range twice (k == n matmuls were wrong)
    # loop order: over the operand's rows (k) outside the strips when its rows are contiguous, so the copy reads each
    # row front to back and writes one line to each strip (a strip's lines 4 KiB apart outside would read down
    # columns: 1024 x 1024, 0.41-0.68 -> 0.18-0.35 ms); a transposed operand's strips outside (its gather then reuses
    # each row's lines across consecutive k)
    sizes = [*(range_end(r) for r in others), *((n_k, n_strips) if rows_outer else (n_strips, n_k)), group]
    final = [UOp.range(n, i) for i, n in enumerate(sizes)]
    k_r, strip_r = (final[-3], final[-2]) if rows_outer else (final[-2], final[-3])
    lane_r = final[-1]
    new = {**dict(zip(others, final)), k: k_r}
    column = (split.start(strip_r) if split is not None else strip_r * group) + lane_r
    src_off = replace_ranges(off, {**{r: (v, (v,)) for r, v in new.items()}, inner: (column, ())}).simplify()
    dest = UOp.param(0, dtype.ptr(size)).index(packed_at(new, strip_r, lane_r))
    value = UOp.param(1, param.dtype).index(src_off).load()
    loops = (new[k], strip_r) if rows_outer else (strip_r, new[k])
    pack_ast = UOp.sink(dest.store(value).end(*[new[r] for r in others], *loops, lane_r))
    # the kernel reads the copy at the operand's slot
    strip, lane = (split.t, split.l) if split is not None else (inner // group, inner % group)
    load = UOp.param(param.arg.slot, dtype.ptr(size)).index(packed_at({r: r for r in (*others, k)}, strip, lane)).load()
    return OperandPack(param.arg.slot, size, dtype, pack_ast), load


def operand_packs(ast: UOp, group_bytes: int) -> tuple[UOp, tuple[OperandPack, ...]]:
    """`ast` rewritten to read packed copies of the operands worth packing, and how to make each copy (see the module
    docstring); `ast` itself and no packs when none is. `group_bytes`: the run of an output row a copy keeps
    contiguous over the reduce loop (a cache line)."""
    if group_bytes <= 0 or ast.op is not Ops.SINK or len(ast.src) != 1 or ast.src[0].op is not Ops.END:
        return ast, ()
    end = ast.src[0]
    store, loops = end.src[0], list(end.src[1:])
    if store.op is not Ops.STORE or store.src[0].op is not Ops.INDEX or len(store.src[0].src) != 2:
        return ast, ()
    if any(r.op is not Ops.RANGE or r.src[0].op is not Ops.CONST for r in loops):
        return ast, ()
    reduces = [u for u in ast.toposort() if u.op is Ops.REDUCE]
    if len(reduces) != 1 or reduces[0].arg is not Ops.ADD or len(reduces[0].src) != 2:
        return ast, ()
    if collapse_onehot(reduces[0]) is not None:  # indexing by a tensor: lowered to a read of the indexed row, no matmul
        return ast, ()
    k = reduces[0].src[1]
    shortest = min(PACK_MIN_REDUCE, PACK_MIN_ALIASED_REDUCE, PACK_MIN_TRANSPOSED_REDUCE)
    if k.op is not Ops.RANGE or k.src[0].op is not Ops.CONST or range_end(k) < shortest:
        return ast, ()
    out_slot = store.src[0].src[0].arg.slot
    inner = next((r for r in loops if stride(store.src[0].src[1], r) == 1), None)
    if inner is None:
        return ast, ()
    loads = [u for u in ast.toposort() if u.op is Ops.LOAD]
    in_reduce = set(reduces[0].toposort())
    candidates: list[_Candidate] = []
    for ld in loads:
        idx = ld.src[0]
        if idx.op is not Ops.INDEX or len(idx.src) != 2 or idx.src[0].op is not Ops.PARAM:
            continue
        param, off = idx.src
        if param.arg.slot == out_slot or not isinstance(param.dtype, PtrDType) or ld not in in_reduce:
            continue
        if any(other is not ld and other.src[0].op is Ops.INDEX and other.src[0].src[0] is param for other in loads):
            continue  # read at several places: the kernel would need the original too
        item = param.dtype.base.itemsize
        group = group_bytes // item
        moving = [r for r in off.toposort() if r.op is Ops.RANGE]
        if group < 2 or inner not in moving or k not in moving or any(r not in loops and r is not k for r in moving):
            continue
        # an inner axis `group` does not divide (999 columns) is packed in strips too, the last one overlapping the
        # one before (see `_Split`): only when it is longer than a strip, and no buffer is both read and written (the
        # overlapped columns are computed and stored twice)
        uneven = range_end(inner) % group != 0
        if uneven and (range_end(inner) <= group or reads_what_it_writes(ast)):
            continue
        steps = _affine(off, moving)
        if steps is None:
            continue
        size = math.prod(range_end(r) for r in moving if r is not inner) * -(-range_end(inner) // group) * group
        reuse = math.prod(range_end(r) for r in loops if r not in moving)
        if uneven and reuse < PACK_MIN_SPLIT_REUSE:
            continue
        transposed = steps[k] == 1 and steps[inner] > 1
        if transposed:
            # contiguous along the reduce axis (x @ w.T, q @ k^T): the copy transposes it, so the kernel reads strips along
            # its output axis instead of reducing vector lanes and summing them across
            if range_end(k) < PACK_MIN_TRANSPOSED_REDUCE or reuse < PACK_MIN_TRANSPOSED_REUSE or size * item < PACK_MIN_BYTES:
                continue
        else:
            if steps[inner] != 1 or steps[k] * item < PACK_MIN_STRIDE_BYTES:
                continue
            if range_end(k) < PACK_MIN_REDUCE and (range_end(k) < PACK_MIN_ALIASED_REDUCE or steps[k] * item % PACK_ALIASED_STRIDE_BYTES):
                continue
            if reuse < PACK_MIN_REUSE or size * item < PACK_MIN_BYTES:
                continue
        candidates.append(_Candidate(ld, param, off, [r for r in loops if r in moving and r is not inner], group, size, not transposed, uneven))
    if not candidates:
        return ast, ()
    split = None
    if any(c.uneven for c in candidates):
        # every packed operand reads the split axis's strips: those of another strip width are left as they are
        group = next(c.group for c in candidates if c.uneven)
        candidates = [c for c in candidates if c.group == group]
        t = UOp.range(-(-range_end(inner) // group), inner.arg[0], axis_type(inner), inner.dtype)
        split = _Split(inner, group, t, UOp.range(group, next_axis_id(ast), axis_type(inner), inner.dtype))
    subs: dict[UOp, UOp] = {}
    packs: list[OperandPack] = []
    for c in candidates:
        pack, subs[c.load] = _packed(c.param, c.off, c.others, inner, k, c.group, c.size, c.rows_outer, split)
        packs.append(pack)
    ast = ast.substitute(subs)
    if split is not None:
        ast = replace_ranges(ast, {inner: (split.start(split.t) + split.l, (split.t, split.l))})
    return ast, tuple(packs)

