"""Kernel optimizations as data: `Opt(op, axis, arg)` applied to a kernel AST, and the heuristic that picks them.

Every opt is a change of loop structure only (split a range, mark part of it as registers, threads or work-items, pad
it), so results never depend on the opts: a kernel run with any valid opt list equals the unoptimized kernel (TC, see
`tc`, also sums each 16-wide slice of a float reduction in the tensor core's order, with exact products).

Axes are numbered as `kernel_ranges` orders them: loop axes, then reduce axes, then the derived axes opts split off
(locals, registers, groups), by axis id. No opt renumbers the axes before it: a split keeps the rest of the axis at the
old position (even with one iteration) and the new range goes to the end. Opts apply to the kernel's own axes, except
PADTO, which also pads LOCAL and GROUP axes; an `arg` of 0 splits off a whole axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, auto

from uopir.ops import AxisType, Ops
from uopir.uop import UOp

from .kernel import (
    DERIVED_AXES,
    REDUCE_AXES,
    CodegenError,
    add_gate,
    axis_type,
    kernel_ranges,
    kernel_stores,
    next_axis_id,
    range_end,
    reduce_identity,
    replace_ranges,
    store_ranges,
    strip_end,
)
from .tc import PAD_LEVEL, TILE, TensorCore, apply_tc, find_matmuls


class OptOps(Enum):
    UPCAST = auto()  # keep `arg` consecutive elements of a loop axis in registers (vectorizable)
    UNROLL = auto()  # unroll a reduce axis by `arg`
    THREAD = auto()  # split a loop axis across `arg` CPU cores
    PADTO = auto()  # round an axis up to a multiple of `arg`, gating the extra iterations
    LOCAL = auto()  # GPU: split `arg` work-items of a work group off a loop axis
    GROUP = auto()  # GPU: split a reduce axis across `arg` work-items, combined through local memory
    GROUPTOP = auto()  # GPU: GROUP with the work-items taking the outer part of the axis (each reduces a contiguous run)
    TC = auto()  # GPU: compute the `axis`-th matmul-shaped reduction with tensor cores; `arg` >= 2 pads odd shapes
    LANES = auto()  # CPU: split `arg` consecutive iterations of a reduce axis into vector lanes, each accumulating its
    # own partial result, combined once after the loop (a reduction along the axis operands are contiguous in)
    SWAP = auto()  # exchange the nesting of loop axes `axis` and `arg` (their axis numbers swap too: apply it last)
    OVERLAP = auto()  # CPU: UPCAST by an `arg` that need not divide the loop axis: the last tile is moved back to end
    # where the axis ends, so it computes again (and stores again, the same values) part of the tile before it

    def __repr__(self) -> str:
        return f"OptOps.{self.name}"


@dataclass(frozen=True)
class Opt:
    op: OptOps
    axis: int
    arg: int

    def __repr__(self) -> str:
        return f"Opt({self.op!r}, {self.axis}, {self.arg})"


def _split(ast: UOp, r: UOp, amount: int, new_type: AxisType, top: bool = False) -> UOp:
    """Split `amount` iterations of `r` off into a new range of `new_type`: the fast-moving part of the axis, or with
    `top` the slow-moving one. The rest keeps r's axis id and kind, even with one iteration, so axis numbers stay
    stable across opts."""
    end = range_end(r)
    if amount <= 0 or end % amount:
        raise CodegenError(f"cannot split axis {r.arg[0]} of size {end} by {amount}: the size must be a multiple")
    rest = UOp.range(end // amount, r.arg[0], axis_type(r), r.dtype)
    new = UOp.range(amount, next_axis_id(ast), new_type, r.dtype)
    value = new * (end // amount) + rest if top else rest * amount + new
    return replace_ranges(ast, {r: (value, (rest, new))})


def _lanes(ast: UOp, r: UOp, amount: int) -> UOp:
    """REDUCE(body, r) -> REDUCE(REDUCE(body, rest), lane) with r = rest * amount + lane: `lane` is a register axis
    of the inner reduce, so its accumulator holds one partial result per lane (a vector when the operands are
    contiguous along r), and the outer reduce combines the lanes once, after the loop over `rest`. Changes the order
    of a float sum as any vectorized reduction does."""
    end = range_end(r)
    if amount <= 1 or end % amount:
        raise CodegenError(f"cannot split axis {r.arg[0]} of size {end} into {amount} lanes: the size must be a multiple")
    rest = UOp.range(end // amount, r.arg[0], axis_type(r), r.dtype)
    lane = UOp.range(amount, next_axis_id(ast), AxisType.UPCAST, r.dtype)
    split = replace_ranges(ast, {r: (rest * amount + lane, (rest, lane))})
    nested: dict[UOp, UOp] = {}
    for node in split.toposort():
        if node.op is Ops.REDUCE and lane in node.src[1:]:
            inner = node.replace(src=(node.src[0], *(x for x in node.src[1:] if x is not lane)))
            nested[node] = inner.reduce(lane, arg=node.arg)
    return split.substitute(nested) if nested else split


def _thread(ast: UOp, r: UOp, amount: int) -> UOp:
    """THREAD: `amount` cores each run the kernel over a part of axis `r`. A size the cores do not divide (1024 rows on
    6 cores) gives each core ceil(end / amount) iterations, the last core's part ending with the axis and so overlapping
    the part before (as `OVERLAP` does within a core): the elements both compute are stored twice, the same values, by
    two cores. So only a kernel that reads no buffer it writes, and whose store addresses depend on the axis and on no
    loaded value, may split unevenly (see `thread_overlap_allowed`)."""
    end = range_end(r)
    if amount <= 1 or end < amount:
        raise CodegenError(f"cannot thread axis {r.arg[0]} of size {end} over {amount} cores: at least one iteration per core")
    core = UOp.special(amount, "core_id", r.dtype)
    if end % amount == 0:
        inner = UOp.range(end // amount, r.arg[0], axis_type(r), r.dtype)
        return replace_ranges(ast, {r: (core * (end // amount) + inner, (inner,))})
    if not thread_overlap_allowed(ast, r):
        raise CodegenError(f"cannot thread axis {r.arg[0]} of size {end} over {amount} cores: the size is not a multiple, and the kernel "
                           "reads a buffer it writes or its store addresses do not follow the axis alone, so the overlapping parts could differ")
    chunk = -(-end // amount)
    inner = UOp.range(chunk, r.arg[0], axis_type(r), r.dtype)
    start = core * chunk
    return replace_ranges(ast, {r: ((start < end - chunk).where(start, start.const_like(end - chunk)) + inner, (inner,))})


def thread_overlap_allowed(ast: UOp, r: UOp) -> bool:
    """Whether axis `r` may be split among cores with overlapping parts (see `_thread`): the kernel reads no buffer it
    writes, and each store's address moves with `r` (an axis of tiles whose last one overlaps too, see `_overlap`) and
    reads no loaded value (a scatter's rows may write one element: a part computed twice would store an earlier row's
    value after a later one's)."""
    if reads_what_it_writes(ast):
        return False
    for st in kernel_stores(ast):
        idx = st.src[0]
        if idx.op is not Ops.INDEX or len(idx.src) < 2:
            return False
        below = idx.src[1].toposort()
        if r not in below or any(n.op is Ops.LOAD for n in below):
            return False
    return True


def _swap(ast: UOp, ranges: list[UOp], opt: Opt) -> UOp:
    """Loops nest by axis id: two loop axes exchange ids (each keeps its size and kind), so they exchange places."""
    if not 0 <= opt.arg < len(ranges) or opt.arg == opt.axis:
        raise CodegenError(f"{opt}: SWAP takes two different axes of the kernel's {len(ranges)}")
    a, b = ranges[opt.axis], ranges[opt.arg]
    if any(axis_type(x) in REDUCE_AXES or axis_type(x) in DERIVED_AXES for x in (a, b)):
        raise CodegenError(f"{opt}: SWAP exchanges two of the kernel's own loop axes, not reduce or split-off axes")
    new_a = UOp.range(a.src[0], b.arg[0], axis_type(a), a.dtype)
    new_b = UOp.range(b.src[0], a.arg[0], axis_type(b), b.dtype)
    return replace_ranges(ast, {a: (new_a, (new_a,)), b: (new_b, (new_b,))})


def _padto(ast: UOp, r: UOp, amount: int) -> UOp:
    end = range_end(r)
    padded = math.ceil(end / amount) * amount
    if padded == end:
        return ast
    new = UOp.range(padded, r.arg[0], axis_type(r), r.dtype)
    ast = replace_ranges(ast, {r: (new, (new,))})
    valid = new < end
    memo: dict[UOp, UOp] = {}
    gated: set[UOp] = set()  # the accesses given the gate, and the loads through them (they read 0 in padded iterations)
    for node in ast.toposort():
        src = tuple(memo[s] for s in node.src)
        if node.op is Ops.INDEX and new in node.toposort():
            # gate every access that depends on the padded range: no load or store past the old end
            memo[node] = add_gate(node.replace(src=src), valid)
            gated.add(memo[node])
        elif node.op is Ops.REDUCE and new in node.src[1:] and node.src[0].op is not Ops.WMMA:
            # padded iterations contribute the reduce's identity: a sum of values 0 wherever its loads read 0 (a
            # product of two gated loads, as a convolution's weight gradient sums) is that already; anything else
            # is selected (a select on the padded range keeps a vector block of the range from being vector code)
            identity = reduce_identity(node.arg, node.dtype)
            body = src[0] if identity == 0 and _zero_where_gated(src[0], gated) else valid.where(src[0], src[0].const_like(identity))
            memo[node] = node.replace(src=(body, *src[1:]))
        else:
            memo[node] = node.replace(src=src)
            if node.op is Ops.LOAD and len(src) == 1 and src[0] in gated:
                gated.add(memo[node])
    return memo[ast]


def reads_what_it_writes(ast: UOp) -> bool:
    """Whether the kernel loads from a buffer one of its stores writes (then no element may be computed and stored twice:
    see `OVERLAP`, an uneven `THREAD` and `uopir.codegen.packing`'s split strips)."""
    written = {st.src[0].src[0] for st in kernel_stores(ast)}
    return any(n.op is Ops.LOAD and n.src[0].op is Ops.INDEX and n.src[0].src[0] in written for n in ast.toposort())


def _overlap_fits(size: int, amount: int, waste: float) -> bool:
    """Whether tiles of `amount` over `size` iterations, the last one overlapping, compute at most `waste` of them twice."""
    return -(-size // amount) * amount - size <= size * waste


def _overlap_lanes(ast: UOp, ranges: list[UOp], sizes: dict[int, int], inner: int, lanes: int) -> bool:
    """Whether the contiguous output axis `inner` of a reduction, which no vector divides, is tiled in vectors of `lanes`
    with an overlapping last one: longer than one tile, at most OVERLAP_LANES_WASTE of it computed twice, every access
    moving along it contiguous (a vector load or store), and no buffer both read and written."""
    size = sizes[inner]
    # (an odd number of whole vectors, 784 = 49 x 16, had rows of one vector; two, the last tile overlapping, when that
    # computes at most ODD_VECTORS_WASTE of the row twice)
    waste = ODD_VECTORS_WASTE if size % (lanes // 2) == 0 else OVERLAP_LANES_WASTE
    if size % lanes == 0 or size <= lanes or not _overlap_fits(size, lanes, waste):
        return False
    moving = [*_moving_indexes(ast, ranges[inner]), *(st.src[0] for st in kernel_stores(ast))]
    return all(stride(idx.src[1], ranges[inner]) in (0, 1) for idx in moving) and not reads_what_it_writes(ast)


def _overlap(ast: UOp, r: UOp, amount: int) -> UOp:
    """UPCAST of a loop axis by `amount` when that does not divide it: ceil(end / amount) tiles, the last one starting
    at end - amount instead of past the end, so no access needs a gate (a gated load in a reduce loop is a test per
    load, and padded rows with clamped indexes cost a register per row). The overlapped elements are computed and
    stored twice, the same values both times: only a kernel that reads no buffer it writes may overlap (a second
    store into C of `C += A @ B` would add A @ B again)."""
    end = range_end(r)
    if end % amount == 0:
        return _split(ast, r, amount, AxisType.UPCAST)
    if axis_type(r) in REDUCE_AXES or amount <= 1 or end < amount:
        raise CodegenError(f"cannot overlap axis {r.arg[0]} of size {end} in tiles of {amount}: a loop axis of at least {amount} iterations")
    if reads_what_it_writes(ast):
        raise CodegenError(f"cannot overlap axis {r.arg[0]}: the kernel reads a buffer it writes, so a second store is not the same value")
    rest = UOp.range(-(-end // amount), r.arg[0], axis_type(r), r.dtype)
    new = UOp.range(amount, next_axis_id(ast), AxisType.UPCAST, r.dtype)
    start = rest * amount
    value = (start < end - amount).where(start, start.const_like(end - amount)) + new
    return replace_ranges(ast, {r: (value, (rest, new))})


def _zero_where_gated(value: UOp, gated: set[UOp]) -> bool:
    """Whether `value` is 0 wherever the loads in `gated` read 0: it is one of them, or sums, differences, negations,
    conversions and products of such values only (no other operand: a product with anything else could be 0 * inf)."""
    if value in gated:
        return True
    if value.op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.MULACC, Ops.NEG, Ops.CAST) and value.src:
        return all(_zero_where_gated(s, gated) for s in value.src)
    return False


#: derived axes PADTO may still pad: work-items of a group, which then gate their accesses
PADDABLE_DERIVED = frozenset({AxisType.LOCAL, AxisType.GROUP_REDUCE})


def apply_opt(ast: UOp, opt: Opt, tensor_cores: tuple[TensorCore, ...] = ()) -> UOp:
    """The kernel with one more optimization applied (CodegenError when it does not apply); TC picks from
    `tensor_cores`, the renderer's."""
    if opt.op is OptOps.TC:
        return apply_tc(ast, opt.axis, opt.arg, tensor_cores)
    ranges = kernel_ranges(ast)
    if not 0 <= opt.axis < len(ranges):
        raise CodegenError(f"{opt} names axis {opt.axis}, but the kernel has {len(ranges)} axes")
    r = ranges[opt.axis]
    kind = axis_type(r)
    if kind in DERIVED_AXES and not (opt.op is OptOps.PADTO and kind in PADDABLE_DERIVED):
        raise CodegenError(f"{opt}: axis {opt.axis} was split off by an earlier opt; apply opts to the kernel's own axes "
                           "(only PADTO applies to LOCAL and GROUP axes)")
    is_reduce = kind in REDUCE_AXES
    if opt.op is OptOps.UPCAST:
        if is_reduce:
            raise CodegenError(f"{opt}: UPCAST applies to loop axes; use UNROLL for a reduce axis")
        return _split(ast, r, opt.arg or range_end(r), AxisType.UPCAST)
    if opt.op is OptOps.UNROLL:
        if not is_reduce:
            raise CodegenError(f"{opt}: UNROLL applies to reduce axes; use UPCAST for a loop axis")
        return _split(ast, r, opt.arg or range_end(r), AxisType.UNROLL)
    if opt.op is OptOps.LANES:
        if kind is not AxisType.REDUCE:
            raise CodegenError(f"{opt}: LANES splits a reduce axis")
        return _lanes(ast, r, opt.arg)
    if opt.op is OptOps.THREAD:
        if is_reduce:
            raise CodegenError(f"{opt}: THREAD splits a loop axis, not a reduce axis")
        return _thread(ast, r, opt.arg)
    if opt.op is OptOps.PADTO:
        return _padto(ast, r, opt.arg)
    if opt.op is OptOps.OVERLAP:
        return _overlap(ast, r, opt.arg)
    if opt.op is OptOps.SWAP:
        return _swap(ast, ranges, opt)
    if opt.op is OptOps.LOCAL:
        if is_reduce:
            raise CodegenError(f"{opt}: LOCAL splits a loop axis; use GROUP for a reduce axis")
        return _split(ast, r, opt.arg or range_end(r), AxisType.LOCAL)
    if opt.op in (OptOps.GROUP, OptOps.GROUPTOP):
        if not is_reduce:
            raise CodegenError(f"{opt}: GROUP splits a reduce axis; use LOCAL for a loop axis")
        if any(axis_type(x) in (AxisType.GROUP_REDUCE, AxisType.WARP) for x in ranges):
            raise CodegenError(f"{opt}: the kernel already has a grouped reduce axis or tensor cores")
        return _split(ast, r, opt.arg or range_end(r), AxisType.GROUP_REDUCE, top=opt.op is OptOps.GROUPTOP)
    raise CodegenError(f"unknown opt {opt}")


def apply_opts(ast: UOp, opts: list[Opt] | tuple[Opt, ...], tensor_cores: tuple[TensorCore, ...] = ()) -> UOp:
    """The kernel with `opts` applied in order (TC, which must come first, uses `tensor_cores`)."""
    for opt in opts:
        ast = apply_opt(ast, opt, tensor_cores)
    return ast


def stride(offset: UOp, r: UOp) -> int | None:
    """How much `offset` moves when the range `r` moves by one (None when that is not a constant)."""
    step = (replace_ranges(offset, {r: (r + 1, (r,))}) - offset).simplify()
    return int(step.arg) if step.op is Ops.CONST else None


def repeats_in_pairs(offset: UOp, r: UOp) -> bool:
    """Whether `offset` moves with the range `r` only through `r // 2` (the same at 2q and 2q + 1 for every q): a
    2x2 pooling's gradient, or a 2x upsampling, reads each element for two neighbouring outputs, so a vector of lanes
    along r reads half as many elements, each twice (see `renderer.cvector`)."""
    even = replace_ranges(offset, {r: (r * 2, (r,))}).simplify()
    return even is replace_ranges(offset, {r: (r * 2 + 1, (r,))}).simplify() and even is not offset.simplify()


def _contiguous_in(ast: UOp, r: UOp) -> bool:
    """True when the first store's index moves by exactly 1 as `r` does (so upcasting r gives vector stores)."""
    idx = kernel_stores(ast)[0].src[0]
    return idx.op is Ops.INDEX and len(idx.src) >= 2 and stride(idx.src[1], r) == 1


#: weight rows a matrix-vector kernel reads per pass over its accumulator row
MATVEC_ROWS = 4
#: vector lanes of an odd contiguous output axis padded to whole vectors (its last vector is partial: 8 lanes waste
#: less of it than AVX-512's 16)
PAD_LANES = (8, 4)
#: products per output up to which a reduction's register tile follows its stores (see heuristic_opts)
SHORT_REDUCE = 64
#: bytes of the other operand's rows a register tile of one-vector rows may read per column strip (see heuristic_opts)
TILE_ROWS_BYTES = 32 * 1024
#: reduce steps a matmul's register tile of two-vector rows takes per loop iteration (see heuristic_opts)
MATMUL_UNROLL = 8
#: a large float32 matmul's register tile on AVX-512: rows of vectors (AVX2: 2 vectors; see `_wide_tile_axis`)
WIDE_TILE_ROWS, WIDE_TILE_VECTORS = 6, 4
#: ... the fewest reduce steps it takes, and the most rows it may compute twice as a fraction of each core's rows (1024
#: rows on 6 cores: 171 each, 3 twice; 1024^3 as 6 parts on 2 AVX-512 cores, kernels alone, best of 15: 9.4 ms with
#: the 8-row tile, 9.0 with this one. 256 rows on 2 cores, 4 of 128 twice: 256x1024 @ 1024x1024 1.98 -> 1.94 ms)
WIDE_TILE_MIN_REDUCE, WIDE_TILE_WASTE = 256, 1 / 32
#: the most rows a matmul's register tile may compute twice, as a fraction of its row axis (see heuristic_opts)
OVERLAP_WASTE = 1 / 8
#: ... and the most columns of its output rows (see `_overlap_lanes`: 100 columns in tiles of 32 compute 28 twice)
OVERLAP_LANES_WASTE = 1 / 3
#: ... and of output rows of an odd number of whole vectors, tiled in pairs of vectors instead of one vector per row
#: (the tile's rows then share each loaded vector twice as often): an MLP's weight gradient 256x64 @ 64x784 on 2
#: AVX-512 cores, the kernel alone, medians of 200: 131-140 -> 109-111 us
ODD_VECTORS_WASTE = 1 / 8
#: iterations (of all the kernel's loops, reduce loops too) from which a kernel is split among the cores. The workers
#: of the CPU runtime spin between launches, so a split kernel costs a microsecond or two more to start: a small CNN's
#: pooling gradient (16x16x11x11, 31k iterations) went 83 -> 44 us on 2 cores, its second pooling forward and backward
#: (25.6k) 23 -> 13 and 26 -> 15 us, all its kernels 597 -> 518 us (DEBUG=2, minima of 20 steps); below 16k no kernel
#: of it or of an MLP step gained (1 << 16 before)
THREAD_MIN_WORK = 1 << 14
#: the most iterations of an axis the cores may compute twice when they do not divide it (see `_thread_opt`)
THREAD_WASTE = 1 / 32
#: loop steps a LANES reduction keeps at least
LANES_MIN_STEPS = 8


def _moves_with(offset: UOp, r: UOp) -> bool:
    """Whether `offset` moves with the range `r`: r is in it outside every reduction over r (a read at the index a
    reduction over r found, as an argmax's gathered value, is made once that loop is done)."""
    return offset.find_below(lambda u: u is r, gate=lambda u: not (u.op is Ops.REDUCE and r in u.src[1:])) is not None


def _moving_indexes(ast: UOp, r: UOp) -> list[UOp]:
    """The INDEX nodes of the buffer loads whose address moves with `r` (see `_moves_with`)."""
    return [n.src[0] for n in ast.toposort()
            if n.op is Ops.LOAD and n.src[0].op is Ops.INDEX and len(n.src[0].src) >= 2 and _moves_with(n.src[0].src[1], r)]


def _load_offsets(ast: UOp, r: UOp) -> list[UOp]:
    """The address offsets of the buffer loads that move with `r`."""
    return [idx.src[1] for idx in _moving_indexes(ast, r)]


def _wide_tile_vectors(vector_width: int) -> int:
    """Vectors per row of a wide tile: 4 with AVX-512's 32 registers (24 accumulators), 2 with AVX2's 16 (12)."""
    return WIDE_TILE_VECTORS if vector_width >= 16 else 2


def _wide_tile_axis(ast: UOp, ranges: list[UOp], sizes: dict[int, int], loops: list[int], reduces: list[int], inner: int,
                    n_cores: int, vector_width: int) -> int | None:
    """The row axis of a large float32 matmul that takes a register tile of 6 rows of 4 vectors on AVX-512 (of 2 on
    AVX2), or None.

    Per reduce step that tile loads 4 vectors and broadcasts 6 values for 24 FMAs (24 of the 32 registers hold
    accumulators); the 8 rows of 2 vectors of `heuristic_opts` load 10 for 16. 1024^3 float32 on 2 AVX-512 cores in a
    C harness: 6.7-7.0 ms against 7.1-7.5 (Intel), 6.52-6.57 against 6.76 (AMD Zen). On AVX2 (16 registers) 6 rows of 2
    vectors keep 12 accumulators where `heuristic_opts` keeps 4 rows (8): 1024^3 compiled for Haswell on the same Intel
    cores, 12.8-13.0 ms against 14.0-14.3 (85% of the AVX2 peak). 6 rows divide no power of two:
    each core's rows are tiled with the last tile overlapping the one before (`OVERLAP`), only where that computes at
    most `WIDE_TILE_WASTE` of them again. The rows are an axis the vector-loaded operand does not move along; one ADD
    reduction of at least `WIDE_TILE_MIN_REDUCE` steps into 4-byte accumulators, and no buffer both read and written."""
    reduce_nodes = [u for u in ast.toposort() if u.op is Ops.REDUCE]
    if vector_width < 8 or len(reduces) != 1 or reduces[0] not in sizes or sizes[reduces[0]] < WIDE_TILE_MIN_REDUCE:
        return None
    if len(reduce_nodes) != 1 or reduce_nodes[0].arg is not Ops.ADD or reduce_nodes[0].dtype.itemsize != 4:
        return None
    lanes = _wide_tile_vectors(vector_width) * vector_width
    # (or a row of two vectors that is a packed operand's strip, beside other strips: 999 or 1023 columns, split by
    # `uopir.codegen.packing`. A strip is half a tile row on AVX-512, whose rows are then pairs of strips, and a whole
    # row on AVX2: pack and kernel compiled for Haswell on 2 Intel cores, medians of 40, 999x512 @ 512x999 6.8-7.6 ->
    # 5.5 ms, 1000x784 @ 784x1000 10.6-11.1 -> 8.8-8.9 ms, 1023x1024 @ 1024x1023 16.1-16.3 -> 13.4-15.4 ms)
    per_row = lanes // sizes[inner] if sizes[inner] in (lanes, lanes // 2) else 0
    strips = _strip_axis(ast, ranges, loops, sizes, inner, None) if per_row else None
    if strips is not None:
        if sizes[strips] % per_row or sizes[strips] < 2 * per_row:
            return None
    elif sizes[inner] % lanes or sizes[inner] < 2 * lanes:
        return None
    if reads_what_it_writes(ast):
        return None
    vector_loaded = [off for off in _load_offsets(ast, ranges[inner]) if stride(off, ranges[inner]) == 1]
    cores = max(n_cores, 1)
    for i in reversed(loops):
        # (rows the cores do not divide are split with overlapping parts: 1024 rows on 6 cores, 171 each)
        per_core = -(-sizes[i] // cores)
        split = sizes[i] % cores == 0 or (thread_fits(sizes[i], cores) and thread_overlap_allowed(ast, ranges[i]))
        if i != inner and split and per_core >= 16 * WIDE_TILE_ROWS and _overlap_fits(per_core, WIDE_TILE_ROWS, WIDE_TILE_WASTE) \
                and all(stride(off, ranges[i]) == 0 for off in vector_loaded):
            return i
    return None


def _transpose_axis(ast: UOp, ranges: list[UOp], loops: list[int], sizes: dict[int, int], inner: int, amount: int) -> int | None:
    """The loop axis an elementwise kernel's vectors along its contiguous output axis `inner` (`amount` lanes) take as
    the second side of a square tile, or None: one that a load strided along `inner` reads contiguously (`x.T`, a
    permute). Without it such a load reads one element of each of `amount` cache lines per vector and moves on; the
    next vector's elements are in the same lines, long evicted (rows 4 KiB apart share a cache set). With the tile, the
    `amount` lines are read whole while they are cached: `x.T.contiguous()` of 1024x1024 float32 on 2 AVX-512 cores,
    the kernel alone, 4.2 ms -> 0.41-0.58 ms (clang-15, clang-19, GCC; PyTorch's whole op 1.1 ms)."""
    for off in _load_offsets(ast, ranges[inner]):
        if stride(off, ranges[inner]) in (0, 1, None):
            continue
        axis = next((i for i in reversed(loops) if i != inner and stride(off, ranges[i]) == 1), None)
        if axis is not None and axis in sizes and sizes[axis] % amount == 0:
            return axis
    return None


def _strip_axis(ast: UOp, ranges: list[UOp], loops: list[int], sizes: dict[int, int], inner: int | None, other: int | None) -> int | None:
    """The loop axis of a packed operand's column strips when the contiguous axis `inner` is a strip's lanes (an axis the
    strips do not divide, split by `operand_packs`): another loop axis the operand loaded as vectors along `inner`
    moves along and the output does not move along by a constant step (the last strip starts earlier), or None."""
    if inner is None:
        return None
    vector_loaded = [off for off in _load_offsets(ast, ranges[inner]) if stride(off, ranges[inner]) == 1]
    store = kernel_stores(ast)[0].src[0].src[1]
    return next((i for i in loops if i not in (inner, other) and sizes[i] > 1 and any(stride(off, ranges[i]) for off in vector_loaded)
                 and stride(store, ranges[i]) is None), None)


def _thread_opt(ast: UOp, ranges: list[UOp], loops: list[int], sizes: dict[int, int], n_cores: int, work: int) -> Opt | None:
    """THREAD on the outermost loop axis that divides evenly among the cores, when there is enough work to pay for them.
    Only an axis every store of the kernel runs under: each core runs the whole kernel with its part of that axis, so a
    store outside it (a kernel of two loops, one per output) would run on every core, each writing it again."""
    if n_cores <= 1 or work < THREAD_MIN_WORK:
        return None
    if len(ast.src) > 1:  # (one store runs under every loop)
        under = store_ranges(ast)
        loops = [i for i in loops if all(ranges[i] in nodes for nodes in under)]
    # every core: an axis they divide, else one split unevenly (parts overlapping: `_thread`) where that computes at most
    # THREAD_WASTE of it twice (1024 rows on 6 cores: 171 each, 2 rows twice), else the most cores an axis divides
    # (1024 rows on 6 cores ran on 4 of them, a third of the machine idle)
    if (axis := next((i for i in loops if sizes[i] % n_cores == 0), None)) is not None:
        return Opt(OptOps.THREAD, axis, n_cores)
    axis = next((i for i in loops if thread_fits(sizes[i], n_cores) and thread_overlap_allowed(ast, ranges[i])), None)
    if axis is not None:
        return Opt(OptOps.THREAD, axis, n_cores)
    threaded = next(((i, c) for i in loops for c in range(n_cores - 1, 1, -1) if sizes[i] % c == 0), None)
    return Opt(OptOps.THREAD, *threaded) if threaded is not None else None


def thread_fits(size: int, n_cores: int) -> bool:
    """Whether `size` iterations split among `n_cores` cores with overlapping parts (`_thread`) compute at most
    THREAD_WASTE of them twice (and each core gets at least one)."""
    return size >= n_cores and -(-size // n_cores) * n_cores - size <= size * THREAD_WASTE


def _lane_opts(ast: UOp, ranges: list[UOp], sizes: dict[int, int], loops: list[int], reduces: list[int], inner: int | None,
               n_cores: int, vector_width: int, work: int) -> list[Opt] | None:
    """Opts for a reduction whose operands are contiguous along the reduce axis but not along the output's contiguous
    axis (`x @ w.T` with both K-contiguous, `q @ k^T`, a sum over the last axis): vectorizing the output axis would
    gather one element per lane, so the reduce axis becomes vector lanes instead (LANES), with a register tile of
    outputs that share each loaded vector. None when the kernel is not such a reduction.

    A kernel of several reductions over axes of their own, one after another (an argmax: the row's maximum, then the
    first index holding it) takes lanes on each axis, where each qualifies alone: 1024 rows of 1024, 2 AVX-512 cores,
    the kernel alone 2.7 ms (32 rows as lanes, read 4 KiB apart) -> 0.19-0.20 ms."""
    reduce_nodes = [u for u in ast.toposort() if u.op is Ops.REDUCE]
    if not reduces or any(k not in sizes for k in reduces) or any(u.arg not in (Ops.ADD, Ops.MAX) for u in reduce_nodes):
        return None
    own = sorted(ranges.index(r) for u in reduce_nodes for r in u.src[1:] if r in ranges)
    if own != sorted(reduces) or len(reduce_nodes) != len(reduces):  # (each reduction over one axis of its own)
        return None
    # the widest lanes that leave the loop LANES_MIN_STEPS steps: combining the lanes after it is scalar work per
    # output, which a short loop does not pay for (q @ k^T with 64-wide heads: 8 lanes, 1.7x faster than 16)
    widths = (vector_width, vector_width // 2, vector_width // 4)
    opts: list[Opt] = []
    for k in reduces:
        lanes = next((n for n in widths if n >= 4 and sizes[k] % n == 0 and sizes[k] // n >= LANES_MIN_STEPS), None)
        along_k = [stride(off, ranges[k]) for off in _load_offsets(ast, ranges[k])]
        if lanes is None or not along_k or any(st != 1 for st in along_k):
            return None
        opts.append(Opt(OptOps.LANES, k, lanes))
    # only where the usual vectorization would gather: some operand is strided along the contiguous output axis
    if inner is not None and all(stride(off, ranges[inner]) in (0, 1) for off in _load_offsets(ast, ranges[inner])):
        return None
    sizes = dict(sizes)
    # a tile of outputs: each loaded lane vector of one operand serves a row of the other's (4x4 tiles are 16
    # accumulator vectors: half of AVX-512's registers; AVX2's 16 registers take 4x2)
    tile = [(i, 4 if n == 0 or vector_width >= 16 else 2) for n, i in enumerate(x for x in reversed(loops) if x in sizes)][:2]
    overlapped: set[int] = set()
    for n, (i, amount) in enumerate(tile):
        if sizes[i] % amount == 0 and sizes[i] > amount:
            opts.append(Opt(OptOps.UPCAST, i, amount))
            sizes[i] //= amount
        elif n == 0 and 1 < sizes[i] < amount:
            # a short innermost axis (the 3 query heads a grouped-query KV head serves) is tiled whole
            opts.append(Opt(OptOps.UPCAST, i, sizes[i]))
            sizes[i] = 1
        elif sizes[i] > amount and _overlap_fits(sizes[i], amount, OVERLAP_WASTE) and not reads_what_it_writes(ast):
            # an axis the tile does not divide (a prompt of 77 tokens, 250 outputs) is tiled too, the last tile
            # overlapping the one before: x @ w.T with 77x576 and 1536x576 1.16 -> 0.76 ms (AVX-512, 2 cores)
            opts.append(Opt(OptOps.OVERLAP, i, amount))
            sizes[i] = -(-sizes[i] // amount)
            overlapped.add(i)
    # cores split the axis of the larger operand, so each reads half of it and the other one whole: in a training
    # step each core then finds in its own cache the half of the weight its part of the optimizer step just wrote
    # (x @ w.T, 64x784 by 256x784 in an MLP step: 169 -> 144 us; alone, warm: 88 -> 71 us)
    by_bytes = sorted(loops, key=lambda i: -_operand_bytes(ast, ranges[i])) if len(tile) == 2 else loops
    # (an overlapped axis only when no other one splits)
    threaded = _thread_opt(ast, ranges, [i for i in by_bytes if i not in overlapped], sizes, n_cores, work) \
        or _thread_opt(ast, ranges, [i for i in by_bytes if i in overlapped], sizes, n_cores, work)
    if threaded is not None:
        opts.append(threaded)
    # loop order: every iteration of a loop reads again what the loops inside it read, so of the tile's two loops the
    # one moving through more operand bytes goes outside (x @ w.T with w the larger: w's rows outside, x's rows inside,
    # x stays in cache instead of w streaming from memory once per row of x: 1.3-1.5x on a 64x784 @ 784x256 step)
    if len(tile) == 2:
        inner_loop, outer_loop = (i for i, _ in tile)
        if outer_loop < inner_loop and _operand_bytes(ast, ranges[outer_loop]) < _operand_bytes(ast, ranges[inner_loop]):
            opts.append(Opt(OptOps.SWAP, outer_loop, inner_loop))
    return opts


def _row_opts(ast: UOp, ranges: list[UOp], sizes: dict[int, int], loops: list[int], reduces: list[int], n_cores: int,
              vector_width: int) -> list[Opt] | None:
    """Opts for a kernel with row reductions its elements read (softmax's max and sum beside its output, a norm's
    mean; the scheduler fuses them, see `uop_scheduler.schedule._row_fused`), which the linearizer computes once per row
    ahead of the loop over the row's elements: each reduce axis the loads read contiguously becomes vector lanes, the
    contiguous output axis vectors, and the rows are spread over the cores. A register tile of rows is not made (each
    row's reductions would be accumulators of the tile). None when no reduction leaves out a loop axis."""
    loop_ranges = {ranges[i] for i in loops}
    if not reduces or not any(u.op is Ops.REDUCE and not loop_ranges <= set(u.toposort()) for u in ast.toposort()):
        return None
    opts: list[Opt] = []
    for k in reduces:
        offsets = _load_offsets(ast, ranges[k])
        lanes = next((n for n in (vector_width, vector_width // 2, vector_width // 4) if n >= 4 and sizes[k] % n == 0), None)
        if lanes is not None and offsets and all(stride(off, ranges[k]) == 1 for off in offsets):
            opts.append(Opt(OptOps.LANES, k, lanes))
            sizes[k] //= lanes
    inner = next((i for i in reversed(loops) if _contiguous_in(ast, ranges[i])), None)
    if inner is not None and all(stride(off, ranges[inner]) in (0, 1) for off in _load_offsets(ast, ranges[inner])):
        if (amount := next((n for n in (vector_width, 4) if sizes[inner] % n == 0), None)) is not None:
            opts.append(Opt(OptOps.UPCAST, inner, amount))
            sizes[inner] //= amount
    # the work is a pass over each row per reduction and one for the output (not the product of all the axes: the
    # reductions do not run per element)
    work = math.prod(range_end(ranges[i]) for i in loops) * (1 + len(reduces))
    if (threaded := _thread_opt(ast, ranges, loops, sizes, n_cores, work)) is not None:
        opts.append(threaded)
    return opts


#: vectors a padded reduce axis may take (see _reduce_lanes): each is a step of the unrolled loop
PADDED_LANE_STEPS = 2


def _reduce_lanes(ast: UOp, ranges: list[UOp], sizes: dict[int, int], reduces: list[int], vector_width: int) -> tuple[int, int] | None:
    """(axis, lanes) for a reduction with no output axis to vectorize whose innermost reduce axis every load moving
    along it reads contiguously, and that is a whole number of vectors or more than half of one and at most
    PADDED_LANE_STEPS (padded), with LANES_MIN_STEPS vector steps per output or more; None otherwise (see
    heuristic_opts)."""
    k = reduces[-1]
    if k not in sizes or vector_width < 8 or sizes[k] <= vector_width // 2 or \
            (sizes[k] % vector_width and sizes[k] > PADDED_LANE_STEPS * vector_width):
        return None
    # the lanes are combined once per output, after every reduce loop: worth it only over LANES_MIN_STEPS vector steps
    # (a lone short reduce, 30 products per output, is left to the scalar tile)
    if math.prod(sizes.get(i, LANES_MIN_STEPS) for i in reduces if i != k) * -(-sizes[k] // vector_width) < LANES_MIN_STEPS:
        return None
    offsets = _load_offsets(ast, ranges[k])
    if not offsets or any(stride(off, ranges[k]) != 1 for off in offsets):
        return None
    return k, vector_width


def _operand_bytes(ast: UOp, r: UOp) -> int:
    """The bytes of the buffers whose loads move with the range `r` (0 for a buffer of unknown size)."""
    total = 0
    for idx in _moving_indexes(ast, r):
        ptr = idx.src[0].dtype
        if stride(idx.src[1], r) != 0 and getattr(ptr, "size", -1) > 0:
            total += ptr.size * ptr.base.itemsize
    return total


def _store_nests(ast: UOp, ranges: list[UOp], loops: list[int]) -> list[list[int]] | None:
    """The loop axes each store of the kernel runs under, when they are disjoint nests (a kernel of one loop nest per
    output, as a hand-written kernel updating several buffers is: stores of one nest share all its loops, stores of
    two nests share none). None for a kernel whose stores all run under every loop, or whose nests overlap."""
    nests = [[i for i in loops if ranges[i] in nodes] for nodes in store_ranges(ast)]
    if all(len(n) == len(loops) for n in nests):
        return None
    owner: dict[int, tuple[int, ...]] = {}
    for nest in nests:
        if not nest or any(owner.setdefault(i, tuple(nest)) != tuple(nest) for i in nest):
            return None
    return nests


def _nest_opts(ast: UOp, ranges: list[UOp], sizes: dict[int, int], nests: list[list[int]], n_cores: int, vector_width: int,
               work: int) -> list[Opt]:
    """Opts for a kernel of disjoint loop nests (see `_store_nests`): each nest vectorizes its stores' contiguous axis,
    and with enough work each nest splits its own outermost loop across the cores, so every store runs under exactly
    one split loop (a store under none would run on every core, each writing it again: then no nest is split)."""
    opts: list[Opt] = []
    sizes = dict(sizes)
    for store, nest in zip(ast.src, nests):
        idx = strip_end(store).src[0]
        inner = next((i for i in reversed(nest) if len(idx.src) >= 2 and stride(idx.src[1], ranges[i]) == 1), None)
        if inner is None or any(o.axis == inner for o in opts):
            continue
        amount = next((n for n in (vector_width, 4) if sizes[inner] % n == 0 and sizes[inner] > n), None)
        if amount is not None:
            opts.append(Opt(OptOps.UPCAST, inner, amount))
            sizes[inner] //= amount
    if n_cores <= 1 or work < THREAD_MIN_WORK:
        return opts
    threads: dict[tuple[int, ...], Opt] = {}
    for nest in nests:
        if tuple(nest) in threads:
            continue
        axis = next((i for i in nest if sizes[i] % n_cores == 0), None)
        if axis is None or ranges[axis].dtype != ranges[nests[0][0]].dtype:  # (one core_id for all)
            return opts
        threads[tuple(nest)] = Opt(OptOps.THREAD, axis, n_cores)
    return opts + list(threads.values())


def heuristic_opts(ast: UOp, n_cores: int = 1, vector_width: int = 8, l2_bytes: int = 1 << 20) -> list[Opt]:
    """Opts that make a kernel fast on a CPU: vectorize the contiguous output axis, register-tile matmul-like
    reductions, unroll short reduce loops, and spread the outermost loop axis across cores. `l2_bytes`: one core's
    second-level cache, which decides a matmul's loop order."""
    opts: list[Opt] = []
    ranges = kernel_ranges(ast)
    # a symbolic range (attention over the live rows of a KV cache) is never split, and its kernel gets no output-axis
    # vectors: its output axes are often merged ones (heads x group x head_dim) that other operands index with
    # divisions, which a vector block cannot take. Its constant axes still get cores and independent accumulators, and
    # a constant reduce axis along which the operands are contiguous (the head dimension of q @ k^T) gets LANES.
    sizes = {i: range_end(r) for i, r in enumerate(ranges) if r.src[0].op is Ops.CONST}
    symbolic = len(sizes) < len(ranges)
    loops = [i for i, r in enumerate(ranges) if axis_type(r) not in REDUCE_AXES and i in sizes]
    reduces = [i for i, r in enumerate(ranges) if axis_type(r) in REDUCE_AXES]
    work = math.prod(sizes.values()) * math.prod(int(r.src[0].vmax) for i, r in enumerate(ranges) if i not in sizes)
    if not symbolic and len(ast.src) > 1 and (nests := _store_nests(ast, ranges, loops)) is not None:
        return _nest_opts(ast, ranges, sizes, nests, n_cores, vector_width, work)
    if not symbolic and (row_opts := _row_opts(ast, ranges, sizes, loops, reduces, n_cores, vector_width)) is not None:
        return row_opts
    # the contiguous output axis gets a vector-sized upcast (two vectors per row of a register tile; one vector for
    # elementwise kernels, where a wider unroll measured slower)
    inner = None if symbolic else next((i for i in reversed(loops) if _contiguous_in(ast, ranges[i])), None)
    if (lane_opts := _lane_opts(ast, ranges, sizes, loops, reduces, inner, n_cores, vector_width, work)) is not None:
        return lane_opts
    wide = _wide_tile_axis(ast, ranges, sizes, loops, reduces, inner, n_cores, vector_width) if reduces and inner is not None else None
    overlapped: set[int] = set()  # axes tiled with an overlapping last tile (OVERLAP)
    if inner is not None and reduces and _overlap_lanes(ast, ranges, sizes, inner, 2 * vector_width):
        # a matmul's output row no vector divides (100, 77 or 200 columns) in tiles of two vectors, the last one
        # overlapping the one before: it had vectors of 4 lanes (or 8 padded ones) and no unrolled reduce loop, 2-5x
        # slower (AVX-512, 2 cores, the kernels alone: 1024x1024 @ 1024x100 2.5 -> 0.9 ms, 256x784 @ 784x200 2.8 -> 0.3 ms)
        opts.append(Opt(OptOps.OVERLAP, inner, 2 * vector_width))
        sizes[inner] = -(-sizes[inner] // (2 * vector_width))
        overlapped.add(inner)
    elif inner is not None:
        for amount in ((2 * vector_width, vector_width, 4) if reduces else (vector_width, 4)):
            # (a reduction's row of exactly one or two vectors is one tile too: 16 columns had 4-lane vectors)
            if sizes[inner] % amount == 0 and (sizes[inner] > amount or (reduces and amount >= vector_width)):
                opts.append(Opt(OptOps.UPCAST, inner, amount))
                sizes[inner] //= amount
                break
        else:
            # an odd contiguous axis (a 26- or 11-wide image row) is padded to whole vectors: the renderer writes its
            # gated accesses as vectors where every lane is inside the row and lane by lane in the last, partial one.
            # Only when every load moving along it is contiguous or reads pairs of lanes' element once (`repeats_in_pairs`,
            # which the renderer gathers: a small CNN's 2x2 pooling gradients over 26- and 11-wide rows) (else the block
            # stays scalar and the padding is waste) (and of 32- or 64-bit elements: the renderer keeps gated 16-bit
            # floats, which it converts, lane by lane).
            # An axis of more than half a vector and less than one is one padded vector: its gates are then constants,
            # which the compiler makes masked loads and stores (a small CNN's second convolution, 11-wide rows: 4
            # lanes 50 -> 16 lanes 25-29 us; its 10-class output rows 2.1 -> 1.0 us)
            # (Not with gathered loads: each lane of a gather is a load of its own, and 16 of them for 11 columns made a
            # small CNN's second pooling gradient slower than scalar code, 44 -> 66 us; 4-lane vectors)
            moving = [*_moving_indexes(ast, ranges[inner]), kernel_stores(ast)[0].src[0]]
            steps = [stride(idx.src[1], ranges[inner]) for idx in moving]
            gathered = [idx for idx, step in zip(moving, steps) if step not in (0, 1)]
            one_vector = vector_width // 2 < sizes[inner] < vector_width and not gathered
            lanes = vector_width if one_vector else min((n for n in PAD_LANES if n <= vector_width), key=lambda n: sizes[inner] // n + n)
            if vector_width >= 4 and (sizes[inner] > lanes or one_vector) and all(repeats_in_pairs(idx.src[1], ranges[inner]) for idx in gathered) \
                    and all(idx.src[0].dtype.base.itemsize >= 4 for idx in moving):
                opts += [Opt(OptOps.PADTO, inner, lanes), Opt(OptOps.UPCAST, inner, lanes)]
                sizes[inner] = -(-sizes[inner] // lanes)
    # matmul-like: a reduce plus a second loop axis -> a register tile of rows that share each loaded vector
    # (8 rows of 2 vectors are 16 accumulators: half of AVX-512's 32 registers; AVX2's 16 registers take 4 rows)
    rows = 8 if vector_width >= 16 else 4
    vectorized = bool(opts)  # the contiguous output axis got its vectors
    if vectorized and not reduces and (across := _transpose_axis(ast, ranges, loops, sizes, inner, opts[-1].arg)) is not None:
        opts.append(Opt(OptOps.UPCAST, across, opts[-1].arg))
        sizes[across] //= opts[-1].arg
    other = None
    if wide is not None:
        # AVX-512's 4 vectors per row are 2 runs of 2: a packed operand's strips are 2 vectors wide
        # (`packed_operand_bytes`), and a run of 4 would cross strips ((n / 32) * rows + n % 32: no vector load). The cores split the rows
        # first, so each overlaps its own last tile (no element is written by both)
        if (runs := _wide_tile_vectors(vector_width) // 2) > 1:
            # (a packed operand's strips of one run each, when the strips do not divide the columns: runs of strips)
            # (`_wide_tile_axis` chose the tile only where one of the two divides)
            axis = inner if sizes[inner] % runs == 0 else _strip_axis(ast, ranges, loops, sizes, inner, None)
            if axis is not None and sizes[axis] % runs == 0:
                opts.append(Opt(OptOps.UPCAST, axis, runs))
                sizes[axis] //= runs
        if (threaded := _thread_opt(ast, ranges, [wide], sizes, n_cores, work)) is not None:
            opts.append(threaded)
            sizes[wide] = -(-sizes[wide] // threaded.arg)
        opts.append(Opt(OptOps.OVERLAP, wide, WIDE_TILE_ROWS))
        sizes[wide] = -(-sizes[wide] // WIDE_TILE_ROWS)
        other = wide
    elif reduces and vectorized:
        # a row of one vector (the row is an odd number of vectors: 784 = 49 x 16) takes twice the rows, so the tile
        # keeps as many accumulators: 8 chains of FMAs do not hide the FMA latency on two ports. Only while the tile's
        # rows of the other operand stay in the first-level cache (all of them are read again for every column strip):
        # on AVX-512, 256x64 @ 64x784 (an MLP's weight gradient) 98 -> 88 us, 512x512 @ 512x784 2.77 -> 1.77 ms;
        # with 784-long rows (16 rows: 50 KiB) 64x784 @ 784x784 went 358 -> 387 us
        if opts[-1] == Opt(OptOps.UPCAST, inner, vector_width):  # one vector per row
            row_bytes = math.prod(sizes[i] for i in reduces if i in sizes) * max(
                (n.src[0].dtype.base.itemsize for n in ast.toposort() if n.op is Ops.LOAD), default=4)
            if 2 * rows * row_bytes <= TILE_ROWS_BYTES and any(i != inner and sizes[i] % (2 * rows) == 0 and sizes[i] > 2 * rows for i in loops):
                rows *= 2
        candidates = [i for i in reversed(loops) if i != inner and sizes[i] % rows == 0 and sizes[i] > rows]
        # rows that share each loaded vector: an axis the vector-loaded operands do not move along (a convolution's
        # output channels, not its output rows: the input row would be loaded again for every channel)
        vector_loaded = [off for off in _load_offsets(ast, ranges[inner]) if stride(off, ranges[inner]) == 1]
        other = next((i for i in candidates if all(stride(off, ranges[i]) == 0 for off in vector_loaded)), None)
        if other is not None:
            opts.append(Opt(OptOps.UPCAST, other, rows))
            sizes[other] //= rows
        elif not reads_what_it_writes(ast) and (other := next(
                (i for i in reversed(loops) if i != inner and sizes[i] > rows and _overlap_fits(sizes[i], rows, OVERLAP_WASTE)
                 and all(stride(off, ranges[i]) == 0 for off in vector_loaded)), None)) is not None:
            # rows no tile divides (a batch of 100, a prompt of 77 tokens) get the tile too, the last one overlapping
            # the one before (OVERLAP): without one, 100x1024 @ 1024x1024 ran at 28 GFLOP/s (AVX-512, 2 cores), with it
            # as fast as 104 rows. Only an axis the vector-loaded operands do not move along, and only while the rows
            # computed twice are at most OVERLAP_WASTE of it (10 rows in tiles of 8 would compute 16). Before an axis
            # they do move along (the column strips of a packed operand whose last strip overlaps: 999 x 999)
            opts.append(Opt(OptOps.OVERLAP, other, rows))
            sizes[other] = -(-sizes[other] // rows)
            overlapped.add(other)
        elif candidates:
            other = candidates[0]
            opts.append(Opt(OptOps.UPCAST, other, rows))
            sizes[other] //= rows
    # a reduce with no output axis to vectorize keeps a register tile of scalar accumulators instead: independent
    # chains rather than one serial chain of adds, each loaded value serving several of them. It starts with the
    # innermost short output axis, whole (a 3x3 filter's 3 taps in a row, in a convolution's gradients). A long reduce
    # (few outputs, each many products: a weight gradient) adds `rows` (or half) of another axis, whose loaded values
    # the taps share, up to 3 * rows accumulators; a short one (many outputs, each few products: the input gradient's
    # taps, reduced over 16 channels) is bound by its stores and adds the next short axes the stores are contiguous
    # along, up to 2 * rows, so the tile writes one run. Measured on a small CNN's gradient kernels (AVX-512, us):
    # weight gradients 459 -> 52 and 319 -> 136 (taps x rows; the 3x3 taps: 125, 372), input gradient 338 -> 68
    # (3x3 taps; taps x 8 rows: 148). Attention scores (no contiguous output axis, none short) keep `rows` of a long axis.
    # a reduce with no output vector whose innermost axis every operand reads contiguously (a convolution's weight
    # gradient, along its image rows) sums that axis in vector lanes, padded to whole vectors when it is not a multiple
    # (11- and 26-wide rows: the padded lanes' loads are gated, they read 0 and the products they make are 0). Its
    # accumulators are vectors then, so the tile below keeps at most 2 * rows of them (AVX-512, a small CNN's weight
    # gradients: 3 taps x 8 channels scalar 118 -> 3 x 4 vectors 48 us, 45 -> 19-24 us over 26-wide rows; 3 x 2 was 62)
    lanes_axis = _reduce_lanes(ast, ranges, sizes, reduces, vector_width) if reduces and not vectorized and not symbolic else None
    if lanes_axis is not None:
        k, lanes = lanes_axis
        steps = -(-sizes[k] // lanes)
        if sizes[k] % lanes:
            # padded: the loop over the vectors is unrolled, so each one's gates are constants the compiler folds (a
            # loop would test them lane by lane at run time)
            opts += [Opt(OptOps.PADTO, k, lanes), Opt(OptOps.LANES, k, lanes)] + ([Opt(OptOps.UNROLL, k, steps)] if steps > 1 else [])
            sizes[k] = 1
        else:
            opts.append(Opt(OptOps.LANES, k, lanes))
            sizes[k] = steps
    if reduces and not vectorized:
        first = next((i for i in reversed(loops) if 1 < sizes[i] <= rows), None)
        width = 1
        if first is not None:
            width, sizes[first] = sizes[first], 1
            opts.append(Opt(OptOps.UPCAST, first, width))
        if first is not None and first == inner and math.prod(sizes[i] for i in reduces if i in sizes) <= SHORT_REDUCE:
            store = kernel_stores(ast)[0].src[0].src[1]
            while (nxt := next((i for i in loops if sizes[i] > 1 and stride(store, ranges[i]) == width), None)) is not None \
                    and width * sizes[nxt] <= 2 * rows:
                opts.append(Opt(OptOps.UPCAST, nxt, sizes[nxt]))
                width, sizes[nxt] = width * sizes[nxt], 1
        else:
            # with vector accumulators, rows the first axis's loads do not move along: each load then serves a whole
            # row or column of the tile (a weight gradient's output channels beside its taps: the taps' input rows
            # and the channels' gradient rows, 3 + n loads for 3n products, not 2n + 1 for 2n)
            shared = _load_offsets(ast, ranges[first]) if lanes_axis is not None and first is not None else []
            order = sorted(reversed(loops), key=lambda i: any(stride(off, ranges[i]) != 0 for off in shared))
            for amount in (rows, rows // 2, rows // 4) if lanes_axis is not None else (rows, rows // 2):
                second = next((i for i in order if sizes[i] % amount == 0 and sizes[i] > amount), None)
                if second is not None and width * amount <= (2 * rows if lanes_axis is not None else 3 * rows):
                    opts.append(Opt(OptOps.UPCAST, second, amount))
                    sizes[second] //= amount
                    break
    # cores: split a loop axis (see `_thread_opt`) when there is enough work to pay for the threads; an axis of tiles
    # whose last one overlaps only when no other axis splits (a 999x999 matmul, both axes overlapped, ran on one core)
    threadable = [i for i in loops if i not in overlapped]
    threaded = None if any(o.op is OptOps.THREAD for o in opts) else (
        _thread_opt(ast, ranges, threadable, sizes, n_cores, work) or _thread_opt(ast, ranges, sorted(overlapped), sizes, n_cores, work))
    if threaded is not None:
        opts.append(threaded)
        sizes[threaded.axis] = -(-sizes[threaded.axis] // threaded.arg)
    # loop order of a matmul's tile loops: rows outside, column strips inside re-read the whole right operand for every
    # block of rows; when it does not fit the second-level cache that is a stream from the last level per row block,
    # so the column strips go outside and each strip (a few hundred KiB) stays in the L2 while the row blocks pass
    # (1024^3 float32 on an AVX-512 core: 9.2 -> 6.8 ms, 8-lane tiles 16.3 -> 9.8 ms; with the operand in the L2, as
    # at 512^3 or an MLP's 784x256 weight, the swapped order streamed the rows instead: up to 2x slower). "Fits" is
    # half the L2: the rows' tiles, the output and the other core's share of a shared cache need the rest (2 MiB L2,
    # 2 cores: 1024x512 @ 512x1024 4.1-4.3 -> 3.5 ms, 512x1024 @ 1024x512 2.2 -> 1.8 ms with the swap; 1 MiB, as 512^3,
    # keeps the order). The column strips: the contiguous axis, or when that is one tile, the axis of a packed operand's
    # strips (an axis the strips do not divide, split by `uopir.codegen.packing`)
    strips = inner if inner is not None and sizes[inner] > 1 else _strip_axis(ast, ranges, loops, sizes, inner, other)
    if reduces and strips is not None and other is not None and other < strips and sizes[strips] > 1 and sizes[other] > 1 \
            and _operand_bytes(ast, ranges[strips]) > l2_bytes // 2:
        opts.append(Opt(OptOps.SWAP, other, strips))
    # matrix-vector: with one output row, keep the whole row's accumulators (up to 16 KiB of them) so the reduce loop
    # runs outside and each step streams one contiguous weight row, instead of striding across rows per output tile
    # (with a register tile of rows, the tile's rows times the row's vectors stay within those 128 vectors: on AVX2, 4
    # tokens x 48 vectors x 4 weight rows made a 768-body unrolled nest, past what compiles in about half a second)
    tile_rows = math.prod(o.arg for o in opts if o.op is OptOps.UPCAST and o.axis != inner)
    if reduces and inner is not None and all(sizes[i] == 1 for i in loops if i != inner) and 1 < sizes[inner] and tile_rows * sizes[inner] <= 128:
        opts.append(Opt(OptOps.UPCAST, inner, sizes[inner]))
        # and several weight rows per pass over the accumulators: each accumulator vector is loaded and stored once
        # per MATVEC_ROWS products, and the loads run as that many parallel streams
        unroll = next((i for i in reduces if i in sizes and sizes[i] % MATVEC_ROWS == 0 and sizes[i] > MATVEC_ROWS), None)
        if unroll is not None:
            opts.append(Opt(OptOps.UNROLL, unroll, MATVEC_ROWS))
    # otherwise a register tile of two vectors per row steps its reduce loop MATMUL_UNROLL products at a time: fewer loop
    # branches and address updates between the FMAs, and loads the compiler can issue ahead (AVX-512, 2 cores:
    # 1024^3 6.36-7.05 -> 5.89-6.00 ms, 512^3 756-772 -> 707-722 us, 256^3 99-102 -> 93-95 us; a one-vector tile
    # of 16 rows went slower with it: 128x256 @ 256x784 143 -> 162 us)
    elif reduces and other is not None and inner is not None \
            and any(Opt(op, inner, 2 * vector_width) in opts for op in (OptOps.UPCAST, OptOps.OVERLAP)):
        k = next((i for i in reduces if i in sizes and sizes[i] % MATMUL_UNROLL == 0 and sizes[i] > MATMUL_UNROLL), None)
        if k is not None:
            opts.append(Opt(OptOps.UNROLL, k, MATMUL_UNROLL))
    return opts


def gpu_heuristic_opts(ast: UOp, local_size: int = 32, tensor_cores: tuple[TensorCore, ...] = ()) -> list[Opt]:
    """Opts for GPU kernels: a matmul with tensor-core dtypes runs on tensor cores (padded when its shape is not a
    multiple of the tile), each wave computing 2x2 output tiles where they divide evenly; a reduction feeding fewer
    outputs than a few waves is split across a work group; other reductions keep 4 rows of outputs per work-item."""
    ranges = kernel_ranges(ast)
    if any(r.src[0].op is not Ops.CONST for r in ranges):
        return []
    under = store_ranges(ast)
    if any(not all(r in nodes for nodes in under) for r in ranges if axis_type(r) not in REDUCE_AXES):
        return []  # loops of some stores only (one loop per output) stay loops: see gpudims.add_gpu_dims
    for mm in find_matmuls(ast, tensor_cores)[:1]:
        sizes = [range_end(r) for r in (mm.m, mm.n, mm.k)]
        if min(sizes) >= TILE:
            opts = [Opt(OptOps.TC, 0, 0 if all(size % TILE == 0 for size in sizes) else PAD_LEVEL)]
            # the tile axes keep the positions of m and n; 2x2 tiles per wave load each operand for two WMMAs (in the
            # emulator a 64x64x64 half matmul takes 0.43x the wave-instructions of one tile per wave)
            opts += [Opt(OptOps.UPCAST, ranges.index(r), 2) for r in (mm.n, mm.m) if math.ceil(range_end(r) / TILE) % 2 == 0]
            return opts
    loops = [i for i, r in enumerate(ranges) if axis_type(r) not in REDUCE_AXES]
    reduces = [i for i, r in enumerate(ranges) if axis_type(r) is AxisType.REDUCE]
    if not reduces:
        return []
    if math.prod(range_end(ranges[i]) for i in loops) <= 8 * local_size:
        for i in reversed(reduces):
            for group in (local_size, 16, 8):
                if range_end(ranges[i]) % group == 0 and range_end(ranges[i]) >= 4 * group:
                    return [Opt(OptOps.GROUP, i, group)]
        return []
    # enough outputs for every lane: the contiguous output axis stays across the lanes (coalesced), and each lane keeps
    # 4 rows of another output axis in registers, so every value it loads along that axis serves 4 outputs (in the
    # emulator a 64x64x64 float matmul takes 0.42x the wave-instructions of one output per lane)
    lanes = next((i for i in reversed(loops) if _contiguous_in(ast, ranges[i])), None)
    rows = next((i for i in reversed(loops) if i != lanes and range_end(ranges[i]) % 4 == 0 and range_end(ranges[i]) > 4), None)
    return [] if rows is None else [Opt(OptOps.UPCAST, rows, 4)]
